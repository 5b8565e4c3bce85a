//! Local mode: run the zone and cluster reconcilers (machines: [`super::machines`]) over the in-process store to a fixed point
//! against real vCenters, exactly as the in-cluster controllers would, and say what changed.
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};

use super::store::{LOCAL_CONTROLLER_NAMESPACE, Store};
use crate::api::VSphereCluster;
use crate::plan::cluster::lifecycle::{self, Owner, Stage};
use crate::plan::cluster::{apply as apply_cluster, plan_cluster};
use crate::plan::credentials::{
    IdentitySources, ManagerIdentity, Principal, ServerTrust, principal, resolve,
};
use crate::plan::machine::observe::machine_server;
use crate::plan::zone::{Step, ZoneVerdict, plan_zone};
use crate::plan::zone_status::{apply_zone_status, with_owner};
use crate::reconcile::zones::reconcile_server;
use crate::vcenter::model::tags::TagCatalog;
use crate::vcenter::session::SessionCache;
use crate::vcenter::stats::Snapshot;
use crate::vcenter::{Credentials, Endpoint, TlsPolicy};

/// How to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--server`: where to connect for zones on that host (its scheme and port win).
    pub server: Option<Endpoint>,
    /// `--connect-to NAME=URL`: host named in the manifests → where to connect instead.
    pub aliases: Vec<(String, Endpoint)>,
    /// `--username`/`--password` (with the TLS flags), if given.
    pub manager: Option<ManagerIdentity>,
    /// The TLS flags: trust for any server whose VSphereCluster has no thumbprint.
    pub tls: TlsPolicy,
    pub dry_run: bool,
    pub now: Time,
    /// `--simulate-nodes`: a Ready Node for each powered-on machine VM, as a kubelet would.
    pub simulate_nodes: bool,
    /// `--default-failure-domain-selector`: the zones of a VSphereCluster that sets no
    /// `failureDomainSelector` (`None`: none, as CAPV).
    pub default_zone_selector: Option<LabelSelector>,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Report {
    /// Zone name → verdict.
    pub verdicts: BTreeMap<String, ZoneVerdict>,
    pub applied: Vec<Step>,
    /// Changes still wanted (dry run: what would be done).
    pub pending: Vec<Step>,
    pub failed: Vec<(Step, String)>,
    pub round_trips: Snapshot,
}

impl Report {
    /// Every zone ready and nothing left to change.
    pub fn converged(&self) -> bool {
        self.verdicts.values().all(ZoneVerdict::ready) && self.failed.is_empty()
    }
}

/// Where to connect for a server named in the manifests: its `--connect-to` URL, else
/// `--server` when that names the same host (so `server: 127.0.0.1` in a manifest reaches a
/// simulator on a random port), else the named server itself.
pub(crate) fn connect_to(zone_server: &str, opts: &Options) -> Result<Endpoint, String> {
    let own = Endpoint::parse(zone_server).map_err(|e| format!("spec.server: {e}"))?;
    let host = own.host();
    if let Some((_, to)) = opts
        .aliases
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(&host))
    {
        return Ok(to.clone());
    }
    Ok(match &opts.server {
        Some(s) if s.host() == host => s.clone(),
        _ => own,
    })
}

/// Every vCenter the manifests name, as they name it: zones', clusters', machines' (their own
/// or their zone's), VSphereMachines' and the Infrastructure's failure domains'.
pub fn named_servers(store: &Store) -> BTreeSet<String> {
    let zones = store.zones.values().filter_map(|z| z.spec.server.clone());
    let clusters = store
        .clusters
        .values()
        .filter_map(|c| c.spec.server().map(str::to_string));
    let machines = store
        .machines
        .values()
        .filter_map(|m| machine_server(m, &store.zones));
    let capv = store
        .vsphere_machines
        .values()
        .map(|m| &m.spec.clone)
        .chain(
            store
                .machine_templates
                .values()
                .filter_map(|t| t.spec.template.spec.as_ref())
                .map(|s| &s.clone),
        )
        .filter_map(|c| c.server.clone());
    let infra = store
        .infrastructures
        .values()
        .flat_map(|i| i.vsphere_failure_domains())
        .map(|d| d.server.clone());
    zones
        .chain(clusters)
        .chain(machines)
        .chain(capv)
        .chain(infra)
        .filter(|s| !s.is_empty())
        .collect()
}

