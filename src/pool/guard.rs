//! Guards that lend a pooled object out and give it back when dropped.
//!
//! A guard holds the pointer of the object's node (`node.rs`): it is one
//! word (`Pooled`) or two (`PooledOwned`), however large the object, and
//! moving it around moves a pointer. The node records which pool lent it.

use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Arc;
use std::thread;

use crate::pool::node::Node;
use crate::{LocalPool, Recycle};

/// A pooled object, returned to its pool (through `recycle`) on drop.
///
/// Made by [`LocalPool::get`]. Dereferences to the object. If the guard is
/// dropped while its thread is panicking, the object is dropped instead of
/// pooled, since the panic may have left it half-modified.
///
/// # Examples
///
/// ```
/// use stashpool::{LocalPool, Pooled};
///
/// let pool = LocalPool::new(String::new);
/// let mut s = pool.get();
/// s.push_str("kept");
/// let owned: String = Pooled::into_inner(s); // leaves the pool for good
/// assert_eq!(owned, "kept");
/// assert_eq!(pool.stats().idle, 0);
/// ```
///
/// A guard is whatever its object is for I/O: a pooled `Vec<u8>` is an
/// `io::Write`, a pooled `String` takes `write!`.
///
/// ```
/// use std::fmt::Write as _;
/// use std::io::Write as _;
/// use stashpool::LocalPool;
///
/// let bytes = LocalPool::new(Vec::<u8>::new);
/// let mut out = bytes.get();
/// out.write_all(b"GET / HTTP/1.1").unwrap();
///
/// let text = LocalPool::new(String::new);
/// let mut line = text.get();
/// write!(line, "{} {}", 1, 2).unwrap();
/// assert_eq!(*line, "1 2");
/// ```
pub struct Pooled<'a, T: Send + 'static, R: Recycle<T> = fn() -> T> {
    /// The lent node, owned by this guard (from `Box::into_raw`); its
    /// `lender` is the pool this guard borrows.
    node: NonNull<Node<T>>,
    /// Borrows the pool and owns a `T`.
    _owns: PhantomData<(&'a LocalPool<T, R>, T)>,
}

// SAFETY: a `Pooled` is a `Box<Node<T>>` plus a `&LocalPool<T, R>`: it may
// move to another thread when both may (`T: Send`, `LocalPool: Sync`), and
// be shared when both may.
unsafe impl<T: Send, R: Recycle<T> + Sync> Send for Pooled<'_, T, R> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync, R: Recycle<T> + Sync> Sync for Pooled<'_, T, R> {}

impl<'a, T: Send + 'static, R: Recycle<T>> Pooled<'a, T, R> {
    #[inline(always)]
    pub(crate) fn new(pool: &'a LocalPool<T, R>, node: NonNull<Node<T>>) -> Self {
        // SAFETY: a node just lent, which this guard holds from now on;
        // through the pointer, as for any lent node (`Node`'s docs).
        unsafe { (*node.as_ptr()).lender = (pool as *const LocalPool<T, R>).cast() };
        Self {
            node,
            _owns: PhantomData,
        }
    }

    /// Keeps the object; it will not go back to the pool.
    ///
    /// An associated function rather than a method, so it cannot shadow a
    /// method of `T`.
    pub fn into_inner(this: Self) -> T {
        let this = ManuallyDrop::new(this);
        // SAFETY: the guard holds a node its pool lent, and gives it up
        // here, once: `this` will not drop.
        unsafe { Pooled::pool(&this).keep_lent(this.node) }
    }

    /// Whether the guard has handed out `&mut` access to its object, so
    /// that the object goes back through [`Recycle::recycle`] rather than
    /// [`Recycle::recycle_unwritten`].
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::{LocalPool, Pooled};
    ///
    /// let pool = LocalPool::new(|| vec![0u8; 4]);
    /// let mut buf = pool.get();
    /// assert_eq!(buf[0], 0); // a read
    /// assert!(!Pooled::is_written(&buf));
    /// buf[0] = 1; // a write
    /// assert!(Pooled::is_written(&buf));
    /// ```
    pub fn is_written(this: &Self) -> bool {
        // SAFETY: the guard holds the node (see `node`).
        unsafe { (*this.node.as_ptr()).written }
    }

    /// The pool this object came from.
    pub fn pool(this: &Self) -> &'a LocalPool<T, R> {
        // SAFETY: `lender` was set from the `&'a LocalPool` this guard
        // borrows, which cannot move or drop while the guard lives.
        unsafe { &*(*this.node.as_ptr()).lender.cast::<LocalPool<T, R>>() }
    }
}

