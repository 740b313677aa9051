//! Objects that know how often they were made and dropped and whether
//! someone holds them: a test or a loom model fails if the pool hands one
//! object to two holders at once, drops one while it is held, drops one
//! twice, or never drops one.
//!
//! Written against a `sync` module that the including crate provides next
//! to it (std's in `tests/common`, loom's in `loom-tests`), so the tests and
//! the loom models check objects with one and the same code.

use std::fmt;

use super::sync::{Arc, AtomicBool, AtomicUsize, Ordering};

/// Counts how many `Tracked` objects were made and dropped.
#[derive(Default)]
pub struct Ledger {
    pub made: AtomicUsize,
    pub dropped: AtomicUsize,
}

impl Ledger {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// A new object, counted in `ledger`; its id is the count before it.
    pub fn track(ledger: &Arc<Self>) -> Tracked {
        let id = ledger.made.fetch_add(1, Ordering::SeqCst);
        Tracked {
            id,
            ledger: Arc::clone(ledger),
            in_use: AtomicBool::new(false),
        }
    }

    pub fn made(&self) -> usize {
        self.made.load(Ordering::SeqCst)
    }

    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }

    /// Objects made and not yet dropped.
    pub fn live(&self) -> usize {
        self.made() - self.dropped()
    }
}

impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ledger")
            .field("made", &self.made())
            .field("dropped", &self.dropped())
            .finish()
    }
}

/// An object that knows whether someone holds it. A holder calls `acquire`
/// when it starts using the object and `release` when it is done, so two
/// holders at once (even on one thread) are caught.
pub struct Tracked {
    pub id: usize,
    ledger: Arc<Ledger>,
    in_use: AtomicBool,
}

impl Tracked {
    /// Marks the object held; panics if it already was (two holders).
    pub fn acquire(&self) {
        assert!(
            !self.in_use.swap(true, Ordering::SeqCst),
            "object {} handed to two holders at once",
            self.id
        );
    }

    /// Marks the object free again; panics if it was not held.
    pub fn release(&self) {
        assert!(
            self.in_use.swap(false, Ordering::SeqCst),
            "object {} released but not held",
            self.id
        );
    }

    /// `acquire`, `f`, `release`: one use of the object.
    pub fn hold<R>(&self, f: impl FnOnce(&Self) -> R) -> R {
        self.acquire();
        let out = f(self);
        self.release();
        out
    }
}

impl fmt::Debug for Tracked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracked").field("id", &self.id).finish()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        assert!(
            !self.in_use.load(Ordering::SeqCst),
            "object {} dropped while held",
            self.id
        );
        let dropped = self.ledger.dropped.fetch_add(1, Ordering::SeqCst) + 1;
        assert!(dropped <= self.ledger.made(), "more drops than objects");
    }
}
