//! A stash's loan book: the objects its owner lent out, so that one given
//! back on another thread comes back to it.
//!
//! While a stash keeps a book, it enters the pointer of every node it
//! lends to a guard there, in the order they go out. A guard dropped on
//! the thread that took it goes back into the stash as before, and leaves
//! the book. One dropped on another thread is recycled there and marked
//! [`loan::BACK`] in its own node, with one release store to a cache line
//! that the return has just written anyway: no shared queue, no
//! read-modify-write. Its one fence is the light barrier (`barrier::light`:
//! a `SeqCst` fence until the process switches to `membarrier`, a compiler
//! fence after), before it checks that the book is open. When the stash
//! runs dry, its owner takes back what came back, reading the states of
//! the nodes it lent, all of them independent loads; sweeps, exit flushes
//! and `clear` reach the book through the stash's handshake like the rest
//! of the stash. Which stashes keep a book, and the rest of the argument:
//! [`implementation`](crate::implementation), section 3c.

use std::collections::VecDeque;
use std::ptr;

use crate::pool::node::{Node, loan};
use crate::sync::Ordering;

/// How many loans past the oldest one still out a get that finds the
/// stash empty looks at (loans come back roughly in the order they went
/// out, but one of several consumers may give its loans back before
/// another gives back an older one): each look may load a cache line that
/// the loan's holder is writing.
const LOOKS: usize = 4;

/// The loan book (module docs).
pub(crate) struct Loans<T> {
    /// The lent nodes, oldest first; null where a loan left the book out of
    /// order. A node in the book is [`loan::LENT`], [`loan::BACK`] or
    /// [`loan::GONE`], and its `slot` is its position.
    ring: VecDeque<*mut Node<T>>,
    /// The position of `ring`'s front: positions count loans, wrapping.
    front: u32,
    /// Whether loans are entered in the book: from when a thread that
    /// gives back this stash's loans alone gave one back without a place
    /// here, until a thread that gives back several stashes' loans gives
    /// one back here, or a sweep finds that none came back since the
    /// previous one. A thread whose objects stay with it pays this test.
    on: bool,
    /// Whether the last look at the book found loans given back: its owner
    /// takes fewer than come back, so its gets look at every turn, to take
    /// the newest (`Local::take`). An owner that takes as fast as they come
    /// back finds the front still out, and looks only when its stash is
    /// empty, so that it does not load a line that a returning thread is
    /// writing.
    pub(crate) coming_back: bool,
    /// Whether a loan came back through the book since the last sweep.
    came_back: bool,
    /// Whether the stash may keep a book at all: not in a pool with a
    /// bound on idle objects (`Loans::new`).
    allowed: bool,
}

// SAFETY: the book holds the pointers of nodes it shares with their
// holders by the protocol of the module docs; the objects move between
// threads, hence `T: Send`.
unsafe impl<T: Send> Send for Loans<T> {}

impl<T> Loans<T> {
    /// An empty book, kept off until advised (`turn`); never kept if not
    /// `allowed`: in a pool with a bound on idle objects, an object given
    /// back to a book would be idle in a stash past its share of the bound.
    pub(crate) fn new(allowed: bool) -> Self {
        Self {
            ring: VecDeque::new(),
            front: 0,
            on: false,
            coming_back: false,
            came_back: false,
            allowed,
        }
    }

    /// Whether loans are entered in the book now.
    #[inline(always)]
    pub(crate) fn is_on(&self) -> bool {
        self.on
    }

    /// Enters the owner's loans in the book from now on, or not (the
    /// advice of the threads that give them back, `Returns`).
    pub(crate) fn turn(&mut self, on: bool) {
        self.on = on && self.allowed;
    }

    /// Enters `node`, about to be lent, in the book if it has fewer than
    /// `max` places taken (loans out, and holes the front has yet to pass)
    /// and its owner has a token (by which a return tells the thread that
    /// took it from another); otherwise the node is lent untracked, and
    /// comes back as any returned object does.
    ///
    /// # Safety
    ///
    /// `node` is a live node this thread owns, in no book; it must stay
    /// live while it is in this one (until `untrack`, or until `take_back`
    /// or `collect` takes it out).
    #[inline(never)]
    pub(crate) unsafe fn track(&mut self, node: *mut Node<T>, max: usize) {
        // SAFETY: the caller owns the node.
        if unsafe { (*node).home.token() } == 0 {
            return;
        }
        let Ok(len) = u32::try_from(self.ring.len()) else {
            return;
        };
        if self.ring.len() >= max {
            return;
        }
        self.ring.push_back(node);
        // SAFETY: the caller owns the node. Relaxed: the guard that takes
        // the node to another thread publishes this with it.
        unsafe {
            (*node).slot = self.front.wrapping_add(len);
            (*node).home.enter_book();
            Node::loan(node).store(loan::LENT, Ordering::Relaxed);
        }
    }

