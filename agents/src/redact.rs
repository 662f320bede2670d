//! Credentials kept out of error messages: an HTTP client sends a credential (an API key, a header, a child
//! process's environment) and the server it calls may repeat it in an error (`Incorrect API key provided:
//! sk-…`); every error the client builds passes through its [`Redactions`], which show `[secret:NAME]` (or
//! the label the credential was given) where the value was. An error's text reaches the journal, `show`,
//! reports, event streams and logs: this is where a credential stops.

use std::sync::Arc;

/// Values that must not appear in an error message, each with what is shown instead. Cheap to clone;
/// `Debug` shows the labels only. A value shorter than [`MIN_REDACTED_LEN`] bytes is not redacted (it would
/// mangle every message that holds those few characters, and hides nothing worth hiding).
#[derive(Clone, Default)]
pub struct Redactions(Arc<[(String, String)]>);

/// The shortest value [`Redactions`] replaces, in bytes.
pub const MIN_REDACTED_LEN: usize = 4;

impl std::fmt::Debug for Redactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|(_, shown)| shown)).finish()
    }
}

impl Redactions {
    /// Redactions of `pairs`, `(value, shown instead)`; longer values first, so that a value holding another
    /// is replaced whole.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut pairs: Vec<(String, String)> = pairs
            .into_iter()
            .filter(|(v, _)| v.len() >= MIN_REDACTED_LEN)
            // A server that repeats the value inside JSON escapes it (`"`, `\`, control characters, and `/` as
            // `\/` for some encoders): those forms are the value too.
            .flat_map(|(v, shown)| {
                let json = serde_json::to_string(&v).map(|q| q[1..q.len() - 1].to_string()).unwrap_or_default();
                let slashed = json.replace('/', "\\/");
                let variants = [json, slashed].into_iter().filter(|e| !e.is_empty() && *e != v).collect::<Vec<_>>();
                std::iter::once((v, shown.clone())).chain(variants.into_iter().map(move |e| (e, shown.clone())))
            })
            .collect();
        pairs.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        pairs.dedup_by(|a, b| a.0 == b.0);
        Redactions(pairs.into())
    }

    /// These redactions and `other`'s.
    #[must_use]
    pub fn and(&self, other: &Redactions) -> Self {
        Redactions::new(self.0.iter().chain(other.0.iter()).cloned())
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `text` with each value replaced by what is shown instead.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (value, shown) in self.0.iter() {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), shown);
            }
        }
        out
    }
}

/// The log targets of the SDKs the clients use (the MCP SDK, the OpenAI client): their log lines carry a
/// server's raw replies, which may repeat a credential, and their failures come back as the agents' errors.
pub const SDK_LOG_TARGETS: [&str; 2] = ["rmcp", "async_openai"];

/// The log filter's directives for `AGENTIC_LOG`'s value `user` (`None`: unset): `warn` by default, and each
/// of [`SDK_LOG_TARGETS`] off unless `user` names it (`AGENTIC_LOG=debug,rmcp=debug` shows the MCP SDK's).
pub fn log_directives(user: Option<&str>) -> String {
    let mut directives = user.map(str::trim).filter(|u| !u.is_empty()).unwrap_or("warn").to_string();
    for target in SDK_LOG_TARGETS {
        if !directives.contains(target) {
            directives.push_str(&format!(",{target}=off"));
        }
    }
    directives
}

/// `headers`, `(name, value)`, as HTTP headers marked sensitive (no log of the HTTP client shows them).
///
/// # Errors
/// The first header whose name or value HTTP cannot carry, named (never its value).
pub(crate) fn sensitive_headers(
    headers: &[(String, String)],
) -> Result<Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>, String> {
    headers
        .iter()
        .map(|(name, value)| {
            let key = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("header `{name}` is not an HTTP header name"))?;
            let mut value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| format!("the value of header `{name}` holds characters an HTTP header cannot carry"))?;
            value.set_sensitive(true);
            Ok((key, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdks_logs_stay_off_unless_named() {
        assert_eq!(log_directives(None), "warn,rmcp=off,async_openai=off");
        assert_eq!(log_directives(Some("debug")), "debug,rmcp=off,async_openai=off");
        assert_eq!(log_directives(Some("debug,rmcp=trace")), "debug,rmcp=trace,async_openai=off");
    }

    #[test]
    fn values_are_shown_as_their_labels_the_longest_first() {
        let r = Redactions::new([
            ("sk-live-1".to_string(), "[secret:KEY]".to_string()),
            ("sk-live-1-extended".to_string(), "[secret:LONG]".to_string()),
            ("ab".to_string(), "[secret:SHORT]".to_string()),
        ]);
        assert_eq!(
            r.apply("Incorrect API key provided: Bearer sk-live-1-extended, then sk-live-1; ab stays"),
            "Incorrect API key provided: Bearer [secret:LONG], then [secret:KEY]; ab stays"
        );
        assert_eq!(format!("{r:?}"), r#"["[secret:LONG]", "[secret:KEY]"]"#);
        let slashed = Redactions::new([("sk/9q\"x".to_string(), "[secret:K]".to_string())]);
        assert_eq!(
            slashed.apply(r#"{"error": "bad key sk\/9q\"x"} or sk/9q\"x or {"k": "sk/9q\"x"}"#),
            r#"{"error": "bad key [secret:K]"} or [secret:K] or {"k": "[secret:K]"}"#
        );
        assert!(Redactions::default().is_empty());
    }
}
