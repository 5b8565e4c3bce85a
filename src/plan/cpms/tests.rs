//! Whole-planner tests: fixtures, a small simulator (apply the plan, let machines become ready,
//! let deleted machines go), the upstream bugs and the bad-input cases.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::api::ObjectMeta;
use serde_json::{Value, json};

use super::*;
use crate::api::conditions::find_meta;
use crate::api::control_plane_machine_set::{
    ControlPlaneMachineSetSpec, ControlPlaneMachineSetStrategy, ControlPlaneMachineSetTemplate,
    ControlPlaneMachineSetTemplateObjectMeta, FailureDomains,
    OpenShiftMachineV1Beta1MachineTemplate, VSphereFailureDomainRef,
};
use crate::api::machine::{
    CLUSTER_ID_LABEL, MACHINE_ROLE_LABEL, MACHINE_TYPE_LABEL, MachineSpec, MachineStatus, Workspace,
};

pub(crate) const NS: &str = "openshift-machine-api";

pub(crate) fn labels() -> BTreeMap<String, String> {
    [
        (CLUSTER_ID_LABEL, "ocp"),
        (MACHINE_ROLE_LABEL, "master"),
        (MACHINE_TYPE_LABEL, "master"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

pub(crate) fn template_spec() -> Value {
    json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "VSphereMachineProviderSpec",
        "template": "/dc1/vm/rhcos",
        "numCPUs": 4,
        "memoryMiB": 16384,
        "diskGiB": 120,
        "userDataSecret": {"name": "master-user-data"},
        "credentialsSecret": {"name": "vsphere-cloud-credentials"},
        "network": {"devices": [{"networkName": "ignored-by-domains"}]}
    })
}

pub(crate) fn fill(zone: &str) -> ZoneFill {
    ZoneFill {
        workspace: Workspace {
            server: Some("vc.example.com".into()),
            datacenter: Some("/dc1".into()),
            folder: Some("/dc1/vm".into()),
            datastore: Some(format!("/dc1/datastore/ds-{zone}")),
            resource_pool: Some(format!("/dc1/host/cl-{zone}/Resources")),
            vm_group: None,
        },
        networks: vec![format!("/dc1/network/net-{zone}")],
        template: None,
        region: "r".into(),
        zone: zone.into(),
    }
}

pub(crate) fn cpms(domains: &[&str], strategy: Strategy) -> ControlPlaneMachineSet {
    let failure_domains = (!domains.is_empty()).then(|| FailureDomains {
        platform: "VSphere".into(),
        vsphere: Some(
            domains
                .iter()
                .map(|d| VSphereFailureDomainRef {
                    name: d.to_string(),
                })
                .collect(),
        ),
        ..FailureDomains::default()
    });
    let mut c = ControlPlaneMachineSet::new(
        "cluster",
        ControlPlaneMachineSetSpec {
            machine_name_prefix: None,
            state: Some(ControlPlaneMachineSetState::Active),
            replicas: Some(3),
            strategy: Some(ControlPlaneMachineSetStrategy {
                type_: Some(strategy),
            }),
            selector: LabelSelector {
                match_labels: Some(labels()),
                ..LabelSelector::default()
            },
            template: ControlPlaneMachineSetTemplate {
                machine_type: Some(
                    crate::api::control_plane_machine_set::ControlPlaneMachineSetMachineType::MachinesV1Beta1MachineOpenshiftIo,
                ),
                machines_v1beta1_machine_openshift_io: Some(OpenShiftMachineV1Beta1MachineTemplate {
                    failure_domains,
                    metadata: ControlPlaneMachineSetTemplateObjectMeta {
                        labels: labels(),
                        annotations: None,
                    },
                    spec: MachineSpec {
                        provider_spec: Some(ProviderSpec {
                            value: Some(template_spec()),
                        }),
                        ..MachineSpec::default()
                    },
                }),
            },
        },
    );
    c.metadata.namespace = Some(NS.into());
    c.metadata.uid = Some("cpms-uid".into());
    c.metadata.generation = Some(2);
    c
}

pub(crate) fn domains(names: &[&str]) -> BTreeMap<String, DomainState> {
    names
        .iter()
        .map(|n| {
            (
                n.to_string(),
                DomainState {
                    exists: true,
                    ready: true,
                    control_plane: true,
                    fill: Some(fill(n)),
                },
            )
        })
        .collect()
}

pub(crate) fn at(second: i64) -> Time {
    Time(jiff::Timestamp::from_second(second).unwrap())
}

/// Running on the node of that name.
pub(crate) fn running(node: &str) -> MachineStatus {
    MachineStatus {
        phase: Some(phase::RUNNING.into()),
        node_ref: Some(ObjectReference {
            name: Some(node.into()),
            ..ObjectReference::default()
        }),
        ..MachineStatus::default()
    }
}

/// A machine of the CPMS in `zone`, Running with a Ready node named after it.
pub(crate) fn machine(name: &str, zone: &str, created: i64) -> Machine {
    let value = spec::inject(&template_spec(), &fill(zone));
    let mut m = Machine::new(
        name,
        MachineSpec {
            provider_spec: Some(ProviderSpec { value: Some(value) }),
            ..MachineSpec::default()
        },
    );
    m.metadata = ObjectMeta {
        name: Some(name.into()),
        namespace: Some(NS.into()),
        labels: Some(labels()),
        creation_timestamp: Some(at(created)),
        ..ObjectMeta::default()
    };
    m.status = Some(running(name));
    m
}

/// A control plane and its surroundings, driven by the planner.
#[derive(Clone, Debug)]
pub(crate) struct World {
    pub cpms: ControlPlaneMachineSet,
    pub machines: Vec<Machine>,
    pub domains: BTreeMap<String, DomainState>,
    pub nodes: BTreeMap<String, NodeState>,
    pub now: Time,
    pub seed: u64,
    pub clock: i64,
}

impl World {
    pub fn new(cpms: ControlPlaneMachineSet, zones: &[&str]) -> Self {
        World {
            cpms,
            machines: Vec::new(),
            domains: domains(zones),
            nodes: BTreeMap::new(),
            now: at(1_000_000),
            seed: 7,
            clock: 100,
        }
    }

    /// Adds a ready machine in `zone`.
    pub fn add(&mut self, name: &str, zone: &str) {
        self.clock += 1;
        self.machines.push(machine(name, zone, self.clock));
        self.node(name, true);
    }

    pub fn node(&mut self, name: &str, ready: bool) {
        self.nodes.insert(
            name.into(),
            NodeState {
                ready,
                ready_transition: None,
                control_plane: true,
            },
        );
    }

    pub fn plan(&self) -> CpmsPlan {
        plan(&CpmsInput {
            cpms: &self.cpms,
            machines: &self.machines,
            domains: &self.domains,
            nodes: &self.nodes,
            now: &self.now,
            seed: self.seed,
            recovered: &Default::default(),
        })
    }

    /// Applies a plan through the one applier both shells use (`reconcile::cpms::apply`, over
    /// local mode's object store holding this world's machines, each with the machine
    /// controller's finalizer), so what the tests see is what the shells do: creations
    /// confirmed on a fresh list, adoption, labels. Deleted machines get the Deleting phase the
    /// machine controller would set.
    pub fn apply(&mut self, p: &CpmsPlan) {
        self.stored();
        let planned_on = self.machines.clone();
        let failed = self.apply_planned_on(p, &planned_on);
        assert!(failed.is_empty(), "the applier failed: {failed:?}");
    }

    /// [`World::apply`] of a plan made on `planned_on` (a stale cache, when it is not this
    /// world's machines): the applier's fresh read is the world's. Returns the writes that
    /// failed.
    pub fn apply_planned_on(
        &mut self,
        p: &CpmsPlan,
        planned_on: &[Machine],
    ) -> Vec<crate::reconcile::kube_ops::KubeError> {
        use crate::local::cluster::LocalCluster;
        use crate::local::store::Store;
        self.stored();
        self.clock += 1;
        let mut store = Store::default();
        let cpms_key = format!(
            "{NS}/{}",
            self.cpms.metadata.name.as_deref().unwrap_or_default()
        );
        store.machine_sets.insert(cpms_key, self.cpms.clone());
        for m in &self.machines {
            let name = m.metadata.name.clone().unwrap_or_default();
            store.machines.insert(format!("{NS}/{name}"), m.clone());
        }
        let cluster = LocalCluster::new(store, None, at(self.clock));
        let input = CpmsInput {
            cpms: &self.cpms,
            machines: planned_on,
            domains: &self.domains,
            nodes: &self.nodes,
            now: &self.now,
            seed: self.seed,
            recovered: &Default::default(),
        };
        let doms = domains::Domains {
            states: self.domains.clone(),
            ..Default::default()
        };
        let done =
            futures::executor::block_on(crate::reconcile::cpms::apply(&cluster, &input, p, &doms));
        let store = cluster.into_store();
        self.machines = store.machines.into_values().collect();
        self.machines
            .sort_by_key(|m| m.metadata.creation_timestamp.clone().map(|t| t.0));
        for m in &mut self.machines {
            if m.metadata.deletion_timestamp.is_some() {
                m.status.get_or_insert_with(MachineStatus::default).phase =
                    Some(phase::DELETING.into());
            }
        }
        self.seed = self.seed.wrapping_add(1);
        done.failed
    }

    /// The machines as a store holds them: a UID, and the machine controller's finalizer.
    pub fn stored(&mut self) {
        for m in &mut self.machines {
            let name = m.metadata.name.clone().unwrap_or_default();
            m.metadata.uid.get_or_insert_with(|| format!("uid-{name}"));
            let f = m.metadata.finalizers.get_or_insert_with(Vec::new);
            if !f
                .iter()
                .any(|x| x == crate::api::machine::MACHINE_FINALIZER)
            {
                f.push(crate::api::machine::MACHINE_FINALIZER.into());
            }
        }
    }

    /// The world moves on: new machines become Running with Ready nodes, deleted ones go.
    pub fn settle(&mut self) {
        let gone: Vec<String> = self
            .machines
            .iter()
            .filter(|m| m.metadata.deletion_timestamp.is_some())
            .filter_map(|m| m.metadata.name.clone())
            .collect();
        self.machines
            .retain(|m| m.metadata.deletion_timestamp.is_none());
        for g in gone {
            self.nodes.remove(&g);
        }
        let fresh: Vec<String> = self
            .machines
            .iter()
            .filter(|m| m.status.is_none())
            .filter_map(|m| m.metadata.name.clone())
            .collect();
        for name in fresh {
            if let Some(m) = self
                .machines
                .iter_mut()
                .find(|m| m.metadata.name.as_deref() == Some(name.as_str()))
            {
                m.status = Some(running(&name));
            }
            self.node(&name, true);
        }
    }

    /// Plans and applies until a pass changes nothing, settling in between; returns the plans.
    pub fn converge(&mut self, max: usize) -> Vec<CpmsPlan> {
        let mut plans = Vec::new();
        for _ in 0..max {
            let p = self.plan();
            let idle = p.create.is_empty() && p.delete.is_empty();
            self.apply(&p);
            plans.push(p);
            if idle && !self.machines.iter().any(|m| m.status.is_none()) {
                break;
            }
            self.settle();
        }
        plans
    }

    pub fn zone_of(&self, m: &Machine) -> String {
        let fills: BTreeMap<String, ZoneFill> = self
            .domains
            .iter()
            .filter_map(|(n, d)| d.fill.clone().map(|f| (n.clone(), f)))
            .collect();
        spec::domain_of(&machine_value(m), &fills)
    }

    pub fn zones(&self) -> Vec<String> {
        let mut z: Vec<String> = self.machines.iter().map(|m| self.zone_of(m)).collect();
        z.sort();
        z
    }

    pub fn names(&self) -> BTreeSet<String> {
        self.machines.iter().map(name_of).collect()
    }
}

/// The CPMS machine template.
pub(crate) fn template_of(
    c: &mut ControlPlaneMachineSet,
) -> &mut OpenShiftMachineV1Beta1MachineTemplate {
    let t = c
        .spec
        .template
        .machines_v1beta1_machine_openshift_io
        .as_mut();
    t.expect("machine template")
}

/// The CPMS template's provider spec.
pub(crate) fn template_mut(c: &mut ControlPlaneMachineSet) -> &mut Value {
    let p = template_of(c).spec.provider_spec.as_mut();
    p.and_then(|p| p.value.as_mut())
        .expect("template provider spec")
}

/// A machine's provider spec.
pub(crate) fn value_mut(m: &mut Machine) -> &mut Value {
    let p = m.spec.provider_spec.as_mut();
    p.and_then(|p| p.value.as_mut()).expect("provider spec")
}

fn three_zones() -> World {
    let mut w = World::new(
        cpms(&["a", "b", "c"], Strategy::RollingUpdate),
        &["a", "b", "c"],
    );
    w.add("ocp-master-0", "a");
    w.add("ocp-master-1", "b");
    w.add("ocp-master-2", "c");
    w
}

fn cond<'p>(p: &'p CpmsPlan, t: &str) -> &'p crate::api::conditions::MetaCondition {
    find_meta(p.status.conditions.as_deref().unwrap_or_default(), t).unwrap()
}

