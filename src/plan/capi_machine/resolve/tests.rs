//! Table tests of the resolution: the waits in CAPV's order, CAPV's overrides field by field,
//! and the CAPV bugs done better (#3575, #3376, #4128, missing/not-ready zones).
use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use serde_json::{Value, json};

use super::*;
use crate::plan::placement;
use crate::vcenter::model::inventory::Inventory;
use crate::vcenter::model::inventory::tests::{record, sample_records};

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn machine(fd: Option<&str>, control_plane: bool, data_secret: Option<&str>) -> CapiMachine {
    let mut labels = json!({"cluster.x-k8s.io/cluster-name": "demo"});
    if control_plane {
        labels["cluster.x-k8s.io/control-plane"] = "".into();
    }
    from(json!({
        "metadata": {"name": "demo-md-0-abcde", "namespace": "ns", "uid": "m-uid", "labels": labels},
        "spec": {"clusterName": "demo", "failureDomain": fd,
            "bootstrap": {"dataSecretName": data_secret}}
    }))
}

fn cluster(infra_ready: bool, cp_initialized: bool) -> CapiCluster {
    from(json!({
        "metadata": {"name": "demo", "namespace": "ns"},
        "spec": {},
        "status": {"infrastructureReady": infra_ready, "conditions": [
            {"type": "ControlPlaneInitialized", "status": if cp_initialized {"True"} else {"False"}}
        ]}
    }))
}

fn vsphere_machine(spec: Value) -> VSphereMachine {
    let mut full = json!({"template": "ubuntu-2404", "network": {"devices": [
        {"networkName": "template-net", "dhcp4": true}
    ]}});
    for (k, v) in spec.as_object().unwrap() {
        if v.is_null() {
            full.as_object_mut().unwrap().remove(k);
        } else {
            full[k] = v.clone();
        }
    }
    // Written at v1beta1 (the names these tables use), read at the hub as the controllers do.
    from(crate::api::conversion::to_typed(&json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereMachine",
        "metadata": {"name": "demo-md-0-xyz", "namespace": "ns", "uid": "vsm-uid"},
        "spec": full
    })))
}

fn zone(name: &str, ready: Option<bool>, constraint: Value) -> VSphereDeploymentZone {
    from(json!({
        "metadata": {"name": name},
        "spec": {"server": "vc.zone.example", "failureDomain": format!("fd-{name}"),
            "placementConstraint": constraint},
        "status": {"ready": ready}
    }))
}

fn failure_domain(name: &str, topology: Value) -> VSphereFailureDomain {
    from(json!({
        "metadata": {"name": name},
        "spec": {
            "region": {"name": "region-a", "type": "Datacenter", "tagCategory": "k8s-region"},
            "zone": {"name": "zone-a", "type": "ComputeCluster", "tagCategory": "k8s-zone"},
            "topology": topology
        }
    }))
}

fn secret(format: Option<&str>) -> Secret {
    let mut data = BTreeMap::from([("value".to_string(), ByteString(b"#cloud-config\n".to_vec()))]);
    if let Some(f) = format {
        data.insert("format".into(), ByteString(f.as_bytes().to_vec()));
    }
    Secret {
        data: Some(data),
        ..Secret::default()
    }
}

fn vsphere_cluster() -> VSphereCluster {
    from(json!({"metadata": {"name": "demo", "namespace": "ns"},
        "spec": {"server": "vc.cluster.example", "thumbprint": "AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB"}}))
}

/// One world: zone-a ready with its failure domain, a Cluster ready, the bootstrap Secret.
struct World {
    machine: CapiMachine,
    cluster: Option<CapiCluster>,
    vsm: VSphereMachine,
    vsc: Option<VSphereCluster>,
    zones: BTreeMap<String, VSphereDeploymentZone>,
    fds: BTreeMap<String, VSphereFailureDomain>,
    secret: Option<Secret>,
    existing: Option<VSphereVM>,
}

