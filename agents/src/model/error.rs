//! [`ModelError`]: why a chat model call failed. Messages name the server and the model.

use std::time::Duration;

use agentic_engine::{Cause, CauseOrigin, Transience};

/// Why a chat model call failed.
///
/// Every variant about a server names it (`server`: the base URL, or the provider for in-process models) and
/// the model, so a failure deep in a workflow says which configuration to fix. API keys never appear.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// HTTP 401 or 403: the API key is missing, wrong or not allowed to use the model. Never retried.
    #[error(
        "model `{model}` at {server}: authentication failed (HTTP {status}): {message} (check the API key in \
         {key_source})"
    )]
    Unauthorized {
        /// The server's base URL.
        server: String,
        /// The model name.
        model: String,
        /// 401 or 403.
        status: u16,
        /// The server's message.
        message: String,
        /// Where the key comes from, as the message names it: ``the environment variable `OPENAI_API_KEY` ``,
        /// ``the secret `ACME_KEY` ``.
        key_source: String,
    },
    /// HTTP 404: the server does not know the model (or the base URL is wrong). Never retried.
    #[error("model `{model}` at {server}: not found (HTTP 404): {message}")]
    NotFound {
        /// The server's base URL.
        server: String,
        /// The model name.
        model: String,
        /// The server's message.
        message: String,
    },
    /// Any other unsuccessful HTTP status: a 4xx other than 401/403/404/429 at once (not retried), or a 429/5xx
    /// after the retries were used up.
    #[error("model `{model}` at {server}: HTTP {status} after {attempts} attempt(s): {message}")]
    Http {
        /// The server's base URL.
        server: String,
        /// The model name.
        model: String,
        /// The HTTP status.
        status: u16,
        /// Requests sent (1 + retries).
        attempts: u32,
        /// The server's message (or its body, shortened).
        message: String,
        /// How long the server asked to wait before trying again (its `Retry-After` header on the last
        /// answer, in seconds, fractions allowed), when it said: [`ModelError::transience`] carries it, so an
        /// error handler retrying the invocation waits at least that long.
        retry_after: Option<Duration>,
    },
    /// The request did not complete within the timeout.
    #[error("model `{model}` at {server}: no answer within {} ms", timeout.as_millis())]
    Timeout {
        /// The server's base URL.
        server: String,
        /// The model name.
        model: String,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// The server could not be reached (connection refused, DNS, TLS), after the retries.
    #[error("model `{model}` at {server}: cannot connect: {message}")]
    Connection {
        /// The server's base URL.
        server: String,
        /// The model name.
        model: String,
        /// What failed.
        message: String,
    },
    /// The server answered something that is not a chat completion (malformed JSON, no choices).
    #[error("model `{model}` at {server}: invalid response: {message}; the body was: {body}")]
    InvalidResponse {
        /// The server's base URL.
        server: String,
        /// The model name.
        model: String,
        /// What is wrong with it.
        message: String,
        /// The body (shortened to 500 characters).
        body: String,
    },
    /// A streamed answer broke off or carried an unreadable event.
    #[error("model `{model}` at {server}: stream failed: {message}")]
    Stream {
        /// The server's base URL.
        server: String,
        /// The model name.
        model: String,
        /// What failed.
        message: String,
    },
    /// The request cannot be sent as built (e.g. an option the provider does not accept).
    #[error("model `{model}` at {server}: invalid request: {message}")]
    InvalidRequest {
        /// The server's base URL.
        server: String,
        /// The model name.
        model: String,
        /// What is wrong.
        message: String,
    },
    /// A scripted model was asked more often than it has replies.
    #[error("scripted model: no reply left ({used} used)")]
    ScriptExhausted {
        /// Replies already given.
        used: usize,
    },
    /// The configured provider is not available in this binary or configuration.
    #[error("{message}")]
    Unavailable {
        /// The provider (`local`, ...).
        provider: String,
        /// What is missing and how to get it.
        message: String,
    },
}

impl ModelError {
    /// The error with `redactions` applied to every text the server or the transport gave (messages, bodies):
    /// a credential the server repeated in its answer is shown as its label, never as itself.
    #[must_use]
    pub fn redacted(self, redactions: &crate::Redactions) -> ModelError {
        if redactions.is_empty() {
            return self;
        }
        let r = |text: String| redactions.apply(&text);
        match self {
            ModelError::Unauthorized { server, model, status, message, key_source } => {
                ModelError::Unauthorized { server: r(server), model, status, message: r(message), key_source }
            }
            ModelError::NotFound { server, model, message } => {
                ModelError::NotFound { server: r(server), model, message: r(message) }
            }
            ModelError::Http { server, model, status, attempts, message, retry_after } => {
                ModelError::Http { server: r(server), model, status, attempts, message: r(message), retry_after }
            }
            ModelError::Timeout { server, model, timeout } => ModelError::Timeout { server: r(server), model, timeout },
            ModelError::Connection { server, model, message } => {
                ModelError::Connection { server: r(server), model, message: r(message) }
            }
            ModelError::InvalidResponse { server, model, message, body } => {
                ModelError::InvalidResponse { server: r(server), model, message: r(message), body: r(body) }
            }
            ModelError::Stream { server, model, message } => {
                ModelError::Stream { server: r(server), model, message: r(message) }
            }
            ModelError::InvalidRequest { server, model, message } => {
                ModelError::InvalidRequest { server: r(server), model, message: r(message) }
            }
            other @ (ModelError::ScriptExhausted { .. } | ModelError::Unavailable { .. }) => other,
        }
    }