#[test]
fn a_fresh_cpms_creates_one_machine_per_domain() {
    let w = World::new(
        cpms(&["a", "b", "c"], Strategy::RollingUpdate),
        &["a", "b", "c"],
    );
    let p = w.plan();
    assert_eq!(p.refused, None);
    let got: Vec<(i32, Option<&str>)> = p
        .create
        .iter()
        .map(|c| (c.index, c.domain.as_deref()))
        .collect();
    assert_eq!(got, [(0, Some("a")), (1, Some("b")), (2, Some("c"))]);
    let m = &p.create[1].machine;
    let name = m.metadata.name.as_deref().unwrap();
    assert!(
        name.starts_with("ocp-master-") && name.ends_with("-1"),
        "{name}"
    );
    assert_eq!(name.len(), "ocp-master-".len() + 5 + 2);
    assert_eq!(m.metadata.labels.as_ref(), Some(&labels()));
    assert_eq!(m.metadata.namespace.as_deref(), Some(NS));
    let owner = &m.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("ControlPlaneMachineSet", "cpms-uid", Some(true))
    );
    let v = machine_value(m);
    assert_eq!(v["workspace"]["resourcePool"], "/dc1/host/cl-b/Resources");
    assert_eq!(
        v["network"]["devices"],
        json!([{"networkName": "/dc1/network/net-b"}])
    );
    assert_eq!(v["numCPUs"], 4);
    // Each create is an event naming index and domain.
    assert!(
        p.events[1].message.contains("index 1 in failure domain b"),
        "{:?}",
        p.events
    );
    assert_eq!(p.status.replicas, Some(0));
    assert_eq!(p.status.unavailable_replicas, Some(3));
    assert_eq!(
        cond(&p, c::AVAILABLE).message,
        "Missing 3 available replica(s)"
    );
}

