//! Which credentials and TLS trust a zone's server is reconciled with (reference §3 step 4):
//! the identityRef (a Secret, or a VSphereClusterIdentity the cluster's namespace may use) of a
//! VSphereCluster on the same server, else the manager's own; and, strictly, the credentials
//! one VSphereCluster names (its own readiness check).
//!
//! Unlike CAPV, "the first matching cluster" is deterministic (clusters are tried in
//! namespace/name order), servers match by host, and a cluster's thumbprint pins TLS for the
//! credentials that cluster supplies, and only for those: a VSphereCluster in any namespace must
//! not be able to change how the manager's own credentials trust vCenter (CAPV's fallback ran
//! without verification at all).
use secrecy::SecretString;

use crate::api::cluster_identity::VSphereClusterIdentity;
use crate::api::vsphere_cluster::{VSphereCluster, VSphereIdentityKind};
use crate::vcenter::model::endpoint::same_server;
use crate::vcenter::model::trust::{Thumbprint, TlsPolicy};
use k8s_openapi::api::core::v1::{Namespace, Secret};

use super::selector;

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

/// What identity references resolve against: the Secrets read so far (a cluster's own
/// namespace for `kind: Secret`, the controller's namespace for a VSphereClusterIdentity's), the
/// VSphereClusterIdentities, and the labels of the namespaces that name one.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdentitySources<'a> {
    pub secrets: &'a [Secret],
    pub identities: &'a [VSphereClusterIdentity],
    /// Namespaces (with their labels) of the clusters naming a VSphereClusterIdentity.
    pub namespaces: &'a [Namespace],
    /// Where VSphereClusterIdentity Secrets live (the controller's own namespace).
    pub controller_namespace: &'a str,
}

impl IdentitySources<'_> {
    fn secret(&self, ns: &str, name: &str) -> Option<&Secret> {
        self.secrets.iter().find(|s| {
            s.metadata.name.as_deref() == Some(name)
                && s.metadata.namespace.as_deref().unwrap_or_default() == ns
        })
    }
}

/// The credentials one VSphereCluster's `identityRef` names, strictly: `Ok(None)` without an
/// identityRef, an error naming the cluster, identity, Secret and what is wrong otherwise (never
/// a value). Upstream's rules (CAPV v1.15.0 `pkg/identity/identity.go`): a `Secret` in the
/// cluster's namespace; a `VSphereClusterIdentity` whose `allowedNamespaces.selector` matches
/// the labels of the cluster's namespace (unset `allowedNamespaces`: no namespace), with its
/// Secret `spec.secretName` in the controller's namespace. Unlike CAPV, the identity's
/// `status.ready` is not required (no controller here maintains it; its Secret is checked
/// directly instead).
pub fn cluster_identity(
    c: &VSphereCluster,
    sources: &IdentitySources<'_>,
    default_tls: &TlsPolicy,
) -> Result<Option<Identity>, String> {
    let ns = c.metadata.namespace.clone().unwrap_or_default();
    let cname = format!("{ns}/{}", c.metadata.name.clone().unwrap_or_default());
    let tls = match c.spec.thumbprint.as_deref().filter(|t| !t.is_empty()) {
        Some(t) => TlsPolicy::Thumbprint(
            Thumbprint::parse(t)
                .map_err(|e| format!("VSphereCluster {cname}: spec.thumbprint: {e}"))?,
        ),
        None => default_tls.clone(),
    };
    let Some(r) = &c.spec.identity_ref else {
        return Ok(None);
    };
    let (secret_ns, secret_name, via) = match r.kind {
        VSphereIdentityKind::Secret => (ns.clone(), r.name.clone(), String::new()),
        VSphereIdentityKind::VSphereClusterIdentity => {
            let Some(id) = sources
                .identities
                .iter()
                .find(|i| i.metadata.name.as_deref() == Some(r.name.as_str()))
            else {
                return Err(format!(
                    "VSphereCluster {cname}: VSphereClusterIdentity {} not found",
                    r.name
                ));
            };
            let Some(allowed) = &id.spec.allowed_namespaces else {
                return Err(format!(
                    "VSphereCluster {cname}: VSphereClusterIdentity {} does not allow namespace {ns}: spec.allowedNamespaces is unset, which allows no namespace",
                    r.name
                ));
            };
            let labels = sources
                .namespaces
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(ns.as_str()))
                .and_then(|n| n.metadata.labels.clone())
                .unwrap_or_default();
            if !selector::matches(&allowed.selector, &labels) {
                return Err(format!(
                    "VSphereCluster {cname}: VSphereClusterIdentity {} does not allow namespace {ns}: its labels do not match spec.allowedNamespaces.selector",
                    r.name
                ));
            }
            if id.spec.secret_name.is_empty() {
                return Err(format!(
                    "VSphereCluster {cname}: VSphereClusterIdentity {}: spec.secretName is empty",
                    r.name
                ));
            }
            (
                sources.controller_namespace.to_string(),
                id.spec.secret_name.clone(),
                format!("VSphereClusterIdentity {} → ", r.name),
            )
        }
    };
    let Some(secret) = sources.secret(&secret_ns, &secret_name) else {
        return Err(format!(
            "VSphereCluster {cname}: {via}identity Secret {secret_ns}/{secret_name} not found"
        ));
    };
    match (
        secret_value(secret, "username"),
        secret_value(secret, "password"),
    ) {
        (Some(u), Some(p)) if !u.is_empty() && !p.is_empty() => Ok(Some(Identity {
            username: u,
            password: SecretString::from(p),
            tls,
            source: format!("{via}Secret {secret_ns}/{secret_name} (VSphereCluster {cname})"),
        })),
        _ => Err(format!(
            "VSphereCluster {cname}: {via}identity Secret {secret_ns}/{secret_name} lacks a non-empty username or password"
        )),
    }
}