    /// Whether the same call can succeed when made again: an authentication failure, an unknown model, a
    /// request the provider refuses (any 4xx but 408 and 429), an exhausted script or a missing provider is
    /// permanent; a timeout, a lost connection or stream, a 408, 429 or 5xx is transient; an unreadable answer
    /// is unknown. A transient HTTP failure carries the server's `Retry-After` as
    /// [`Transience::Transient::retry_after`].
    pub fn transience(&self) -> Transience {
        let transient = Transience::Transient { retry_after: None };
        match self {
            ModelError::Unauthorized { .. }
            | ModelError::NotFound { .. }
            | ModelError::InvalidRequest { .. }
            | ModelError::ScriptExhausted { .. }
            | ModelError::Unavailable { .. } => Transience::Permanent,
            ModelError::Http { status, retry_after, .. } if matches!(status, 408 | 429) || *status >= 500 => {
                Transience::Transient { retry_after: *retry_after }
            }
            ModelError::Http { .. } => Transience::Permanent,
            ModelError::Timeout { .. } | ModelError::Connection { .. } | ModelError::Stream { .. } => transient,
            ModelError::InvalidResponse { .. } => Transience::Unknown,
        }
    }

    /// The HTTP status the server answered with, when the failure was an unsuccessful answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            ModelError::Unauthorized { status, .. } | ModelError::Http { status, .. } => Some(*status),
            ModelError::NotFound { .. } => Some(404),
            _ => None,
        }
    }

    /// The error the `local` provider reports until it is compiled in.
    pub fn local_not_built() -> Self {
        ModelError::Unavailable {
            provider: "local".to_string(),
            message: "the local provider is not built into this binary (cargo feature `local`)".to_string(),
        }
    }
}

/// A model error as the typed cause of a failed invocation ([`agentic_engine::AgentError::Failed`]): origin
/// `model`, its transience and HTTP status, so error handlers decide by kind.
impl From<ModelError> for Cause {
    fn from(e: ModelError) -> Self {
        let (transience, status) = (e.transience(), e.status());
        let cause = Cause::new(CauseOrigin::Model, transience, e);
        match status {
            Some(s) => cause.with_status(s),
            None => cause,
        }
    }
}

/// `text` shortened to at most `max` characters (an ellipsis marks the cut).
pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16) -> ModelError {
        ModelError::Http {
            server: "s".into(),
            model: "m".into(),
            status,
            attempts: 1,
            message: "x".into(),
            retry_after: None,
        }
    }

    #[test]
    fn a_busy_server_s_retry_after_is_the_transience_s() {
        let busy = ModelError::Http {
            server: "s".into(),
            model: "m".into(),
            status: 503,
            attempts: 1,
            message: "busy".into(),
            retry_after: Some(Duration::from_secs(2)),
        };
        let asked = Transience::Transient { retry_after: Some(Duration::from_secs(2)) };
        assert_eq!(busy.transience(), asked);
        assert_eq!(Cause::from(busy).transience(), asked);
        // A refused request stays permanent whatever it says.
        let refused = ModelError::Http {
            server: "s".into(),
            model: "m".into(),
            status: 400,
            attempts: 1,
            message: "bad".into(),
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(refused.transience(), Transience::Permanent);
    }

    #[test]
    fn a_refused_request_is_permanent_a_busy_or_failing_server_transient() {
        let unauthorized = ModelError::Unauthorized {
            server: "s".into(),
            model: "m".into(),
            status: 401,
            message: "bad key".into(),
            key_source: "the environment variable `OPENAI_API_KEY`".into(),
        };
        let transient = Transience::Transient { retry_after: None };
        let cases = [
            (unauthorized, Transience::Permanent, Some(401)),
            (
                ModelError::NotFound { server: "s".into(), model: "m".into(), message: "x".into() },
                Transience::Permanent,
                Some(404),
            ),
            (http(400), Transience::Permanent, Some(400)),
            (http(408), transient, Some(408)),
            (http(429), transient, Some(429)),
            (http(503), transient, Some(503)),
            (
                ModelError::Timeout { server: "s".into(), model: "m".into(), timeout: Duration::from_secs(1) },
                transient,
                None,
            ),
            (ModelError::local_not_built(), Transience::Permanent, None),
        ];
        for (error, transience, status) in cases {
            let cause = Cause::from(error.clone());
            assert_eq!(
                (cause.transience(), cause.status(), cause.origin()),
                (transience, status, CauseOrigin::Model),
                "{error}"
            );
            assert_eq!(cause.downcast_ref::<ModelError>(), Some(&error));
            assert_eq!(cause.to_string(), error.to_string());
        }
    }
}
