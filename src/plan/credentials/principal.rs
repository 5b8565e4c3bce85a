//! Whose credentials act for an object on vCenter. The choice follows ownership and never the
//! server an object names (security review F1/F2): before, every zone and machine on a server
//! ran as the first VSphereCluster on that server, in any namespace, whose identity resolved,
//! so `allowedNamespaces` protected nothing for machines and one tenant's bare VSphereCluster
//! could swap its own (or broken) credentials in for everybody on that vCenter.
//!
//! - A Cluster API machine (its VSphereVM) acts as its own cluster: the VSphereCluster, in the
//!   machine's namespace, of the Cluster its `cluster.x-k8s.io/cluster-name` label names.
//! - A VSphereCluster acts as its `identityRef`, else as the manager.
//! - An OpenShift Machine (and a control plane machine set's template) acts as its
//!   `credentialsSecret` in its own namespace, with machine-api-operator's keys
//!   (`<server>.username`, `<server>.password`); where that Secret does not exist, as the manager
//!   (machine.openshift.io objects are admin-owned in OpenShift).
//! - A deployment zone (cluster-scoped, admin-owned) acts as its own `identityRef`, resolved only
//!   in the controller's namespace, else as the manager; never as a tenant.
//!
//! The manager's own credentials go only to the servers the admin bound them to
//! ([`super::ServerScope`]); for any other server the answer is "no credentials, give an
//! identityRef", and nothing is sent.
use crate::api::capi_core::CLUSTER_NAME_LABEL;
use crate::api::cluster_identity::VSphereClusterIdentity;
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::vsphere_cluster::{VSphereCluster, VSphereIdentityKind, VSphereIdentityReference};
use crate::vcenter::model::endpoint::Endpoint;
use crate::vcenter::model::trust::{Thumbprint, TlsPolicy};
use k8s_openapi::api::core::v1::Secret;
use secrecy::SecretString;

use super::{
    Identity, IdentitySources, ManagerIdentity, ServerTrust, cluster_identity, secret_value,
};

/// [`Identity::source`] of the manager's own credentials.
pub const MANAGER_SOURCE: &str = "the manager's credentials";

/// Who an object acts as on vCenter.
#[derive(Clone, Debug)]
pub enum Principal {
    /// The manager's own credentials, on the servers they are bound to.
    Manager,
    /// A VSphereCluster: its `identityRef`, else the manager's.
    Cluster(Box<VSphereCluster>),
    /// An OpenShift machine's `credentialsSecret` (namespace, name): else the manager's.
    MachineSecret { namespace: String, name: String },
    /// A deployment zone's own `identityRef` and `thumbprint`.
    Zone {
        zone: String,
        identity: VSphereIdentityReference,
        thumbprint: Option<String>,
    },
}

impl Principal {
    /// What sweeps and inventory reads are grouped by: one bulk read per (server, key).
    pub fn key(&self) -> String {
        match self {
            Principal::Manager => "manager".into(),
            Principal::Cluster(c) => format!(
                "VSphereCluster {}/{}",
                c.metadata.namespace.as_deref().unwrap_or_default(),
                c.metadata.name.as_deref().unwrap_or_default()
            ),
            Principal::MachineSecret { namespace, name } => {
                format!("credentialsSecret {namespace}/{name}")
            }
            Principal::Zone { zone, .. } => format!("VSphereDeploymentZone {zone}"),
        }
    }

    /// A cluster, by value.
    pub fn cluster(c: &VSphereCluster) -> Self {
        Principal::Cluster(Box::new(c.clone()))
    }
}

/// A zone acts as its `identityRef`, else as the manager.
pub fn for_zone(z: &VSphereDeploymentZone) -> Principal {
    match &z.spec.identity_ref {
        Some(identity) => Principal::Zone {
            zone: z.metadata.name.clone().unwrap_or_default(),
            identity: identity.clone(),
            thumbprint: z.spec.thumbprint.clone().filter(|t| !t.trim().is_empty()),
        },
        None => Principal::Manager,
    }
}

/// An OpenShift machine (or machine set template) in `namespace` with `credentialsSecret`.
pub fn for_openshift(namespace: &str, credentials_secret: Option<&str>) -> Principal {
    match credentials_secret.filter(|s| !s.is_empty()) {
        Some(name) => Principal::MachineSecret {
            namespace: namespace.to_string(),
            name: name.to_string(),
        },
        None => Principal::Manager,
    }
}

