//! Two helpers every part of the runtime uses: the one poisoning policy for locks, and the clock.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, recovering from poisoning: the engine's critical sections are single updates that leave the
/// data consistent, so a panic elsewhere while one was held loses nothing (the one poisoning policy of the
/// engine).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Microseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}