    /// Takes `node`, back on the thread that lent it, out of the book.
    ///
    /// # Safety
    ///
    /// `node` is [`loan::LENT`] in this book, and this thread holds it.
    #[inline(always)]
    pub(crate) unsafe fn untrack(&mut self, node: *mut Node<T>) {
        // SAFETY: the caller's word.
        let at = unsafe { (*node).slot }.wrapping_sub(self.front) as usize;
        if at + 1 == self.ring.len() {
            // The newest loan (a thread that returns what it took last):
            // the book shrinks, and with it any hole now at its end.
            self.ring.pop_back();
            while self.ring.back().is_some_and(|node| node.is_null()) {
                self.ring.pop_back();
            }
        } else {
            self.ring[at] = ptr::null_mut();
        }
        // SAFETY: as above; the node leaves the book, so no other thread
        // reads its state any more.
        unsafe {
            (*node).home.leave_book();
            Node::loan(node).store(loan::UNTRACKED, Ordering::Relaxed);
        }
    }

    /// Moves the loans given back at the front of the book, up to the
    /// oldest still out, into `back`, oldest first, and frees the shells of
    /// loans whose objects left the pool on the way; if none were given
    /// back there, looks at the few loans behind the oldest still out too
    /// (`LOOKS`). For a stash that found itself empty.
    pub(crate) fn take_back(&mut self, back: &mut Vec<Box<Node<T>>>) {
        let before = back.len();
        while let Some(&node) = self.ring.front() {
            // SAFETY: nodes in the book are live (`track`'s contract).
            if !node.is_null() && !unsafe { self.settle(node, back) } {
                break;
            }
            self.ring.pop_front();
            self.front = self.front.wrapping_add(1);
        }
        self.coming_back = back.len() > before;
        if !back.is_empty() {
            return;
        }
        let mut looks = 0;
        for at in 1..self.ring.len() {
            if looks == LOOKS {
                break;
            }
            let node = self.ring[at];
            if node.is_null() {
                continue;
            }
            looks += 1;
            // SAFETY: nodes in the book are live (`track`'s contract).
            if unsafe { self.settle(node, back) } {
                self.ring[at] = ptr::null_mut();
            }
        }
    }

    /// A sweep: moves every loan given back into `back` (see `collect`),
    /// and stops entering loans if none came back through the book since
    /// the previous sweep.
    pub(crate) fn age(&mut self, back: &mut Vec<Box<Node<T>>>) {
        self.collect(back);
        if !self.came_back {
            self.on = false;
        }
        self.came_back = false;
    }

    /// Moves every loan given back into `back`, and frees the shells (a
    /// sweep, an exit flush, `clear`, the pool's drop, a closed book
    /// collected by a thread giving a loan back to it).
    pub(crate) fn collect(&mut self, back: &mut Vec<Box<Node<T>>>) {
        for at in 0..self.ring.len() {
            let node = self.ring[at];
            // SAFETY: nodes in the book are live (`track`'s contract).
            if !node.is_null() && unsafe { self.settle(node, back) } {
                self.ring[at] = ptr::null_mut();
            }
        }
        while self.ring.front().is_some_and(|node| node.is_null()) {
            self.ring.pop_front();
            self.front = self.front.wrapping_add(1);
        }
        while self.ring.back().is_some_and(|node| node.is_null()) {
            self.ring.pop_back();
        }
        if self.ring.is_empty() {
            // Nothing lent: the book gives its memory back.
            self.ring = VecDeque::new();
        }
    }