impl World {
    fn new() -> World {
        let z = zone(
            "zone-a",
            Some(true),
            json!({"resourcePool": "/DC0/host/C0/Resources/rp0", "folder": "/DC0/vm/capi"}),
        );
        let fd = failure_domain(
            "fd-zone-a",
            json!({"datacenter": "DC0", "computeCluster": "C0", "datastore": "LocalDS_0",
                "networks": ["VM Network"],
                "hosts": {"vmGroupName": "vms-a", "hostGroupName": "hosts-a"}}),
        );
        World {
            machine: machine(Some("zone-a"), false, Some("demo-md-0-abcde")),
            cluster: Some(cluster(true, true)),
            vsm: vsphere_machine(json!({})),
            vsc: Some(vsphere_cluster()),
            zones: [("zone-a".to_string(), z)].into(),
            fds: [("fd-zone-a".to_string(), fd)].into(),
            secret: Some(secret(None)),
            existing: None,
        }
    }

    fn resolve(&self) -> Result<Desired, Wait> {
        // As the edges do: a v1beta1 `spec.failureDomain` is held in the annotation.
        let legacy = crate::api::conversion::legacy_failure_domain(&self.vsm);
        resolve(&Input {
            machine: &self.machine,
            cluster: self.cluster.as_ref(),
            vsphere_machine: &self.vsm,
            vsphere_cluster: self.vsc.as_ref(),
            zones: &self.zones,
            failure_domains: &self.fds,
            bootstrap_secret: self.secret.as_ref(),
            existing_vm: self.existing.as_ref(),
            legacy_failure_domain: legacy.as_deref(),
        })
    }
}

#[test]
fn machines_wait_in_capv_order_naming_what_they_wait_for() {
    type Edit = fn(&mut World);
    let cases: Vec<(&str, Edit, &str, &str)> = vec![
        (
            "paused cluster",
            |w| w.cluster.as_mut().unwrap().spec = json!({"paused": true}),
            reason::PAUSED,
            "paused",
        ),
        (
            "paused VSphereMachine",
            |w| {
                w.vsm.metadata.annotations =
                    Some([("cluster.x-k8s.io/paused".to_string(), String::new())].into())
            },
            reason::PAUSED,
            "paused",
        ),
        (
            "no Cluster",
            |w| w.cluster = None,
            reason::WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            "Cluster ns/demo not found",
        ),
        (
            "cluster infrastructure not ready",
            |w| w.cluster = Some(cluster(false, false)),
            reason::WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            "infrastructure is not ready",
        ),
        (
            "a worker without bootstrap data waits for the control plane",
            |w| {
                w.machine = machine(Some("zone-a"), false, None);
                w.cluster = Some(cluster(true, false));
            },
            reason::WAITING_FOR_CONTROL_PLANE,
            "control plane is not initialized",
        ),
        (
            "a control-plane machine without bootstrap data waits for it",
            |w| {
                w.machine = machine(Some("zone-a"), true, None);
                w.cluster = Some(cluster(true, false));
            },
            reason::WAITING_FOR_BOOTSTRAP_DATA,
            "dataSecretName is not set",
        ),
        (
            "bootstrap Secret missing",
            |w| w.secret = None,
            reason::WAITING_FOR_BOOTSTRAP_DATA,
            "Secret ns/demo-md-0-abcde",
        ),
        (
            "unknown bootstrap format",
            |w| w.secret = Some(secret(Some("yaml"))),
            reason::WAITING_FOR_BOOTSTRAP_DATA,
            "format \"yaml\"",
        ),
        // CAPV logs and clones without the overrides; here nothing is cloned.
        (
            "zone missing",
            |w| w.zones.clear(),
            reason::WAITING_FOR_FAILURE_DOMAIN,
            "VSphereDeploymentZone zone-a (the machine's failure domain) not found",
        ),
        // CAPV never checks readiness on the machine path.
        (
            "zone not ready",
            |w| {
                w.zones
                    .get_mut("zone-a")
                    .unwrap()
                    .status
                    .as_mut()
                    .unwrap()
                    .ready = Some(false)
            },
            reason::WAITING_FOR_FAILURE_DOMAIN,
            "VSphereDeploymentZone zone-a is not ready",
        ),
        (
            "zone readiness unknown",
            |w| w.zones.get_mut("zone-a").unwrap().status = None,
            reason::WAITING_FOR_FAILURE_DOMAIN,
            "zone-a is not ready",
        ),
        (
            "failure domain missing",
            |w| w.fds.clear(),
            reason::WAITING_FOR_FAILURE_DOMAIN,
            "VSphereFailureDomain \"fd-zone-a\" (VSphereDeploymentZone zone-a spec.failureDomain) not found",
        ),
        (
            "no vCenter anywhere",
            |w| {
                w.machine = machine(None, false, Some("demo-md-0-abcde"));
                w.vsc = None;
            },
            reason::INVALID_CONFIGURATION,
            "spec.server",
        ),
        (
            "naming template that does not render",
            |w| {
                w.vsm =
                    vsphere_machine(json!({"namingStrategy": {"template": "{{ .machine.uid }}"}}))
            },
            reason::INVALID_CONFIGURATION,
            "spec.namingStrategy.template",
        ),
    ];
    for (name, edit, want_reason, says) in cases {
        let mut w = World::new();
        edit(&mut w);
        let got = w.resolve().expect_err(name);
        assert_eq!(got.reason, want_reason, "{name}: {}", got.message);
        assert!(got.message.contains(says), "{name}: {}", got.message);
    }
}

