//! Pooled objects live in heap nodes.
//!
//! Every object a pool makes lives in one `Box<Node<T>>` from its creation
//! to its drop: stashes, the overflow and guards hold the node's pointer,
//! so moving an object moves one word, whatever the size of `T`. The node
//! also records the pool that lent it, so that a guard is one pointer too,
//! and the stash it was lent from ([`Home`]), so that a guard dropped on
//! the thread that got it goes straight back there, and one dropped on
//! another thread hands it back through the node itself ([`loan`]). Why
//! nodes rather than objects moved by value:
//! [`implementation`](crate::implementation), sections 2 and 3c.

use std::mem::ManuallyDrop;

use crate::sync::{AtomicU8, Ordering, token};

/// Where a node stands with the loan book of the stash that lent it
/// (`loans.rs`). Only the book's owner (or a thread holding its stash's
/// claim) moves a node into the book or out of it; while it is in the book,
/// only the thread that gives it back on another thread writes it, once.
pub(crate) mod loan {
    /// In no book: pooled, or lent without a place in its stash's book.
    pub(crate) const UNTRACKED: u8 = 0;
    /// Lent, with a place in its stash's book.
    pub(crate) const LENT: u8 = 1;
    /// Given back on another thread, recycled: pooled, in the book.
    pub(crate) const BACK: u8 = 2;
    /// Its object left the pool on another thread (kept by `into_inner`,
    /// refused by `recycle`, or dropped by a panic): an empty shell in the
    /// book, for the book to free.
    pub(crate) const GONE: u8 = 3;
}

/// One pooled object and where it was lent from.
///
/// Aligned to a cache line: objects move between threads, and two small
/// nodes sharing a line would make two threads holding them write the same
/// line (false sharing) on every use.
///
/// While a node is in a loan book, the book's owner reads `loan` through
/// its own copy of the node's pointer, whoever holds the node: so a lent
/// node is reached through its raw pointer, field by field, never through
/// a `&mut Node` or a `Box` (which would claim every field), until it
/// leaves the book.
#[repr(align(64))]
pub(crate) struct Node<T> {
    /// The `LocalPool` that lent this node out, set by `get` on each loan
    /// (a pool may move between loans, but not while one is out, because
    /// the guard borrows it). Meaningless while the node is pooled.
    pub(crate) lender: *const (),
    /// The stash this node was lent from, set on each loan.
    pub(crate) home: Home,
    /// Whether a guard has handed out `&mut` access to `value` during this
    /// loan; false while the node is pooled. On return it picks
    /// `Recycle::recycle` or `Recycle::recycle_unwritten`.
    pub(crate) written: bool,
    /// One of the [`loan`] states.
    pub(crate) loan: AtomicU8,
    /// The node's place in its stash's loan book, while it has one; only
    /// the book reads and writes it.
    pub(crate) slot: u32,
    /// The object's `Recycle::footprint` as of its last return (or, if
    /// fixed, from its creation), which counts it in the pool's idle bytes
    /// until a get or a sweep takes it.
    pub(crate) bytes: usize,
    /// The object; dropped with the node unless the node is [`loan::GONE`].
    value: ManuallyDrop<T>,
}

// SAFETY: `lender` and `home` are only addresses. `lender` is dereferenced
// by the guard that holds the node, under the guard's own `Send`/`Sync`
// rules; `home`'s stash only on the thread whose token it records
// (`Home::mine`), or through the stash's thread-safe parts. The node is as
// thread-safe as its value.
unsafe impl<T: Send> Send for Node<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Node<T> {}

impl<T> Node<T> {
    /// A node for a new or returned object, not lent out, not written.
    pub(crate) fn boxed(value: T) -> Box<Self> {
        Box::new(Self {
            lender: std::ptr::null(),
            home: Home::NONE,
            written: false,
            loan: AtomicU8::new(loan::UNTRACKED),
            slot: 0,
            bytes: 0,
            value: ManuallyDrop::new(value),
        })
    }

    /// The object, for a node in no book.
    #[inline(always)]
    pub(crate) fn value_mut(&mut self) -> &mut T {
        &mut self.value
    }

