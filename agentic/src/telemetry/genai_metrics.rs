//! The OpenTelemetry GenAI client metrics, measured from the `chat` spans of the model calls
//! (`agentic-agents`): `gen_ai.client.operation.duration` (seconds) and `gen_ai.client.token.usage`
//! (tokens, by `gen_ai.token.type`), histograms with the conventions' bucket boundaries and attributes.
//!
//! A `tracing` layer: it keeps a few fields of each `chat` span while it is open and records the
//! measurements when the span closes. Other spans cost it one name comparison.

use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The bucket boundaries of `gen_ai.client.operation.duration` the conventions give, in seconds.
const DURATION_BOUNDARIES: [f64; 14] =
    [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

/// The bucket boundaries of `gen_ai.client.token.usage` the conventions give.
const TOKEN_BOUNDARIES: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
    67108864.0,
];

/// The layer recording the GenAI client metrics of the `chat` spans.
pub(crate) struct GenAiMetrics {
    duration: Histogram<f64>,
    tokens: Histogram<u64>,
}

impl GenAiMetrics {
    /// The instruments, created on `meter`.
    pub(crate) fn new(meter: &Meter) -> Self {
        let duration = meter
            .f64_histogram("gen_ai.client.operation.duration")
            .with_unit("s")
            .with_description("GenAI operation duration.")
            .with_boundaries(DURATION_BOUNDARIES.to_vec())
            .build();
        let tokens = meter
            .u64_histogram("gen_ai.client.token.usage")
            .with_unit("{token}")
            .with_description("Number of input and output tokens used.")
            .with_boundaries(TOKEN_BOUNDARIES.to_vec())
            .build();
        GenAiMetrics { duration, tokens }
    }
}

/// What the metrics need of one open `chat` span.
struct ChatCall {
    started: Instant,
    provider: Option<String>,
    model: Option<String>,
    server_address: Option<String>,
    server_port: Option<i64>,
    error_type: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

impl ChatCall {
    fn new() -> Self {
        ChatCall {
            started: Instant::now(),
            provider: None,
            model: None,
            server_address: None,
            server_port: None,
            error_type: None,
            input_tokens: None,
            output_tokens: None,
        }
    }

    /// The attributes both metrics carry.
    fn attributes(&self) -> Vec<KeyValue> {
        let mut attributes = vec![KeyValue::new("gen_ai.operation.name", "chat")];
        let text = [
            ("gen_ai.provider.name", &self.provider),
            ("gen_ai.request.model", &self.model),
            ("server.address", &self.server_address),
        ];
        for (key, value) in text {
            if let Some(v) = value {
                attributes.push(KeyValue::new(key, v.clone()));
            }
        }
        if let Some(port) = self.server_port {
            attributes.push(KeyValue::new("server.port", port));
        }
        attributes
    }
}

impl Visit for ChatCall {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            "gen_ai.provider.name" => &mut self.provider,
            "gen_ai.request.model" => &mut self.model,
            "server.address" => &mut self.server_address,
            "error.type" => &mut self.error_type,
            _ => return,
        };
        *slot = Some(value.to_string());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "gen_ai.usage.input_tokens" => self.input_tokens = Some(value),
            "gen_ai.usage.output_tokens" => self.output_tokens = Some(value),
            "server.port" => self.server_port = i64::try_from(value).ok(),
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.record_u64(field, value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `error.type` as an HTTP status is recorded through its `Display`.
        if field.name() == "error.type" {
            self.error_type = Some(format!("{value:?}"));
        }
    }
}

impl<S> Layer<S> for GenAiMetrics
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        if meta.name() != "chat" || !meta.target().starts_with("agentic_agents") {
            return;
        }
        let mut call = ChatCall::new();
        attrs.record(&mut call);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(call);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(call) = span.extensions_mut().get_mut::<ChatCall>()
        {
            values.record(call);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(call) = ctx.span(&id).and_then(|span| span.extensions_mut().remove::<ChatCall>()) else {
            return;
        };
        let mut attributes = call.attributes();
        if call.error_type.is_none() {
            for (kind, count) in [("input", call.input_tokens), ("output", call.output_tokens)] {
                if let Some(count) = count {
                    attributes.push(KeyValue::new("gen_ai.token.type", kind));
                    self.tokens.record(count, &attributes);
                    attributes.pop();
                }
            }
        }
        if let Some(error) = call.error_type {
            attributes.push(KeyValue::new("error.type", error));
        }
        self.duration.record(call.started.elapsed().as_secs_f64(), &attributes);
    }
}
