//! The kernel contract and module images (issue 7, holes 1 and 2).
//!
//! Hole 1: a typed kernel is declared with `unsafe` (`Module::kernel`), the
//! kernels crate hands out no typed kernel (compile-fail cases in `tests/ui/`),
//! and every launch checks what the safe API can check before the driver sees
//! it: a `Len` argument against every view of the launch, each view's
//! address against its element type's alignment. Hole 2: `Module::load`
//! refuses images whose own sizes run past the slice, so the driver (which
//! takes no length) never reads past it; valid images still load.
//!
//! On the simulator each test also asserts that no refused launch reached the
//! driver (the session's call log) and that the race oracle saw nothing.

use bytemuck::{Pod, Zeroable};
use gpu_sync::{DeviceBuffer, Error, In, LaunchConfig, Len, Module, Out, Stream};
use sync_tests::ctx;

/// `bump_u32(unsigned* x, unsigned add, u64 n)` with its length as a `Len`.
type Bump<T> = (Out<T>, u32, Len);

/// How many `cuLaunchKernel` calls the session has seen (0 on a GPU).
fn launches(t: &sync_tests::Ctx) -> usize {
    t.session.as_ref().map_or(0, |s| s.calls().iter().filter(|&&c| c == "cuLaunchKernel").count())
}

fn elementwise(t: &sync_tests::Ctx) -> Module {
    Module::load(&t.device, kernels::ModuleId::Elementwise.fatbin()).expect("module")
}

#[test]
fn a_len_longer_than_any_view_is_refused_and_nothing_is_enqueued() {
    let t = ctx(70);
    let s = Stream::new(&t.device).expect("stream");
    let m = elementwise(&t);
    // SAFETY: bump_u32 (kernels/cu/elementwise.cu) reads and writes x[i]
    // (Out) for i < n only, n a `Len` that gpu-sync checks against the view;
    // it touches nothing else. Its loop indexes by x alone: race-free in the
    // 1-D launches this test makes (`bump` stays in this test).
    let bump = unsafe { m.kernel::<Bump<u32>>("bump_u32") }.expect("bump");
    let mut x = DeviceBuffer::<u32>::zeroed(&s, 16).expect("x");
    let before = launches(&t);
    // The old exploit: `bump_kernel()` took a plain u64 and wrote 1008
    // elements past this 16-element view.
    match bump.launch(&s, LaunchConfig::new(4, 256), (&mut x, 1u32, 1024u64)) {
        Err(Error::LaunchArgument { kernel, param, problem }) => {
            assert_eq!(kernel, "bump_u32");
            assert_eq!(param, 2, "the Len parameter");
            assert!(problem.contains("1024") && problem.contains("16 elements"), "{problem}");
            assert!(problem.contains("parameter 0"), "names the shortest view: {problem}");
        }
        other => panic!("expected LaunchArgument, got {other:?}"),
    }
    assert_eq!(launches(&t), before, "a refused launch reached the driver");
    // A view of part of the buffer is as long as the view, not the buffer.
    let mut head = x.slice_mut(..8).expect("head");
    assert!(matches!(
        bump.launch(&s, LaunchConfig::new(1, 16), (&mut head, 1u32, 9u64)),
        Err(Error::LaunchArgument { param: 2, .. })
    ));
    // Up to the view's length it runs, and touches exactly that.
    bump.launch(&s, LaunchConfig::new(1, 16), (&mut head, 5u32, 8u64)).expect("n = len");
    bump.launch(&s, LaunchConfig::new(1, 16), (&mut x, 1u32, 3u64)).expect("n < len");
    assert_eq!(launches(&t), before + 2 * usize::from(t.sim()));
    let got = s.to_vec(&x).expect("x");
    let want: Vec<u32> = (0..16)
        .map(|i| {
            if i < 3 {
                6
            } else if i < 8 {
                5
            } else {
                0
            }
        })
        .collect();
    assert_eq!(got, want);
    t.finish();
}

