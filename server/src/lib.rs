//! # agentic-server
//!
//! `agentic serve`: the runs of one store hosted behind an HTTP API (SERVER.md §2), with live events over
//! server-sent events, a web UI whose inbox lets people answer human steps (§3), and the specs of `--specs` as
//! MCP tools at `/mcp` (streamable HTTP; each call runs one workflow). Runs execute as the
//! engine's run actors in this process; a suspended run keeps nothing in memory, and once its answers are in
//! it continues by itself. At start the server resumes the runs that were executing when the last process
//! holding the store stopped.
//!
//! ```no_run
//! # async fn demo(store: agentic_engine::StoreRef) -> Result<(), agentic_server::ServeError> {
//! use agentic_server::{Server, ServerConfig};
//!
//! let server = Server::start(ServerConfig::new(store).specs_dir("examples/specs")).await?;
//! println!("listening on {}", server.url());
//! server.run_until(async { tokio::signal::ctrl_c().await.ok(); }).await?;
//! # Ok(()) }
//! ```
//!
//! LangGraph offers the same as a hosted "agent server"; LangChain4j leaves it to the application.
//!
//! Public surface: the modules are private and every public item is defined or re-exported here, at one
//! path; `fuzzing` (only with `cfg(fuzzing)`) is for the fuzz target, not an API.

mod a2a;
mod access;
mod api;
mod auth;
mod cluster;
mod error;
mod events;
mod host;
mod keys;
mod mcp;
mod schedule;
mod scheduler;
mod tls;
mod ui;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentic_engine::StoreRef;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use tokio_util::sync::CancellationToken;

pub use error::ServeError;
pub use keys::{KEY_PREFIX, KeyError, NewKey, create_key, key_json, list_keys, revoke_key};
pub use tls::{HANDSHAKE_TIMEOUT, TlsError, TlsFiles};

use events::{EventHub, JournalTap};
use host::{RunHost, SpecCatalog};

/// The default listen address: loopback, port 7878 (SERVER.md §1).
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 7878);

/// How long [`Server::shutdown`] waits for the steps in flight to finish.
pub const DRAIN_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// The variable the bearer token is read from unless `--token-env` names another.
pub const DEFAULT_TOKEN_ENV: &str = "AGENTIC_TOKEN";

/// The file a running server advertises itself in, inside its state directory (the sled store's
/// directory): `{"url", "pid", "token_env", "tls_cert"}`. The CLI finds the server there.
pub const SERVER_FILE: &str = "server.json";

/// How to start a [`Server`]. Defaults: listen on [`DEFAULT_LISTEN`]; no specs offered by name; no token
/// (then only a loopback address is allowed); no state directory (posted specs are not kept, so their runs
/// cannot resume after a restart, and the server does not advertise itself).
#[derive(Clone)]
pub struct ServerConfig {
    store: StoreRef,
    store_label: String,
    state_dir: Option<PathBuf>,
    listen: SocketAddr,
    specs: Option<PathBuf>,
    token: Option<String>,
    token_env: String,
    lease_time: Duration,
    tls: Option<TlsFiles>,
}

/// How long a run's lease lasts unless [`ServerConfig::lease_time`] says otherwise (SERVER.md §4).
pub const DEFAULT_LEASE_TIME: Duration = Duration::from_secs(10);

impl ServerConfig {
    /// A configuration serving the runs of `store`.
    pub fn new(store: StoreRef) -> Self {
        ServerConfig {
            store,
            store_label: String::new(),
            state_dir: None,
            listen: DEFAULT_LISTEN,
            specs: None,
            token: None,
            token_env: DEFAULT_TOKEN_ENV.to_string(),
            lease_time: DEFAULT_LEASE_TIME,
            tls: None,
        }
    }

    /// Serves HTTPS with the certificate chain and key of `files` (PEM) instead of HTTP.
    pub fn tls(mut self, files: TlsFiles) -> Self {
        self.tls = Some(files);
        self
    }

