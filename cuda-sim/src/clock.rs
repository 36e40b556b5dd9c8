//! Vector clocks for the race oracle.
//!
//! An actor is a stream or a session's host thread, named by a global `u64`
//! id. A clock maps actors to the last tick of theirs it has seen; absent
//! actors are at 0. Clocks are small (one entry per actor that ever
//! synchronized with the owner), kept as a sorted vector.

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