/// An OpenShift machine spec (a Machine's, or a control plane machine set template's) in
/// `namespace`: its `providerSpec.value.credentialsSecret`.
pub fn for_openshift_spec(namespace: &str, spec: &crate::api::machine::MachineSpec) -> Principal {
    let secret = spec
        .provider_spec
        .as_ref()
        .and_then(|p| p.value.as_ref())
        .and_then(|v| v.pointer("/credentialsSecret/name"))
        .and_then(serde_json::Value::as_str);
    for_openshift(namespace, secret)
}

/// The VSphereCluster of Cluster `cluster` in namespace `ns` (never another namespace): the one
/// that Cluster owns (CAPI sets the owner reference), else the one CAPI labelled with its name,
/// else the one of that name (local mode, manifests written by hand).
pub fn cluster_of<'c>(
    ns: &str,
    cluster: &str,
    clusters: &'c [VSphereCluster],
) -> Result<&'c VSphereCluster, String> {
    let here: Vec<&VSphereCluster> = clusters
        .iter()
        .filter(|c| c.metadata.namespace.as_deref().unwrap_or_default() == ns)
        .collect();
    let owned: Vec<&&VSphereCluster> = here
        .iter()
        .filter(|c| {
            c.metadata.owner_references.iter().flatten().any(|o| {
                o.kind == "Cluster"
                    && o.api_version.starts_with("cluster.x-k8s.io/")
                    && o.name == cluster
            })
        })
        .collect();
    match owned.as_slice() {
        [one] => return Ok(one),
        [] => {}
        many => {
            let names: Vec<&str> = many
                .iter()
                .map(|c| c.metadata.name.as_deref().unwrap_or_default())
                .collect();
            return Err(format!(
                "Cluster {ns}/{cluster} owns more than one VSphereCluster ({}): its credentials are ambiguous",
                names.join(", ")
            ));
        }
    }
    let labelled = here.iter().find(|c| {
        c.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(CLUSTER_NAME_LABEL))
            .is_some_and(|l| l == cluster)
    });
    let named = || {
        here.iter()
            .find(|c| c.metadata.name.as_deref() == Some(cluster))
    };
    labelled.or_else(named).copied().ok_or_else(|| {
        format!("no VSphereCluster of Cluster {ns}/{cluster} in namespace {ns}: a machine uses its own cluster's credentials")
    })
}

/// A Cluster API machine's VSphereVM acts as its cluster (`namespace`, `labels` of the VM): as
/// its identityRef, or as the manager when it has none (so that machines acting as the manager,
/// of both APIs, share one sweep and one bulk read per server).
pub fn for_capi_machine(
    namespace: &str,
    name: &str,
    labels: Option<&std::collections::BTreeMap<String, String>>,
    clusters: &[VSphereCluster],
) -> Result<Principal, String> {
    let Some(cluster) = labels.and_then(|l| l.get(CLUSTER_NAME_LABEL)) else {
        return Err(format!(
            "VSphereVM {namespace}/{name} has no {CLUSTER_NAME_LABEL} label: a machine uses its own cluster's credentials"
        ));
    };
    cluster_of(namespace, cluster, clusters).map(|c| match c.spec.identity_ref {
        Some(_) => Principal::cluster(c),
        None => Principal::Manager,
    })
}

/// The credentials `principal` has for `server`, or why there are none. Errors name the object
/// and what it names in its own namespace, never a value.
pub fn resolve(
    principal: &Principal,
    server: &str,
    sources: &IdentitySources<'_>,
    manager: Option<&ManagerIdentity>,
    trust: &ServerTrust,
) -> Result<Identity, String> {
    let tls = trust.for_server(server);
    match principal {
        Principal::Manager => manager_for(server, manager, &tls, None),
        Principal::Cluster(c) => match cluster_identity(c, sources, &tls)? {
            Some(id) => Ok(id),
            None => {
                let who = format!(
                    "VSphereCluster {}/{}",
                    c.metadata.namespace.as_deref().unwrap_or_default(),
                    c.metadata.name.as_deref().unwrap_or_default()
                );
                manager_for(server, manager, &tls, Some(&who))
            }
        },
        Principal::MachineSecret { namespace, name } => {
            match sources.secret(namespace, name) {
                Some(secret) => machine_secret(secret, server, namespace, name, tls),
                // machine-api-operator's default name, absent: the manager's, as documented.
                None => manager_for(server, manager, &tls, None),
            }
        }
        Principal::Zone {
            zone,
            identity,
            thumbprint,
        } => zone_identity(zone, identity, thumbprint.as_deref(), sources, tls),
    }
}

