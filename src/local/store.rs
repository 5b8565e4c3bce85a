//! The in-process object store of local mode: manifests loaded from files, admitted with the
//! same code as `validate` and the webhooks (defaults applied), kept typed, and persisted in a
//! state file between runs.
//!
//! The state file holds every object with what the controllers own (uid, status, finalizers,
//! deletion timestamps, owner references, generated objects such as Nodes) and the events so
//! far. Manifests are the desired state of the objects they name: on load they overlay the
//! stored object's spec, labels and annotations, and everything else stays as the controllers
//! left it. A Machine's UID, and so its VM's instance UUID, is fixed the first time it is stored,
//! which is what makes a re-run find its VM instead of cloning a second one.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Event, Node, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::capi_core::CapiObject;
use crate::api::ipam::{InClusterIpPool, IpAddress, IpAddressClaim};
use crate::api::manifest::{LoadedObject, Object, load_paths};
use crate::api::vsphere_machine::{VSphereMachine, VSphereMachineTemplate};
use crate::api::vsphere_vm::VSphereVM;
use crate::api::{
    ControlPlaneMachineSet, Infrastructure, Machine, MachineHealthCheck, VSphereCluster,
    VSphereClusterIdentity, VSphereDeploymentZone, VSphereFailureDomain,
};
use crate::plan::credentials::{IdentitySources, unresolved_identity_refs};
use crate::webhook::Ctx;
use crate::webhook::admission::admit_loaded;

/// The namespace local mode plays the controller in: where the Secrets of
/// VSphereClusterIdentities are looked for (config/manager's namespace).
pub const LOCAL_CONTROLLER_NAMESPACE: &str = "vsphere-provider-system";

/// The label and annotation keys a manifest set on the object last time (JSON), so a key
/// dropped from the manifest is dropped from the object, as `kubectl apply` does.
pub use super::overlay::LAST_APPLIED_ANNOTATION;
use super::overlay::overlay;

/// Events kept in the state file (the newest).
const EVENTS_KEPT: usize = 2000;

/// Objects by kind; cluster-scoped kinds by name, namespaced ones by `namespace/name`.
#[derive(Clone, Debug, Default)]
pub struct Store {
    pub failure_domains: BTreeMap<String, VSphereFailureDomain>,
    pub zones: BTreeMap<String, VSphereDeploymentZone>,
    pub clusters: BTreeMap<String, VSphereCluster>,
    /// From the manifests only: never written to the state file or printed.
    pub secrets: Vec<Secret>,
    /// VSphereClusterIdentities, from the manifests only (like the Secrets they name).
    pub identities: Vec<VSphereClusterIdentity>,
    pub machines: BTreeMap<String, Machine>,
    pub machine_sets: BTreeMap<String, ControlPlaneMachineSet>,
    pub health_checks: BTreeMap<String, MachineHealthCheck>,
    pub nodes: BTreeMap<String, Node>,
    /// Nodes the manifests give: simulated nodes never replace them.
    pub manifest_nodes: BTreeSet<String>,
    /// Objects of other controllers' kinds the manifests hold, passed over (one line each).
    pub skipped: Vec<String>,
    /// OpenShift's Infrastructure objects by name (only `cluster` is read: its vSphere failure
    /// domains back CPMS domain names that name no deployment zone).
    pub infrastructures: BTreeMap<String, Infrastructure>,
    /// IP pools (`InClusterIPPool` / `GlobalInClusterIPPool`) from the manifests only, by
    /// [`InClusterIpPool::key`]: local mode is their IPAM provider.
    pub ip_pools: BTreeMap<String, InClusterIpPool>,
    /// IP address claims the machines made, by `namespace/name` (kept in the state file).
    pub ip_claims: BTreeMap<String, IpAddressClaim>,
    /// IP addresses local mode allocated for the claims, by `namespace/name` (kept in the
    /// state file, so an address stays its claim's across runs).
    pub ip_addresses: BTreeMap<String, IpAddress>,
    /// Cluster API `Cluster`s by `namespace/name` (the user's; local mode keeps their
    /// `infrastructureReady` as CAPI would).
    pub capi_clusters: BTreeMap<String, CapiObject>,
    /// Cluster API `MachineDeployment`s by `namespace/name` (the user's).
    pub machine_deployments: BTreeMap<String, CapiObject>,
    /// Cluster API `Machine`s by `namespace/name`: the user's and those local mode made for the
    /// MachineDeployments.
    pub capi_machines: BTreeMap<String, CapiObject>,
    /// VSphereMachines by `namespace/name`.
    pub vsphere_machines: BTreeMap<String, VSphereMachine>,
    /// VSphereMachineTemplates by `namespace/name`, from the manifests only.
    pub machine_templates: BTreeMap<String, VSphereMachineTemplate>,
    /// Cluster API VSphereVMs by `namespace/name`: local mode's own (made from VSphereMachines,
    /// kept in the state file; a VSphereVM's UID, its VM's instance UUID, is fixed the first
    /// time it is stored).
    pub vsphere_vms: BTreeMap<String, VSphereVM>,
    /// Every event so far (the state file keeps the newest [`EVENTS_KEPT`]).
    pub events: Vec<Event>,
    /// How many of `events` were there before this run.
    pub events_before_run: usize,
}

