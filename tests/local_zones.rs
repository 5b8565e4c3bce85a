//! Local mode end to end against a live vcsim: zones of every type, with and without
//! autoConfigure, reach the right status, and vCenter is read back through the client to check
//! what was (and was not) changed. Where vcsim differs from real vCenter the test says so.
#[path = "support/admin_setup.rs"]
mod admin_setup;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use admin_setup::{attach, tag};
use secrecy::SecretString;
use vcsim::{FaultKind, FaultSpec, Vcsim};
use vsphere_provider::api::conditions::{find_capi, find_meta};
use vsphere_provider::api::infrastructure::v1beta2::common::DeprecatedStatus;
use vsphere_provider::local::driver::{self, Options, Report};
use vsphere_provider::local::store::Store;
use vsphere_provider::plan::credentials::ManagerIdentity;
use vsphere_provider::plan::zone::Step;
use vsphere_provider::vcenter::model::cluster::{
    ClusterGroup, GroupChange, RuleChange, VmHostRule,
};
use vsphere_provider::vcenter::session::SessionCache;
use vsphere_provider::vcenter::stats::CallKind;
use vsphere_provider::vcenter::{
    Client, ClientOptions, Credentials, Endpoint, MoRef, Stats, TlsPolicy, Wanted,
};

fn admin(sim: &Vcsim) -> Client {
    Client::new(
        sim.url(),
        Credentials::new("admin", SecretString::from("secret")),
        ClientOptions::default(),
    )
    .unwrap()
}

struct Run {
    store: Store,
    report: Report,
}

async fn reconcile(sim: &Vcsim, dir: &tempfile::TempDir, dry_run: bool) -> Run {
    reconcile_with(sim, dir, dry_run, "secret").await
}

async fn reconcile_with(
    sim: &Vcsim,
    dir: &tempfile::TempDir,
    dry_run: bool,
    password: &str,
) -> Run {
    let mut store = Store::load(&[dir.path().to_path_buf()]).unwrap_or_else(|e| panic!("{e}"));
    let opts = Options {
        aliases: Vec::new(),
        server: Some(Endpoint::parse(sim.url()).unwrap()),
        manager: Some(ManagerIdentity {
            username: "admin".into(),
            password: SecretString::from(password.to_string()),
            servers: vsphere_provider::plan::credentials::ServerScope::Any,
        }),
        tls: TlsPolicy::System,
        dry_run,
        now: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
        simulate_nodes: false,
        default_zone_selector: None,
    };
    let sessions = SessionCache::new(Stats::default(), ClientOptions::default());
    let report = driver::run(&mut store, &opts, &sessions, &mut |_| {}).await;
    sessions.logout_all().await;
    Run { store, report }
}

/// `NAME.yaml` with a failure domain and a deployment zone.
fn write_zone(dir: &tempfile::TempDir, name: &str, fd: &str, dz: &str) -> PathBuf {
    write(dir, &format!("{name}.yaml"), &format!("{fd}---\n{dz}"))
}

/// `NAME.yaml`: HostGroup zone `name` (zone tag `name` in `category`, groups `name-vms` and
/// `name-hosts`) in compute cluster `cluster`, which is its region (tag `cluster` in
/// k8s-region); autoConfigure on both sides.
fn write_auto_host_group_zone(dir: &tempfile::TempDir, name: &str, cluster: &str, category: &str) {
    let (vms, hosts) = (format!("{name}-vms"), format!("{name}-hosts"));
    write_zone(
        dir,
        name,
        &failure_domain(
            name,
            (cluster, "ComputeCluster", "k8s-region", true),
            (name, "HostGroup", category, true),
            Some(cluster),
            Some((&vms, &hosts)),
            "",
        ),
        &deployment_zone(name, name, None, None),
    );
}

fn write(dir: &tempfile::TempDir, name: &str, yaml: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, yaml).unwrap();
    p
}

