//! vCenter connection flags shared by every subcommand that talks to vCenter.
use std::fmt;
use std::path::PathBuf;

use secrecy::SecretString;

use crate::vcenter::{
    Client, ClientOptions, Credentials, Endpoint, Stats, TlsPolicy, tls::Thumbprint,
};

#[derive(clap::Args, Clone)]
pub struct ConnectArgs {
    /// vCenter server: a host name, host:port, or URL with or without /sdk (http:// allowed).
    #[arg(long, env = "VSPHERE_SERVER")]
    pub server: Option<String>,
    /// vCenter user name.
    #[arg(long, env = "VSPHERE_USERNAME")]
    pub username: Option<String>,
    /// vCenter password. Prefer the environment variable: flags show up in `ps`.
    #[arg(long, env = "VSPHERE_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// Trust only the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["thumbprint", "insecure"])]
    pub ca_file: Option<PathBuf>,
    /// Trust exactly the server certificate with this SHA-256 or SHA-1 thumbprint (hex, colons allowed).
    #[arg(long, value_name = "HEX", conflicts_with = "insecure")]
    pub thumbprint: Option<String>,
    /// Do not verify the server certificate at all.
    #[arg(long)]
    pub insecure: bool,
}

impl fmt::Debug for ConnectArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectArgs")
            .field("server", &self.server)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "[REDACTED]"))
            .field("ca_file", &self.ca_file)
            .field("thumbprint", &self.thumbprint)
            .field("insecure", &self.insecure)
            .finish()
    }
}

/// A usage error: missing or malformed flags. Exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl ConnectArgs {
    pub fn server(&self) -> Result<Endpoint, UsageError> {
        let s = self
            .server
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| UsageError("missing --server (or VSPHERE_SERVER)".into()))?;
        Endpoint::parse(s).map_err(|e| UsageError(e.to_string()))
    }

    pub fn tls_policy(&self) -> Result<TlsPolicy, UsageError> {
        if self.insecure {
            return Ok(TlsPolicy::Insecure);
        }
        if let Some(t) = &self.thumbprint {
            return Thumbprint::parse(t)
                .map(TlsPolicy::Thumbprint)
                .map_err(|e| UsageError(format!("--thumbprint: {e}")));
        }
        if let Some(f) = &self.ca_file {
            if !f.is_file() {
                return Err(UsageError(format!(
                    "--ca-file {}: no such file",
                    f.display()
                )));
            }
            return Ok(TlsPolicy::CaFile(f.clone()));
        }
        Ok(TlsPolicy::System)
    }

    pub fn credentials(&self) -> Result<Credentials, UsageError> {
        let user = self
            .username
            .as_deref()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| UsageError("missing --username (or VSPHERE_USERNAME)".into()))?;
        let password = self
            .password
            .as_deref()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| UsageError("missing --password (or VSPHERE_PASSWORD)".into()))?;
        Ok(Credentials::new(
            user,
            SecretString::from(password.to_string()),
        ))
    }

    /// A client (not yet logged in) recording into `stats`.
    pub fn client(&self, stats: Stats) -> Result<Client, UsageError> {
        let endpoint = self.server()?;
        let options = ClientOptions {
            tls: self.tls_policy()?,
            ..ClientOptions::default()
        };
        Client::with_stats(endpoint, self.credentials()?, options, stats)
            .map_err(|e| UsageError(e.to_string()))
    }
}
