//! HTTPS (SERVER.md §8, `--tls-cert FILE --tls-key FILE`): the certificate chain and its private key read from
//! PEM files, and a listener that hands axum TLS streams. Each handshake runs in a task of its own (bounded by
//! [`HANDSHAKE_TIMEOUT`]), so that a client that connects and says nothing holds up no other.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client has to complete the TLS handshake after it connected.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the server's certificate and key are: PEM files, the certificate file holding the chain (the
/// server's certificate first), the key file one private key (PKCS#8, PKCS#1 or SEC1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain's PEM file.
    pub cert: PathBuf,
    /// The private key's PEM file.
    pub key: PathBuf,
}

/// A certificate or key that cannot be used: the file and why (never the key's bytes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct TlsError {
    /// The file at fault.
    pub file: PathBuf,
    /// What is wrong with it.
    pub message: String,
}

impl TlsFiles {
    /// The rustls configuration serving this certificate and key over HTTP/1.1, with the protocol versions
    /// and ciphers rustls deems safe.
    ///
    /// # Errors
    /// [`TlsError`] naming the file that cannot be read, holds no certificate or key, or whose key does not
    /// match the certificate.
    pub(crate) fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let fail = |file: &Path, message: String| TlsError { file: file.to_path_buf(), message };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert)
            .map_err(|e| fail(&self.cert, format!("cannot read a PEM certificate: {e}")))?
            .collect::<Result<_, _>>()
            .map_err(|e| fail(&self.cert, format!("not a PEM certificate chain: {e}")))?;
        if certs.is_empty() {
            return Err(fail(&self.cert, "holds no certificate (`-----BEGIN CERTIFICATE-----`)".to_string()));
        }
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .map_err(|e| fail(&self.key, format!("holds no PEM private key: {e}")))?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| fail(&self.cert, e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| fail(&self.key, format!("cannot serve this key with the certificate: {e}")))?;
        Ok(Arc::new(config))
    }
}

/// A listener of TLS connections for `axum::serve`: a task accepts TCP connections and completes their
/// handshakes, each in a task of its own; the streams that completed wait in a channel for axum.
pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Accepts on `listener`, with `config`'s certificate.
    pub(crate) fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<TlsListener> {
        let addr = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let accepting = tokio::spawn(accept_loop(listener, TlsAcceptor::from(config), tx));
        Ok(TlsListener { ready, addr, accepting })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Accepts TCP connections until the listener is dropped, handing each to a handshake task.
async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, say: as axum's own listener does, wait instead of spinning.
                tracing::error!("accepting a connection failed: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if ready.is_closed() {
            return;
        }
        // No Nagle: an event stream writes small frames one after another (see the plain listener).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let _ = ready.send((stream, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!("TLS handshake with {peer} failed: {e}"),
                Err(_) => tracing::debug!("TLS handshake with {peer} took over {HANDSHAKE_TIMEOUT:?}"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accepting task ended (it does not while the listener lives): nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
