//! Memory: device buffers and their views ([`buffer`]), pinned host buffers
//! ([`pinned`]), copies and fills between them ([`copy`]), the per-device
//! memory ledger ([`ledger`]), peer access between devices ([`peer`]) and
//! the prefetcher built on the public API
//! ([`prefetch`]).
//!
//! This layer sits on streams, the tracker and devices: every operation here
//! is a tracked submission on a [`crate::Stream`].
//!
//! Unsafe code, for this folder: driver frees, copies and fills take raw
//! device and host pointers, and pinned buffers hand out slices of host
//! memory the driver allocated. Each `unsafe` block argues its call.
#![allow(unsafe_code)]

pub(crate) mod buffer;
pub(crate) mod copy;
pub(crate) mod ledger;
pub(crate) mod peer;
pub(crate) mod pinned;
pub(crate) mod prefetch;
pub(crate) mod staging;
