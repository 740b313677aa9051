//! The core pool: [`LocalPool`] and the machinery behind it.
//!
//! One concept per file, in the order an object meets them:
//!
//! | file | what it holds |
//! | --- | --- |
//! | `local_pool.rs` | `LocalPool`: get, return, `with`, `put`, `try_get`; the two paths back |
//! | `builder.rs` | `LocalPoolBuilder`, the configuration and its defaults |
//! | `guard.rs` | `Pooled`, `PooledOwned`: one-pointer guards |
//! | `recycle.rs` | `Recycle`: how objects are made and reset |
//! | `node.rs` | the heap node an object lives in while pooled or lent |
//! | `cell.rs` | where a pool keeps its shared state: made on first use, published with one compare-and-swap |
//! | `shared.rs` | a pool's shared state: the stash table and its bound, the overflow, the counters |
//! | `stash.rs` | one thread's stash and the owner's side of the stash handshake |
//! | `overflow.rs` | the shared overflow: batches of objects in a `crossbeam_deque::Injector`, and single objects |
//! | `singles.rs` | the overflow's single objects: a bounded ring, an `Injector` behind it |
//! | `barrier.rs` | the heavy barrier of the handshake (`membarrier`, or fences) |
//! | `sweep.rs` | the sweep: Go's victim rule across every stash and the overflow; `clear`; pool close; exit flush |
//! | `background.rs` | the process-wide thread that sweeps every pool on its interval |
//! | `owner.rs` | per-thread owner tokens and the stash cache |
//! | `exit.rs` | what a thread's exit does to its stashes |
//! | `stats.rs` | `Stats` |
//! | `pool_trait.rs` | `Pool`: what every pool in the crate can be asked |
//!
//! The algorithm and the argument for its correctness are in the crate's
//! [`implementation`](crate::implementation) notes.

#[cfg(not(stashpool_loom))]
mod background;
mod barrier;
mod builder;
mod cell;
mod exit;
mod guard;
mod local_pool;
mod node;
mod overflow;
mod owner;
mod pool_trait;
mod recycle;
mod shared;
mod singles;
mod stash;
mod stats;
mod sweep;

#[cfg(not(stashpool_loom))]
pub(crate) use builder::sweep_interval;
pub use builder::{
    LocalPoolBuilder, DEFAULT_LOCAL_CAPACITY, DEFAULT_SWEEP_INTERVAL, MIN_SWEEP_INTERVAL,
};
pub use guard::{Pooled, PooledOwned};
pub use local_pool::LocalPool;
pub use pool_trait::Pool;
pub use recycle::Recycle;
pub use stats::Stats;
