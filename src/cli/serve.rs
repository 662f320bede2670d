//! `agentic serve`: the store's runs behind the HTTP API and web UI of SERVER.md.

use agentic_server::{Server, ServerConfig};

use super::args::ServeArgs;
use super::{EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE};

/// Serves until SIGTERM or Ctrl-C; returns the exit code (0 after a clean stop).
pub(crate) fn serve(args: ServeArgs) -> u8 {
    let dir = args.store.store.clone();
    if args.lease_ms == 0 {
        eprintln!("error: --lease-ms must be at least 1");
        return EXIT_USAGE;
    }
    let token = std::env::var(&args.token_env).ok().filter(|t| !t.is_empty());
    let runtime = match super::durable::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
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
                // In use by another process is 75 (SPEC.md §2: try again), naming the server holding it.
                return match (&e, super::remote::Remote::find(&dir)) {
                    (agentic_engine::StoreError::Unavailable { backend: "sled", message, .. }, Some(remote)) => {
                        eprintln!("error: {message} (the server at {}); try again once it is free", remote.url());
                        EXIT_UNAVAILABLE
                    }
                    (_, Some(remote)) => {
                        eprintln!("error: {e} (the server at {})", remote.url());
                        EXIT_FAILED
                    }
                    (_, None) => super::store_failed(&dir, &e),
                };
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
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        config = config.tls(agentic_server::TlsFiles { cert: cert.clone(), key: key.clone() });
    }
    runtime.block_on(async move {
        let server = match Server::start(config).await {
            Ok(s) => s,
            // What the command line or the specs directory gives is wrong: a usage error (SPEC.md §2).
            Err(
                e @ (agentic_server::ServeError::TokenRequired { .. }
                | agentic_server::ServeError::Specs { .. }
                | agentic_server::ServeError::Schedules { .. }
                | agentic_server::ServeError::Tls(_)),
            ) => {
                eprintln!("error: {e}");
                return EXIT_USAGE;
            }
            // The store stopped answering while the server started (SPEC.md §2: 75, try again).
            Err(agentic_server::ServeError::Store(e)) if e.is_unavailable() => return super::store_failed(&dir, &e),
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_FAILED;
            }
        };
        // Watched before the address is printed: a signal sent as soon as it is read is seen.
        let stop = stop_signals();
        eprintln!("agentic serve: {} (store {shown}); stop with Ctrl-C or SIGTERM", server.url());
        stop.await;
        let again = stop_signals();
        eprintln!("{}", draining_line(server.runs_in_flight(), state_dir.is_none()));
        // A second signal stops at once: the steps still running are left as a crash leaves them.
        let stopped = tokio::select! {
            stopped = server.shutdown() => stopped,
            () = again => {
                if let Some(dir) = &state_dir {
                    let _ = std::fs::remove_file(dir.join(agentic_server::SERVER_FILE));
                }
                eprintln!("agentic serve: stopped at once; the steps that were running run again at the next start");
                return EXIT_INTERRUPTED;
            }
        };
        match stopped {
            Ok(()) => {
                eprintln!("agentic serve: stopped");
                EXIT_OK
            }
            Err(e) => {
                eprintln!("error: {e}");
                EXIT_FAILED
            }
        }
    })
}

/// The exit status after a second stop signal, as an interrupted process's (128 + SIGINT).
const EXIT_INTERRUPTED: u8 = 130;

/// What `agentic serve` prints when a stop signal arrives, with `in_flight` runs executing: what the drain
/// does ([`agentic_server::Server::shutdown`]), where the runs continue (on a `shared` store another server
/// takes them over) and how to cut it short.
fn draining_line(in_flight: usize, shared: bool) -> String {
    let grace = agentic_server::DRAIN_GRACE.as_secs();
    let (runs, they) = if in_flight == 1 { ("run", "it continues") } else { ("runs", "they continue") };
    let next = if shared { "on another server of the store, or at this one's next start" } else { "at the next start" };
    match in_flight {
        0 => "agentic serve: stopping (no run in flight; Ctrl-C again to stop at once)".to_string(),
        n => format!(
            "agentic serve: draining: no new runs; waiting up to {grace} s for the current step of {n} {runs} in \
             flight ({they} {next}); Ctrl-C again to stop at once"
        ),
    }
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

/// Completes on the next SIGTERM or Ctrl-C (SIGINT) from now on: the signals are watched from the call, not
/// from the first poll. Call it in the runtime.
#[cfg(unix)]
fn stop_signals() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let watched = signal(SignalKind::terminate()).and_then(|term| Ok((term, signal(SignalKind::interrupt())?)));
    async move {
        match watched {
            Ok((mut term, mut interrupt)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = interrupt.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!("cannot watch SIGTERM: {e}");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}

/// Completes on the next Ctrl-C.
#[cfg(not(unix))]
fn stop_signals() -> impl std::future::Future<Output = ()> {
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::draining_line;

    #[test]
    fn the_draining_line_says_where_the_runs_continue() {
        assert_eq!(
            draining_line(1, false),
            "agentic serve: draining: no new runs; waiting up to 30 s for the current step of 1 run in flight (it \
             continues at the next start); Ctrl-C again to stop at once"
        );
        assert_eq!(
            draining_line(3, true),
            "agentic serve: draining: no new runs; waiting up to 30 s for the current step of 3 runs in flight \
             (they continue on another server of the store, or at this one's next start); Ctrl-C again to stop at \
             once"
        );
    }
}
