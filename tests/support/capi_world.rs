//! One Cluster API management cluster for the end-to-end tests (tests/capi_machines.rs,
//! tests/capi_workload_cluster.rs): the real API server with Cluster API v1.14.2 and this provider
//! installed by `clusterctl init`, CAPI's three managers and ours as processes
//! (tests/support/capi.rs), and vcsim with three compute clusters set up as an admin would
//! (host groups, folders) for the three zones `zone-{i}`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use secrecy::SecretString;
use serde_json::{Value, json};
use vsphere_provider::vcenter::model::trust::Thumbprint;
use vsphere_provider::vcenter::{Client, ClientOptions, Credentials, TlsPolicy};

use super::admin_setup::host_group;
use super::capi::{
    self, CapiManager, INIT_PROVIDERS, OurManager, apply_retrying, clusterctl, get, text,
};
use super::process::{Readback, VmDetail};
use super::realapi::{self, ControlPlane, Identity, control_plane};
use super::vcsim::Vcsim;

pub const ADMIN: &Identity = &Identity::Admin;
pub const IMAGE: &str = "localhost/vsphere-provider:e2e";
pub const V1BETA1: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
pub const MACHINES: &str = "machines.v1beta2.cluster.x-k8s.io";
pub const CLUSTERS: &str = "clusters.v1beta2.cluster.x-k8s.io";
/// What every VSphereMachine clones (vcsim's VM in DC0_C0's pool).
pub const TEMPLATE: &str = "/DC0/vm/DC0_C0_RP1_VM0";
/// The Kubernetes version KCP and the template ask for (nothing ever runs it).
pub const KUBERNETES_VERSION: &str = "v1.32.0";
pub const ZONES: usize = 3;
/// One poll interval for everything: short, the test runs on 2 cores in CI.
pub const POLL: Duration = Duration::from_millis(500);

pub fn b64(s: &str) -> String {
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .unwrap_or_else(|e| panic!("not base64 ({e}): {s}")),
    )
    .unwrap()
}

/// The setup an admin does before zones can be declared (govc in CAPV's e2e): in each cluster
/// `DC0_C{i}` a host group `hosts-{i}` of its host, a VM folder `zone-{i}-vms`.
pub async fn estate(sim: &Vcsim) -> Client {
    let (user, password) = sim.credentials();
    // Over TLS the admin pins vcsim's self-signed certificate, as govc's `-k=false` users do.
    let tls = sim.thumbprint_sha256().map_or(TlsPolicy::System, |t| {
        TlsPolicy::Thumbprint(Thumbprint::parse(&t).unwrap())
    });
    let c = Client::new(
        sim.url(),
        Credentials::new(user, SecretString::from(password.to_string())),
        ClientOptions {
            tls,
            ..ClientOptions::default()
        },
    )
    .unwrap();
    for i in 0..ZONES {
        host_group(
            &c,
            &format!("/DC0/host/DC0_C{i}"),
            &format!("hosts-{i}"),
            &[&format!("/DC0/host/DC0_C{i}/DC0_C{i}_H0")],
        )
        .await;
    }
    let inv = c.inventory().await.unwrap();
    let vm_folder = inv.at_path("/DC0/vm").unwrap().moref.clone();
    let readback = readback(sim);
    let cookie = readback.login().await;
    for i in 0..ZONES {
        readback
            .call(
                &cookie,
                &format!(
                    r#"<CreateFolder xmlns="urn:vim25"><_this type="Folder">{}</_this><name>zone-{i}-vms</name></CreateFolder>"#,
                    vm_folder.value
                ),
            )
            .await;
    }
    c
}

pub fn readback(sim: &Vcsim) -> Readback {
    let (user, password) = sim.credentials();
    Readback::new(sim.url(), sim.base_url(), user, password)
}