#[allow(clippy::too_many_arguments)]
fn failure_domain(
    name: &str,
    region: (&str, &str, &str, bool),
    zone: (&str, &str, &str, bool),
    cluster: Option<&str>,
    hosts: Option<(&str, &str)>,
    extra_topology: &str,
) -> String {
    let cc = cluster
        .map(|c| format!("    computeCluster: {c}\n"))
        .unwrap_or_default();
    let h = hosts
        .map(|(vg, hg)| format!("    hosts:\n      vmGroupName: {vg}\n      hostGroupName: {hg}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereFailureDomain
metadata:
  name: {name}
spec:
  region:
    name: {}
    type: {}
    tagCategory: {}
    autoConfigure: {}
  zone:
    name: {}
    type: {}
    tagCategory: {}
    autoConfigure: {}
  topology:
    datacenter: DC0
{cc}{h}{extra_topology}",
        region.0, region.1, region.2, region.3, zone.0, zone.1, zone.2, zone.3
    )
}

fn deployment_zone(name: &str, fd: &str, pool: Option<&str>, folder: Option<&str>) -> String {
    let mut pc = String::new();
    if let Some(p) = pool {
        pc.push_str(&format!("    resourcePool: {p}\n"));
    }
    if let Some(f) = folder {
        pc.push_str(&format!("    folder: {f}\n"));
    }
    if pc.is_empty() {
        pc.push_str("    folder: vm\n");
    }
    format!(
        "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata:
  name: {name}
spec:
  server: 127.0.0.1
  failureDomain: {fd}
  placementConstraint:
{pc}"
    )
}

fn zone_condition(run: &Run, zone: &str, t: &str) -> (String, String, String) {
    let z = &run.store.zones[zone];
    let c = find_capi(
        vsphere_provider::api::infrastructure::v1beta2::common::DeprecatedStatus::v1beta1_conditions(
            &z.status.as_ref().unwrap().deprecated,
        ),
        t,
    )
    .unwrap_or_else(|| panic!("zone {zone} has no {t} condition"));
    (
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    )
}

fn ready(run: &Run, zone: &str) -> Option<bool> {
    run.store.zones[zone].status.as_ref().and_then(|s| s.ready)
}

fn assert_ready(run: &Run, zone: &str) {
    assert_eq!(
        ready(run, zone),
        Some(true),
        "{zone}: {:?}",
        run.report.verdicts.get(zone)
    );
}

fn writes(run: &Run) -> u64 {
    run.report.round_trips.kind(CallKind::Write)
}

/// Names and attachments as vCenter holds them, read independently.
async fn tag_state(c: &Client) -> (Vec<String>, Vec<(String, String)>) {
    let mut cats = Vec::new();
    let mut tags = Vec::new();
    for id in c.list_categories().await.unwrap() {
        let cat = c.get_category(&id).await.unwrap();
        for t in c.list_tags_for_category(&id).await.unwrap() {
            tags.push((cat.name.clone(), c.get_tag(&t).await.unwrap().name));
        }
        cats.push(cat.name);
    }
    cats.sort();
    tags.sort();
    (cats, tags)
}

async fn attached(c: &Client, path: &str) -> BTreeSet<String> {
    let inv = c.inventory().await.unwrap();
    let m = inv.at_path(path).unwrap().moref.clone();
    let mut names = BTreeSet::new();
    for id in c.list_attached_tags(&m).await.unwrap() {
        let t = c.get_tag(&id).await.unwrap();
        let cat = c.get_category(&t.category_id).await.unwrap();
        names.insert(format!("{}/{}", cat.name, t.name));
    }
    names
}

#[tokio::test]
async fn datacenter_and_compute_cluster_zones_verify_without_changes() {
    let sim = Vcsim::builder().clusters(2).hosts(1).pools(1).start().await;
    let c = admin(&sim);
    tag(&c, "k8s-region", "region-a", &["Datacenter"], &["/DC0"]).await;
    tag(
        &c,
        "k8s-zone",
        "zone-a",
        &["ClusterComputeResource"],
        &["/DC0/host/DC0_C0"],
    )
    .await;
    tag(
        &c,
        "k8s-zone",
        "zone-b",
        &["ClusterComputeResource"],
        &["/DC0/host/DC0_C1"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    for (n, z, cl) in [("a", "zone-a", "DC0_C0"), ("b", "zone-b", "DC0_C1")] {
        write_zone(
            &dir,
            n,
            &failure_domain(
                n,
                ("region-a", "Datacenter", "k8s-region", false),
                (z, "ComputeCluster", "k8s-zone", false),
                Some(cl),
                None,
                "    datastore: LocalDS_0\n    networks:\n    - VM Network\n",
            ),
            &deployment_zone(n, n, Some(&format!("{cl}_RP1")), Some("vm")),
        );
    }
    let run = reconcile(&sim, &dir, false).await;
    for z in ["a", "b"] {
        assert_eq!(ready(&run, z), Some(true), "{:?}", run.report.verdicts[z]);
        for t in [
            "VCenterAvailable",
            "PlacementConstraintMet",
            "VSphereFailureDomainValidated",
            "Ready",
        ] {
            assert_eq!(zone_condition(&run, z, t).0, "True", "{z} {t}");
        }
        let v2 = run.store.zones[z].status.as_ref().unwrap();
        let fdv = find_meta(v2.conditions.as_deref().unwrap(), "FailureDomainValidated").unwrap();
        assert_eq!(
            (fdv.status.as_str(), fdv.reason.as_str()),
            ("True", "Validated")
        );
        // The failure domain is owned by its zone.
        let fd = &run.store.failure_domains[z];
        let owners = fd.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners[0].kind, "VSphereDeploymentZone");
        assert_eq!(owners[0].name, z);
    }
    assert_eq!(writes(&run), 0, "verification writes nothing");
}

#[tokio::test]
async fn upstream_e2e_failure_domain_manifest_adapted_to_vcsim() {
    // CAPV test/e2e/data/.../failure-domains.yaml (v1.15.0) with its variables substituted for
    // the vcsim topology, plus the VSphereCluster failureDomainSelector patch. Tags are
    // pre-created by the admin, as in CAPV's e2e (named after the datacenter and cluster).
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let c = admin(&sim);
    tag(
        &c,
        "k8s-region",
        "DC0",
        &["Datacenter", "ClusterComputeResource"],
        &["/DC0"],
    )
    .await;
    tag(
        &c,
        "k8s-zone",
        "DC0_C0",
        &["Datacenter", "ClusterComputeResource"],
        &["/DC0/host/DC0_C0"],
    )
    .await;
    let upstream = include_str!("fixtures/capv-e2e-failure-domains.v1beta1.yaml")
        .replace("${VSPHERE_DATACENTER}", "DC0")
        .replace("${VSPHERE_COMPUTE_CLUSTER}", "DC0_C0")
        .replace("${VSPHERE_SERVER}", "127.0.0.1")
        .replace(
            "${VSPHERE_RESOURCE_POOL}",
            "/DC0/host/DC0_C0/Resources/DC0_C0_RP1",
        );
    let dir = tempfile::tempdir().unwrap();
    write(&dir, "failure-domains.yaml", &upstream);
    write(
        &dir,
        "cluster.yaml",
        "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereCluster
metadata:
  name: e2e
  namespace: default
spec:
  server: 127.0.0.1
  failureDomainSelector: {}
",
    );
    let run = reconcile(&sim, &dir, false).await;
    assert_ready(&run, "ownerrefs-finalizers");
    let cluster = &run.store.clusters["default/e2e"];
    let fds = cluster
        .status
        .as_ref()
        .unwrap()
        .failure_domains
        .as_ref()
        .unwrap();
    assert_eq!(fds.len(), 1);
    assert_eq!(fds[0].name, "ownerrefs-finalizers");
    assert_eq!(fds[0].control_plane, Some(true));
    let cond = find_capi(
        DeprecatedStatus::v1beta1_conditions(&cluster.status.as_ref().unwrap().deprecated),
        "FailureDomainsAvailable",
    )
    .unwrap();
    assert_eq!(cond.status, "True");
    let fd = &run.store.failure_domains["ownerrefs-finalizers"];
    assert_eq!(
        fd.metadata.owner_references.as_ref().unwrap()[0].name,
        "ownerrefs-finalizers"
    );
}

#[tokio::test]
async fn auto_configure_creates_tags_and_a_second_run_writes_nothing() {
    let sim = Vcsim::builder().clusters(2).hosts(1).pools(1).start().await;
    let dir = tempfile::tempdir().unwrap();
    for (n, z, cl) in [("a", "zone-a", "DC0_C0"), ("b", "zone-b", "DC0_C1")] {
        write_zone(
            &dir,
            n,
            &failure_domain(
                n,
                ("region-1", "Datacenter", "k8s-region", true),
                (z, "ComputeCluster", "k8s-zone", true),
                Some(cl),
                None,
                "",
            ),
            &deployment_zone(n, n, Some(&format!("{cl}_RP1")), None),
        );
    }
    // Dry run first: lists the changes, makes none.
    let dry = reconcile(&sim, &dir, true).await;
    assert_eq!(writes(&dry), 0);
    let listed: Vec<String> = dry.report.pending.iter().map(|s| s.to_string()).collect();
    assert!(
        listed.contains(&"create tag category k8s-zone for ClusterComputeResource".to_string()),
        "{listed:?}"
    );
    assert!(
        listed.contains(&"attach tag region-1 (k8s-region) to /DC0".to_string()),
        "{listed:?}"
    );
    assert_eq!(
        listed
            .iter()
            .filter(|s| s.contains("region-1 (k8s-region) to /DC0"))
            .count(),
        1,
        "a region shared by two zones is attached once"
    );
    let c = admin(&sim);
    assert!(
        c.list_categories().await.unwrap().is_empty(),
        "dry run changed vCenter"
    );

    let run = reconcile(&sim, &dir, false).await;
    assert_eq!(
        ready(&run, "a"),
        Some(true),
        "{:?}",
        run.report.verdicts["a"]
    );
    assert_eq!(ready(&run, "b"), Some(true));
    let (cats, tags) = tag_state(&c).await;
    assert_eq!(cats, ["k8s-region", "k8s-zone"]);
    assert_eq!(
        tags,
        [
            ("k8s-region".to_string(), "region-1".to_string()),
            ("k8s-zone".to_string(), "zone-a".to_string()),
            ("k8s-zone".to_string(), "zone-b".to_string())
        ]
    );
    assert_eq!(
        attached(&c, "/DC0").await,
        BTreeSet::from(["k8s-region/region-1".to_string()])
    );
    assert_eq!(
        attached(&c, "/DC0/host/DC0_C0").await,
        BTreeSet::from(["k8s-zone/zone-a".to_string()])
    );
    assert_eq!(
        attached(&c, "/DC0/host/DC0_C1").await,
        BTreeSet::from(["k8s-zone/zone-b".to_string()])
    );
    let cat = c
        .get_category(&c.list_categories().await.unwrap()[0])
        .await
        .unwrap();
    assert_eq!(cat.cardinality, "MULTIPLE");

    let again = reconcile(&sim, &dir, false).await;
    assert_eq!(
        writes(&again),
        0,
        "second run: {}",
        again.report.round_trips.summary()
    );
    assert!(again.report.applied.is_empty());
    assert_eq!(ready(&again, "a"), Some(true));
}

#[tokio::test]
async fn host_group_zone_with_auto_configure_builds_groups_and_rule_from_tagged_hosts() {
    let sim = Vcsim::builder().clusters(1).hosts(3).start().await;
    let c = admin(&sim);
    // The admin tags the hosts of the zone; autoConfigure builds the rest.
    tag(
        &c,
        "k8s-host-zone",
        "rack-1",
        &["HostSystem"],
        &["/DC0/host/DC0_C0/DC0_C0_H0", "/DC0/host/DC0_C0/DC0_C0_H1"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    write_auto_host_group_zone(&dir, "rack-1", "DC0_C0", "k8s-host-zone");
    let run = reconcile(&sim, &dir, false).await;
    assert_ready(&run, "rack-1");
    let inv = c.inventory().await.unwrap();
    let cluster = inv.at_path("/DC0/host/DC0_C0").unwrap().moref.clone();
    let cfg = c.cluster_config(&cluster).await.unwrap();
    let hosts = match cfg.group("rack-1-hosts") {
        Some(ClusterGroup::Host { hosts, .. }) => hosts.clone(),
        other => panic!("{other:?}"),
    };
    let names: BTreeSet<String> = hosts
        .iter()
        .map(|h| inv.get(h).unwrap().name.clone())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["DC0_C0_H0".to_string(), "DC0_C0_H1".to_string()])
    );
    assert!(matches!(
        cfg.group("rack-1-vms"),
        Some(ClusterGroup::Vm { .. })
    ));
    let rules: Vec<_> = cfg.vm_host_rules().collect();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].name, "rack-1-vms-rack-1-hosts-affinity");
    assert!(rules[0].enabled && rules[0].mandatory);
    assert_eq!(rules[0].affine_host_group.as_deref(), Some("rack-1-hosts"));
    // The region tag went on the cluster.
    assert!(
        attached(&c, "/DC0/host/DC0_C0")
            .await
            .contains("k8s-region/DC0_C0")
    );

    let again = reconcile(&sim, &dir, false).await;
    assert_eq!(writes(&again), 0, "{}", again.report.round_trips.summary());
    let cfg2 = c.cluster_config(&cluster).await.unwrap();
    assert_eq!(cfg2.groups.len(), 2, "no duplicate groups");
    assert_eq!(cfg2.rules.len(), 1, "no duplicate rules");
}

