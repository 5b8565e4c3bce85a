//! Running the controllers: one watch per kind into the shared caches, the controllers started
//! once every cache has its initial list, a bounded drain on shutdown, and leadership terms.
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Resource;
use kube::core::DeserializeGuard;
use kube::runtime::controller::Controller;

use super::cache::Cache;
use super::stores::Stores;
use super::watch::{skip_status_only_changes, skip_unchanged, watch_kind, watch_optional_kind};
use super::{
    Context, Health, Shared, Shutdown, capi_machine, cluster, cluster_identity, cpms, entry,
    leader, machine, mhc, startup, storage_migration, zone,
};
use k8s_openapi::api::core::v1::Node;

use crate::api::capi_core::{CapiCluster, CapiMachine};
use crate::api::control_plane_machine_set::ControlPlaneMachineSet;
use crate::api::machine_health_check::MachineHealthCheck;
use crate::api::vsphere_machine::VSphereMachine;
use crate::api::vsphere_vm::VSphereVM;
use crate::api::{
    Machine, VSphereCluster, VSphereClusterIdentity, VSphereDeploymentZone, VSphereFailureDomain,
};

/// After shutdown, how long in-flight reconciles get to finish before they are aborted: within
/// the pod's 30 s grace period, leaving time to release the lease and log out of vCenter.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// Wait for every cache's initial list, saying now and then which are still loading; false
/// when a watch is gone for good.
async fn wait_for_caches(stores: &Stores) -> bool {
    let wait = stores.wait_synced();
    tokio::pin!(wait);
    loop {
        tokio::select! {
            synced = &mut wait => return synced,
            () = tokio::time::sleep(Duration::from_secs(10)) => {
                tracing::info!(loading = ?stores.not_synced(), "waiting for the caches before starting the controllers");
            }
        }
    }
}

/// Run `work` to its end, but give it at most `limit` once `shutdown` fires: a reconcile stuck
/// on an unresponsive vCenter must not outlive the pod's grace period. Dropping `work` aborts
/// what is still running. Returns whether it finished in time.
pub async fn drain_within(
    work: impl Future<Output = ()>,
    shutdown: Shutdown,
    limit: Duration,
) -> bool {
    tokio::select! {
        () = work => true,
        () = async {
            shutdown.wait().await;
            tokio::time::sleep(limit).await;
        } => false,
    }
}

/// Marks the caches unsynced when a term's controllers end, however they end (also when the
/// term is aborted because the lease was lost).
struct Unsynced(Arc<Health>);

impl Drop for Unsynced {
    fn drop(&mut self) {
        self.0.set_synced(false);
    }
}

