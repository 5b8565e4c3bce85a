//! Local mode as the IPAM provider: each pass binds the IP address claims the machines made to
//! addresses from the `InClusterIPPool` / `GlobalInClusterIPPool` objects of the manifests
//! (`plan::ipam::bind` decides which), so static IPs work on a laptop with no IPAM provider
//! running. A claim that cannot be bound (pool unknown, exhausted, invalid) gets `Ready=False`
//! with the reason and a message naming the pool, which its Machine repeats.
use k8s_openapi::api::core::v1::LocalObjectReference;

use super::cluster::LocalCluster;
use crate::api::conditions::{CapiCondition, ConditionUpdate, set_capi_condition, severity};
use crate::api::ipam::IpAddressClaimStatus;
use crate::plan::ipam::bind;

/// The claims' condition type (CAPI's `ReadyCondition`).
const READY: &str = "Ready";

/// Bind every unbound claim that can be; true when something changed (then persisted).
pub fn bind_claims(cluster: &LocalCluster) -> bool {
    let now = cluster.now.clone();
    let mut changed = false;
    {
        let mut s = cluster.lock();
        let keys: Vec<String> = s.ip_claims.keys().cloned().collect();
        for k in keys {
            let Some(claim) = s.ip_claims.get(&k).cloned() else {
                continue;
            };
            if claim.bound_address().is_some() || claim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let mut status = claim.status.clone().unwrap_or_default();
            match bind(&claim, &s.ip_pools, &s.ip_addresses) {
                Ok(address) => {
                    let name = address.metadata.name.clone().unwrap_or_default();
                    s.ip_addresses.insert(k.clone(), address);
                    status.address_ref = Some(LocalObjectReference { name });
                    set_condition(&mut status, &ConditionUpdate::true_(READY), &now);
                }
                Err(f) => {
                    let update =
                        ConditionUpdate::false_(READY, f.reason, severity::ERROR, &f.message);
                    set_condition(&mut status, &update, &now);
                }
            }
            if claim.status.as_ref() != Some(&status)
                && let Some(c) = s.ip_claims.get_mut(&k)
            {
                c.status = Some(status);
                changed = true;
            }
        }
    }
    if changed {
        // A failure is kept in `persist_error`, which ends the run with it.
        let _ = cluster.persist();
    }
    changed
}

fn set_condition(
    status: &mut IpAddressClaimStatus,
    update: &ConditionUpdate<'_>,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) {
    let conditions: &mut Vec<CapiCondition> = status.conditions.get_or_insert_with(Vec::new);
    set_capi_condition(conditions, update, now);
}
