//! Exporting the engine's spans and the GenAI client metrics to an OpenTelemetry collector over OTLP (cargo
//! feature `otel`).
//!
//! The spans follow the OpenTelemetry GenAI semantic conventions (docs/telemetry.md lists them with their
//! attributes): `invoke_workflow` for each run or resumption, `invoke_agent` for each agent invocation (nested
//! as the agents are), `chat` for each model call and `execute_tool` for each tool call of an LLM agent; a
//! composite's planner decisions are events on its span. The metrics `gen_ai.client.operation.duration` and
//! `gen_ai.client.token.usage` are measured from the `chat` spans. [`otlp_layer`] gives a `tracing-subscriber`
//! layer exporting both, to add to your own subscriber; [`init_from_env`] installs a global subscriber (logs
//! to stderr filtered by `AGENTIC_LOG`, plus the OTLP layer) when the standard `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (or `..._TRACES_ENDPOINT`) variable is set — that is what the `agentic` CLI does when built with
//! `--features otel`.
//!
//! Spans are exported in batches from a background thread, metrics periodically (every 60 s, or
//! `OTEL_METRIC_EXPORT_INTERVAL` ms); keep the returned [`OtlpGuard`] alive while the program runs: dropping it
//! flushes what is left and shuts the exporters down.
//!
//! The transport is OTLP over HTTP (`http/protobuf` by default, `http/json` when
//! `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`), the collector's port 4318: spans to `/v1/traces`, metrics to
//! `/v1/metrics`.

mod genai_metrics;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The service name spans are reported under unless `OTEL_SERVICE_NAME` says otherwise.
pub const DEFAULT_SERVICE_NAME: &str = "agentic";

/// Where and how to send spans.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OtlpConfig {
    /// The collector's base URL, e.g. `http://127.0.0.1:4318` (`/v1/traces` is appended).
    pub endpoint: String,
    /// The wire format: protobuf (default) or JSON.
    pub json: bool,
    /// The `service.name` resource attribute (default [`DEFAULT_SERVICE_NAME`]).
    pub service_name: String,
    /// Whether the GenAI client metrics are exported too, to `/v1/metrics` (default true;
    /// `OTEL_METRICS_EXPORTER=none` turns them off).
    pub metrics: bool,
}

impl OtlpConfig {
    /// Protobuf over HTTP to `endpoint` (the collector's base URL), service name `agentic`.
    pub fn new(endpoint: impl Into<String>) -> Self {
        OtlpConfig {
            endpoint: endpoint.into(),
            json: false,
            service_name: DEFAULT_SERVICE_NAME.to_string(),
            metrics: true,
        }
    }

    /// Sends JSON instead of protobuf (`http/json`).
    pub fn json(mut self, json: bool) -> Self {
        self.json = json;
        self
    }

    /// Sets the `service.name` resource attribute.
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = name.into();
        self
    }

    /// Exports the GenAI client metrics too (default), or not.
    pub fn metrics(mut self, metrics: bool) -> Self {
        self.metrics = metrics;
        self
    }

    /// The configuration the standard environment variables describe: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// (used as is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (base URL), `OTEL_EXPORTER_OTLP_PROTOCOL`
    /// (`http/protobuf` or `http/json`), `OTEL_SERVICE_NAME`, `OTEL_METRICS_EXPORTER` (`none`: no metrics).
    /// `None` when no endpoint is set.
    ///
    /// # Errors
    /// [`TelemetryError`] when the protocol is not one of the two HTTP protocols (`grpc` is not built in).
    pub fn from_env() -> Result<Option<Self>, TelemetryError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let endpoint = match (var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), var("OTEL_EXPORTER_OTLP_ENDPOINT")) {
            (Some(traces), _) => traces.trim_end_matches("/v1/traces").to_string(),
            (None, Some(base)) => base,
            (None, None) => return Ok(None),
        };
        let json = match var("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref() {
            None | Some("http/protobuf") => false,
            Some("http/json") => true,
            Some(other) => {
                return Err(TelemetryError(format!(
                    "OTEL_EXPORTER_OTLP_PROTOCOL=`{other}` is not supported; use `http/protobuf` or `http/json`"
                )));
            }
        };
        let service_name = var("OTEL_SERVICE_NAME").unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_string());
        let metrics = var("OTEL_METRICS_EXPORTER").is_none_or(|e| e.trim() != "none");
        Ok(Some(OtlpConfig { endpoint, json, service_name, metrics }))
    }
}

