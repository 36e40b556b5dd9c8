//! The book of one device: the trackers of its resources and the states of
//! its streams, behind **one** lock.
//!
//! Every submission to a stream of the device takes this lock once, from
//! before its conflicts are read until its uses and its ticket are recorded:
//! two operations on one resource can never both miss each other, a stream's
//! timeline always agrees with the order the driver was given its work, and
//! no lock order among resources or streams of one device is needed. The
//! price is that submissions to one device are serialized — the driver
//! serializes most submissions to one context anyway.
//!
//! An operation whose resources or waits span devices locks the books of
//! all of them, in ordinal order ([`Books`]). Debug builds assert that no
//! resource or stream is ever looked up in another device's book.

use super::conflicts::Tracker;
use super::{StreamState, Timeline};
use crate::device::Device;
use crate::error::{Error, Result};
use smallvec::SmallVec;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;
// Built with `RUSTFLAGS="--cfg loom"`, a book's lock is loom's, and the model
// at the bottom runs this file's locking (`BookList`, `locked`) under every
// interleaving loom explores.
#[cfg(loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::{Mutex, MutexGuard};

/// The book of one device, shared by its resources and streams for the life
/// of the process (as the device's state is).
pub(in crate::engine) struct DeviceBook {
    /// The device's ordinal (the lock order of books).
    pub ordinal: i32,
    pages: Mutex<Book>,
}

impl DeviceBook {
    /// Locks the book.
    #[inline(always)]
    pub(in crate::engine) fn lock(&self) -> BookGuard<'_> {
        let guard = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        HELD.with(|h| h.set(h.get() + 1));
        BookGuard { guard }
    }

    /// A slot for a new stream.
    pub(in crate::engine) fn new_stream(&self) -> u32 {
        self.lock().new_stream()
    }

    /// Frees stream `slot`: its timeline is gone. It never waits for the
    /// book: the last handle of a timeline may be dropped where this thread
    /// holds the book (a tracker replacing the last use of a stream nobody
    /// else holds) or inside a host function. If the book is busy, the free
    /// goes to the deferred-work queue, which the next tracked operation,
    /// pageable copy or synchronization runs with no lock held.
    pub(in crate::engine) fn retire_stream(self: &Arc<Self>, slot: u32) {
        if !crate::ffi::calls_refused() {
            // Holding no book, this thread may wait for this one; holding
            // one (maybe this one), it may only try.
            let pages = if HELD.with(Cell::get) == 0 {
                Some(self.lock())
            } else {
                self.pages.try_lock().ok().map(|guard| {
                    HELD.with(|h| h.set(h.get() + 1));
                    BookGuard { guard }
                })
            };
            if let Some(mut pages) = pages {
                let old = pages.free_stream(slot);
                drop(pages);
                // The state holds markers: dropped with the book unlocked.
                drop(old);
                return;
            }
        }
        let book = self.clone();
        crate::engine::capture::deferred::defer(
            crate::engine::capture::deferred::Until::Ordinary,
            Box::new(move || {
                let old = book.lock().free_stream(slot);
                drop(old);
            }),
        );
    }
}

thread_local! {
    /// How many books this thread holds locked.
    static HELD: Cell<u32> = const { Cell::new(0) };
}

/// A locked [`DeviceBook`]; the thread counts the books it holds, so a
/// timeline dropped while one is held never waits for a book (see
/// [`DeviceBook::retire_stream`]).
pub(in crate::engine) struct BookGuard<'a> {
    guard: MutexGuard<'a, Book>,
}

impl std::ops::Deref for BookGuard<'_> {
    type Target = Book;
    #[inline(always)]
    fn deref(&self) -> &Book {
        &self.guard
    }
}

impl std::ops::DerefMut for BookGuard<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Book {
        &mut self.guard
    }
}

impl Drop for BookGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        HELD.with(|h| h.set(h.get().saturating_sub(1)));
    }
}

/// The book of `device`, made on first use.
pub(in crate::engine) fn book_of(device: &Device) -> Arc<DeviceBook> {
    type Books = std::sync::Mutex<HashMap<i32, Arc<DeviceBook>>>;
    static BOOKS: std::sync::OnceLock<Books> = std::sync::OnceLock::new();
    let ordinal = device.ordinal();
    let mut map =
        BOOKS.get_or_init(|| std::sync::Mutex::new(HashMap::new())).lock().unwrap_or_else(|p| p.into_inner());
    map.entry(ordinal)
        .or_insert_with(|| Arc::new(DeviceBook { ordinal, pages: Mutex::new(Book::new(ordinal)) }))
        .clone()
}