impl<T: Send + 'static, R: Recycle<T>> Drop for Pooled<'_, T, R> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: the guard holds a node its pool lent, and gives it up
        // here, once.
        unsafe { release(Pooled::pool(self), self.node) };
    }
}

// === impl PooledOwned ===

/// A pooled object that owns a reference to its pool: `'static` and `Send`.
///
/// Made by `get_owned` on a pool in an `Arc`: [`LocalPool::get_owned`],
/// and the same call of every ready-made pool. It can move to another
/// thread; dropped there, it goes back to the thread that took it, or to
/// the shared overflow (see [`LocalPool`]).
///
/// `P` is the pool the guard keeps alive: the `LocalPool` itself, or the
/// ready-made pool (a `BytePool`, an `MmapPools`, ...) that holds the
/// `LocalPool` the object came from.
///
/// # Examples
///
/// ```standalone_crate
/// use std::sync::Arc;
/// use stashpool::{LocalPool, PooledOwned};
///
/// let pool = Arc::new(LocalPool::new(|| vec![0u8; 8]));
/// let buf = pool.get_owned();
/// let handle = std::thread::spawn(move || buf.len());
/// assert_eq!(handle.join().unwrap(), 8);
/// assert_eq!(pool.stats().returned, 1);
///
/// let kept: Vec<u8> = PooledOwned::into_inner(pool.get_owned());
/// assert_eq!(kept.len(), 8);
/// ```
pub struct PooledOwned<T: Send + 'static, R: Recycle<T> = fn() -> T, P = LocalPool<T, R>> {
    /// The lent node, owned by this guard (from `Box::into_raw`); its
    /// `lender` is a `LocalPool<T, R>` that lives inside `*owner`.
    node: NonNull<Node<T>>,
    owner: ManuallyDrop<Arc<P>>,
    _owns: PhantomData<(T, Arc<LocalPool<T, R>>)>,
}

// SAFETY: a `PooledOwned` is a `Box<Node<T>>` plus an `Arc<P>` that keeps a
// `LocalPool<T, R>` alive: it may move to another thread when the object
// may, the pool may be shared, and the `Arc` may move.
unsafe impl<T: Send, R: Recycle<T> + Send + Sync, P: Send + Sync> Send for PooledOwned<T, R, P> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync, R: Recycle<T> + Send + Sync, P: Send + Sync> Sync
    for PooledOwned<T, R, P>
{
}

impl<T: Send + 'static, R: Recycle<T>, P> PooledOwned<T, R, P> {
    /// A guard of `node`, lent by `pool`.
    ///
    /// # Safety
    ///
    /// `pool` must live inside `*owner` (be `*owner` itself, or a field of
    /// it), so that it lives, unmoved, as long as the `Arc`.
    #[inline(always)]
    pub(crate) unsafe fn new(
        owner: Arc<P>,
        pool: &LocalPool<T, R>,
        node: NonNull<Node<T>>,
    ) -> Self {
        // SAFETY: as in `Pooled::new`.
        unsafe { (*node.as_ptr()).lender = (pool as *const LocalPool<T, R>).cast() };
        Self {
            node,
            owner: ManuallyDrop::new(owner),
            _owns: PhantomData,
        }
    }

    /// Keeps the object; it will not go back to the pool.
    ///
    /// An associated function rather than a method, so it cannot shadow a
    /// method of `T`.
    pub fn into_inner(this: Self) -> T {
        let mut this = ManuallyDrop::new(this);
        // SAFETY: `lender` was set by `new` to a pool inside `*owner`, alive
        // until `owner` drops below.
        let pool = unsafe { &*(*this.node.as_ptr()).lender.cast::<LocalPool<T, R>>() };
        // SAFETY: the guard holds a node its pool lent, and gives it up
        // here, once: `this` will not drop.
        let value = unsafe { pool.keep_lent(this.node) };
        // SAFETY: taken once, after the pool's last use here.
        drop(unsafe { ManuallyDrop::take(&mut this.owner) });
        value
    }

    /// Whether the guard has handed out `&mut` access to its object (see
    /// [`Pooled::is_written`]).
    pub fn is_written(this: &Self) -> bool {
        // SAFETY: the guard holds the node (see `node`).
        unsafe { (*this.node.as_ptr()).written }
    }

    /// The pool this guard keeps alive, which the object goes back to.
    pub fn pool(this: &Self) -> &Arc<P> {
        &this.owner
    }
}