    /// Looks at one loan: one given back goes into `back`, a shell is
    /// freed; whether it did either (the loan is settled), for the caller
    /// to take it out of the book. `false`: still lent.
    ///
    /// # Safety
    ///
    /// `node` is a live node in this book.
    unsafe fn settle(&mut self, node: *mut Node<T>, back: &mut Vec<Box<Node<T>>>) -> bool {
        // Acquire: pairs with the release of the thread that gave the node
        // back, so its recycling (or emptying) happens before what follows.
        // SAFETY: the caller's word.
        match unsafe { Node::loan(node) }.load(Ordering::Acquire) {
            loan::BACK => {
                self.came_back = true;
                // SAFETY: given back, the node is the book's alone: its
                // last holder gave it up with the release above and never
                // touches it again. It came from `Box::into_raw`.
                let mut node = unsafe { Box::from_raw(node) };
                node.home.leave_book();
                node.loan.store(loan::UNTRACKED, Ordering::Relaxed);
                back.push(node);
                true
            }
            loan::GONE => {
                // SAFETY: as above; an empty shell, whose drop runs no
                // user code.
                drop(unsafe { Box::from_raw(node) });
                true
            }
            _ => false,
        }
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};

    use super::*;
    use crate::pool::node::Home;

    impl<T> Loans<T> {
        /// Loans in the book, given back or not.
        pub(crate) fn len(&self) -> usize {
            self.ring.iter().filter(|node| !node.is_null()).count()
        }
    }
    use crate::sync::Ordering;

    /// A node lent by a thread with a token, as `Local::lend` makes it.
    fn lent(value: u32) -> *mut Node<u32> {
        let mut node = Node::boxed(value);
        node.home = Home::with_token(7);
        Box::into_raw(node)
    }

    fn book(max: usize, values: &[u32]) -> (Loans<u32>, Vec<*mut Node<u32>>) {
        let mut loans = Loans::new(true);
        loans.turn(true);
        let nodes: Vec<_> = values.iter().map(|&v| lent(v)).collect();
        for &node in &nodes {
            // SAFETY: fresh nodes, owned here.
            unsafe { loans.track(node, max) };
        }
        (loans, nodes)
    }

    /// What another thread's return does (`Shared::give_back`).
    fn give_back(node: *mut Node<u32>) {
        // SAFETY: a node of the book, held by the test.
        unsafe { Node::loan(node) }.store(loan::BACK, Ordering::Release);
    }

    fn values(nodes: &[Box<Node<u32>>]) -> Vec<u32> {
        nodes.iter().map(|node| *node.value()).collect()
    }

    #[test]
    fn loans_given_back_come_out_at_the_front_oldest_first() {
        let (mut loans, nodes) = book(8, &[1, 2, 3]);
        assert_eq!(loans.len(), 3);
        give_back(nodes[0]);
        give_back(nodes[1]);
        let mut back = Vec::new();
        loans.take_back(&mut back);
        assert_eq!(values(&back), [1, 2], "newest last, for the stash's top");
        assert!(
            back.iter()
                .all(|node| node.loan.load(Ordering::Relaxed) == loan::UNTRACKED)
        );
        give_back(nodes[2]);
        loans.collect(&mut back);
        assert_eq!(values(&back), [1, 2, 3]);
        assert_eq!(loans.len(), 0);
    }

    #[test]
    fn a_loan_back_out_of_order_is_found_past_the_front() {
        let (mut loans, nodes) = book(8, &[1, 2, 3]);
        give_back(nodes[1]);
        let mut back = Vec::new();
        loans.take_back(&mut back);
        assert_eq!(values(&back), [2], "the front is out, the next is back");
        // SAFETY: nodes 1 and 3 are still in the book and held here.
        unsafe {
            loans.untrack(nodes[0]);
            loans.untrack(nodes[2]);
            drop(Box::from_raw(nodes[0]));
            drop(Box::from_raw(nodes[2]));
        }
        assert_eq!(loans.len(), 0);
    }

    #[test]
    fn untracking_the_newest_shrinks_the_book_and_others_leave_holes() {
        let (mut loans, nodes) = book(8, &[1, 2, 3]);
        // SAFETY: in the book, held here.
        unsafe {
            loans.untrack(nodes[1]);
            assert_eq!((loans.len(), loans.ring.len()), (2, 3), "a hole");
            loans.untrack(nodes[2]);
            assert_eq!(loans.ring.len(), 1, "the newest and the hole before it");
            loans.untrack(nodes[0]);
        }
        assert!(loans.ring.is_empty());
        for node in nodes {
            // SAFETY: out of the book, owned here.
            let node = unsafe { Box::from_raw(node) };
            assert_eq!(node.loan.load(Ordering::Relaxed), loan::UNTRACKED);
        }
    }