#[test]
fn steady_state_plans_nothing_and_reports_upstream_status() {
    let w = three_zones();
    let p = w.plan();
    assert!(p.create.is_empty() && p.delete.is_empty(), "{p:?}");
    assert_eq!(p.status.observed_generation, Some(2));
    assert_eq!(
        (
            p.status.replicas,
            p.status.ready_replicas,
            p.status.updated_replicas,
            p.status.unavailable_replicas
        ),
        (Some(3), Some(3), Some(3), Some(0))
    );
    assert_eq!(cond(&p, c::AVAILABLE).reason, c::ALL_REPLICAS_AVAILABLE);
    assert_eq!(cond(&p, c::DEGRADED).reason, c::AS_EXPECTED);
    assert_eq!(cond(&p, c::PROGRESSING).reason, c::ALL_REPLICAS_UPDATED);
    assert_eq!(cond(&p, status::FAILURE_DOMAINS_USABLE).status, STATUS_TRUE);
    assert_eq!(p.requeue, None);
    assert_eq!(p.adopt.len(), 3, "unowned machines are adopted");
}

#[test]
fn a_vertical_scale_rolls_out_one_index_at_a_time() {
    let mut w = three_zones();
    template_mut(&mut w.cpms)["numCPUs"] = json!(8);
    let before = w.cpms.clone();
    let mut order = Vec::new();
    for _ in 0..30 {
        let p = w.plan();
        assert_eq!(w.cpms, before, "the planner never changes the CPMS");
        assert!(w.machines.len() <= 4);
        assert!(
            p.create.len() + p.delete.len() <= 1,
            "one step at a time: {p:?}"
        );
        for c in &p.create {
            order.push(format!(
                "create {} {}",
                c.index,
                c.domain.as_deref().unwrap()
            ));
        }
        for d in &p.delete {
            order.push(format!(
                "delete {} {}",
                d.index,
                d.domain.as_deref().unwrap()
            ));
        }
        w.apply(&p);
        if p.create.is_empty() && p.delete.is_empty() && p.requeue.is_none() {
            break;
        }
        w.settle();
    }
    assert_eq!(
        order,
        [
            "create 0 a",
            "delete 0 a",
            "create 1 b",
            "delete 1 b",
            "create 2 c",
            "delete 2 c"
        ]
    );
    assert_eq!(w.zones(), ["a", "b", "c"]);
    assert!(w.machines.iter().all(|m| machine_value(m)["numCPUs"] == 8));
}