/// What a [`DeviceBook`] guards: a slot per live resource (its tracker) and
/// per live stream (its state).
pub(in crate::engine) struct Book {
    /// The device whose book this is.
    pub ordinal: i32,
    trackers: Vec<TrackerSlot>,
    free_trackers: Vec<u32>,
    streams: Streams,
    free_streams: Vec<u32>,
}

/// A tracker in its own cache line (a tracker is 56 bytes: unaligned, one
/// in two would straddle two lines).
#[derive(Default)]
#[repr(align(64))]
pub(in crate::engine) struct TrackerSlot(pub Tracker);

/// The states of a device's streams, one slot per live stream.
pub(in crate::engine) struct Streams(Vec<StreamState>);

impl Streams {
    /// The state of stream `t` (a stream of this book's device).
    #[inline(always)]
    pub(in crate::engine) fn get(&mut self, t: &Timeline) -> &mut StreamState {
        &mut self.0[t.slot as usize]
    }
}

/// A slot number that names no slot (a moved-out resource).
pub(in crate::engine) const NO_SLOT: u32 = u32::MAX;

impl Book {
    fn new(ordinal: i32) -> Book {
        Book {
            ordinal,
            trackers: Vec::new(),
            free_trackers: Vec::new(),
            streams: Streams(Vec::new()),
            free_streams: Vec::new(),
        }
    }

    /// A new tracker slot with no uses.
    pub(in crate::engine) fn new_tracker(&mut self) -> u32 {
        match self.free_trackers.pop() {
            Some(s) => s,
            None => {
                self.trackers.push(TrackerSlot::default());
                (self.trackers.len() - 1) as u32
            }
        }
    }

    /// Empties tracker `slot` and frees it, returning its old uses (to be
    /// dropped with the book unlocked: a use may hold a stream's last
    /// handle).
    pub(in crate::engine) fn free_tracker(&mut self, slot: u32) -> Option<Tracker> {
        let old = self.trackers.get_mut(slot as usize).map(|t| std::mem::take(&mut t.0));
        if old.is_some() {
            self.free_trackers.push(slot);
        }
        old
    }

    /// The tracker in `slot` (a resource of this book's device).
    #[inline(always)]
    pub(in crate::engine) fn tracker(&self, slot: u32) -> Option<&Tracker> {
        self.trackers.get(slot as usize).map(|t| &t.0)
    }

    /// The tracker in `slot`, for recording.
    #[inline(always)]
    pub(in crate::engine) fn tracker_mut(&mut self, slot: u32) -> Option<&mut Tracker> {
        self.trackers.get_mut(slot as usize).map(|t| &mut t.0)
    }

    /// A new stream slot.
    fn new_stream(&mut self) -> u32 {
        let state = StreamState::default();
        match self.free_streams.pop() {
            Some(s) => {
                self.streams.0[s as usize] = state;
                s
            }
            None => {
                self.streams.0.push(state);
                (self.streams.0.len() - 1) as u32
            }
        }
    }

    /// Frees stream `slot`, returning its state (dropped with the book
    /// unlocked: it holds markers).
    fn free_stream(&mut self, slot: u32) -> StreamState {
        let old = std::mem::take(&mut self.streams.0[slot as usize]);
        self.free_streams.push(slot);
        old
    }

    /// The state of stream `t` (a stream of this book's device).
    #[inline(always)]
    pub(in crate::engine) fn stream(&mut self, t: &Timeline) -> &mut StreamState {
        debug_assert_eq!(t.book.ordinal, self.ordinal, "a stream looked up in another device's book");
        self.streams.get(t)
    }

    /// The trackers and the stream states apart, so a pass over the trackers
    /// can make device-side waits (which update stream states) as it goes.
    #[inline(always)]
    pub(in crate::engine) fn split(&mut self) -> (&[TrackerSlot], &mut Streams) {
        (&self.trackers, &mut self.streams)
    }
}

/// Books of one or more devices, locked, in ordinal order.
pub(in crate::engine) trait BookSet {
    /// The locked book of device `ordinal`, if it is in the set.
    fn book(&mut self, ordinal: i32) -> Option<&mut Book>;
}

impl BookSet for Book {
    #[inline(always)]
    fn book(&mut self, ordinal: i32) -> Option<&mut Book> {
        if self.ordinal == ordinal { Some(self) } else { None }
    }
}

/// The locked books of several devices (an operation whose resources or
/// waits span devices).
pub(in crate::engine) struct Books<'a> {
    guards: SmallVec<[BookGuard<'a>; BOOKS_INLINE]>,
}

