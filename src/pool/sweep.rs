//! The sweep: Go's victim rule, applied to every stash and the overflow.
//!
//! A sweep is the analogue of one Go GC cycle for one pool. The pool keeps a
//! sweep count, its *epoch*; every object is either fresh (returned since the
//! last sweep) or a *victim* (it was idle at the last sweep already). A sweep
//! drops the victims and makes every fresh object a victim, so an object
//! returned and never taken again survives exactly one sweep and is dropped
//! by the second, wherever it is:
//!
//! * **Stashes.** Each stash keeps its victims at the bottom
//!   (`Local::age`). The sweeper reaches a stash that another thread owns
//!   through the stash handshake (`stash.rs`): it claims every stash, issues
//!   one heavy barrier (`barrier.rs`) for them all, waits for owners that are
//!   inside their critical section, then works on each stash and releases
//!   it. Owners pay only a relaxed store, a compiler fence and a load on
//!   their path. Stashes of blocked or exited threads are reached the same
//!   way: they are in the pool's table until the pool drops.
//! * **The overflow.** Batches carry the epoch they were spilled in (their
//!   stamp); a batch stamped two or more sweeps ago holds only victims and is
//!   dropped whole (`Overflow::trim`). A batch taken back into a stash keeps
//!   its age there (`Local::install`).
//!
//! Everything that touches another thread's stash or the epoch runs under
//! the pool's sweep lock: sweeps, `clear`, pool close, the flush of an
//! exiting thread's stash, and making a stash (so a new stash starts at the
//! pool's epoch). None of them runs user code under the lock: the objects
//! they take are dropped after it is released, each by the thread that took
//! it. `close` (pool drop) drops what the pool holds and does not wait for a
//! concurrent sweep's drops: an object a sweep has taken out of the pool is
//! that sweep's to drop, on its own thread, and waiting for it would make
//! pool drop wait on user code that may need a lock the dropping thread
//! holds.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use crate::pool::barrier;
use crate::pool::node::Node;
use crate::pool::overflow::{Batch, Overflow};
use crate::pool::shared::Shared;
use crate::pool::stash::{Local, Stash};
use crate::sync::Ordering;

// === impl Shared ===

impl<T: Send> Shared<T> {
    /// One sweep (Go's victim rule): drops every object that was idle at the
    /// previous sweep and is still idle, and marks the rest. Returns once the
    /// dropped objects are dropped.
    pub(crate) fn sweep(&self) {
        self.trim(Trim::Victims);
    }

    /// Drops every idle object, in every stash and the overflow. Returns
    /// once they are dropped.
    pub(crate) fn clear(&self) {
        self.trim(Trim::All);
    }

    fn trim(&self, how: Trim) {
        let mut dead = Vec::new();
        {
            let mut sweeping = self.lock_sweep();
            // Nothing idle means nothing to trim or to mark: skip the heavy
            // barrier. (An object being returned right now is returned
            // concurrently with this sweep and may count as after it.)
            if self.closed.load(Ordering::Relaxed) || self.stats().idle == 0 {
                return;
            }
            match how {
                Trim::Victims => {
                    sweeping.epoch += 1;
                    let epoch = sweeping.epoch;
                    // Release: a stashless return that reads this stamps
                    // its object as returned during or after this sweep.
                    self.epoch.store(epoch, Ordering::Release);
                    let bounded = self.max_idle != usize::MAX;
                    let capacity = self.stash_capacity(sweeping.held);
                    let wanted = self.wanted.swap(false, Ordering::Relaxed);
                    let (mut kept, mut shed, mut given_up) = (0, Vec::new(), 0);
                    self.with_every_stash(|stash| {
                        stash.with_claimed(|local| {
                            local.age(epoch, &mut dead);
                            // A slot whose owner has not touched the pool
                            // since the last sweep goes back to the pool,
                            // if a thread found none free meanwhile.
                            let ops = stash.counters.total();
                            if wanted && local.held && ops == local.seen {
                                // Room reserved: pushed under the lock.
                                for batch in local.give_up(&self.overflow) {
                                    self.overflow.push(batch);
                                }
                                given_up += 1;
                            }
                            local.seen = ops;
                            if bounded {
                                // Shares as of now; what a stash holds
                                // beyond its share goes to the overflow.
                                local.capacity = if local.held { capacity } else { 0 };
                                local.shed(&mut shed);
                                kept += local.items.len();
                            }
                        });
                    });
                    let held = sweeping.held - given_up;
                    self.count_held(&mut sweeping, held);
                    self.overflow.trim(epoch, false, &mut dead);
                    if bounded {
                        // The bound: stashes and overflow together keep at
                        // most `max_idle`. What was shed is victims only, so
                        // it goes first, then the overflow's oldest.
                        let queued = self.overflow.len.load(Ordering::Relaxed);
                        let shed_len: usize = shed.iter().map(|b| b.items.len()).sum();
                        let room = self.max_idle.saturating_sub(kept);
                        let mut excess = (queued + shed_len).saturating_sub(room);
                        for mut batch in shed {
                            let n = excess.min(batch.items.len());
                            dead.extend(batch.items.drain(..n));
                            excess -= n;
                            if !batch.items.is_empty() {
                                self.overflow.put_back(batch);
                            }
                        }
                        self.overflow.cut(excess, &mut dead);
                    }
                }
                Trim::All => {
                    self.with_every_stash(|stash| {
                        stash.with_claimed(|local| local.drain(&mut dead));
                    });
                    self.overflow.trim(0, true, &mut dead);
                }
            }
            self.trimmed.fetch_add(dead.len() as u64, Ordering::Relaxed);
        }
        // Dropped outside the lock: user `Drop` code may use the pool.
        drop_all(dead);
    }

