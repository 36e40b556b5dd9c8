//! The NVLink links between two GPUs, from NVML (`libnvidia-ml.so.1`,
//! loaded at run time like libcuda; the CUDA driver does not say): for each
//! GPU, each active link's remote PCI address, matched against the other
//! GPUs' (each device found by its PCI bus id, so NVML's order does not
//! matter).
//!
//! Unsafe code: calls into NVML through function pointers from libloading.
#![allow(unsafe_code)]

use gpu_sync::Device;
use serde::{Deserialize, Serialize};
use std::ffi::{CString, c_char, c_int, c_uint, c_void};

/// The link between two GPUs, as each [`PairResult`](super::PairResult)
/// carries it ([`P2pReport`](super::P2pReport)'s example runs the pairs).
///
/// ```
/// use gpu_bench::p2p::Link;
/// assert_eq!(Link::NvLink { links: 18 }.to_string(), "NV18"); // as nvidia-smi topo -m
/// assert_eq!(Link::None.to_string(), "no NVLink");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Link {
    /// NVML could not be asked (not installed, the simulator, an error).
    Unknown,
    /// No NVLink between the two (PCIe, if peer access works at all).
    None,
    /// This many NVLink links joining the two directly.
    NvLink {
        /// Active links whose far end is the other GPU.
        links: u32,
    },
    /// Active NVLink links that end at a switch, not at a GPU (NVSwitch
    /// systems: every GPU pair shares them).
    NvSwitch {
        /// Active links of the source GPU that end at a switch.
        links: u32,
    },
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Link::Unknown => write!(f, "link unknown"),
            Link::None => write!(f, "no NVLink"),
            Link::NvLink { links } => write!(f, "NV{links}"),
            Link::NvSwitch { links } => write!(f, "NVSwitch ({links} links)"),
        }
    }
}

/// NVML's `nvmlPciInfo_t` (v2 and later).
#[repr(C)]
struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [c_char; 32],
}

/// `NVML_NVLINK_MAX_LINKS` as of NVML 12 (Hopper's 18).
const MAX_LINKS: c_uint = 18;

/// A PCI address: (domain, bus, device).
type Pci = (u32, u32, u32);

/// Each device's links: `(ordinal, its PCI address, per active link the
/// remote's PCI address)`.
pub(super) struct Links {
    gpus: Vec<(i32, Pci, Vec<Pci>)>,
}

impl Links {
    /// The link from `a` to `b`.
    pub(super) fn between(&self, a: i32, b: i32) -> Link {
        let (Some(ga), Some(gb)) = (self.gpus.iter().find(|g| g.0 == a), self.gpus.iter().find(|g| g.0 == b))
        else {
            return Link::Unknown;
        };
        let direct = ga.2.iter().filter(|r| **r == gb.1).count() as u32;
        let to_switch = ga.2.iter().filter(|r| !self.gpus.iter().any(|g| g.1 == **r)).count() as u32;
        match (direct, to_switch) {
            (0, 0) => Link::None,
            (0, s) => Link::NvSwitch { links: s },
            (d, _) => Link::NvLink { links: d },
        }
    }
}

/// Parses a PCI bus id (`0000:28:00.0` or NVML's `00000000:28:00.0`).
fn parse_bus_id(s: &str) -> Option<Pci> {
    let mut it = s.trim().split([':', '.']);
    let domain = u32::from_str_radix(it.next()?, 16).ok()?;
    let bus = u32::from_str_radix(it.next()?, 16).ok()?;
    let device = u32::from_str_radix(it.next()?, 16).ok()?;
    Some((domain, bus, device))
}