    /// How long the leases of the store last (the store's own setting, e.g. `PgStore::with_lease`): on a
    /// shared store the server renews its leases and looks for runs to take over every third of it.
    pub fn lease_time(mut self, lease_time: Duration) -> Self {
        self.lease_time = lease_time;
        self
    }

    /// How `/healthz` names the store (e.g. its directory).
    pub fn store_label(mut self, label: impl Into<String>) -> Self {
        self.store_label = label.into();
        self
    }

    /// A directory of the server's own (the sled store's directory): [`SERVER_FILE`] is written there while
    /// the server runs, and the texts of posted specs are kept under `specs/`.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// The address to listen on (port 0: any free port; see [`Server::local_addr`]).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// The specs offered by name (file stem): `POST /api/v1/runs {"spec_name": ..}`, the new-run form, and
    /// the MCP tools at `/mcp`.
    pub fn specs_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.specs = Some(dir.into());
        self
    }

    /// The bearer token every request must carry (`Authorization: Bearer <token>`), and the variable it
    /// came from (named in messages). `None`: no token.
    pub fn token(mut self, token: Option<String>, from_env: impl Into<String>) -> Self {
        self.token = token.filter(|t| !t.is_empty());
        self.token_env = from_env.into();
        self
    }
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) host: RunHost,
    pub(crate) store_label: Arc<str>,
    pub(crate) token: Option<Arc<str>>,
    /// The context ids A2A clients gave their tasks.
    pub(crate) a2a_contexts: a2a::Contexts,
    /// Served over HTTPS: the sign-in cookie is `Secure` (sent back only over HTTPS).
    pub(crate) tls: bool,
    /// The API keys, as last read from the store.
    pub(crate) keys: auth::KeyCache,
    /// Who opened each MCP session.
    pub(crate) mcp_sessions: mcp::SessionOwners,
}

impl AppState {
    /// The store to read what `principal` may see through: on a backend that enforces tenants itself
    /// (PostgreSQL's row-level security), a view of the principal's tenant only; else the whole store (the
    /// handlers filter by [`auth::Principal::sees`]).
    pub(crate) fn store_for(&self, principal: &auth::Principal) -> StoreRef {
        principal
            .tenant
            .as_deref()
            .and_then(|tenant| self.host.store().tenant_view_dyn(tenant))
            .unwrap_or_else(|| self.host.store().clone())
    }
}

/// A running server. Drop it or call [`Server::shutdown`] to stop it.
pub struct Server {
    addr: SocketAddr,
    /// `https` under TLS, else `http`.
    scheme: &'static str,
    host: RunHost,
    stop: CancellationToken,
    http: tokio::task::JoinHandle<std::io::Result<()>>,
    server_file: Option<PathBuf>,
    /// Stops the scheduler (first thing at shutdown: no tick is taken while the runs drain).
    scheduling: CancellationToken,
    scheduler: Option<tokio::task::JoinHandle<()>>,
    /// Stops the scheduler when the server is dropped without a shutdown too.
    _scheduling_on_drop: tokio_util::sync::DropGuard,
}

