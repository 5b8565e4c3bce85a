//! The caches the reconcilers read, one per watched kind. Readiness is checked over
//! [`Stores::each`]. A new kind is a field here, an entry in `each`, and one `watch_kind` line in
//! the runtime.
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::Resource;

use super::cache::Cache;
use crate::api::capi_core::{CapiCluster, CapiMachine};
use crate::api::cluster_identity::VSphereClusterIdentity;
use crate::api::control_plane_machine_set::ControlPlaneMachineSet;
use crate::api::machine_health_check::MachineHealthCheck;
use crate::api::vsphere_machine::VSphereMachine;
use crate::api::vsphere_vm::VSphereVM;
use crate::api::{Machine, VSphereCluster, VSphereDeploymentZone, VSphereFailureDomain};

/// The caches the reconcilers read.
#[derive(Clone)]
pub struct Stores {
    pub zones: Cache<VSphereDeploymentZone>,
    pub failure_domains: Cache<VSphereFailureDomain>,
    pub clusters: Cache<VSphereCluster>,
    pub machines: Cache<Machine>,
    pub nodes: Cache<Node>,
    pub machine_sets: Cache<ControlPlaneMachineSet>,
    pub health_checks: Cache<MachineHealthCheck>,
    /// Cluster API machines (ours: their CRDs are installed with the zones').
    pub vsphere_machines: Cache<VSphereMachine>,
    pub vsphere_vms: Cache<VSphereVM>,
    /// Cluster API's Machines and Clusters (what a VSphereMachine is made from, and the pause):
    /// absent ([`Cache::is_served`]) where Cluster API is not installed.
    pub capi_machines: Cache<CapiMachine>,
    pub capi_clusters: Cache<CapiCluster>,
    /// VSphereClusterIdentities (cluster-scoped, ours): what a cluster's identityRef names is
    /// looked up here, not fetched per sweep.
    pub identities: Cache<VSphereClusterIdentity>,
}

fn by_name<K: Resource>(objects: Vec<K>) -> std::collections::BTreeMap<String, K> {
    objects
        .into_iter()
        .map(|o| (o.meta().name.clone().unwrap_or_default(), o))
        .collect()
}

/// A cache as the readiness check sees it, whatever its kind.
pub trait Loading: Send + Sync {
    /// The kind, for "still loading" messages.
    fn kind(&self) -> String;
    /// Whether the initial list is in.
    fn is_synced(&self) -> bool;
    /// Resolves when the initial list is in (false if the watch is gone for good).
    fn wait_synced(&self) -> BoxFuture<'_, bool>;
}

impl<K> Loading for Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    fn kind(&self) -> String {
        K::kind(&()).into_owned()
    }

    fn is_synced(&self) -> bool {
        Cache::is_synced(self)
    }

    fn wait_synced(&self) -> BoxFuture<'_, bool> {
        Box::pin(Cache::wait_synced(self))
    }
}

impl Stores {
    /// Every cache: what the readiness checks iterate.
    pub fn each(&self) -> [&dyn Loading; 12] {
        [
            &self.zones,
            &self.failure_domains,
            &self.clusters,
            &self.machines,
            &self.nodes,
            &self.machine_sets,
            &self.health_checks,
            &self.vsphere_machines,
            &self.vsphere_vms,
            &self.capi_machines,
            &self.capi_clusters,
            &self.identities,
        ]
    }

    /// The zones that decode, by name (what the machine planners look names up in).
    pub fn zones_by_name(&self) -> std::collections::BTreeMap<String, VSphereDeploymentZone> {
        by_name(self.zones.valid())
    }

    /// The failure domains that decode, by name.
    pub fn failure_domains_by_name(
        &self,
    ) -> std::collections::BTreeMap<String, VSphereFailureDomain> {
        by_name(self.failure_domains.valid())
    }

    /// Whether every cache has its initial list.
    pub fn all_synced(&self) -> bool {
        self.each().iter().all(|c| c.is_synced())
    }

    /// The kinds whose caches have not loaded yet.
    pub fn not_synced(&self) -> Vec<String> {
        self.each()
            .iter()
            .filter(|c| !c.is_synced())
            .map(|c| c.kind())
            .collect()
    }

    /// Resolves when every cache has its initial list (false if a watch is gone for good).
    pub async fn wait_synced(&self) -> bool {
        for cache in self.each() {
            if !cache.wait_synced().await {
                return false;
            }
        }
        true
    }
}
