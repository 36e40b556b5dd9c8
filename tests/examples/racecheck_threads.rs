//! A reproducer for compute-sanitizer racecheck's "Internal Sanitizer Error:
//! Detected a failure to track a kernel launch", seen now and then in
//! `gpu_api::streams_and_buffers_are_shared_across_threads` when the whole
//! `gpu_api` binary runs under racecheck (never when that test runs alone,
//! never without the sanitizer).
//!
//! Each round does what that test does, after what the earlier tests of the
//! binary do to the process (modules loaded and unloaded, a host function
//! that panics):
//! 1. load the four kernel modules, upload an input of 2^14 floats;
//! 2. (`HOSTFN=1`) run a host function that panics and catches its panic;
//! 3. four threads, each with its own stream (threads 1 and 3 use one
//!    shared stream instead), allocate an output, launch `scale_f32`, copy
//!    the output back and check it;
//! 4. free everything and unload the modules.
//!
//! `MODE=raw` makes every step with cuda-sys's per-call layer only (no
//! gpu-sync, no tracking); `MODE=gpu-sync` through gpu-sync and the
//! `kernels` wrappers. With `LIKE=1`, raw mode makes the driver calls
//! gpu-sync makes for the same work: outputs from the stream-ordered pool
//! (`cuMemAllocAsync`/`cuMemFreeAsync`), an event recorded after the upload
//! that every thread's stream waits for, and an event recorded after each
//! launch. If racecheck reports the internal error in raw mode too, the
//! error is the tool's, not gpu-sync's.
//!
//! ```text
//! cargo build --release -p sync-tests --example racecheck_threads
//! MODE=raw ROUNDS=20 compute-sanitizer --tool racecheck target/release/examples/racecheck_threads
//! ```
#![allow(unsafe_code)]

use cuda_sys::result::{context, device, event, init, launch, memory, module, primary_ctx, stream};
use cuda_sys::{BorrowedContext, Driver};
use gpu_sync::{DeviceBuffer, Stream};
use std::ffi::c_void;
use std::process::ExitCode;

/// Elements per buffer, as in the test.
const N: usize = 1 << 14;
/// Threads per round, as in the test.
const THREADS: usize = 4;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn env_usize(name: &str, default: usize) -> Result<usize, Error> {
    match std::env::var(name) {
        Ok(v) => v.parse().map_err(|e| format!("{name}={v}: {e}").into()),
        Err(_) => Ok(default),
    }
}

/// What each thread's output must hold: input `i` times `thread + 1`.
fn check(thread: usize, got: &[f32]) -> Result<(), Error> {
    let a = (thread + 1) as f32;
    match got.iter().enumerate().find(|&(i, &v)| v != i as f32 * a) {
        None => Ok(()),
        Some((i, v)) => Err(format!("thread {thread}: element {i} is {v}, not {}", i as f32 * a).into()),
    }
}

/// The host function of step 2: panics, and catches it, as gpu-sync's
/// trampoline does. Safe to call with any argument (it reads none).
extern "C" fn panicking_host_fn(_: *mut c_void) {
    let _ = std::panic::catch_unwind(|| panic!("deliberate panic in a host function (raw)"));
}

