//! How a pool makes objects and readies returned ones for reuse.

/// How a pool makes new objects and prepares returned ones for reuse.
///
/// Every closure `Fn() -> T` is a `Recycle<T>` that makes objects and never
/// resets them. Implement the trait on a type of your own to reset returned
/// objects (so nothing one user wrote is seen by the next) or to refuse
/// objects that should not be kept, such as a buffer that grew too large.
///
/// Neither method runs while the pool holds any lock or any thread's stash,
/// so both may use the pool themselves, and a panic in either leaves the
/// pool intact (the object concerned is dropped).
///
/// # Examples
///
/// ```
/// use stashpool::{LocalPool, Recycle};
///
/// /// Byte buffers, cleared on return; ones that grew past 1 MiB are dropped.
/// struct Buffers;
///
/// impl Recycle<Vec<u8>> for Buffers {
///     fn create(&self) -> Vec<u8> {
///         Vec::with_capacity(4096)
///     }
///
///     fn recycle(&self, buf: &mut Vec<u8>) -> bool {
///         buf.clear();
///         buf.capacity() <= 1 << 20
///     }
/// }
///
/// let pool = LocalPool::new(Buffers);
/// pool.with(|buf| buf.extend_from_slice(b"secret"));
/// pool.with(|buf| assert!(buf.is_empty()));
/// ```
pub trait Recycle<T> {
    /// Makes a new object: called by `get` when no pooled object is idle.
    fn create(&self) -> T;

    /// Called on every returned object before it is pooled again.
    ///
    /// Return `false` to drop the object instead (counted in
    /// [`Stats::rejected`](crate::Stats::rejected)). The default keeps every
    /// object as it is.
    fn recycle(&self, value: &mut T) -> bool {
        let _ = value;
        true
    }
}

/// Any `Fn() -> T` is a recycler that never resets.
impl<T, F: Fn() -> T> Recycle<T> for F {
    #[inline]
    fn create(&self) -> T {
        self()
    }
}
