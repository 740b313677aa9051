//! Pooled objects live in heap nodes.
//!
//! A stash, the overflow and a guard all hold a `Box<Node<T>>` (or the
//! pointer inside one), so handing an object out, returning it, spilling it
//! or stealing it moves one pointer, whatever the size of `T`: a pool of
//! 64 KiB arrays costs what a pool of `Vec`s costs. (Go's `sync.Pool`
//! likewise stores pointers.) A guard is then a single pointer too, and the
//! node also carries the address of the pool that handed it out, so that the
//! guard's `drop` can give it back.
//!
//! Moving objects by pointer also keeps the CPU's store forwarding working:
//! a returned object and the next `get` touch the same 8-byte slot, where
//! copying a multi-word object in and out with different splits would stall
//! the load behind the stores still in flight.

/// One pooled object and the pool it is lent from.
///
/// Aligned to a cache line: objects move between threads, and two small
/// nodes sharing a line would make two threads holding them write the same
/// line (false sharing) on every use. It costs at most 56 bytes per object.
#[repr(align(64))]
pub(crate) struct Node<T> {
    /// The `LocalPool` that lent this node out, set by `get` on each loan
    /// (a pool may move between loans, but not while one is out, because
    /// the guard borrows it). Meaningless while the node is pooled.
    pub(crate) lender: *const (),
    pub(crate) value: T,
}

// SAFETY: `lender` is only an address, dereferenced by the guard that holds
// the node, under the guard's own `Send`/`Sync` rules; the node is as
// thread-safe as its value.
unsafe impl<T: Send> Send for Node<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Node<T> {}

impl<T> Node<T> {
    /// A node for a new or returned object, not lent out.
    pub(crate) fn boxed(value: T) -> Box<Self> {
        Box::new(Self {
            lender: std::ptr::null(),
            value,
        })
    }
}