    /// Drops every pooled object and refuses further flushes (pool drop).
    ///
    /// Returns once every object the pool holds is dropped. It does not
    /// wait for objects a concurrent sweep (the background sweeper's) took
    /// out of the pool before: those are that sweep's, and it drops them on
    /// its own thread. Waiting for them would wait on user `Drop` code on
    /// another thread, which may need a lock the dropping thread holds.
    pub(crate) fn close(&self) {
        let mut dead = Vec::new();
        {
            let _sweeping = self.lock_sweep();
            if self.closed.load(Ordering::Relaxed) {
                return;
            }
            self.with_every_stash(|stash| {
                stash.with_claimed(|local| local.drain(&mut dead));
            });
            self.overflow.trim(0, true, &mut dead);
            self.closed.store(true, Ordering::Release);
        }
        drop_all(dead);
    }

    /// Moves an exiting thread's objects to the overflow, so other threads
    /// can use them at once instead of after its id is reused.
    pub(crate) fn flush(&self, stash: &Stash<T>) {
        let mut sweeping = self.lock_sweep();
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        // Claimed like a sweep: by now the thread-id may already belong to a
        // new thread that owns this stash.
        let (mut batches, mut held) = (Vec::new(), false);
        self.with_claimed_stashes(&[stash], |stash| {
            stash.with_claimed(|local| {
                held = local.held;
                batches = local.give_up(&self.overflow);
            });
        });
        if held {
            let held = sweeping.held - 1;
            self.count_held(&mut sweeping, held);
        }
        // Pushed under the lock, so `close` cannot miss them.
        for batch in batches {
            self.overflow.push(batch);
        }
    }

    pub(super) fn rebalance(&self, capacity: usize) {
        let mut shed = Vec::new();
        self.with_every_stash(|stash| {
            stash.with_claimed(|local| {
                local.capacity = if local.held { capacity } else { 0 };
                local.shed(&mut shed);
            });
        });
        // Past the overflow's bound if need be: these objects were pooled
        // already, and the next sweep enforces `max_idle` on the whole pool.
        shed.into_iter()
            .for_each(|batch| self.overflow.put_back(batch));
    }

    /// Claims every stash, issues one heavy barrier for them all, and runs
    /// `f` on each. Call with the sweep lock held.
    fn with_every_stash(&self, f: impl FnMut(&Stash<T>)) {
        let mut stashes = Vec::new();
        self.stashes.for_each(|stash| stashes.push(&**stash));
        self.with_claimed_stashes(&stashes, f);
    }

    /// Claims `stashes`, issues one heavy barrier for them all, and runs `f`
    /// on each, which must end with `with_claimed`. Call with the sweep lock
    /// held. If anything unwinds (the barrier cannot fail in practice, but a
    /// kernel may refuse it), the claims `f` did not release are released,
    /// so owners are never locked out.
    fn with_claimed_stashes(&self, stashes: &[&Stash<T>], mut f: impl FnMut(&Stash<T>)) {
        struct Release<'a, T>(&'a [&'a Stash<T>], usize);
        impl<T> Drop for Release<'_, T> {
            fn drop(&mut self) {
                self.0[self.1..].iter().for_each(|stash| stash.release());
            }
        }
        stashes.iter().for_each(|stash| stash.claim());
        let mut unclaimed = Release(stashes, 0);
        barrier::heavy(self.strategy);
        for stash in stashes {
            f(stash);
            unclaimed.1 += 1;
        }
    }
}

/// What a trim drops.
#[derive(Clone, Copy)]
enum Trim {
    /// Objects idle since the previous sweep (a sweep).
    Victims,
    /// Every idle object (`clear`).
    All,
}

/// Drops every object, even if some `Drop` impls panic; then re-raises the
/// first panic. (Dropping the `Vec` would abort the process at a second
/// panicking `Drop`.) The payloads of the other panics are dropped under a
/// guard ([`drop_payload`]): a payload whose own `Drop` panics would
/// otherwise unwind out of here with the first payload still held.
fn drop_all<T>(dead: Vec<Box<Node<T>>>) {
    let mut first = None;
    for node in dead {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| drop(node))) {
            match first {
                None => first = Some(panic),
                Some(_) => drop_payload(panic),
            }
        }
    }
    if let Some(panic) = first {
        resume_unwind(panic);
    }
}

