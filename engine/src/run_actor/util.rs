//! The runtime's clock.

pub(crate) use crate::time::now_us;
