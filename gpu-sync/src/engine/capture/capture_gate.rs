//! The core of the capture protocol: how an operation on a stream decides
//! between joining the stream's capture and running as ordinary work,
//! atomically with the end of that capture.
//!
//! It is driver-agnostic and generic so that one piece of code serves both
//! the engine's captured submission (`track/captured.rs`, with the real driver) and the model checker: built with
//! `RUSTFLAGS="--cfg loom"`, its lock is `loom`'s and the tests at the bottom
//! run this very code against a model of the driver under every interleaving
//! `loom` explores:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p gpu-sync --lib --release capture_gate
//! ```
//!
//! The rules:
//! - every driver call made into a capture happens with its [`Gate`]
//!   locked and open;
//! - the end of a capture (`cuStreamEndCapture`) happens with the gate
//!   locked, which is then closed, and every stream is detached from the
//!   capture before the lock is released;
//! - an operation that finds the gate closed has not run and tries again: the
//!   stream is no longer in that capture, so it runs as ordinary work (whose
//!   path refuses, under the lock of the stream's state (its device's book),
//!   if a new capture began).

use std::sync::Arc;

#[cfg(loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::{Mutex, MutexGuard};

/// A held [`Gate`]: std's guard, or loom's in the model.
pub(in crate::engine) type GateGuard<'a, T> = MutexGuard<'a, Gated<T>>;

/// The submission lock of one capture, with the data its submissions share.
pub(in crate::engine) struct Gate<T> {
    state: Mutex<Gated<T>>,
}

/// What a [`Gate`] guards.
pub(in crate::engine) struct Gated<T> {
    ended: bool,
    /// The capture's bookkeeping.
    pub data: T,
}

impl<T> Gated<T> {
    /// Whether the capture has ended: nothing may be submitted into it.
    pub fn is_ended(&self) -> bool {
        self.ended
    }
}

impl<T> Gate<T> {
    /// An open gate.
    pub fn new(data: T) -> Gate<T> {
        Gate { state: Mutex::new(Gated { ended: false, data }) }
    }

    /// Locks the gate (a poisoned lock is taken over: the state stays
    /// consistent, every update is one assignment).
    pub fn lock(&self) -> GateGuard<'_, T> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A capture: something with a [`Gate`].
pub(in crate::engine) trait Captures {
    /// The capture's bookkeeping.
    type Data;
    /// Its submission lock.
    fn gate(&self) -> &Gate<Self::Data>;
}

/// A stream as the protocol sees it.
pub(in crate::engine) trait CaptureSlot {
    /// The capture type.
    type Capture: Captures;
    /// Whether the stream may be capturing: a lock-free hint that may be
    /// stale, set before a capture's first operation may see it and cleared
    /// under the capture's gate.
    fn capture_hint(&self) -> bool;
    /// The capture the stream takes part in, read under the lock of its
    /// state.
    fn capture(&self) -> Option<Arc<Self::Capture>>;
}

/// Runs `op` as the next operation on `stream`: inside the stream's capture
/// through `join` (called with the capture's gate locked and open), or else
/// through `plain`, which must refuse without running `op` if the stream is
/// capturing when it checks under the lock of the stream's state.
#[inline(always)]
pub(in crate::engine) fn submit<S, F, R, E>(
    stream: &S,
    op: F,
    mut join: impl FnMut(&S::Capture, &mut <S::Capture as Captures>::Data, F) -> Result<R, E>,
    plain: impl FnOnce(F) -> Result<R, E>,
) -> Result<R, E>
where
    S: CaptureSlot,
{
    while stream.capture_hint() {
        let Some(cap) = stream.capture() else { break };
        let mut g = cap.gate().lock();
        if g.ended {
            // Ended between reading the stream's capture and this lock: the
            // stream was detached under the lock, so the next read sees
            // that (or a newer capture).
            continue;
        }
        return join(&cap, &mut g.data, op);
    }
    plain(op)
}

/// Ends a capture: with its gate locked, `end` runs (the driver's end of the
/// capture), the gate is closed, and `detach` (given `end`'s result) clears
/// every stream's capture state before another thread can take the gate.
pub(in crate::engine) fn end<T, R>(
    gate: &Gate<T>,
    end: impl FnOnce(&mut T) -> R,
    detach: impl FnOnce(&R),
) -> R {
    let mut g = gate.lock();
    let r = end(&mut g.data);
    g.ended = true;
    detach(&r);
    r
}

#[cfg(all(test, loom))]
mod model {
    //! The protocol against a model of the driver's capture semantics: an
    //! operation submitted to a capturing stream becomes a graph node; to any
    //! other stream, it runs. gpu-sync's bookkeeping must agree with the
    //! driver about every operation — the hole-4 bug was an operation the
    //! capture recorded as a node that the driver ran instead.

