//! Credentials for one vCenter server, as the cluster sees them: the identityRef Secrets of the
//! VSphereClusters on that server (read one by one, only those — the manager never lists
//! Secrets), else the manager's own. The choice itself is `plan::credentials::identity_for`.
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::Context;
use super::patch::is_not_found;
use crate::api::VSphereCluster;
use crate::api::vsphere_cluster::VSphereIdentityKind;
use crate::plan::credentials::identity_for;
use crate::plan::failure::Failure;
use crate::vcenter::model::endpoint::same_server;
use crate::vcenter::{Client, Credentials};

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
        let secrets = self.identity_secrets(&clusters).await;
        let default_tls = self
            .manager
            .as_ref()
            .map(|m| m.tls.clone())
            .unwrap_or_default();
        let id = identity_for(
            server,
            &clusters,
            &secrets,
            self.manager.as_ref(),
            &default_tls,
        )
        .map_err(Failure::config)?;
        tracing::debug!(%server, source = %id.source, "vCenter credentials chosen");
        let credentials = Credentials::new(id.username, id.password);
        self.sessions
            .client(server, &credentials, id.tls)
            .map_err(Failure::from)
    }

    /// The Secrets the clusters' identityRefs name. Missing or unreadable ones are left out;
    /// `identity_for` then says which one is missing.
    async fn identity_secrets(&self, clusters: &[VSphereCluster]) -> Vec<Secret> {
        let mut out = Vec::new();
        for c in clusters {
            let Some(r) = &c.spec.identity_ref else {
                continue;
            };
            if r.kind != VSphereIdentityKind::Secret {
                continue;
            }
            let ns = c.metadata.namespace.clone().unwrap_or_default();
            let api: Api<Secret> = Api::namespaced(self.client.clone(), &ns);
            match api.get(&r.name).await {
                Ok(s) => out.push(s),
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    tracing::warn!(namespace = %ns, secret = %r.name, error = %e, "cannot read identity Secret");
                }
            }
        }
        out
    }
}