/// A HostGroup zone whose host group does not exist and cannot be built (no host carries the
/// zone tag) gets no VM-host rule: vCenter holds a rule's groups by name only, so one naming a
/// missing group is refused or bound to nothing. Tagging a host later builds the group, then
/// the rule, once.
#[tokio::test]
async fn host_group_zone_gets_no_rule_until_its_host_group_can_be_built() {
    let sim = Vcsim::builder().clusters(1).hosts(2).start().await;
    let c = admin(&sim);
    let dir = tempfile::tempdir().unwrap();
    write_auto_host_group_zone(&dir, "rack-1", "DC0_C0", "k8s-host-zone");
    let inv = c.inventory().await.unwrap();
    let cluster = inv.at_path("/DC0/host/DC0_C0").unwrap().moref.clone();
    let run = reconcile(&sim, &dir, false).await;
    assert_eq!(ready(&run, "rack-1"), Some(false));
    let planned_rules: Vec<String> = run
        .report
        .applied
        .iter()
        .chain(run.report.failed.iter().map(|(s, _)| s))
        .filter(|s| matches!(s, Step::CreateVmHostRule { .. }))
        .map(|s| s.to_string())
        .collect();
    assert!(planned_rules.is_empty(), "{planned_rules:?}");
    let (status, reason, message) = zone_condition(&run, "rack-1", "VSphereFailureDomainValidated");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "HostsMisconfigured")
    );
    assert!(
        message.contains(
            "tag hosts of /DC0/host/DC0_C0 with zone tag rack-1 (category k8s-host-zone), \
             or create host group rack-1-hosts in /DC0/host/DC0_C0"
        ),
        "{message}"
    );
    // Read back: the VM group and the tag exist, no host group, no rule.
    let cfg = c.cluster_config(&cluster).await.unwrap();
    assert!(cfg.group("rack-1-hosts").is_none(), "{cfg:?}");
    assert!(
        matches!(cfg.group("rack-1-vms"), Some(ClusterGroup::Vm { .. })),
        "{cfg:?}"
    );
    assert!(
        cfg.rules.is_empty(),
        "a rule naming a missing group: {cfg:?}"
    );
    // Nothing more to do until someone acts: no writes, still no rule.
    let again = reconcile(&sim, &dir, false).await;
    assert_eq!(writes(&again), 0, "{}", again.report.round_trips.summary());
    assert!(c.cluster_config(&cluster).await.unwrap().rules.is_empty());

    // The admin tags one host (the tag autoConfigure created): group, then rule.
    let h0 = inv
        .at_path("/DC0/host/DC0_C0/DC0_C0_H0")
        .unwrap()
        .moref
        .clone();
    attach(
        &c,
        "k8s-host-zone",
        "rack-1",
        &["/DC0/host/DC0_C0/DC0_C0_H0"],
    )
    .await;
    let run = reconcile(&sim, &dir, false).await;
    assert_ready(&run, "rack-1");
    let shown: Vec<String> = run.report.applied.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        shown,
        [
            "create host group rack-1-hosts in /DC0/host/DC0_C0 with 1 host(s)",
            "create VM-host rule rack-1-vms-rack-1-hosts-affinity in /DC0/host/DC0_C0: VMs of rack-1-vms must run on hosts of rack-1-hosts",
        ]
    );
    let cfg = c.cluster_config(&cluster).await.unwrap();
    assert!(
        matches!(cfg.group("rack-1-hosts"), Some(ClusterGroup::Host { hosts, .. }) if hosts == std::slice::from_ref(&h0)),
        "{cfg:?}"
    );
    let rules: Vec<_> = cfg.vm_host_rules().collect();
    assert_eq!(rules.len(), 1, "{cfg:?}");
    assert_eq!(rules[0].affine_host_group.as_deref(), Some("rack-1-hosts"));
    let again = reconcile(&sim, &dir, false).await;
    assert_eq!(writes(&again), 0, "{}", again.report.round_trips.summary());
    assert_eq!(c.cluster_config(&cluster).await.unwrap().rules.len(), 1);
}

