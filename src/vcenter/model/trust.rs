//! How to trust a vCenter's certificate: the policy (system roots, a CA bundle, a pinned
//! thumbprint, or none) and certificate thumbprints. The rustls configuration that enforces it
//! is transport (`vcenter::tls`).
use std::path::PathBuf;

use sha1::Digest as _;

/// How to trust the server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum TlsPolicy {
    /// System roots (the default).
    #[default]
    System,
    /// Only the CAs in this PEM bundle.
    CaFile(PathBuf),
    /// Exactly the leaf certificate with this fingerprint, whatever its issuer or host name.
    Thumbprint(Thumbprint),
    /// No verification at all (`--insecure`); logged as a warning.
    Insecure,
}

/// A certificate fingerprint: SHA-256 (32 bytes) or SHA-1 (20 bytes, what older vCenter shows).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Thumbprint(Vec<u8>);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(
        "invalid thumbprint {0:?}: expected a SHA-256 (64 hex digits) or SHA-1 (40 hex digits) fingerprint, colons allowed"
    )]
    BadThumbprint(String),
    #[error("cannot read CA file {path}: {reason}")]
    CaFile { path: String, reason: String },
    #[error("TLS setup failed: {0}")]
    Setup(String),
}

impl Thumbprint {
    pub fn parse(s: &str) -> Result<Self, TlsError> {
        let hex_digits: String = s
            .trim()
            .chars()
            .filter(|c| *c != ':' && *c != ' ')
            .collect();
        let bytes = hex::decode(&hex_digits).map_err(|_| TlsError::BadThumbprint(s.to_string()))?;
        match bytes.len() {
            20 => {
                tracing::warn!("SHA-1 certificate thumbprint given; prefer the SHA-256 one");
                Ok(Self(bytes))
            }
            32 => Ok(Self(bytes)),
            _ => Err(TlsError::BadThumbprint(s.to_string())),
        }
    }

    /// Whether this fingerprint names `cert` (SHA-1 or SHA-256 by length).
    pub fn matches(&self, cert: &[u8]) -> bool {
        if self.0.len() == 20 {
            sha1::Sha1::digest(cert).as_slice() == self.0.as_slice()
        } else {
            sha2::Sha256::digest(cert).as_slice() == self.0.as_slice()
        }
    }

    /// The SHA-256 fingerprint of a DER certificate in the colon form admins know.
    pub fn sha256_of(cert: &[u8]) -> String {
        colon_hex(&sha2::Sha256::digest(cert))
    }

    pub fn sha1_of(cert: &[u8]) -> String {
        colon_hex(&sha1::Sha1::digest(cert))
    }
}

impl std::fmt::Display for Thumbprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&colon_hex(&self.0))
    }
}

fn colon_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thumbprints_accept_colons_and_both_lengths() {
        let cert = b"not really a certificate";
        let sha256 = Thumbprint::sha256_of(cert);
        let sha1 = Thumbprint::sha1_of(cert);
        assert!(Thumbprint::parse(&sha256).unwrap().matches(cert));
        assert!(Thumbprint::parse(&sha1).unwrap().matches(cert));
        assert!(
            Thumbprint::parse(&sha256.replace(':', "").to_lowercase())
                .unwrap()
                .matches(cert)
        );
        assert!(!Thumbprint::parse(&sha256).unwrap().matches(b"another"));
    }

    #[test]
    fn bad_thumbprints_say_what_is_expected() {
        for bad in ["", "zz:11", "AB:CD:EF"] {
            let e = Thumbprint::parse(bad).unwrap_err().to_string();
            assert!(e.contains("SHA-256"), "{e}");
        }
    }
}