    use super::*;
    use loom::sync::atomic::{AtomicBool, Ordering};

    #[derive(Default)]
    struct Driver {
        capturing: bool,
        nodes: Vec<u32>,
        ran: Vec<u32>,
    }

    impl Driver {
        fn submit(&mut self, op: u32) {
            if self.capturing { self.nodes.push(op) } else { self.ran.push(op) }
        }
    }

    struct Cap {
        gate: Gate<Vec<u32>>,
    }

    impl Captures for Cap {
        type Data = Vec<u32>;
        fn gate(&self) -> &Gate<Vec<u32>> {
            &self.gate
        }
    }

    /// A stream: the model of a `Timeline`'s capture slot and tracker.
    struct ModelStream {
        hint: AtomicBool,
        /// The state lock: the capture and the ops tracked as run.
        state: Mutex<(Option<Arc<Cap>>, Vec<u32>)>,
        driver: Mutex<Driver>,
    }

    impl CaptureSlot for ModelStream {
        type Capture = Cap;
        fn capture_hint(&self) -> bool {
            self.hint.load(Ordering::Acquire)
        }
        fn capture(&self) -> Option<Arc<Cap>> {
            self.state.lock().unwrap().0.clone()
        }
    }

    impl ModelStream {
        fn new() -> ModelStream {
            ModelStream {
                hint: AtomicBool::new(false),
                state: Mutex::new((None, Vec::new())),
                driver: Mutex::new(Driver::default()),
            }
        }

        /// `engine::submit` (`Kind::Async`): joins the capture or runs tracked; `Err` when a
        /// capture began under it (`Error::Capturing`).
        fn launch(&self, op: u32) -> Result<(), ()> {
            submit(
                self,
                op,
                |_cap, nodes, op| {
                    self.driver.lock().unwrap().submit(op);
                    nodes.push(op);
                    Ok(())
                },
                |op| {
                    let mut st = self.state.lock().unwrap();
                    if st.0.is_some() {
                        return Err(());
                    }
                    self.driver.lock().unwrap().submit(op);
                    st.1.push(op);
                    Ok(())
                },
            )
        }

        /// `Stream::capture` with an empty body: begin under the state lock,
        /// end through the gate. Returns (driver's nodes, recorded nodes).
        fn capture_once(&self) -> (Vec<u32>, Vec<u32>) {
            let cap = Arc::new(Cap { gate: Gate::new(Vec::new()) });
            {
                let mut st = self.state.lock().unwrap();
                assert!(st.0.is_none());
                self.driver.lock().unwrap().capturing = true;
                st.0 = Some(cap.clone());
                self.hint.store(true, Ordering::Release);
            }
            end(
                &cap.gate,
                |recorded| {
                    let mut d = self.driver.lock().unwrap();
                    d.capturing = false;
                    (std::mem::take(&mut d.nodes), std::mem::take(recorded))
                },
                |_| {
                    self.state.lock().unwrap().0 = None;
                    self.hint.store(false, Ordering::Release);
                },
            )
        }
    }

    fn sorted(mut v: Vec<u32>) -> Vec<u32> {
        v.sort_unstable();
        v
    }