#[test]
fn a_replacement_is_deleted_only_once_ready_and_then_requeues_by_need() {
    let mut w = three_zones();
    template_mut(&mut w.cpms)["numCPUs"] = json!(8);
    let p = w.plan();
    assert_eq!(p.create.len(), 1);
    w.apply(&p);
    // The replacement has no node yet: wait, nothing deleted, come back in 5s.
    let p = w.plan();
    assert!(p.create.is_empty() && p.delete.is_empty());
    assert_eq!(p.requeue, Some(WAIT_REQUEUE));
    assert_eq!(cond(&p, c::PROGRESSING).reason, c::NEEDS_UPDATE_REPLICAS);
}

/// Adding a third domain to a CPMS whose 3 machines sit in 2 domains moves exactly one machine.
#[test]
fn adding_a_third_domain_moves_exactly_one_machine() {
    let mut w = World::new(cpms(&["a", "b"], Strategy::RollingUpdate), &["a", "b", "c"]);
    w.add("ocp-master-0", "a");
    w.add("ocp-master-1", "b");
    w.add("ocp-master-2", "a");
    assert!(w.plan().create.is_empty(), "balanced over two domains");
    let before = w.names();
    w.cpms = cpms(&["a", "b", "c"], Strategy::RollingUpdate);
    let plans = w.converge(20);
    let creates: usize = plans.iter().map(|p| p.create.len()).sum();
    let deletes: usize = plans.iter().map(|p| p.delete.len()).sum();
    assert_eq!((creates, deletes), (1, 1));
    assert_eq!(w.zones(), ["a", "b", "c"]);
    assert_eq!(before.difference(&w.names()).count(), 1);
}

