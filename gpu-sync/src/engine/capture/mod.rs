//! Work that cannot happen now: graph captures and host functions.
//!
//! - [`capture_gate`]: the submission lock of a capture, which orders every
//!   captured driver call before the end of the capture (model-checked with
//!   loom);
//! - [`thread`]: whether the calling thread is capturing, the one place that
//!   answers it, and the frees that fall due meanwhile;
//! - [`host_fn`]: host functions, during which gpu-sync makes no driver call
//!   and takes no lock;
//! - [`deferred`]: the one queue of work put off by either, each item tagged
//!   with when it may run.
//!
//! This layer sits just above the driver door (`ffi`): it knows nothing of
//! devices, streams or buffers.
//!
//! Unsafe code, for this folder: `host_fn::launch` hands the driver a
//! callback and a boxed closure, and the callback takes the box back.
#![allow(unsafe_code)]

pub(in crate::engine) mod capture_gate;
pub(in crate::engine) mod deferred;
pub(in crate::engine) mod host_fn;
pub(in crate::engine) mod thread;