    /// Submit vs end-capture: one thread captures twice, another launches
    /// twice. Every launch is a node of the capture that recorded it, or ran
    /// and was tracked — never ran untracked, never a node unrecorded.
    #[test]
    fn a_submission_racing_the_end_of_a_capture_is_captured_or_tracked() {
        loom::model(|| {
            let s = Arc::new(ModelStream::new());
            let s2 = s.clone();
            let launcher = loom::thread::spawn(move || {
                let mut accepted = Vec::new();
                for op in 1..=2 {
                    if s2.launch(op).is_ok() {
                        accepted.push(op);
                    }
                }
                accepted
            });
            let mut captured = Vec::new();
            for _ in 0..2 {
                let (nodes, recorded) = s.capture_once();
                assert_eq!(sorted(nodes.clone()), sorted(recorded), "the graph and its bookkeeping disagree");
                captured.extend(nodes);
            }
            let accepted = launcher.join().unwrap();
            let st = s.state.lock().unwrap();
            let ran = s.driver.lock().unwrap().ran.clone();
            assert_eq!(sorted(ran.clone()), sorted(st.1.clone()), "an operation ran untracked");
            let mut all = ran;
            all.extend(captured);
            assert_eq!(sorted(all), accepted, "an accepted operation was lost or doubled");
        });
    }

    /// Two threads submitting to one stream while a third captures it.
    #[test]
    fn two_submitters_and_a_capture_agree_with_the_driver() {
        loom::model(|| {
            let s = Arc::new(ModelStream::new());
            let threads: Vec<_> = (0..2u32)
                .map(|i| {
                    let s = s.clone();
                    loom::thread::spawn(move || s.launch(10 + i).is_ok().then_some(10 + i))
                })
                .collect();
            let (nodes, recorded) = s.capture_once();
            assert_eq!(sorted(nodes.clone()), sorted(recorded));
            let accepted: Vec<u32> = threads.into_iter().filter_map(|t| t.join().unwrap()).collect();
            let st = s.state.lock().unwrap();
            let ran = s.driver.lock().unwrap().ran.clone();
            assert_eq!(sorted(ran.clone()), sorted(st.1.clone()), "an operation ran untracked");
            let mut all = ran;
            all.extend(nodes);
            assert_eq!(sorted(all), sorted(accepted));
        });
    }
}

#[cfg(all(test, loom))]
mod funnel {
    //! The submission funnel's lock order, modelled: a blocking copy holds
    //! its stream's `blocking` lock across its driver call but not the book;
    //! a capture begins under `blocking`, then the book; a submission takes
    //! the book; a host function, which the blocking driver call may wait
    //! for, refuses before any lock. Under every interleaving loom explores
    //! nothing deadlocks (loom fails a run whose threads all block) and no
    //! capture begins while a blocking call is in flight.

    use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use loom::sync::{Arc, Mutex};

    struct Lane {
        /// `Timeline::blocking`.
        blocking: Mutex<()>,
        /// The device's book: (capturing, last ticket).
        book: Mutex<(bool, u64)>,
        /// A blocking driver call is in flight.
        in_call: AtomicBool,
        /// The host function has run (the blocking call waits for it, as
        /// a real driver call may wait for a host function queued earlier).
        host_fn_done: AtomicBool,
        refused: AtomicU32,
        /// The rules under test: the host function refuses before any lock;
        /// the blocking call holds no book. `false` models c7632f7.
        rules: bool,
    }

    impl Lane {
        /// `engine::submit`'s first guard, inside a host function: refuse,
        /// never lock.
        fn host_fn(&self) {
            if self.rules {
                self.refused.fetch_add(1, Ordering::Relaxed);
            } else {
                // c7632f7: `Stream::wait_stream` read the book, then refused.
                drop(self.book.lock().unwrap());
                self.refused.fetch_add(1, Ordering::Relaxed);
            }
            self.host_fn_done.store(true, Ordering::Release);
        }