/// `--server` names a host no manifest names, and no machine falls back to it: it is never
/// used, and the run would go to the manifests' own servers (and likely fail to connect there)
/// without a word. Says so, naming the servers the manifests use and the `--connect-to` that
/// reaches one of them at `--server`'s address.
pub fn unused_server(store: &Store, opts: &Options) -> Option<String> {
    let server = opts.server.as_ref()?;
    let named = named_servers(store);
    let used = named
        .iter()
        .any(|n| connect_to(n, opts).as_ref() == Ok(server));
    let fallback = store
        .machines
        .values()
        .any(|m| machine_server(m, &store.zones).is_none());
    if used || fallback || named.is_empty() {
        return None;
    }
    let first = named.iter().next()?;
    let first = Endpoint::parse(first).map_or_else(|_| first.clone(), |e| e.host());
    Some(format!(
        "--server (or VSPHERE_SERVER) {server} is not used: no manifest names {}; they name {}. \
         To connect to {server} wherever they name {first}, pass --connect-to {first}={server}",
        server.host(),
        named.iter().cloned().collect::<Vec<_>>().join(", "),
    ))
}

/// The client for `endpoint` (where local mode connects for the server the manifests name
/// `named`: `--connect-to`) acting as `principal` (`plan::credentials::principal`, as in the
/// cluster): a machine as its own cluster or credentialsSecret, a zone as its identityRef, else
/// the command line's credentials. Credentials are looked up for the name the manifests use
/// (machine-api-operator's Secret keys are `<that name>.username`).
pub(crate) fn client_for(
    named: &str,
    endpoint: &str,
    principal: &Principal,
    store: &Store,
    opts: &Options,
    sessions: &SessionCache,
) -> Result<crate::vcenter::Client, String> {
    let id = resolve(
        principal,
        named,
        &local_sources(store),
        opts.manager.as_ref(),
        &ServerTrust::uniform(opts.tls.clone()),
    )?;
    sessions
        .client(
            endpoint,
            &Credentials::new(id.username, id.password),
            id.tls,
        )
        .map_err(|e| e.to_string())
}

/// Whether `principal` ends up with the command line's credentials on `endpoint` (an OpenShift
/// machine whose credentialsSecret the manifests do not give, a cluster without identityRef):
/// such machines share one sweep, one bulk read.
pub(crate) fn acts_as_manager(
    named: &str,
    principal: &Principal,
    store: &Store,
    opts: &Options,
) -> bool {
    resolve(
        principal,
        named,
        &local_sources(store),
        opts.manager.as_ref(),
        &ServerTrust::uniform(opts.tls.clone()),
    )
    .is_ok_and(|id| id.source == crate::plan::credentials::principal::MANAGER_SOURCE)
}

/// Identity sources from the manifests: their Secrets and VSphereClusterIdentities. Local mode
/// has no Namespace objects, so a namespace has no labels: an identity allowing every namespace
/// (`selector: {}`) is usable, one selecting by label is refused with its reason.
fn local_sources(store: &Store) -> IdentitySources<'_> {
    IdentitySources {
        secrets: &store.secrets,
        identities: &store.identities,
        namespaces: &[],
        controller_namespace: LOCAL_CONTROLLER_NAMESPACE,
    }
}

