//! The `Pool` trait: what every pool in the crate can be asked.

use crate::{LocalPool, Recycle, Stats};

/// What every pool in the crate can be asked, whatever it pools.
///
/// Implemented by [`LocalPool`] and by every ready-made pool. Object-safe,
/// so a program can keep pools of different types in one `Vec<&dyn Pool>`
/// to sweep, clear or report them together.
///
/// # Examples
///
/// ```
/// use stashpool::{LocalPool, Pool, Stats};
///
/// let buffers = LocalPool::new(|| vec![0u8; 4096]);
/// let names = LocalPool::new(String::new);
/// buffers.with(|_| ());
/// names.with(|_| ());
///
/// let pools: Vec<&dyn Pool> = vec![&buffers, &names];
/// let total: Stats = pools.iter().map(|pool| pool.stats()).sum();
/// assert_eq!(total.idle, 2);
/// pools.iter().for_each(|pool| pool.clear());
/// assert_eq!(buffers.stats().idle + names.stats().idle, 0);
/// ```
pub trait Pool: Send + Sync {
    /// One sweep now: objects idle since the previous sweep are dropped
    /// (see [`LocalPool::sweep`]).
    fn sweep(&self);
    /// Drops every idle object now (see [`LocalPool::clear`]).
    fn clear(&self);
    /// Counters since the pool was made (see [`Stats`]).
    fn stats(&self) -> Stats;
}

impl<T, R> Pool for LocalPool<T, R>
where
    T: Send + 'static,
    R: Recycle<T> + Send + Sync,
{
    fn sweep(&self) {
        LocalPool::sweep(self)
    }

    fn clear(&self) {
        LocalPool::clear(self)
    }

    fn stats(&self) -> Stats {
        LocalPool::stats(self)
    }
}
