//! A submitted task, type-erased, with small closures stored inline.
//!
//! The obvious representation, `Box<dyn FnOnce() + Send>`, costs a
//! `malloc` on the submitting thread and a `free` on the worker for every
//! task. Since the two are different threads, neither side's allocator
//! cache helps, and in the `tiny` benchmark (one-multiply tasks) the pair
//! is a large share of the pool's CPU time. Most closures submitted
//! to a pool capture a few words (an `Arc`, an index, a channel end), so a
//! `Task` keeps closures of up to three words in place, next to a pointer to
//! the functions that run and drop them; bigger or over-aligned ones go in a
//! `Box` whose thin pointer is kept the same way. A `Task` is four words, and
//! moving one through the queue moves the closure with it. A `spawn`ed
//! task's closure also holds its handle's packet (`packet.rs`), so closures
//! of up to two words stay inline there.

use std::marker::PhantomData;
use std::mem::{self, ManuallyDrop, MaybeUninit};
use std::ptr;

/// Room for a closure kept inline, in words.
const INLINE_WORDS: usize = 3;

type Slot = [MaybeUninit<usize>; INLINE_WORDS];

/// How a task ended, as far as the pool counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The closure returned.
    Returned,
    /// The closure caught a panic of the user's code itself and handed it on
    /// (a task made by `spawn`, whose `JoinHandle` carries the payload).
    Panicked,
}

/// How to run or drop the closure in a task's slot.
struct VTable {
    /// Takes the closure out of the slot and calls it.
    run: unsafe fn(&mut Slot) -> Outcome,
    /// Takes the closure out of the slot and drops it, uncalled.
    drop: unsafe fn(&mut Slot),
}

/// A closure that runs once, on any thread, and says how it ended.
pub(crate) struct Task {
    vtable: &'static VTable,
    /// The closure itself (`Inline`), or a `Box` of it (`Boxed`). Always
    /// initialised: a `Task` is made full and emptied only by being consumed.
    slot: Slot,
}

// SAFETY: a `Task` is made only from an `F: Send` (see `Task::new`), and
// owns it; nothing else refers to the slot.
unsafe impl Send for Task {}

impl Task {
    pub(crate) fn new<F: FnOnce() -> Outcome + Send + 'static>(f: F) -> Self {
        let mut slot: Slot = [MaybeUninit::uninit(); INLINE_WORDS];
        let vtable = if Inline::<F>::FITS {
            // SAFETY: `FITS` says the slot is large and aligned enough for an
            // `F`; the slot is ours and holds nothing yet.
            unsafe { ptr::write(slot.as_mut_ptr().cast::<F>(), f) };
            Inline::<F>::VTABLE
        } else {
            let boxed: *mut F = Box::into_raw(Box::new(f));
            // SAFETY: a pointer fits in the first word, which is aligned for
            // one; written as a pointer, so it keeps its provenance.
            unsafe { ptr::write(slot.as_mut_ptr().cast::<*mut F>(), boxed) };
            Boxed::<F>::VTABLE
        };
        Self { vtable, slot }
    }

    /// Runs the closure, consuming the task.
    #[inline]
    pub(crate) fn run(self) -> Outcome {
        // The closure leaves the slot in `run`, so the task must not drop it
        // again, even if the closure panics.
        let mut task = ManuallyDrop::new(self);
        // SAFETY: the slot holds the closure `vtable` was made for (`new`),
        // and it is taken out exactly once: here, with `Drop` disarmed.
        unsafe { (task.vtable.run)(&mut task.slot) }
    }
}

impl Drop for Task {
    /// Drops a task that never ran (one left over when its pool went away,
    /// or one whose submit failed).
    fn drop(&mut self) {
        // SAFETY: as in `run`; a task that ran was not dropped (`run` wraps
        // it in `ManuallyDrop`).
        unsafe { (self.vtable.drop)(&mut self.slot) }
    }
}

/// Closures kept in the slot itself.
struct Inline<F>(PhantomData<F>);

impl<F> Inline<F> {
    /// Whether an `F` fits in the slot (size and alignment).
    const FITS: bool = mem::size_of::<F>() <= mem::size_of::<Slot>()
        && mem::align_of::<F>() <= mem::align_of::<Slot>();
}

impl<F: FnOnce() -> Outcome> Inline<F> {
    const VTABLE: &'static VTable = &VTable {
        run: Self::run,
        drop: Self::drop,
    };

    /// # Safety
    ///
    /// `slot` holds an `F`, written by `Task::new`, not yet taken out.
    unsafe fn run(slot: &mut Slot) -> Outcome {
        // SAFETY: per the contract; the read moves the closure out, and the
        // caller never reads the slot again.
        let f = unsafe { ptr::read(slot.as_ptr().cast::<F>()) };
        f()
    }

    /// # Safety
    ///
    /// As for `run`.
    unsafe fn drop(slot: &mut Slot) {
        // SAFETY: as in `run`.
        unsafe { ptr::drop_in_place(slot.as_mut_ptr().cast::<F>()) }
    }
}

