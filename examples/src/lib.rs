//! Runnable examples of the gpu-sync crates, each a program under
//! `examples/examples/` (`cargo run -p gpu-sync-examples --example NAME`):
//!
//! - `hello_gpu` — device → stream → buffers → a kernel → download → print;
//!   the README's quick start is this file.
//! - `vector_add_own_kernel` — your own kernel, from a PTX file built outside
//!   the workspace, loaded with `Module::load`, with its CPU version
//!   registered on the simulator.
//! - `pinned_overlap` — two streams with pinned staging buffers overlapping
//!   copies and kernels, with no event code.
//! - `wait_scopes` — `Pending` values, the proofs host waits return, `redeem`.
//!
//! Every example calls [`gpu_sync::select_driver`] first: on a machine with
//! a GPU it runs there; without one (or with `GPU_SYNC_DRIVER=sim`) it runs
//! on the simulator `cuda-sim`. `tests/examples.rs` runs each example's
//! `main` on the simulator in CI.
//!
//! The README's code blocks are compiled and run here too:
#![doc = include_str!("../../README.md")]

/// The guide `docs/guide/testing-without-a-gpu.md`: its code blocks run as
/// doctests, so the guide's example is a test in CI.
#[doc = include_str!("../../docs/guide/testing-without-a-gpu.md")]
pub mod guide_testing_without_a_gpu {}
