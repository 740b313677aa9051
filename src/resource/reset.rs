//! What a resource pool does to the contents of a returned object: the
//! [`Reset`] policy, and how the pools of chunks, frames and maps apply
//! it.
//!
//! Zeroing a returned chunk, frame or map in full costs what a fresh zeroed one
//! costs, which is what the pool was meant to save. So a pool zeroes only
//! what its last user could have written: a guard records when it first
//! hands out `&mut` access, and an object only ever read through `Deref`
//! goes back through `Recycle::recycle_unwritten`, which keeps it as it
//! came. Callers that overwrite what they use can skip the zeroing
//! altogether with [`Reset::Keep`], as Go's `bp` pools do.

/// What a resource pool does to a returned object's contents.
///
/// Set with `.reset(Reset)` on the builder of every pool whose objects
/// hold readable contents (those that implement [`Contents`]:
/// `bytes::ChunkPool`, `io::BufReaderPool`, `io::CopyPool`, the frame
/// pools and the map pools); each pool's docs say what either policy
/// costs there.
///
/// [`Contents`]: crate::Contents
///
/// # Examples
///
/// ```
/// use stashpool::io::BufReaderPool;
/// use stashpool::Reset;
///
/// assert_eq!(Reset::default(), Reset::Zero);
/// let pool = BufReaderPool::builder(4096).reset(Reset::Keep).build();
/// assert_eq!(pool.reset(), Reset::Keep);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reset {
    /// Nothing one user wrote can be read by the next. The cost is in
    /// proportion to what the last user could have written, not to the
    /// object's size.
    #[default]
    Zero,
    /// Contents are kept, as Go's `bp` pools do: the next user sees what
    /// the last one left. For callers that overwrite what they use (a
    /// decoder that fills every pixel, a copy that reads before it writes).
    Keep,
}

/// Checks and wipes objects of one kind: what a recycler of readable
/// contents knows, from which [`recycle`] makes its `Recycle` methods.
pub(crate) trait Wipe<T> {
    /// Whether a returned object may be pooled again (it still has the
    /// pool's shape), after restoring the layout fields a user may have
    /// changed (a frame's strides), contents aside.
    fn fits(&self, value: &mut T) -> bool;
    /// Zeroes every byte a user can read.
    fn wipe(&self, value: &mut T);
    /// Whether a written object is zeroed in place with
    /// [`wipe`](Self::wipe) (`true`, the default) or dropped, so that the
    /// next `get` makes a fresh, zeroed one: for objects so large that a
    /// fresh zeroed allocation costs no more than zeroing them.
    fn wipes_in_place(&self) -> bool {
        true
    }
}

/// `Recycle::recycle` (`written`) and `Recycle::recycle_unwritten` (not)
/// of a recycler whose contents policy is `reset`: refuses an object that
/// no longer fits; under [`Reset::Zero`] wipes a written one (or refuses
/// it, where a fresh one costs no more); keeps the rest as they are.
pub(crate) fn recycle<T>(
    objects: &impl Wipe<T>,
    reset: Reset,
    value: &mut T,
    written: bool,
) -> bool {
    if !objects.fits(value) {
        return false;
    }
    if written && reset == Reset::Zero {
        if !objects.wipes_in_place() {
            return false;
        }
        objects.wipe(value);
    }
    true
}
