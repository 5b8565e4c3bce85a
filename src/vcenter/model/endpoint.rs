//! Where a vCenter is: every server field (`--server`, `spec.server`) accepts a host name,
//! `host:port`, or a URL with or without `/sdk`, and `http://` (vcsim serves it; the client
//! connects over it only to loopback unless `ClientOptions::allow_remote_http`). A parsed
//! address is a value (no connection): planners compare servers with [`same_server`].
use std::fmt;

use url::Url;

/// A parsed vCenter address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// `scheme://host[:port]` without a trailing slash: the REST base.
    base: Url,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid vCenter server {input:?}: {reason}")]
pub struct EndpointError {
    pub input: String,
    pub reason: String,
}

impl Endpoint {
    pub fn parse(input: &str) -> Result<Self, EndpointError> {
        let err = |reason: &str| EndpointError {
            input: redact_userinfo(input),
            reason: reason.to_string(),
        };
        let trimmed = input.trim();
        if trimmed.is_empty() {
            return Err(err("it is empty"));
        }
        if trimmed.chars().any(char::is_whitespace) {
            return Err(err("it contains whitespace"));
        }
        let with_scheme = if trimmed.contains("://") {
            trimmed.to_string()
        } else {
            format!("https://{trimmed}")
        };
        let url = Url::parse(&with_scheme).map_err(|e| err(&e.to_string()))?;
        match url.scheme() {
            "https" | "http" => {}
            other => return Err(err(&format!("scheme {other:?} is not http or https"))),
        }
        let host = url.host_str().unwrap_or_default();
        if host.is_empty() {
            return Err(err("it has no host name"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(err(
                "credentials do not belong in the server address; use --username/--password or VSPHERE_USERNAME/VSPHERE_PASSWORD",
            ));
        }
        let path = url.path().trim_end_matches('/');
        if !(path.is_empty() || path == "/sdk") {
            return Err(err(&format!(
                "unexpected path {path:?} (expected nothing or /sdk)"
            )));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(err("it has a query or fragment"));
        }
        let mut base = url.clone();
        base.set_path("");
        Ok(Self { base })
    }

    /// The SOAP endpoint, `…/sdk`.
    pub fn sdk_url(&self) -> Url {
        self.join("sdk")
    }

    /// A URL below the server root (`rest/com/vmware/cis/session`). The path is a constant
    /// written in code (`&'static`): a value never reaches a URL this way, only as a path
    /// segment (`vcenter::rest::path`).
    pub fn join(&self, path: &'static str) -> Url {
        let mut u = self.base.clone();
        u.set_path(path);
        u
    }

    /// Host name (or IP) without port, lower-cased: with the port when both sides name one, the
    /// identity used to match a zone's `spec.server` to a connection or a VSphereCluster
    /// ([`same_server`]; scheme and `/sdk` ignored).
    pub fn host(&self) -> String {
        self.base
            .host_str()
            .unwrap_or_default()
            .to_ascii_lowercase()
    }

    pub fn port(&self) -> u16 {
        self.base.port_or_known_default().unwrap_or(443)
    }

    /// 127.0.0.0/8, ::1 or `localhost`: plain http there does not leave the machine.
    pub fn is_loopback(&self) -> bool {
        match self.base.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            None => false,
        }
    }

    pub fn is_https(&self) -> bool {
        self.base.scheme() == "https"
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.base.as_str().trim_end_matches('/'))
    }
}

/// `https://user:secret@vc` → `https://***@vc`: an address typed with credentials must not
/// carry them into an error message or a log line.
fn redact_userinfo(input: &str) -> String {
    let (scheme, rest) = match input.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), input),
    };
    // Both indices come from `find`/`rfind` on the same string (char boundaries): no panic.
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}***{}", &rest[at..]),
        None => input.to_string(),
    }
}

