//! Credentials for one vCenter server, as the cluster sees them: the identityRefs of the
//! VSphereClusters on that server (their Secrets, or VSphereClusterIdentities with their Secret
//! in the controller's namespace and the labels of the namespaces using them — read one by one,
//! only those: the manager never lists Secrets), else the manager's own. The choices themselves
//! are `plan::credentials::{identity_for, cluster_identity}`.
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use serde::de::DeserializeOwned;

use super::Context;
use super::patch::is_not_found;
use crate::api::VSphereCluster;
use crate::api::cluster_identity::VSphereClusterIdentity;
use crate::api::vsphere_cluster::VSphereIdentityKind;
use crate::plan::credentials::{Identity, IdentitySources, cluster_identity, identity_for};
use crate::plan::failure::Failure;
use crate::vcenter::model::endpoint::same_server;
use crate::vcenter::{Client, Credentials};

/// What the identityRefs of some clusters name, as read from the API server.
#[derive(Default)]
pub struct IdentityObjects {
    pub secrets: Vec<Secret>,
    pub identities: Vec<VSphereClusterIdentity>,
    pub namespaces: Vec<Namespace>,
}

impl IdentityObjects {
    /// The sources for `plan::credentials`, Secrets of identities in `controller_namespace`.
    pub fn sources<'a>(&'a self, controller_namespace: &'a str) -> IdentitySources<'a> {
        IdentitySources {
            secrets: &self.secrets,
            identities: &self.identities,
            namespaces: &self.namespaces,
            controller_namespace,
        }
    }
}

impl Context {
    /// A (cached) vCenter client for `server`, or why there is none: no usable credentials (a
    /// configuration failure) or a typed client error (address, TLS settings). The message never
    /// holds a secret value.
    pub async fn vcenter_client(&self, server: &str) -> Result<Client, Failure> {
        if server.trim().is_empty() {
            return Err(Failure::config("spec.server is empty"));
        }
        let clusters: Vec<VSphereCluster> = self
            .stores
            .clusters
            .valid()
            .into_iter()
            .filter(|c| {
                c.spec
                    .server
                    .as_deref()
                    .is_some_and(|s| same_server(s, server))
            })
            .collect();
        let objects = self.identity_objects(&clusters).await;
        let id = identity_for(
            server,
            &clusters,
            &objects.sources(&self.namespace),
            self.manager.as_ref(),
            &self.default_tls(),
        )
        .map_err(Failure::config)?;
        self.client_for(server, id)
    }

    /// A (cached) vCenter client with the credentials `cluster` itself names (its identityRef,
    /// else the manager's), strictly: a broken or refused identityRef is an error naming it, never
    /// a fall back to other credentials.
    pub async fn cluster_vcenter_client(
        &self,
        cluster: &VSphereCluster,
    ) -> Result<Client, Failure> {
        let server = cluster.spec.server.clone().unwrap_or_default();
        if server.trim().is_empty() {
            return Err(Failure::config("spec.server is empty"));
        }
        let objects = self.identity_objects(std::slice::from_ref(cluster)).await;
        let id = match cluster_identity(
            cluster,
            &objects.sources(&self.namespace),
            &self.default_tls(),
        )
        .map_err(Failure::config)?
        {
            Some(id) => id,
            None => identity_for(
                &server,
                &[],
                &IdentitySources::default(),
                self.manager.as_ref(),
                &self.default_tls(),
            )
            .map_err(Failure::config)?,
        };
        self.client_for(&server, id)
    }

    fn default_tls(&self) -> crate::vcenter::model::trust::TlsPolicy {
        self.manager
            .as_ref()
            .map(|m| m.tls.clone())
            .unwrap_or_default()
    }

    fn client_for(&self, server: &str, id: Identity) -> Result<Client, Failure> {
        tracing::debug!(%server, source = %id.source, "vCenter credentials chosen");
        let credentials = Credentials::new(id.username, id.password);
        self.sessions
            .client(server, &credentials, id.tls)
            .map_err(Failure::from)
    }

    /// The objects the clusters' identityRefs name. Missing or unreadable ones are left out;
    /// `plan::credentials` then says which one is missing.
    pub async fn identity_objects(&self, clusters: &[VSphereCluster]) -> IdentityObjects {
        let mut out = IdentityObjects::default();
        for c in clusters {
            let Some(r) = &c.spec.identity_ref else {
                continue;
            };
            let ns = c.metadata.namespace.clone().unwrap_or_default();
            match r.kind {
                VSphereIdentityKind::Secret => {
                    let api: Api<Secret> = Api::namespaced(self.client.clone(), &ns);
                    out.secrets
                        .extend(get_logged(&api, &r.name, "identity Secret").await);
                }
                VSphereIdentityKind::VSphereClusterIdentity => {
                    let api: Api<VSphereClusterIdentity> = Api::all(self.client.clone());
                    let Some(id) = get_logged(&api, &r.name, "VSphereClusterIdentity").await else {
                        continue;
                    };
                    if !id.spec.secret_name.is_empty() {
                        let secrets: Api<Secret> =
                            Api::namespaced(self.client.clone(), &self.namespace);
                        out.secrets.extend(
                            get_logged(&secrets, &id.spec.secret_name, "identity Secret").await,
                        );
                    }
                    out.identities.push(id);
                    let namespaces: Api<Namespace> = Api::all(self.client.clone());
                    out.namespaces
                        .extend(get_logged(&namespaces, &ns, "Namespace").await);
                }
            }
        }
        out
    }
}

/// `GET name`: absent is `None` quietly, other failures `None` with a warning (the plan then
/// reports the object as not found; the message holds no secret).
async fn get_logged<K>(api: &Api<K>, name: &str, what: &str) -> Option<K>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.get(name).await {
        Ok(o) => Some(o),
        Err(e) if is_not_found(&e) => None,
        Err(e) => {
            tracing::warn!(object = %name, error = %e, "cannot read {what}");
            None
        }
    }
}
