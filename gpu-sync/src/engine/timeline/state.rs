//! A stream's state in its device's book: its last ticket, its kept
//! markers, the device-side waits it already made, its capture.

use super::marker::Marker;
use super::ring::MarkerRing;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The state of a stream, kept in its device's book.
#[derive(Default)]
pub(in crate::engine) struct StreamState {
    /// Ticket of the last operation submitted on this stream (0: none yet).
    pub(in crate::engine) last_ticket: u64,
    /// The newest markers and the tickets they cover (at most
    /// [`MARKERS_KEEP`]): a wait takes the earliest that covers its point,
    /// so it never waits for work queued after that point when an exact
    /// marker exists (a prefetcher's upload *i* while upload *i + 1* is
    /// queued behind it, for example). A ring: nothing moves when the
    /// oldest is recycled as the newest.
    pub(in crate::engine::timeline) markers: MarkerRing,
    /// Device-side waits already made: for stream id, every ticket up to this
    /// one is ordered before any later work here.
    pub(in crate::engine::timeline) known: Vec<(u64, u64)>,
    /// The graph capture this stream takes part in.
    pub(in crate::engine) capture: Option<Arc<crate::engine::flavor::captured::CaptureState>>,
}

const KNOWN_KEEP: usize = 32;

impl StreamState {
    /// The index of stream `stream`'s entry among the waits made here.
    #[inline(always)]
    pub(in crate::engine::timeline) fn known_entry(&self, stream: u64) -> Option<usize> {
        self.known.iter().position(|(s, _)| *s == stream)
    }

    #[inline(always)]
    pub(in crate::engine) fn known_for(&self, stream: u64) -> u64 {
        self.known.iter().find(|(s, _)| *s == stream).map_or(0, |(_, t)| *t)
    }

    /// The slot of the earliest kept marker covering `ticket`.
    #[inline(always)]
    pub(in crate::engine::timeline) fn marker_for(&self, ticket: u64) -> Option<usize> {
        self.markers.earliest_covering(ticket)
    }

    /// Whether the newest marker covers everything submitted so far.
    pub(in crate::engine::timeline) fn tail_marked(&self) -> bool {
        self.markers.newest().is_some_and(|(_, c)| c >= self.last_ticket)
    }

    /// The oldest marker, if the ring is full and nothing but it holds that
    /// marker (no host wait, proof or pending device wait uses it): its
    /// event can then be recorded again in place.
    ///
    /// A count of one is proof enough, read without a read-modify-write:
    /// kept markers are cloned only under the book lock (held here), nothing
    /// makes a `Weak` of one, and other holders only drop theirs; the fence
    /// orders their last use (a wait on the event) before the re-record.
    #[inline(always)]
    pub(in crate::engine::timeline) fn oldest_recyclable(&self) -> Option<&Arc<Marker>> {
        let m = self.markers.oldest_if_full().filter(|m| Arc::strong_count(m) == 1)?;
        std::sync::atomic::fence(Ordering::Acquire);
        Some(m)
    }

    /// Notes a device-side wait made here for every ticket up to `ticket`
    /// of stream `stream`.
    pub(in crate::engine) fn set_known(&mut self, stream: u64, ticket: u64) {
        if let Some(e) = self.known.iter_mut().find(|(s, _)| *s == stream) {
            e.1 = e.1.max(ticket);
        } else {
            if self.known.len() >= KNOWN_KEEP {
                self.known.remove(0);
            }
            self.known.push((stream, ticket));
        }
    }
}
