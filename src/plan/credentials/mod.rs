//! Which credentials and TLS trust an object is reconciled with. Who acts for an object is
//! decided by ownership ([`principal`]); what a VSphereCluster's `identityRef` resolves to is
//! [`cluster_identity`] (CAPV's rules, strictly); where the manager's own credentials may go
//! and how each server is trusted is the admin's ([`trust`]).
//!
//! A cluster's thumbprint pins TLS for the credentials that cluster supplies, and only for
//! those: a VSphereCluster in any namespace must not be able to change how the manager's own
//! credentials trust vCenter (CAPV's fallback ran without verification at all).
pub mod principal;
pub mod trust;

use secrecy::SecretString;

use crate::api::cluster_identity::VSphereClusterIdentity;
use crate::api::vsphere_cluster::{VSphereCluster, VSphereIdentityKind};
use crate::vcenter::model::trust::{Thumbprint, TlsPolicy};
use k8s_openapi::api::core::v1::{Namespace, Secret};

use super::selector;

pub use principal::{Principal, resolve};
pub use trust::{ServerScope, ServerTrust};

/// The manager's own credentials (flags or environment) and the servers they may go to.
#[derive(Clone, Debug)]
pub struct ManagerIdentity {
    pub username: String,
    pub password: SecretString,
    pub servers: ServerScope,
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
            // An absent selector is the empty one, which selects every namespace (v1beta1's
            // `selector: {}`, which it converts from).
            if !selector::matches(&allowed.selector.clone().unwrap_or_default(), &labels) {
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
/// controller may act as the manager for a cluster without an identityRef ([`resolve`]), but
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::infrastructure::v1beta2::common as hub;
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
                server: server.into(),
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

    /// `resolve` over Secrets only (no VSphereClusterIdentity), trust `tls` for every server.
    fn with_secrets(
        principal: &Principal,
        server: &str,
        secrets: &[Secret],
        manager: Option<&ManagerIdentity>,
        tls: &TlsPolicy,
    ) -> Result<Identity, String> {
        let sources = IdentitySources {
            secrets,
            controller_namespace: "vsphere-provider-system",
            ..IdentitySources::default()
        };
        resolve(
            principal,
            server,
            &sources,
            manager,
            &ServerTrust::uniform(tls.clone()),
        )
    }

    fn manager() -> ManagerIdentity {
        ManagerIdentity {
            username: "mgr".into(),
            password: SecretString::from("mgr-pw"),
            servers: ServerScope::Only(vec!["vc".into(), "vc.example.com".into()]),
        }
    }

    fn vm_labels(cluster: &str) -> std::collections::BTreeMap<String, String> {
        [(
            crate::api::capi_core::CLUSTER_NAME_LABEL.to_string(),
            cluster.to_string(),
        )]
        .into()
    }

    #[test]
    fn a_machine_acts_as_its_own_cluster_never_another_namespaces() {
        let thumb = "AA:".repeat(19) + "AA";
        let clusters = [
            cluster(
                "a",
                "c1",
                "https://VC.example.com/sdk",
                Some("creds"),
                Some(&thumb),
            ),
            cluster("b", "c2", "vc.example.com", Some("creds"), None),
        ];
        let secrets = [
            secret("a", "creds", "alice", "pw-a"),
            secret("b", "creds", "bob", "pw-b"),
        ];
        // b's machine gets b's credentials, although a/c1 sorts first on the same server.
        let p = principal::for_capi_machine("b", "m", Some(&vm_labels("c2")), &clusters).unwrap();
        let id = with_secrets(
            &p,
            "vc.example.com",
            &secrets,
            Some(&manager()),
            &TlsPolicy::System,
        )
        .unwrap();
        assert_eq!(id.username, "bob");
        assert_eq!(id.password.expose_secret(), "pw-b");
        assert!(id.source.contains("b/creds"), "{}", id.source);
        // a's machine gets a's, with a's thumbprint.
        let p = principal::for_capi_machine("a", "m", Some(&vm_labels("c1")), &clusters).unwrap();
        let id = with_secrets(&p, "vc.example.com", &secrets, None, &TlsPolicy::System).unwrap();
        assert_eq!(id.username, "alice");
        assert!(matches!(id.tls, TlsPolicy::Thumbprint(_)));
        // A dev machine naming prod's cluster finds nothing in its own namespace.
        let err =
            principal::for_capi_machine("dev", "m", Some(&vm_labels("c1")), &clusters).unwrap_err();
        assert!(
            err.contains("no VSphereCluster of Cluster dev/c1 in namespace dev"),
            "{err}"
        );
        let err = principal::for_capi_machine("a", "m", None, &clusters).unwrap_err();
        assert!(
            err.contains("has no cluster.x-k8s.io/cluster-name label"),
            "{err}"
        );
    }

    #[test]
    fn a_clusters_vsphere_cluster_is_the_one_its_cluster_owns_then_labels_then_names() {
        let owned_by = |c: &mut VSphereCluster, owner: &str| {
            c.metadata.owner_references = Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: "cluster.x-k8s.io/v1beta1".into(),
                    kind: "Cluster".into(),
                    name: owner.into(),
                    uid: "u".into(),
                    ..Default::default()
                },
            ]);
        };
        let mut owned = cluster("ns", "infra-x", "vc", None, None);
        owned_by(&mut owned, "prod");
        let same_name = cluster("ns", "prod", "vc", None, None);
        let clusters = [same_name.clone(), owned.clone()];
        let got = principal::cluster_of("ns", "prod", &clusters).unwrap();
        assert_eq!(
            got.metadata.name.as_deref(),
            Some("infra-x"),
            "the owned one"
        );
        let got = principal::cluster_of("ns", "prod", &clusters[..1]).unwrap();
        assert_eq!(got.metadata.name.as_deref(), Some("prod"), "else by name");
        let mut twice = cluster("ns", "infra-y", "vc", None, None);
        owned_by(&mut twice, "prod");
        let err = principal::cluster_of("ns", "prod", &[owned, twice]).unwrap_err();
        assert!(
            err.contains("more than one VSphereCluster (infra-x, infra-y)"),
            "{err}"
        );
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
    fn a_tenants_broken_identity_breaks_only_its_own_cluster() {
        let broken = cluster("a", "c1", "vc", Some("missing"), None);
        let fine = cluster("b", "c2", "vc", Some("creds"), None);
        let secrets = [secret("b", "creds", "bob", "x")];
        let err = with_secrets(
            &Principal::cluster(&broken),
            "vc",
            &secrets,
            Some(&manager()),
            &TlsPolicy::System,
        )
        .unwrap_err();
        assert!(err.contains("identity Secret a/missing not found"), "{err}");
        let id = with_secrets(
            &Principal::cluster(&fine),
            "vc",
            &secrets,
            None,
            &TlsPolicy::System,
        )
        .unwrap();
        assert_eq!(id.username, "bob");
        // The zones of the server keep the manager's credentials, whatever tenants write.
        let id = with_secrets(
            &Principal::Manager,
            "vc",
            &secrets,
            Some(&manager()),
            &TlsPolicy::System,
        )
        .unwrap();
        assert_eq!(id.username, "mgr");
    }

    #[test]
    fn the_managers_credentials_go_only_to_the_servers_they_are_bound_to() {
        let bare = cluster("tenant", "c1", "evil.example.com", None, None);
        for p in [
            Principal::cluster(&bare),
            Principal::Manager,
            principal::for_openshift("openshift-machine-api", Some("absent")),
        ] {
            let err = with_secrets(
                &p,
                "evil.example.com",
                &[],
                Some(&manager()),
                &TlsPolicy::System,
            )
            .unwrap_err();
            assert!(
                err.starts_with("no credentials for vCenter evil.example.com: give ")
                    && err.contains("an identityRef")
                    && err.contains("only for vc, vc.example.com"),
                "{err}"
            );
            assert!(!err.contains("mgr"), "no username: {err}");
        }
        let err = with_secrets(
            &Principal::cluster(&bare),
            "evil.example.com",
            &[],
            None,
            &TlsPolicy::System,
        )
        .unwrap_err();
        assert!(
            err.contains("give VSphereCluster tenant/c1 an identityRef (the manager has no credentials of its own)"),
            "{err}"
        );
        // Its own identityRef takes a cluster anywhere, with its own credentials.
        let own = cluster("tenant", "c1", "evil.example.com", Some("creds"), None);
        let id = with_secrets(
            &Principal::cluster(&own),
            "evil.example.com",
            &[secret("tenant", "creds", "t", "tpw")],
            Some(&manager()),
            &TlsPolicy::System,
        )
        .unwrap();
        assert_eq!(id.username, "t");
    }

    #[test]
    fn a_clusters_thumbprint_never_applies_to_the_managers_credentials() {
        let thumb = "BB:".repeat(31) + "BB";
        let c = cluster("tenant", "aaa", "vc", None, Some(&thumb));
        let id = with_secrets(
            &Principal::cluster(&c),
            "vc",
            &[],
            Some(&manager()),
            &TlsPolicy::System,
        )
        .unwrap();
        assert_eq!(id.username, "mgr");
        assert_eq!(id.tls, TlsPolicy::System);
        // Without a thumbprint, a cluster's Secret uses the server's trust (the admin's flags).
        let c = cluster("a", "c1", "vc", Some("creds"), None);
        let id = with_secrets(
            &Principal::cluster(&c),
            "vc",
            &[secret("a", "creds", "u", "p")],
            None,
            &TlsPolicy::Insecure,
        )
        .unwrap();
        assert_eq!(id.tls, TlsPolicy::Insecure);
    }

    #[test]
    fn errors_never_contain_secret_values() {
        let c = cluster("a", "c1", "vc", Some("creds"), None);
        let err = with_secrets(
            &Principal::cluster(&c),
            "vc",
            &[secret("a", "creds", "", "topsecret")],
            None,
            &TlsPolicy::System,
        )
        .unwrap_err();
        assert!(!err.contains("topsecret"));
        assert!(err.contains("lacks a non-empty username or password"));
    }

    fn keyed_secret(ns: &str, name: &str, pairs: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..ObjectMeta::default()
            },
            string_data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    /// machine-api-operator's credentials Secret (`<server>.username`/`<server>.password`).
    #[test]
    fn an_openshift_machine_acts_as_its_credentials_secret_else_the_manager() {
        let ns = "openshift-machine-api";
        let p = principal::for_openshift(ns, Some("vsphere-cloud-credentials"));
        let mao = keyed_secret(
            ns,
            "vsphere-cloud-credentials",
            &[
                ("vc.example.com.username", "ocp"),
                ("vc.example.com.password", "ocp-pw"),
            ],
        );
        let id = with_secrets(
            &p,
            "https://vc.example.com/sdk",
            std::slice::from_ref(&mao),
            Some(&manager()),
            &TlsPolicy::System,
        )
        .unwrap();
        assert_eq!(id.username, "ocp");
        assert_eq!(
            id.source,
            format!("credentialsSecret {ns}/vsphere-cloud-credentials")
        );
        // Another server's keys only: an error naming the keys, not the manager's.
        let err = with_secrets(&p, "vc", &[mao], Some(&manager()), &TlsPolicy::System).unwrap_err();
        assert!(
            err.contains("has no non-empty vc.username and vc.password"),
            "{err}"
        );
        // The Secret absent: the manager's (admin-owned machines), on its servers.
        let id = with_secrets(&p, "vc", &[], Some(&manager()), &TlsPolicy::System).unwrap();
        assert_eq!(id.username, "mgr");
        // A Secret of that name in another namespace is not this machine's.
        let elsewhere = keyed_secret(
            "tenant",
            "vsphere-cloud-credentials",
            &[("username", "x"), ("password", "y")],
        );
        let id =
            with_secrets(&p, "vc", &[elsewhere], Some(&manager()), &TlsPolicy::System).unwrap();
        assert_eq!(id.username, "mgr");
    }

    #[test]
    fn a_zone_acts_as_its_own_identity_from_the_controllers_namespace_only() {
        let mut z = crate::api::VSphereDeploymentZone::new("zone-a", Default::default());
        z.spec.identity_ref = Some(hub::VSphereIdentityReference {
            kind: hub::VSphereIdentityKind::Secret,
            name: "zone-creds".into(),
        });
        let p = principal::for_zone(&z);
        let tenant = secret("tenant", "zone-creds", "tenant", "t");
        let err = with_secrets(
            &p,
            "vc",
            std::slice::from_ref(&tenant),
            Some(&manager()),
            &TlsPolicy::System,
        )
        .unwrap_err();
        assert!(
            err.contains("VSphereDeploymentZone zone-a: spec.identityRef: Secret vsphere-provider-system/zone-creds not found"),
            "{err}"
        );
        let admin = secret("vsphere-provider-system", "zone-creds", "zones", "z");
        let id = with_secrets(&p, "vc", &[tenant, admin], None, &TlsPolicy::System).unwrap();
        assert_eq!(id.username, "zones");
        // Without one, the manager's.
        z.spec.identity_ref = None;
        assert!(matches!(principal::for_zone(&z), Principal::Manager));
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
        // A refused identity never falls back to other credentials: the dev cluster's machine is
        // refused, naming the identity and the namespace.
        let c = by_identity("dev", "prod");
        let err = resolve(
            &Principal::cluster(&c),
            "vc",
            &sources,
            Some(&manager()),
            &ServerTrust::default(),
        )
        .unwrap_err();
        assert!(
            err.contains("VSphereClusterIdentity prod does not allow namespace dev"),
            "{err}"
        );
        // A zone may name any identity (zones are admin-owned; allowedNamespaces is for tenants).
        let mut z = crate::api::VSphereDeploymentZone::new("z", Default::default());
        z.spec.identity_ref = Some(hub::VSphereIdentityReference {
            kind: hub::VSphereIdentityKind::VSphereClusterIdentity,
            name: "nobody".into(),
        });
        let id = resolve(
            &principal::for_zone(&z),
            "vc",
            &sources,
            None,
            &ServerTrust::default(),
        )
        .unwrap();
        assert_eq!(id.username, "admin");
    }
}