    #[test]
    fn a_full_book_lends_untracked() {
        let (mut loans, nodes) = book(2, &[1, 2]);
        let third = lent(3);
        // SAFETY: a fresh node.
        unsafe { loans.track(third, 2) };
        // SAFETY: as above.
        let state = unsafe { Node::loan(third) }.load(Ordering::Relaxed);
        assert_eq!(state, loan::UNTRACKED, "no room: lent untracked");
        // SAFETY: in the book, held here.
        unsafe {
            loans.untrack(nodes[0]);
            loans.untrack(nodes[1]);
        }
        assert_eq!(loans.len(), 0);
        for node in [nodes[0], nodes[1], third] {
            // SAFETY: out of any book, owned here.
            drop(unsafe { Box::from_raw(node) });
        }
    }

    #[test]
    fn a_thread_without_a_token_lends_untracked() {
        let mut loans = Loans::new(true);
        loans.turn(true);
        let node = Box::into_raw(Node::boxed(1u32));
        // SAFETY: a fresh node.
        unsafe { loans.track(node, 8) };
        assert_eq!(loans.len(), 0);
        // SAFETY: owned here.
        drop(unsafe { Box::from_raw(node) });
    }

    /// An object that counts its drops.
    struct Counted<'a>(&'a AtomicUsize);

    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, StdOrdering::Relaxed);
        }
    }

    #[test]
    fn the_shell_of_a_loan_kept_elsewhere_is_freed_without_its_object() {
        let drops = AtomicUsize::new(0);
        let mut loans = Loans::new(true);
        loans.turn(true);
        let mut node = Node::boxed(Counted(&drops));
        node.home = Home::with_token(7);
        let node = Box::into_raw(node);
        // SAFETY: a fresh node; then another thread's `into_inner`.
        let value = unsafe {
            loans.track(node, 8);
            Node::leave(node, std::mem::ManuallyDrop::into_inner)
        };
        let mut back = Vec::new();
        loans.take_back(&mut back);
        assert!(back.is_empty());
        assert_eq!(loans.len(), 0, "the shell is freed");
        assert_eq!(drops.load(StdOrdering::Relaxed), 0, "not its object");
        drop(value);
        assert_eq!(drops.load(StdOrdering::Relaxed), 1);
    }

    #[test]
    fn a_sweep_stops_a_book_that_saw_nothing_come_back() {
        let (mut loans, nodes) = book(8, &[1]);
        give_back(nodes[0]);
        let mut back = Vec::new();
        loans.age(&mut back);
        assert!(loans.is_on(), "one came back since the last sweep");
        loans.age(&mut back);
        assert!(!loans.is_on(), "none since");
        assert_eq!(values(&back), [1]);
    }
}