/// Pre-created groups and rule, the way CAPV's tests set them up with govc.
async fn precreate_host_groups(c: &Client, enabled: bool, with_vm_group: bool) -> MoRef {
    let inv = c.inventory().await.unwrap();
    let cluster = inv
        .find(Wanted::ComputeCluster, "DC0_C0", None)
        .unwrap()
        .moref
        .clone();
    let hosts: Vec<MoRef> = inv
        .hosts_of(&cluster)
        .iter()
        .take(2)
        .map(|h| h.moref.clone())
        .collect();
    let mut groups = vec![GroupChange::Add(ClusterGroup::Host {
        name: "hg-a".into(),
        hosts,
    })];
    if with_vm_group {
        groups.push(GroupChange::Add(ClusterGroup::Vm {
            name: "vg-a".into(),
            vms: vec![],
        }));
    }
    let t = c.reconfigure_cluster(&cluster, &[], &groups).await.unwrap();
    c.wait_task(&t, Duration::from_secs(10)).await.unwrap();
    let rule = VmHostRule {
        name: "rule-a".into(),
        enabled,
        mandatory: true,
        vm_group: "vg-a".into(),
        affine_host_group: Some("hg-a".into()),
        ..VmHostRule::default()
    };
    let t = c
        .reconfigure_cluster(&cluster, &[RuleChange::Add(rule)], &[])
        .await
        .unwrap();
    c.wait_task(&t, Duration::from_secs(10)).await.unwrap();
    cluster
}

