//! The flavors of a submission, chosen by the facade (`engine::submit`)
//! from the operation, never by its caller:
//!
//! - [`eager`]: one device — the stream's book, locked once, holds the
//!   stream's state and every tracker (the hot path);
//! - [`across`]: several devices — every book involved, in ordinal order;
//! - [`group`]: one operation over several streams (of one device or
//!   several), whose one call enqueues on all of them: every book involved,
//!   a ticket per stream drawn after the call;
//! - [`group_captured`]: the same while every one of its streams captures
//!   (an NCCL group on each rank's capturing stream): every capture's gate
//!   held, the call joins them all;
//! - [`blocking`]: a driver call that blocks the host (a pageable copy),
//!   made on the idle stream holding no book across the driver call;
//! - [`captured`]: inside a graph capture, the same rules over the
//!   capture's own sequence numbers, orderings becoming graph edges; the
//!   capture gate (`capture::capture_gate`) chooses it atomically with the
//!   end of a capture.
//!
//! No book lock is held while a driver call waits for other work: host
//! waits run unlocked, and the blocking flavor first waits, unlocked, until
//! its stream and every use it depends on are complete.

pub(in crate::engine) mod across;
pub(in crate::engine) mod blocking;
pub(in crate::engine) mod captured;
pub(in crate::engine) mod eager;
pub(in crate::engine) mod group;
pub(in crate::engine) mod group_captured;
