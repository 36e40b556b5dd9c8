#!/usr/bin/env python3
"""The false-verdict rate and the power of `gpu-bench compare` (issue 26)
over every pair of `gpu-bench timer` reports made on one GPU in one device
call (device-call.sh's `aa` stage writes LOGS/timer-dD-I/results.json).

    python3 docs/results/scripts/compare-aa-all.py GPU_BENCH LOGS [LOGS ...]

Pairs are formed within one device of one call (old = the earlier report),
never across devices or calls. Each pair is counted once:
  A/A      a pair with any verdict (exit 1) is a false report, however many
           rows it has; exit 2 or more is an error.
  planted  the new report with one row's samples x 1.10 (the rows with more
           than one sample taken in turn); caught when that row is SLOWER.
Pairs share reports (n reports give n(n-1)/2 pairs), so they are not
independent; the disjoint pairs (0,1), (2,3), ... are counted apart too.
Targets: A/A <= 5 % of pairs, planted >= 95 %, over >= 100 pairs.

Reads and compares JSON only: it loads no CUDA and no NCCL. The multicast
switches are set all the same, as in every script here:
NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
"""

import os

os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"
import glob
import itertools
import json
import re
import subprocess
import sys
import tempfile


def key_of(rec):
    if not rec["params"]:
        return rec["name"]
    return rec["name"] + "{" + ",".join(f"{k}={v}" for k, v in rec["params"].items()) + "}"


def compare(gb, old, new):
    p = subprocess.run([gb, "compare", old, new, "--format", "json"], capture_output=True, text=True)
    return p.returncode, p.stdout


def main():
    gb, dirs = sys.argv[1], sys.argv[2:]
    groups = {}
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "timer-d*-*/results.json"))):
            m = re.search(r"timer-d(\d+)-(\d+)/", path)
            groups.setdefault((d, int(m.group(1))), []).append((int(m.group(2)), path))
    pairs = []
    for (d, dev), runs in sorted(groups.items()):
        runs = [p for _, p in sorted(runs)]
        for i, j in itertools.combinations(range(len(runs)), 2):
            pairs.append((f"{os.path.basename(os.path.normpath(d))} d{dev} {i}-{j}", runs[i], runs[j], i % 2 == 0 and j == i + 1))
    false_all = false_disjoint = caught = errors = disjoint = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n, (name, old, new, is_disjoint) in enumerate(pairs):
            rc, _ = compare(gb, old, new)
            disjoint += is_disjoint
            if rc == 1:
                false_all += 1
                false_disjoint += is_disjoint
                print(f"A/A verdict: {name}")
            elif rc != 0:
                errors += 1
                print(f"error (exit {rc}): {name}")
            r = json.load(open(new))
            rows = [(i, j) for i, rec in enumerate(r["records"]) for j, m in enumerate(rec["modes"]) if len(m["samples"]) > 1]
            i, j = rows[n % len(rows)]
            m = r["records"][i]["modes"][j]
            m["samples"] = [x * 1.10 for x in m["samples"]]
            planted = os.path.join(tmp, f"planted-{n}.json")
            json.dump(r, open(planted, "w"))
            _, out = compare(gb, old, planted)
            key, mode = key_of(r["records"][i]), m["mode"]
            got = any(c["key"] == key and c["what"] == mode and c["verdict"] == "slower" for c in json.loads(out)["comparisons"])
            caught += got
            if not got:
                print(f"planted +10% missed: {name} {key} {mode}")
    total = len(pairs)
    print(f"pairs: {total} ({disjoint} disjoint) from {sum(len(v) for v in groups.values())} reports on {len(groups)} (call, device) groups")
    print(f"A/A: {false_all}/{total} pairs with a verdict ({100 * false_all / max(total, 1):.1f} %); disjoint pairs {false_disjoint}/{disjoint}")
    print(f"planted +10%: caught {caught}/{total} ({100 * caught / max(total, 1):.1f} %); errors (exit 2+): {errors}")


if __name__ == "__main__":
    main()