/// A domain removed from the CPMS is drained by the rollout (cluster-api#6732 for KCP).
#[test]
fn a_removed_domain_is_drained() {
    let mut w = three_zones();
    w.cpms = cpms(&["a", "b"], Strategy::RollingUpdate);
    w.converge(30);
    assert_eq!(w.zones(), ["a", "a", "b"]);
}

/// OCPBUGS-3320: duplicate domains in the CPMS change nothing.
#[test]
fn duplicate_domains_change_nothing() {
    let mut w = three_zones();
    w.cpms = cpms(&["a", "a", "b", "c", "c"], Strategy::RollingUpdate);
    let p = w.plan();
    assert!(p.create.is_empty() && p.delete.is_empty(), "{p:?}");
    assert_eq!(p.refused, None);
}

/// SPLAT-1440 / OCPBUGS-32947 at the planner level: a machine naming its template by name and
/// carrying installer paths is up to date.
#[test]
fn no_spurious_rollout_from_template_name_or_paths() {
    let mut w = three_zones();
    for m in &mut w.machines {
        let v = value_mut(m);
        v["template"] = json!("rhcos");
        v["workspace"]["datacenter"] = json!("dc1");
        let pool = v["workspace"]["resourcePool"]
            .as_str()
            .unwrap()
            .replace("/Resources", "//Resources");
        v["workspace"]["resourcePool"] = json!(pool);
    }
    template_mut(&mut w.cpms)["workspace"] =
        json!({"folder": "/dc1/vm/elsewhere", "resourcePool": "/dc1/host/x/Resources"});
    let p = w.plan();
    assert!(p.create.is_empty() && p.delete.is_empty(), "{:?}", p.notes);
    assert_eq!(p.status.updated_replicas, Some(3));
}

