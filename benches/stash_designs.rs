//! Where a pool keeps its stashes: per thread (stashpool) or per CPU.
//!
//! * **Per thread.** Each thread keeps a stash with one slot per pool it
//!   uses. Only the rare sweeper ever reaches into another thread's stash,
//!   and it pays for excluding the owner (a process-wide barrier), so the
//!   owner's get and return use plain loads and stores: no locked
//!   instruction on the hot path.
//! * **Per CPU.** One slot per CPU, a shared queue behind them: stashes
//!   bounded by the CPUs, whatever the number of threads. A thread reads its
//!   CPU (`sched_getcpu`) and must then claim that CPU's slot with a
//!   compare-and-swap, because between the read and the use it can be
//!   preempted (and another thread run on that CPU) or migrate. A get and a
//!   return are separate operations, each with its own read and claim, so a
//!   get+return pays two locked instructions. A claim that fails (another
//!   thread holds the slot, often one preempted while holding it) falls back
//!   to the shared queue. Only an rseq critical section (the kernel restarts
//!   it on preemption or migration) or a region without preemption (Go's
//!   per-P pinning) avoids the claim; neither is open to a portable library.
//!
//! Reading the CPU straight from the rseq area measured the same as
//! `sched_getcpu`, because glibc's `sched_getcpu` (2.35 and later) is that
//! one load: the locked instruction is the cost, not the CPU read.
//!
//! The workload is `benches/pool.rs`'s `hot`: get a 4 KiB `Vec<u8>`, write
//! 64 bytes, return it; the floor is a bare `thread_local!` stash. Every rep
//! runs every design on one thread and on all available threads, in turn,
//! so they see the same machine; each figure is the best rep. Threads start
//! together from a spinning start and stamp their own start, end and CPU
//! time (which leaves out time spent descheduled, so it stays steady when
//! other processes share the cores).
//!
//! `cargo bench --bench stash_designs` prints the table and writes it to
//! `benches/results/stash_designs.md`.

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("stash_designs is Linux-only: it reads the CPU with sched_getcpu");
}

#[path = "common/sitting.rs"]
mod sitting;

#[cfg(target_os = "linux")]
mod linux {
    use std::cell::{RefCell, UnsafeCell};
    use std::hint::{self, black_box};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use std::thread;
    use std::time::{Duration, Instant};

    use crossbeam_utils::CachePadded;
    use stashpool::LocalPool;

    /// Get+returns per thread per rep.
    const ITERS: u64 = 2_000_000;
    /// Timed reps, after one untimed warm-up.
    const REPS: usize = 9;
    /// Most buffers one CPU slot keeps; the rest go to the shared queue.
    const SLOT_CAP: usize = 64;
    const WRITE: [u8; 64] = [7; 64];

    fn new_buf() -> Vec<u8> {
        Vec::with_capacity(4096)
    }

    #[inline(always)]
    fn fill(buf: &mut Vec<u8>) {
        buf.clear();
        buf.extend_from_slice(&WRITE);
        black_box(&*buf);
    }

    thread_local! {
        static FLOOR: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    }

    /// One CPU's slot: whoever swaps `held` from false to true owns `items`.
    struct Slot {
        held: AtomicBool,
        items: UnsafeCell<Vec<Vec<u8>>>,
    }

    impl Slot {
        /// One CAS: false when another thread holds the slot.
        #[inline(always)]
        fn claim(&self) -> bool {
            self.held
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        }
    }

    /// Per-CPU stashes over a shared queue.
    struct PerCpu {
        slots: Box<[CachePadded<Slot>]>,
        shared: Mutex<Vec<Vec<u8>>>,
        /// Claims that failed: the slot was held, or the CPU was unknown.
        failed: AtomicU64,
    }

    // SAFETY: a slot's `items` is touched only by the thread whose claim
    // swapped its `held` to true (Acquire), until it stores false (Release).
    unsafe impl Sync for PerCpu {}

    impl PerCpu {
        fn new(cpus: usize) -> Self {
            let slots = (0..cpus)
                .map(|_| {
                    CachePadded::new(Slot {
                        held: AtomicBool::new(false),
                        items: UnsafeCell::new(Vec::with_capacity(SLOT_CAP)),
                    })
                })
                .collect();
            Self {
                slots,
                shared: Mutex::new(Vec::new()),
                failed: AtomicU64::new(0),
            }
        }

        /// The current CPU's slot, claimed with one CAS; `None` to fall back.
        #[inline(always)]
        fn claim(&self) -> Option<&Slot> {
            // SAFETY: `sched_getcpu` has no preconditions.
            let cpu = unsafe { libc::sched_getcpu() };
            let slot = usize::try_from(cpu)
                .ok()
                .and_then(|cpu| self.slots.get(cpu));
            match slot {
                Some(slot) if slot.claim() => Some(slot),
                _ => {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    None
                }
            }
        }

        #[inline(always)]
        fn get(&self) -> Vec<u8> {
            let buf = self.claim().and_then(|slot| {
                // SAFETY: this thread holds the slot.
                let buf = unsafe { (*slot.items.get()).pop() };
                slot.held.store(false, Ordering::Release);
                buf
            });
            buf.unwrap_or_else(|| self.shared.lock().unwrap().pop().unwrap_or_else(new_buf))
        }

        #[inline(always)]
        fn put(&self, buf: Vec<u8>) {
            let spilled = match self.claim() {
                Some(slot) => {
                    // SAFETY: this thread holds the slot.
                    let items = unsafe { &mut *slot.items.get() };
                    let spilled = if items.len() < SLOT_CAP {
                        items.push(buf);
                        None
                    } else {
                        Some(buf)
                    };
                    slot.held.store(false, Ordering::Release);
                    spilled
                }
                None => Some(buf),
            };
            if let Some(buf) = spilled {
                self.shared.lock().unwrap().push(buf);
            }
        }
    }