/// Zone `zone-{i}`: a HostGroup failure domain in cluster `DC0_C{i}` (host group `hosts-{i}`
/// made by the admin, VM group `vms-{i}` and its rule made by autoConfigure), datastore
/// `LocalDS_{i}`, and a deployment zone in pool `DC0_C{i}_RP1`, folder `zone-{i}-vms`.
pub fn zone(server: &str, i: usize) -> Vec<Value> {
    let name = format!("zone-{i}");
    vec![
        json!({
            "apiVersion": V1BETA1, "kind": "VSphereFailureDomain",
            "metadata": {"name": name},
            "spec": {
                "region": {"name": "region-a", "type": "Datacenter", "tagCategory": "k8s-region", "autoConfigure": true},
                "zone": {"name": name, "type": "HostGroup", "tagCategory": "k8s-zone", "autoConfigure": true},
                "topology": {"datacenter": "DC0", "computeCluster": format!("DC0_C{i}"),
                             "hosts": {"vmGroupName": format!("vms-{i}"), "hostGroupName": format!("hosts-{i}")},
                             "datastore": format!("LocalDS_{i}"), "networks": ["VM Network"]}
            }
        }),
        json!({
            "apiVersion": V1BETA1, "kind": "VSphereDeploymentZone",
            "metadata": {"name": name},
            "spec": {"server": server, "failureDomain": name, "controlPlane": true,
                     "placementConstraint": {"resourcePool": format!("DC0_C{i}_RP1"),
                                             "folder": format!("/DC0/vm/zone-{i}-vms")}}
        }),
    ]
}