/// Why the manifests (or the state file) cannot be used: every problem, each naming
/// file:line and field.
#[derive(Debug, thiserror::Error)]
#[error("{}", .problems.join("\n"))]
pub struct InputError {
    pub problems: Vec<String>,
}

/// `namespace/name`, or `name` for cluster-scoped objects.
pub fn key(ns: Option<&str>, name: &str) -> String {
    match ns {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

fn ns_key(meta: &ObjectMeta) -> String {
    key(
        Some(meta.namespace.as_deref().unwrap_or("default")),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// Stored identity for a new object: a UID, a creation time and generation 1.
pub(crate) fn born(meta: &mut ObjectMeta, now: &Time) {
    if meta.uid.as_deref().is_none_or(str::is_empty) {
        meta.uid = Some(uuid::Uuid::new_v4().to_string());
    }
    meta.creation_timestamp.get_or_insert_with(|| now.clone());
    meta.generation.get_or_insert(1);
}

impl Store {
    /// Load, default and validate every object in `paths`. Anything rejected (or of an unknown
    /// kind, or a duplicate) is an input error: nothing is reconciled from a half-valid set.
    pub fn load(paths: &[PathBuf]) -> Result<Self, InputError> {
        let (objects, errors) = load_paths(paths);
        let mut problems: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        let mut store = Store::default();
        let ctx = Ctx {
            allow_placeholders: false,
            ..Ctx::default()
        };
        for obj in &objects {
            // Another controller's kind (a KubeadmControlPlane, a ClusterResourceSet, a
            // ConfigMap of a cluster template): not played here, said so, not an error — a CAPV
            // template applies as it is. A typo of one of ours stays an error (`unserved`).
            if obj.object_type() == crate::api::manifest::ObjectType::Unknown
                && crate::api::manifest::unserved(obj.api_version(), obj.kind()).is_none()
            {
                store.skipped.push(format!(
                    "{} {} {} {}: another controller's kind, not played by local mode",
                    obj.source,
                    obj.api_version(),
                    obj.kind(),
                    obj.name()
                ));
                continue;
            }
            if let Err(p) = store.admit(obj, &ctx) {
                problems.push(p);
            }
        }
        // Checked here, with the manifests, so the error comes before anything is sent.
        problems.extend(unresolved_identity_refs(
            store.clusters.values(),
            &IdentitySources {
                secrets: &store.secrets,
                identities: &store.identities,
                namespaces: &[],
                controller_namespace: LOCAL_CONTROLLER_NAMESPACE,
            },
            &crate::vcenter::TlsPolicy::System,
        ));
        if objects.is_empty() && problems.is_empty() {
            problems.push(format!(
                "no objects found in {}",
                paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if problems.is_empty() {
            Ok(store)
        } else {
            Err(InputError { problems })
        }
    }

    fn admit(&mut self, obj: &LoadedObject, ctx: &Ctx) -> Result<(), String> {
        let what = format!("{} {} {}", obj.source, obj.kind(), obj.name());
        let outcome = admit_loaded(obj, ctx);
        if !outcome.errors.is_empty() {
            let errs: Vec<String> = outcome.errors.iter().map(|e| e.to_string()).collect();
            return Err(format!("{what}: {}", errs.join("; ")));
        }
        let defaulted = LoadedObject {
            source: obj.source.clone(),
            value: outcome.object.clone(),
        };
        let typed = defaulted.typed().map_err(|e| format!("{what}: {e}"))?;
        if matches!(typed, Object::VSphereVM(_)) {
            return Err(format!(
                "{what}: local mode makes VSphereVMs from VSphereMachines (kept in its state file); give the VSphereMachine, its Machine, or a MachineDeployment"
            ));
        }
        self.insert(typed)
            .map_err(|k| format!("{what}: duplicate {} {k}", obj.kind()))
    }

    /// Insert a typed object; Err(key) if one of that kind and key is there already.
    fn insert(&mut self, typed: Object) -> Result<(), String> {
        fn put<T>(map: &mut BTreeMap<String, T>, k: String, v: T) -> Result<(), String> {
            if map.contains_key(&k) {
                return Err(k);
            }
            map.insert(k, v);
            Ok(())
        }
        fn namespaced(meta: &mut ObjectMeta) -> String {
            meta.namespace.get_or_insert_with(|| "default".into());
            ns_key(meta)
        }
        match typed {
            Object::FailureDomain(fd) => {
                let k = fd.metadata.name.clone().unwrap_or_default();
                put(&mut self.failure_domains, k, *fd)
            }
            Object::DeploymentZone(z) => {
                let k = z.metadata.name.clone().unwrap_or_default();
                put(&mut self.zones, k, *z)
            }
            Object::Cluster(c) => {
                let mut c = *c;
                let k = namespaced(&mut c.metadata);
                put(&mut self.clusters, k, c)
            }
            Object::ClusterIdentity(i) => {
                self.identities.push(*i);
                Ok(())
            }
            Object::Secret(s) => {
                let mut s = *s;
                s.metadata.namespace.get_or_insert_with(|| "default".into());
                self.secrets.push(s);
                Ok(())
            }
            Object::Machine(m) => {
                let mut m = *m;
                let k = namespaced(&mut m.metadata);
                put(&mut self.machines, k, m)
            }
            Object::MachineHealthCheck(h) => {
                let mut h = *h;
                let k = namespaced(&mut h.metadata);
                put(&mut self.health_checks, k, h)
            }
            Object::ControlPlaneMachineSet(c) => {
                let mut c = *c;
                let k = namespaced(&mut c.metadata);
                put(&mut self.machine_sets, k, c)
            }
            Object::Node(n) => {
                let k = n.metadata.name.clone().unwrap_or_default();
                self.manifest_nodes.insert(k.clone());
                put(&mut self.nodes, k, *n)
            }
            Object::Infrastructure(i) => {
                let k = i.metadata.name.clone().unwrap_or_default();
                put(&mut self.infrastructures, k, *i)
            }
            Object::IpPool(p) => {
                let mut p = *p;
                if p.global() {
                    p.metadata.namespace = None;
                } else {
                    p.metadata.namespace.get_or_insert_with(|| "default".into());
                }
                put(&mut self.ip_pools, p.key(), p)
            }
            Object::IpAddressClaim(c) => {
                let mut c = *c;
                let k = namespaced(&mut c.metadata);
                put(&mut self.ip_claims, k, c)
            }
            Object::IpAddress(a) => {
                let mut a = *a;
                let k = namespaced(&mut a.metadata);
                put(&mut self.ip_addresses, k, a)
            }
            Object::Capi(c) => {
                let mut c = *c;
                let k = namespaced(&mut c.metadata);
                match c.kind.as_str() {
                    "Cluster" => put(&mut self.capi_clusters, k, c),
                    "MachineDeployment" => put(&mut self.machine_deployments, k, c),
                    _ => put(&mut self.capi_machines, k, c),
                }
            }
            Object::VSphereMachine(v) => {
                let mut v = *v;
                let k = namespaced(&mut v.metadata);
                put(&mut self.vsphere_machines, k, v)
            }
            Object::VSphereMachineTemplate(t) => {
                let mut t = *t;
                let k = namespaced(&mut t.metadata);
                put(&mut self.machine_templates, k, t)
            }
            Object::VSphereVM(v) => {
                let mut v = *v;
                let k = namespaced(&mut v.metadata);
                put(&mut self.vsphere_vms, k, v)
            }
            // Local mode has no topology controller to stamp clusters from a class.
            Object::VSphereClusterTemplate(_) => Ok(()),
        }
    }

    /// Continue from a state file: stored objects stay (with everything the controllers
    /// wrote); the manifests overlay what they say. New objects get their identity now.
    /// An object whose manifest cannot be laid over its stored state is an error naming it.
    pub fn with_state(mut self, state: Option<&Store>, now: &Time) -> Result<Self, InputError> {
        let empty = Store::default();
        let mut problems = Vec::new();
        {
            let st = state.unwrap_or(&empty);
            fn merge<T: Serialize + DeserializeOwned + Clone>(
                kind: &str,
                mine: &mut BTreeMap<String, T>,
                stored: &BTreeMap<String, T>,
                spec_keys: &[&str],
                problems: &mut Vec<String>,
            ) {
                for (k, m) in mine.iter_mut() {
                    // What the manifest applies, recorded as `kubectl apply` would.
                    let base = stored.get(k).unwrap_or(m);
                    match overlay(base, m, spec_keys) {
                        Ok(o) => *m = o,
                        Err(e) => problems.push(format!("{kind} {k}: {e}")),
                    }
                }
                for (k, s) in stored {
                    mine.entry(k.clone()).or_insert_with(|| s.clone());
                }
            }
            let p = &mut problems;
            merge(
                "VSphereFailureDomain",
                &mut self.failure_domains,
                &st.failure_domains,
                &["spec"],
                p,
            );
            merge(
                "VSphereDeploymentZone",
                &mut self.zones,
                &st.zones,
                &["spec"],
                p,
            );
            merge(
                "VSphereCluster",
                &mut self.clusters,
                &st.clusters,
                &["spec"],
                p,
            );
            merge("Machine", &mut self.machines, &st.machines, &["spec"], p);
            merge(
                "Cluster",
                &mut self.capi_clusters,
                &st.capi_clusters,
                &["spec"],
                p,
            );
            merge(
                "MachineDeployment",
                &mut self.machine_deployments,
                &st.machine_deployments,
                &["spec"],
                p,
            );
            merge(
                "Machine (cluster.x-k8s.io)",
                &mut self.capi_machines,
                &st.capi_machines,
                &["spec"],
                p,
            );
            merge(
                "VSphereMachine",
                &mut self.vsphere_machines,
                &st.vsphere_machines,
                &["spec"],
                p,
            );
            merge(
                "ControlPlaneMachineSet",
                &mut self.machine_sets,
                &st.machine_sets,
                &["spec"],
                p,
            );
            merge(
                "MachineHealthCheck",
                &mut self.health_checks,
                &st.health_checks,
                &["spec"],
                p,
            );
            // A Node the manifests give replaces the stored one whole (status included): that
            // is how a test makes a node NotReady.
            for (k, n) in &st.nodes {
                self.nodes.entry(k.clone()).or_insert_with(|| n.clone());
            }
            // The Infrastructure is OpenShift's (its status is the installer's): one the
            // manifests give replaces the stored one whole.
            for (k, i) in &st.infrastructures {
                self.infrastructures
                    .entry(k.clone())
                    .or_insert_with(|| i.clone());
            }
            // Claims and addresses are the controllers' (never in manifests); pools are the
            // manifests' only.
            self.ip_claims = st.ip_claims.clone();
            self.ip_addresses = st.ip_addresses.clone();
            // VSphereVMs are local mode's own, as claims are.
            self.vsphere_vms = st.vsphere_vms.clone();
            self.events = st.events.clone();
        }
        self.events_before_run = self.events.len();
        for fd in self.failure_domains.values_mut() {
            born(&mut fd.metadata, now);
        }
        for z in self.zones.values_mut() {
            born(&mut z.metadata, now);
        }
        for c in self.clusters.values_mut() {
            born(&mut c.metadata, now);
        }
        for m in self.machines.values_mut() {
            born(&mut m.metadata, now);
        }
        for c in self.machine_sets.values_mut() {
            born(&mut c.metadata, now);
        }
        for h in self.health_checks.values_mut() {
            born(&mut h.metadata, now);
        }
        for n in self.nodes.values_mut() {
            born(&mut n.metadata, now);
        }
        for c in self
            .capi_clusters
            .values_mut()
            .chain(self.machine_deployments.values_mut())
            .chain(self.capi_machines.values_mut())
        {
            born(&mut c.metadata, now);
        }
        for v in self.vsphere_machines.values_mut() {
            born(&mut v.metadata, now);
        }
        for i in self.infrastructures.values_mut() {
            born(&mut i.metadata, now);
        }
        if problems.is_empty() {
            Ok(self)
        } else {
            Err(InputError { problems })
        }
    }

    /// Every object (never Secrets, never the pools: they come from the manifests), as JSON, in a
    /// stable order: infrastructures, failure domains, zones, clusters, machine sets, health
    /// checks, machines, IP address claims, IP addresses, nodes; then Cluster API's: Clusters,
    /// MachineDeployments, Machines, VSphereMachines, VSphereVMs.
    pub fn objects(&self) -> Vec<serde_json::Value> {
        fn all<T: Serialize>(m: &BTreeMap<String, T>, out: &mut Vec<serde_json::Value>) {
            out.extend(m.values().filter_map(|o| serde_json::to_value(o).ok()));
        }
        let mut v = Vec::new();
        all(&self.infrastructures, &mut v);
        all(&self.failure_domains, &mut v);
        all(&self.zones, &mut v);
        all(&self.clusters, &mut v);
        all(&self.machine_sets, &mut v);
        all(&self.health_checks, &mut v);
        all(&self.machines, &mut v);
        all(&self.ip_claims, &mut v);
        all(&self.ip_addresses, &mut v);
        for n in self.nodes.values() {
            let mut n = serde_json::to_value(n).unwrap_or_default();
            n["apiVersion"] = "v1".into();
            n["kind"] = "Node".into();
            v.push(n);
        }
        all(&self.capi_clusters, &mut v);
        all(&self.machine_deployments, &mut v);
        all(&self.capi_machines, &mut v);
        all(&self.vsphere_machines, &mut v);
        all(&self.vsphere_vms, &mut v);
        v
    }

    /// Events recorded during this run, in order.
    pub fn run_events(&self) -> &[Event] {
        &self.events[self.events_before_run.min(self.events.len())..]
    }

    /// Write the state file atomically (a temporary file renamed over it), so a run killed at
    /// any point leaves either the previous state or the new one.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let mut items = self.objects();
        let keep = self.events.len().saturating_sub(EVENTS_KEPT);
        for e in &self.events[keep..] {
            let mut e = serde_json::to_value(e).unwrap_or_default();
            e["apiVersion"] = "v1".into();
            e["kind"] = "Event".into();
            items.push(e);
        }
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        let body = serde_json::to_vec_pretty(&list).map_err(std::io::Error::other)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(dir)?;
        }
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        // A leftover of a killed run is ours to replace; anything else at that name (a link
        // planted to make us write elsewhere) is refused by create_new, which never follows it.
        if std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.is_file()) {
            std::fs::remove_file(&tmp)?;
        }
        {
            use std::io::Write as _;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut f = options.open(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    }

    /// Read a state file; a missing file is an empty state.
    pub fn load_state(path: &Path) -> Result<Option<Store>, InputError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(InputError {
                    problems: vec![format!("state file {}: {e}", path.display())],
                });
            }
        };
        let bad = |why: String| InputError {
            problems: vec![format!(
                "state file {}: {why} (move it away to start over; VMs already created are then not known to this run)",
                path.display()
            )],
        };
        let list: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let items = list
            .get("items")
            .and_then(|i| i.as_array())
            .ok_or_else(|| bad("not a v1 List".into()))?;
        let mut st = Store::default();
        for item in items {
            let kind = item
                .get("kind")
                .and_then(|k| k.as_str())
                .unwrap_or_default();
            if kind == "Event" {
                st.events.push(
                    serde_json::from_value(item.clone()).map_err(|e| bad(format!("Event: {e}")))?,
                );
                continue;
            }
            let obj = LoadedObject {
                source: crate::api::manifest::Source {
                    file: path.to_path_buf(),
                    document: 0,
                    line: 0,
                },
                value: item.clone(),
            };
            let typed = obj
                .typed()
                .map_err(|e| bad(format!("{kind} {}: {e}", obj.name())))?;
            st.insert(typed)
                .map_err(|k| bad(format!("duplicate {kind} {k}")))?;
        }
        st.manifest_nodes.clear();
        Ok(Some(st))
    }
}

#[cfg(all(test, unix))]
mod save_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The state file is the operator's alone (0600 in a 0700 directory), and a link planted at
    /// the temporary name is refused rather than followed.
    #[test]
    fn the_state_file_is_private_and_a_planted_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/s.json");
        let store = Store::default();
        store.save(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        let err = store.save(&path).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    }
}

/// A state file as the release before VSphereVM moved onto the hub wrote it (generated by that
/// build: tests/fixtures/local-state/README.md), loaded by this one (hub-types §4.5).
#[cfg(test)]
mod earlier_state_tests {
    use super::*;
    use crate::api::infrastructure::v1beta2::clone_spec::PowerOffMode;
    use crate::api::vsphere_vm::SecretReference;
    use crate::plan::capi_machine::actuated::machine_for;
    use crate::plan::machine::tests::{input, placement};
    use crate::plan::machine::{VmObs, instance_uuid, plan_machine, user_data::UserData};
    use crate::vcenter::MoRef;

    #[test]
    fn an_earlier_state_file_loads_with_its_vm_acted_on_and_nothing_to_do_in_vcenter() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/local-state/capi-v1beta1-vm.state.json");
        let st = Store::load_state(&path).unwrap().unwrap();
        assert_eq!(st.zones.len(), 3);
        let vm = &st.vsphere_vms["default/md-a-0"];
        // Its v1beta1 spec as the hub has it.
        let boot = SecretReference {
            name: "boot".into(),
        };
        assert_eq!(vm.spec.bootstrap_ref.as_ref(), Some(&boot));
        assert_eq!(vm.spec.power_off_mode, Some(PowerOffMode::Hard));
        assert_eq!(vm.spec.clone.num_cpus, Some(1));
        // The actuator's state came along: the stand-in is the provisioned machine it was,
        // its VM the one the clone made (the VSphereVM's UID as instance UUID).
        let m = machine_for(vm);
        let status = m.status.clone().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Provisioned"));
        let bios = "40e653bf-eaf2-538f-bad2-ea028725c430";
        assert_eq!(instance_uuid(&m), vm.metadata.uid);
        assert_eq!(m.spec.provider_id, Some(format!("vsphere://{bios}")));
        // The planner, given that VM as vCenter reports it, changes nothing in vCenter.
        let mut i = input(&m);
        i.placement = Some(Ok(placement(None)));
        i.user_data = UserData::NotNamed;
        i.vm = Some(VmObs {
            moref: Some(MoRef::new("VirtualMachine", "vm-61")),
            bios_uuid: Some(bios.into()),
            power_state: Some("poweredOn".into()),
            ip_address: Some("10.0.0.10".into()),
            path: "/DC0/vm/md-a-0".into(),
            guest_metadata: Some("md-a-0".into()),
            ..VmObs::default()
        });
        let plan = plan_machine(&i);
        assert_eq!(plan.vm, None, "{plan:#?}");
        // Saved again, it is stored at the hub and loads back the same.
        let dir = tempfile::tempdir().unwrap();
        let again = dir.path().join("state.json");
        st.save(&again).unwrap();
        let text = std::fs::read_to_string(&again).unwrap();
        let list: serde_json::Value = serde_json::from_str(&text).unwrap();
        let stored = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["kind"] == "VSphereVM")
            .unwrap();
        assert_eq!(stored["apiVersion"], crate::api::infrastructure::HUB);
        let back = Store::load_state(&again).unwrap().unwrap();
        assert_eq!(&back.vsphere_vms["default/md-a-0"], vm);
    }
}
