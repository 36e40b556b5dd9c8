//! The public simulator API (`gpu_sync::sim`, feature `sim`) as a
//! downstream crate uses it: closure-registered kernels compute through
//! typed slices, their read and write sets (derived from the signature) are
//! what the race oracle checks, a panic fails the launch, and the driver
//! choice refuses to switch drivers mid-process. Simulator only: on a GPU
//! these tests return at once.

use gpu_sync::sim::{self, RaceKind};
use gpu_sync::{
    Backend, Device, DeviceBuffer, DriverChoice, Error, In, LaunchConfig, Module, Out, Stream,
    select_driver_with,
};
use sync_tests::raw::Raw;
use sync_tests::{ctx, on_sim};

type Axpy = (In<f32>, Out<f32>, f32, u64);

fn register_axpy() {
    sim::register::<Axpy>("h5_axpy", |(x, y, a, n)| {
        for i in 0..n as usize {
            y[i] += a * x[i];
        }
    });
}

fn axpy(device: &Device) -> gpu_sync::Kernel<Axpy> {
    let module = Module::load(device, sim::PTX_STUB).expect("module");
    // SAFETY: the registered `h5_axpy` reads `x` and writes `y` below `n`
    // only, and each launch in this file passes `n` ≤ both lengths.
    let k = unsafe { module.kernel::<Axpy>("h5_axpy") };
    k.expect("kernel")
}

#[test]
fn a_closure_kernel_computes_through_typed_slices() {
    if !on_sim() {
        return;
    }
    register_axpy();
    let t = ctx(11);
    let stream = Stream::new(&t.device).unwrap();
    let k = axpy(&t.device);
    let x: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let xs = DeviceBuffer::from_slice(&stream, &x).unwrap();
    let mut ys = DeviceBuffer::from_slice(&stream, &vec![1.0f32; 100]).unwrap();
    // Only the first 60 elements: the rest must stay as they were.
    k.launch(&stream, LaunchConfig::for_elements(60, 128), (&xs, &mut ys, 2.0f32, 60u64)).unwrap();
    let got = stream.to_vec(&ys).unwrap();
    let want: Vec<f32> = (0..100).map(|i| if i < 60 { 1.0 + 2.0 * i as f32 } else { 1.0 }).collect();
    assert_eq!(got, want);
    // A sub-slice view: the closure's slice starts at the view.
    let mut tail = ys.slice_mut(90..).unwrap();
    k.launch(&stream, LaunchConfig::for_elements(10, 128), (&xs, &mut tail, 1.0f32, 10u64)).unwrap();
    let got = stream.to_vec(&ys).unwrap();
    assert_eq!(got[90..], (0..10).map(|i| 1.0 + i as f32).collect::<Vec<_>>()[..]);
    t.finish();
}

#[test]
fn the_signature_decides_the_parameter_sizes() {
    if !on_sim() {
        return;
    }
    register_axpy();
    let t = ctx(12);
    let module = Module::load(&t.device, sim::PTX_STUB).unwrap();
    // SAFETY: never launched; only the signature check is exercised.
    let wrong = unsafe { module.kernel::<(In<f32>, Out<f32>, f64, u64)>("h5_axpy") };
    assert!(matches!(wrong, Err(Error::KernelSignature { .. })), "{wrong:?}");
    t.finish();
}

/// A write through `Out` and a read through `In` are what the oracle sees:
/// a raw memset on another stream, with no wait, races with each.
#[test]
fn the_oracle_sees_the_derived_read_and_write_sets() {
    if !on_sim() {
        return;
    }
    let _one_at_a_time = sync_tests::exclusive();
    register_axpy();
    for (target_out, waited) in [(false, false), (true, false), (false, true), (true, true)] {
        let t = ctx(13);
        t.device.make_current().unwrap();
        let raw = Raw::new();
        let stream = Stream::new(&t.device).unwrap();
        let k = axpy(&t.device);
        let xs = DeviceBuffer::from_slice(&stream, &[1.0f32; 64]).unwrap();
        let mut ys = DeviceBuffer::from_slice(&stream, &[0.0f32; 64]).unwrap();
        stream.synchronize().unwrap();
        k.launch(&stream, LaunchConfig::for_elements(64, 64), (&xs, &mut ys, 1.0f32, 64u64)).unwrap();
        let other = raw.stream();
        if waited {
            let e = raw.event();
            raw.record(e, stream.as_raw());
            raw.wait(other, e);
            raw.destroy_event(e);
        }
        let target = if target_out { ys.as_raw() } else { xs.as_raw() };
        raw.memset(target, 7, 64, other);
        raw.sync(other);
        stream.synchronize().unwrap();
        let races = t.session.as_ref().map(|s| s.races()).unwrap_or_default();
        if waited {
            assert!(races.is_empty(), "ordered by an event, yet: {races:?}");
        } else {
            assert!(
                races.iter().any(|r| r.kind == RaceKind::DataRace && r.to_string().contains("h5_axpy")),
                "memset of {} unordered with the kernel was not flagged: {races:?}",
                if target_out { "the Out buffer" } else { "the In buffer" }
            );
        }
        raw.sync(other);
        raw.destroy_stream(other);
    }
}

#[test]
fn a_panicking_closure_fails_the_launch() {
    if !on_sim() {
        return;
    }
    sim::register::<(Out<u32>, u64)>("h5_index_past_end", |(out, n)| {
        out[n as usize] = 1; // n = the length: one past the end
    });
    let t = ctx(14);
    let stream = Stream::new(&t.device).unwrap();
    let module = Module::load(&t.device, sim::PTX_STUB).unwrap();
    // SAFETY: the CPU version panics before touching memory out of range
    // (slices are bounds-checked); there is no device code.
    let k = unsafe { module.kernel::<(Out<u32>, u64)>("h5_index_past_end") }.unwrap();
    let mut buf = DeviceBuffer::<u32>::zeroed(&stream, 256).unwrap();
    let n = 256u64 * 4; // bytes, not elements: the bug the closure trips on
    k.launch(&stream, LaunchConfig::new(1, 1), (&mut buf, n)).unwrap();
    let err = stream.synchronize().unwrap_err();
    assert_eq!(err.cu_error().map(|e| e.0), Some(cuda_sys::CUresult::CUDA_ERROR_LAUNCH_FAILED), "{err}");
}

#[test]
fn the_driver_choice_keeps_the_driver_in_use() {
    if !on_sim() {
        return;
    }
    assert_eq!(Backend::current(), Some(Backend::Sim));
    assert_eq!(select_driver_with(DriverChoice::Auto).unwrap(), Backend::Sim);
    assert_eq!(select_driver_with(DriverChoice::Sim).unwrap(), Backend::Sim);
    let err = select_driver_with(DriverChoice::Cuda).unwrap_err();
    assert!(matches!(err, Error::DriverSelection(ref m) if m.contains("Sim")), "{err}");
    assert!(sim::install().is_ok(), "installing twice is harmless");
    assert!(matches!("gpu".parse::<DriverChoice>(), Err(Error::DriverSelection(_))));
    assert_eq!("".parse::<DriverChoice>().unwrap(), DriverChoice::Auto);
    assert_eq!(" cuda".parse::<DriverChoice>().unwrap(), DriverChoice::Cuda);
}