/// The manager's own credentials, if they are bound to `server`.
fn manager_for(
    server: &str,
    manager: Option<&ManagerIdentity>,
    tls: &TlsPolicy,
    who: Option<&str>,
) -> Result<Identity, String> {
    let who = who.map_or_else(
        || "an identityRef".to_string(),
        |w| format!("{w} an identityRef"),
    );
    match manager {
        None => Err(format!(
            "no credentials for vCenter {server}: give {who} (the manager has no credentials of its own)"
        )),
        Some(m) if !m.servers.allows(server) => Err(format!(
            "no credentials for vCenter {server}: give {who} (the manager's own credentials are only for {})",
            m.servers.describe()
        )),
        Some(m) => Ok(Identity {
            username: m.username.clone(),
            password: m.password.clone(),
            tls: tls.clone(),
            source: MANAGER_SOURCE.into(),
        }),
    }
}

/// machine-api-operator's credentials Secret: `<server>.username` and `<server>.password`, the
/// server as the machine writes it or as its host name; plain `username`/`password` also do.
fn machine_secret(
    secret: &Secret,
    server: &str,
    ns: &str,
    name: &str,
    tls: TlsPolicy,
) -> Result<Identity, String> {
    let host = Endpoint::parse(server).map(|e| e.host()).ok();
    let prefixes: Vec<String> = [Some(server.trim().to_string()), host]
        .into_iter()
        .flatten()
        .map(|p| format!("{p}."))
        .chain([String::new()])
        .collect();
    for p in &prefixes {
        let user = secret_value(secret, &format!("{p}username"));
        let pass = secret_value(secret, &format!("{p}password"));
        if let (Some(u), Some(pw)) = (user, pass)
            && !u.is_empty()
            && !pw.is_empty()
        {
            return Ok(Identity {
                username: u,
                password: SecretString::from(pw),
                tls,
                source: format!("credentialsSecret {ns}/{name}"),
            });
        }
    }
    let host = Endpoint::parse(server).map_or_else(|_| server.to_string(), |e| e.host());
    Err(format!(
        "credentialsSecret {ns}/{name} has no non-empty {host}.username and {host}.password (nor username and password)"
    ))
}

/// A zone's identityRef, resolved in the controller's namespace only.
fn zone_identity(
    zone: &str,
    r: &VSphereIdentityReference,
    thumbprint: Option<&str>,
    sources: &IdentitySources<'_>,
    tls: TlsPolicy,
) -> Result<Identity, String> {
    let ns = sources.controller_namespace;
    let tls = match thumbprint {
        Some(t) => TlsPolicy::Thumbprint(
            Thumbprint::parse(t)
                .map_err(|e| format!("VSphereDeploymentZone {zone}: spec.thumbprint: {e}"))?,
        ),
        None => tls,
    };
    let (secret_name, via) = match r.kind {
        VSphereIdentityKind::Secret => (r.name.clone(), String::new()),
        VSphereIdentityKind::VSphereClusterIdentity => {
            let id: &VSphereClusterIdentity = sources
                .identities
                .iter()
                .find(|i| i.metadata.name.as_deref() == Some(r.name.as_str()))
                .ok_or_else(|| {
                    format!(
                        "VSphereDeploymentZone {zone}: spec.identityRef: VSphereClusterIdentity {} not found",
                        r.name
                    )
                })?;
            if id.spec.secret_name.is_empty() {
                return Err(format!(
                    "VSphereDeploymentZone {zone}: VSphereClusterIdentity {}: spec.secretName is empty",
                    r.name
                ));
            }
            (
                id.spec.secret_name.clone(),
                format!("VSphereClusterIdentity {} → ", r.name),
            )
        }
    };
    let Some(secret) = sources.secret(ns, &secret_name) else {
        return Err(format!(
            "VSphereDeploymentZone {zone}: spec.identityRef: {via}Secret {ns}/{secret_name} not found"
        ));
    };
    match (
        secret_value(secret, "username"),
        secret_value(secret, "password"),
    ) {
        (Some(u), Some(p)) if !u.is_empty() && !p.is_empty() => Ok(Identity {
            username: u,
            password: SecretString::from(p),
            tls,
            source: format!("{via}Secret {ns}/{secret_name} (VSphereDeploymentZone {zone})"),
        }),
        _ => Err(format!(
            "VSphereDeploymentZone {zone}: spec.identityRef: {via}Secret {ns}/{secret_name} lacks a non-empty username or password"
        )),
    }
}
