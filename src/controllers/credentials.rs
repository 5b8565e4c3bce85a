//! Credentials for one object on one vCenter server, as the cluster sees them: who acts for the
//! object is decided by ownership (`plan::credentials::principal`), and only what that principal
//! names is read, one object at a time (the manager never lists Secrets): a cluster's
//! identityRef Secret, or its VSphereClusterIdentity (from the watched cache) with its Secret in
//! the controller's namespace and the labels of the cluster's namespace (read by name: a cache
//! would need the right to list every Namespace); an OpenShift machine's credentialsSecret
//! in its namespace; a zone's identityRef in the controller's namespace. Secrets come through
//! [`super::secrets::SecretCache`]: read once per `--credentials-reread-interval`, not per
//! sweep, and again at once when vCenter refuses the password they held.
use k8s_openapi::api::core::v1::{Namespace, Secret};

use super::secrets::Read;
use kube::Api;
use serde::de::DeserializeOwned;

use super::Context;
use super::patch::is_not_found;
use crate::api::VSphereCluster;
use crate::api::cluster_identity::VSphereClusterIdentity;
use crate::api::vsphere_cluster::VSphereIdentityKind;
use crate::plan::credentials::{Identity, IdentitySources, Principal, resolve};
use crate::plan::failure::Failure;
use crate::vcenter::{Client, Credentials};

/// What the identityRefs of some clusters name, as read from the API server.
#[derive(Default)]
pub struct IdentityObjects {
    pub secrets: Vec<Secret>,
    pub identities: Vec<VSphereClusterIdentity>,
    pub namespaces: Vec<Namespace>,
    /// Whether some Secret came from memory rather than a read made for this call.
    pub remembered: bool,
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
    /// A (cached) vCenter client for `server` acting as `principal`, or why there is none: no
    /// usable credentials (a configuration failure naming what to fix) or a typed client error
    /// (address, TLS settings). The message never holds a secret value.
    pub async fn client_as(&self, server: &str, principal: &Principal) -> Result<Client, Failure> {
        if server.trim().is_empty() {
            return Err(Failure::config("spec.server is empty"));
        }
        let objects = self.principal_objects(principal, false).await;
        let client = self.resolved_client(server, principal, &objects)?;
        // A refused login with a remembered password: the Secret may have been rotated since
        // it was read. Read it again (once per call; while vCenter keeps refusing, the client
        // does not try that password again for a while anyway).
        if objects.remembered && client.login_refused().await {
            let objects = self.principal_objects(principal, true).await;
            return self.resolved_client(server, principal, &objects);
        }
        Ok(client)
    }

    fn resolved_client(
        &self,
        server: &str,
        principal: &Principal,
        objects: &IdentityObjects,
    ) -> Result<Client, Failure> {
        let id = resolve(
            principal,
            server,
            &objects.sources(&self.namespace),
            self.manager.as_ref(),
            &self.trust,
        )
        .map_err(Failure::config)?;
        self.client_for(server, id)
    }

    /// A (cached) vCenter client with the credentials `cluster` itself names (its identityRef,
    /// else the manager's if they are bound to its server), strictly: a broken or refused
    /// identityRef is an error naming it, never a fall back to other credentials.
    pub async fn cluster_vcenter_client(
        &self,
        cluster: &VSphereCluster,
    ) -> Result<Client, Failure> {
        let server = cluster.spec.server.clone();
        self.client_as(&server, &Principal::cluster(cluster)).await
    }

    fn client_for(&self, server: &str, id: Identity) -> Result<Client, Failure> {
        tracing::debug!(%server, source = %id.source, "vCenter credentials chosen");
        let credentials = Credentials::new(id.username, id.password);
        self.sessions
            .client(server, &credentials, id.tls)
            .map_err(Failure::from)
    }

    /// What `principal` names, read one object at a time (Secrets remembered for a while,
    /// unless `reread`). Missing or unreadable ones are left out; `plan::credentials` then
    /// says which one is missing.
    async fn principal_objects(&self, principal: &Principal, reread: bool) -> IdentityObjects {
        match principal {
            Principal::Manager => IdentityObjects::default(),
            Principal::Cluster(c) => {
                self.identity_objects_as(std::slice::from_ref(c), reread)
                    .await
            }
            Principal::MachineSecret { namespace, name } => {
                let mut out = IdentityObjects::default();
                self.secret_into(&mut out, namespace, name, "credentialsSecret", reread)
                    .await;
                out
            }
            Principal::Zone { identity, .. } => {
                let mut out = IdentityObjects::default();
                let secret_name = match identity.kind {
                    VSphereIdentityKind::Secret => Some(identity.name.clone()),
                    VSphereIdentityKind::VSphereClusterIdentity => {
                        let id = self.cached_identity(&identity.name);
                        let name = id.as_ref().map(|i| i.spec.secret_name.clone());
                        out.identities.extend(id);
                        name.filter(|n| !n.is_empty())
                    }
                };
                if let Some(name) = secret_name {
                    let ns = self.namespace.clone();
                    self.secret_into(&mut out, &ns, &name, "identity Secret", reread)
                        .await;
                }
                out
            }
        }
    }

    /// The VSphereClusterIdentity `name` from the cache (watched: the controller reconciles
    /// them); absent or undecodable, `None` (`plan::credentials` then says it is missing).
    fn cached_identity(&self, name: &str) -> Option<VSphereClusterIdentity> {
        match self.stores.identities.get(None, name)? {
            Ok(id) => Some(id),
            Err(why) => {
                tracing::warn!(object = %name, error = %why, "cannot read VSphereClusterIdentity");
                None
            }
        }
    }

    /// The Secret `ns/name` into `out` (see [`super::secrets`]); absent or unreadable, left
    /// out (a read failure is logged naming the Secret, never its content).
    async fn secret_into(
        &self,
        out: &mut IdentityObjects,
        ns: &str,
        name: &str,
        what: &str,
        reread: bool,
    ) {
        let max_age = if reread {
            std::time::Duration::ZERO
        } else {
            self.polling.credentials_reread
        };
        match self.secrets.get(&self.client, ns, name, max_age).await {
            Ok(Some((s, read))) => {
                out.remembered |= read == Read::Remembered;
                out.secrets.push(s);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(object = %format!("{ns}/{name}"), error = %e, "cannot read {what}")
            }
        }
    }

    /// The objects the clusters' identityRefs name. Missing or unreadable ones are left out;
    /// `plan::credentials` then says which one is missing.
    pub async fn identity_objects(&self, clusters: &[VSphereCluster]) -> IdentityObjects {
        self.identity_objects_as(clusters, false).await
    }

    async fn identity_objects_as(
        &self,
        clusters: &[VSphereCluster],
        reread: bool,
    ) -> IdentityObjects {
        let mut out = IdentityObjects::default();
        for c in clusters {
            let Some(r) = &c.spec.identity_ref else {
                continue;
            };
            let ns = c.metadata.namespace.clone().unwrap_or_default();
            match r.kind {
                VSphereIdentityKind::Secret => {
                    self.secret_into(&mut out, &ns, &r.name, "identity Secret", reread)
                        .await;
                }
                VSphereIdentityKind::VSphereClusterIdentity => {
                    let Some(id) = self.cached_identity(&r.name) else {
                        continue;
                    };
                    if !id.spec.secret_name.is_empty() {
                        let ns = self.namespace.clone();
                        let name = id.spec.secret_name.clone();
                        self.secret_into(&mut out, &ns, &name, "identity Secret", reread)
                            .await;
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