impl<T: Send + 'static, R: Recycle<T>, P> Drop for PooledOwned<T, R, P> {
    #[inline(always)]
    fn drop(&mut self) {
        // Out of the `ManuallyDrop` first, so that a panic in the return
        // (in `recycle`, or in the object's `Drop`) still lets the pool go;
        // held to the end of this scope, so that the pool goes only after
        // the object is back in it.
        // SAFETY: taken once, here; `self` is not used again.
        let owner = unsafe { ManuallyDrop::take(&mut self.owner) };
        // SAFETY: `lender` was set by `new` to a pool inside `*owner`, which
        // lives until this function returns or unwinds.
        let pool = unsafe { &*(*self.node.as_ptr()).lender.cast::<LocalPool<T, R>>() };
        // SAFETY: the guard holds a node its pool lent, and gives it up
        // here, once.
        unsafe { release(pool, self.node) };
        drop(owner);
    }
}

/// Returns a guard's node to `pool`, or drops it if this thread is
/// panicking (the panic may have left the object half-modified).
///
/// # Safety
///
/// `node` was lent by `pool` (`LocalPool::get` and `get_owned` make guards
/// only from `lend`), and the caller, its guard, gives it up.
#[inline(always)]
unsafe fn release<T: Send + 'static, R: Recycle<T>>(
    pool: &LocalPool<T, R>,
    node: NonNull<Node<T>>,
) {
    // SAFETY: the caller's word.
    unsafe {
        if thread::panicking() {
            pool.discard_unwound(node);
        } else {
            pool.return_lent(node);
        }
    }
}

// === shared impls ===

/// `Deref`, `DerefMut`, `AsRef`, `AsMut`, `Debug` and the I/O traits, for
/// both guards: `[generics] Guard` with `T` the object and `R` the recycler.
macro_rules! guard_impls {
    ([$($gen:tt)*] $guard:ty) => {
        impl<$($gen)*> Deref for $guard
        where
            T: Send + 'static,
            R: Recycle<T>,
        {
            type Target = T;

            #[inline(always)]
            fn deref(&self) -> &T {
                // SAFETY: the guard holds the node, and `&self` shares it.
                unsafe { Node::read(self.node.as_ptr()) }
            }
        }

        impl<$($gen)*> DerefMut for $guard
        where
            T: Send + 'static,
            R: Recycle<T>,
        {
            #[inline(always)]
            fn deref_mut(&mut self) -> &mut T {
                // The object for writing: marks the node written (see
                // [`Recycle::recycle_unwritten`]).
                // SAFETY: the guard holds the node, and `&mut self` is unique.
                unsafe { Node::write(self.node.as_ptr()) }
            }
        }

        /// What the object is a view of, the guard is: a pooled
        /// `Vec<u8>` or `Box<[u8]>` is an `AsRef<[u8]>`, a pooled `String`
        /// an `AsRef<str>` (and `AsRef<Path>`).
        impl<$($gen)*, U: ?Sized> AsRef<U> for $guard
        where
            T: Send + 'static + AsRef<U>,
            R: Recycle<T>,
        {
            fn as_ref(&self) -> &U {
                (**self).as_ref()
            }
        }

        /// Through `DerefMut`, so the guard records the write.
        impl<$($gen)*, U: ?Sized> AsMut<U> for $guard
        where
            T: Send + 'static + AsMut<U>,
            R: Recycle<T>,
        {
            fn as_mut(&mut self) -> &mut U {
                (**self).as_mut()
            }
        }

        impl<$($gen)*> fmt::Debug for $guard
        where
            T: Send + 'static + fmt::Debug,
            R: Recycle<T>,
        {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&**self, f)
            }
        }

        /// A pooled writer is a writer (`&mut *guard` works too).
        impl<$($gen)*> io::Write for $guard
        where
            T: Send + 'static + io::Write,
            R: Recycle<T>,
        {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                (**self).write(buf)
            }

            fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
                (**self).write_all(buf)
            }

            fn flush(&mut self) -> io::Result<()> {
                (**self).flush()
            }
        }

        /// A pooled reader is a reader.
        impl<$($gen)*> io::Read for $guard
        where
            T: Send + 'static + io::Read,
            R: Recycle<T>,
        {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                (**self).read(buf)
            }
        }

        /// A pooled `String` (or other text sink) takes `write!`.
        impl<$($gen)*> fmt::Write for $guard
        where
            T: Send + 'static + fmt::Write,
            R: Recycle<T>,
        {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                (**self).write_str(s)
            }
        }
    };
}

guard_impls!(['a, T, R] Pooled<'a, T, R>);
guard_impls!([T, R, P] PooledOwned<T, R, P>);

// A `Pooled` is one pointer, whatever it holds.
const _: () = assert!(
    std::mem::size_of::<Pooled<'static, [u8; 4096], fn() -> [u8; 4096]>>()
        == std::mem::size_of::<usize>()
);