/// The book in a pool: objects taken on one thread and given back on
/// others, and what happens to them when their threads exit, sweep, clear,
/// refuse or keep them.
#[cfg(all(test, not(stashpool_loom)))]
mod flows {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering as StdOrdering};
    use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
    use std::thread;

    use crate::pool::stash::BATCH;
    use crate::{LocalPool, Pooled, Recycle};

    /// An object that counts its drops; `refuse` and `panic` make the
    /// recycler refuse it or panic on it.
    struct Obj {
        drops: Arc<AtomicUsize>,
    }

    impl Drop for Obj {
        fn drop(&mut self) {
            self.drops.fetch_add(1, StdOrdering::SeqCst);
        }
    }

    #[derive(Default)]
    struct Objs {
        drops: Arc<AtomicUsize>,
        refuse: AtomicBool,
        panic: AtomicBool,
    }

    impl Recycle<Obj> for Objs {
        fn create(&self) -> Obj {
            Obj {
                drops: Arc::clone(&self.drops),
            }
        }

        fn recycle(&self, _: &mut Obj) -> bool {
            assert!(!self.panic.load(StdOrdering::SeqCst), "recycle panics");
            !self.refuse.load(StdOrdering::SeqCst)
        }
    }

    type Pool = LocalPool<Obj, Objs>;

    fn pool() -> Pool {
        LocalPool::builder(Objs::default()).manual_sweep().build()
    }

    fn drops(pool: &Pool) -> usize {
        pool.recycler().drops.load(StdOrdering::SeqCst)
    }

    /// How many loans the stashes' books hold in all, and whether one is
    /// on (in the order of the stashes' thread ids, which other tests'
    /// threads shuffle).
    fn book(pool: &Pool) -> (usize, bool) {
        books(pool)
            .iter()
            .fold((0, false), |(n, on), &(m, o)| (n + m, on || o))
    }

    /// How many loans each stash's book holds, and whether it is on: read
    /// as a sweep reads them, under the sweep lock (an exiting thread's
    /// flush may claim a stash meanwhile).
    fn books(pool: &Pool) -> Vec<(usize, bool)> {
        let shared = pool.shared.get().expect("used");
        let _sweeping = shared.lock_sweep();
        let mut all = Vec::new();
        shared.with_every_stash(|stash| {
            stash.with_claimed(|local| all.push((local.loans.len(), local.loans.is_on())));
        });
        all
    }

    /// A thread that drops what it is sent, and says so: a consumer that
    /// gives back what producers took. If it serves one producer, it finds
    /// nothing of what it gave back when it is done.
    fn consumer<'a>(
        s: &'a thread::Scope<'a, '_>,
        pool: &'a Pool,
        one_producer: bool,
    ) -> (SyncSender<Pooled<'a, Obj, Objs>>, Receiver<()>) {
        let (send, guards) = sync_channel::<Pooled<'a, Obj, Objs>>(0);
        let (done, acks) = sync_channel(0);
        s.spawn(move || {
            for guard in guards {
                drop(guard);
                done.send(()).unwrap();
            }
            if one_producer {
                // What it gave back is not here, nor in the overflow.
                assert!(pool.try_get().is_none());
            }
        });
        (send, acks)
    }

    /// Takes an object and hands it to the consumer, which drops it;
    /// `rounds` times. The first return passes the object on as any
    /// return does and tells this thread's stash to keep a book; the next
    /// ones come back through it.
    fn hand_over<'a>(
        pool: &'a Pool,
        to: &SyncSender<Pooled<'a, Obj, Objs>>,
        acks: &Receiver<()>,
        rounds: usize,
    ) {
        for _ in 0..rounds {
            to.send(pool.get()).unwrap();
            acks.recv().unwrap();
        }
    }

    #[test]
    fn loans_given_back_elsewhere_come_back_to_the_taker() {
        let pool = pool();
        thread::scope(|s| {
            let (to, acks) = consumer(s, &pool, true);
            hand_over(&pool, &to, &acks, 3);
            let guard = pool.get();
            assert_eq!(book(&pool), (1, true), "in the taker's book");
            to.send(guard).unwrap();
            acks.recv().unwrap();
            hand_over(&pool, &to, &acks, 20);
        });
        let stats = pool.stats();
        assert_eq!((stats.created, stats.reused), (1, 23), "{stats:?}");
        assert_eq!(book(&pool).0, 1, "given back, waiting for the taker");
        drop(pool.get());
        assert_eq!(book(&pool).0, 0);
    }

    #[test]
    fn a_thread_returning_for_several_takers_shares_their_objects() {
        let pool = pool();
        thread::scope(|s| {
            let (to, acks) = consumer(s, &pool, false);
            hand_over(&pool, &to, &acks, 3);
            let (pool, to) = (&pool, &to);
            let acks = thread::scope(|s2| {
                s2.spawn(move || {
                    hand_over(pool, to, &acks, 3);
                    acks
                })
                .join()
                .unwrap()
            });
            hand_over(pool, to, &acks, 3);
        });
        // The consumer gave back two threads' objects: neither keeps a book
        // any more, and what it gave back is shared, a batch at a time: it
        // gathered the last ones, fewer than a batch, and the takers made
        // objects meanwhile, at most a batch more than they would have.
        assert!(!book(&pool).1, "{:?}", books(&pool));
        let gathered = pool.stats().idle;
        assert!(gathered > 0 && gathered <= BATCH, "{:?}", pool.stats());
        assert!(
            pool.stats().created <= 2 + BATCH as u64,
            "{:?}",
            pool.stats()
        );
    }

    #[test]
    fn loans_given_back_after_their_thread_exits_are_found_at_once() {
        let pool = pool();
        let (to_main, held) = sync_channel(2);
        thread::scope(|s| {
            let (to, acks) = consumer(s, &pool, true);
            let (pool, to_main) = (&pool, &to_main);
            // The taker exits with two of its loans out, in its book.
            s.spawn(move || {
                hand_over(pool, &to, &acks, 2);
                to_main.send(pool.get()).unwrap();
                to_main.send(pool.get()).unwrap();
                assert_eq!(book(pool).0, 2);
            })
            .join()
            .unwrap();
        });
        let created = pool.stats().created;
        let guards: Vec<_> = held.try_iter().collect();
        assert_eq!(guards.len(), 2);
        drop(guards);
        // Given back to a closed book; the next gets find them.
        let again: Vec<_> = (0..2).map(|_| pool.get()).collect();
        assert_eq!(pool.stats().created, created, "{:?}", pool.stats());
        drop(again);
    }

    #[test]
    fn loans_given_back_age_out_like_any_idle_object() {
        let pool = pool();
        thread::scope(|s| {
            let (to, acks) = consumer(s, &pool, true);
            hand_over(&pool, &to, &acks, 4);
        });
        assert_eq!(book(&pool).0, 1, "the last one waits in the book");
        assert_eq!(pool.stats().idle, 1);
        pool.sweep();
        assert_eq!(
            (pool.stats().idle, drops(&pool)),
            (1, 0),
            "survives one sweep"
        );
        pool.sweep();
        assert_eq!((pool.stats().idle, drops(&pool)), (0, 1), "not two");
    }

    #[test]
    fn clear_and_drop_reach_loans_given_back() {
        let pool = pool();
        thread::scope(|s| {
            let (to, acks) = consumer(s, &pool, true);
            hand_over(&pool, &to, &acks, 4);
        });
        pool.clear();
        assert_eq!((pool.stats().idle, drops(&pool)), (0, 1));
        let drops_seen = Arc::clone(&pool.recycler().drops);
        thread::scope(|s| {
            let (to, acks) = consumer(s, &pool, true);
            hand_over(&pool, &to, &acks, 4);
        });
        drop(pool);
        assert_eq!(
            drops_seen.load(StdOrdering::SeqCst),
            2,
            "the pool's drop too"
        );
    }

    #[test]
    fn objects_kept_refused_or_panicked_on_elsewhere_leave_only_a_shell() {
        let pool = pool();
        thread::scope(|s| {
            let (to, acks) = consumer(s, &pool, true);
            hand_over(&pool, &to, &acks, 3);
            // Kept by another thread: its object leaves, the book frees the
            // shell.
            let kept = thread::scope(|s2| {
                let guard = pool.get();
                s2.spawn(move || Pooled::into_inner(guard)).join().unwrap()
            });
            assert_eq!(drops(&pool), 0);
            drop(kept);
            assert_eq!(drops(&pool), 1);
            // Refused by the recycler on the consumer: dropped there.
            pool.recycler().refuse.store(true, StdOrdering::SeqCst);
            to.send(pool.get()).unwrap();
            acks.recv().unwrap();
            assert_eq!(drops(&pool), 2);
            pool.recycler().refuse.store(false, StdOrdering::SeqCst);
            // A recycler that panics on another thread: the object drops
            // as the panic unwinds, and the pool stays usable.
            pool.recycler().panic.store(true, StdOrdering::SeqCst);
            let guard = pool.get();
            thread::scope(|s2| {
                s2.spawn(move || {
                    let unwound = catch_unwind(AssertUnwindSafe(|| drop(guard)));
                    assert!(unwound.is_err());
                });
            });
            pool.recycler().panic.store(false, StdOrdering::SeqCst);
            assert_eq!(drops(&pool), 3);
            hand_over(&pool, &to, &acks, 3);
        });
        let stats = pool.stats();
        assert_eq!(stats.discarded, 2, "{stats:?}");
        assert_eq!(
            stats.created,
            drops(&pool) as u64 + stats.idle as u64,
            "{stats:?}"
        );
        assert!(
            books(&pool).iter().all(|&(n, _)| n <= 1),
            "shells freed: {:?}",
            books(&pool)
        );
    }
}