/// Where a VSphereCluster stands in local mode (`plan::cluster::lifecycle`, as the controller).
/// There is no API server to find the owner Cluster in: an ownerReference to a Cluster
/// (cluster.x-k8s.io) stands for it — the manifest's, or the one local mode sets for a Cluster
/// given in the manifests (`super::capi::own_infra_clusters`); only the VSphereCluster's pause
/// annotation is honoured. Owned, with its
/// failure domains settled, the cluster's own identity gets a vCenter session and the cluster
/// becomes ready, as in the cluster. Deletion is not played here.
async fn cluster_stage(
    c: &VSphereCluster,
    publication: &crate::plan::cluster::Publication,
    store: &Store,
    opts: &Options,
    sessions: &SessionCache,
) -> Stage {
    let owner = match lifecycle::owner_cluster_ref(c) {
        Some((_, name)) => Owner::Found { name, paused: None },
        None => Owner::None,
    };
    if let Some(stage) = lifecycle::stage_before_vcenter(&c.metadata, &owner, publication) {
        return stage;
    }
    Stage::Connected(check_cluster_vcenter(c, store, opts, sessions).await)
}

/// The cluster's own identity (else the command line's credentials) and a working session:
/// `Ok(version)` or why not.
async fn check_cluster_vcenter(
    c: &VSphereCluster,
    store: &Store,
    opts: &Options,
    sessions: &SessionCache,
) -> Result<String, String> {
    let server = c.spec.server.clone();
    let endpoint = connect_to(&server, opts)?;
    let client = client_for(
        &server,
        &endpoint.to_string(),
        &Principal::cluster(c),
        store,
        opts,
        sessions,
    )?;
    client.login().await.map_err(|e| e.to_string())?;
    client.current_time().await.map_err(|e| e.to_string())?;
    let content = client.service_content().await.map_err(|e| e.to_string())?;
    Ok(content.about.version.clone())
}

