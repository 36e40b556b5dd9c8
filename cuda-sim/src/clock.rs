//! Vector clocks for the race oracle.
//!
//! An actor is a stream or a session's host thread, named by a global `u64`
//! id. A clock maps actors to the last tick of theirs it has seen; absent
//! actors are at 0. Clocks are small, kept as a sorted vector: one entry
//! per live actor the owner synchronized with, plus a "retired streams"
//! entry per session and a "drained streams" entry per session and device
//! that stand for what their holder saw of destroyed streams (see
//! `crate::retire`), so a clock does not grow with the number of streams
//! that ever existed.

/// A vector clock: sorted `(actor, tick)` pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct VClock(Vec<(u64, u64)>);

impl VClock {
    /// The tick of `actor` this clock has seen (0 if none).
    pub(crate) fn get(&self, actor: u64) -> u64 {
        match self.0.binary_search_by_key(&actor, |&(a, _)| a) {
            Ok(i) => self.0.get(i).map_or(0, |&(_, t)| t),
            Err(_) => 0,
        }
    }

    /// Advances `actor`'s own entry by one and returns the new tick.
    pub(crate) fn tick(&mut self, actor: u64) -> u64 {
        match self.0.binary_search_by_key(&actor, |&(a, _)| a) {
            Ok(i) => match self.0.get_mut(i) {
                Some(e) => {
                    e.1 += 1;
                    e.1
                }
                None => 0,
            },
            Err(i) => {
                self.0.insert(i, (actor, 1));
                1
            }
        }
    }

    /// Number of explicit entries (actors this clock has seen).
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The explicit entries, sorted by actor.
    pub(crate) fn entries(&self) -> &[(u64, u64)] {
        &self.0
    }

    /// Raises `actor`'s entry to at least `tick`.
    pub(crate) fn raise(&mut self, actor: u64, tick: u64) {
        match self.0.binary_search_by_key(&actor, |&(a, _)| a) {
            Ok(i) => {
                if let Some(e) = self.0.get_mut(i) {
                    e.1 = e.1.max(tick);
                }
            }
            Err(i) => self.0.insert(i, (actor, tick)),
        }
    }

    /// Drops `actor`'s explicit entry (its knowledge must be kept by
    /// another entry: see `crate::retire`).
    pub(crate) fn remove(&mut self, actor: u64) {
        if let Ok(i) = self.0.binary_search_by_key(&actor, |&(a, _)| a) {
            self.0.remove(i);
        }
    }

    /// Keeps the entries for which `keep(clock, actor, tick)` holds.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&VClock, u64, u64) -> bool) {
        // Most calls drop nothing: allocate only when one goes.
        let Some(first) = self.0.iter().position(|&(a, t)| !keep(self, a, t)) else { return };
        let mut kept: Vec<(u64, u64)> = self.0[..first].to_vec();
        kept.extend(self.0[first + 1..].iter().copied().filter(|&(a, t)| keep(self, a, t)));
        self.0 = kept;
    }

    /// Pointwise maximum with `other` (a wait on, or a sync with, `other`).
    pub(crate) fn merge(&mut self, other: &VClock) {
        if other.0.is_empty() {
            return;
        }
        let mut out = Vec::with_capacity(self.0.len().max(other.0.len()));
        let (mut i, mut j) = (0, 0);
        loop {
            match (self.0.get(i), other.0.get(j)) {
                (Some(&(a, x)), Some(&(b, y))) => {
                    if a == b {
                        out.push((a, x.max(y)));
                        i += 1;
                        j += 1;
                    } else if a < b {
                        out.push((a, x));
                        i += 1;
                    } else {
                        out.push((b, y));
                        j += 1;
                    }
                }
                (Some(&e), None) => {
                    out.push(e);
                    i += 1;
                }
                (None, Some(&e)) => {
                    out.push(e);
                    j += 1;
                }
                (None, None) => break,
            }
        }
        self.0 = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_get_merge() {
        let mut a = VClock::default();
        assert_eq!(a.tick(5), 1);
        assert_eq!(a.tick(5), 2);
        assert_eq!(a.tick(2), 1);
        let mut b = VClock::default();
        b.tick(9);
        b.tick(5);
        b.merge(&a);
        assert_eq!((b.get(2), b.get(5), b.get(9), b.get(1)), (1, 2, 1, 0));
        a.merge(&VClock::default());
        assert_eq!(a.get(5), 2);
    }
}
