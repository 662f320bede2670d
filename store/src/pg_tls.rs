//! TLS to PostgreSQL as libpq's URL parameters ask for it (SERVER.md §8): `sslmode` and `sslrootcert`, read
//! here because the driver knows neither `verify-ca`/`verify-full` nor `sslrootcert`.
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | absent, `disable` | no | - |
//! | `prefer` | tried, plain if the server has none | not checked |
//! | `require` | required | not checked; with `sslrootcert`, checked as `verify-ca` (libpq's rule) |
//! | `verify-ca` | required | signed by `sslrootcert` |
//! | `verify-full` | required | signed by `sslrootcert` and naming the URL's host |

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

/// How the server's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verify {
    /// Not at all (`prefer`, `require`): the connection is encrypted, not authenticated.
    Nothing,
    /// Signed by the certificates of the file (`verify-ca`).
    Ca(PathBuf),
    /// Signed by the certificates of the file and naming the host connected to (`verify-full`).
    Full(PathBuf),
}

/// What a URL asks for: the URL the driver reads (its `sslmode` one the driver knows, no `sslrootcert`),
/// and the TLS connector when TLS may be used.
pub(crate) struct PgTls {
    pub(crate) url: String,
    pub(crate) connector: Option<MakeRustlsConnect>,
}

/// Reads `sslmode` and `sslrootcert` off `url`.
///
/// # Errors
/// A sentence naming the parameter: an unknown `sslmode`, `verify-ca`/`verify-full` without `sslrootcert`,
/// a root certificate file that cannot be read or holds no certificate.
pub(crate) fn pg_tls(url: &str) -> Result<PgTls, String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok(PgTls { url: url.to_string(), connector: None });
    };
    let mut kept = Vec::new();
    let (mut mode, mut root) = (None, None);
    for param in query.split('&') {
        match param.split_once('=') {
            Some(("sslmode", v)) => mode = Some(v.to_string()),
            Some(("sslrootcert", v)) => root = Some(PathBuf::from(decode(v))),
            _ => kept.push(param.to_string()),
        }
    }
    let verify = match (mode.as_deref(), root) {
        (None | Some("disable"), _) => None,
        (Some("prefer" | "require"), None) => Some(Verify::Nothing),
        (Some("require" | "verify-ca"), Some(root)) => Some(Verify::Ca(root)),
        (Some("verify-full"), Some(root)) => Some(Verify::Full(root)),
        (Some("prefer"), Some(_)) => Some(Verify::Nothing),
        (Some(m @ ("verify-ca" | "verify-full")), None) => {
            return Err(format!(
                "sslmode={m} needs sslrootcert=FILE (the PEM certificate of the authority that signed the server's)"
            ));
        }
        (Some(other), _) => {
            return Err(format!("sslmode={other} is not one of disable, prefer, require, verify-ca, verify-full"));
        }
    };
    // The driver's own `sslmode`: it decides whether TLS is asked for; the check is the connector's.
    match (mode.as_deref(), &verify) {
        (Some("prefer"), _) => kept.push("sslmode=prefer".to_string()),
        (_, Some(_)) => kept.push("sslmode=require".to_string()),
        (_, None) => kept.push("sslmode=disable".to_string()),
    }
    let url = format!("{base}?{}", kept.join("&"));
    let connector = verify.map(|v| client_config(&v).map(MakeRustlsConnect::new)).transpose()?;
    Ok(PgTls { url, connector })
}

/// `%XX` escapes of a URL parameter's value decoded (a path may hold `%2F`, `%20`).
fn decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The rustls configuration of `verify`.
fn client_config(verify: &Verify) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let config = match verify {
        Verify::Full(file) => builder.with_root_certificates(roots(file)?).with_no_client_auth(),
        Verify::Nothing | Verify::Ca(_) => {
            let roots = match verify {
                Verify::Ca(file) => Some(
                    WebPkiServerVerifier::builder_with_provider(Arc::new(roots(file)?), provider.clone())
                        .build()
                        .map_err(|e| format!("sslrootcert={}: {e}", file.display()))?,
                ),
                _ => None,
            };
            let lenient = Lenient { roots, provider };
            builder.dangerous().with_custom_certificate_verifier(Arc::new(lenient)).with_no_client_auth()
        }
    };
    Ok(config)
}

/// The certificates of the PEM file `file`, as trusted roots.
fn roots(file: &Path) -> Result<RootCertStore, String> {
    let shown = file.display();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
        .map_err(|e| format!("sslrootcert={shown}: cannot read a PEM certificate: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("sslrootcert={shown}: not a PEM certificate: {e}"))?;
    let mut store = RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!("sslrootcert={shown}: holds no certificate"));
    }
    Ok(store)
}

/// The server-certificate check of `require` without a root (`roots: None`: any certificate, the
/// connection encrypted as libpq's `require` is, not authenticated) and of `verify-ca` (the chain must lead
/// to a root of `sslrootcert`; the name the certificate gives is not compared with the host). The handshake's
/// signatures are checked in both.
#[derive(Debug)]
struct Lenient {
    roots: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(roots) = &self.roots else { return Ok(ServerCertVerified::assertion()) };
        match roots.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_driver_gets_a_url_it_reads_and_the_mode_decides_the_check() {
        let plain = pg_tls("postgres://u@h/db").unwrap();
        assert_eq!((plain.url.as_str(), plain.connector.is_some()), ("postgres://u@h/db", false));
        let plain = pg_tls("postgres://u@h/db?sslmode=disable&application_name=x").unwrap();
        assert_eq!(plain.url, "postgres://u@h/db?application_name=x&sslmode=disable");
        assert!(plain.connector.is_none());
        let required = pg_tls("postgres://u@h/db?sslmode=require").unwrap();
        assert_eq!(required.url, "postgres://u@h/db?sslmode=require");
        assert!(required.connector.is_some());
        let prefer = pg_tls("postgres://u@h/db?sslmode=prefer").unwrap();
        assert_eq!(prefer.url, "postgres://u@h/db?sslmode=prefer");
        assert_eq!(
            pg_tls("postgres://u@h/db?sslmode=verify-full").err().unwrap(),
            "sslmode=verify-full needs sslrootcert=FILE (the PEM certificate of the authority that signed the server's)"
        );
        assert_eq!(
            pg_tls("postgres://u@h/db?sslmode=allow").err().unwrap(),
            "sslmode=allow is not one of disable, prefer, require, verify-ca, verify-full"
        );
        let missing = pg_tls("postgres://u@h/db?sslmode=verify-ca&sslrootcert=%2Fnonexistent%2Fca.pem").err().unwrap();
        assert!(missing.starts_with("sslrootcert=/nonexistent/ca.pem: cannot read a PEM certificate"), "{missing}");
    }
}