/// The books an operation locks without allocating: the GPUs of one
/// machine (a larger set spills to the heap).
const BOOKS_INLINE: usize = 8;

impl BookSet for Books<'_> {
    fn book(&mut self, ordinal: i32) -> Option<&mut Book> {
        self.guards.iter_mut().find(|g| g.ordinal == ordinal).map(|g| &mut **g)
    }
}

impl Books<'_> {
    /// Whether the book of `ordinal` is locked here.
    pub(in crate::engine) fn has(&self, ordinal: i32) -> bool {
        self.guards.iter().any(|g| g.ordinal == ordinal)
    }
}

/// A set of device books to lock together: those the operation knows from
/// the start are borrowed from its streams and resources (no reference
/// count touched on the hot path); those found missing under a lock are
/// held.
#[derive(Default)]
pub(in crate::engine) struct BookList<'a>(SmallVec<[BookRef<'a>; BOOKS_INLINE]>);

/// One book of a [`BookList`].
enum BookRef<'a> {
    /// Borrowed from a stream or a resource the operation holds.
    Borrowed(&'a DeviceBook),
    /// Found under a lock ([`Step::Missing`]): held by the list.
    Held(Arc<DeviceBook>),
}

impl std::ops::Deref for BookRef<'_> {
    type Target = DeviceBook;
    #[inline(always)]
    fn deref(&self) -> &DeviceBook {
        match self {
            BookRef::Borrowed(b) => b,
            BookRef::Held(b) => b,
        }
    }
}

impl<'a> BookList<'a> {
    /// Adds `book` (once). In line: a book already listed (every buffer of
    /// a part on its stream's device, the common case) costs a compare.
    #[inline(always)]
    pub(in crate::engine) fn add(&mut self, book: &'a DeviceBook) {
        if !self.0.iter().any(|b| std::ptr::eq(&**b, book)) {
            self.push_new(BookRef::Borrowed(book));
        }
    }

    /// How many books are listed.
    #[inline(always)]
    pub(in crate::engine) fn len(&self) -> usize {
        self.0.len()
    }

    /// [`BookList::add`] of a book found missing under a lock, held.
    pub(in crate::engine) fn add_held(&mut self, book: Arc<DeviceBook>) {
        if !self.0.iter().any(|b| std::ptr::eq(&**b, &*book)) {
            self.push_new(BookRef::Held(book));
        }
    }

    /// Adds a book not yet listed, kept in ordinal order.
    #[inline(never)]
    fn push_new(&mut self, book: BookRef<'a>) {
        // Books mostly come in ordinal order: a push, no shift.
        match self.0.iter().position(|b| b.ordinal > book.ordinal) {
            None => self.0.push(book),
            Some(at) => self.0.insert(at, book),
        }
    }

    /// Locks every book, in ordinal order.
    pub(in crate::engine) fn lock(&self) -> Books<'_> {
        let mut guards = SmallVec::new();
        for b in &self.0 {
            guards.push(b.lock());
        }
        Books { guards }
    }
}

/// What an operation's work under its locked books found ([`locked`]).
pub(in crate::engine) enum Step<R> {
    /// Done: the result, returned with the books unlocked.
    Done(R),
    /// Books the operation needs but were not locked (a conflicting use on
    /// another device's stream): added, and the work runs again with every
    /// book locked anew.
    Missing(Vec<Arc<DeviceBook>>),
}

