//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Counts how many `Tracked` objects were made and dropped, and catches an
/// object handed to two holders at once or dropped twice.
#[derive(Default, Debug)]
pub struct Ledger {
    pub made: AtomicUsize,
    pub dropped: AtomicUsize,
}

impl Ledger {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn make(self: &Arc<Self>) -> Tracked {
        let id = self.made.fetch_add(1, Ordering::Relaxed);
        Tracked {
            id,
            ledger: Arc::clone(self),
            in_use: Arc::new(AtomicBool::new(false)),
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

/// An object that knows whether someone holds it.
#[derive(Debug)]
pub struct Tracked {
    pub id: usize,
    ledger: Arc<Ledger>,
    in_use: Arc<AtomicBool>,
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

    /// Marks the object free again.
    pub fn release(&self) {
        assert!(self.in_use.swap(false, Ordering::SeqCst));
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