/// Closures too large or too aligned for the slot: kept in a `Box` whose
/// pointer is in the slot's first word.
struct Boxed<F>(PhantomData<F>);

impl<F: FnOnce() -> Outcome> Boxed<F> {
    const VTABLE: &'static VTable = &VTable {
        run: Self::run,
        drop: Self::drop,
    };

    /// # Safety
    ///
    /// The slot's first word holds a pointer from `Box::<F>::into_raw`, not
    /// yet taken back.
    unsafe fn take(slot: &mut Slot) -> Box<F> {
        // SAFETY: per the contract, the first word holds the pointer of a
        // live `Box<F>`, which we take back once.
        unsafe { Box::from_raw(ptr::read(slot.as_ptr().cast::<*mut F>())) }
    }

    /// # Safety
    ///
    /// As for `take`.
    unsafe fn run(slot: &mut Slot) -> Outcome {
        // SAFETY: per the contract.
        let f = unsafe { Self::take(slot) };
        f()
    }

    /// # Safety
    ///
    /// As for `take`.
    unsafe fn drop(slot: &mut Slot) {
        // SAFETY: per the contract.
        drop(unsafe { Self::take(slot) });
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    use std::panic::{self, AssertUnwindSafe};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts its drops.
    struct Token(Arc<AtomicUsize>);

    impl Drop for Token {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn check(make: impl Fn(Token) -> Task) {
        let drops = Arc::new(AtomicUsize::new(0));
        // Run: the closure's captures drop once.
        make(Token(drops.clone())).run();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // Never run: dropped once, with the task.
        drop(make(Token(drops.clone())));
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn small_closures_are_kept_inline() {
        const {
            assert!(Inline::<fn()>::FITS);
            assert!(Inline::<[usize; 3]>::FITS);
            assert!(!Inline::<[usize; 4]>::FITS);
        }
        assert_eq!(mem::size_of::<Task>(), 4 * mem::size_of::<usize>());
        check(|token| {
            Task::new(move || {
                let _token = &token;
                Outcome::Returned
            })
        });
    }

    #[test]
    fn large_closures_are_boxed() {
        check(|token| {
            let padding = [7u64; 8];
            Task::new(move || {
                let _token = &token;
                assert_eq!(padding.iter().sum::<u64>(), 56);
                Outcome::Returned
            })
        });
    }

    #[test]
    fn over_aligned_closures_are_boxed() {
        #[repr(align(64))]
        struct Aligned(u8);
        let aligned = Aligned(1);
        const { assert!(!Inline::<Aligned>::FITS) };
        let out = Arc::new(AtomicUsize::new(0));
        let seen = out.clone();
        Task::new(move || {
            let at = &aligned as *const Aligned as usize;
            seen.store(at % 64 + usize::from(aligned.0), Ordering::SeqCst);
            Outcome::Returned
        })
        .run();
        assert_eq!(out.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn zero_sized_closures_work() {
        // A zero-sized closure can still say how it ended: what it returns
        // comes back from `run`, so it ran.
        fn panicked() -> Outcome {
            Outcome::Panicked
        }
        let task = Task::new(|| Outcome::Panicked);
        assert_eq!(task.run(), Outcome::Panicked);
        assert_eq!(Task::new(|| Outcome::Returned).run(), Outcome::Returned);
        drop(Task::new(|| Outcome::Returned));
        assert_eq!(Task::new(panicked).run(), Outcome::Panicked);
    }

    #[test]
    fn a_panicking_closure_drops_its_captures_once() {
        for padding in [0usize, 8] {
            let drops = Arc::new(AtomicUsize::new(0));
            let token = Token(drops.clone());
            let big = vec![0u8; padding];
            let task = Task::new(move || {
                let _token = token;
                let _big = big;
                panic!("fails")
            });
            assert!(panic::catch_unwind(AssertUnwindSafe(|| task.run())).is_err());
            assert_eq!(drops.load(Ordering::SeqCst), 1);
        }
    }

    #[test]
    fn tasks_run_on_other_threads() {
        let drops = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<Task> = (0..4)
            .map(|i| {
                let token = Token(drops.clone());
                let big = [i; 6];
                if i % 2 == 0 {
                    Task::new(move || {
                        drop(token);
                        Outcome::Returned
                    })
                } else {
                    Task::new(move || {
                        assert_eq!(big[5], i);
                        drop(token);
                        Outcome::Returned
                    })
                }
            })
            .collect();
        std::thread::spawn(move || {
            tasks
                .into_iter()
                .for_each(|task| assert_eq!(task.run(), Outcome::Returned))
        })
        .join()
        .unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 4);
    }
}