fn host_group_manifests(dir: &tempfile::TempDir) {
    write_zone(
        dir,
        "hg",
        &failure_domain(
            "hg",
            ("region-a", "Datacenter", "k8s-region", false),
            ("zone-hg", "HostGroup", "k8s-zone", false),
            Some("DC0_C0"),
            Some(("vg-a", "hg-a")),
            "",
        ),
        &deployment_zone("hg", "hg", None, None),
    );
}

#[tokio::test]
async fn host_group_zone_without_auto_configure_verifies_groups_rule_and_host_tags() {
    let sim = Vcsim::builder().clusters(1).hosts(3).start().await;
    let c = admin(&sim);
    precreate_host_groups(&c, true, true).await;
    tag(&c, "k8s-region", "region-a", &["Datacenter"], &["/DC0"]).await;
    // Only one of the two group hosts carries the zone tag: not ready, naming the other.
    tag(
        &c,
        "k8s-zone",
        "zone-hg",
        &["HostSystem"],
        &["/DC0/host/DC0_C0/DC0_C0_H0"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    host_group_manifests(&dir);
    let run = reconcile(&sim, &dir, false).await;
    assert_eq!(ready(&run, "hg"), Some(false));
    let (status, reason, message) = zone_condition(&run, "hg", "VSphereFailureDomainValidated");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "FailureDomainZoneMisconfigured")
    );
    assert!(
        message.contains("/DC0/host/DC0_C0/DC0_C0_H1") && message.contains("zone-hg"),
        "{message}"
    );

    // Tag the second host: ready, nothing written by us.
    attach(&c, "k8s-zone", "zone-hg", &["/DC0/host/DC0_C0/DC0_C0_H1"]).await;
    let run = reconcile(&sim, &dir, false).await;
    assert_ready(&run, "hg");
    assert_eq!(writes(&run), 0);
}

