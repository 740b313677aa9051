//! Pooled objects live in heap nodes.
//!
//! A stash, the overflow and a guard all hold a `Box<Node<T>>` (or the
//! pointer inside one), so handing an object out, returning it, spilling it
//! or stealing it moves one pointer, whatever the size of `T`: a pool of
//! 64 KiB arrays costs what a pool of `Vec`s costs. (Go's `sync.Pool`
//! likewise stores pointers.) A guard is then a single pointer too, and the
//! node also carries the address of the pool that handed it out, so that the
//! guard's `drop` can give it back, and the stash it was taken from, so that
//! a guard dropped on the thread that got it goes straight back to that
//! stash without looking it up again (see [`Home`]).
//!
//! Moving objects by pointer also keeps the CPU's store forwarding working:
//! a returned object and the next `get` touch the same 8-byte slot, where
//! copying a multi-word object in and out with different splits would stall
//! the load behind the stores still in flight.

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
    /// A node for a new or returned object, not lent out.
    pub(crate) fn boxed(value: T) -> Box<Self> {
        Box::new(Self {
            lender: std::ptr::null(),
            home: Home::NONE,
            value,
        })
    }
}

/// Where a lent node came from: a stash of its pool, and the owner token
/// (`owner::token`) of the thread that took it.
///
/// Finding this thread's stash is the dearest part of a return (the pool's
/// shared state, the per-thread table's bucket and entry, the stash's own
/// allocation: a chain of dependent loads). A guard dropped on the thread
/// that got it, which is the common case, can skip all of it: if this
/// thread's token is the one recorded here, the recorded stash is this
/// thread's own. Tokens are never reused, so a guard that moved to another
/// thread never matches, and a thread's token is withdrawn (set to 0) by its
/// thread-exit hook, which runs before the thread gives up its thread id
/// and so its stashes (see `owner.rs`). Any other case
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
    /// that took the node from it: then the stash is still this thread's
    /// own. A nonzero token is recorded only with a stash found for this
    /// thread (`here`); the token matches, so this is the thread that took
    /// the node and its exit hooks have not run, and it therefore still
    /// holds the thread id through which it found the stash (`owner.rs`).
    #[inline(always)]
    pub(crate) fn owned(&self) -> Option<*const ()> {
        let token = self.token;
        (token != 0 && token == owner::token()).then_some(self.stash)
    }
}
