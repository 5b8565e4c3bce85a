//! Crashes, failovers and restarts on the REAL API server: `vsphere-provider run` (the built
//! binary, as processes) as the controller's ServiceAccount bound by config/rbac, against
//! Kubernetes' own kube-apiserver v1.37.2 + etcd v3.7.0 (tests/support/realapi.rs) and vcsim.
//!
//! * a leader SIGKILLed in the middle of a 3-replica ControlPlaneMachineSet rollout: the
//!   standby takes the Lease (its log and the Lease say so) and finishes the rollout;
//! * the manager SIGKILLed twice, while its zones tag vCenter and while its Machines are
//!   cloned, and started again;
//! * kube-apiserver stopped and started again (same etcd, certificates and port) under a
//!   running manager: its watches recover and a Machine created afterwards is provisioned.
//!
//! Each ends with an independent reading of vcsim (raw SOAP and REST, not the provider's client,
//! tests/support/process.rs): exactly one VM per Machine, named after it and carrying its UID
//! as instance UUID, no VM besides, and no tag or tag category twice. vcsim delays every
//! CloneVM_Task by [`CLONE_DELAY_MS`] so that "in the middle" is a window of seconds, and each
//! test asserts the kill landed in it (fewer VMs than Machines at that moment).
//!
//! Stand-ins: no kubelet (Machines stay Provisioned: nothing here needs Nodes), no webhooks
//! (what the mutating webhooks would default is set in the manifests), no garbage collector.
//! Assertions are on logs, the Lease and objects; waits are generous (a loaded 2-core machine).
#[path = "support/process.rs"]
mod process;
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/samples.rs"]
mod samples;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use process::{Manager, Readback, wait_for};
use realapi::{ControlPlane, Identity, SA_NAMESPACE, control_plane};
use serde_json::{Value, json};
use vcsim::Vcsim;

const ADMIN: &Identity = &Identity::Admin;
/// How long vcsim holds every CloneVM_Task before cloning.
const CLONE_DELAY_MS: u64 = 4000;
/// Generous: a loaded 2-core machine runs vcsim, etcd, kube-apiserver and two managers.
const CONVERGE: Duration = Duration::from_secs(240);
const LOG_WAIT: Duration = Duration::from_secs(120);

/// One test at a time: they run managers over every namespace and stop the shared API server.
static ONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A namespace, a vcsim of three clusters (clones delayed), three zones with autoConfigure
/// (they tag vCenter), the credentials and user data Secrets, the VSphereCluster. Managers are
/// the test's to start.
struct Env {
    cp: &'static ControlPlane,
    ns: String,
    zones: Vec<String>,
    sim: Vcsim,
    work: PathBuf,
    /// The VMs vcsim had before any Machine (its own `DC0_*_VM*`).
    baseline: Vec<process::Vm>,
}

impl Env {
    async fn start(prefix: &str) -> Env {
        let cp = control_plane();
        let ns = cp.namespace(prefix);
        let work = cp.dir.join(&ns);
        std::fs::create_dir_all(&work).unwrap();
        let sim = Vcsim::builder()
            .clusters(3)
            .hosts(1)
            .pools(1)
            .method_delay_ms("CloneVM_Task", CLONE_DELAY_MS)
            // Every SOAP request in vcsim's log as it arrives (before the delay): how the test
            // knows a clone is in flight without asking the manager.
            .trace(true)
            .start()
            .await;
        let server = sim.url().to_string();
        let (user, password) = sim.credentials();
        let zones: Vec<String> = ["a", "b", "c"]
            .iter()
            .map(|z| format!("{ns}-zone-{z}"))
            .collect();
        let mut items = samples::cluster(&ns, &server, user, password);
        items.push(samples::user_data(&ns));
        let identity = format!("{ns}-zones");
        items.extend(samples::zones(&server, &zones, Some(true), &identity));
        items.push(samples::zone_credentials(
            realapi::SA_NAMESPACE,
            &identity,
            user,
            password,
        ));
        let env = Env {
            cp,
            ns,
            zones,
            work,
            baseline: Vec::new(),
            sim,
        };
        let baseline = env.readback().vms().await;
        let env = Env { baseline, ..env };
        cp.apply_text(ADMIN, &samples::list(items), None).ok();
        env
    }

    /// CloneVM_Task requests vcsim has received so far (its `-trace` log).
    fn clone_requests(&self) -> usize {
        self.sim
            .stderr_log()
            .lines()
            .filter(|l| l.starts_with("Request:") && l.contains("CloneVM_Task"))
            .count()
    }

    /// Waits until vcsim has received a clone request (held for [`CLONE_DELAY_MS`]).
    async fn wait_clone_in_flight(&self) {
        wait_for("a clone requested from vcsim", CONVERGE, || {
            (self.clone_requests() > 0).then_some(())
        })
        .await;
    }