#[test]
fn failure_domain_overrides_are_capvs() {
    let mut w = World::new();
    w.vsm = vsphere_machine(json!({
        "server": "vc.machine.example", "datacenter": "*", "folder": "mine", "resourcePool": "mine",
        "datastore": "mine", "storagePolicyName": "gold", "tagIDs": ["urn:vmomi:InventoryServiceTag:5a2b3c4d-0000-0000-0000-000000000001:GLOBAL"],
        "powerOffMode": "trySoft", "guestSoftPowerOffTimeout": "2m0s", "numCPUs": 4, "memoryMiB": 8192
    }));
    let d = w.resolve().unwrap();
    let c = &d.vm.spec.clone;
    // server ← zone (always), datacenter ← FD (always), folder/pool ← zone, datastore ← FD.
    assert_eq!(c.server.as_deref(), Some("vc.zone.example"));
    assert_eq!(c.datacenter.as_deref(), Some("DC0"));
    assert_eq!(c.folder.as_deref(), Some("/DC0/vm/capi"));
    assert_eq!(
        c.resource_pool.as_deref(),
        Some("/DC0/host/C0/Resources/rp0")
    );
    assert_eq!(c.datastore.as_deref(), Some("LocalDS_0"));
    // Networks by index; the device keeps its own DHCP setting.
    let devs = &c.network.as_ref().unwrap().devices;
    assert_eq!(devs.len(), 1);
    assert_eq!(devs[0].network_name, "VM Network");
    assert_eq!(devs[0].dhcp4, Some(true));
    // Never overridden: template, storage policy, tags. Thumbprint from the cluster.
    assert_eq!(c.template, "ubuntu-2404");
    assert_eq!(c.storage_policy_name.as_deref(), Some("gold"));
    assert_eq!(c.tag_ids.as_ref().unwrap().len(), 1);
    assert_eq!(
        c.thumbprint.as_deref(),
        Some("AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB")
    );
    assert_eq!(d.vm.spec.power_off_mode, Some(PowerOffMode::TrySoft));
    assert_eq!(d.vm.spec.guest_soft_power_off_timeout_seconds, Some(120));
    // The provider spec the placement resolver reads, with the FD's VM group.
    let ws = d.provider_spec.workspace.clone().unwrap();
    assert_eq!(ws.server.as_deref(), Some("vc.zone.example"));
    assert_eq!(ws.datacenter.as_deref(), Some("DC0"));
    assert_eq!(ws.vm_group.as_deref(), Some("vms-a"));
    assert_eq!(d.provider_spec.num_cpus, Some(4));
    assert_eq!(d.provider_spec.memory_mib, Some(8192));
    assert_eq!(
        d.provider_spec.network.devices[0].network_name.as_deref(),
        Some("VM Network")
    );
    assert_eq!(d.region_zone, Some(("region-a".into(), "zone-a".into())));
    // Stored, not acted on: said so.
    assert_eq!(d.ignored, ["spec.storagePolicyName"]);
}