        /// `flavor::blocking::run_idle`: the check under the book, the call without it.
        fn blocking_copy(&self) {
            let _b = self.blocking.lock().unwrap();
            let st = self.book.lock().unwrap();
            if st.0 {
                return; // refused: the stream captures
            }
            // c7632f7 kept the book across the driver call.
            let held = if self.rules {
                drop(st);
                None
            } else {
                Some(st)
            };
            self.in_call.store(true, Ordering::SeqCst);
            // The driver call: waits for the host function.
            while !self.host_fn_done.load(Ordering::Acquire) {
                loom::thread::yield_now();
            }
            self.in_call.store(false, Ordering::SeqCst);
            let mut st = held.unwrap_or_else(|| self.book.lock().unwrap());
            st.1 += 1;
        }

        /// `flavor::captured::begin`.
        fn begin_capture(&self) {
            let _b = self.blocking.lock().unwrap();
            let mut st = self.book.lock().unwrap();
            assert!(!self.in_call.load(Ordering::SeqCst), "a capture began under a blocking call");
            st.0 = true;
        }

        /// An eager submission on another stream of the device.
        fn submit(&self) {
            let mut st = self.book.lock().unwrap();
            st.1 += 1;
        }
    }

    fn run(rules: bool) {
        loom::model(move || {
            let lane = Arc::new(Lane {
                blocking: Mutex::new(()),
                book: Mutex::new((false, 0)),
                in_call: AtomicBool::new(false),
                host_fn_done: AtomicBool::new(false),
                refused: AtomicU32::new(0),
                rules,
            });
            let threads: Vec<_> = [0u8, 1, 2]
                .into_iter()
                .map(|i| {
                    let l = lane.clone();
                    loom::thread::spawn(move || match i {
                        0 => l.host_fn(),
                        1 => l.begin_capture(),
                        _ => l.submit(),
                    })
                })
                .collect();
            lane.blocking_copy();
            for t in threads {
                t.join().unwrap();
            }
            assert_eq!(lane.refused.load(Ordering::Relaxed), 1);
        });
    }

    #[test]
    fn a_blocking_copy_a_capture_a_submission_and_a_host_function_never_deadlock() {
        run(true);
    }

    /// `GraphExec::launch`: its exec lock is taken inside `submit`'s
    /// closure, under the book, and held past the book's release only to
    /// store the launch's point. Two replays of one exec and an eager
    /// submission never deadlock. (The order that must never appear, a book
    /// taken while an exec lock is held, makes loom report a deadlock here;
    /// that run aborts the test binary — loom's panic meets a destructor —
    /// so it is not kept as a `should_panic` test.)
    #[test]
    fn graph_replays_and_a_submission_never_deadlock() {
        loom::model(|| {
            let book = Arc::new(Mutex::new(0u64));
            let exec = Arc::new(Mutex::new(0u64));
            let replay = |book: Arc<Mutex<u64>>, exec: Arc<Mutex<u64>>| {
                move || {
                    let mut b = book.lock().unwrap();
                    let mut e = exec.lock().unwrap(); // inside the closure
                    *b += 1; // the ticket
                    drop(b);
                    *e += 1; // `st.last`, the book released
                }
            };
            let r1 = loom::thread::spawn(replay(book.clone(), exec.clone()));
            let b2 = book.clone();
            let other = loom::thread::spawn(move || *b2.lock().unwrap() += 1);
            replay(book.clone(), exec.clone())();
            r1.join().unwrap();
            other.join().unwrap();
            assert_eq!(*book.lock().unwrap(), 3);
            assert_eq!(*exec.lock().unwrap(), 2);
        });
    }

    /// The model is not vacuous: with c7632f7's rules (the book held across
    /// the blocking call, the host function locking it before refusing) loom
    /// finds the deadlock of the first reproducer in
    /// `tests/tests/deadlocks.rs` — the copy's driver call waits forever for
    /// a host function that waits for the book (the wait is a spin, so loom
    /// reports it as a run past its branch bound).
    #[test]
    #[should_panic]
    fn the_old_rules_deadlock() {
        run(false);
    }
}