/// Local mode's input check: every `identityRef` must resolve from the manifests given. The
/// controller may fall back to the manager's credentials for a server ([`identity_for`]), but
/// an operator running `reconcile` with `VSPHERE_USERNAME`/`VSPHERE_PASSWORD` in the
/// environment who forgot the tenant's Secret would otherwise act on vCenter as themselves
/// without noticing; a missing or unusable identity is refused before anything is sent.
/// One line per cluster, naming the cluster, the field and what it names (never a value).
pub fn unresolved_identity_refs<'c>(
    clusters: impl IntoIterator<Item = &'c VSphereCluster>,
    sources: &IdentitySources<'_>,
    default_tls: &TlsPolicy,
) -> Vec<String> {
    clusters
        .into_iter()
        .filter_map(|c| {
            let r = c.spec.identity_ref.as_ref()?;
            let e = cluster_identity(c, sources, default_tls).err()?;
            let kind = match r.kind {
                VSphereIdentityKind::Secret => "Secret",
                VSphereIdentityKind::VSphereClusterIdentity => "VSphereClusterIdentity",
            };
            let named = match r.kind {
                VSphereIdentityKind::Secret => format!(
                    "{}/{}",
                    c.metadata.namespace.as_deref().unwrap_or("default"),
                    r.name
                ),
                VSphereIdentityKind::VSphereClusterIdentity => r.name.clone(),
            };
            Some(format!(
                "{e} (spec.identityRef: {kind} {named}); local mode does not fall back to the --username/--password (VSPHERE_USERNAME/VSPHERE_PASSWORD) credentials for a cluster with an identityRef: give it with -f"
            ))
        })
        .collect()
}