use crate::api::infrastructure::v1beta2::clone_spec::PowerOffMode;

#[test]
fn zone_without_constraints_keeps_the_machines_own_folder_pool_and_datastore() {
    let mut w = World::new();
    w.zones = [("zone-a".to_string(), zone("zone-a", Some(true), json!({})))].into();
    w.fds = [(
        "fd-zone-a".to_string(),
        failure_domain("fd-zone-a", json!({"datacenter": "DC0"})),
    )]
    .into();
    w.vsm = vsphere_machine(json!({"folder": "mine", "resourcePool": "rp0", "datastore": "ds9"}));
    let d = w.resolve().unwrap();
    let c = &d.vm.spec.clone;
    assert_eq!(
        (
            c.folder.as_deref(),
            c.resource_pool.as_deref(),
            c.datastore.as_deref()
        ),
        (Some("mine"), Some("rp0"), Some("ds9"))
    );
    assert_eq!(
        c.network.as_ref().unwrap().devices[0].network_name,
        "template-net"
    );
    assert_eq!(d.provider_spec.workspace.unwrap().vm_group, None);
}

/// CAPV #3575: CAPI copies `Machine.spec.failureDomain` late; CAPV's VM then powered on outside
/// the zone. The VSphereMachine's own failure domain is the fallback; the Machine's wins.
#[test]
fn failure_domain_falls_back_to_the_vsphere_machine_and_the_machine_wins() {
    let mut w = World::new();
    w.machine = machine(None, false, Some("demo-md-0-abcde"));
    w.vsm = vsphere_machine(json!({"failureDomain": "zone-a"}));
    let d = w.resolve().unwrap();
    assert_eq!(d.vm.spec.clone.server.as_deref(), Some("vc.zone.example"));
    assert_eq!(
        d.provider_spec.workspace.unwrap().vm_group.as_deref(),
        Some("vms-a")
    );

    let mut w = World::new();
    w.vsm = vsphere_machine(json!({"failureDomain": "zone-b"}));
    // The Machine says zone-a (ready); the VSphereMachine's zone-b does not even exist.
    assert_eq!(w.resolve().unwrap().region_zone.unwrap().1, "zone-a");

    // No failure domain anywhere: the VSphereMachine and the VSphereCluster place it.
    let mut w = World::new();
    w.machine = machine(None, false, Some("demo-md-0-abcde"));
    let d = w.resolve().unwrap();
    assert_eq!(
        d.vm.spec.clone.server.as_deref(),
        Some("vc.cluster.example")
    );
    assert_eq!(d.region_zone, None);
}

