//! Which credentials and TLS trust a zone's server is reconciled with (reference §3 step 4):
//! the identityRef Secret of a VSphereCluster on the same server, else the manager's own.
//!
//! Unlike CAPV, "the first matching cluster" is deterministic (clusters are tried in
//! namespace/name order), servers match by host, and a cluster's thumbprint pins TLS for the
//! credentials that cluster supplies, and only for those: a VSphereCluster in any namespace must
//! not be able to change how the manager's own credentials trust vCenter (CAPV's fallback ran
//! without verification at all).
use secrecy::SecretString;

use crate::api::vsphere_cluster::{VSphereCluster, VSphereIdentityKind};
use crate::vcenter::model::endpoint::same_server;
use crate::vcenter::model::trust::{Thumbprint, TlsPolicy};
use k8s_openapi::api::core::v1::Secret;

/// The manager's own credentials (flags or environment) and TLS trust.
#[derive(Clone, Debug)]
pub struct ManagerIdentity {
    pub username: String,
    pub password: SecretString,
    pub tls: TlsPolicy,
}

/// Credentials chosen for one server.
#[derive(Clone, Debug)]
pub struct Identity {
    pub username: String,
    pub password: SecretString,
    pub tls: TlsPolicy,
    /// Where they came from, for messages: `Secret default/vsphere-creds (VSphereCluster default/c1)`.
    pub source: String,
}

fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    if let Some(v) = secret.data.as_ref().and_then(|d| d.get(key)) {
        return String::from_utf8(v.0.clone()).ok();
    }
    secret
        .string_data
        .as_ref()
        .and_then(|d| d.get(key))
        .cloned()
}