/// Condition `t` of an object's status.
pub fn condition<'a>(o: &'a Value, t: &str) -> Option<&'a Value> {
    o["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

pub fn list(items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// Everything running: the API server with CAPI and this provider installed by clusterctl,
/// CAPI's three managers, ours, and vcsim.
pub struct World {
    pub cp: &'static ControlPlane,
    pub capi: std::path::PathBuf,
    pub home: tempfile::TempDir,
    /// The clusterctl configuration naming the offline repository.
    pub config: String,
    /// The extra arguments Cluster API's managers run with (feature gates).
    pub capi_args: Vec<String>,
    /// The extra arguments our manager runs with.
    pub our_args: Vec<String>,
    pub ours: OurManager,
    pub managers: Vec<CapiManager>,
    pub sim: Vcsim,
    pub admin: Client,
}

impl World {
    /// The logs of every manager (tails of CAPI's), for failure messages.
    pub fn logs(&self) -> String {
        let mut out = format!("--- vsphere-provider:\n{}", self.ours.log());
        for m in &self.managers {
            out += &format!("\n--- {} (tail):\n{}", m.name, m.tail(40));
        }
        out
    }

    pub fn get(&self, args: &[&str]) -> Value {
        get(self.cp, args)
    }

    /// The object, or None when it is not there.
    pub fn find(&self, kind: &str, name: &str, ns: &str) -> Option<Value> {
        let out = self.cp.kubectl(
            ADMIN,
            &[
                "get",
                &realapi::at_v1beta1(kind),
                name,
                "-n",
                ns,
                "-o",
                "json",
            ],
        );
        if out.stderr.contains("NotFound") {
            return None;
        }
        Some(out.ok().json())
    }

    /// The control-plane Machines in `ns` (label `cluster.x-k8s.io/control-plane`).
    pub fn control_plane_machines(&self, ns: &str) -> Vec<Value> {
        self.get(&[
            "machines.v1beta1.cluster.x-k8s.io",
            "-n",
            ns,
            "-l",
            "cluster.x-k8s.io/control-plane",
        ])["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub fn items(&self, kind: &str, ns: &str) -> Vec<Value> {
        self.get(&[kind, "-n", ns])["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Polls `f` (every [`POLL`], up to `limit`) until it gives a value; the failure names
    /// `what`, the last state `f` described, and the managers' logs.
    pub async fn until<T>(
        &self,
        what: &str,
        limit: Duration,
        f: impl AsyncFnMut() -> Result<T, String>,
    ) -> T {
        until_or(what, limit, || self.logs(), f).await
    }

    /// Applies the three zones `zone-{i}` (VM groups and rules by autoConfigure) and waits until
    /// every VSphereDeploymentZone is ready.
    pub async fn three_ready_zones(&self) {
        self.three_ready_zones_on(self.cp, || self.logs()).await;
    }

    /// [`World::three_ready_zones`] on management cluster `cp` (this world's vCenter).
    pub async fn three_ready_zones_on(&self, cp: &ControlPlane, logs: impl Fn() -> String) {
        let server = self.sim.url().to_string();
        apply_retrying(
            cp,
            &list((0..ZONES).flat_map(|i| zone(&server, i)).collect()),
        );
        until_or(
            "three ready zones",
            Duration::from_secs(90),
            logs,
            async || {
                let zones = get(cp, &["vspheredeploymentzone"]);
                let ready = zones["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|z| z["status"]["ready"] == true)
                    .count();
                (ready == ZONES)
                    .then_some(())
                    .ok_or_else(|| zones["items"].to_string())
            },
        )
        .await;
    }

    /// The VM named `name` as vcsim has it (raw SOAP), once it exists.
    pub async fn vm(&self, name: &str) -> Option<VmDetail> {
        readback(&self.sim)
            .vm_details()
            .await
            .into_iter()
            .find(|v| v.name == name)
    }
}

/// Polls `f` (every [`POLL`], up to `limit`) until it gives a value; `f` may itself panic to
/// fail at once. The failure names `what`, the last state `f` described, and `logs()`.
pub async fn until_or<T>(
    what: &str,
    limit: Duration,
    logs: impl Fn() -> String,
    mut f: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(state) if Instant::now() >= deadline => {
                panic!(
                    "timed out ({limit:?}) waiting for {what}; last: {state}\n{}",
                    logs()
                )
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// clusterctl init, vcsim (plain HTTP on loopback) and its estate, our manager and CAPI's
/// three, every webhook wired.
pub async fn world(capi: std::path::PathBuf) -> World {
    world_with(capi, false).await
}

/// [`world`], with vcsim serving HTTPS with a self-signed certificate when `tls`: what CAPV's
/// v1beta2 templates need, since their `thumbprint` may not be empty. The manager is given the
/// certificate's thumbprint (`--thumbprint`), as an admin pins a vCenter it runs against.
pub async fn world_with(capi: std::path::PathBuf, tls: bool) -> World {
    world_gated(capi, tls, &[], &[]).await
}

/// [`world_with`], CAPI's three managers started with `capi_args`, e.g.
/// `--feature-gates=ClusterTopology=true` for ClusterClass (core serves ClusterClass and runs the
/// topology controller only then; KCP admits KubeadmControlPlaneTemplates only then), and ours
/// with `our_args`.
pub async fn world_gated(
    capi: std::path::PathBuf,
    tls: bool,
    capi_args: &[&str],
    our_args: &[&str],
) -> World {
    let cp = control_plane();
    let home = tempfile::tempdir().unwrap();
    let config = capi::repository(&capi, home.path(), IMAGE);
    let sim = Vcsim::builder()
        .clusters(ZONES as u32)
        .hosts(1)
        .pools(1)
        .datastores(ZONES as u32)
        .tls(tls)
        .start()
        .await;
    let admin = estate(&sim).await;
    let (ours, managers) = manage(&capi, cp, home.path(), &config, &sim, capi_args, our_args);
    World {
        cp,
        capi,
        home,
        config,
        capi_args: capi_args.iter().map(|a| a.to_string()).collect(),
        our_args: our_args.iter().map(|a| a.to_string()).collect(),
        ours,
        managers,
        sim,
        admin,
    }
}

/// Makes `cp` a management cluster for `sim`: `clusterctl init` from the offline repository
/// `config` (our credentials as the variables), then our manager (pinning vcsim's certificate
/// when it serves TLS) and Cluster API's three managers (with `capi_args`) as processes, their
/// webhooks wired to them. Logs and certificates go under `home`.
fn manage(
    capi: &Path,
    cp: &'static ControlPlane,
    home: &Path,
    config: &str,
    sim: &Vcsim,
    capi_args: &[&str],
    our_args: &[&str],
) -> (OurManager, Vec<CapiManager>) {
    let (user, password) = sim.credentials();
    // clusterctl brings our CRDs with its own conversion webhook Service.
    cp.conversion_to_installer().unwrap();
    let mut init = vec!["init", "--config", config];
    init.extend(INIT_PROVIDERS);
    let o = clusterctl(
        capi,
        cp,
        home,
        &init,
        &[
            ("VSPHERE_USERNAME", user),
            ("VSPHERE_PASSWORD", password),
            ("VSPHERE_SERVER", sim.url()),
        ],
    );
    assert!(o.status.success(), "clusterctl init failed:\n{}", text(&o));
    // The zones name no identityRef: they act as the manager, whose credentials are bound to
    // this simulator (VSPHERE_SERVER, as the clusterctl Secret hands it over).
    let pin = sim.thumbprint_sha256();
    let mut extra: Vec<&str> = pin
        .as_deref()
        .map(|t| vec!["--thumbprint", t])
        .unwrap_or_default();
    extra.extend(our_args);
    let ours = OurManager::start_with(cp, home, user, password, sim.url(), &extra);
    ours.wire_webhooks(cp);
    let managers = [
        ("manager", "capi"),
        ("kubeadm-bootstrap-manager", "capi-kubeadm-bootstrap"),
        (
            "kubeadm-control-plane-manager",
            "capi-kubeadm-control-plane",
        ),
    ]
    .into_iter()
    .map(|(binary, prefix)| {
        CapiManager::start_with(
            capi,
            cp,
            home,
            binary,
            &format!("{prefix}-validating-webhook-configuration"),
            &format!("{prefix}-mutating-webhook-configuration"),
            capi_args,
        )
    })
    .collect();
    (ours, managers)
}

/// A second management cluster (`clusterctl move`'s target): its own API server
/// ([`realapi::second_control_plane`]), initialized as the first, for the same vCenter.
pub struct Management {
    pub cp: &'static ControlPlane,
    pub home: tempfile::TempDir,
    pub ours: OurManager,
    pub managers: Vec<CapiManager>,
}

impl Management {
    pub fn logs(&self) -> String {
        let mut out = format!("--- target: vsphere-provider:\n{}", self.ours.log());
        for m in &self.managers {
            out += &format!("\n--- target: {} (tail):\n{}", m.name, m.tail(40));
        }
        out
    }
}

impl World {
    /// Starts [`Management`] on the second control plane, with this world's repository, vCenter
    /// and manager arguments.
    pub fn second_management(&self) -> Management {
        let cp = realapi::second_control_plane();
        let home = tempfile::tempdir().unwrap();
        let args: Vec<&str> = self.capi_args.iter().map(String::as_str).collect();
        let our_args: Vec<&str> = self.our_args.iter().map(String::as_str).collect();
        let (ours, managers) = manage(
            &self.capi,
            cp,
            home.path(),
            &self.config,
            &self.sim,
            &args,
            &our_args,
        );
        Management {
            cp,
            home,
            ours,
            managers,
        }
    }
}

/// The two edits an admin of failure domains makes to a CAPV template, as CAPV's own e2e does
/// for its failure-domain flavours: the VSphereCluster's `failureDomainSelector: {}` (select
/// every zone; CAPV's `vspherecluster-failuredomainselector.yaml` patch), and each
/// MachineDeployment split into one per failure domain (`<cluster>-md-<i>`, with
/// `spec.template.spec.failureDomain: zone-<i>`), as a ClusterClass topology with a
/// MachineDeployment per zone renders it.
pub fn zonal(docs: Vec<Value>, cluster: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for mut d in docs {
        match d["kind"].as_str() {
            Some("VSphereCluster") => {
                d["spec"]["failureDomainSelector"] = json!({});
                out.push(d);
            }
            Some("MachineDeployment") => {
                for i in 0..ZONES {
                    let mut md = d.clone();
                    md["metadata"]["name"] = json!(format!("{cluster}-md-{i}"));
                    md["spec"]["template"]["spec"]["failureDomain"] = json!(format!("zone-{i}"));
                    out.push(md);
                }
            }
            _ => out.push(d),
        }
    }
    out
}

/// The zone (`zone-{i}`) a VM must be in: pool, folder, datastore, cluster and VM group.
pub fn assert_in_zone(w_groups: &BTreeMap<(String, String), Vec<String>>, vm: &VmDetail, i: usize) {
    assert_eq!(vm.pool, format!("DC0_C{i}_RP1"), "{vm:?}");
    assert_eq!(vm.folder, format!("zone-{i}-vms"), "{vm:?}");
    assert_eq!(vm.datastores, vec![format!("LocalDS_{i}")], "{vm:?}");
    let group = &w_groups[&(format!("DC0_C{i}"), format!("vms-{i}"))];
    assert!(
        group.contains(&vm.moref),
        "{} not in VM group vms-{i} of DC0_C{i}: {w_groups:?}",
        vm.name
    );
    assert_eq!(vm.power_state, "poweredOn", "{vm:?}");
}

/// The guestinfo CAPV writes: the bootstrap data and metadata naming the VM, base64.
pub fn assert_guestinfo(vm: &VmDetail, user_data: &str) {
    let x = &vm.extra_config;
    assert_eq!(
        x.get("guestinfo.userdata.encoding").map(String::as_str),
        Some("base64"),
        "{x:?}"
    );
    assert_eq!(b64(&x["guestinfo.userdata"]), user_data, "{}", vm.name);
    assert_eq!(
        x.get("guestinfo.metadata.encoding").map(String::as_str),
        Some("base64"),
        "{x:?}"
    );
    let metadata: Value = serde_saphyr::from_str(&b64(&x["guestinfo.metadata"]))
        .unwrap_or_else(|e| panic!("{}: guestinfo.metadata is not YAML: {e}", vm.name));
    assert_eq!(metadata["instance-id"], vm.name.as_str(), "{metadata}");
    assert_eq!(metadata["local-hostname"], vm.name.as_str(), "{metadata}");
}

/// [`assert_in_zone`] for a clone whose disk was resized (CAPV's template asks for 25 GiB):
/// vcsim keeps the edited disk's backing file name from the template, so the VM also lists
/// the template's datastore (LocalDS_0), where real vCenter moves the disk with the clone to
/// the relocate datastore. The VM's home (`config.files.vmPathName`) is in the zone's datastore.
pub fn assert_in_zone_resized(
    groups: &BTreeMap<(String, String), Vec<String>>,
    vm: &VmDetail,
    i: usize,
    props: &BTreeMap<String, String>,
) {
    let ds = format!("LocalDS_{i}");
    assert!(
        vm.datastores.contains(&ds) && vm.datastores.iter().all(|d| *d == ds || d == "LocalDS_0"),
        "{vm:?}"
    );
    let home = props
        .get("config.files.vmPathName")
        .cloned()
        .unwrap_or_default();
    assert!(
        home.starts_with(&format!("[{ds}]")),
        "{}: home {home}",
        vm.name
    );
    let mut v = vm.clone();
    v.datastores = vec![ds];
    assert_in_zone(groups, &v, i);
}

/// Whether condition `t` of an object's status is True.
pub fn is_true(o: &Value, t: &str) -> bool {
    condition(o, t).is_some_and(|c| c["status"] == "True")
}

pub fn name_of(o: &Value) -> String {
    o["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The variables CAPV v1.17's templates take (for `clusterctl generate cluster --from`), with
/// vcsim's values, for Cluster `cluster` in `ns` whose workload API server (hack/workload-sim)
/// listens on 127.0.0.1:`port`.
pub fn capv_variables(
    w: &World,
    ns: &str,
    cluster: &str,
    port: u16,
) -> Vec<(&'static str, String)> {
    let (user, password) = w.sim.credentials();
    let thumbprint = w.sim.thumbprint_sha256().expect("vcsim serves TLS here");
    vec![
        ("NAMESPACE", ns.to_string()),
        ("CLUSTER_NAME", cluster.to_string()),
        // The simulator serves the workload API server on loopback; its certificate names
        // 127.0.0.1, and KCP's port-forward to etcd dials back to this address.
        ("CONTROL_PLANE_ENDPOINT_IP", "127.0.0.1".into()),
        ("CONTROL_PLANE_ENDPOINT_PORT", port.to_string()),
        ("CPI_IMAGE_K8S_VERSION", KUBERNETES_VERSION.into()),
        ("VSPHERE_SERVER", w.sim.url().to_string()),
        // CAPV's v1beta2 schema wants both non-empty: vcsim's certificate, and vcsim's own
        // storage policy (which this provider records and says it does not act on).
        ("VSPHERE_TLS_THUMBPRINT", thumbprint),
        ("VSPHERE_USERNAME", user.to_string()),
        ("VSPHERE_PASSWORD", password.to_string()),
        // Where a machine without a failure domain goes.
        ("VSPHERE_DATACENTER", "DC0".into()),
        ("VSPHERE_RESOURCE_POOL", "DC0_C0_RP1".into()),
        ("VSPHERE_DATASTORE", "LocalDS_0".into()),
        ("VSPHERE_FOLDER", "zone-0-vms".into()),
        ("VSPHERE_NETWORK", "VM Network".into()),
        ("VSPHERE_TEMPLATE", TEMPLATE.into()),
        (
            "VSPHERE_STORAGE_POLICY",
            "vSAN Default Storage Policy".into(),
        ),
        (
            "VSPHERE_SSH_AUTHORIZED_KEY",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2e test".into(),
        ),
    ]
}

/// `clusterctl generate cluster <cluster> --from tests/fixtures/capv/v1.17/<template>` into
/// `ns`, with [`capv_variables`] (then `extra`, which override them) and the machine counts: the
/// objects it prints.
#[allow(clippy::too_many_arguments)]
pub fn generate(
    w: &World,
    template: &str,
    cluster: &str,
    ns: &str,
    port: u16,
    control_plane: u32,
    workers: u32,
    extra: &[(&'static str, String)],
) -> Vec<Value> {
    let mut owned = capv_variables(w, ns, cluster, port);
    owned.extend(extra.iter().cloned());
    let vars: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let file = realapi::repo()
        .join("tests/fixtures/capv/v1.17")
        .join(template);
    let (cp_count, worker_count) = (control_plane.to_string(), workers.to_string());
    let o = clusterctl(
        &w.capi,
        w.cp,
        w.home.path(),
        &[
            "generate",
            "cluster",
            cluster,
            "--from",
            file.to_str().unwrap(),
            "--target-namespace",
            ns,
            "--kubernetes-version",
            KUBERNETES_VERSION,
            "--control-plane-machine-count",
            &cp_count,
            "--worker-machine-count",
            &worker_count,
        ],
        &vars,
    );
    assert!(o.status.success(), "clusterctl generate:\n{}", text(&o));
    serde_saphyr::from_multiple::<Value>(&String::from_utf8(o.stdout).unwrap())
        .expect("clusterctl generate printed YAML")
        .into_iter()
        .filter(Value::is_object)
        .collect()
}

/// Prints how long a phase of `test` took (a measurement for the record, never asserted).
pub fn phase(test: &str, start: &mut Instant, what: &str) {
    eprintln!("{test}: {what} in {:.1} s", start.elapsed().as_secs_f64());
    *start = Instant::now();
}