/// Run the controllers (zones, clusters, identities, machines, sets, checks) until `shutdown`, then let in-flight reconciles finish
/// (at most [`DRAIN_TIMEOUT`]). The controllers start once every cache has its initial list;
/// `shared.health` is marked synced then. Dropping the future aborts everything at once.
pub async fn run_controllers(shared: &Shared, shutdown: Shutdown) {
    let client = shared.client.clone();
    let mut tasks = tokio::task::JoinSet::new();
    let _unsynced = Unsynced(shared.health.clone());
    // What a watch refused before its first answer tells (see `startup`).
    let first = startup::FirstAnswer::new(&shared.server, shared.health.clone());

    // One watch per kind; the triggers are subscribed before the watches start.
    let (zone_deleted, deleted_zones) = futures::channel::mpsc::unbounded();
    let (zone_store, [zone_trigger, zone_to_clusters, zone_to_sets]) =
        watch_kind::<VSphereDeploymentZone, 3>(&client, &first, Some(zone_deleted), &mut tasks);
    let (fd_store, [fd_trigger]) =
        watch_kind::<VSphereFailureDomain, 1>(&client, &first, None, &mut tasks);
    let (cluster_store, [cluster_trigger]) =
        watch_kind::<VSphereCluster, 1>(&client, &first, None, &mut tasks);
    let (machine_store, [machine_trigger, machine_to_sets, machine_to_checks]) =
        watch_kind::<Machine, 3>(&client, &first, None, &mut tasks);
    let (check_deleted, deleted_checks) = futures::channel::mpsc::unbounded();
    let (check_store, [check_trigger]) =
        watch_kind::<MachineHealthCheck, 1>(&client, &first, Some(check_deleted), &mut tasks);
    // A deleted check has no reconcile to clean up after it (it carries no finalizer, as
    // upstream's): its gauges go when the watch sees it go, or its alerts would fire forever.
    let metrics = shared.metrics.clone();
    tasks.spawn(deleted_checks.for_each(move |h| {
        metrics.health_check_gone(&super::cache::display_name(h.meta()));
        futures::future::ready(())
    }));
    let (set_store, [set_trigger]) =
        watch_kind::<ControlPlaneMachineSet, 1>(&client, &first, None, &mut tasks);
    let (node_store, [node_to_checks, node_to_machines]) =
        watch_kind::<Node, 2>(&client, &first, None, &mut tasks);
    let (vsm_store, [vsm_trigger]) =
        watch_kind::<VSphereMachine, 1>(&client, &first, None, &mut tasks);
    let (vm_deleted, deleted_vms) = futures::channel::mpsc::unbounded();
    let (vm_store, [vm_trigger, vm_to_machines]) =
        watch_kind::<VSphereVM, 2>(&client, &first, Some(vm_deleted), &mut tasks);
    // Identities: a cluster's identityRef is looked up in this cache (`credentials`), not
    // fetched on every sweep.
    let (identity_store, [identity_trigger, identity_to_clusters]) =
        watch_kind::<VSphereClusterIdentity, 2>(&client, &first, None, &mut tasks);
    // Cluster API's Machines and Clusters, when Cluster API is installed: what VSphereMachines
    // are made from, read from these caches rather than fetched on every reconcile.
    let (capi_machines, [capi_machine_trigger]) =
        watch_optional_kind::<CapiMachine, 1>(&client, &mut tasks);
    let (capi_clusters, [capi_cluster_trigger]) =
        watch_optional_kind::<CapiCluster, 1>(&client, &mut tasks);

    let stores = Stores {
        zones: Cache::over(zone_store.clone()),
        failure_domains: Cache::over(fd_store),
        clusters: Cache::over(cluster_store.clone()),
        machines: Cache::over(machine_store.clone()),
        nodes: Cache::over(node_store),
        machine_sets: Cache::over(set_store.clone()),
        health_checks: Cache::over(check_store.clone()),
        vsphere_machines: Cache::over(vsm_store.clone()),
        vsphere_vms: Cache::over(vm_store.clone()),
        capi_machines: capi_machines.clone(),
        capi_clusters: capi_clusters.clone(),
        identities: Cache::over(identity_store.clone()),
    };
    // Nothing is reconciled before every cache has loaded. (Until the controllers start,
    // the subscriptions buffer; a full buffer only holds a watch back, never a cache's
    // readiness, which is set before the initial list is passed on.)
    let synced = tokio::select! {
        synced = wait_for_caches(&stores) => synced,
        () = shutdown.clone().wait() => false,
    };
    if !synced {
        tasks.shutdown().await;
        return;
    }
    tracing::info!("caches synced");
    shared.health.set_synced(true);
    // The vCenter long polls wake machines through these (see `machine::long_poll`).
    let (machine_wake, machine_woken) = futures::channel::mpsc::unbounded();
    let (vm_wake, vm_woken) = futures::channel::mpsc::unbounded();
    let wakers = machine::long_poll::Wakers {
        machines: machine_wake,
        vms: vm_wake,
    };
    let mut ctx = Context::new(shared, stores.clone());
    ctx.long_polls =
        machine::long_poll::LongPolls::new(shared.polling.clone(), Some(wakers.clone()));
    let ctx = Arc::new(ctx);
    // A Node's arrival wakes the machines waiting for it (see `machine::node_join`).
    tasks.spawn(machine::node_join::wake_on_nodes(
        node_to_machines,
        stores.machines.store(),
        ctx.clone(),
        wakers,
    ));

    let sets_for_zone = stores.machine_sets.store();
    let zones_for_fd = stores.zones.store();
    let zone_controller = entry::run(
        zone::CONTROLLER,
        Controller::for_shared_stream(
            skip_status_only_changes(zone_trigger, zone_store.clone()),
            zone_store,
        )
        .watches_shared_stream(
            fd_trigger,
            move |fd: Arc<DeserializeGuard<VSphereFailureDomain>>| {
                zone::zones_using(
                    &zones_for_fd.state(),
                    &fd.meta().name.clone().unwrap_or_default(),
                )
            },
        ),
        zone::reconcile,
        zone::error_policy,
        ctx.clone(),
        &shutdown,
    );

    // Zone changes and deletions both wake the clusters concerned.
    let zone_events = futures::stream::select(zone_to_clusters, deleted_zones);
    let clusters_for_zone = stores.clusters.store();
    let clusters_for_identity = stores.clusters.store();
    let default_zone_selector = ctx.default_zone_selector.clone();
    let cluster_controller = entry::run(
        cluster::CONTROLLER,
        Controller::for_shared_stream(
            skip_status_only_changes(cluster_trigger, cluster_store.clone()),
            cluster_store,
        )
        .watches_shared_stream(
            zone_events,
            move |z: Arc<DeserializeGuard<VSphereDeploymentZone>>| {
                cluster::clusters_concerned(
                    &clusters_for_zone.state(),
                    &z,
                    default_zone_selector.as_ref(),
                )
            },
        )
        .watches_shared_stream(
            skip_status_only_changes(identity_to_clusters, identity_store.clone()),
            move |id: Arc<DeserializeGuard<VSphereClusterIdentity>>| {
                cluster::clusters_naming_identity(&clusters_for_identity.state(), &id)
            },
        ),
        cluster::reconcile,
        cluster::error_policy,
        ctx.clone(),
        &shutdown,
    );

    let machine_controller = entry::run(
        machine::CONTROLLER,
        Controller::for_shared_stream(
            skip_status_only_changes(machine_trigger, machine_store.clone()),
            machine_store,
        )
        .reconcile_on(machine_woken),
        machine::reconcile,
        machine::error_policy,
        ctx.clone(),
        &shutdown,
    );

    // A set is woken by its own changes and by those of the machines it owns.
    let vm_controller = entry::run(
        machine::VM_CONTROLLER,
        Controller::for_shared_stream(
            skip_status_only_changes(vm_trigger, vm_store.clone()),
            vm_store,
        )
        .reconcile_on(vm_woken),
        machine::reconcile_vsphere_vm,
        machine::vsphere_vm_error_policy,
        ctx.clone(),
        &shutdown,
    );

    // A VSphereVM's status (written by the sweep) is what its VSphereMachine reports: every
    // change of it wakes the owner, and so does its deletion (the owner's finalizer waits for it).
    // Its Machine's changes (bootstrap data ready, failure domain) wake it at once, and so do
    // its Cluster's that a pass reads (pause, infrastructure ready, control plane initialized;
    // the Cluster's other status changes are many and do not).
    let vm_events = futures::stream::select(vm_to_machines, deleted_vms);
    let vsms_for_cluster = stores.vsphere_machines.store();
    let vsm_controller = entry::run(
        capi_machine::CONTROLLER,
        Controller::for_shared_stream(
            skip_status_only_changes(vsm_trigger, vsm_store.clone()),
            vsm_store,
        )
        .watches_shared_stream(vm_events, |vm: Arc<DeserializeGuard<VSphereVM>>| {
            capi_machine::owner_of(&vm)
        })
        .watches_shared_stream(
            skip_status_only_changes(capi_machine_trigger, capi_machines.store()),
            |m: Arc<DeserializeGuard<CapiMachine>>| capi_machine::infrastructure_of(&m),
        )
        .watches_shared_stream(
            skip_unchanged(
                capi_cluster_trigger,
                capi_clusters.store(),
                capi_machine::cluster_fingerprint,
            ),
            move |c: Arc<DeserializeGuard<CapiCluster>>| {
                capi_machine::machines_of_cluster(&vsms_for_cluster.state(), &c)
            },
        ),
        capi_machine::reconcile,
        capi_machine::error_policy,
        ctx.clone(),
        &shutdown,
    );

    let set_controller = entry::run(
        cpms::CONTROLLER,
        Controller::for_shared_stream(
            skip_status_only_changes(set_trigger, set_store.clone()),
            set_store,
        )
        .watches_shared_stream(machine_to_sets, |m: Arc<DeserializeGuard<Machine>>| {
            m.0.as_ref().map(cpms::sets_owning).unwrap_or_default()
        })
        .watches_shared_stream(
            zone_to_sets,
            move |z: Arc<DeserializeGuard<VSphereDeploymentZone>>| {
                cpms::sets_naming(
                    &sets_for_zone.state(),
                    &z.meta().name.clone().unwrap_or_default(),
                )
            },
        ),
        cpms::reconcile,
        cpms::error_policy,
        ctx.clone(),
        &shutdown,
    );

    // A check is woken by its own changes and by those of Machines and Nodes it may judge.
    let checks_for_machine = stores.health_checks.store();
    let checks_for_node = stores.health_checks.store();
    let check_controller = entry::run(
        mhc::CONTROLLER,
        Controller::for_shared_stream(
            skip_status_only_changes(check_trigger, check_store.clone()),
            check_store,
        )
        .watches_shared_stream(
            machine_to_checks,
            move |m: Arc<DeserializeGuard<Machine>>| {
                mhc::checks_in(&checks_for_machine.state(), m.meta().namespace.as_deref())
            },
        )
        .watches_shared_stream(node_to_checks, move |_n: Arc<DeserializeGuard<Node>>| {
            mhc::checks_in(&checks_for_node.state(), None)
        }),
        mhc::reconcile,
        mhc::error_policy,
        ctx.clone(),
        &shutdown,
    );

    let identity_controller = entry::run(
        cluster_identity::CONTROLLER,
        Controller::for_shared_stream(
            skip_status_only_changes(identity_trigger, identity_store.clone()),
            identity_store,
        ),
        cluster_identity::reconcile,
        cluster_identity::error_policy,
        ctx.clone(),
        &shutdown,
    );

    tracing::info!("controllers started");
    // Objects stored as v1beta1 by an earlier release are rewritten once per term (a no-op
    // after the first, one read per CRD).
    let migration = storage_migration::run(shared.client.clone(), shutdown.clone());
    let controllers = async {
        futures::join!(
            migration,
            zone_controller,
            cluster_controller,
            machine_controller,
            vm_controller,
            vsm_controller,
            set_controller,
            check_controller,
            identity_controller
        );
    };
    if !drain_within(controllers, shutdown, DRAIN_TIMEOUT).await {
        tracing::warn!(
            limit = ?DRAIN_TIMEOUT,
            "reconciles still running after shutdown; aborted"
        );
    }
    tasks.shutdown().await;
    tracing::info!("controllers stopped");
}

