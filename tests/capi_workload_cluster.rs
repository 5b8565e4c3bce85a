//! A whole Cluster API cluster on vcsim: three control plane machines over our three failure
//! domains and a worker in each, rolled out, remediated, through a domain outage, and deleted,
//! with Cluster API v1.14.2's own controllers (core, kubeadm bootstrap, kubeadm control plane) and
//! ours as processes against the real kube-apiserver (tests/support/capi_world.rs).
//!
//! What stands in for what:
//! * vcsim is the vCenter; every assertion on it reads it over raw SOAP
//!   ([`process::Readback`]), not through this crate's client.
//! * The guests: vcsim VMs run nothing, so the workload-cluster simulator (hack/workload-sim,
//!   Cluster API's own in-memory API server and etcd) watches vcsim and "boots" a powered-on VM
//!   only from the guestinfo the provider wrote: CABPK's cloud-config with `kubeadm init` makes
//!   the workload cluster at the control plane endpoint (127.0.0.1:<free port>) with the CA from
//!   the user data, `kubeadm join` adds a Node (and, for a control plane, its static pods, etcd
//!   member and API server). Its VMware Tools stand-in reports a guest IP, which the provider
//!   waits for. KCP, CABPK, CAPI's Machine controller and the MachineHealthCheck talk to that
//!   workload cluster exactly as they would to a real one (kubeconfig Secret, port-forward to
//!   etcd). Power-off makes the Node `Ready=Unknown` and unreachable; destroy removes it.
//!
//! The manifests are CAPV v1.17's default `cluster-template.yaml`, unchanged, filled by
//! `clusterctl generate cluster --from` with variables only, then given two edits an admin of
//! failure domains makes, as CAPV's own e2e does for its failure-domain flavours: the
//! VSphereCluster's `failureDomainSelector: {}` (select every zone; CAPV's
//! `vspherecluster-failuredomainselector.yaml` patch), and the template's one MachineDeployment
//! split into one per failure domain (`spec.template.spec.failureDomain`), as a ClusterClass
//! topology with a MachineDeployment per zone renders it.
//!
//! Gated on `CAPI_BIN_DIR` and `WORKLOAD_SIM_BIN`, and `#[ignore]`d: it runs as
//! hack/demo-capi.sh (`cargo test --test capi_workload_cluster -- --ignored`), one of the demos
//! hack/test.sh runs.
#[path = "support/admin_setup.rs"]
mod admin_setup;
#[path = "support/capi.rs"]
mod capi;
#[path = "support/capi_world.rs"]
mod capi_world;
#[path = "support/process.rs"]
mod process;
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/vcsim.rs"]
mod vcsim;
#[path = "support/workload_sim.rs"]
mod workload_sim;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capi::{apply_retrying, capi_bin_dir, clusterctl, free_port, text};
use capi_world::{
    ADMIN, CLUSTERS, MACHINES, World, ZONES, assert_in_zone_resized, b64, condition, generate,
    is_true, list, name_of, phase, readback, until_or, world_with, zonal,
};
use process::VmDetail;
use serde_json::{Value, json};
use workload_sim::{Workload, WorkloadSim};

const TEST: &str = "capi_workload_cluster";
const CLUSTER: &str = "wl";
const KCP: &str = "kubeadmcontrolplanes.v1beta2.controlplane.cluster.x-k8s.io";
const INFRA_V1BETA2: &str = "infrastructure.cluster.x-k8s.io/v1beta2";

/// The zone index of failure domain `zone-{i}`.
fn zone_index(fd: &str) -> usize {
    fd.strip_prefix("zone-")
        .and_then(|i| i.parse().ok())
        .unwrap_or_else(|| panic!("{fd} is not one of our zones"))
}

/// CAPV v1.17's cluster template, generated with vcsim's values, with the two edits of the
/// module doc: every zone selected, one MachineDeployment per zone.
fn manifests(w: &World, ns: &str, port: u16) -> String {
    let docs = generate(w, "cluster-template.yaml", CLUSTER, ns, port, 3, 1, &[]);
    list(zonal(docs, CLUSTER))
}

/// What a background sampler saw during a phase: the most control plane VMs in vcsim at once,
/// and the fewest healthy etcd members.
#[derive(Debug, Default, Clone)]
struct Sampled {
    samples: usize,
    max_cp_vms: usize,
    min_etcd: Option<usize>,
    etcd_low: Vec<String>,
}

