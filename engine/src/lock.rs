//! The engine's one poisoning policy for locks.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, recovering from poisoning: the engine's critical sections are single updates that leave the
/// data consistent, so a panic elsewhere while one was held loses nothing.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
