//! The `chat` span of one model call ([`super::ChatModelRef::chat`], [`super::ChatModelRef::chat_stream`]),
//! named and attributed as the OpenTelemetry GenAI conventions name an inference span: `chat {model}`,
//! `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.*`, `server.address`/`server.port`, and
//! once answered `gen_ai.usage.input_tokens`/`output_tokens` and `gen_ai.response.finish_reasons` (a string
//! array, recorded with the cargo feature `otel`), or `error.type` with an error status; `agentic.model` is
//! the name the program knows the model by (a spec's `models` entry: the one a choice picked).
//!
//! Nothing is formatted or parsed unless a subscriber wants the span: the field values are evaluated by
//! `tracing` only for an enabled span, and the recordings check first.

use tracing::Span;
use tracing::field::{Empty, display};

use super::{ChatRequest, ChatResponse, FinishReason, ModelError, ModelInfo, ResponseFormat};

/// The span of one call of `info`'s model with `request`; `stream` for a streamed call.
pub(crate) fn chat_span(info: &ModelInfo, request: &ChatRequest, stream: bool) -> Span {
    tracing::info_span!(
        "chat",
        "otel.name" = format_args!("chat {}", info.model),
        "otel.kind" = if in_process(info) { "internal" } else { "client" },
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = info.provider.as_str(),
        "gen_ai.request.model" = info.model.as_str(),
        // The name the program knows the model by (a spec's `models` entry), when it gives one.
        "agentic.model" = info.name.as_deref(),
        // Integers as i64: `tracing-opentelemetry` exports unsigned ones as strings.
        "gen_ai.request.max_tokens" = request.max_tokens.map(i64::from),
        "gen_ai.request.temperature" = request.temperature,
        "gen_ai.request.stream" = stream.then_some(true),
        "gen_ai.output.type" = output_type(request),
        "server.address" = server_address(info).map(|(host, _)| host),
        "server.port" = server_address(info).and_then(|(_, port)| port).map(i64::from),
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "error.type" = Empty,
        "otel.status_code" = Empty,
    )
}

/// Records an answer on its span: the tokens the provider reported and why it stopped.
pub(crate) fn record_response(span: &Span, response: &ChatResponse) {
    if span.is_disabled() {
        return;
    }
    let usage = response.usage;
    if usage.input > 0 || usage.output > 0 {
        span.record("gen_ai.usage.input_tokens", i64::try_from(usage.input).unwrap_or(i64::MAX));
        span.record("gen_ai.usage.output_tokens", i64::try_from(usage.output).unwrap_or(i64::MAX));
    }
    record_finish_reason(span, &response.finish_reason);
}

/// Records a failed call on its span: `error.type` (the HTTP status, or a word for the kind of failure) and
/// the error status.
pub(crate) fn record_error(span: &Span, error: &ModelError) {
    if span.is_disabled() {
        return;
    }
    match error {
        ModelError::Unauthorized { status, .. } | ModelError::Http { status, .. } => {
            span.record("error.type", display(status));
        }
        other => {
            span.record("error.type", error_type(other));
        }
    }
    span.record("otel.status_code", "error");
}

/// The `error.type` of a failure without an HTTP status of its own.
fn error_type(error: &ModelError) -> &'static str {
    match error {
        ModelError::NotFound { .. } => "404",
        ModelError::Timeout { .. } => "timeout",
        ModelError::Connection { .. } => "connection",
        ModelError::InvalidResponse { .. } => "invalid_response",
        ModelError::Stream { .. } => "stream",
        ModelError::InvalidRequest { .. } => "invalid_request",
        ModelError::ScriptExhausted { .. } => "script_exhausted",
        ModelError::Unavailable { .. } => "unavailable",
        _ => "_OTHER",
    }
}

/// `gen_ai.response.finish_reasons`, a string array: set on the OpenTelemetry span directly (a `tracing` field
/// holds no array), so only with the cargo feature `otel`.
fn record_finish_reason(span: &Span, reason: &FinishReason) {
    #[cfg(feature = "otel")]
    {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let reason = reason.as_str();
        if !reason.is_empty() {
            let reasons = opentelemetry::Array::String(vec![opentelemetry::StringValue::from(reason.to_string())]);
            span.set_attribute("gen_ai.response.finish_reasons", opentelemetry::Value::Array(reasons));
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = (span, reason);
}

/// Whether the model runs in this process (the span is then `INTERNAL`, not `CLIENT`).
fn in_process(info: &ModelInfo) -> bool {
    !info.server.contains("://")
}

/// `gen_ai.output.type` of a request that asks for a format: `json` or `text`.
fn output_type(request: &ChatRequest) -> Option<&'static str> {
    match request.response_format.as_ref()? {
        ResponseFormat::Text => Some("text"),
        _ => Some("json"),
    }
}

/// The host and port of a server's base URL (`http://127.0.0.1:8080/v1` → `127.0.0.1`, `8080`); the port is
/// the scheme's when the URL names none. `None` for in-process models.
fn server_address(info: &ModelInfo) -> Option<(&str, Option<u16>)> {
    let (scheme, rest) = info.server.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let default_port = match scheme {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    };
    // `[::1]:8080`: the brackets stay out of the address.
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = after.strip_prefix(':').map_or(default_port, |p| p.parse().ok());
        return Some((host, port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host, port.parse().ok())),
        None => Some((authority, default_port)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(server: &str) -> ModelInfo {
        ModelInfo {
            provider: "openai".into(),
            server: server.into(),
            model: "m".into(),
            json_schema: true,
            tools: true,
            prices: None,
            limits: Default::default(),
            name: None,
        }
    }

    #[test]
    fn server_addresses_come_from_the_base_url() {
        assert_eq!(server_address(&info("http://127.0.0.1:8080/v1")), Some(("127.0.0.1", Some(8080))));
        assert_eq!(server_address(&info("https://api.openai.com/v1")), Some(("api.openai.com", Some(443))));
        assert_eq!(server_address(&info("http://user:pw@host:99")), Some(("host", Some(99))));
        assert_eq!(server_address(&info("http://[::1]:11434/v1")), Some(("::1", Some(11434))));
        assert_eq!(server_address(&info("local")), None);
        assert!(in_process(&info("scripted")));
        assert!(!in_process(&info("http://127.0.0.1:8080/v1")));
    }
}