/// Why the exporter could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("OpenTelemetry export: {0}")]
pub struct TelemetryError(String);

/// Keeps the exporters running; dropping it exports the spans and metrics still buffered and shuts the
/// exporters down.
#[derive(Debug)]
#[must_use = "dropping the guard shuts the exporter down"]
pub struct OtlpGuard {
    provider: SdkTracerProvider,
    meters: Option<SdkMeterProvider>,
}

impl OtlpGuard {
    /// Exports the buffered spans and the metrics now.
    ///
    /// # Errors
    /// [`TelemetryError`] when the collector could not be reached or refused them.
    pub fn flush(&self) -> Result<(), TelemetryError> {
        self.provider.force_flush().map_err(|e| TelemetryError(e.to_string()))?;
        match &self.meters {
            Some(meters) => meters.force_flush().map_err(|e| TelemetryError(e.to_string())),
            None => Ok(()),
        }
    }
}

impl Drop for OtlpGuard {
    fn drop(&mut self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("agentic: OpenTelemetry export: {e}");
        }
        if let Some(Err(e)) = self.meters.as_ref().map(SdkMeterProvider::shutdown) {
            eprintln!("agentic: OpenTelemetry metrics export: {e}");
        }
    }
}

/// A `tracing-subscriber` layer exporting spans to `config.endpoint` (and, unless `config.metrics` is false,
/// the GenAI client metrics measured from the `chat` spans), and the guard keeping it running.
///
/// # Errors
/// [`TelemetryError`] when an HTTP exporter cannot be built (an invalid endpoint URL).
pub fn otlp_layer<S>(config: &OtlpConfig) -> Result<(impl Layer<S>, OtlpGuard), TelemetryError>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    let protocol = if config.json { Protocol::HttpJson } else { Protocol::HttpBinary };
    let base = config.endpoint.trim_end_matches('/');
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .with_endpoint(format!("{base}/v1/traces"))
        .build()
        .map_err(|e| TelemetryError(format!("endpoint `{}`: {e}", config.endpoint)))?;
    let resource = Resource::builder().with_service_name(config.service_name.clone()).build();
    let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.clone()).build();
    let tracer = provider.tracer("agentic");
    let meters = if config.metrics {
        let exporter = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(protocol)
            .with_endpoint(format!("{base}/v1/metrics"))
            .build()
            .map_err(|e| TelemetryError(format!("endpoint `{}`: {e}", config.endpoint)))?;
        Some(SdkMeterProvider::builder().with_periodic_exporter(exporter).with_resource(resource).build())
    } else {
        None
    };
    let metrics = meters.as_ref().map(|m| genai_metrics::GenAiMetrics::new(&m.meter("agentic")));
    let layer = tracing_opentelemetry::layer().with_tracer(tracer).and_then(metrics);
    Ok((layer, OtlpGuard { provider, meters }))
}

/// Installs the global subscriber: log lines on stderr filtered by `AGENTIC_LOG` (default `warn`) and, when
/// [`OtlpConfig::from_env`] finds an endpoint, the OTLP export of every span at `info` level and above (but
/// the actor runtime's, target `ractor`).
/// Returns the guard when exporting (keep it until the program ends).
///
/// # Errors
/// [`TelemetryError`] for an unsupported protocol or an invalid endpoint, or when a global subscriber is
/// already installed.
pub fn init_from_env() -> Result<Option<OtlpGuard>, TelemetryError> {
    let filter = || {
        let user = std::env::var("AGENTIC_LOG").ok();
        tracing_subscriber::EnvFilter::new(agentic_agents::log_directives(user.as_deref()))
    };
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter());
    let Some(config) = OtlpConfig::from_env()? else {
        return tracing_subscriber::registry()
            .with(fmt)
            .try_init()
            .map(|()| None)
            .map_err(|e| TelemetryError(e.to_string()));
    };
    let (otel, guard) = otlp_layer(&config)?;
    // The actor runtime's own spans (`Actor`, one per actor) say nothing the GenAI spans do not.
    let otel = otel.with_filter(
        tracing_subscriber::filter::Targets::new()
            .with_default(tracing::Level::INFO)
            .with_target("ractor", tracing_subscriber::filter::LevelFilter::OFF),
    );
    tracing_subscriber::registry().with(fmt).with(otel).try_init().map_err(|e| TelemetryError(e.to_string()))?;
    Ok(Some(guard))
}
