//! The marker ring: oldest-first order, the newest-first early exit of
//! the lookup, recycling by the head alone (markers of a simulated
//! device, told apart by their `Arc`).
use super::{MARKERS_KEEP, Marker, MarkerRing};
use crate::engine::timeline::marker::EventPool;
use std::sync::Arc;

/// `n` markers of a simulated device.
fn markers(n: usize) -> (crate::sim::Session, Vec<Arc<Marker>>) {
    let session = crate::sim::session(0x51).expect("session");
    let device = crate::Device::get(0).expect("device");
    let pool = EventPool::new(&device);
    let ms = (0..n).map(|_| Arc::new(pool.marker().expect("marker"))).collect();
    (session, ms)
}

/// Which of `ms` each kept marker is, oldest first, with its cover.
fn order(r: &MarkerRing, ms: &[Arc<Marker>]) -> Vec<(usize, u64)> {
    (0..r.len)
        .filter_map(|i| r.get(r.slot(i)))
        .map(|(m, c)| (ms.iter().position(|x| Arc::ptr_eq(x, m)).expect("a known marker"), c))
        .collect()
}

#[test]
fn the_earliest_covering_marker_is_found_and_none_past_the_newest() {
    let (_session, ms) = markers(3);
    let mut r = MarkerRing::default();
    assert_eq!(r.earliest_covering(1), None, "empty");
    for (i, m) in ms.iter().enumerate() {
        r.push(m.clone(), 10 * (i as u64 + 1));
    }
    let found = |t| r.earliest_covering(t).and_then(|k| r.get(k)).map(|(m, c)| (Arc::as_ptr(m), c));
    assert_eq!(found(5), Some((Arc::as_ptr(&ms[0]), 10)));
    assert_eq!(found(10), Some((Arc::as_ptr(&ms[0]), 10)), "a cover equal to the ticket covers it");
    assert_eq!(found(11), Some((Arc::as_ptr(&ms[1]), 20)));
    assert_eq!(found(30), Some((Arc::as_ptr(&ms[2]), 30)));
    assert_eq!(found(31), None, "newer than the newest marker");
    assert!(r.oldest_if_full().is_none(), "three of four slots");
}

#[test]
fn a_full_ring_drops_its_oldest_on_push_and_recycles_it_in_place() {
    let (_session, ms) = markers(13);
    let mut r = MarkerRing::default();
    for (i, m) in ms.iter().enumerate().take(MARKERS_KEEP) {
        r.push(m.clone(), 10 * (i as u64 + 1));
    }
    assert!(r.oldest_if_full().is_some_and(|m| Arc::ptr_eq(m, &ms[0])));
    r.push(ms[4].clone(), 50);
    assert_eq!(order(&r, &ms), [(1, 20), (2, 30), (3, 40), (4, 50)]);
    assert_eq!(Arc::strong_count(&ms[0]), 1, "the dropped marker is no longer kept");
    // Recycling: the oldest marker becomes the newest with the new cover.
    let k = r.recycle_oldest(60);
    assert!(r.get(k).is_some_and(|(m, c)| Arc::ptr_eq(m, &ms[1]) && c == 60));
    assert_eq!(order(&r, &ms), [(2, 30), (3, 40), (4, 50), (1, 60)]);
    assert_eq!(r.newest().map(|(_, c)| c), Some(60));
    assert_eq!(r.earliest_covering(41).and_then(|k| r.get(k)).map(|(_, c)| c), Some(50));
    r.drop_oldest();
    assert_eq!(order(&r, &ms), [(3, 40), (4, 50), (1, 60)]);
    assert!(r.oldest_if_full().is_none());
    // Around the ring more than once: still oldest first.
    for (i, m) in ms.iter().enumerate().skip(5) {
        r.push(m.clone(), 10 * (i as u64 + 1));
    }
    assert_eq!(order(&r, &ms), [(9, 100), (10, 110), (11, 120), (12, 130)]);
}
