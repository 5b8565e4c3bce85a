//! How each vCenter is trusted (TLS) and which servers the manager's own credentials may go to:
//! both are the admin's, set on the command line, and both are per server.
//!
//! One global `--thumbprint` cannot cover two vCenters, which pushed admins with several to
//! `--insecure` (for every server, tenants' Secrets included). Per-server trust is the admin's
//! statement about a server, so it applies to every credential sent there; a VSphereCluster's
//! own `spec.thumbprint` still pins its own Secret's connections only.
use crate::vcenter::model::endpoint::{same_endpoint, same_server};
use crate::vcenter::model::trust::TlsPolicy;

/// The TLS trust per server: the admin's per-server entries (`--server-thumbprint`,
/// `--server-ca-file`), else the default (`--ca-file`/`--thumbprint`/`--insecure`, else the
/// system roots).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerTrust {
    pub default: TlsPolicy,
    /// `(server, policy)`; servers match as [`same_server`] does (host, and port when both name
    /// one), the first entry that matches wins.
    pub per_server: Vec<(String, TlsPolicy)>,
}

impl ServerTrust {
    /// One policy for every server.
    pub fn uniform(default: TlsPolicy) -> Self {
        Self {
            default,
            per_server: Vec::new(),
        }
    }

    /// The trust for `server`.
    pub fn for_server(&self, server: &str) -> TlsPolicy {
        self.per_server
            .iter()
            .find(|(s, _)| same_server(s, server))
            .map(|(_, p)| p.clone())
            .unwrap_or_else(|| self.default.clone())
    }
}

/// The servers the manager's own credentials may be sent to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerScope {
    /// Any server (local mode, where the operator runs their own manifests with their own
    /// credentials; and test harnesses).
    Any,
    /// Only these (`run --server`, repeatable or comma-separated), matched by scheme, host and
    /// port ([`same_endpoint`]): an object naming any other server needs an identityRef, and
    /// nothing is sent without one.
    Only(Vec<String>),
}

impl ServerScope {
    pub fn allows(&self, server: &str) -> bool {
        match self {
            ServerScope::Any => true,
            ServerScope::Only(servers) => servers.iter().any(|s| same_endpoint(s, server)),
        }
    }

    /// For messages: the servers, or "any server".
    pub fn describe(&self) -> String {
        match self {
            ServerScope::Any => "any server".into(),
            ServerScope::Only(s) if s.is_empty() => "no server".into(),
            ServerScope::Only(s) => s.join(", "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcenter::model::trust::Thumbprint;

    #[test]
    fn a_servers_own_trust_wins_over_the_default() {
        let pin = TlsPolicy::Thumbprint(Thumbprint::parse(&("AA:".repeat(31) + "AA")).unwrap());
        let trust = ServerTrust {
            default: TlsPolicy::System,
            per_server: vec![("vc1.corp".into(), pin.clone())],
        };
        assert_eq!(trust.for_server("https://VC1.corp/sdk"), pin);
        assert_eq!(trust.for_server("vc2.corp"), TlsPolicy::System);
    }

    #[test]
    fn the_managers_scope_matches_servers_by_host() {
        let scope = ServerScope::Only(vec!["vc1.corp".into(), "vc2.corp:8443".into()]);
        assert!(scope.allows("https://vc1.corp/sdk"));
        assert!(scope.allows("vc2.corp:8443"));
        assert!(!scope.allows("vc2.corp:9443"), "ports differ");
        assert!(
            !scope.allows("vc1.corp:8443"),
            "a port the admin did not write"
        );
        assert!(
            !scope.allows("http://vc1.corp"),
            "a scheme the admin did not write"
        );
        assert!(!scope.allows("evil.example.com"));
        assert!(!scope.allows("vc1.corp.evil.example.com"));
        assert!(ServerScope::Any.allows("anything"));
        assert!(!ServerScope::Only(vec![]).allows("vc1.corp"));
    }
}