#[test]
fn a_len_is_checked_against_every_view_of_the_launch() {
    let t = ctx(71);
    let s = Stream::new(&t.device).expect("stream");
    let m = elementwise(&t);
    // SAFETY: add_f32 (kernels/cu/elementwise.cu) reads x[i], y[i] (In) and
    // stores out[i] (Out) for i < n only, n a checked `Len`; nothing else;
    // race-free in the 1-D launches of this test.
    let add = unsafe { m.kernel::<(In<f32>, In<f32>, Out<f32>, Len)>("add_f32") }.expect("add");
    let x = DeviceBuffer::from_slice(&s, &[1.0f32; 64]).expect("x");
    let y = DeviceBuffer::from_slice(&s, &[2.0f32; 32]).expect("y");
    let mut out = DeviceBuffer::<f32>::zeroed(&s, 64).expect("out");
    let before = launches(&t);
    match add.launch(&s, LaunchConfig::new(1, 64), (&x, &y, &mut out, 64u64)) {
        Err(Error::LaunchArgument { param: 3, problem, .. }) => {
            assert!(problem.contains("parameter 1, 32 elements"), "names y, the shortest: {problem}");
        }
        other => panic!("expected LaunchArgument on the Len, got {other:?}"),
    }
    assert_eq!(launches(&t), before);
    add.launch(&s, LaunchConfig::new(1, 64), (&x, &y, &mut out, 32u64)).expect("n = shortest");
    let got = s.to_vec(&out).expect("out");
    assert!(got[..32].iter().all(|&v| v == 3.0) && got[32..].iter().all(|&v| v == 0.0), "{got:?}");
    t.finish();
}

/// A plain-old-data element aligned beyond the 256 bytes device allocations
/// guarantee: views of it can start misaligned.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C, align(512))]
struct Block512([u32; 128]);

#[test]
fn a_misaligned_view_is_refused_before_the_driver() {
    let t = ctx(72);
    let s = Stream::new(&t.device).expect("stream");
    let m = elementwise(&t);
    // SAFETY: bump_u32 reads and writes x as `unsigned` (4-byte aligned) at
    // x[i] for i < n, n a `Len` at most the view's count of `Block512`s, each
    // holding 128 u32: every access stays inside the view, and needs 4 of the
    // 512 bytes of alignment checked. Nothing else; 1-D launches only.
    let bump = unsafe { m.kernel::<Bump<Block512>>("bump_u32") }.expect("bump");
    // Allocations are 256-byte aligned: collect them (256-byte spacers
    // between, for a pool allocator that packs) until one is not 512-aligned.
    let mut held = Vec::new();
    let mut found = None;
    for _ in 0..64 {
        let b = DeviceBuffer::<Block512>::zeroed(&s, 1).expect("block");
        if !b.as_raw().is_multiple_of(512) {
            found = Some(b);
            break;
        }
        held.push((b, DeviceBuffer::<u8>::zeroed(&s, 256).expect("spacer")));
    }
    let Some(mut bad) = found else {
        assert!(!t.sim(), "the simulator's 256-byte-aligned allocations were all 512-aligned");
        eprintln!("this driver's allocations were all 512-byte aligned; nothing to test");
        return;
    };
    let before = launches(&t);
    match bump.launch(&s, LaunchConfig::new(1, 32), (&mut bad, 1u32, 1u64)) {
        Err(Error::LaunchArgument { kernel, param, problem }) => {
            assert_eq!((kernel.as_str(), param), ("bump_u32", 0));
            assert!(problem.contains(&format!("{:#x}", bad.as_raw())), "names the address: {problem}");
            assert!(problem.contains("512 bytes"), "names the alignment: {problem}");
        }
        other => panic!("expected a misalignment error, got {other:?}"),
    }
    assert_eq!(launches(&t), before, "a misaligned launch reached the driver");
    // The Len counts elements of the view's own type: one Block512, not 128 u32.
    if let Some((good, _)) = held.first_mut() {
        assert!(matches!(
            bump.launch(&s, LaunchConfig::new(1, 32), (&mut *good, 1u32, 2u64)),
            Err(Error::LaunchArgument { param: 2, .. })
        ));
        bump.launch(&s, LaunchConfig::new(1, 32), (&mut *good, 7u32, 1u64)).expect("aligned launch");
        let back = s.to_vec(good).expect("read back");
        assert_eq!(back[0].0[0], 7);
        assert!(back[0].0[1..].iter().all(|&w| w == 0));
    }
    t.finish();
}

