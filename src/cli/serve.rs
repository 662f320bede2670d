//! `agentic serve`: the store's runs behind the HTTP API and web UI of SERVER.md.

use agentic_server::{Server, ServerConfig};

use super::args::ServeArgs;
use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};

/// Serves until SIGTERM or Ctrl-C; returns the exit code (0 after a clean stop).
pub(crate) fn serve(args: ServeArgs) -> u8 {
    let dir = args.store.store.clone();
    if args.lease_ms == 0 {
        eprintln!("error: --lease-ms must be at least 1");
        return EXIT_USAGE;
    }
    let token = std::env::var(&args.token_env).ok().filter(|t| !t.is_empty());
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return EXIT_FAILED;
        }
    };
    let lease_time = std::time::Duration::from_millis(args.lease_ms);
    let shown = super::store_label(&dir);
    let (store, state_dir) = if let Some(url) = dir.to_str().filter(|d| agentic_store::is_postgres_url(d)) {
        // Several servers share the database: each one is a lease owner of its own.
        match runtime.block_on(agentic_store::PgStore::connect(url)) {
            Ok(s) => {
                let owner = format!("{}-{}", host_name(), s.owner());
                (s.with_lease(owner, lease_time).store_ref(), None)
            }
            Err(e) => return super::store_failed(&dir, &e),
        }
    } else {
        // The server opens the store itself: it never goes through another server.
        match agentic_store::SledStore::open(&dir) {
            Ok(s) => (s.store_ref(), Some(dir.clone())),
            Err(e) => {
                match super::remote::Remote::find(&dir) {
                    Some(remote) => eprintln!("error: {e} (the server at {})", remote.url()),
                    None => eprintln!("error: {e}"),
                }
                return EXIT_FAILED;
            }
        }
    };
    let mut config = ServerConfig::new(store)
        .store_label(shown.clone())
        .listen(args.listen)
        .lease_time(lease_time)
        .token(token, &args.token_env);
    if let Some(state_dir) = &state_dir {
        config = config.state_dir(state_dir);
    }
    if let Some(specs) = &args.specs {
        config = config.specs_dir(specs);
    }
    runtime.block_on(async move {
        let server = match Server::start(config).await {
            Ok(s) => s,
            Err(e @ agentic_server::ServeError::TokenRequired { .. }) => {
                eprintln!("error: {e}");
                return EXIT_USAGE;
            }
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_FAILED;
            }
        };
        eprintln!("agentic serve: {} (store {shown}); stop with Ctrl-C or SIGTERM", server.url());
        match server.run_until(stop_signal()).await {
            Ok(()) => EXIT_OK,
            Err(e) => {
                eprintln!("error: {e}");
                EXIT_FAILED
            }
        }
    })
}

/// This machine's name (`HOSTNAME`, else `/etc/hostname`, else `host`), for lease owner ids.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_string())
}

/// Completes on SIGTERM or Ctrl-C (SIGINT).
async fn stop_signal() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot watch SIGTERM: {e}");
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
