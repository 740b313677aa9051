//! Dropping user objects so that one panic loses no other.
//!
//! A sweep, a `clear` and a pool's drop drop many objects at once, and the
//! background sweeper drops the objects of every pool; a `Drop` impl that
//! panics must neither abort the process (a second panic while the first
//! unwinds) nor keep the others from being dropped, nor end the sweeper.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use crate::pool::node::Node;

/// Drops every object, even if some `Drop` impls panic; then re-raises the
/// first panic. (Dropping the `Vec` would abort the process at a second
/// panicking `Drop`.) The payloads of the other panics are dropped under a
/// guard ([`drop_payload`]): a payload whose own `Drop` panics would
/// otherwise unwind out of here with the first payload still held.
pub(crate) fn drop_all<T>(dead: Vec<Box<Node<T>>>) {
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