impl Server {
    /// Loads the specs directory's `schedules.yaml` into the store, binds the listen address, resumes the runs
    /// that were in flight when the store's last holder stopped, advertises the server in its state directory,
    /// starts serving and (with a specs directory) fires the ticks of the store's schedules.
    ///
    /// # Errors
    /// [`ServeError::TokenRequired`] for a non-loopback address without a token or an active API key in the
    /// store; [`ServeError::Bind`];
    /// [`ServeError::Specs`] when the specs directory cannot be read; [`ServeError::Schedules`] when its
    /// `schedules.yaml` is invalid; [`ServeError::Store`] when the runs cannot be listed or the schedules
    /// written.
    pub async fn start(config: ServerConfig) -> Result<Server, ServeError> {
        if !config.listen.ip().is_loopback() && config.token.is_none() {
            // API keys in the store guard it as a token does.
            let keys = config.store.keys_dyn().await?;
            if keys.iter().all(|k| k.revoked_at_ms.is_some()) {
                return Err(ServeError::TokenRequired { addr: config.listen, token_env: config.token_env });
            }
        }
        if let Some(dir) = &config.specs {
            std::fs::read_dir(dir).map_err(|source| ServeError::Specs { dir: dir.clone(), source })?;
        }
        // Read before anything starts: a certificate that cannot be served stops the server at once.
        let tls = config.tls.as_ref().map(TlsFiles::server_config).transpose()?;
        let stop = CancellationToken::new();
        let (host, app) = application(&config, &stop).await?;
        if let Some(dir) = &config.specs {
            let listed = schedule::load_file(&host, dir).await?;
            if listed > 0 {
                tracing::info!("{listed} schedules in {}", dir.join(schedule::SCHEDULES_FILE).display());
            }
        }
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServeError::Bind { addr: config.listen, source })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Bind { addr: config.listen, source })?;
        let resumed = host.resume_interrupted().await?;
        if resumed > 0 {
            tracing::info!("resumed {resumed} interrupted runs");
        }
        if host.store().shared_dyn() {
            tokio::spawn(keep_leases(host.clone(), config.lease_time / 3, stop.clone()));
        }
        tokio::spawn(fire_timers(host.clone(), TIMER_EVERY, stop.clone()));
        // Schedules start specs of --specs: a server without them takes no tick.
        let scheduling = CancellationToken::new();
        let scheduler = config.specs.as_ref().map(|_| {
            let scheduler = scheduler::Scheduler::new(host.clone(), config.lease_time);
            tokio::spawn(scheduler.run(scheduling.clone()))
        });
        let stopped = stop.clone();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let http = match tls {
            Some(config) => {
                let listener =
                    tls::TlsListener::new(listener, config).map_err(|source| ServeError::Bind { addr, source })?;
                tokio::spawn(async move {
                    axum::serve(listener, app).with_graceful_shutdown(async move { stopped.cancelled().await }).await
                })
            }
            None => {
                // No Nagle: an event stream writes small frames one after another, which Nagle's algorithm
                // would hold until the client's delayed acknowledgement (40 ms on Linux) — every live event
                // would wait for it.
                let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                    if let Err(e) = tcp.set_nodelay(true) {
                        tracing::debug!("cannot set TCP_NODELAY: {e}");
                    }
                });
                tokio::spawn(async move {
                    axum::serve(listener, app).with_graceful_shutdown(async move { stopped.cancelled().await }).await
                })
            }
        };
        let server_file = config.state_dir.as_ref().map(|d| d.join(SERVER_FILE));
        if let Some(file) = &server_file {
            let advert = serde_json::json!({
                "url": format!("{scheme}://{addr}"),
                "pid": std::process::id(),
                "token_env": config.token.as_ref().map(|_| config.token_env.clone()),
                // The CLI on this store trusts it when it talks to the server.
                // Absolute: the CLI reads it from any directory.
                "tls_cert": config.tls.as_ref().map(|t| {
                    std::path::absolute(&t.cert).unwrap_or_else(|_| t.cert.clone()).display().to_string()
                }),
            });
            if let Err(e) = std::fs::write(file, advert.to_string()) {
                tracing::warn!("cannot write {}: {e}; the CLI will not find this server", file.display());
            }
        }
        let _scheduling_on_drop = scheduling.clone().drop_guard();
        Ok(Server { addr, scheme, host, stop, http, server_file, scheduling, scheduler, _scheduling_on_drop })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's base URL (`http://127.0.0.1:7878`, `https://..` under TLS).
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// Serves until `signal` completes, then shuts down ([`Server::shutdown`]).
    ///
    /// # Errors
    /// As [`Server::shutdown`].
    pub async fn run_until(self, signal: impl std::future::Future<Output = ()>) -> Result<(), ServeError> {
        signal.await;
        self.shutdown().await
    }

    /// Stops (SIGTERM): no new runs are accepted; the runs executing stop at their step boundaries — the
    /// steps in flight finish and are journaled, nothing new starts, the runs stay `running` — for at most
    /// [`DRAIN_GRACE`]; then the HTTP server stops, the store is flushed and the advertisement removed. The
    /// next server on this store continues the runs. A step still running after the grace is left as a crash
    /// would leave it (it runs again at the next start).
    ///
    /// # Errors
    /// [`ServeError::Http`] when the HTTP server failed.
    pub async fn shutdown(self) -> Result<(), ServeError> {
        self.scheduling.cancel();
        if let Some(mut scheduler) = self.scheduler {
            // A pass in progress ends within its store writes; one stuck on an unreachable store is stopped
            // (a tick it took is completed by the next server, as a dead server's).
            if tokio::time::timeout(Duration::from_secs(5), &mut scheduler).await.is_err() {
                scheduler.abort();
            }
        }
        self.host.stop_accepting();
        if !self.host.drain(DRAIN_GRACE).await {
            tracing::warn!("steps still running after {DRAIN_GRACE:?}: they run again at the next start");
        }
        // Event streams of runs that did not end would keep their connections (and the shutdown) open.
        self.host.hub().close_all();
        self.stop.cancel();
        let served = self.http.await;
        if let Err(e) = self.host.store().flush_dyn().await {
            tracing::error!("flushing the store at shutdown: {e}");
        }
        if let Some(file) = &self.server_file {
            let _ = std::fs::remove_file(file);
        }
        match served {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ServeError::Http(e)),
            Err(e) => Err(ServeError::Http(std::io::Error::other(e))),
        }
    }

    /// How many runs execute in this process now (each has at least one step in flight).
    pub fn runs_in_flight(&self) -> usize {
        self.host.in_flight()
    }

    /// Waits until no run task started so far is executing (runs that suspend count as done).
    pub async fn wait_idle(&self) {
        self.host.wait_idle().await;
    }
}