/// Choose the identity for `server`: the first cluster on it (namespace/name order) whose
/// identityRef resolves ([`cluster_identity`]), else the manager's. Errors name the clusters
/// and Secrets and what is wrong, never a value.
/// `default_tls` is the trust for a cluster's Secret when the cluster has no thumbprint (the
/// `--ca-file`/`--thumbprint`/`--insecure` flags, else the system roots).
pub fn identity_for(
    server: &str,
    clusters: &[VSphereCluster],
    sources: &IdentitySources<'_>,
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
        match cluster_identity(c, sources, default_tls) {
            Ok(Some(id)) => return Ok(id),
            Ok(None) => {}
            Err(e) => problems.push(e),
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

    /// `identity_for` over Secrets only (no VSphereClusterIdentity).
    fn with_secrets(
        server: &str,
        clusters: &[VSphereCluster],
        secrets: &[Secret],
        manager: Option<&ManagerIdentity>,
        tls: &TlsPolicy,
    ) -> Result<Identity, String> {
        let sources = IdentitySources {
            secrets,
            ..IdentitySources::default()
        };
        identity_for(server, clusters, &sources, manager, tls)
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
        let id = with_secrets(
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
    fn local_mode_names_every_identity_ref_the_manifests_do_not_give() {
        let mut by_id = cluster("a", "c3", "vc", None, None);
        by_id.spec.identity_ref = Some(VSphereIdentityReference {
            kind: VSphereIdentityKind::VSphereClusterIdentity,
            name: "gone".into(),
        });
        let clusters = [
            cluster("a", "c1", "vc", Some("missing"), None),
            cluster("b", "c2", "vc", Some("creds"), None),
            by_id,
            cluster("a", "c4", "vc", None, None),
        ];
        let secrets = [secret("b", "creds", "bob", "hunter2")];
        let sources = IdentitySources {
            secrets: &secrets,
            ..IdentitySources::default()
        };
        let problems = unresolved_identity_refs(&clusters, &sources, &TlsPolicy::System);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("VSphereCluster a/c1")
                && problems[0].contains("spec.identityRef: Secret a/missing")
                && problems[0].contains("not found"),
            "{}",
            problems[0]
        );
        assert!(
            problems[1].contains("VSphereCluster a/c3")
                && problems[1].contains("spec.identityRef: VSphereClusterIdentity gone"),
            "{}",
            problems[1]
        );
        assert!(problems.iter().all(|p| !p.contains("hunter2")));
    }

    #[test]
    fn a_broken_secret_falls_through_to_the_next_cluster_then_the_manager() {
        let clusters = [
            cluster("a", "c1", "vc", Some("missing"), None),
            cluster("b", "c2", "vc", Some("creds"), None),
        ];
        let id = with_secrets(
            "vc",
            &clusters,
            &[secret("b", "creds", "bob", "x")],
            None,
            &TlsPolicy::System,
        )
        .unwrap();
        assert_eq!(id.username, "bob");
        let id = with_secrets(
            "vc",
            &clusters[..1],
            &[],
            Some(&manager()),
            &TlsPolicy::System,
        )
        .unwrap();
        assert_eq!(id.username, "mgr");
        let err = with_secrets("vc", &clusters[..1], &[], None, &TlsPolicy::System).unwrap_err();
        assert!(err.contains("identity Secret a/missing not found"), "{err}");
        let err = with_secrets("vc", &[], &[], None, &TlsPolicy::System).unwrap_err();
        assert!(err.contains("no credentials"), "{err}");
    }

    #[test]
    fn a_clusters_thumbprint_never_applies_to_the_managers_credentials() {
        // A cluster in some namespace with a thumbprint but no identityRef: the manager's
        // credentials keep the manager's trust.
        let thumb = "BB:".repeat(31) + "BB";
        let clusters = [cluster("tenant", "aaa", "vc", None, Some(&thumb))];
        let id = with_secrets("vc", &clusters, &[], Some(&manager()), &TlsPolicy::System).unwrap();
        assert_eq!(id.username, "mgr");
        assert_eq!(id.tls, TlsPolicy::System);
        // Without a thumbprint, a cluster's Secret uses the default trust (the CLI flags).
        let clusters = [cluster("a", "c1", "vc", Some("creds"), None)];
        let id = with_secrets(
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
        let err = with_secrets(
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

    fn identity(
        name: &str,
        secret: &str,
        selector: Option<serde_json::Value>,
    ) -> VSphereClusterIdentity {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereClusterIdentity",
            "metadata": {"name": name},
            "spec": match selector {
                Some(sel) => serde_json::json!({"secretName": secret, "allowedNamespaces": {"selector": sel}}),
                None => serde_json::json!({"secretName": secret}),
            }
        }))
        .unwrap()
    }

    fn namespace(name: &str, labels: &[(&str, &str)]) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        }
    }

    fn by_identity(ns: &str, id: &str) -> VSphereCluster {
        let mut c = cluster(ns, "c1", "vc", None, None);
        c.spec.identity_ref = Some(VSphereIdentityReference {
            kind: VSphereIdentityKind::VSphereClusterIdentity,
            name: id.into(),
        });
        c
    }

    /// CAPV's identity table (pkg/identity/identity_test.go and the VSphereCluster reconciler
    /// tests): allowed namespaces by selector, nil allows none, `{}` allows all, the Secret in
    /// the controller's namespace.
    #[test]
    fn a_cluster_identity_is_used_only_from_allowed_namespaces() {
        let secrets = [
            secret("capv-system", "vc-creds", "admin", "pw"),
            secret("tenant", "vc-creds", "wrong", "pw"),
        ];
        let identities = [
            identity(
                "prod",
                "vc-creds",
                Some(serde_json::json!({"matchLabels": {"env": "prod"}})),
            ),
            identity("everyone", "vc-creds", Some(serde_json::json!({}))),
            identity("nobody", "vc-creds", None),
            identity("dangling", "missing", Some(serde_json::json!({}))),
        ];
        let namespaces = [
            namespace("tenant", &[("env", "prod")]),
            namespace("dev", &[("env", "dev")]),
        ];
        let sources = IdentitySources {
            secrets: &secrets,
            identities: &identities,
            namespaces: &namespaces,
            controller_namespace: "capv-system",
        };
        let ok = |ns: &str, id: &str| {
            cluster_identity(&by_identity(ns, id), &sources, &TlsPolicy::System)
        };
        // (namespace, identity, Ok(username) or the error's expected words)
        let cases: [(&str, &str, Result<&str, &str>); 6] = [
            ("tenant", "prod", Ok("admin")),
            (
                "dev",
                "prod",
                Err(
                    "VSphereClusterIdentity prod does not allow namespace dev: its labels do not match spec.allowedNamespaces.selector",
                ),
            ),
            ("dev", "everyone", Ok("admin")),
            (
                "tenant",
                "nobody",
                Err(
                    "VSphereClusterIdentity nobody does not allow namespace tenant: spec.allowedNamespaces is unset",
                ),
            ),
            (
                "tenant",
                "absent",
                Err("VSphereClusterIdentity absent not found"),
            ),
            (
                "tenant",
                "dangling",
                Err(
                    "VSphereClusterIdentity dangling → identity Secret capv-system/missing not found",
                ),
            ),
        ];
        for (ns, id, want) in cases {
            match (ok(ns, id), want) {
                (Ok(Some(got)), Ok(user)) => {
                    assert_eq!(got.username, user, "{ns} {id}");
                    assert!(
                        got.source.contains("capv-system/vc-creds"),
                        "{}",
                        got.source
                    );
                }
                (Err(e), Err(words)) => assert!(e.contains(words), "{ns} {id}: {e}"),
                (got, want) => panic!(
                    "{ns} {id}: {:?} want {want:?}",
                    got.map(|i| i.map(|i| i.username))
                ),
            }
        }
        // A refused identity does not fall back to the manager for the cluster's own check, but
        // the zones of the server still get the manager's credentials.
        let c = by_identity("dev", "prod");
        assert!(cluster_identity(&c, &sources, &TlsPolicy::System).is_err());
        let id = identity_for("vc", &[c], &sources, Some(&manager()), &TlsPolicy::System).unwrap();
        assert_eq!(id.username, "mgr");
    }
}