/// CAPV #3376: templates had to list devices the failure domain then replaced. Without
/// `spec.network` the failure domain's networks and network configurations make the devices.
#[test]
fn the_failure_domain_supplies_the_network_devices() {
    let mut w = World::new();
    w.vsm = vsphere_machine(json!({"network": null}));
    w.fds = [(
        "fd-zone-a".to_string(),
        failure_domain(
            "fd-zone-a",
            json!({"datacenter": "DC0", "networks": ["VM Network", "storage"],
            "networkConfigurations": [
                {"networkName": "VM Network", "dhcp4": true, "nameservers": ["10.0.0.53"],
                 "dhcp4Overrides": {"sendHostname": false}},
                {"networkName": "storage", "dhcp6": true},
                {"networkName": "backup", "dhcp4": false, "searchDomains": ["corp"]}
            ]}),
        ),
    )]
    .into();
    let d = w.resolve().unwrap();
    let devs = &d.vm.spec.clone.network.as_ref().unwrap().devices;
    let names: Vec<&str> = devs.iter().map(|d| d.network_name.as_str()).collect();
    assert_eq!(names, ["VM Network", "storage", "backup"]);
    assert_eq!(devs[0].dhcp4, Some(true));
    assert_eq!(
        devs[0].nameservers.as_deref(),
        Some(&["10.0.0.53".to_string()][..])
    );
    assert_eq!(
        devs[0].dhcp4_overrides.as_ref().unwrap().send_hostname,
        Some(false)
    );
    assert_eq!(devs[1].dhcp6, Some(true));
    assert_eq!(
        devs[2].search_domains.as_deref(),
        Some(&["corp".to_string()][..])
    );
    assert_eq!(d.provider_spec.network.devices.len(), 3);
}

/// The bootstrap Secret is read only to make the VSphereVM: once it exists, a Secret not read
/// (or gone) neither makes the machine wait nor changes what it wants.
#[test]
fn once_the_vsphere_vm_exists_the_bootstrap_secret_is_not_needed() {
    let mut w = World::new();
    let first = w.resolve().unwrap();
    w.existing = Some(first.vm.clone());
    w.secret = None;
    let again = w.resolve().unwrap();
    assert_eq!(again.vm, first.vm);
    assert_eq!(again.bootstrap, None);
}

#[test]
fn the_vsphere_vm_is_capvs_object() {
    let mut w = World::new();
    w.machine
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("cluster.x-k8s.io/control-plane".into(), String::new());
    w.existing = Some(from(json!({
        "metadata": {"name": "demo-md-0-abcde", "namespace": "ns"},
        "spec": {"template": "ubuntu-2404", "biosUUID": "4230-kept"}
    })));
    let d = w.resolve().unwrap();
    assert_eq!(d.vm.metadata.name.as_deref(), Some("demo-md-0-abcde"));
    assert_eq!(d.vm.metadata.namespace.as_deref(), Some("ns"));
    let labels = d.vm.metadata.labels.clone().unwrap();
    assert_eq!(labels["cluster.x-k8s.io/cluster-name"], "demo");
    assert!(labels.contains_key("cluster.x-k8s.io/control-plane"));
    let owner = &d.vm.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("VSphereMachine", "demo-md-0-xyz", "vsm-uid")
    );
    let r = d.vm.spec.bootstrap_ref.clone().unwrap();
    assert_eq!(r.name, "demo-md-0-abcde");
    assert_eq!(d.vm.spec.bios_uuid.as_deref(), Some("4230-kept"));
    assert_eq!(
        d.bootstrap, None,
        "the VSphereVM exists: its Secret is not read"
    );
    let mut fresh = World::new();
    fresh.existing = None;
    let data = fresh.resolve().unwrap().bootstrap.unwrap();
    assert_eq!(data.format, bootstrap::Format::CloudConfig);
    // The VSphereVM passes our own admission (CAPV's VSphereVM webhook rules).
    let v = serde_json::to_value(&d.vm).unwrap();
    let mut v = v;
    v["apiVersion"] = crate::api::Kind::VSphereVM.api_version().into();
    v["kind"] = "VSphereVM".into();
    let out = crate::webhook::admission::admit(&v, None, &crate::webhook::Ctx::default());
    assert!(out.allowed(), "{:?}", out.errors);
}