#[test]
fn on_delete_replaces_a_deleted_machine_in_its_domain_and_never_deletes() {
    let mut w = three_zones();
    w.cpms = cpms(&["a", "b", "c"], Strategy::OnDelete);
    template_mut(&mut w.cpms)["numCPUs"] = json!(8);
    let p = w.plan();
    assert!(p.create.is_empty() && p.delete.is_empty());
    w.machines[1].metadata.deletion_timestamp = Some(w.now.clone());
    let p = w.plan();
    let got: Vec<(i32, Option<&str>)> = p
        .create
        .iter()
        .map(|c| (c.index, c.domain.as_deref()))
        .collect();
    assert_eq!(got, [(1, Some("b"))]);
    assert_eq!(p.create[0].replaces.as_deref(), Some("ocp-master-1"));
    assert!(p.delete.is_empty());
}

/// OCPBUGS-4297 / OCPBUGS-7516: the plan names the index; the shell re-reads uncached and
/// `confirm_create` vetoes the create when a replacement is already there.
#[test]
fn a_stale_cache_never_makes_a_second_replacement() {
    let mut w = three_zones();
    w.machines[1].metadata.deletion_timestamp = Some(w.now.clone());
    let input_machines = w.machines.clone();
    let p = w.plan();
    assert_eq!(p.create.len(), 1);
    let create = &p.create[0];
    let input = CpmsInput {
        cpms: &w.cpms,
        machines: &input_machines,
        domains: &w.domains,
        nodes: &w.nodes,
        now: &w.now,
        seed: 0,
        recovered: &Default::default(),
    };
    // Fresh read equal to the cache: go ahead.
    assert!(confirm_create(&input, &input_machines, create));
    // Fresh read shows the replacement a previous pass made (pending, up to date): skip.
    let mut fresh = input_machines.clone();
    let mut replacement = create.machine.clone();
    replacement.metadata.name = Some("ocp-master-zzzzz-1".into());
    fresh.push(replacement);
    assert!(!confirm_create(&input, &fresh, create));
}

#[test]
fn inactive_reports_status_only() {
    let mut w = three_zones();
    w.cpms.spec.state = Some(ControlPlaneMachineSetState::Inactive);
    w.machines.remove(2);
    w.nodes.remove("ocp-master-2");
    let p = w.plan();
    assert!(p.create.is_empty() && p.delete.is_empty() && p.adopt.is_empty());
    assert_eq!(p.status.unavailable_replicas, Some(1));
}

fn refused(w: &World, reason: &str, field: &str) {
    let p = w.plan();
    assert_eq!(p.refused, Some(reason), "{:?}", p.status.conditions);
    assert!(p.create.is_empty() && p.delete.is_empty() && p.adopt.is_empty());
    let d = cond(&p, c::DEGRADED);
    assert_eq!(
        (d.status.as_str(), d.reason.as_str()),
        (STATUS_TRUE, reason)
    );
    assert!(
        d.message.contains(field),
        "{} does not name {field}",
        d.message
    );
    assert_eq!(cond(&p, c::PROGRESSING).reason, c::OPERATOR_DEGRADED);
    assert!(
        p.events
            .iter()
            .any(|e| e.warning && e.message.contains(field))
    );
}

#[test]
fn bad_input_is_refused_naming_the_field() {
    let mut w = three_zones();
    w.cpms = cpms(&["a", "b", "nowhere"], Strategy::RollingUpdate);
    refused(&w, status::INVALID_SPEC, "failureDomains.vsphere[2].name");

    let mut w = three_zones();
    template_of(&mut w.cpms)
        .failure_domains
        .as_mut()
        .unwrap()
        .vsphere = Some(vec![]);
    refused(&w, status::INVALID_SPEC, "failureDomains.vsphere");

    let mut w = three_zones();
    w.cpms.spec.replicas = Some(4);
    refused(&w, status::INVALID_SPEC, "spec.replicas");

    let mut w = three_zones();
    template_of(&mut w.cpms)
        .metadata
        .labels
        .insert(CLUSTER_ID_LABEL.into(), "other".into());
    refused(&w, status::INVALID_SPEC, "metadata.labels");
}

