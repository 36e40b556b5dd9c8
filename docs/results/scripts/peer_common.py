"""What every peer script here shares, imported before torch, CuPy or NCCL
load: NVLink multicast off, and (for the torchrun scripts) this process's
GPU and NCCL process group.

NVLink multicast stays off in every process on the shared hosts, even one
that never calls NCCL (../shared/GPU.md, "Several GPUs"); torchrun's
children inherit it, and a process started another way gets it here, on
import, before NCCL loads. As a shell would set it: NCCL_NVLS_ENABLE=0
TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1.
"""

import os

MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
os.environ.update(MULTICAST_OFF)


def init_distributed(high_priority_stream=False):
    """Under torchrun: selects this process's GPU (LOCAL_RANK) and joins the
    NCCL process group bound to it (its NCCL streams at the device's
    greatest priority when `high_priority_stream`:
    `ProcessGroupNCCL.Options.is_high_priority_stream`). Returns (device,
    rank, world size)."""
    import torch
    import torch.distributed as dist

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    if high_priority_stream:
        opts = dist.ProcessGroupNCCL.Options()
        opts.is_high_priority_stream = True
        dist.init_process_group("nccl", device_id=dev, pg_options=opts)
    else:
        dist.init_process_group("nccl", device_id=dev)
    return dev, dist.get_rank(), dist.get_world_size()
