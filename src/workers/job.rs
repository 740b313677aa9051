//! `Job`: a task on its way to a worker, with the wait generation it is
//! counted in (`generations.rs`).

use super::generations::Generation;
use super::task::Task;

/// A task on its way to a worker, with the wait generation it is counted in.
pub(crate) struct Job {
    pub(super) task: Task,
    pub(super) generation: Generation,
}
