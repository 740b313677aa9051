//! The core pool: [`LocalPool`] and the machinery behind it.
//!
//! One concept per file, each using only the files before it in the table
//! of [`implementation`](crate::implementation), section 1 (save those of
//! its last row, the public face, which name each other); that section and
//! the ones after it give the algorithm and the argument for its
//! correctness.

#[cfg(not(stashpool_loom))]
mod background;
mod barrier;
pub(crate) mod budget;
mod builder;
mod config;
mod exit;
pub(crate) mod fork;
mod guard;
mod loans;
mod local_pool;
mod node;
mod overflow;
mod pool_trait;
mod recycle;
mod returning;
mod shared;
mod singles;
mod stash;
mod stats;
mod sweep;
mod unwind;

pub use builder::LocalPoolBuilder;
#[cfg(not(stashpool_loom))]
pub(crate) use config::sweep_interval;
pub use config::{DEFAULT_MAX_STASHED, DEFAULT_SWEEP_INTERVAL, MIN_SWEEP_INTERVAL};
pub use guard::{Pooled, PooledOwned};
pub use local_pool::LocalPool;
pub use pool_trait::Pool;
pub use recycle::Recycle;
pub use stats::Stats;