/// Runs `work` with every book of `list` locked, in ordinal order — the one
/// way an operation locks several devices' books (the across, blocking and
/// group flavors; `Timeline::submit`). When `work` finds a book missing
/// (a dependency on another device's stream that only the locked books
/// reveal), it must not have submitted anything yet: every book is
/// unlocked, the missing ones added, and `work` runs again. Locks are only
/// ever taken in ordinal order and never while one is held out of order,
/// so operations over any sets of books cannot deadlock (the `loom` model
/// below checks the protocol).
///
/// # Errors
/// `work`'s error (the books are unlocked before it is returned).
pub(in crate::engine) fn locked<R>(
    list: &mut BookList<'_>,
    mut work: impl FnMut(&mut Books<'_>) -> Result<Step<R>>,
) -> Result<R> {
    loop {
        let missing = {
            let mut books = list.lock();
            match work(&mut books)? {
                Step::Done(r) => return Ok(r),
                Step::Missing(missing) => missing,
            }
        };
        for b in missing {
            list.add_held(b);
        }
    }
}

/// The error for a book an operation needed but had not locked (a broken
/// invariant, reported rather than panicked on).
#[cold]
pub(in crate::engine) fn not_locked(ordinal: i32) -> Error {
    Error::Internal(format!("the book of device {ordinal} was needed but not locked"))
}

/// `books.book(ordinal)` or [`not_locked`].
#[inline(always)]
pub(in crate::engine) fn book_in(books: &mut impl BookSet, ordinal: i32) -> Result<&mut Book> {
    books.book(ordinal).ok_or_else(|| not_locked(ordinal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracker_slot_is_one_cache_line() {
        // A tracker alone is 56 bytes; unaligned, one in two would straddle
        // two lines.
        assert_eq!(std::mem::size_of::<Tracker>(), 56);
        assert_eq!(std::mem::size_of::<TrackerSlot>(), 64);
        assert_eq!(std::mem::align_of::<TrackerSlot>(), 64);
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    //! The lock protocol of the books under `loom`: operations over several
    //! devices' books — the group flavor's (books given in any order), the
    //! across flavor's (a book found missing under the lock, then every book
    //! locked anew), and single-device submissions (one book, locked
    //! directly) — from several threads. Each records one use in every book
    //! it locks (a tracker slot, `Book::new_tracker`). Under every
    //! interleaving loom explores, nothing deadlocks (loom fails a run whose
    //! threads all block) and no use is lost. Run with:
    //!
    //! ```text
    //! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    //!     cargo test -p gpu-sync --lib --release loom_model
    //! ```
    use super::*;

    fn book(ordinal: i32) -> Arc<DeviceBook> {
        Arc::new(DeviceBook { ordinal, pages: Mutex::new(Book::new(ordinal)) })
    }

    fn uses(b: &DeviceBook) -> usize {
        b.lock().trackers.len()
    }

    /// A group operation over `books`, given in any order.
    fn group(books: &[&Arc<DeviceBook>]) {
        let mut list = BookList::default();
        for b in books {
            list.add(b);
        }
        let r = locked(&mut list, |locked_books| {
            for b in books {
                book_in(locked_books, b.ordinal)?.new_tracker();
            }
            Ok(Step::Done(()))
        });
        assert!(r.is_ok(), "every book was locked");
    }

    /// The across flavor's shape: only `first` is known; under its lock a
    /// dependency on `found` appears, so both are locked anew.
    fn across(first: &Arc<DeviceBook>, found: &Arc<DeviceBook>) {
        let mut list = BookList::default();
        list.add(first);
        let mut passes = 0;
        let r = locked(&mut list, |locked_books| {
            passes += 1;
            if !locked_books.has(found.ordinal) {
                return Ok(Step::Missing(vec![found.clone()]));
            }
            book_in(locked_books, first.ordinal)?.new_tracker();
            book_in(locked_books, found.ordinal)?.new_tracker();
            Ok(Step::Done(()))
        });
        assert!(r.is_ok() && passes == 2, "the missing book was added and the work ran once with it");
    }

    /// A submission on one device: its book only, locked directly.
    fn single(b: &Arc<DeviceBook>) {
        b.lock().new_tracker();
    }

    #[test]
    fn groups_in_opposite_orders_and_single_device_work_never_deadlock_or_lose_a_use() {
        loom::model(|| {
            let (b0, b1) = (book(0), book(1));
            let (c0, c1) = (b0.clone(), b1.clone());
            let t1 = loom::thread::spawn(move || group(&[&c0, &c1]));
            let (c0, c1) = (b0.clone(), b1.clone());
            let t2 = loom::thread::spawn(move || {
                group(&[&c1, &c0]);
                single(&c1);
            });
            single(&b0);
            t1.join().unwrap();
            t2.join().unwrap();
            assert_eq!((uses(&b0), uses(&b1)), (3, 3), "a use was lost");
        });
    }

    #[test]
    fn an_across_relock_beside_a_group_over_three_books_never_deadlocks_or_loses_a_use() {
        loom::model(|| {
            let (b0, b1, b2) = (book(0), book(1), book(2));
            let (c0, c1, c2) = (b0.clone(), b1.clone(), b2.clone());
            let t1 = loom::thread::spawn(move || group(&[&c2, &c0, &c1]));
            let (c0, c2) = (b0.clone(), b2.clone());
            let t2 = loom::thread::spawn(move || across(&c2, &c0));
            across(&b1, &b0);
            t1.join().unwrap();
            t2.join().unwrap();
            assert_eq!((uses(&b0), uses(&b1), uses(&b2)), (3, 2, 2), "a use was lost");
        });
    }
}
