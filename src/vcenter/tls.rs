//! The TLS policy ([`TlsPolicy`], in `model::trust`) as a rustls configuration: verify against
//! the system roots by default; trust a CA bundle (`--ca-file`); pin the server certificate by
//! thumbprint (`--thumbprint`, what vSphere admins copy from the vCenter UI or
//! `govc about.cert`); skip verification only with `--insecure`.
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::model::trust::{Thumbprint, TlsError, TlsPolicy};

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Build the rustls client configuration for a policy.
pub fn client_config(policy: &TlsPolicy) -> Result<rustls::ClientConfig, TlsError> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?;
    let config = match policy {
        TlsPolicy::System => {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        TlsPolicy::CaFile(path) => {
            let shown = path.display().to_string();
            let pem = std::fs::read(path).map_err(|e| TlsError::CaFile {
                path: shown.clone(),
                reason: e.to_string(),
            })?;
            let mut roots = rustls::RootCertStore::empty();
            let mut added = 0;
            for cert in rustls_pemfile_certs(&pem) {
                roots.add(cert).map_err(|e| TlsError::CaFile {
                    path: shown.clone(),
                    reason: e.to_string(),
                })?;
                added += 1;
            }
            if added == 0 {
                return Err(TlsError::CaFile {
                    path: shown,
                    reason: "no PEM certificates found".into(),
                });
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        TlsPolicy::Thumbprint(t) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier {
                expected: Some(t.clone()),
                provider: provider.clone(),
                record: None,
            }))
            .with_no_client_auth(),
        TlsPolicy::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier {
                expected: None,
                provider: provider.clone(),
                record: None,
            }))
            .with_no_client_auth(),
    };
    Ok(config)
}

/// A pinned certificate whose key cannot prove possession (RSA below 2048 bits): say so, since
/// "bad signature" would send an admin looking in the wrong place.
fn weak_key_hint(e: rustls::Error) -> rustls::Error {
    rustls::Error::General(format!(
        "the server did not prove it holds the key of the pinned certificate ({e}); a key too weak to verify (RSA below 2048 bits) does this — replace the certificate, or use --insecure"
    ))
}

/// Parse every `CERTIFICATE` block of a PEM bundle.
fn rustls_pemfile_certs(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .collect()
}

/// Accepts the leaf certificate whose fingerprint matches (or any, when `expected` is None for
/// `--insecure`), and still checks the handshake signatures so the peer proves it holds the key.
#[derive(Debug)]
struct PinnedVerifier {
    expected: Option<Thumbprint>,
    provider: Arc<CryptoProvider>,
    /// Where to keep the presented leaf certificate (for `doctor`).
    record: Option<CertSlot>,
}

/// Holds the leaf certificate a server presented.
pub type CertSlot = Arc<std::sync::Mutex<Option<Vec<u8>>>>;

/// A configuration that accepts any certificate and records the leaf into `slot`, so `doctor`
/// can tell an admin which thumbprint the server presents.
pub fn recording_config(slot: CertSlot) -> Result<rustls::ClientConfig, TlsError> {
    let provider = provider();
    Ok(
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Setup(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier {
                expected: None,
                provider,
                record: Some(slot),
            }))
            .with_no_client_auth(),
    )
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(slot) = &self.record {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(end_entity.as_ref().to_vec());
        }
        match &self.expected {
            None => Ok(ServerCertVerified::assertion()),
            Some(t) if t.matches(end_entity.as_ref()) => Ok(ServerCertVerified::assertion()),
            Some(t) => Err(rustls::Error::General(format!(
                "certificate thumbprint mismatch: expected {t}, server presented SHA-256 {} (SHA-1 {})",
                Thumbprint::sha256_of(end_entity.as_ref()),
                Thumbprint::sha1_of(end_entity.as_ref())
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if self.expected.is_none() {
            // --insecure means no verification at all. Checking signatures here would still
            // refuse servers with legacy keys that ring cannot verify — stock vcsim serves an
            // RSA-1024 certificate — which is exactly when admins reach for --insecure.
            return Ok(HandshakeSignatureValid::assertion());
        }
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
        .map_err(weak_key_hint)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if self.expected.is_none() {
            return Ok(HandshakeSignatureValid::assertion());
        }
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
        .map_err(weak_key_hint)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_ca_file_names_the_path() {
        let e = client_config(&TlsPolicy::CaFile("/nonexistent/ca.pem".into())).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/ca.pem"));
    }
}
