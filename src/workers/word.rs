//! The 64-bit atomic the pool keeps its counts in, on every target.
//!
//! The state word (`state.rs`) and the generation counts
//! (`generations.rs`) pack several fields into 64 bits so that each
//! decision is one read-modify-write. Targets without 64-bit atomics (32-bit
//! PowerPC and MIPS, some ARM and RISC-V cores) get a word behind a lock
//! instead: slower, but the same operations with the same guarantees (every
//! operation on it is sequentially consistent), so the protocol, and its
//! proofs, are unchanged.

#[cfg(any(stashpool_loom, target_has_atomic = "64"))]
mod imp {
    #[cfg(stashpool_loom)]
    pub(crate) use crate::sync::AtomicU64 as AtomicWord;
    #[cfg(not(stashpool_loom))]
    pub(crate) use std::sync::atomic::AtomicU64 as AtomicWord;
}

#[cfg(not(any(stashpool_loom, target_has_atomic = "64")))]
mod imp {
    use std::sync::{Mutex, MutexGuard};

    use crate::sync::Ordering;

    /// A `u64` behind a lock, with the methods of `AtomicU64` the pool uses.
    pub(crate) struct AtomicWord(Mutex<u64>);

    impl AtomicWord {
        pub(crate) const fn new(value: u64) -> Self {
            Self(Mutex::new(value))
        }

        fn lock(&self) -> MutexGuard<'_, u64> {
            // Nothing panics while the lock is held.
            self.0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        }

        fn update(&self, f: impl FnOnce(u64) -> u64) -> u64 {
            let mut word = self.lock();
            let before = *word;
            *word = f(before);
            before
        }

        pub(crate) fn load(&self, _: Ordering) -> u64 {
            *self.lock()
        }

        pub(crate) fn compare_exchange_weak(
            &self,
            current: u64,
            new: u64,
            _: Ordering,
            _: Ordering,
        ) -> Result<u64, u64> {
            let mut word = self.lock();
            if *word == current {
                *word = new;
                Ok(current)
            } else {
                Err(*word)
            }
        }

        pub(crate) fn fetch_add(&self, value: u64, _: Ordering) -> u64 {
            self.update(|w| w.wrapping_add(value))
        }

        pub(crate) fn fetch_sub(&self, value: u64, _: Ordering) -> u64 {
            self.update(|w| w.wrapping_sub(value))
        }

        pub(crate) fn fetch_or(&self, value: u64, _: Ordering) -> u64 {
            self.update(|w| w | value)
        }

        pub(crate) fn fetch_and(&self, value: u64, _: Ordering) -> u64 {
            self.update(|w| w & value)
        }

        pub(crate) fn fetch_xor(&self, value: u64, _: Ordering) -> u64 {
            self.update(|w| w ^ value)
        }
    }
}

pub(crate) use imp::AtomicWord;