/// Asks NVML for every device's links.
///
/// # Errors
/// Why NVML could not tell (not loadable, a call failed, the simulator).
pub(super) fn links(devices: &[Device]) -> Result<Links, String> {
    if gpu_sync::cuda_sys::installed().is_some_and(|d| d.origin() == "cuda-sim") {
        return Err("the simulator has no NVML".into());
    }
    let drv = gpu_sync::cuda_sys::installed().ok_or("no CUDA driver in use")?;
    // SAFETY: loading NVML runs its initializers, which have no
    // preconditions; the library stays loaded while `lib` lives (this call).
    let lib = unsafe { libloading::Library::new("libnvidia-ml.so.1") }.map_err(|e| format!("NVML: {e}"))?;
    type Init = unsafe extern "C" fn() -> c_int;
    type ByBus = unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> c_int;
    type State = unsafe extern "C" fn(*mut c_void, c_uint, *mut c_int) -> c_int;
    type Remote = unsafe extern "C" fn(*mut c_void, c_uint, *mut PciInfo) -> c_int;
    // SAFETY: each symbol is NVML's function of that name, with the C
    // signature declared above (nvml.h).
    let (init, by_bus, state, remote) = unsafe {
        (
            lib.get::<Init>(b"nvmlInit_v2\0").map_err(|e| format!("NVML: {e}"))?,
            lib.get::<ByBus>(b"nvmlDeviceGetHandleByPciBusId_v2\0").map_err(|e| format!("NVML: {e}"))?,
            lib.get::<State>(b"nvmlDeviceGetNvLinkState\0").map_err(|e| format!("NVML: {e}"))?,
            lib.get::<Remote>(b"nvmlDeviceGetNvLinkRemotePciInfo_v2\0").map_err(|e| format!("NVML: {e}"))?,
        )
    };
    // SAFETY: nvmlInit_v2 takes no arguments; calling it again is counted.
    let rc = unsafe { init() };
    if rc != 0 {
        return Err(format!("nvmlInit_v2 returned {rc}"));
    }
    let mut gpus = Vec::new();
    for dev in devices {
        let bus_id = gpu_sync::cuda_sys::result::device::get_pci_bus_id(drv, dev.as_raw())
            .map_err(|e| format!("cuDeviceGetPCIBusId: {e}"))?;
        let pci = parse_bus_id(&bus_id).ok_or_else(|| format!("unreadable PCI bus id {bus_id}"))?;
        let c = CString::new(bus_id.clone()).map_err(|e| e.to_string())?;
        let mut h: *mut c_void = std::ptr::null_mut();
        // SAFETY: a NUL-terminated bus id and a valid output slot.
        let rc = unsafe { by_bus(c.as_ptr(), &mut h) };
        if rc != 0 {
            return Err(format!("nvmlDeviceGetHandleByPciBusId_v2({bus_id}) returned {rc}"));
        }
        let mut remotes = Vec::new();
        for link in 0..MAX_LINKS {
            let mut active: c_int = 0;
            // SAFETY: a handle from NVML, a link index, a valid output slot;
            // an index past the device's links is an error code.
            if unsafe { state(h, link, &mut active) } != 0 || active != 1 {
                continue;
            }
            // SAFETY: as above; `PciInfo` is nvmlPciInfo_t's layout, zeroed.
            let mut info: PciInfo = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            if unsafe { remote(h, link, &mut info) } == 0 {
                remotes.push((info.domain, info.bus, info.device));
            }
        }
        gpus.push((dev.ordinal(), pci, remotes));
    }
    Ok(Links { gpus })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_counted_between_gpus_and_to_switches() {
        assert_eq!(parse_bus_id("00000000:28:00.0"), Some((0, 0x28, 0)));
        assert_eq!(parse_bus_id("0000:a8:01.0"), Some((0, 0xa8, 1)));
        let (g0, g1, sw) = ((0, 0x18, 0), (0, 0x2a, 0), (0, 0x99, 0));
        let l = Links {
            gpus: vec![(0, g0, vec![g1, g1, g1]), (1, g1, vec![g0, g0, g0]), (2, (0, 0x3a, 0), vec![sw, sw])],
        };
        assert_eq!(l.between(0, 1), Link::NvLink { links: 3 });
        assert_eq!(l.between(2, 0), Link::NvSwitch { links: 2 });
        assert_eq!(l.between(0, 2), Link::None);
        assert_eq!(l.between(0, 7), Link::Unknown);
        assert_eq!(Link::NvLink { links: 18 }.to_string(), "NV18");
    }
}
