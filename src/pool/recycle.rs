//! How a pool makes objects and readies returned ones for reuse.

/// How a pool makes new objects and prepares returned ones for reuse.
///
/// Every closure `Fn() -> T` is a `Recycle<T>` that makes objects and never
/// resets them. Implement the trait on a type of your own to reset returned
/// objects (so nothing one user wrote is seen by the next) or to refuse
/// objects that should not be kept, such as a buffer that grew too large.
///
/// No method runs while the pool holds any lock or any thread's stash, so
/// each may use the pool itself, and a panic in any leaves the pool intact
/// (the object concerned, if any, is dropped and counted discarded).
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

    /// Called on every returned object before it is pooled again, on the
    /// thread that returns it: the one that drops the guard (or the last
    /// `Bytes` clone of a frozen buffer), which pays for the reset. A
    /// consumer thread that drops what producers filled resets it for them.
    ///
    /// Return `false` to drop the object instead (counted in
    /// [`Stats::discarded`](crate::Stats::discarded)). The default keeps every
    /// object as it is.
    fn recycle(&self, value: &mut T) -> bool {
        let _ = value;
        true
    }

    /// Called instead of [`recycle`](Self::recycle) on a returned object
    /// that nobody could have changed since the pool last recycled it: a
    /// guard that never handed out `&mut` access (no `DerefMut`, `AsMut`
    /// or writes through it). Objects lent by `with` or given with `put`
    /// always go through `recycle`.
    ///
    /// The default calls `recycle`. Override it to skip a reset that only
    /// undoes writes, such as zeroing a large frame that was only read;
    /// keep the default for objects that can change through `&T`
    /// (`Cell`, `RefCell`, atomics).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::{LocalPool, Recycle};
    ///
    /// /// Zeroes a table only when someone may have written to it.
    /// struct Tables;
    ///
    /// impl Recycle<Vec<u64>> for Tables {
    ///     fn create(&self) -> Vec<u64> {
    ///         vec![0; 1024]
    ///     }
    ///
    ///     fn recycle(&self, table: &mut Vec<u64>) -> bool {
    ///         table.fill(0);
    ///         table.len() == 1024
    ///     }
    ///
    ///     fn recycle_unwritten(&self, _: &mut Vec<u64>) -> bool {
    ///         true // read only: nothing to undo
    ///     }
    /// }
    ///
    /// let pool = LocalPool::new(Tables);
    /// let sum: u64 = pool.get().iter().sum(); // read through `Deref` only
    /// assert_eq!(sum, 0);
    /// pool.get()[7] = 9; // written: zeroed on return
    /// assert_eq!(pool.get()[7], 0);
    /// ```
    fn recycle_unwritten(&self, value: &mut T) -> bool {
        self.recycle(value)
    }

    /// The bytes an idle object holds: what
    /// [`Stats::idle_bytes`](crate::Stats::idle_bytes) adds up and
    /// [`max_idle_bytes`](crate::LocalPoolBuilder::max_idle_bytes) bounds.
    /// Called once per return, after `recycle` kept the object, on the
    /// returning thread; a get reads the figure stored with the object.
    /// Never called where [`FIXED_FOOTPRINT`](Self::FIXED_FOOTPRINT) is
    /// `Some`.
    ///
    /// The default is `size_of::<T>()`, which counts none of the heap
    /// memory a `T` owns: implement it as the bytes the object keeps
    /// allocated (a buffer's capacity, a frame's pixels), as every
    /// ready-made pool does.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::{LocalPool, Recycle};
    ///
    /// struct Buffers;
    ///
    /// impl Recycle<Vec<u8>> for Buffers {
    ///     fn create(&self) -> Vec<u8> {
    ///         Vec::with_capacity(4096)
    ///     }
    ///
    ///     fn footprint(&self, buf: &Vec<u8>) -> usize {
    ///         buf.capacity()
    ///     }
    /// }
    ///
    /// let pool = LocalPool::builder(Buffers).max_idle_bytes(1 << 20).build();
    /// drop(pool.get());
    /// assert_eq!(pool.stats().idle_bytes, 4096);
    /// ```
    fn footprint(&self, value: &T) -> usize {
        let _ = value;
        std::mem::size_of::<T>()
    }

    /// `Some(n)`: every object holds `n` bytes, whatever its state, so the
    /// pool counts objects and multiplies, and never calls
    /// [`footprint`](Self::footprint); a get and a return then count no
    /// bytes at all. `None` (the default): each object is weighed as it is
    /// returned. A closure's pool is `Some(size_of::<T>())`, the default
    /// `footprint`.
    ///
    /// An associated constant, not a method, so that the choice is the
    /// type's, made at compile time: one more test on every get and return
    /// was a measurable share of the hot path. (It also makes `Recycle`
    /// unusable as a `dyn` trait object.)
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::{LocalPool, Recycle};
    ///
    /// /// Fixed-size scratch blocks: no return needs weighing.
    /// struct Blocks;
    ///
    /// impl Recycle<Box<[u8; 4096]>> for Blocks {
    ///     const FIXED_FOOTPRINT: Option<usize> = Some(4096);
    ///
    ///     fn create(&self) -> Box<[u8; 4096]> {
    ///         Box::new([0; 4096])
    ///     }
    /// }
    ///
    /// let pool = LocalPool::new(Blocks);
    /// drop((pool.get(), pool.get()));
    /// assert_eq!(pool.stats().idle_bytes, 2 * 4096);
    /// ```
    const FIXED_FOOTPRINT: Option<usize> = None;
}

/// Any `Fn() -> T` is a recycler that never resets.
impl<T, F: Fn() -> T> Recycle<T> for F {
    const FIXED_FOOTPRINT: Option<usize> = Some(std::mem::size_of::<T>());

    #[inline]
    fn create(&self) -> T {
        self()
    }
}