#[tokio::test]
async fn disabled_rules_and_missing_vm_groups_are_reported() {
    let sim = Vcsim::builder().clusters(1).hosts(2).start().await;
    let c = admin(&sim);
    precreate_host_groups(&c, false, false).await;
    tag(&c, "k8s-region", "region-a", &["Datacenter"], &["/DC0"]).await;
    tag(
        &c,
        "k8s-zone",
        "zone-hg",
        &["HostSystem"],
        &["/DC0/host/DC0_C0/DC0_C0_H0", "/DC0/host/DC0_C0/DC0_C0_H1"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    host_group_manifests(&dir);
    let run = reconcile(&sim, &dir, false).await;
    assert_eq!(ready(&run, "hg"), Some(false));
    let (_, reason, message) = zone_condition(&run, "hg", "VSphereFailureDomainValidated");
    // Upstream's reason for the hosts topology; which group and which rule is in the message.
    assert_eq!(reason, "HostsMisconfigured", "{message}");
    assert!(
        message.contains("VM group vg-a not found in /DC0/host/DC0_C0"),
        "{message}"
    );
    assert!(
        message.contains("rule-a") && message.contains("disabled"),
        "both problems are named: {message}"
    );
}

#[tokio::test]
async fn every_misconfiguration_names_the_object_and_causes_no_hot_loop() {
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let c = admin(&sim);
    tag(&c, "k8s-region", "region-a", &["Datacenter"], &["/DC0"]).await;
    tag(
        &c,
        "k8s-zone",
        "zone-a",
        &["ClusterComputeResource"],
        &["/DC0/host/DC0_C0"],
    )
    .await;
    tag(
        &c,
        "other-category",
        "zone-x",
        &["ClusterComputeResource"],
        &["/DC0/host/DC0_C0"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ok_region = ("region-a", "Datacenter", "k8s-region", false);
    let ok_zone = ("zone-a", "ComputeCluster", "k8s-zone", false);
    let cases: Vec<(&str, String, String, &str, &str, &str)> = vec![
        (
            "pool",
            failure_domain("pool", ok_region, ok_zone, Some("DC0_C0"), None, ""),
            deployment_zone("pool", "pool", Some("NoSuchPool"), None),
            "PlacementConstraintMet",
            "ResourcePoolNotFound",
            "NoSuchPool",
        ),
        (
            "folder",
            failure_domain("folder", ok_region, ok_zone, Some("DC0_C0"), None, ""),
            deployment_zone("folder", "folder", None, Some("/DC0/vm/missing")),
            "PlacementConstraintMet",
            "FolderNotFound",
            "/DC0/vm/missing",
        ),
        (
            "ds",
            failure_domain(
                "ds",
                ok_region,
                ok_zone,
                Some("DC0_C0"),
                None,
                "    datastore: NoDS\n",
            ),
            deployment_zone("ds", "ds", None, None),
            "VSphereFailureDomainValidated",
            "DatastoreNotFound",
            "NoDS",
        ),
        (
            "net",
            failure_domain(
                "net",
                ok_region,
                ok_zone,
                Some("DC0_C0"),
                None,
                "    networks:\n    - NoNet\n",
            ),
            deployment_zone("net", "net", None, None),
            "VSphereFailureDomainValidated",
            "NetworkNotFound",
            "NoNet",
        ),
        (
            "cluster",
            failure_domain("cluster", ok_region, ok_zone, Some("NoCluster"), None, ""),
            deployment_zone("cluster", "cluster", None, None),
            "VSphereFailureDomainValidated",
            "ComputeClusterNotFound",
            "NoCluster",
        ),
        (
            "tag",
            failure_domain(
                "tag",
                ok_region,
                ("zone-zz", "ComputeCluster", "k8s-zone", false),
                Some("DC0_C0"),
                None,
                "",
            ),
            deployment_zone("tag", "tag", None, None),
            "VSphereFailureDomainValidated",
            "FailureDomainZoneMisconfigured",
            "zone-zz",
        ),
        (
            "wrongcat",
            failure_domain(
                "wrongcat",
                ok_region,
                ("zone-x", "ComputeCluster", "k8s-zone", false),
                Some("DC0_C0"),
                None,
                "",
            ),
            deployment_zone("wrongcat", "wrongcat", None, None),
            "VSphereFailureDomainValidated",
            "FailureDomainZoneMisconfigured",
            "other-category",
        ),
        (
            "nofd",
            String::new(),
            deployment_zone("nofd", "does-not-exist", None, None),
            "VSphereFailureDomainValidated",
            "FailureDomainNotFound",
            "does-not-exist",
        ),
    ];
    for (name, fd, dz, _, _, _) in &cases {
        write_zone(&dir, name, fd, dz);
    }
    let run = reconcile(&sim, &dir, false).await;
    for (name, _, _, t, reason, needle) in &cases {
        assert_eq!(ready(&run, name), Some(false), "{name}");
        let (status, got, message) = zone_condition(&run, name, t);
        assert_eq!(
            (status.as_str(), got.as_str()),
            ("False", *reason),
            "{name}: {message}"
        );
        assert!(
            message.contains(needle),
            "{name}: {message:?} should name {needle}"
        );
        let (rs, rr, _) = zone_condition(&run, name, "Ready");
        assert_eq!(
            (rs.as_str(), rr.as_str()),
            ("False", *reason),
            "{name}: Ready summarises"
        );
    }
    // The new style carries upstream's v1beta2 reason for the same class.
    let v2 = run.store.zones["wrongcat"]
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| c.iter().find(|c| c.type_ == "FailureDomainValidated"))
        .map(|c| (c.status.clone(), c.reason.clone()))
        .unwrap();
    assert_eq!(v2, ("False".to_string(), "ZoneMisconfigured".to_string()));
    assert_eq!(writes(&run), 0);
    // One shared gather for all eight zones: the cost does not grow with failures.
    assert!(
        run.report.round_trips.total() < 20,
        "{}",
        run.report.round_trips.summary()
    );
}

#[tokio::test]
async fn wrong_credentials_and_unreachable_servers_become_conditions() {
    let sim = Vcsim::builder()
        .clusters(1)
        .hosts(1)
        .credentials("admin", "secret")
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    write_zone(
        &dir,
        "a",
        &failure_domain(
            "a",
            ("r", "Datacenter", "k8s-region", false),
            ("z", "ComputeCluster", "k8s-zone", false),
            Some("DC0_C0"),
            None,
            "",
        ),
        &deployment_zone("a", "a", None, None),
    );
    let run = reconcile_with(&sim, &dir, false, "wrong-pw-555").await;
    let (status, reason, message) = zone_condition(&run, "a", "VCenterAvailable");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "VCenterUnreachable")
    );
    assert!(message.contains("rejected the login"), "{message}");
    // The condition names neither the password nor the user name (F11: the account may be
    // the manager's or another tenant's).
    assert!(!message.contains("wrong-pw-555"));
    assert!(!message.contains("admin"), "no user name: {message}");
    assert_eq!(
        sim.stats().await.soap("Login"),
        1,
        "one login attempt, no storm"
    );

    drop(sim);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let mut store = Store::load(&[dir.path().to_path_buf()]).unwrap();
    let opts = Options {
        aliases: Vec::new(),
        server: Some(Endpoint::parse(&format!("http://127.0.0.1:{port}")).unwrap()),
        manager: Some(ManagerIdentity {
            username: "admin".into(),
            password: SecretString::from("secret"),
            servers: vsphere_provider::plan::credentials::ServerScope::Any,
        }),
        tls: TlsPolicy::System,
        dry_run: false,
        now: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
        simulate_nodes: false,
        default_zone_selector: None,
    };
    let sessions = SessionCache::new(Stats::default(), ClientOptions::default());
    let report = driver::run(&mut store, &opts, &sessions, &mut |_| {}).await;
    let v = &report.verdicts["a"];
    let (reason, message) = v.first_problem().unwrap();
    assert_eq!(reason, "VCenterUnreachable");
    assert!(message.to_lowercase().contains("refused"), "{message}");
}

#[tokio::test]
async fn a_run_killed_midway_converges_on_rerun_without_duplicates() {
    let sim = Vcsim::builder().clusters(2).hosts(2).start().await;
    let c = admin(&sim);
    tag(
        &c,
        "k8s-hosts",
        "rack-b",
        &["HostSystem"],
        &["/DC0/host/DC0_C1/DC0_C1_H0"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    for (n, z, cl) in [("a", "zone-a", "DC0_C0"), ("b", "zone-b", "DC0_C1")] {
        write_zone(
            &dir,
            n,
            &failure_domain(
                n,
                ("region-1", "Datacenter", "k8s-region", true),
                (z, "ComputeCluster", "k8s-zone", true),
                Some(cl),
                None,
                "",
            ),
            &deployment_zone(n, n, None, None),
        );
    }
    write_auto_host_group_zone(&dir, "rack-b", "DC0_C1", "k8s-hosts");
    // The connection drops at the second attach and at the group reconfiguration: a process
    // killed in the middle of autoConfigure leaves a partial state.
    sim.inject(
        FaultSpec::new(FaultKind::Drop)
            .method("~action=attach")
            .count(1),
    )
    .await;
    sim.inject(
        FaultSpec::new(FaultKind::Drop)
            .method("ReconfigureComputeResource_Task")
            .count(1),
    )
    .await;
    let first = reconcile(&sim, &dir, false).await;
    assert!(
        !first.report.failed.is_empty(),
        "the faults hit: {:?}",
        first.report.applied
    );
    assert!(!first.report.converged());

    for _ in 0..2 {
        let run = reconcile(&sim, &dir, false).await;
        for z in ["a", "b", "rack-b"] {
            assert_ready(&run, z);
        }
    }
    let (cats, tags) = tag_state(&c).await;
    let unique: BTreeSet<_> = cats.iter().collect();
    assert_eq!(unique.len(), cats.len(), "duplicate categories: {cats:?}");
    let unique: BTreeSet<_> = tags.iter().collect();
    assert_eq!(unique.len(), tags.len(), "duplicate tags: {tags:?}");
    assert_eq!(attached(&c, "/DC0").await.len(), 1);
    let inv = c.inventory().await.unwrap();
    let c1 = inv.at_path("/DC0/host/DC0_C1").unwrap().moref.clone();
    let cfg = c.cluster_config(&c1).await.unwrap();
    let names: Vec<&str> = cfg.groups.iter().map(|g| g.name()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(cfg.rules.len(), 1);
}

#[tokio::test]
async fn reconcile_cli_prints_tables_and_exit_codes() {
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let dir = tempfile::tempdir().unwrap();
    write_zone_a(&dir);
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vsphere-provider"))
            .arg("reconcile")
            .args(args)
            .env("VSPHERE_USERNAME", "admin")
            .env("VSPHERE_PASSWORD", "secret")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let path = dir.path().to_str().unwrap();
    let (code, out, err) = cli(&["-f", path, "--server", sim.url(), "--dry-run"]);
    assert_eq!(
        code,
        Some(1),
        "dry run leaves the zone unconfigured: {out}{err}"
    );
    assert!(
        out.contains("would: create tag category k8s-region"),
        "{out}"
    );
    let (code, out, err) = cli(&["-f", path, "--server", sim.url()]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("NAME") && out.contains("FAILURE-DOMAIN") && out.contains("REASON"),
        "{out}"
    );
    assert!(out.contains("1/1 zone(s) ready"), "{out}");
    assert!(
        out.contains("done: attach tag zone-a (k8s-zone) to /DC0/host/DC0_C0"),
        "{out}"
    );
    let (code, out, err) = cli(&["-f", path, "--server", sim.url(), "-o", "yaml"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("kind: VSphereDeploymentZone") && out.contains("ready: true"),
        "{out}"
    );
    assert!(err.contains("0 vCenter change(s) made"), "{err}");
    let (code, out, _) = cli(&["-f", path, "--server", sim.url(), "-o", "json"]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kind"], "List");

    // Input errors: exit 2, nothing sent.
    write(
        &dir,
        "bad.yaml",
        "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: VSphereDeploymentZone\nmetadata:\n  name: bad\nspec:\n  server: 127.0.0.1\n",
    );
    sim.reset_stats().await;
    let (code, _, err) = cli(&["-f", path, "--server", sim.url()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("bad.yaml"), "names the file: {err}");
    assert_eq!(sim.stats().await.total, 0, "nothing was sent to vCenter");
}

/// Zone `a` on vcsim's `DC0_C0`, region and zone tags auto-configured.
fn write_zone_a(dir: &tempfile::TempDir) {
    write_zone(
        dir,
        "a",
        &failure_domain(
            "a",
            ("region-1", "Datacenter", "k8s-region", true),
            ("zone-a", "ComputeCluster", "k8s-zone", true),
            Some("DC0_C0"),
            None,
            "",
        ),
        &deployment_zone("a", "a", Some("DC0_C0_RP1"), None),
    );
}

/// A VSphereCluster without `failureDomainSelector` publishes no zones (CAPV's rule) unless the
/// manager is given `--default-failure-domain-selector`: what lets the clusters of a ClusterClass
/// that cannot carry a selector (CAPV's own) use the zones. A bad selector is a usage error that
/// names the flag, with nothing sent.
#[tokio::test]
async fn a_cluster_without_a_selector_gets_zones_only_from_the_default_selector() {
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let dir = tempfile::tempdir().unwrap();
    write_zone_a(&dir);
    write(
        &dir,
        "cluster.yaml",
        &format!(
            "apiVersion: infrastructure.cluster.x-k8s.io/v1beta2\nkind: VSphereCluster\nmetadata:\n  name: c1\n  namespace: default\nspec:\n  server: {}\n",
            sim.url()
        ),
    );
    let path = dir.path().to_str().unwrap();
    let cli = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vsphere-provider"))
            .args(["reconcile", "-f", path, "--server", sim.url(), "-o", "json"])
            .args(extra)
            .env("VSPHERE_USERNAME", "admin")
            .env("VSPHERE_PASSWORD", "secret")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        (out.status.code(), stdout, stderr)
    };
    let failure_domains = |out: &str| -> serde_json::Value {
        let list: serde_json::Value = serde_json::from_str(out).unwrap();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["kind"] == "VSphereCluster")
            .map(|c| c["status"]["failureDomains"].clone())
            .unwrap_or_else(|| panic!("no VSphereCluster in {out}"))
    };
    let (code, out, err) = cli(&[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        failure_domains(&out).is_null(),
        "no selector, no default: nothing published: {out}"
    );
    let (code, out, err) = cli(&["--default-failure-domain-selector="]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        failure_domains(&out),
        serde_json::json!([{"name": "a", "controlPlane": true}]),
        "{out}"
    );
    let (_, out, err) = cli(&["--default-failure-domain-selector", "tier=prod"]);
    assert!(
        failure_domains(&out).is_null(),
        "the zone has no tier label: {out}{err}"
    );
    sim.reset_stats().await;
    let (code, _, err) = cli(&["--default-failure-domain-selector", "tier in (prod"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--default-failure-domain-selector") && err.contains("unbalanced '('"),
        "{err}"
    );
    assert_eq!(sim.stats().await.total, 0, "nothing was sent to vCenter");
}

/// Local mode plays the VSphereCluster's InfraCluster part as the controller does
/// (plan::cluster::lifecycle): an ownerReference to a Cluster in the manifest stands for the owner
/// (local mode loads no Cluster objects); owned, the cluster's own identity gets a session and it
/// becomes ready; without an owner it waits, saying so. (A missing identity is an input error:
/// `a_missing_identity_ref_is_an_input_error_not_the_environments_credentials`.)
#[tokio::test]
async fn local_mode_readies_owned_clusters_and_says_why_others_wait() {
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let dir = tempfile::tempdir().unwrap();
    let owner = "  ownerReferences:\n  - apiVersion: cluster.x-k8s.io/v1beta1\n    kind: Cluster\n    name: c1\n    uid: 6d1f5f4e-0000-4000-8000-000000000001\n";
    let cluster = |name: &str, owned: bool, identity: &str| {
        format!(
            "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: VSphereCluster\nmetadata:\n  name: {name}\n  namespace: default\n{}spec:\n  server: {}\n{identity}",
            if owned { owner } else { "" },
            sim.url()
        )
    };
    write(&dir, "owned.yaml", &cluster("owned", true, ""));
    write(&dir, "alone.yaml", &cluster("alone", false, ""));
    let run = reconcile(&sim, &dir, false).await;
    let status = |name: &str| {
        run.store.clusters[&format!("default/{name}")]
            .status
            .clone()
            .unwrap()
    };
    let ready_condition = |name: &str| {
        let s = status(name);
        let c = find_meta(s.conditions.as_deref().unwrap(), "Ready")
            .unwrap()
            .clone();
        (c.status, c.reason, c.message)
    };
    let owned = status("owned");
    assert_eq!(owned.initialization.unwrap().provisioned, Some(true));
    assert!(!owned.vcenter_version.unwrap_or_default().is_empty());
    assert_eq!(ready_condition("owned").0, "True");
    assert!(!status("alone").provisioned());
    assert_eq!(ready_condition("alone").1, "WaitingForClusterOwner");
}

/// A VSphereCluster whose identityRef names a Secret (or VSphereClusterIdentity) the manifests do
/// not give is an input error naming it, exit 2 with nothing sent: local mode never quietly
/// acts on vCenter with the operator's own VSPHERE_USERNAME/VSPHERE_PASSWORD instead.
#[tokio::test]
async fn a_missing_identity_ref_is_an_input_error_not_the_environments_credentials() {
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let dir = tempfile::tempdir().unwrap();
    let cluster = |name: &str, identity: &str| {
        format!(
            "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: VSphereCluster\nmetadata:\n  name: {name}\n  namespace: tenant\n  ownerReferences:\n  - apiVersion: cluster.x-k8s.io/v1beta1\n    kind: Cluster\n    name: {name}\n    uid: 6d1f5f4e-0000-4000-8000-000000000001\nspec:\n  server: {}\n  identityRef:\n{identity}",
            sim.url()
        )
    };
    write(
        &dir,
        "by-secret.yaml",
        &cluster("by-secret", "    kind: Secret\n    name: tenant-creds\n"),
    );
    write(
        &dir,
        "by-identity.yaml",
        &cluster(
            "by-identity",
            "    kind: VSphereClusterIdentity\n    name: shared\n",
        ),
    );
    sim.reset_stats().await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vsphere-provider"))
        .args(["reconcile", "--no-state", "-f"])
        .arg(dir.path())
        .args(["--server", sim.url()])
        .env("VSPHERE_USERNAME", "admin")
        .env("VSPHERE_PASSWORD", "secret")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("VSphereCluster tenant/by-secret")
            && err.contains("spec.identityRef: Secret tenant/tenant-creds")
            && err.contains("not found"),
        "{err}"
    );
    assert!(
        err.contains("VSphereCluster tenant/by-identity")
            && err.contains("spec.identityRef: VSphereClusterIdentity shared"),
        "{err}"
    );
    assert!(
        !err.contains("secret\n") && !err.contains("=secret"),
        "{err}"
    );
    assert_eq!(sim.stats().await.total, 0, "nothing was sent to vCenter");

    // Given the Secret, the same manifests reconcile with it.
    std::fs::remove_file(dir.path().join("by-identity.yaml")).unwrap();
    write(
        &dir,
        "creds.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tenant-creds\n  namespace: tenant\nstringData:\n  username: admin\n  password: secret\n",
    );
    let run = reconcile(&sim, &dir, false).await;
    assert!(
        run.store.clusters["tenant/by-secret"]
            .status
            .as_ref()
            .is_some_and(|s| s.provisioned()),
        "provisioned with the Secret's credentials"
    );
}