/// Whether two server strings name the same vCenter: the same host (case-insensitive) and, when
/// both addresses name a port other than their scheme's default, the same port.
/// CAPV compares strings exactly, so `vc.example.com` and `https://vc.example.com/sdk` never
/// matched; we compare what the addresses name. A port written on one side only still matches
/// (`vc.example.com` is the `vc.example.com:8443` a colleague wrote elsewhere far more often
/// than a second vCenter on one host), but two different explicit ports are two servers: two
/// vCenters (or simulators) behind one address must not lend each other credentials or zones.
pub fn same_server(a: &str, b: &str) -> bool {
    match (Endpoint::parse(a), Endpoint::parse(b)) {
        (Ok(a), Ok(b)) => {
            a.host() == b.host()
                && match (a.base.port(), b.base.port()) {
                    (Some(pa), Some(pb)) => pa == pb,
                    _ => true,
                }
        }
        _ => a.trim().eq_ignore_ascii_case(b.trim()),
    }
}

/// Whether two server strings name exactly the same endpoint: scheme, host (case-insensitive)
/// and port (the scheme's default when unwritten). The allow-list of servers the manager's own
/// credentials may go to is matched this way, stricter than [`same_server`]: a port or scheme
/// the admin did not write is another service, and the password must not go there.
pub fn same_endpoint(a: &str, b: &str) -> bool {
    match (Endpoint::parse(a), Endpoint::parse(b)) {
        (Ok(a), Ok(b)) => {
            a.host() == b.host() && a.port() == b.port() && a.base.scheme() == b.base.scheme()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allow_listed_endpoint_matches_only_its_own_scheme_host_and_port() {
        assert!(same_endpoint("vc.corp", "https://VC.corp:443/sdk"));
        assert!(!same_endpoint("vc.corp", "vc.corp:8443"));
        assert!(!same_endpoint("vc.corp", "http://vc.corp"));
        assert!(!same_endpoint("vc.corp", "vc.corp.evil.example"));
        assert!(!same_endpoint("vc.corp", "https://u:p@vc.corp"));
        assert!(same_endpoint(
            "http://127.0.0.1:8989/sdk",
            "http://127.0.0.1:8989"
        ));
    }

    #[test]
    fn accepts_every_documented_form() {
        for (input, sdk) in [
            ("vc.example.com", "https://vc.example.com/sdk"),
            ("vc.example.com:8443", "https://vc.example.com:8443/sdk"),
            ("https://vc.example.com", "https://vc.example.com/sdk"),
            ("https://vc.example.com/", "https://vc.example.com/sdk"),
            ("https://vc.example.com/sdk", "https://vc.example.com/sdk"),
            ("http://127.0.0.1:8989/sdk", "http://127.0.0.1:8989/sdk"),
            ("10.0.0.5", "https://10.0.0.5/sdk"),
            ("[::1]:443", "https://[::1]/sdk"),
        ] {
            let e = Endpoint::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(e.sdk_url().as_str(), sdk, "{input}");
        }
    }

    #[test]
    fn rejects_bad_addresses_naming_the_cause() {
        for (input, cause) in [
            ("", "empty"),
            ("vc example", "whitespace"),
            ("ftp://vc", "scheme"),
            ("https://user:pw@vc", "credentials"),
            ("https://vc/ui", "unexpected path"),
        ] {
            let e = Endpoint::parse(input).unwrap_err();
            assert!(e.to_string().contains(cause), "{input}: {e}");
            assert!(!e.to_string().contains("pw@"), "never echo credentials");
        }
    }

    #[test]
    fn servers_match_by_host() {
        assert!(same_server("VC.example.com", "https://vc.example.com/sdk"));
        assert!(same_server("127.0.0.1", "http://127.0.0.1:40123/sdk"));
        assert!(same_server(
            "vc.example.com:443",
            "https://vc.example.com/sdk"
        ));
        assert!(!same_server("vc-a.example.com", "vc-b.example.com"));
        assert!(!same_server(
            "http://127.0.0.1:40123/sdk",
            "http://127.0.0.1:40124/sdk"
        ));
    }
}