/// The run host and the whole application of `config`, not yet bound: the store tapped for live events, the
/// cluster's cancel listener started, the MCP service's sessions ending with `stop` (any host name accepted on a
/// public address).
async fn application(config: &ServerConfig, stop: &CancellationToken) -> Result<(RunHost, Router), ServeError> {
    let cluster = cluster::Cluster::new(config.store.shared_dyn());
    let hub = EventHub::new(cluster.clone());
    let store: StoreRef = Arc::new(JournalTap { inner: config.store.clone(), hub: hub.clone() });
    let host = RunHost::new(store, hub, SpecCatalog::new(config.specs.clone()));
    // Cancels recorded by other servers reach the runs executing here at once.
    let (on_cancel, on_reconnect) = (host.clone(), host.clone());
    cluster
        .start(
            config.store.clone(),
            move |run_id| on_cancel.cancel_here(&run_id),
            move || {
                let host = on_reconnect.clone();
                tokio::spawn(async move { host.cancel_requested_here().await });
            },
        )
        .await?;
    let state = AppState {
        host: host.clone(),
        store_label: Arc::from(config.store_label.as_str()),
        token: config.token.as_deref().map(Arc::from),
        a2a_contexts: a2a::Contexts::default(),
        tls: config.tls.is_some(),
        keys: auth::KeyCache::default(),
        mcp_sessions: mcp::SessionOwners::default(),
    };
    // The MCP endpoint's sessions and streams end with the HTTP server (else they would hold its graceful
    // shutdown open).
    let public = !config.listen.ip().is_loopback();
    let protocols = Protocols { mcp: mcp::service(state.clone(), stop.child_token(), public) };
    Ok((host, router(state, protocols)))
}

/// The whole application in process, for the fuzz target of `fuzz/` (built with `cfg(fuzzing)`); not an API.
#[cfg(fuzzing)]
#[doc(hidden)]
#[allow(missing_docs)]
pub mod fuzzing {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    pub struct App {
        router: axum::Router,
        _host: super::host::RunHost,
        _stop: tokio_util::sync::CancellationToken,
    }

