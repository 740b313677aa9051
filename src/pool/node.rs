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

use crate::pool::owner;
use crate::sync::{owned_load, owned_store, AtomicU8};

/// Where a node stands with the loan book of the stash that lent it
/// (`loans.rs`). Only the book's owner (or a sweeper holding its stash)
/// moves a node into the book or out of it; while it is in the book, only
/// the thread that gives it back on another thread writes it, once.
pub(crate) mod loan {
    /// In no book: pooled, or lent without a place in its stash's book.
    pub(crate) const UNTRACKED: u8 = 0;
    /// Lent, with a place in its stash's book.
    pub(crate) const LENT: u8 = 1;
    /// Given back on another thread, recycled: pooled, in the book, for
    /// the book's owner (or a sweep) to take.
    pub(crate) const BACK: u8 = 2;
    /// Its object left the pool on another thread (kept by `into_inner`,
    /// refused by `recycle`, or dropped by a panic): the node is an empty
    /// shell in the book, for the book's owner (or a sweep) to free.
    pub(crate) const GONE: u8 = 3;
}

/// One pooled object and the pool it is lent from.
///
/// Aligned to a cache line: objects move between threads, and two small
/// nodes sharing a line would make two threads holding them write the same
/// line (false sharing) on every use. The loan fields take 32 bytes, and
/// the alignment up to 32 more when `T` is large.
///
/// While a node is in a loan book, its stash's owner (or a sweeper) reads
/// `loan` through the book's copy of the node's pointer, whoever holds the
/// node: so a lent node is reached through its raw pointer, never through
/// a `&mut Node` or a `Box` (which would claim every field, `loan`
/// included), until it leaves the book.
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
    /// The node's place in its stash's loan book, while it has one.
    pub(crate) slot: u32,
    /// The object; dropped with the node unless the node is [`loan::GONE`].
    value: ManuallyDrop<T>,
}

// SAFETY: `lender` and `home` are only addresses. `lender` is dereferenced
// by the guard that holds the node, under the guard's own `Send`/`Sync`
// rules; `home`'s stash only on the thread whose owner token it records
// (`Home::owned`). The node is as thread-safe as its value.
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
            value: ManuallyDrop::new(value),
        })
    }

    /// The object.
    #[cfg(test)]
    pub(crate) fn value(&self) -> &T {
        &self.value
    }

    /// The object, for the pool's own use (`with`, `recycle`).
    #[inline(always)]
    pub(crate) fn value_mut(&mut self) -> &mut T {
        &mut self.value
    }

    /// The object, out of its node, which is freed.
    #[allow(clippy::boxed_local)] // The node's box is what this frees.
    pub(crate) fn into_value(mut self: Box<Self>) -> T {
        // SAFETY: taken once: the node is marked empty before it drops.
        let value = unsafe { ManuallyDrop::take(&mut self.value) };
        owned_store(&mut self.loan, loan::GONE);
        value
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

    /// Drops the object of a lent node in place, leaving an empty shell.
    ///
    /// # Safety
    ///
    /// The caller holds `this` (a guard's node), and marks it
    /// [`loan::GONE`] afterwards (also if this unwinds), so the object is
    /// never dropped again.
    pub(crate) unsafe fn drop_value(this: *mut Self) {
        // SAFETY: the caller's word; field by field (see `write`).
        unsafe { ManuallyDrop::drop(&mut *std::ptr::addr_of_mut!((*this).value)) }
    }

    /// Moves the object of a lent node out, leaving an empty shell.
    ///
    /// # Safety
    ///
    /// As [`drop_value`](Self::drop_value).
    pub(crate) unsafe fn take_value(this: *mut Self) -> T {
        // SAFETY: the caller's word; field by field (see `write`).
        unsafe { ManuallyDrop::take(&mut *std::ptr::addr_of_mut!((*this).value)) }
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
}

impl<T> Drop for Node<T> {
    fn drop(&mut self) {
        // The node is this thread's alone now; whoever emptied it published
        // that with its release, which this thread acquired (`loans.rs`).
        if owned_load(&mut self.loan) != loan::GONE {
            // SAFETY: the object is there (not GONE), and this is the
            // node's one drop.
            unsafe { ManuallyDrop::drop(&mut self.value) }
        }
    }
}

/// Where a lent node came from: a stash of its pool, and the owner token
/// (`owner::token`) of the thread that took it.
///
/// Finding this thread's stash is the dearest part of a return (a chain of
/// dependent loads). A guard dropped on the thread that got it, the common
/// case, skips it: if this thread's token is the one recorded here, the
/// recorded stash is this thread's own
/// ([`implementation`](crate::implementation), section 6). Any other case
/// looks the stash up as usual.
///
/// The stash's type is erased (`Home` is not generic), so that a pool keeps
/// the unwind-safety auto traits of its objects.
pub(crate) struct Home {
    stash: *const (),
    /// The owner token, with [`IN_BOOK`] set while the stash's loan book
    /// holds the node.
    token: u64,
}

/// The top bit of `Home::token`, which no owner token reaches (they count
/// threads from 1).
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
            token: owner::token(),
        }
    }

    /// A home with `token` as the owner token (tests build stashes by
    /// hand, on threads without one).
    #[cfg(test)]
    pub(crate) fn with_token(stash: *const (), token: u64) -> Self {
        Self { stash, token }
    }

    /// The recorded stash's address, whoever holds the node.
    #[inline(always)]
    pub(crate) fn stash(&self) -> *const () {
        self.stash
    }

    /// The recorded owner token (0: none).
    #[inline(always)]
    pub(crate) fn token(&self) -> u64 {
        self.token & !IN_BOOK
    }

    /// Marks the node as entered in its stash's loan book (`loans.rs`), so
    /// that `owned` sends its return around the fast path.
    pub(crate) fn enter_book(&mut self) {
        self.token |= IN_BOOK;
    }

    /// Marks the node as out of its stash's loan book.
    pub(crate) fn leave_book(&mut self) {
        self.token &= !IN_BOOK;
    }

    /// The recorded stash's address if this thread took the node from it,
    /// whether the stash's loan book holds the node or not (see `owned`).
    #[inline(always)]
    pub(crate) fn mine(&self) -> Option<*const ()> {
        let token = self.token();
        (token != 0 && token == owner::token()).then_some(self.stash)
    }

    /// The recorded stash's address, if this thread is (still) the one
    /// that took the node from it, and so still owns that stash, and the
    /// stash's loan book does not hold the node: a nonzero token is
    /// recorded only with a stash found for this thread (`here`), tokens
    /// are never reused, and a thread's exit hooks clear its token before
    /// it gives its id back (`owner.rs`).
    #[inline(always)]
    pub(crate) fn owned(&self) -> Option<*const ()> {
        let token = self.token;
        (token != 0 && token == owner::token()).then_some(self.stash)
    }
}