    /// The object (for tests).
    #[cfg(test)]
    pub(crate) fn value(&self) -> &T {
        &self.value
    }

    /// The object, out of its node, which is freed (as a `ManuallyDrop`,
    /// for `LocalPool::leave`).
    #[allow(clippy::boxed_local)] // The node's box is what this frees.
    pub(crate) fn into_inner(mut self: Box<Self>) -> ManuallyDrop<T> {
        // SAFETY: taken once: the node is marked empty before it drops.
        let value = unsafe { ManuallyDrop::take(&mut self.value) };
        self.loan.store(loan::GONE, Ordering::Relaxed);
        ManuallyDrop::new(value)
    }

    /// Lends the node to a guard, from the stash `home` records.
    #[inline(always)]
    pub(crate) fn lend(mut self: Box<Self>, home: Home) -> std::ptr::NonNull<Self> {
        self.home = home;
        std::ptr::NonNull::from(Box::leak(self))
    }

    /// The object of a lent node, for writing: marks the loan as one that
    /// wrote it.
    ///
    /// # Safety
    ///
    /// As [`object_mut`](Self::object_mut).
    #[inline(always)]
    pub(crate) unsafe fn write<'a>(this: *mut Self) -> &'a mut T {
        // SAFETY: the caller's word. Through the pointer, field by field:
        // the node's book may read `loan` meanwhile (type docs).
        unsafe {
            (*this).written = true;
            Self::object_mut(this)
        }
    }

    /// The object of a lent node, for writing.
    ///
    /// # Safety
    ///
    /// `this` must be a live node that the caller holds (a guard's), and
    /// no other reference to its object may live as long as the result.
    #[inline(always)]
    pub(crate) unsafe fn object_mut<'a>(this: *mut Self) -> &'a mut T {
        // SAFETY: the caller's word; field by field (type docs).
        unsafe { &mut *std::ptr::addr_of_mut!((*this).value).cast::<T>() }
    }

    /// The object of a lent node.
    ///
    /// # Safety
    ///
    /// As [`write`](Self::write), for shared access.
    #[inline(always)]
    pub(crate) unsafe fn read<'a>(this: *const Self) -> &'a T {
        // SAFETY: the caller's word; field by field (see `write`).
        unsafe { &*std::ptr::addr_of!((*this).value).cast::<T>() }
    }

    /// The `bytes` of a lent node.
    ///
    /// # Safety
    ///
    /// `this` must be a live node that the caller holds.
    #[inline(always)]
    pub(crate) unsafe fn bytes(this: *const Self) -> usize {
        // SAFETY: the caller's word; field by field (see `write`).
        unsafe { (*this).bytes }
    }

    /// The loan state of a node reached through its pointer.
    ///
    /// # Safety
    ///
    /// `this` must be live for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn loan<'a>(this: *const Self) -> &'a AtomicU8 {
        // SAFETY: the caller's word; an atomic, shared by design.
        unsafe { &*std::ptr::addr_of!((*this).loan) }
    }

    /// Whether the loan ending now wrote `value`, leaving the flag false
    /// for the next (a store only if it was set).
    ///
    /// # Safety
    ///
    /// The caller holds `this` (a guard's node).
    #[inline(always)]
    pub(crate) unsafe fn take_written(this: *mut Self) -> bool {
        // SAFETY: the caller's word; field by field (see `write`).
        unsafe {
            let written = (*this).written;
            if written {
                (*this).written = false;
            }
            written
        }
    }

    /// Empties a lent node whose object leaves the pool on another thread
    /// than the one whose book holds it: `take` gets the object (moved out,
    /// or dropped in place), then the node is marked [`loan::GONE`] with
    /// release ordering, also if `take` unwinds, and left for its book to
    /// free.
    ///
    /// # Safety
    ///
    /// The caller holds `this`, which is [`loan::LENT`] in another thread's
    /// book, and does not touch it after this.
    pub(crate) unsafe fn leave<U>(this: *mut Self, take: impl FnOnce(ManuallyDrop<T>) -> U) -> U {
        struct MarkGone(*const AtomicU8);
        impl Drop for MarkGone {
            fn drop(&mut self) {
                // SAFETY: the node is live until this store hands it to its
                // book. Release: the emptying happens before the book frees
                // the shell.
                unsafe { (*self.0).store(loan::GONE, Ordering::Release) }
            }
        }
        // SAFETY: the caller's word.
        let _gone = MarkGone(unsafe { Self::loan(this) });
        // SAFETY: the caller holds the node; taken once, and `GONE` keeps
        // the book's drop of the shell from dropping it again.
        take(unsafe { std::ptr::read(std::ptr::addr_of!((*this).value)) })
    }
}