/// Samples vcsim (raw SOAP) and the workload cluster every 300 ms until dropped.
struct Sampler {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Sampled>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(w: &World, workload: &Workload) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Sampled::default()));
        let readback = readback(&w.sim);
        let kubeconfig = workload.kubeconfig.clone();
        let (s, v) = (stop.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let workload = Workload { kubeconfig };
            while !s.load(Ordering::SeqCst) {
                let vms = rt.block_on(readback.vm_details());
                let cp_vms = vms.iter().filter(|v| is_control_plane_vm(&v.name)).count();
                let etcd = workload.healthy_etcd_members();
                let mut g = v.lock().unwrap();
                g.samples += 1;
                g.max_cp_vms = g.max_cp_vms.max(cp_vms);
                if let Some(e) = etcd {
                    if g.min_etcd.is_none_or(|m| e.len() < m) {
                        g.min_etcd = Some(e.len());
                    }
                    if e.len() < 2 {
                        g.etcd_low.push(format!("{e:?}"));
                    }
                }
                drop(g);
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        Sampler {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Sampled {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.seen.lock().unwrap().clone()
    }
}

/// KCP names its Machines (and so we our VMs) `<cluster>-<5 random>`; workers are
/// `<cluster>-md-<i>-…`.
fn is_control_plane_vm(name: &str) -> bool {
    name.strip_prefix(&format!("{CLUSTER}-"))
        .is_some_and(|rest| !rest.starts_with("md-"))
}

struct Run<'a> {
    w: &'a World,
    ns: String,
    sim: WorkloadSim,
}

impl Run<'_> {
    fn logs(&self) -> String {
        let events = self.sim.events();
        let tail = &events[events.len().saturating_sub(40)..];
        format!(
            "{}\n--- workload-sim (tail):\n{}",
            self.w.logs(),
            tail.join("\n")
        )
    }

    /// [`World::until`], failing at once when the simulator refuses a VM of this cluster for
    /// good (a join waiting for its control plane says "retrying"): it never becomes a Node.
    async fn until<T>(
        &self,
        what: &str,
        limit: Duration,
        mut f: impl AsyncFnMut() -> Result<T, String>,
    ) -> T {
        eprintln!("capi_workload_cluster:   waiting for {what}");
        let refused = format!("vm {CLUSTER}-");
        until_or(
            what,
            limit,
            || self.logs(),
            async || {
                if let Some(e) = self.sim.events().iter().find(|e| {
                    e.contains(&refused) && e.contains("does not boot") && !e.contains("retrying")
                }) {
                    panic!(
                        "the simulator refused a VM while waiting for {what}: {e}\n{}",
                        self.logs()
                    );
                }
                f().await
            },
        )
        .await
    }

    fn get(&self, kind: &str, name: &str) -> Option<Value> {
        self.w.find(kind, name, &self.ns)
    }

    fn machines(&self, selector: &str) -> Vec<Value> {
        self.w.get(&[MACHINES, "-n", &self.ns, "-l", selector])["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn control_plane(&self) -> Vec<Value> {
        self.machines("cluster.x-k8s.io/control-plane")
    }

    fn workers(&self) -> Vec<Value> {
        self.machines("!cluster.x-k8s.io/control-plane")
    }

    fn summary(&self) -> String {
        let m: Vec<String> = self.w.get(&[MACHINES, "-n", &self.ns])["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|m| {
                format!(
                    "{} fd={} phase={} node={} deleting={}",
                    name_of(m),
                    m["spec"]["failureDomain"],
                    m["status"]["phase"],
                    m["status"]["nodeRef"]["name"],
                    m["metadata"]["deletionTimestamp"].is_string()
                )
            })
            .collect();
        let kcp = self
            .get(KCP, CLUSTER)
            .map(|k| k["status"].clone())
            .unwrap_or_default();
        format!("Machines {m:#?}\nKCP {kcp}")
    }

    /// The workload cluster's kubeconfig, as KCP wrote it (`<cluster>-kubeconfig`).
    fn workload(&self) -> Workload {
        let secret = self
            .w
            .get(&["secret", &format!("{CLUSTER}-kubeconfig"), "-n", &self.ns]);
        let path = self.w.home.path().join("workload.kubeconfig");
        std::fs::write(&path, b64(secret["data"]["value"].as_str().unwrap())).unwrap();
        Workload { kubeconfig: path }
    }

    async fn vms(&self) -> BTreeMap<String, VmDetail> {
        readback(&self.w.sim)
            .vm_details()
            .await
            .into_iter()
            .map(|v| (v.name.clone(), v))
            .collect()
    }

    /// Every Machine `Running` with a Node, its VM in the zone of its failure domain.
    async fn assert_machines_in_their_zones(&self, machines: &[Value]) {
        let vms = self.vms().await;
        let groups = readback(&self.w.sim).vm_groups().await;
        for m in machines {
            let name = name_of(m);
            let fd = m["spec"]["failureDomain"]
                .as_str()
                .unwrap_or_else(|| panic!("{name} has no failure domain: {m}"));
            let vm = vms
                .get(&name)
                .unwrap_or_else(|| panic!("no VM {name} in vcsim"));
            assert_in_zone_resized(
                &groups,
                vm,
                zone_index(fd),
                &readback(&self.w.sim)
                    .vm_props(&vm.moref, &["config.files.vmPathName"])
                    .await,
            );
            assert_eq!(
                m["spec"]["providerID"],
                format!("vsphere://{}", vm.bios_uuid),
                "{m}"
            );
        }
    }

    /// Waits until KCP has `n` up-to-date, available control plane Machines, each Running with
    /// a Node, none deleting, and the Cluster Available.
    async fn settled(&self, what: &str, limit: Duration) -> Vec<Value> {
        self.settled_with(what, limit, true).await
    }

    /// [`Run::settled`]; `cluster_available` false skips the Cluster's Available (which also
    /// wants every MachineDeployment available).
    async fn settled_with(
        &self,
        what: &str,
        limit: Duration,
        cluster_available: bool,
    ) -> Vec<Value> {
        self.until(what, limit, async || {
            let kcp = self.get(KCP, CLUSTER).ok_or("no KCP")?;
            let cps = self.control_plane();
            let cluster = self.get(CLUSTERS, CLUSTER).ok_or("no Cluster")?;
            let running = cps
                .iter()
                .filter(|m| {
                    m["status"]["phase"] == "Running"
                        && m["status"]["nodeRef"]["name"].is_string()
                        && !m["metadata"]["deletionTimestamp"].is_string()
                })
                .count();
            if cps.len() == 3
                && running == 3
                && kcp["status"]["upToDateReplicas"] == 3
                && kcp["status"]["availableReplicas"] == 3
                && is_true(&kcp, "Available")
                && (!cluster_available || is_true(&cluster, "Available"))
            {
                Ok(cps)
            } else {
                Err(format!(
                    "{}\nCluster conditions {}",
                    self.summary(),
                    cluster["status"]["conditions"]
                ))
            }
        })
        .await
    }
}

