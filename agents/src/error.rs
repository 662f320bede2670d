//! Errors of the agents crate.

/// An expression or template could not be compiled.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExprError {
    /// Syntax error; the message includes minijinja's position information.
    #[error("invalid expression `{source_text}`: {message}")]
    Syntax {
        /// The expression or template text.
        source_text: String,
        /// The parser's message.
        message: String,
    },
}