fn raw_round(
    drv: &'static Driver,
    ctx: BorrowedContext<'static>,
    hostfn: bool,
    like: bool,
) -> Result<(), Error> {
    context::set_current(drv, Some(ctx))?;
    let mut modules = Vec::new();
    for m in [
        kernels::ModuleId::Stream,
        kernels::ModuleId::Spin,
        kernels::ModuleId::Pattern,
        kernels::ModuleId::Elementwise,
    ] {
        // SAFETY: a committed fatbin, complete, alive for the program.
        modules.push(unsafe { module::load_data(drv, m.fatbin().as_ptr().cast()) }?);
    }
    let scale = module::get_function(modules[3].as_borrowed(), c"scale_f32")?;
    let main = stream::create_with_priority(drv, 0x1, 0)?;
    let input: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let bytes = N * size_of::<f32>();
    let d_in = memory::alloc(drv, bytes)?;
    // SAFETY: `input` is readable for `bytes` and outlives the copy (the
    // stream is synchronized next); `d_in` is a fresh allocation of `bytes`.
    unsafe { memory::memcpy_htod_async(d_in, input.as_ptr().cast(), bytes, &main) }?;
    if hostfn {
        // SAFETY: the function ignores its argument, makes no CUDA call and
        // contains its panic.
        unsafe { stream::launch_host_func(&main, Some(panicking_host_fn), std::ptr::null_mut()) }?;
    }
    let uploaded = event::create(drv, 0x2)?;
    event::record(&uploaded, &main)?;
    if !like {
        stream::synchronize(&main)?;
    }
    let shared = stream::create_with_priority(drv, 0x1, 0)?;
    let results: Vec<Result<(), Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (shared, uploaded) = (shared.as_borrowed(), uploaded.as_borrowed());
                scope.spawn(move || -> Result<(), Error> {
                    context::set_current(drv, Some(ctx))?;
                    let own = stream::create_with_priority(drv, 0x1, 0)?;
                    let s = if t % 2 == 0 { own.as_borrowed() } else { shared };
                    let d_out = if like {
                        stream::wait_event(s, uploaded, 0)?;
                        memory::alloc_async(bytes, s)?
                    } else {
                        memory::alloc(drv, bytes)?
                    };
                    let mut a = (t + 1) as f32;
                    let mut n = N as u64;
                    let (mut pin, mut pout) = (d_in, d_out);
                    let mut params: [*mut c_void; 4] = [
                        (&raw mut pin).cast(),
                        (&raw mut pout).cast(),
                        (&raw mut a).cast(),
                        (&raw mut n).cast(),
                    ];
                    let blocks = N.div_ceil(256) as u32;
                    // SAFETY: `scale_f32(const float*, float*, float, u64)`
                    // with both buffers of N floats; the input was written
                    // before the threads started (synchronized), the output
                    // is this thread's own.
                    unsafe { launch::launch_kernel(scale, [blocks, 1, 1], [256, 1, 1], 0, s, &mut params) }?;
                    let launched = event::create(drv, 0x2)?;
                    if like {
                        event::record(&launched, s)?;
                    }
                    let mut out = vec![0f32; N];
                    // SAFETY: `out` is writable for `bytes`, untouched until
                    // the stream is synchronized; the copy follows the launch
                    // in stream order.
                    unsafe { memory::memcpy_dtoh_async(out.as_mut_ptr().cast(), d_out, bytes, s) }?;
                    stream::synchronize(s)?;
                    if like {
                        // SAFETY: a stream-ordered free, after the launch
                        // and the copy that used `d_out` on this stream.
                        unsafe { memory::free_async(d_out, s) }?;
                    } else {
                        // SAFETY: the launch and the copy that used `d_out`
                        // are complete (synchronized).
                        unsafe { memory::free(drv, d_out) }?;
                    }
                    event::destroy(launched)?;
                    stream::destroy(own)?;
                    check(t, &out)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into()))).collect()
    });
    results.into_iter().collect::<Result<Vec<()>, Error>>()?;
    stream::synchronize(&shared)?;
    stream::destroy(shared)?;
    stream::synchronize(&main)?;
    event::destroy(uploaded)?;
    // SAFETY: every use of `d_in` is complete (each thread synchronized).
    unsafe { memory::free(drv, d_in) }?;
    stream::destroy(main)?;
    for m in modules {
        module::unload(m)?;
    }
    Ok(())
}

fn gpu_sync_round(
    dev: &gpu_sync::Device,
    kept: Option<&kernels::Kernels>,
    hostfn: bool,
    serial: bool,
) -> Result<(), Error> {
    let loaded;
    let k = match kept {
        Some(k) => k,
        None => {
            loaded = kernels::Kernels::load(dev)?;
            &loaded
        }
    };
    let s = Stream::new(dev)?;
    let input = DeviceBuffer::from_slice(&s, &(0..N).map(|i| i as f32).collect::<Vec<_>>())?;
    if hostfn {
        s.launch_host_fn(|| panic!("deliberate panic in a host function (gpu-sync)"))?;
    }
    s.synchronize()?;
    let shared = Stream::new(dev)?;
    let results: Vec<Result<(), Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (input, shared) = (&input, &shared);
                let h = scope.spawn(move || -> Result<(), Error> {
                    let own = Stream::new(input.device())?;
                    let stream = if t % 2 == 0 { &own } else { shared };
                    let mut out = DeviceBuffer::<f32>::alloc(stream, N)?;
                    k.scale(stream, input, &mut out, (t + 1) as f32)?;
                    check(t, &stream.to_vec(&out)?)
                });
                if serial {
                    while !h.is_finished() {
                        std::thread::yield_now();
                    }
                }
                h
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into()))).collect()
    });
    results.into_iter().collect::<Result<Vec<()>, Error>>()?;
    Ok(())
}

fn run() -> Result<(), Error> {
    // gpu-sync's warnings and errors on stderr (a retry loop logs what it
    // retries); `RUST_LOG` overrides the level.
    env_logger::Builder::new().filter_level(log::LevelFilter::Warn).parse_default_env().init();
    let mode = std::env::var("MODE").unwrap_or_else(|_| "raw".to_owned());
    let rounds = env_usize("ROUNDS", 20)?;
    let hostfn = env_usize("HOSTFN", 1)? != 0;
    let like = env_usize("LIKE", 0)? != 0;
    match mode.as_str() {
        "raw" => {
            let drv = cuda_sys::driver()?;
            init::init(drv, 0)?;
            let dev = device::get(drv, 0)?;
            let ctx = primary_ctx::retain(drv, dev)?;
            for _ in 0..rounds {
                raw_round(drv, ctx, hostfn, like)?;
            }
        }
        "gpu-sync" => {
            let dev = gpu_sync::Device::get(0)?;
            let kept = if env_usize("KEEP", 0)? != 0 { Some(kernels::Kernels::load(&dev)?) } else { None };
            let serial = env_usize("SERIAL", 0)? != 0;
            for _ in 0..rounds {
                gpu_sync_round(&dev, kept.as_ref(), hostfn, serial)?;
            }
        }
        other => return Err(format!("MODE={other}: expected raw or gpu-sync").into()),
    }
    println!(
        "{mode}: {rounds} rounds of {THREADS} threads passed (host function: {hostfn}, like gpu-sync: {like})"
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("racecheck_threads: {e}");
            ExitCode::FAILURE
        }
    }
}