    /// This thread's CPU time so far.
    fn thread_cpu() -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid place for the result.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    /// `ITERS` calls of `op` on each of `threads` threads: the wall time
    /// from the earliest start to the latest end, and the most CPU time one
    /// thread took. One thread runs on the calling thread, with a warm cache.
    fn run(threads: usize, op: impl Fn() + Sync) -> (Duration, Duration) {
        let arrived = AtomicUsize::new(0);
        let timed = || {
            // Spin rather than block, so every thread starts at once; yield
            // now and then so a thread without a core can still arrive.
            arrived.fetch_add(1, Ordering::AcqRel);
            let mut spins = 0u32;
            while arrived.load(Ordering::Acquire) < threads {
                hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(256) {
                    thread::yield_now();
                }
            }
            let (start, cpu) = (Instant::now(), thread_cpu());
            for _ in 0..ITERS {
                op();
            }
            let cpu = thread_cpu() - cpu;
            (start, Instant::now(), cpu)
        };
        let stamps: Vec<_> = if threads == 1 {
            vec![timed()]
        } else {
            thread::scope(|s| {
                let handles: Vec<_> = (0..threads).map(|_| s.spawn(timed)).collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            })
        };
        let first = stamps.iter().map(|s| s.0).min().unwrap();
        let last = stamps.iter().map(|s| s.1).max().unwrap();
        (last - first, stamps.iter().map(|s| s.2).max().unwrap())
    }

    pub fn main() {
        let all = thread::available_parallelism().map_or(1, |n| n.get());
        let mut thread_counts = vec![1, all];
        thread_counts.dedup();
        // Slots for every CPU that may come online, not just those online now.
        // SAFETY: `sysconf` has no preconditions.
        let conf = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        let per_cpu = PerCpu::new(usize::try_from(conf).unwrap_or(0).max(all));
        let stash: LocalPool<Vec<u8>> = LocalPool::new(new_buf);

        let floor = || {
            let mut buf = FLOOR.with(|s| s.borrow_mut().pop()).unwrap_or_else(new_buf);
            fill(&mut buf);
            FLOOR.with(|s| s.borrow_mut().push(buf));
        };
        let cpu_stash = || {
            let mut buf = per_cpu.get();
            fill(&mut buf);
            per_cpu.put(buf);
        };
        let thread_stash = || fill(&mut stash.get());
        // Each design's loop is compiled for it: no indirect call per operation.
        type Runner<'a> = &'a dyn Fn(usize) -> (Duration, Duration);
        let designs: [(&str, Runner); 3] = [
            ("`thread_local!` floor", &|t| run(t, floor)),
            ("per CPU: `sched_getcpu` + CAS claim", &|t| {
                run(t, cpu_stash)
            }),
            ("per thread: stashpool `LocalPool::get`", &|t| {
                run(t, thread_stash)
            }),
        ];

        // best[threads][design] = (wall, thread CPU time); failed claims per thread count.
        let mut best = vec![[(Duration::MAX, Duration::MAX); 3]; thread_counts.len()];
        let mut failed = vec![0; thread_counts.len()];
        for rep in 0..=REPS {
            for (t, &threads) in thread_counts.iter().enumerate() {
                let failed_before = per_cpu.failed.load(Ordering::Relaxed);
                for (d, (_, runner)) in designs.iter().enumerate() {
                    let (wall, cpu) = runner(threads);
                    if rep > 0 {
                        best[t][d] = (best[t][d].0.min(wall), best[t][d].1.min(cpu));
                    }
                }
                if rep > 0 {
                    failed[t] += per_cpu.failed.load(Ordering::Relaxed) - failed_before;
                }
            }
        }

        let ns = |d: Duration| d.as_secs_f64() * 1e9 / ITERS as f64;
        let mut table = String::from(
            "| threads | design | wall ns | ÷ floor | thread CPU ns | ÷ floor | failed claims |\n\
             | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n",
        );
        for (t, &threads) in thread_counts.iter().enumerate() {
            let (floor_wall, floor_cpu) = (ns(best[t][0].0), ns(best[t][0].1));
            for (d, (name, _)) in designs.iter().enumerate() {
                let (wall, cpu) = (ns(best[t][d].0), ns(best[t][d].1));
                let claims = 2 * ITERS * (REPS * threads) as u64;
                let failed = match d {
                    1 => format!("{:.2}%", 100.0 * failed[t] as f64 / claims as f64),
                    _ => "-".to_owned(),
                };
                table += &format!(
                    "| {threads} | {name} | {wall:.1} | {:.2} | {cpu:.1} | {:.2} | {failed} |\n",
                    wall / floor_wall,
                    cpu / floor_cpu
                );
            }
        }
        let out = format!(
            "## Per-thread against per-CPU stashes: a hot get+return\n\n\
             `cargo bench --bench stash_designs`: a 4 KiB `Vec<u8>` got, written (64 bytes) and \
             returned, {ITERS} times per thread per rep; best of {REPS} interleaved reps, on one \
             thread and on all available threads. ns per get+return per thread: wall (latest end \
             minus earliest start) and the most CPU time one thread took (which leaves out time \
             spent descheduled); ratios to the `thread_local!` floor of the same thread count. \
             Failed claims: the share of per-CPU claims (two per get+return) that found the slot \
             held (or the CPU unknown) and fell back to the shared queue.\n\n\
             Commit `{}`; {}.\n\n{table}",
            super::sitting::commit(),
            super::sitting::machine()
        );
        print!("{out}");
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/results");
        std::fs::write(format!("{dir}/stash_designs.md"), out).unwrap();
    }
}