#[test]
fn refusal_gates_follow_upstream() {
    // No ready machine.
    let mut w = three_zones();
    for n in w.nodes.values_mut() {
        n.ready = false;
    }
    refused(&w, c::NO_READY_MACHINES, "No ready control plane machines");
    // A control plane node without a machine.
    let mut w = three_zones();
    w.node("stray-master", true);
    refused(&w, c::UNMANAGED_NODES, "1 unmanaged node");
    // More indexes than replicas.
    let mut w = three_zones();
    w.add("ocp-master-3", "a");
    refused(&w, c::EXCESS_INDEXES, "1 index(es) in excess");
    // OnDelete with two updated machines in an index.
    let mut w = three_zones();
    w.cpms = cpms(&["a", "b", "c"], Strategy::OnDelete);
    w.add("ocp-master-extra-0", "a");
    w.machines.last_mut().unwrap().metadata.name = Some("ocp-master-x-0".into());
    refused(&w, c::EXCESS_UPDATED_REPLICAS, "for index 0");
    // A failed replacement while the outdated machine is still there.
    let mut w = three_zones();
    template_mut(&mut w.cpms)["numCPUs"] = json!(8);
    let p = w.plan();
    w.apply(&p);
    let last = w.machines.last_mut().unwrap();
    last.status = Some(MachineStatus {
        error_message: Some("clone failed".into()),
        phase: Some(phase::FAILED.into()),
        ..MachineStatus::default()
    });
    refused(
        &w,
        c::FAILED_REPLACEMENT,
        "1 replacement machine(s) in error state",
    );
}

#[test]
fn a_machine_owned_by_another_controller_degrades_without_stopping() {
    let mut w = three_zones();
    w.machines[0].metadata.owner_references = Some(vec![OwnerReference {
        controller: Some(true),
        uid: "someone-else".into(),
        ..OwnerReference::default()
    }]);
    w.machines.remove(2);
    w.nodes.remove("ocp-master-2");
    let p = w.plan();
    assert_eq!(p.create.len(), 1);
    assert_eq!(cond(&p, c::DEGRADED).reason, c::MACHINES_ALREADY_OWNED);
    assert_eq!(p.adopt, ["ocp-master-1"]);
}

#[test]
fn a_not_ready_domain_keeps_its_machines_but_gets_no_new_one() {
    let mut w = three_zones();
    w.domains.get_mut("b").unwrap().ready = false;
    // Machine in b stays: nothing to do.
    let p = w.plan();
    assert!(p.create.is_empty() && p.delete.is_empty());
    let fd = cond(&p, status::FAILURE_DOMAINS_USABLE);
    assert_eq!(fd.status, STATUS_FALSE);
    assert!(fd.message.contains("b: not ready"), "{}", fd.message);
    // Its machine is deleted by someone: the replacement is held until b is ready.
    w.machines[1].metadata.deletion_timestamp = Some(w.now.clone());
    let p = w.plan();
    assert!(p.create.is_empty(), "{p:?}");
    assert!(
        p.notes
            .iter()
            .any(|n| n.message == updates::note::DOMAIN_HELD)
    );
    w.domains.get_mut("b").unwrap().ready = true;
    assert_eq!(w.plan().create.len(), 1);
}

#[test]
fn a_domain_closed_to_control_planes_is_moved_out() {
    let mut w = three_zones();
    w.domains.get_mut("c").unwrap().control_plane = false;
    w.converge(30);
    let zones = w.zones();
    assert!(!zones.contains(&"c".to_string()), "{zones:?}");
    assert_eq!(zones.len(), 3);
}

#[test]
fn a_node_not_ready_within_the_grace_still_counts_and_requeues_at_its_end() {
    let mut w = three_zones();
    let n = w.nodes.get_mut("ocp-master-1").unwrap();
    n.ready = false;
    n.ready_transition = Some(at(w.now.0.as_second() - 60));
    let p = w.plan();
    assert_eq!(p.status.ready_replicas, Some(3));
    assert_eq!(p.requeue, Some(Duration::from_secs(19 * 60 + 1)));
    w.nodes.get_mut("ocp-master-1").unwrap().ready_transition =
        Some(at(w.now.0.as_second() - 21 * 60));
    let p = w.plan();
    assert_eq!(p.status.ready_replicas, Some(2));
    // Not ready for good: upstream's wait for the node (OCPBUGS-10032).
    assert_eq!(p.requeue, Some(WAIT_REQUEUE));
}

