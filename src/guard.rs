//! Guards that hand a pooled object out and give it back when dropped.
//!
//! A guard keeps its object in a `ManuallyDrop` rather than an `Option`, and
//! gives it back by pointer (`LocalPool::give_back_from`), so the object is
//! copied from the guard into the stash as one block of memory, the same way
//! `get` copied it out. An `Option` makes the compiler inspect the object's
//! first word (the niche) and store it back word by word; the next `get` then
//! loads that slot with one wide load, which the CPU cannot forward from
//! several narrow stores still in flight, and stalls for a dozen cycles. On
//! the get-write-return loop that stall costs more than the rest of the pool.

use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::ptr;
use std::sync::Arc;
use std::thread;

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
pub struct Pooled<'a, T: Send + 'static, R: Recycle<T>> {
    pool: &'a LocalPool<T, R>,
    /// Always initialised; taken only by `drop` or `into_inner`.
    value: ManuallyDrop<T>,
}

impl<'a, T: Send + 'static, R: Recycle<T>> Pooled<'a, T, R> {
    #[inline(always)]
    pub(crate) fn new(pool: &'a LocalPool<T, R>, value: T) -> Self {
        Self {
            pool,
            value: ManuallyDrop::new(value),
        }
    }

    /// Keeps the object; it will not go back to the pool.
    ///
    /// An associated function rather than a method, so it cannot shadow a
    /// method of `T`.
    pub fn into_inner(this: Self) -> T {
        let mut this = ManuallyDrop::new(this);
        // SAFETY: `this` is never used or dropped again, so the value is
        // moved out exactly once; the pool reference needs no drop.
        unsafe { ManuallyDrop::take(&mut this.value) }
    }

    /// The pool this object came from.
    pub fn pool(this: &Self) -> &'a LocalPool<T, R> {
        this.pool
    }
}

// === impl PooledOwned ===

/// A pooled object that owns a reference to its pool: `'static` and `Send`.
///
/// Made by [`LocalPool::get_owned`] on a pool in an `Arc`. It can move to
/// another thread; it goes back to the stash of the thread that drops it.
///
/// # Examples
///
/// ```
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
pub struct PooledOwned<T: Send + 'static, R: Recycle<T>> {
    pool: Arc<LocalPool<T, R>>,
    /// Always initialised; taken only by `drop` or `into_inner`.
    value: ManuallyDrop<T>,
}

impl<T: Send + 'static, R: Recycle<T>> PooledOwned<T, R> {
    #[inline(always)]
    pub(crate) fn new(pool: Arc<LocalPool<T, R>>, value: T) -> Self {
        Self {
            pool,
            value: ManuallyDrop::new(value),
        }
    }

    /// Keeps the object; it will not go back to the pool.
    pub fn into_inner(this: Self) -> T {
        let mut this = ManuallyDrop::new(this);
        // SAFETY: `this` is never used or dropped again, so the value and
        // the pool handle are each moved out exactly once.
        unsafe {
            drop(ptr::read(&this.pool));
            ManuallyDrop::take(&mut this.value)
        }
    }

    /// The pool this object came from.
    pub fn pool(this: &Self) -> &Arc<LocalPool<T, R>> {
        &this.pool
    }
}

// === shared impls ===

/// The impls both guards share: `Deref`, `DerefMut`, `AsRef`, `AsMut`,
/// `Debug`, and giving the object back on drop.
macro_rules! guard_impls {
    ($guard:ident $(<$lt:lifetime>)?) => {
        impl<$($lt,)? T: Send + 'static, R: Recycle<T>> Deref for $guard<$($lt,)? T, R> {
            type Target = T;

            #[inline(always)]
            fn deref(&self) -> &T {
                &self.value
            }
        }

        impl<$($lt,)? T: Send + 'static, R: Recycle<T>> DerefMut for $guard<$($lt,)? T, R> {
            #[inline(always)]
            fn deref_mut(&mut self) -> &mut T {
                &mut self.value
            }
        }

        impl<$($lt,)? T: Send + 'static, R: Recycle<T>> AsRef<T> for $guard<$($lt,)? T, R> {
            fn as_ref(&self) -> &T {
                self
            }
        }

        impl<$($lt,)? T: Send + 'static, R: Recycle<T>> AsMut<T> for $guard<$($lt,)? T, R> {
            fn as_mut(&mut self) -> &mut T {
                self
            }
        }

        impl<$($lt,)? T: Send + 'static + fmt::Debug, R: Recycle<T>> fmt::Debug
            for $guard<$($lt,)? T, R>
        {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&**self, f)
            }
        }

        impl<$($lt,)? T: Send + 'static, R: Recycle<T>> Drop for $guard<$($lt,)? T, R> {
            #[inline(always)]
            fn drop(&mut self) {
                if thread::panicking() {
                    // A panic may have left the object half-modified.
                    // SAFETY: the value is initialised (only `drop` and
                    // `into_inner` take it, and `into_inner` skips `drop`).
                    unsafe { ManuallyDrop::drop(&mut self.value) }
                } else {
                    // SAFETY: as above; the value is not touched again.
                    unsafe { self.pool.give_back_from(&mut self.value) }
                }
            }
        }
    };
}

guard_impls!(Pooled<'a>);
guard_impls!(PooledOwned);
