//! The core pool: [`LocalPool`] and the machinery behind it.
//!
//! One type per file; each file uses only those above it in this table
//! (save the guard and the pool, which name each other):
//!
//! | file | what it holds |
//! | --- | --- |
//! | `barrier.rs` | the heavy and light barriers of the stash handshake (`membarrier`, or fences) |
//! | `owner.rs` | a thread's side of its claim on its stashes: serial number, owner token, stash cache |
//! | `exit.rs` | a thread's exit hooks, and the late exit for threads past their thread-local destructors |
//! | `background.rs` | the process-wide thread that sweeps every pool on its interval |
//! | `fork.rs` | everything `fork()` needs: the handlers, and what a child knows of its parent's threads |
//! | `node.rs` | `Node`, the heap node an object lives in while pooled or lent, and its `Home` |
//! | `unwind.rs` | dropping objects so that one panicking `Drop` loses no other |
//! | `singles.rs` | `Singles`, the overflow's single objects: a stack of the newest, a ring, a queue |
//! | `overflow.rs` | `Overflow`: batches and single objects any thread can take, and their sweep |
//! | `stash.rs` | `Stash`: one thread's objects, the owner's side of the handshake, and their sweep |
//! | `shared.rs` | `Shared`: a pool's stashes, slots, overflow and counters; the owner paths; exit flushes |
//! | `sweep.rs` | the pass over all of them: `Shared::{sweep, clear, close}` |
//! | `config.rs` | a pool's configuration and its defaults |
//! | `recycle.rs` | `Recycle`: how objects are made and reset |
//! | `stats.rs` | `Stats` |
//! | `local_pool.rs` | `LocalPool`: get, return, `with`, `put`, `try_get`; the two paths back |
//! | `guard.rs` | `Pooled`, `PooledOwned`: one-pointer guards |
//! | `builder.rs` | `LocalPoolBuilder`, and `LocalPool::builder` |
//! | `pool_trait.rs` | `Pool`: what every pool in the crate can be asked |
//!
//! The algorithm and the argument for its correctness are in the crate's
//! [`implementation`](crate::implementation) notes.

#[cfg(not(stashpool_loom))]
mod background;
mod barrier;
mod builder;
mod config;
mod exit;
mod fork;
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
mod unwind;

pub use builder::LocalPoolBuilder;
#[cfg(not(stashpool_loom))]
pub(crate) use config::sweep_interval;
pub use config::{DEFAULT_LOCAL_CAPACITY, DEFAULT_SWEEP_INTERVAL, MIN_SWEEP_INTERVAL};
pub use guard::{Pooled, PooledOwned};
pub use local_pool::LocalPool;
pub use pool_trait::Pool;
pub use recycle::Recycle;
pub use stats::Stats;
