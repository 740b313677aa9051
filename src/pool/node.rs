//! Pooled objects live in heap nodes.
//!
//! Every object a pool makes lives in one `Box<Node<T>>` from its creation
//! to its drop: stashes, the overflow and guards hold the node's pointer,
//! so moving an object moves one word, whatever the size of `T`. The node
//! also records the pool that lent it, so that a guard is one pointer too,
//! and the stash it was lent from ([`Home`]), so that a guard dropped on
//! the thread that got it goes straight back there. Why nodes rather than
//! objects moved by value: [`implementation`](crate::implementation),
//! section 2.

use crate::pool::owner;

/// One pooled object and the pool it is lent from.
///
/// Aligned to a cache line: objects move between threads, and two small
/// nodes sharing a line would make two threads holding them write the same
/// line (false sharing) on every use. The two loan fields take 24 bytes, and
/// the alignment up to 56 more when `T` is large.
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
    pub(crate) value: T,
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
            value,
        })
    }

    /// The value, for writing: marks this loan as one that wrote it.
    #[inline(always)]
    pub(crate) fn write(&mut self) -> &mut T {
        self.written = true;
        &mut self.value
    }

    /// Whether the loan ending now wrote `value`, leaving the flag false
    /// for the next (a store only if it was set).
    #[inline(always)]
    pub(crate) fn take_written(&mut self) -> bool {
        let written = self.written;
        if written {
            self.written = false;
        }
        written
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
    token: u64,
}

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

    /// The recorded stash's address, if this thread is (still) the one
    /// that took the node from it, and so still owns that stash: a nonzero
    /// token is recorded only with a stash found for this thread (`here`),
    /// tokens are never reused, and a thread's exit hooks clear its token
    /// before it gives its id back (`owner.rs`).
    #[inline(always)]
    pub(crate) fn owned(&self) -> Option<*const ()> {
        let token = self.token;
        (token != 0 && token == owner::token()).then_some(self.stash)
    }
}