#[test]
fn names_follow_the_naming_strategy_and_the_windows_cut() {
    let mut w = World::new();
    w.vsm =
        vsphere_machine(json!({"namingStrategy": {"template": "{{ trunc 9 .machine.name }}-vm"}}));
    assert_eq!(
        w.resolve().unwrap().vm.metadata.name.as_deref(),
        Some("demo-md-0-vm")
    );
    let mut w = World::new();
    w.vsm = vsphere_machine(json!({"os": "Windows"}));
    assert_eq!(
        w.resolve().unwrap().vm.metadata.name.as_deref(),
        Some("demo-md-0-abcde")
    );
    w.machine.metadata.name = Some("demo-md-windows-abcde".into());
    assert_eq!(
        w.resolve().unwrap().vm.metadata.name.as_deref(),
        Some("demo-md-w-abcde")
    );
}

/// Two datacenters, each with its own copy of template `ubuntu` (CAPV #4128: templates
/// replicated per failure domain).
fn two_datacenter_inventory() -> Inventory {
    let mut c = sample_records();
    c.push(record(
        "VirtualMachine",
        "vm-t0",
        "ubuntu",
        Some(("Folder", "f-vm")),
    ));
    for (kind, value, name, parent) in [
        ("Datacenter", "dc-2", "DC1", ("Folder", "group-d1")),
        ("Folder", "f-vm2", "vm", ("Datacenter", "dc-2")),
        ("Folder", "f-host2", "host", ("Datacenter", "dc-2")),
        ("ClusterComputeResource", "c-2", "C2", ("Folder", "f-host2")),
        (
            "ResourcePool",
            "rp-2",
            "Resources",
            ("ClusterComputeResource", "c-2"),
        ),
        ("VirtualMachine", "vm-t1", "ubuntu", ("Folder", "f-vm2")),
    ] {
        c.push(record(kind, value, name, Some(parent)));
    }
    Inventory::from_records(c)
}

#[test]
fn the_template_resolves_in_the_failure_domains_datacenter() {
    let inv = two_datacenter_inventory();
    let mut w = World::new();
    w.vsm = vsphere_machine(json!({"template": "ubuntu", "network": null}));
    for (dc, pool, template_moref) in [
        ("DC0", "/DC0/host/C0/Resources", "vm-t0"),
        ("DC1", "/DC1/host/C2/Resources", "vm-t1"),
    ] {
        w.zones = [(
            "zone-a".to_string(),
            zone("zone-a", Some(true), json!({"resourcePool": pool})),
        )]
        .into();
        w.fds = [(
            "fd-zone-a".to_string(),
            failure_domain("fd-zone-a", json!({"datacenter": dc})),
        )]
        .into();
        let d = w.resolve().unwrap();
        let p = placement::resolve(&d.provider_spec, &inv).unwrap();
        assert_eq!(p.template.value, template_moref, "{dc}");
    }
    // Without a failure domain CAPV's `*` datacenter cannot choose: the error names the field
    // as the user wrote it.
    let mut w = World::new();
    w.machine = machine(None, false, Some("demo-md-0-abcde"));
    w.vsm = vsphere_machine(json!({"template": "ubuntu", "datacenter": "*", "network": null}));
    let d = w.resolve().unwrap();
    let e = placement::resolve(&d.provider_spec, &inv).unwrap_err();
    assert_eq!(capv_field(&e.field), "spec.datacenter");
    assert!(e.message.contains("several datacenters"), "{e}");
}

#[test]
fn provisioned_machines_get_capvs_provider_id_and_addresses() {
    let (id, addrs) = provisioned(
        "demo-md-0-abcde",
        "42305f0b-dad7-1d3d-5727-0eaffffffffc",
        &["10.0.0.5".into(), "fd00::5".into(), String::new()],
    );
    assert_eq!(id, "vsphere://42305f0b-dad7-1d3d-5727-0eaffffffffc");
    let shown: Vec<(MachineAddressType, &str)> = addrs
        .iter()
        .map(|a| (a.type_, a.address.as_str()))
        .collect();
    assert_eq!(
        shown,
        [
            (MachineAddressType::ExternalIp, "10.0.0.5"),
            (MachineAddressType::ExternalIp, "fd00::5"),
            (MachineAddressType::InternalDns, "demo-md-0-abcde"),
        ]
    );
}