    fn readback(&self) -> Readback {
        let (user, password) = self.sim.credentials();
        Readback::new(self.sim.url(), self.sim.base_url(), user, password)
    }

    fn kubectl(&self, args: &[&str]) -> realapi::Kubectl {
        self.cp.kubectl(ADMIN, args)
    }

    fn apply(&self, v: Value) {
        self.cp
            .apply_text(ADMIN, &v.to_string(), Some(&self.ns))
            .ok();
    }

    fn machines(&self) -> Vec<Value> {
        self.kubectl(&[
            "get",
            "machines.machine.openshift.io",
            "-n",
            &self.ns,
            "-o",
            "json",
        ])
        .ok()
        .json()["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn provisioned(&self) -> usize {
        self.machines()
            .iter()
            .filter(|m| m["spec"]["providerID"].is_string())
            .count()
    }

    fn zone(&self, name: &str) -> Value {
        self.kubectl(&[
            "get",
            "vspheredeploymentzones.v1beta1.infrastructure.cluster.x-k8s.io",
            name,
            "-o",
            "json",
        ])
        .ok()
        .json()
    }

    async fn wait_zones_ready(&self) {
        for z in &self.zones {
            wait_for(&format!("zone {z} ready"), CONVERGE, || {
                (self.zone(z)["status"]["ready"] == true).then_some(())
            })
            .await;
        }
    }

    /// Waits until `n` Machines have a providerID; returns them.
    async fn wait_provisioned(&self, n: usize) -> Vec<Value> {
        wait_for(&format!("{n} machines provisioned"), CONVERGE, || {
            let ms = self.machines();
            (ms.len() == n && ms.iter().all(|m| m["spec"]["providerID"].is_string())).then_some(ms)
        })
        .await
    }

    /// The independent reading: exactly one VM per Machine (its name, its UID as instance
    /// UUID), no other VM besides vcsim's own; every tag category and tag once, the zones'
    /// tags each on one cluster, the region's on the datacenter.
    async fn assert_nothing_done_twice(&self, machines: &[Value]) {
        let vms = self.readback().vms().await;
        let mut by_name: BTreeMap<&str, Vec<&process::Vm>> = BTreeMap::new();
        for vm in &vms {
            by_name.entry(vm.name.as_str()).or_default().push(vm);
        }
        for m in machines {
            let name = m["metadata"]["name"].as_str().unwrap();
            let uid = m["metadata"]["uid"].as_str().unwrap();
            let named = by_name.get(name).cloned().unwrap_or_default();
            assert_eq!(named.len(), 1, "VMs named {name}: {named:?}");
            assert_eq!(named[0].instance_uuid, uid, "{name}'s VM: {:?}", named[0]);
            let same_uuid: Vec<_> = vms.iter().filter(|v| v.instance_uuid == uid).collect();
            assert_eq!(same_uuid.len(), 1, "VMs with {name}'s UID: {same_uuid:?}");
        }
        let extra: Vec<_> = vms
            .iter()
            .filter(|v| !self.baseline.contains(v))
            .filter(|v| !machines.iter().any(|m| m["metadata"]["name"] == v.name))
            .collect();
        assert!(extra.is_empty(), "VMs no Machine accounts for: {extra:?}");
        assert_eq!(vms.len(), self.baseline.len() + machines.len(), "{vms:?}");

        let readback = self.readback();
        let categories = readback.categories().await;
        assert_eq!(categories, ["k8s-region", "k8s-zone"], "tag categories");
        let tags = readback.tags().await;
        let mut names: Vec<(String, String)> = tags
            .iter()
            .map(|t| (t.category.clone(), t.name.clone()))
            .collect();
        names.dedup();
        assert_eq!(names.len(), tags.len(), "a tag twice: {tags:?}");
        let mut want: Vec<(String, String)> = vec![("k8s-region".into(), "region-a".into())];
        want.extend(
            self.zones
                .iter()
                .map(|z| ("k8s-zone".to_string(), z.clone())),
        );
        assert_eq!(names, want, "{tags:?}");
        for t in &tags {
            assert_eq!(t.attached.len(), 1, "{t:?}");
        }
        eprintln!(
            "realapi_resilience: {} machine VMs, {} tags, each once",
            machines.len(),
            tags.len()
        );
    }
}

fn lease_holder(cp: &ControlPlane) -> Option<String> {
    let out = cp.kubectl(
        ADMIN,
        &[
            "get",
            "lease",
            "vsphere-provider-leader",
            "-n",
            SA_NAMESPACE,
            "-o",
            "json",
            "--ignore-not-found",
        ],
    );
    if out.stdout.trim().is_empty() {
        return None;
    }
    out.json()["spec"]["holderIdentity"]
        .as_str()
        .map(str::to_string)
}

/// The timestamp a log line starts with.
fn logged_at(line: &str) -> Option<jiff::Timestamp> {
    line.split_whitespace().next()?.parse().ok()
}

fn has_finalizer(m: &Value) -> bool {
    m["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
}

/// Issue 17: two `run` processes; the leader SIGKILLed during a CPMS rollout; the other takes
/// over within the lease (asserted from its log and the Lease, not from a clock); the rollout
/// completes with exactly one VM per Machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_a_rollout_from_a_killed_leader_without_a_second_vm() {
    let _one = ONE.lock().await;
    let env = Env::start("failover").await;
    let cp = env.cp;
    // A short lease, so the takeover comes quickly; the flags keep renew deadline < lease.
    let args = [
        "--metrics-addr",
        "127.0.0.1:0",
        "--webhook-cert-dir",
        env.work.to_str().unwrap(),
        "--leader-elect",
        "--namespace",
        SA_NAMESPACE,
        "--leader-elect-lease-duration",
        "8s",
        "--leader-elect-renew-deadline",
        "5s",
        "--leader-elect-retry-period",
        "1s",
    ];
    let kubeconfig = cp.controller_kubeconfig.clone();
    let mut a = Manager::spawn("manager-a", &kubeconfig, &env.work.join("a"), &args);
    a.wait_line("became leader", LOG_WAIT);
    let mut b = Manager::spawn("manager-b", &kubeconfig, &env.work.join("b"), &args);
    let standby = b.wait_line("standing by: the leader lease is held", LOG_WAIT);
    assert!(standby.contains("holder=manager-a"), "{standby}");
    assert_eq!(lease_holder(cp).as_deref(), Some("manager-a"));
    env.wait_zones_ready().await;

    env.apply(samples::control_plane_machine_set(&env.ns, &env.zones));

    // The leader has asked vcsim for a clone (held there a few seconds): kill it.
    env.wait_clone_in_flight().await;
    a.kill();
    let killed_at = jiff::Timestamp::now();
    let at_kill = (env.machines().len(), env.provisioned());
    let vms_at_kill = env.readback().vms().await.len() - env.baseline.len();
    eprintln!(
        "realapi_resilience: leader killed with {} machines, {} provisioned, {vms_at_kill} VMs cloned",
        at_kill.0, at_kill.1
    );
    assert!(
        at_kill.1 < 3,
        "the kill came after the rollout ({at_kill:?}): it proves nothing"
    );

    // The standby takes over: its log, then the Lease.
    let took = b.wait_line("became leader", LOG_WAIT);
    assert!(took.contains("identity=manager-b"), "{took}");
    // Measured, not asserted: the lease (8 s) runs out on the standby's clock, counted from the
    // last renewal it saw, so the takeover comes at most a lease duration (plus one retry
    // period) after the kill.
    if let Some(at) = logged_at(&took) {
        eprintln!(
            "realapi_resilience: the standby led {:.1}s after the kill (lease 8s, retry 1s)",
            (at - killed_at)
                .total(jiff::Unit::Second)
                .unwrap_or(f64::NAN)
        );
    }
    assert_eq!(lease_holder(cp).as_deref(), Some("manager-b"));
    let machines = env.wait_provisioned(3).await;
    env.assert_nothing_done_twice(&machines).await;
    eprintln!(
        "realapi_resilience: {} clone requests reached vcsim for 3 machines",
        env.clone_requests()
    );
    let set = env
        .kubectl(&[
            "get",
            "controlplanemachinesets.machine.openshift.io",
            "cluster",
            "-n",
            &env.ns,
            "-o",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(set["spec"]["replicas"], 3, "{set}");
    b.assert_never_forbidden();
    assert_eq!(b.terminate(), Some(0), "{}", b.log());
    assert!(b.log().contains("leader lease released"), "{}", b.log());
}

/// Issue 17: the controller killed (SIGKILL) and started again in the middle of reconciles —
/// once while its zones tag vCenter, once while its Machines are cloned — does nothing twice
/// (no second VM, tag or category) and converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_mid_reconcile_and_restarted_does_nothing_twice() {
    let _one = ONE.lock().await;
    let env = Env::start("restart").await;
    let cp = env.cp;
    let names: Vec<String> = (0..3).map(|i| format!("{}-w{i}", env.ns)).collect();
    for (name, zone) in names.iter().zip(&env.zones) {
        env.apply(samples::worker(&env.ns, name, zone, json!({})));
    }
    // Without leader election: a restarted pod of a single-replica Deployment, at once.
    let args = [
        "--metrics-addr",
        "127.0.0.1:0",
        "--webhook-cert-dir",
        env.work.to_str().unwrap(),
        "--leader-elect=false",
    ];
    let kubeconfig = cp.controller_kubeconfig.clone();

    // 1. Killed as soon as a zone has its finalizer (its autoConfigure is under way).
    let mut first = Manager::spawn("manager-1", &kubeconfig, &env.work.join("1"), &args);
    wait_for("a zone being reconciled", CONVERGE, || {
        env.zones
            .iter()
            .any(|z| has_finalizer(&env.zone(z)))
            .then_some(())
    })
    .await;
    first.kill();
    eprintln!(
        "realapi_resilience: first manager killed with {} tags in vCenter",
        env.readback().tags().await.len()
    );

    // 2. Killed while the machines are cloned (vcsim holds each clone a few seconds).
    let mut second = Manager::spawn("manager-2", &kubeconfig, &env.work.join("2"), &args);
    second.wait_line("controllers started", LOG_WAIT);
    env.wait_clone_in_flight().await;
    second.kill();
    let provisioned = env.provisioned();
    eprintln!("realapi_resilience: second manager killed with {provisioned} of 3 provisioned");
    assert!(
        provisioned < 3,
        "the kill came after every clone: it proves nothing"
    );

    // 3. Started again: everything converges, once.
    let mut third = Manager::spawn("manager-3", &kubeconfig, &env.work.join("3"), &args);
    env.wait_zones_ready().await;
    let machines = env.wait_provisioned(3).await;
    env.assert_nothing_done_twice(&machines).await;
    eprintln!(
        "realapi_resilience: {} clone requests reached vcsim for 3 machines",
        env.clone_requests()
    );
    third.assert_never_forbidden();
    assert_eq!(third.terminate(), Some(0), "{}", third.log());
}

/// Issue 17: kube-apiserver stopped and started again (same etcd, certificates, port) while the
/// manager runs: the manager logs the broken watches and keeps retrying (no exit), its watches
/// recover — a Machine created after the restart is provisioned — and the Machine provisioned
/// before it is not cloned again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_recover_after_the_api_server_restarts_and_nothing_is_done_twice() {
    let _one = ONE.lock().await;
    let env = Env::start("apiserver-restart").await;
    let cp = env.cp;
    // Without leader election, so this shows the watches themselves recovering (with it, a
    // stop longer than the renew deadline also ends the leadership term, and the next term
    // starts new watches: the failover test covers terms).
    let mut manager = Manager::spawn(
        "manager-0",
        &cp.controller_kubeconfig,
        &env.work.join("m"),
        &[
            "--metrics-addr",
            "127.0.0.1:0",
            "--webhook-cert-dir",
            env.work.to_str().unwrap(),
            "--leader-elect=false",
        ],
    );
    env.wait_zones_ready().await;
    let before = format!("{}-before", env.ns);
    env.apply(samples::worker(&env.ns, &before, &env.zones[0], json!({})));
    env.wait_provisioned(1).await;

    cp.stop_apiserver();
    let broken = manager.wait_line("watch failed; retrying", LOG_WAIT);
    eprintln!("realapi_resilience: with the API server down: {broken}");
    let restarted_in = cp.start_apiserver();
    let ready_again = jiff::Timestamp::now();
    eprintln!("realapi_resilience: kube-apiserver ready again after {restarted_in:.2?}");
    assert!(manager.is_running(), "{}", manager.log());

    // A change made after the restart is acted on.
    let after = format!("{}-after", env.ns);
    env.apply(samples::worker(&env.ns, &after, &env.zones[1], json!({})));
    let machines = env.wait_provisioned(2).await;
    env.assert_nothing_done_twice(&machines).await;
    let kinds: Vec<String> = manager
        .lines_with(&["watch failed; retrying"])
        .iter()
        .filter_map(|l| Manager::field(l, "kind"))
        .collect();
    eprintln!("realapi_resilience: watches that failed and were retried: {kinds:?}");
    // A kube-apiserver that has just opened its port answers 403 to everyone bound by a
    // ClusterRoleBinding until its RBAC informers have loaded (it is not /readyz yet); the
    // watches retrying with backoff may meet that. Never once it is ready.
    let refused_after: Vec<String> = manager
        .lines()
        .into_iter()
        .filter(|l| l.contains("forbidden") || l.contains("Forbidden") || l.contains(" 403"))
        .filter(|l| logged_at(l).is_none_or(|t| t >= ready_again))
        .collect();
    assert!(
        refused_after.is_empty(),
        "refused after the restarted server was ready:\n{}",
        refused_after.join("\n")
    );
    let refused_before = manager
        .lines_with(&["watch failed; retrying", "Forbidden"])
        .len();
    eprintln!(
        "realapi_resilience: {refused_before} watch retries met a 403 of the starting server"
    );
    assert_eq!(manager.terminate(), Some(0), "{}", manager.log());
}