/// The whole flow, with its progress and, at the end, `clusterctl describe cluster` and a table
/// of machines, zones, VMs and hosts (before the deletion). It runs as hack/demo-capi.sh, which
/// hack/test.sh runs with the other demos: one run of about ten minutes serves CI and a person
/// watching (with `DEMO_KEEP=1` it stops before the deletion and waits, everything running).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "ten minutes: runs as hack/demo-capi.sh, one of hack/test.sh's demos"]
async fn a_kubeadm_cluster_spreads_rolls_out_heals_survives_a_zone_and_goes() {
    scenario().await;
}

async fn scenario() {
    let (Some(capi), Some(sim_bin)) = (capi_bin_dir(), workload_sim::bin()) else {
        eprintln!(
            "skipped: CAPI_BIN_DIR and WORKLOAD_SIM_BIN are not both set (hack/test.sh sets them)"
        );
        return;
    };
    let mut t = Instant::now();
    let w = world_with(capi, true).await;
    let cp = w.cp;
    let ns = cp.namespace("workload");
    let port = free_port();
    let sim = WorkloadSim::start_for(&sim_bin, &w, port);
    let run = Run { w: &w, ns, sim };
    let ns = run.ns.clone();
    phase(
        TEST,
        &mut t,
        "clusterctl init, vcsim, four managers, workload-sim started",
    );

    w.three_ready_zones().await;
    phase(TEST, &mut t, "three zones ready");

    // --- spread
    apply_retrying(cp, &manifests(&w, &ns, port));
    let cps = run
        .settled(
            "three control plane Machines Running, KCP and the Cluster Available",
            Duration::from_secs(600),
        )
        .await;
    phase(TEST, &mut t, "control plane of three up");
    let cluster = run.get(CLUSTERS, CLUSTER).unwrap();
    for c in [
        "ControlPlaneInitialized",
        "Available",
        "InfrastructureReady",
    ] {
        assert!(is_true(&cluster, c), "Cluster {c}: {}", cluster["status"]);
    }
    let domains: BTreeSet<String> = cps
        .iter()
        .map(|m| m["spec"]["failureDomain"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        domains,
        (0..ZONES).map(|i| format!("zone-{i}")).collect(),
        "KCP spreads one control plane Machine per failure domain:\n{}",
        run.summary()
    );
    run.assert_machines_in_their_zones(&cps).await;
    let workload = run.workload();
    let etcd = workload
        .healthy_etcd_members()
        .expect("the workload API server answers");
    let cp_nodes: BTreeSet<String> = cps
        .iter()
        .map(|m| m["status"]["nodeRef"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        etcd, cp_nodes,
        "one etcd member per control plane Node, named after it"
    );
    let debug = run
        .sim
        .cluster(CLUSTER)
        .expect("the simulator has the cluster");
    assert_eq!(
        debug["EtcdMembers"].as_array().map(Vec::len),
        Some(3),
        "{debug}"
    );

    // --- workers: one MachineDeployment per zone.
    let workers = run
        .until(
            "a Running worker in each zone",
            Duration::from_secs(300),
            async || {
                let ws = run.workers();
                let running = ws
                    .iter()
                    .filter(|m| m["status"]["phase"] == "Running")
                    .count();
                if ws.len() == ZONES && running == ZONES {
                    Ok(ws)
                } else {
                    Err(run.summary())
                }
            },
        )
        .await;
    for m in &workers {
        let md = m["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            md.strip_prefix(&format!("{CLUSTER}-md-")),
            m["spec"]["failureDomain"]
                .as_str()
                .and_then(|f| f.strip_prefix("zone-")),
            "{m}"
        );
    }
    run.assert_machines_in_their_zones(&workers).await;
    let nodes = workload.items(&["get", "nodes"]).unwrap();
    assert_eq!(nodes.len(), 6, "three control plane and three worker Nodes");
    phase(TEST, &mut t, "three workers up");

    rollout(&run, &workload, &cps).await;
    phase(TEST, &mut t, "control plane rolled out");
    remediation(&run, &workload).await;
    phase(TEST, &mut t, "remediation");
    zone_outage(&run, &workload).await;
    phase(TEST, &mut t, "zone outage");
    show(&run, &workload).await;
    if std::env::var("DEMO_KEEP").is_ok_and(|k| !k.is_empty()) {
        keep(&run, &workload);
    }

    // --- deletion: every VM goes, the zones stay.
    cp.kubectl(
        ADMIN,
        &["delete", CLUSTERS, CLUSTER, "-n", &ns, "--wait=false"],
    )
    .ok();
    run.until(
        "the Cluster gone",
        Duration::from_secs(300),
        async || match run.get(CLUSTERS, CLUSTER) {
            None => Ok(()),
            Some(_) => Err(run.summary()),
        },
    )
    .await;
    let left: Vec<String> = run
        .vms()
        .await
        .into_keys()
        .filter(|n| n.starts_with(&format!("{CLUSTER}-")))
        .collect();
    assert!(left.is_empty(), "VMs left in vCenter: {left:?}");
    let zones = w.get(&["vspheredeploymentzone"]);
    let ready = zones["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|z| z["status"]["ready"] == true)
        .count();
    assert_eq!(ready, ZONES, "the zones stay: {zones}");
    assert_eq!(
        w.get(&["vspherefailuredomain"])["items"]
            .as_array()
            .map(Vec::len),
        Some(ZONES)
    );
    phase(TEST, &mut t, "Cluster deleted");
    let log = w.ours.log();
    assert!(
        !log.contains(w.sim.credentials().1),
        "the manager logged the password"
    );
}

/// A new VSphereMachineTemplate (numCPUs 4) for the control plane: KCP replaces the three
/// Machines one at a time (RollingUpdate, maxSurge 1).
async fn rollout(run: &Run<'_>, workload: &Workload, old: &[Value]) {
    let w = run.w;
    let ns = &run.ns;
    let mut template = w.get(&[
        "vspheremachinetemplates.v1beta2.infrastructure.cluster.x-k8s.io",
        CLUSTER,
        "-n",
        ns,
    ]);
    let new_name = format!("{CLUSTER}-cpu4");
    template["metadata"] = json!({"name": new_name, "namespace": ns});
    template["spec"]["template"]["spec"]["numCPUs"] = json!(4);
    template["apiVersion"] = json!(INFRA_V1BETA2);
    apply_retrying(w.cp, &template.to_string());
    let sampler = Sampler::start(w, workload);
    let patch = json!({"spec": {"machineTemplate": {"spec": {"infrastructureRef": {
        "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "VSphereMachineTemplate", "name": new_name}}}}});
    w.cp.kubectl(
        ADMIN,
        &[
            "patch",
            KCP,
            CLUSTER,
            "-n",
            ns,
            "--type",
            "merge",
            "-p",
            &patch.to_string(),
        ],
    )
    .ok();
    let old_names: BTreeSet<String> = old.iter().map(name_of).collect();
    run.until(
        "three new control plane Machines",
        Duration::from_secs(900),
        async || {
            let cps = run.control_plane();
            let fresh = cps
                .iter()
                .filter(|m| !old_names.contains(&name_of(m)))
                .count();
            if fresh == 3 && cps.len() == 3 {
                Ok(())
            } else {
                Err(run.summary())
            }
        },
    )
    .await;
    let cps = run
        .settled(
            "the rolled-out control plane settled",
            Duration::from_secs(300),
        )
        .await;
    let seen = sampler.finish();
    eprintln!("capi_workload_cluster: rollout sampled {seen:?}");
    assert!(seen.samples > 10, "{seen:?}");
    assert!(
        seen.max_cp_vms <= 4,
        "more than 3 + maxSurge 1 control plane VMs at once: {seen:?}"
    );
    assert!(
        seen.min_etcd.is_some_and(|m| m >= 2),
        "etcd fell below two healthy members: {seen:?}"
    );
    run.assert_machines_in_their_zones(&cps).await;
    let domains: BTreeSet<&str> = cps
        .iter()
        .map(|m| m["spec"]["failureDomain"].as_str().unwrap())
        .collect();
    assert_eq!(domains.len(), 3, "still one per domain: {}", run.summary());
    let vms = run.vms().await;
    for name in &old_names {
        assert!(!vms.contains_key(name), "old VM {name} still in vCenter");
    }
    let rb = readback(&w.sim);
    for m in &cps {
        let vm = &vms[&name_of(m)];
        let cpus = rb.vm_props(&vm.moref, &["config.hardware.numCPU"]).await;
        assert_eq!(
            cpus.get("config.hardware.numCPU").map(String::as_str),
            Some("4"),
            "{} was cloned from the new template",
            vm.name
        );
    }
}

/// The MachineHealthCheck of the control plane: Ready Unknown or False for 10 s is unhealthy;
/// more than one unhealthy at once and it remediates nothing (maxUnhealthy 1).
fn health_check(ns: &str) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
        "metadata": {"name": format!("{CLUSTER}-control-plane"), "namespace": ns},
        "spec": {
            "clusterName": CLUSTER,
            "selector": {"matchLabels": {"cluster.x-k8s.io/control-plane": ""}},
            "checks": {
                "nodeStartupTimeoutSeconds": 600,
                "unhealthyNodeConditions": [
                    {"type": "Ready", "status": "Unknown", "timeoutSeconds": 10},
                    {"type": "Ready", "status": "False", "timeoutSeconds": 10}
                ]
            },
            "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": 1}}
        }
    })
}

/// The inventory path of a Machine's VM: its zone's folder.
fn vm_path(m: &Value) -> String {
    let i = zone_index(m["spec"]["failureDomain"].as_str().unwrap());
    format!("/DC0/vm/zone-{i}-vms/{}", name_of(m))
}

/// One control plane VM powered off by hand: the MachineHealthCheck marks it, KCP replaces it in
/// the same domain, quorum holds. Two off: remediation is held back.
async fn remediation(run: &Run<'_>, workload: &Workload) {
    let w = run.w;
    let ns = &run.ns;
    apply_retrying(w.cp, &health_check(ns).to_string());
    let cps = run.control_plane();
    let victim = cps[0].clone();
    let victim_name = name_of(&victim);
    let fd = victim["spec"]["failureDomain"]
        .as_str()
        .unwrap()
        .to_string();
    let before_victim: BTreeSet<String> = cps.iter().map(name_of).collect();
    let sampler = Sampler::start(w, workload);
    run.sim.power(&vm_path(&victim), false);
    run.until(
        &format!("{victim_name} replaced"),
        Duration::from_secs(600),
        async || {
            let cps = run.control_plane();
            if cps.iter().any(|m| name_of(m) == victim_name) {
                Err(run.summary())
            } else {
                Ok(())
            }
        },
    )
    .await;
    let cps = run
        .settled("the control plane healed", Duration::from_secs(600))
        .await;
    let seen = sampler.finish();
    eprintln!("capi_workload_cluster: remediation sampled {seen:?}");
    assert!(seen.max_cp_vms <= 4, "{seen:?}");
    assert!(
        seen.min_etcd.is_some_and(|m| m >= 2),
        "quorum lost: {seen:?}"
    );
    let fresh: Vec<&Value> = cps
        .iter()
        .filter(|m| !before_victim.contains(&name_of(m)))
        .collect();
    assert!(
        fresh.len() == 1 && fresh[0]["spec"]["failureDomain"] == fd.as_str(),
        "one replacement, in {fd}, the domain left short:\n{}",
        run.summary()
    );
    run.assert_machines_in_their_zones(&cps).await;
    assert!(
        !run.vms().await.contains_key(&victim_name),
        "the remediated VM {victim_name} is destroyed"
    );

    // Two off: more unhealthy than maxUnhealthy 1, so the MachineHealthCheck remediates
    // nothing (and KCP would refuse anyway: removing one of two bad members of three loses
    // quorum).
    let before: BTreeSet<String> = cps.iter().map(name_of).collect();
    for m in &cps[..2] {
        run.sim.power(&vm_path(m), false);
    }
    let mhc_name = format!("{CLUSTER}-control-plane");
    run.until(
        "the MachineHealthCheck holding remediation back",
        Duration::from_secs(120),
        async || {
            let mhc = run
                .w
                .find(
                    "machinehealthchecks.v1beta2.cluster.x-k8s.io",
                    &mhc_name,
                    ns,
                )
                .unwrap();
            match condition(&mhc, "RemediationAllowed") {
                Some(c) if c["status"] == "False" => Ok(()),
                _ => Err(mhc["status"].to_string()),
            }
        },
    )
    .await;
    // Held: for 20 s, no control plane Machine is deleted or replaced.
    let hold_until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < hold_until {
        let now: BTreeSet<String> = run
            .control_plane()
            .iter()
            .filter(|m| !m["metadata"]["deletionTimestamp"].is_string())
            .map(name_of)
            .collect();
        assert_eq!(now, before, "remediation went ahead with two of three down");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for m in &cps[..2] {
        run.sim.power(&vm_path(m), true);
    }
    run.settled(
        "the control plane back after power-on",
        Duration::from_secs(300),
    )
    .await;
}

/// Every VM of one zone powered off (its control plane machine and its worker): the cluster
/// keeps quorum, and KCP (which does not know vCenter's zones, only Machines per failure domain)
/// replaces the control plane machine in the same domain, whose pool still takes VMs.
async fn zone_outage(run: &Run<'_>, workload: &Workload) {
    let w = run.w;
    let cps = run.control_plane();
    let victim = cps
        .iter()
        .find(|m| m["spec"]["failureDomain"] == "zone-2")
        .expect("a control plane machine in zone-2")
        .clone();
    let worker = run
        .workers()
        .into_iter()
        .find(|m| m["spec"]["failureDomain"] == "zone-2")
        .expect("a worker in zone-2");
    let sampler = Sampler::start(w, workload);
    run.sim.power(&vm_path(&victim), false);
    run.sim.power(&vm_path(&worker), false);
    let victim_name = name_of(&victim);
    run.until(
        "zone-2's control plane machine replaced",
        Duration::from_secs(600),
        async || {
            if run
                .control_plane()
                .iter()
                .any(|m| name_of(m) == victim_name)
            {
                Err(run.summary())
            } else {
                Ok(())
            }
        },
    )
    .await;
    // The zone's worker stays down (no health check covers it), so its MachineDeployment is
    // unavailable and so is the Cluster: the control plane alone is judged here.
    let cps = run
        .settled_with(
            "the control plane after the outage",
            Duration::from_secs(600),
            false,
        )
        .await;
    let seen = sampler.finish();
    eprintln!("capi_workload_cluster: zone outage sampled {seen:?}");
    assert!(
        seen.min_etcd.is_some_and(|m| m >= 2),
        "quorum lost: {seen:?}"
    );
    let in_zone2: Vec<String> = cps
        .iter()
        .filter(|m| m["spec"]["failureDomain"] == "zone-2")
        .map(name_of)
        .collect();
    assert_eq!(
        in_zone2.len(),
        1,
        "KCP puts the replacement in the domain with the fewest machines, zone-2:\n{}",
        run.summary()
    );
    run.assert_machines_in_their_zones(&cps).await;
    // The worker is under no health check: its Machine stays.
    assert!(
        run.workers().iter().any(|m| name_of(m) == name_of(&worker)),
        "{}",
        run.summary()
    );
    // The zone comes back: the operator powers the worker on (the provider left it off), its
    // Node is Ready again and the Cluster Available.
    run.sim.power(&vm_path(&worker), true);
    run.settled("the cluster whole again", Duration::from_secs(300))
        .await;
}

/// The end of the demo: `clusterctl describe cluster` and Machine → zone → VM → host.
async fn show(run: &Run<'_>, workload: &Workload) {
    let w = run.w;
    let o = clusterctl(
        &w.capi,
        w.cp,
        w.home.path(),
        &[
            "describe",
            "cluster",
            CLUSTER,
            "-n",
            &run.ns,
            "--grouping=false",
        ],
        &[],
    );
    println!("\n== clusterctl describe cluster {CLUSTER}\n{}", text(&o));
    let rb = readback(&w.sim);
    let cookie = rb.login().await;
    let tag = regex::Regex::new("<[^>]*>").unwrap();
    let hosts: BTreeMap<String, String> = rb
        .objects(&cookie, "HostSystem", &["name"])
        .await
        .into_iter()
        .map(|(moref, props)| {
            let name = props
                .iter()
                .find(|(p, _)| p == "name")
                .map(|(_, v)| tag.replace_all(v, "").trim().to_string())
                .unwrap_or_default();
            (moref, name)
        })
        .collect();
    let vms = run.vms().await;
    let nodes: BTreeSet<String> = workload
        .items(&["get", "nodes"])
        .unwrap_or_default()
        .iter()
        .map(name_of)
        .collect();
    println!(
        "== machines\n{:<24} {:<14} {:<8} {:<24} {:<12} {:<12} {:<10} {:<4}",
        "MACHINE", "ROLE", "ZONE", "VM", "POOL", "HOST", "POWER", "NODE"
    );
    let mut machines = run.control_plane();
    machines.extend(run.workers());
    for m in machines {
        let name = name_of(&m);
        let role = if m["metadata"]["labels"]["cluster.x-k8s.io/control-plane"].is_string() {
            "control-plane"
        } else {
            "worker"
        };
        let (pool, host, power) = match vms.get(&name) {
            Some(vm) => {
                let props = rb.vm_props(&vm.moref, &["runtime.host"]).await;
                let host = props.get("runtime.host").cloned().unwrap_or_default();
                (
                    vm.pool.clone(),
                    hosts.get(&host).cloned().unwrap_or(host),
                    vm.power_state.clone(),
                )
            }
            None => ("-".into(), "-".into(), "no VM".into()),
        };
        let node = m["status"]["nodeRef"]["name"].as_str().unwrap_or("-");
        println!(
            "{name:<24} {role:<14} {:<8} {name:<24} {pool:<12} {host:<12} {power:<10} {}",
            m["spec"]["failureDomain"].as_str().unwrap_or("-"),
            if nodes.contains(node) { node } else { "-" }
        );
    }
    println!(
        "(HOST as vcsim reports it: vcsim has no DRS and leaves a clone on its template's host; \
         vCenter's DRS would place each VM on its zone's hosts, as the zone's VM-host rule says)"
    );
}

/// `--keep`: say how to reach everything, then wait until killed.
fn keep(run: &Run<'_>, workload: &Workload) -> ! {
    let w = run.w;
    println!(
        "\nEverything keeps running until Ctrl-C.\n  export KUBECONFIG={}    # the management cluster\n  kubectl --kubeconfig {} get nodes    # the workload cluster (hack/workload-sim)\n  vcsim at {} (user {}, password in the Secret {}/{CLUSTER})",
        w.cp.admin_kubeconfig.display(),
        workload.kubeconfig.display(),
        w.sim.url(),
        w.sim.credentials().0,
        run.ns,
    );
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