#[test]
fn fields_acted_on_elsewhere_are_reported_as_ignored() {
    let mut w = World::new();
    w.vsm = vsphere_machine(json!({
        "additionalDisksGiB": [10], "pciDevices": [{"vGPUProfile": "grid"}],
        "hardwareVersion": "vmx-19", "resources": {"shares": {"cpu": 10}},
        "network": {"devices": [{"networkName": "n", "addressesFromPools": [
            {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}]}]}
    }));
    let desired = w.resolve().unwrap();
    assert_eq!(
        desired.ignored,
        [
            "spec.additionalDisksGiB",
            "spec.pciDevices",
            "spec.resources",
            "spec.hardwareVersion",
        ]
    );
    // Address pools are acted on: the shared planner makes and waits for their claims.
    let pools = desired.provider_spec.network.devices[0]
        .addresses_from_pools
        .clone()
        .unwrap();
    assert_eq!(
        (
            pools[0].group.as_str(),
            pools[0].resource.as_str(),
            pools[0].name.as_str()
        ),
        ("ipam.cluster.x-k8s.io", "InClusterIPPool", "p")
    );
}

/// A zone naming no pool places the VM in its failure domain's compute cluster (its root pool),
/// as an OpenShift Machine of the zone gets; the machine's own pool still wins over that.
#[test]
fn a_zone_without_a_pool_places_the_vm_in_the_failure_domains_cluster() {
    let mut w = World::new();
    w.zones = [("zone-a".to_string(), zone("zone-a", Some(true), json!({})))].into();
    w.fds = [(
        "fd-zone-a".to_string(),
        failure_domain(
            "fd-zone-a",
            json!({"datacenter": "DC0", "computeCluster": "C1"}),
        ),
    )]
    .into();
    w.vsm = vsphere_machine(json!({}));
    let d = w.resolve().unwrap();
    assert_eq!(
        d.vm.spec.clone.resource_pool.as_deref(),
        Some("C1/Resources")
    );
    w.vsm = vsphere_machine(json!({"resourcePool": "rp0"}));
    let d = w.resolve().unwrap();
    assert_eq!(d.vm.spec.clone.resource_pool.as_deref(), Some("rp0"));
}

/// A negative size is the machine's configuration error, naming the field (it used to be
/// dropped, and the VM silently got the template's); 0 is the template's value, as CAPV's
/// `omitempty` makes it, so it is not asked for; and a VSphereVM stored with a negative size
/// (before admission refused one) is refused by the placement, naming the VSphereVM's field.
#[test]
fn negative_sizes_are_refused_naming_the_field_and_zero_is_the_templates() {
    let mut w = World::new();
    w.vsm = vsphere_machine(json!({"numCPUs": -2, "memoryMiB": 4096}));
    let e = w.resolve().unwrap_err();
    assert_eq!(e.reason, reason::INVALID_CONFIGURATION);
    assert_eq!(
        e.message,
        "spec.numCPUs: -2: must be 0 or more (0 or unset: the template's value)"
    );

    w.vsm = vsphere_machine(json!({"numCPUs": 0, "numCoresPerSocket": 0, "memoryMiB": 0,
        "diskGiB": 0}));
    let d = w.resolve().unwrap();
    let ps = &d.provider_spec;
    assert_eq!(
        (
            ps.num_cpus,
            ps.num_cores_per_socket,
            ps.memory_mib,
            ps.disk_gib
        ),
        (None, None, None, None)
    );

    let mut stored = d.vm.spec.clone();
    stored.clone.disk_gib = Some(-40);
    let ps = provider_spec(&stored, None);
    let e = placement::resolve(&ps, &two_datacenter_inventory()).unwrap_err();
    assert_eq!(capv_field(&e.field), "spec.diskGiB");
    assert!(e.message.starts_with("-40: must be 0 or more"), "{e}");
}