impl<T> Drop for Node<T> {
    fn drop(&mut self) {
        // The node is this thread's alone now; whoever emptied it published
        // that with its release, which this thread acquired (`loans.rs`).
        if self.loan.load(Ordering::Relaxed) != loan::GONE {
            // SAFETY: the object is there (not GONE), and this is the
            // node's one drop.
            unsafe { ManuallyDrop::drop(&mut self.value) }
        }
    }
}

/// Where a lent node came from: a stash of its pool, and the token
/// (`per_thread::token`) of the thread that took it.
///
/// Finding this thread's stash is the dearest part of a return (a chain of
/// dependent loads). A guard dropped on the thread that got it, the common
/// case, skips it: if this thread's token is the one recorded here, the
/// recorded stash is this thread's own (tokens are never reused, and a
/// thread's token ends before its id, and with it the stash, can go to
/// another thread). Any other case looks its stash up, or gives the node
/// back to the recorded stash's book.
///
/// The stash's type is erased (`Home` is not generic), so that a pool keeps
/// the unwind-safety auto traits of its objects.
#[derive(Clone, Copy)]
pub(crate) struct Home {
    stash: *const (),
    /// The token, with [`IN_BOOK`] set while the stash's loan book holds
    /// the node.
    token: u64,
}

/// The top bit of `Home::token`, which no token reaches.
const IN_BOOK: u64 = 1 << 63;

impl Home {
    /// No stash: returns look their stash up.
    pub(crate) const NONE: Self = Self {
        stash: std::ptr::null(),
        token: 0,
    };

    /// `stash`, the address of this thread's own stash in the lending
    /// pool, taken from now.
    #[inline(always)]
    pub(crate) fn here(stash: *const ()) -> Self {
        Self {
            stash,
            token: token(),
        }
    }

    /// A home with `token` and no stash (tests build books by hand).
    #[cfg(test)]
    pub(crate) fn with_token(token: u64) -> Self {
        Self {
            stash: std::ptr::null(),
            token,
        }
    }

    /// The recorded stash, whoever holds the node, if a thread that held
    /// an id took it from one.
    pub(crate) fn origin(&self) -> Option<*const ()> {
        (self.token() != 0).then_some(self.stash)
    }

    /// The recorded token (0: none).
    #[inline(always)]
    pub(crate) fn token(&self) -> u64 {
        self.token & !IN_BOOK
    }

    /// Marks the node as entered in its stash's loan book, so that `owned`
    /// sends its return around the fast path.
    pub(crate) fn enter_book(&mut self) {
        self.token |= IN_BOOK;
    }

    /// Marks the node as out of its stash's loan book.
    pub(crate) fn leave_book(&mut self) {
        self.token &= !IN_BOOK;
    }

    /// The recorded stash if this thread took the node from it and still
    /// owns it, whether the stash's book holds the node or not.
    #[inline(always)]
    pub(crate) fn mine(&self) -> Option<*const ()> {
        let token = self.token();
        (token != 0 && token == crate::sync::token()).then_some(self.stash)
    }

    /// `mine`, for a node in no book: the inlined return's one test (a
    /// node in a book never matches, for its [`IN_BOOK`] bit).
    #[inline(always)]
    pub(crate) fn owned(&self) -> Option<*const ()> {
        (self.token != 0 && self.token == crate::sync::token()).then_some(self.stash)
    }
}