    impl App {
        pub async fn new(config: super::ServerConfig) -> App {
            let stop = tokio_util::sync::CancellationToken::new();
            let (host, router) = super::application(&config, &stop).await.expect("the application builds");
            App { router, _host: host, _stop: stop }
        }

        /// One request through the whole application: its status, headers and body.
        pub async fn call(&self, request: Request<Body>) -> axum::http::Response<Vec<u8>> {
            let response = self.router.clone().oneshot(request).await.expect("the router is infallible");
            let (parts, body) = response.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX).await.map(|b| b.to_vec()).unwrap_or_default();
            axum::http::Response::from_parts(parts, bytes)
        }
    }
}

/// On a shared store, every `interval` (a third of the lease time) until `stop`: renews the leases of the
/// runs this server executes, then takes over the runs whose lease ran out (a server that died) and the
/// suspended runs whose every answer was given (an answer that its server could not act on). Polling, not
/// LISTEN/NOTIFY: a take-over waits for a lease to expire anyway, and an answer is acted on at once by the
/// server it was posted to (this loop only catches the rare answer that raced with its run's suspension).
async fn keep_leases(host: RunHost, interval: Duration, stop: CancellationToken) {
    let interval = interval.max(Duration::from_millis(10));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        host.renew_leases().await;
        match host.resume_interrupted().await {
            Ok(0) => {}
            Ok(n) => tracing::info!("took over {n} runs"),
            Err(e) => tracing::warn!("cannot look for runs to take over: {e}"),
        }
    }
}

/// How often a server looks for due timers (deadlines, waits): a timer fires at most this late.
const TIMER_EVERY: Duration = Duration::from_millis(500);

/// Every `interval` until `stop`: continues the suspended runs whose timers are due ([`RunHost::fire_timers`]).
async fn fire_timers(host: RunHost, interval: Duration, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        match host.fire_timers().await {
            Ok(0) => {}
            Ok(n) => tracing::info!("{n} timers fired"),
            Err(e) => tracing::warn!("cannot look for due timers: {e}"),
        }
    }
}

/// The agent protocols served next to the API as tower services of their SDKs (MCP at [`mcp::PATH`]); A2A's
/// cards and JSON-RPC endpoints are plain routes ([`a2a::routes`]).
struct Protocols {
    mcp: mcp::McpService,
}

/// The whole application: API, UI, agent protocols, auth, limits, tracing and compression.
fn router(state: AppState, protocols: Protocols) -> Router {
    Router::new()
        .merge(api::routes())
        .merge(schedule::routes())
        .merge(access::routes())
        .merge(ui::routes())
        .merge(
            Router::new()
                .route_service(mcp::PATH, protocols.mcp)
                .route_layer(axum::middleware::from_fn_with_state(state.clone(), mcp::bind_sessions)),
        )
        .merge(a2a::routes())
        .fallback(ui::not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::require_principal))
        .layer(DefaultBodyLimit::max(api::BODY_LIMIT))
        .layer(tower_http::compression::CompressionLayer::new())
        .layer(tower_http::trace::TraceLayer::new_for_http().on_failure(log_failure))
        .with_state(state)
}

/// Logs a request that failed: a `503` (a draining server's readiness and refused runs, a store restarting:
/// expected, and answered with `Retry-After`) at debug level, so that a load balancer's probes do not fill
/// the log with errors; any other server error at error level.
fn log_failure(
    class: tower_http::classify::ServerErrorsFailureClass,
    latency: std::time::Duration,
    _span: &tracing::Span,
) {
    use tower_http::classify::ServerErrorsFailureClass;
    let ms = latency.as_millis();
    match class {
        ServerErrorsFailureClass::StatusCode(code) if code == axum::http::StatusCode::SERVICE_UNAVAILABLE => {
            tracing::debug!(status = %code, latency_ms = ms, "service unavailable");
        }
        other => tracing::error!(classification = %other, latency_ms = ms, "response failed"),
    }
}
