//! The sweep: Go's victim rule, applied to every stash and the overflow.
//!
//! A sweep is one Go GC cycle for one pool: it drops every object that was
//! idle at the previous sweep (a *victim*) and makes every other idle
//! object a victim, so an object returned and never taken again survives
//! exactly one sweep and is dropped by the second, wherever it is. Stashes
//! keep their victims at the bottom (`Local::age`) and are reached through
//! the stash handshake (`stash.rs`), with one heavy barrier for them all;
//! the overflow's batches and singles carry their age as a stamp
//! (`Overflow::trim`). All of it runs under the pool's sweep lock
//! (`shared.rs`), and what it takes is dropped after the lock is released,
//! by the thread that took it: [`implementation`](crate::implementation),
//! sections 5 and 7.

use crate::pool::shared::Shared;
use crate::pool::unwind::drop_all;
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
                    let max_idle = self.overflow.max_idle;
                    let capacity = self.stash_capacity(sweeping.held);
                    let wanted = self.wanted.swap(false, Ordering::Relaxed);
                    let (mut kept, mut shed, mut given_up) = (0, Vec::new(), 0);
                    self.with_every_stash(|stash| {
                        stash.returner.reset();
                        stash.with_claimed(|local| {
                            local.age(epoch, stash.counters.gets(), &mut dead);
                            // A slot whose owner has not touched the pool
                            // since the last sweep goes back to the pool,
                            // if a thread found none free meanwhile.
                            let ops = stash.counters.total();
                            let held = stash.returns.is_open();
                            if wanted && held && ops == local.seen {
                                // Closed after the heavy barrier: a loan
                                // given back meanwhile may wait in the book
                                // until the next sweep (section 3c).
                                stash.returns.open.store(0, Ordering::Relaxed);
                                // Room reserved: pushed under the lock.
                                for batch in local.give_up(&self.overflow) {
                                    self.overflow.push(batch);
                                }
                                given_up += 1;
                            }
                            local.seen = ops;
                            if max_idle.is_some() {
                                // Shares as of now.
                                local.set_capacity(if stash.returns.is_open() {
                                    capacity
                                } else {
                                    0
                                });
                            }
                            // What a stash holds beyond its limit (a share
                            // cut, or a limit halved by `age`) goes to the
                            // overflow.
                            local.shed(&mut shed);
                            kept += local.items.len();
                        });
                    });
                    let held = sweeping.held - given_up;
                    self.count_held(&mut sweeping, held);
                    self.overflow.trim(epoch, false, &mut dead);
                    if let Some(max_idle) = max_idle {
                        // The bound: stashes and overflow together keep at
                        // most `max_idle`. What was shed is victims only, so
                        // it goes first, then the overflow's oldest.
                        let queued = self.overflow.len();
                        let shed_len: usize = shed.iter().map(|b| b.items.len()).sum();
                        let room = max_idle.saturating_sub(kept);
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
                    } else {
                        // Victims all: the next sweep drops them if they
                        // are still idle then.
                        shed.into_iter()
                            .for_each(|batch| self.overflow.put_back(batch));
                    }
                }
                Trim::All => {
                    self.with_every_stash(|stash| {
                        stash.with_claimed(|local| local.drain(&mut dead));
                    });
                    self.overflow.trim(0, true, &mut dead);
                }
            }
            let bytes: usize = dead.iter().map(|node| node.bytes).sum();
            self.trimmed.fetch_add(dead.len() as u64, Ordering::Relaxed);
            self.trimmed_bytes
                .fetch_add(bytes as u64, Ordering::Relaxed);
            if let Some(budget) = &self.budget {
                budget.give(bytes);
            }
        }
        // Dropped outside the lock: user `Drop` code may use the pool.
        drop_all(dead);
    }

    /// Drops every pooled object and refuses further flushes (pool drop).
    ///
    /// Returns once every object the pool holds is dropped. It does not
    /// wait for objects a concurrent sweep (the background sweeper's) took
    /// out of the pool before: those are that sweep's to drop, on its own
    /// thread ([`implementation`](crate::implementation), section 7).
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
}

/// What a trim drops.
#[derive(Clone, Copy)]
enum Trim {
    /// Objects idle since the previous sweep (a sweep).
    Victims,
    /// Every idle object (`clear`).
    All,
}
