//! Pooled objects live in heap nodes.
//!
//! Every object a pool makes lives in one `Box<Node<T>>` from its creation
//! to its drop: stashes, the overflow and guards hold the node's pointer,
//! so moving an object moves one word, whatever the size of `T`. The node
//! also records the pool that lent it, so that a guard is one pointer too,
//! and the stash it was lent from ([`Home`]), so that a guard dropped on
//! the thread that got it goes straight back there, and one dropped on
//! another thread can send it back to that stash's remote list
//! (`remote.rs`), linked through [`Node::next`]. Why nodes rather than
//! objects moved by value: [`implementation`](crate::implementation),
//! section 2.

use crate::sync::token;

/// One pooled object and where it was lent from.
///
/// Aligned to a cache line: objects move between threads, and two small
/// nodes sharing a line would make two threads holding them write the same
/// line (false sharing) on every use.
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
    /// The next node of the remote list this node is in (`remote.rs`);
    /// meaningless elsewhere.
    pub(crate) next: *mut Node<T>,
    pub(crate) value: T,
}

// SAFETY: `lender`, `home` and `next` are only addresses. `lender` is
// dereferenced by the guard that holds the node, under the guard's own
// `Send`/`Sync` rules; `home`'s stash only on the thread whose token it
// records (`Home::mine`) or through the stash's thread-safe parts; `next`
// only by the thread that took the node's list whole. The node is as
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
            next: std::ptr::null_mut(),
            value,
        })
    }

    /// The object, out of its node, which is freed.
    #[allow(clippy::boxed_local)] // The node's box is what this frees.
    pub(crate) fn into_value(self: Box<Self>) -> T {
        self.value
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
/// another thread). Any other case looks its stash up, or sends the object
/// to the recorded stash's remote list.
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
            token: token(),
        }
    }

    /// The recorded stash, if this thread took the node from it and still
    /// owns it.
    #[inline(always)]
    pub(crate) fn mine(&self) -> Option<*const ()> {
        (self.token != 0 && self.token == token()).then_some(self.stash)
    }

    /// The recorded stash, whoever holds the node, if a thread that held
    /// an id took it from one.
    pub(crate) fn origin(&self) -> Option<*const ()> {
        (self.token != 0).then_some(self.stash)
    }
}