/// Run the controllers until `shutdown`: under the Lease when `lease` is set (only while
/// holding it, back to standby when it is lost, released on shutdown), else at once.
pub async fn controllers_under_lease(
    shared: Shared,
    lease: Option<leader::LeaseSettings>,
    shutdown: Shutdown,
) {
    match lease {
        None => run_controllers(&shared, shutdown).await,
        Some(settings) => {
            let elector = leader::LeaderElector::new(shared.client.clone(), settings);
            let health = shared.health.clone();
            leader::lead(elector, health, shutdown, |term| {
                let shared = shared.clone();
                async move { run_controllers(&shared, term).await }
            })
            .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::shutdown;

    #[tokio::test]
    async fn the_drain_is_bounded_after_shutdown_only() {
        let (trigger, signal) = shutdown::channel();
        // Without shutdown, work runs to its end, however long past the limit.
        let finished = drain_within(
            tokio::time::sleep(Duration::from_millis(300)),
            signal.clone(),
            Duration::from_millis(50),
        )
        .await;
        assert!(finished);
        // After shutdown, it gets the limit and is dropped.
        let started = tokio::time::Instant::now();
        let stop = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            trigger.trigger();
        };
        let (finished, ()) = tokio::join!(
            drain_within(
                tokio::time::sleep(Duration::from_secs(3600)),
                signal,
                Duration::from_millis(200)
            ),
            stop
        );
        assert!(!finished);
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_secs(60), "{took:?}");
    }
}