/// Drops a panic payload that nobody will look at, even if its own `Drop`
/// panics: that panic's payload is dropped the same way, and one whose
/// drop panics yet again is leaked rather than chased forever.
pub(crate) fn drop_payload(payload: Box<dyn std::any::Any + Send>) {
    let mut payload = Some(payload);
    for _ in 0..2 {
        let Some(next) = payload.take() else { return };
        payload = catch_unwind(AssertUnwindSafe(|| drop(next))).err();
    }
    std::mem::forget(payload);
}

// === impl Local ===

impl<T> Local<T> {
    /// Moves the oldest objects beyond `capacity` into batches for the
    /// overflow: victims and fresh objects apart, each with its stamp.
    pub(crate) fn shed(&mut self, batches: &mut Vec<Batch<T>>) {
        let excess = self.items.len().saturating_sub(self.capacity);
        let victims = excess.min(self.victims);
        if victims > 0 {
            batches.push(self.take_bottom(victims, self.epoch.saturating_sub(1)));
        }
        if excess > victims {
            batches.push(self.take_bottom(excess - victims, self.epoch));
        }
    }

    /// One sweep (Go's victim rule): drops the victims into `dead` and makes
    /// every remaining object a victim.
    pub(crate) fn age(&mut self, epoch: u64, dead: &mut Vec<Box<Node<T>>>) {
        dead.extend(self.items.drain(..self.victims));
        self.victims = self.items.len();
        self.epoch = epoch;
        self.release_memory();
    }

    /// Moves every object into batches for the overflow, as far as it has
    /// room (a thread exiting). What does not fit stays for sweeps to age.
    pub(crate) fn flush(&mut self, overflow: &Overflow<T>) -> Vec<Batch<T>> {
        let mut batches = Vec::new();
        let fresh = self.items.len() - self.victims;
        let groups = [
            (self.victims, self.epoch.saturating_sub(1)),
            (fresh, self.epoch),
        ];
        for (count, stamp) in groups {
            let granted = overflow.reserve(count);
            if granted > 0 {
                batches.push(self.take_bottom(granted, stamp));
            }
            if granted < count {
                break; // keep the ages in order: the rest stays here
            }
        }
        self.release_memory();
        batches
    }

    /// Gives this stash's slot back (`shared.rs`): its objects go to the
    /// overflow as far as it has room (the batches, whose room is
    /// reserved), and from now on it keeps nothing.
    pub(crate) fn give_up(&mut self, overflow: &Overflow<T>) -> Vec<Batch<T>> {
        self.held = false;
        self.capacity = 0;
        self.flush(overflow)
    }

    /// Moves every object into `dead` (the pool is dropping).
    pub(crate) fn drain(&mut self, dead: &mut Vec<Box<Node<T>>>) {
        dead.append(&mut self.items);
        self.victims = 0;
        self.release_memory();
    }
}

// === impl Overflow ===

impl<T> Overflow<T> {
    /// Moves up to `excess` objects into `dead`, oldest batches first, then
    /// single objects (`max_idle` applied to the whole pool by a sweep).
    ///
    /// Looks at each batch queued when it starts at most once, as `trim`
    /// does, so returns racing the sweep cannot keep it going; a batch cut
    /// in part is queued again behind the others.
    pub(crate) fn cut(&self, mut excess: usize, dead: &mut Vec<Box<Node<T>>>) {
        for _ in 0..self.queue.len() {
            if excess == 0 {
                break;
            }
            let Some(mut batch) = self.pop() else { break };
            // The batch's oldest objects are at its front.
            let n = excess.min(batch.items.len());
            dead.extend(batch.items.drain(..n));
            excess -= n;
            if !batch.items.is_empty() {
                self.put_back(batch);
            }
        }
        // Then single objects, the longest idle first.
        let cut = self.singles.cut(excess, dead);
        self.len.fetch_sub(cut, Ordering::Relaxed);
    }

    /// One sweep to `epoch`: moves the objects of every batch and single
    /// stamped `epoch - 2` or earlier into `dead`, or all of them if `all`.
    ///
    /// Looks at each batch queued when it starts once (batches kept are
    /// queued again behind it), so concurrent spills cannot keep it going.
    /// Batches taken by gets meanwhile are simply not seen; batches pushed
    /// meanwhile were returned during the sweep and count as younger.
    pub(crate) fn trim(&self, epoch: u64, all: bool, dead: &mut Vec<Box<Node<T>>>) {
        let mut kept = Vec::new();
        for _ in 0..self.queue.len() {
            let Some(mut batch) = self.queue.pop() else {
                break;
            };
            if all || batch.stamp + 2 <= epoch {
                self.len.fetch_sub(batch.items.len(), Ordering::Relaxed);
                dead.append(&mut batch.items);
            } else {
                kept.push(batch);
            }
        }
        for batch in kept {
            self.queue.push(batch);
        }
        let trimmed = self
            .singles
            .trim(|single| !all && single.stamp + 2 > epoch, dead);
        self.len.fetch_sub(trimmed, Ordering::Relaxed);
    }
}
