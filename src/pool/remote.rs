//! A stash's remote list: what other threads gave back of the objects its
//! thread took.
//!
//! A guard dropped on another thread than the one that took it sends its
//! recycled object back to the stash it came from, by pushing the node onto
//! that stash's list with one compare-and-swap; the stash's owner takes the
//! whole list with one swap when its stash runs dry (mimalloc's and
//! sharded-slab's remote frees). Nodes are only ever pushed one at a time
//! and taken all at once, so the list has no ABA problem and needs no
//! memory reclamation: a node belongs to whoever pushed it until the push
//! lands, and to whoever took the list after that.
//!
//! The list is *open* while its stash holds a slot and its thread lives.
//! A thread that pushes onto a list that was closed meanwhile takes the
//! list itself and passes what it holds on to the overflow: closing and
//! pushing form Dekker's pattern (a store, a barrier, a load on each side),
//! so either the closer's take finds the node or the pusher sees the list
//! closed. Why: [`implementation`](crate::implementation), section 3c.

use std::marker::PhantomData;

use crate::pool::barrier::{self, Strategy};
use crate::pool::fork;
use crate::pool::node::Node;
use crate::sync::{AtomicBool, AtomicPtr, Ordering};

pub(crate) struct Remote<T> {
    /// The newest node given back, linked to the older ones through
    /// `Node::next`; null when empty.
    head: AtomicPtr<Node<T>>,
    /// Whether the stash's owner takes from this list (see the module
    /// docs): whether the stash holds a slot. Written under the pool's sweep
    /// lock.
    open: AtomicBool,
    /// The process generation that made it (`fork::generation`): a forked
    /// child gives nothing back to its parent's stashes.
    generation: usize,
    _owns: PhantomData<Box<Node<T>>>,
}

// SAFETY: the list owns the nodes pushed onto it until they are taken, and
// hands them to one thread (`take`'s swap); `T: Send` lets them move.
unsafe impl<T: Send> Send for Remote<T> {}
// SAFETY: as above: every access to `head` is atomic.
unsafe impl<T: Send> Sync for Remote<T> {}

impl<T> Remote<T> {
    pub(crate) fn new(open: bool) -> Self {
        Self {
            head: AtomicPtr::new(std::ptr::null_mut()),
            open: AtomicBool::new(open),
            generation: fork::generation(),
            _owns: PhantomData,
        }
    }

    /// Whether this process made the list (a forked child's pool may be
    /// given back an object lent before the fork, which belongs elsewhere).
    pub(crate) fn here(&self) -> bool {
        self.generation == fork::generation()
    }

    /// Gives `node` back to this list's stash. If the list was closed, the
    /// list is taken back out (with `node`, and whatever else was given
    /// back since it closed) for the caller to pass on to the overflow.
    pub(crate) fn push(&self, node: Box<Node<T>>, strategy: Strategy) -> Option<Chain<T>> {
        let node = Box::into_raw(node);
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: this thread owns `node` until the exchange lands.
            unsafe { (*node).next = head };
            // Release: the node (the recycled object, `next`) is seen whole
            // by the thread that takes it (`take`'s acquire).
            match self
                .head
                .compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => head = now,
            }
        }
        // Dekker's pattern with `close` and the heavy barrier its caller
        // issues before taking the list (module docs).
        barrier::light(strategy);
        if self.open.load(Ordering::Relaxed) {
            None
        } else {
            Some(self.take())
        }
    }

    /// Takes every node given back so far, newest first.
    pub(crate) fn take(&self) -> Chain<T> {
        // A load first: an owner that finds its stash empty looks here on
        // every such get, and a swap would take the line from the threads
        // that push.
        if self.head.load(Ordering::Relaxed).is_null() {
            return Chain::EMPTY;
        }
        // Acquire: pairs with the pushes' release.
        Chain {
            head: self.head.swap(std::ptr::null_mut(), Ordering::Acquire),
        }
    }

    /// Whether the list is open: whether its stash holds a slot (module
    /// docs). Exact under the sweep lock and inside a critical section of
    /// the stash; a hint outside them.
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    /// Opens the list for the stash's owner (it holds a slot from now on).
    /// Call with the sweep lock held.
    pub(crate) fn open(&self) {
        self.open.store(true, Ordering::Relaxed);
    }

    /// Closes the list: from now on, a thread that gives a node back takes
    /// the list and passes it on. Call with the sweep lock held, then
    /// issue a heavy barrier before `take`.
    pub(crate) fn close(&self) {
        self.open.store(false, Ordering::Relaxed);
    }
}

impl<T> Drop for Remote<T> {
    fn drop(&mut self) {
        // The pool is dropping: no thread can give a node back any more.
        drop(self.take());
    }
}

/// Nodes taken from a remote list, newest first; what is not taken out is
/// dropped with it.
pub(crate) struct Chain<T> {
    head: *mut Node<T>,
}

impl<T> Chain<T> {
    const EMPTY: Self = Self {
        head: std::ptr::null_mut(),
    };

    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// Moves the nodes into `items`, oldest first (the newest on top).
    pub(crate) fn stack_onto(self, items: &mut Vec<Box<Node<T>>>) {
        let start = items.len();
        items.extend(self);
        items[start..].reverse();
    }
}

impl<T> Iterator for Chain<T> {
    type Item = Box<Node<T>>;

    fn next(&mut self) -> Option<Box<Node<T>>> {
        if self.head.is_null() {
            return None;
        }
        // SAFETY: the chain owns its nodes (taken whole from a list, each
        // from `Box::into_raw` in `push`), and unlinks each once.
        let node = unsafe { Box::from_raw(self.head) };
        self.head = node.next;
        Some(node)
    }
}

impl<T> Drop for Chain<T> {
    fn drop(&mut self) {
        self.for_each(drop);
    }
}
