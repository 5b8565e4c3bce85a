//! vCenter connection flags shared by every subcommand that talks to vCenter.
use std::fmt;
use std::path::PathBuf;

use secrecy::SecretString;

use crate::vcenter::model::trust::Thumbprint;
use crate::vcenter::{Client, ClientOptions, Credentials, Endpoint, Stats, TlsPolicy};

#[derive(clap::Args, Clone)]
pub struct ConnectArgs {
    /// vCenter server: a host name, host:port, or URL with or without /sdk (http:// to this
    /// machine only, unless --allow-remote-http; a govc-style https://user:password@host/sdk
    /// supplies the credentials too).
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
    /// Allow plain http:// to a vCenter that is not on this machine (refused by default: the
    /// password would travel unencrypted to whatever answers). Loopback http (a local vcsim) is
    /// always allowed.
    #[arg(long)]
    pub allow_remote_http: bool,
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
            .field("allow_remote_http", &self.allow_remote_http)
            .finish()
    }
}

/// `%XX` escapes of a URL's user info (a literal `+` stays a `+`).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A usage error: missing or malformed flags. Exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl ConnectArgs {
    /// Accept govc-style `https://user:password@host/sdk` (GOVC_URL) on the command line: the
    /// credentials are taken out of the address (and used unless --username/--password are
    /// given); the address itself never carries them further. Manifests still may not.
    pub fn normalized(mut self) -> Self {
        let Some(raw) = self.server.clone() else {
            return self;
        };
        let Ok(mut url) = url::Url::parse(raw.trim()) else {
            return self;
        };
        if url.username().is_empty() && url.password().is_none() {
            return self;
        }
        let decode = |s: &str| percent_decode(s);
        let user = decode(url.username());
        let pass = url.password().map(decode);
        if self.username.as_deref().is_none_or(str::is_empty) && !user.is_empty() {
            self.username = Some(user);
        }
        if self.password.as_deref().is_none_or(str::is_empty) {
            self.password = pass;
        }
        let _ = url.set_username("");
        let _ = url.set_password(None);
        self.server = Some(url.to_string());
        self
    }

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
            allow_remote_http: self.allow_remote_http,
            ..ClientOptions::default()
        };
        Client::with_stats(endpoint, self.credentials()?, options, stats)
            .map_err(|e| UsageError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(server: &str, user: Option<&str>) -> ConnectArgs {
        ConnectArgs {
            server: Some(server.into()),
            username: user.map(str::to_string),
            password: None,
            ca_file: None,
            thumbprint: None,
            insecure: false,
            allow_remote_http: false,
        }
    }

    #[test]
    fn govc_urls_give_their_credentials_and_lose_them() {
        let a = args("https://user:p%40ss+1@127.0.0.1:8989/sdk", None).normalized();
        assert_eq!(a.username.as_deref(), Some("user"));
        assert_eq!(a.password.as_deref(), Some("p@ss+1"));
        assert_eq!(a.server.as_deref(), Some("https://127.0.0.1:8989/sdk"));
        assert!(!format!("{a:?}").contains("p@ss"));
        assert_eq!(
            percent_decode("a%2Fb%zz%4"),
            "a/b%zz%4",
            "bad escapes stay as they are"
        );
        // Explicit flags win.
        let a = args("https://user:pw@vc/sdk", Some("admin")).normalized();
        assert_eq!(a.username.as_deref(), Some("admin"));
        // Plain addresses are untouched.
        let a = args("vc.example.com", None).normalized();
        assert_eq!(a.server.as_deref(), Some("vc.example.com"));
    }
}