/// Reconcile everything in `store`, updating statuses and owner references in place.
pub async fn run(
    store: &mut Store,
    opts: &Options,
    sessions: &SessionCache,
    progress: &mut dyn FnMut(&str),
) -> Report {
    let before = sessions.stats().snapshot();
    let mut report = Report::default();

    // Group zones by the vCenter they connect to and whose credentials they use.
    let mut groups: BTreeMap<String, (Endpoint, Principal, Vec<String>)> = BTreeMap::new();
    // The name the first zone of a group gives its server (the credentials' lookup key).
    let mut named: BTreeMap<String, String> = BTreeMap::new();
    for (name, z) in &store.zones {
        let server = z.spec.server.clone().unwrap_or_default();
        let principal = principal::for_zone(z);
        match connect_to(&server, opts) {
            Ok(ep) => groups
                .entry({
                    let k = format!("{ep}\n{}", principal.key());
                    named.entry(k.clone()).or_insert_with(|| server.clone());
                    k
                })
                .or_insert_with(|| (ep.clone(), principal, Vec::new()))
                .2
                .push(name.clone()),
            Err(msg) => {
                let fd = z
                    .spec
                    .failure_domain_name()
                    .and_then(|n| store.failure_domains.get(n));
                report
                    .verdicts
                    .insert(name.clone(), plan_zone(z, fd, Err(&msg)));
            }
        }
    }

    for (group, (endpoint, principal, names)) in &groups {
        let server = named.get(group).cloned().unwrap_or_default();
        progress(&format!(
            "reconciling {} zone(s) on {endpoint}",
            names.len()
        ));
        let zones: Vec<_> = names.iter().filter_map(|n| store.zones.get(n)).collect();
        let client = client_for(
            &server,
            &endpoint.to_string(),
            principal,
            store,
            opts,
            sessions,
        );
        match client {
            Err(msg) => {
                for z in &zones {
                    let fd = z
                        .spec
                        .failure_domain_name()
                        .and_then(|n| store.failure_domains.get(n));
                    report.verdicts.insert(
                        z.metadata.name.clone().unwrap_or_default(),
                        plan_zone(z, fd, Err(&msg)),
                    );
                }
            }
            Ok(client) => {
                let mut tags = TagCatalog::default();
                let run = reconcile_server(
                    &client,
                    &zones,
                    &store.failure_domains,
                    &mut tags,
                    opts.dry_run,
                )
                .await;
                report.applied.extend(run.applied);
                report.pending.extend(run.pending);
                report.failed.extend(run.failed);
                report.verdicts.extend(run.verdicts);
            }
        }
    }

    // Statuses and owner references, as the controller would patch them.
    for (name, verdict) in &report.verdicts {
        let Some(z) = store.zones.get_mut(name) else {
            continue;
        };
        let generation = z.metadata.generation;
        let status = z.status.get_or_insert_with(Default::default);
        apply_zone_status(status, verdict, generation, &opts.now);
        if verdict.ready() {
            let z = z.clone();
            if let Some(fd) = z
                .spec
                .failure_domain_name()
                .and_then(|n| store.failure_domains.get_mut(n))
                && let Some(refs) = with_owner(fd, &z)
            {
                fd.metadata.owner_references = Some(refs);
            }
        }
    }
    let zones: Vec<_> = store.zones.values().cloned().collect();
    let keys: Vec<String> = store.clusters.keys().cloned().collect();
    for k in keys {
        let Some(c) = store.clusters.get(&k).cloned() else {
            continue;
        };
        let publication = plan_cluster(&c, &zones, opts.default_zone_selector.as_ref());
        let stage = cluster_stage(&c, &publication, store, opts, sessions).await;
        let generation = c.metadata.generation;
        if let Some(c) = store.clusters.get_mut(&k) {
            let status = c.status.get_or_insert_with(Default::default);
            apply_cluster(status, &publication, generation, &opts.now);
            lifecycle::apply(status, &stage, generation, &opts.now);
        }
    }
    report.round_trips = sessions.stats().snapshot().since(&before);
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(server: Option<&str>, aliases: &[(&str, &str)]) -> Options {
        Options {
            server: server.map(|s| Endpoint::parse(s).unwrap()),
            aliases: aliases
                .iter()
                .map(|(n, u)| (n.to_string(), Endpoint::parse(u).unwrap()))
                .collect(),
            manager: None,
            tls: TlsPolicy::default(),
            dry_run: false,
            now: Time(jiff::Timestamp::UNIX_EPOCH),
            simulate_nodes: false,
            default_zone_selector: None,
        }
    }

    /// `--server` on a host no manifest names is said to be unused, naming the manifests'
    /// servers and the `--connect-to` that would use it; on a named host it is used, and
    /// silent.
    #[test]
    fn a_server_no_manifest_names_is_said_to_be_unused() {
        let mut store = Store::default();
        let zone: crate::api::VSphereDeploymentZone = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereDeploymentZone", "metadata": {"name": "zone-a"},
            "spec": {"server": "127.0.0.1", "failureDomain": "fd",
                "placementConstraint": {"resourcePool": "rp"}}
        }))
        .unwrap();
        store.zones.insert("zone-a".into(), zone);
        let why = unused_server(&store, &opts(Some("vcenter.example.com"), &[])).unwrap();
        assert_eq!(
            why,
            "--server (or VSPHERE_SERVER) https://vcenter.example.com is not used: no manifest \
             names vcenter.example.com; they name 127.0.0.1. To connect to \
             https://vcenter.example.com wherever they name 127.0.0.1, pass --connect-to \
             127.0.0.1=https://vcenter.example.com"
        );
        assert_eq!(
            unused_server(&store, &opts(Some("http://127.0.0.1:8989"), &[])),
            None
        );
        assert_eq!(unused_server(&store, &opts(None, &[])), None);
    }

    /// A `--connect-to` alias wins (case-insensitively), then `--server` on the same host, then
    /// the server the manifest names.
    #[test]
    fn where_a_named_server_is_reached() {
        let o = opts(
            Some("http://127.0.0.1:9000/sdk"),
            &[("vc.example.com", "http://127.0.0.1:8989/sdk")],
        );
        let to = |s: &str| connect_to(s, &o).unwrap().to_string();
        assert_eq!(to("VC.example.com"), "http://127.0.0.1:8989");
        assert_eq!(to("127.0.0.1"), "http://127.0.0.1:9000");
        assert_eq!(to("other.example.com"), "https://other.example.com");
    }
}