/// Choose the identity for `server`. Errors name the cluster and Secret and what is wrong,
/// never a value.
/// `default_tls` is the trust for a cluster's Secret when the cluster has no thumbprint (the
/// `--ca-file`/`--thumbprint`/`--insecure` flags, else the system roots).
pub fn identity_for(
    server: &str,
    clusters: &[VSphereCluster],
    secrets: &[Secret],
    manager: Option<&ManagerIdentity>,
    default_tls: &TlsPolicy,
) -> Result<Identity, String> {
    let mut candidates: Vec<&VSphereCluster> = clusters
        .iter()
        .filter(|c| {
            c.spec
                .server
                .as_deref()
                .is_some_and(|s| same_server(s, server))
        })
        .collect();
    candidates.sort_by_key(|c| (c.metadata.namespace.clone(), c.metadata.name.clone()));
    let mut problems = Vec::new();
    for c in &candidates {
        let ns = c.metadata.namespace.clone().unwrap_or_default();
        let cname = format!("{ns}/{}", c.metadata.name.clone().unwrap_or_default());
        let tls = match c.spec.thumbprint.as_deref().filter(|t| !t.is_empty()) {
            Some(t) => match Thumbprint::parse(t) {
                Ok(t) => TlsPolicy::Thumbprint(t),
                Err(e) => {
                    problems.push(format!("VSphereCluster {cname}: spec.thumbprint: {e}"));
                    continue;
                }
            },
            None => default_tls.clone(),
        };
        let Some(r) = &c.spec.identity_ref else {
            continue;
        };
        if r.kind != VSphereIdentityKind::Secret {
            problems.push(format!(
                "VSphereCluster {cname}: identityRef kind {:?} is not supported here; use a Secret",
                r.kind
            ));
            continue;
        }
        let Some(secret) = secrets.iter().find(|s| {
            s.metadata.name.as_deref() == Some(r.name.as_str())
                && s.metadata.namespace.clone().unwrap_or_default() == ns
        }) else {
            problems.push(format!(
                "VSphereCluster {cname}: identity Secret {ns}/{} not found",
                r.name
            ));
            continue;
        };
        match (secret_value(secret, "username"), secret_value(secret, "password")) {
            (Some(u), Some(p)) if !u.is_empty() && !p.is_empty() => {
                return Ok(Identity {
                    username: u,
                    password: SecretString::from(p),
                    tls,
                    source: format!("Secret {ns}/{} (VSphereCluster {cname})", r.name),
                });
            }
            _ => problems.push(format!(
                "VSphereCluster {cname}: identity Secret {ns}/{} lacks a non-empty username or password",
                r.name
            )),
        }
    }
    match manager {
        Some(m) => Ok(Identity {
            username: m.username.clone(),
            password: m.password.clone(),
            tls: m.tls.clone(),
            source: "the manager's credentials".into(),
        }),
        None if problems.is_empty() => Err(format!(
            "no credentials for vCenter {server}: no VSphereCluster on this server has an identityRef, and the manager has none"
        )),
        None => Err(format!(
            "no usable credentials for vCenter {server}: {}",
            problems.join("; ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vsphere_cluster::{VSphereClusterSpec, VSphereIdentityReference};
    use k8s_openapi::ByteString;
    use kube::api::ObjectMeta;
    use secrecy::ExposeSecret;

    fn cluster(
        ns: &str,
        name: &str,
        server: &str,
        secret: Option<&str>,
        thumb: Option<&str>,
    ) -> VSphereCluster {
        let mut c = VSphereCluster::new(
            name,
            VSphereClusterSpec {
                server: Some(server.into()),
                thumbprint: thumb.map(str::to_string),
                identity_ref: secret.map(|s| VSphereIdentityReference {
                    kind: VSphereIdentityKind::Secret,
                    name: s.into(),
                }),
                ..VSphereClusterSpec::default()
            },
        );
        c.metadata.namespace = Some(ns.into());
        c
    }

    fn secret(ns: &str, name: &str, user: &str, pass: &str) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..ObjectMeta::default()
            },
            data: Some(
                [
                    ("username".to_string(), ByteString(user.as_bytes().to_vec())),
                    ("password".to_string(), ByteString(pass.as_bytes().to_vec())),
                ]
                .into(),
            ),
            ..Secret::default()
        }
    }

    fn manager() -> ManagerIdentity {
        ManagerIdentity {
            username: "mgr".into(),
            password: SecretString::from("mgr-pw"),
            tls: TlsPolicy::System,
        }
    }

    #[test]
    fn the_matching_clusters_secret_wins_with_its_thumbprint() {
        let thumb = "AA:".repeat(19) + "AA";
        let clusters = [
            cluster("b", "c2", "vc.example.com", Some("creds"), None),
            cluster(
                "a",
                "c1",
                "https://VC.example.com/sdk",
                Some("creds"),
                Some(&thumb),
            ),
            cluster("a", "other", "vc2.example.com", Some("creds"), None),
        ];
        let secrets = [
            secret("a", "creds", "alice", "pw-a"),
            secret("b", "creds", "bob", "pw-b"),
        ];
        let id = identity_for(
            "vc.example.com",
            &clusters,
            &secrets,
            Some(&manager()),
            &TlsPolicy::System,
        )
        .unwrap();
        assert_eq!(id.username, "alice", "namespace/name order: a/c1 first");
        assert_eq!(id.password.expose_secret(), "pw-a");
        assert!(matches!(id.tls, TlsPolicy::Thumbprint(_)));
        assert!(id.source.contains("a/creds"));
    }

    #[test]
    fn a_broken_secret_falls_through_to_the_next_cluster_then_the_manager() {
        let clusters = [
            cluster("a", "c1", "vc", Some("missing"), None),
            cluster("b", "c2", "vc", Some("creds"), None),
        ];
        let id = identity_for(
            "vc",
            &clusters,
            &[secret("b", "creds", "bob", "x")],
            None,
            &TlsPolicy::System,
        )
        .unwrap();
        assert_eq!(id.username, "bob");
        let id = identity_for(
            "vc",
            &clusters[..1],
            &[],
            Some(&manager()),
            &TlsPolicy::System,
        )
        .unwrap();
        assert_eq!(id.username, "mgr");
        let err = identity_for("vc", &clusters[..1], &[], None, &TlsPolicy::System).unwrap_err();
        assert!(err.contains("identity Secret a/missing not found"), "{err}");
        let err = identity_for("vc", &[], &[], None, &TlsPolicy::System).unwrap_err();
        assert!(err.contains("no credentials"), "{err}");
    }

    #[test]
    fn a_clusters_thumbprint_never_applies_to_the_managers_credentials() {
        // A cluster in some namespace with a thumbprint but no identityRef: the manager's
        // credentials keep the manager's trust.
        let thumb = "BB:".repeat(31) + "BB";
        let clusters = [cluster("tenant", "aaa", "vc", None, Some(&thumb))];
        let id = identity_for("vc", &clusters, &[], Some(&manager()), &TlsPolicy::System).unwrap();
        assert_eq!(id.username, "mgr");
        assert_eq!(id.tls, TlsPolicy::System);
        // Without a thumbprint, a cluster's Secret uses the default trust (the CLI flags).
        let clusters = [cluster("a", "c1", "vc", Some("creds"), None)];
        let id = identity_for(
            "vc",
            &clusters,
            &[secret("a", "creds", "u", "p")],
            None,
            &TlsPolicy::Insecure,
        )
        .unwrap();
        assert_eq!(id.tls, TlsPolicy::Insecure);
    }

    #[test]
    fn errors_never_contain_secret_values() {
        let clusters = [cluster("a", "c1", "vc", Some("creds"), None)];
        let err = identity_for(
            "vc",
            &clusters,
            &[secret("a", "creds", "", "topsecret")],
            None,
            &TlsPolicy::System,
        )
        .unwrap_err();
        assert!(!err.contains("topsecret"));
        assert!(err.contains("lacks a non-empty username or password"));
    }
}
