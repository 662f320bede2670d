//! The bench's error type: a message saying what failed, with the cause appended.

use std::fmt;

/// A failed scenario step or setup, with a human-readable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl Error {
    /// An error with `message`.
    pub fn msg(message: impl Into<String>) -> Self {
        Error(message.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// The bench's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// Adds what was being done to any displayable error: `file.read().ctx("reading results.json")?`.
pub trait Context<T> {
    /// Maps the error to an [`Error`] reading `what: cause`.
    fn ctx(self, what: impl fmt::Display) -> Result<T>;
}

impl<T, E: fmt::Display> Context<T> for std::result::Result<T, E> {
    fn ctx(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error(format!("{what}: {e}")))
    }
}

impl<T> Context<T> for Option<T> {
    fn ctx(self, what: impl fmt::Display) -> Result<T> {
        self.ok_or_else(|| Error(what.to_string()))
    }
}

/// Fails with `message` unless `cond` holds (a result check, not a panic).
pub fn ensure(cond: bool, message: impl FnOnce() -> String) -> Result<()> {
    if cond { Ok(()) } else { Err(Error(message())) }
}