/// The first cubin in `fatbin` for `arch` (`major * 10 + minor`), or the
/// first of any arch when `arch` is `None`: (offset, length).
fn cubin_in(fatbin: &[u8], arch: Option<u32>) -> Option<(usize, usize)> {
    let word = |at: usize| u32::from_le_bytes(fatbin[at..at + 4].try_into().unwrap_or_default());
    let size = |at: usize| u64::from_le_bytes(fatbin[at..at + 8].try_into().unwrap_or_default()) as usize;
    let end = usize::from(u16::from_le_bytes([fatbin[6], fatbin[7]])) + size(8);
    let mut at = usize::from(u16::from_le_bytes([fatbin[6], fatbin[7]]));
    while at + 32 <= end {
        let (kind, header, payload) =
            (u16::from_le_bytes([fatbin[at], fatbin[at + 1]]), word(at + 4), size(at + 8));
        let body = at + header as usize;
        if kind == 2 && arch.is_none_or(|a| word(at + 28) == a) && fatbin[body..].starts_with(b"\x7fELF") {
            return Some((body, payload));
        }
        at = body + payload;
    }
    None
}

/// An 8-aligned copy of `bytes` (module images are read with 8-byte loads).
fn aligned(bytes: &[u8]) -> Vec<u64> {
    let mut words = vec![0u64; bytes.len().div_ceil(8)];
    bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
    words
}

#[test]
fn module_load_refuses_images_the_driver_would_read_past() {
    let t = ctx(73);
    let invalid = |image: &[u8], what: &str| match Module::load(&t.device, image) {
        Err(Error::InvalidArgument(msg)) => msg,
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    };
    // PTX without a NUL inside the slice: the driver would read on.
    let msg = invalid(b"//", "PTX without NUL");
    assert!(msg.contains("not a fatbin, cubin or NUL-terminated PTX image"), "{msg}");
    invalid(b".version 8.0\n.target sm_80", "PTX without NUL");
    invalid(b"", "empty");
    invalid(b"\0", "empty PTX");

    // A fatbin cut short, or whose header claims more than the slice holds.
    let fatbin = kernels::ModuleId::Elementwise.fatbin();
    for cut in [4, 15, 16, 100, fatbin.len() / 2, fatbin.len() - 1] {
        let msg = invalid(&fatbin[..cut], "truncated fatbin");
        assert!(msg.contains("fatbin"), "{msg}");
    }
    let mut longer = aligned(fatbin);
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut longer);
    let fat = u64::from_le_bytes(bytes[8..16].try_into().unwrap_or_default());
    bytes[8..16].copy_from_slice(&(fat + 4096).to_le_bytes());
    invalid(&bytes[..fatbin.len()], "fatbin declaring 4 KiB more");

    // An ELF cubin cut short: its section header table is at its end.
    let arch = if t.sim() {
        None
    } else {
        let (major, minor) = t.device.compute_capability().expect("cc");
        Some((major * 10 + minor) as u32)
    };
    let (at, len) = cubin_in(fatbin, arch).expect("elementwise.fatbin holds a cubin for this GPU");
    let cubin = aligned(&fatbin[at..at + len]);
    let cubin: &[u8] = &bytemuck::cast_slice(&cubin)[..len];
    for cut in [3, 63, 64, len / 2, len - 1] {
        let msg = invalid(&cubin[..cut], "truncated cubin");
        assert!(msg.contains("ELF") || msg.contains("PTX"), "{msg}");
    }

    // Valid images load: the fatbin, its cubin alone, PTX as bytes and as a
    // CStr; an unaligned copy of the fatbin too (copied to aligned memory).
    Module::load(&t.device, fatbin).expect("fatbin");
    let from_cubin = Module::load(&t.device, cubin).expect("cubin");
    // SAFETY: add_f32's contract as in the tests above (n a checked `Len`),
    // launched here only to show the cubin's kernel works; 1-D.
    let add = unsafe { from_cubin.kernel::<(In<f32>, In<f32>, Out<f32>, Len)>("add_f32") }.expect("add");
    let s = Stream::new(&t.device).expect("stream");
    let x = DeviceBuffer::from_slice(&s, &[1.5f32; 8]).expect("x");
    let mut out = DeviceBuffer::<f32>::zeroed(&s, 8).expect("out");
    add.launch(&s, LaunchConfig::new(1, 8), (&x, &x, &mut out, 8u64)).expect("launch");
    assert_eq!(s.to_vec(&out).expect("out"), vec![3.0f32; 8]);
    let ptx = ".version 8.0\n.target sm_80\n.address_size 64\n\0";
    Module::load(&t.device, ptx.as_bytes()).expect("PTX bytes");
    Module::load_ptx(&t.device, c".version 8.0\n.target sm_80\n.address_size 64\n").expect("PTX CStr");
    let mut shifted = vec![0u8; fatbin.len() + 1];
    shifted[1..].copy_from_slice(fatbin);
    Module::load(&t.device, &shifted[1..]).expect("an unaligned fatbin");
    t.finish();
}
