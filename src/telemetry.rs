//! Exporting the engine's spans to an OpenTelemetry collector over OTLP (cargo feature `otel`).
//!
//! Every agent invocation is a `tracing` span named `invoke_agent` carrying the OpenTelemetry GenAI
//! semantic-convention attributes (`gen_ai.operation.name`, `gen_ai.agent.name`, `gen_ai.request.model`,
//! `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`) and ours (`agentic.agent.path`,
//! `agentic.agent.kind`, `agentic.run_id`, `agentic.attempt`); nested invocations are child spans. This
//! module turns those spans into OTLP traces: [`otlp_layer`] gives a `tracing-subscriber` layer to add to your
//! own subscriber, [`init_from_env`] installs a global subscriber (logs to stderr filtered by `AGENTIC_LOG`,
//! plus the OTLP layer) when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) variable
//! is set — that is what the `agentic` CLI does when built with `--features otel`.
//!
//! Spans are exported in batches from a background thread; keep the returned [`OtlpGuard`] alive while the
//! program runs: dropping it flushes what is left and shuts the exporter down.
//!
//! The transport is OTLP over HTTP (`http/protobuf` by default, `http/json` when
//! `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`), the collector's port 4318.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
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
}

impl OtlpConfig {
    /// Protobuf over HTTP to `endpoint` (the collector's base URL), service name `agentic`.
    pub fn new(endpoint: impl Into<String>) -> Self {
        OtlpConfig { endpoint: endpoint.into(), json: false, service_name: DEFAULT_SERVICE_NAME.to_string() }
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

    /// The configuration the standard environment variables describe: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// (used as is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (base URL), `OTEL_EXPORTER_OTLP_PROTOCOL`
    /// (`http/protobuf` or `http/json`), `OTEL_SERVICE_NAME`. `None` when no endpoint is set.
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
        Ok(Some(OtlpConfig { endpoint, json, service_name }))
    }
}

/// Why the exporter could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("OpenTelemetry export: {0}")]
pub struct TelemetryError(String);

/// Keeps the exporter running; dropping it exports the spans still buffered and shuts the exporter down.
#[derive(Debug)]
#[must_use = "dropping the guard shuts the exporter down"]
pub struct OtlpGuard {
    provider: SdkTracerProvider,
}

impl OtlpGuard {
    /// Exports the buffered spans now.
    ///
    /// # Errors
    /// [`TelemetryError`] when the collector could not be reached or refused the spans.
    pub fn flush(&self) -> Result<(), TelemetryError> {
        self.provider.force_flush().map_err(|e| TelemetryError(e.to_string()))
    }
}

impl Drop for OtlpGuard {
    fn drop(&mut self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("agentic: OpenTelemetry export: {e}");
        }
    }
}

/// A `tracing-subscriber` layer exporting spans to `config.endpoint`, and the guard keeping it running.
///
/// # Errors
/// [`TelemetryError`] when the HTTP exporter cannot be built (an invalid endpoint URL).
pub fn otlp_layer<S>(config: &OtlpConfig) -> Result<(impl Layer<S>, OtlpGuard), TelemetryError>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    let protocol = if config.json { Protocol::HttpJson } else { Protocol::HttpBinary };
    let endpoint = format!("{}/v1/traces", config.endpoint.trim_end_matches('/'));
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| TelemetryError(format!("endpoint `{}`: {e}", config.endpoint)))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(config.service_name.clone()).build())
        .build();
    let tracer = provider.tracer("agentic");
    Ok((tracing_opentelemetry::layer().with_tracer(tracer), OtlpGuard { provider }))
}

/// Installs the global subscriber: log lines on stderr filtered by `AGENTIC_LOG` (default `warn`) and, when
/// [`OtlpConfig::from_env`] finds an endpoint, the OTLP export of every span at `info` level and above.
/// Returns the guard when exporting (keep it until the program ends).
///
/// # Errors
/// [`TelemetryError`] for an unsupported protocol or an invalid endpoint, or when a global subscriber is
/// already installed.
pub fn init_from_env() -> Result<Option<OtlpGuard>, TelemetryError> {
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_env("AGENTIC_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rmcp=off"))
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
    let otel = otel.with_filter(tracing_subscriber::filter::LevelFilter::INFO);
    tracing_subscriber::registry().with(fmt).with(otel).try_init().map_err(|e| TelemetryError(e.to_string()))?;
    Ok(Some(guard))
}
