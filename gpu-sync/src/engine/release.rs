//! Owned driver handles released the gpu-sync way.
//!
//! cuda-sys's [`Owned`] handles destroy themselves when dropped
//! (destroy-or-log, written once there). gpu-sync adds two rules before that
//! drop: the handle's device context is made current first, and inside a
//! host function nothing reaches the driver, so the release is handed to
//! the deferred-work queue (see `host_fn`). [`Held`] is that wrapper, used
//! for every stream, event, module, graph and graph exec gpu-sync owns.

// Unsafe code: `Held` moves its handle out in `Drop` and `close`
// (`ManuallyDrop::take`), once each.
#![allow(unsafe_code)]

use crate::device::Device;
use crate::error::Result;
use cuda_sys::Owned;
use cuda_sys::handle::Destroy;
use std::mem::ManuallyDrop;

/// An owned driver handle of `device`, released with the device's context
/// current (deferred inside host functions).
pub(crate) struct Held<K: Destroy> {
    handle: ManuallyDrop<Owned<K>>,
    device: Device,
}

impl<K: Destroy> Held<K> {
    /// Takes ownership of `handle`, a handle made in `device`'s context.
    #[inline]
    pub(crate) fn new(device: &Device, handle: Owned<K>) -> Self {
        Held { handle: ManuallyDrop::new(handle), device: device.clone() }
    }

    /// The handle.
    #[inline(always)]
    pub(crate) fn get(&self) -> &Owned<K> {
        &self.handle
    }

    /// Gives the handle up without destroying it (a leak the caller decided
    /// on: memory a device may still use).
    pub(crate) fn leak(self) {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so its handle is taken exactly
        // once, here; the device handle in it is leaked with it.
        let handle = unsafe { ManuallyDrop::take(&mut this.handle) };
        let _leaked = handle.into_raw();
    }

    /// Destroys the handle now (`call`, the kind's destroy entry point), reporting the driver's error (the handle is
    /// then leaked) instead of logging it.
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function (nothing is
    /// destroyed then: the release is deferred as by `Drop`); the context's
    /// bind error; the destroy call's error.
    pub(crate) fn close(self, call: &'static str) -> Result<()> {
        if crate::engine::capture::host_fn::active() {
            drop(self);
            return Err(crate::engine::capture::host_fn::not_permitted(call));
        }
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so its handle is taken exactly
        // once, here, and its device read out exactly once below.
        let handle = unsafe { ManuallyDrop::take(&mut this.handle) };
        // SAFETY: as above; `this.device` is not used again.
        let device = unsafe { std::ptr::read(&this.device) };
        if let Err(e) = device.inner.bind() {
            let _leaked = handle.into_raw();
            return Err(e);
        }
        crate::ffi::call(call, || handle.destroy())
    }
}

impl<K: Destroy> Drop for Held<K> {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and the handle is not used after it.
        let handle = unsafe { ManuallyDrop::take(&mut self.handle) };
        release_later(&self.device, handle);
    }
}

/// Releases `handle` of `device` now, or later on an ordinary thread when
/// called inside a host function.
pub(in crate::engine) fn release_later<K: Destroy>(device: &Device, handle: Owned<K>) {
    let device = device.clone();
    crate::engine::capture::host_fn::now_or_deferred(move || release(&device, handle));
}

/// Binds `device`'s context and drops `handle` (cuda-sys's destroy-or-log);
/// leaks it, logging, when the context cannot be made current.
fn release<K: Destroy>(device: &Device, handle: Owned<K>) {
    match device.inner.bind() {
        Ok(()) => drop(handle),
        Err(e) => {
            log::warn!("leaking a CUDA {}: {e}", K::WHAT);
            let _leaked = handle.into_raw();
        }
    }
}
