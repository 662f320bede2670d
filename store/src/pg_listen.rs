//! `LISTEN` on a connection of its own (not the pool's: a pooled connection is shared and recycled), kept up
//! for as long as someone receives: a lost connection (a database restart, a network cut) is re-established
//! with back-off, the channels listened to again, and [`Notice::Reconnected`] sent so that the receiver reads
//! the store for what it missed.

use std::time::Duration;

use agentic_engine::Notice;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;
use tokio_postgres::{AsyncMessage, NoTls};

/// The longest wait between two attempts to reconnect.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// How often an idle listening connection is checked (a query), so that a dead one is noticed.
const CHECK_EVERY: Duration = Duration::from_secs(5);

/// A listening connection: its client (kept: dropping it closes the connection) and a signal that fires when
/// the connection ends.
pub(crate) struct Listening {
    client: tokio_postgres::Client,
    ended: oneshot::Receiver<String>,
}

/// How to open a connection of the store's database: its settings and, when the URL asks for TLS, the TLS
/// connector ([`crate::pg_tls`]).
#[derive(Clone)]
pub(crate) struct Dial {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
}

/// Drives `connection` in a task of its own, forwarding its notifications to `tx`; the receiver returned
/// fires, with why, when the connection ends.
fn forward<S, T>(
    mut connection: tokio_postgres::Connection<S, T>,
    tx: UnboundedSender<Notice>,
) -> oneshot::Receiver<String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (ended_tx, ended) = oneshot::channel();
    tokio::spawn(async move {
        let why = loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    let notice = Notice::Message { channel: n.channel().to_string(), payload: n.payload().to_string() };
                    if tx.send(notice).is_err() {
                        break "nobody listens".to_string();
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => break e.to_string(),
                None => break "the connection closed".to_string(),
            }
        };
        let _ = ended_tx.send(why);
    });
    ended
}

/// Connects, starts forwarding notifications to `tx`, and listens to `channels` (checked identifiers).
pub(crate) async fn connect(
    dial: &Dial,
    channels: &[String],
    tx: UnboundedSender<Notice>,
) -> Result<Listening, String> {
    let (client, ended) = match &dial.tls {
        Some(tls) => {
            let (client, connection) = dial.config.connect(tls.clone()).await.map_err(|e| e.to_string())?;
            (client, forward(connection, tx))
        }
        None => {
            let (client, connection) = dial.config.connect(NoTls).await.map_err(|e| e.to_string())?;
            (client, forward(connection, tx))
        }
    };
    let sql: String = channels.iter().map(|c| format!("LISTEN {c};")).collect();
    client.batch_execute(&sql).await.map_err(|e| e.to_string())?;
    Ok(Listening { client, ended })
}

/// Keeps listening until the receiver of `tx` is dropped: waits for the connection to end, then reconnects.
pub(crate) async fn keep(
    dial: Dial,
    channels: Vec<String>,
    tx: UnboundedSender<Notice>,
    first: Listening,
    shown: String,
) {
    let mut current = Some(first);
    let mut backoff = Duration::from_millis(50);
    loop {
        if let Some(mut listening) = current.take() {
            let why = loop {
                tokio::select! {
                    () = tx.closed() => return,
                    why = &mut listening.ended => break why.unwrap_or_default(),
                    () = tokio::time::sleep(CHECK_EVERY) => {
                        if let Err(e) = listening.client.simple_query("").await {
                            break e.to_string();
                        }
                    }
                }
            };
            tracing::warn!("store {shown}: the listening connection was lost ({why}); reconnecting");
            backoff = Duration::from_millis(50);
        }
        tokio::select! {
            () = tx.closed() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        match connect(&dial, &channels, tx.clone()).await {
            Ok(listening) => {
                tracing::info!("store {shown}: listening again");
                if tx.send(Notice::Reconnected).is_err() {
                    return;
                }
                current = Some(listening);
            }
            Err(e) => {
                tracing::debug!("store {shown}: cannot listen yet: {e}");
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}