#[test]
fn without_domains_the_template_is_used_as_it_is() {
    let mut w = World::new(cpms(&[], Strategy::RollingUpdate), &[]);
    w.cpms.spec.machine_name_prefix = Some("cp".into());
    let p = w.plan();
    assert_eq!(p.create.len(), 3);
    assert!(p.create.iter().all(|c| c.domain.is_none()));
    assert_eq!(machine_value(&p.create[0].machine), template_spec());
    assert!(
        p.create[0]
            .machine
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("cp-")
    );
    assert!(p.events[0].message.contains("the template's placement"));
}

/// A machine whose name carries no index takes the index its domain is mapped to.
#[test]
fn an_unindexed_name_is_placed_by_its_domain() {
    let mut w = three_zones();
    w.machines[0].metadata.name = Some("master-a".into());
    let p = w.plan();
    assert_eq!(p.refused, None);
    assert!(p.create.is_empty() && p.delete.is_empty(), "{p:?}");
    assert_eq!(p.status.unavailable_replicas, Some(0));
}

/// Without domains there is no mapping to place such a machine by: refuse, touch nothing.
#[test]
fn an_unindexable_machine_is_refused() {
    let mut w = World::new(cpms(&[], Strategy::RollingUpdate), &[]);
    w.add("master-a", "a");
    for m in &mut w.machines {
        *value_mut(m) = template_spec();
    }
    refused(&w, status::UNINDEXED_MACHINES, "master-a");
}

/// OCPBUGS-4297 through the one applier: the second pass plans on a cache that has not seen
/// the first pass's replacement (the watch is behind), so it plans the same replacement
/// again; the applier's fresh list sees the first one and creates nothing.
#[test]
fn a_replacement_planned_twice_on_a_stale_cache_is_created_once() {
    let mut w = three_zones();
    template_mut(&mut w.cpms)["numCPUs"] = json!(8);
    w.stored();
    let cache = w.machines.clone();
    let first = w.plan();
    assert_eq!(first.create.len(), 1, "{first:?}");
    w.apply(&first);
    assert_eq!(w.machines.len(), 4, "one replacement");
    let mut stale = w.clone();
    stale.machines = cache.clone();
    let second = stale.plan();
    assert_eq!(
        second.create.len(),
        1,
        "the stale cache asks again: {second:?}"
    );
    assert_eq!(second.create[0].index, first.create[0].index);
    let failed = w.apply_planned_on(&second, &cache);
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(
        w.machines.len(),
        4,
        "still one replacement: {:?}",
        w.machines
            .iter()
            .map(|m| m.metadata.name.clone())
            .collect::<Vec<_>>()
    );
}

/// A run that lost the set's Machines but finds their VMs (by identity) recreates each under its
/// own name, so the machine controller adopts the VM; indexes without one get fresh names.
#[test]
fn a_machine_whose_vm_survived_is_recreated_under_its_name() {
    let w = World::new(
        cpms(&["a", "b", "c"], Strategy::RollingUpdate),
        &["a", "b", "c"],
    );
    let recovered = [(1, "ocp-master-bcdfg-1".to_string())].into();
    let p = plan(&CpmsInput {
        cpms: &w.cpms,
        machines: &w.machines,
        domains: &w.domains,
        nodes: &w.nodes,
        now: &w.now,
        seed: w.seed,
        recovered: &recovered,
    });
    let names: Vec<(i32, String)> = p
        .create
        .iter()
        .map(|c| (c.index, c.machine.metadata.name.clone().unwrap_or_default()))
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(
        names.contains(&(1, "ocp-master-bcdfg-1".to_string())),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .filter(|(_, n)| n == "ocp-master-bcdfg-1")
            .count()
            == 1
    );
    assert!(p.events.iter().any(|e| e.message.contains("adopted")));
}
