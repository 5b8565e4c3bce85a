//! The VSphereVM ↔ stand-in Machine mapping: what the shared planner acts on, and what is
//! written back, so a Cluster API machine's VM is cloned, found again and released like an
//! OpenShift Machine's.
use serde_json::json;

use super::*;
use crate::plan::machine::{machine_identity, provider_status};

fn now() -> Time {
    Time(jiff::Timestamp::from_second(1_700_000_000).unwrap())
}

fn sample_vm() -> VSphereVM {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereVM",
        "metadata": {"name": "demo-md-0-x", "namespace": "ns", "uid": "6b4c5a7e-1111-2222-3333-444455556666",
            "resourceVersion": "7",
            "annotations": {"vsphere-provider.io/vm-group": "zone-a-vms"}},
        "spec": {"server": "vc.example", "datacenter": "DC0", "template": "ubuntu",
            "folder": "/DC0/vm/zone-a", "resourcePool": "/DC0/host/C0/Resources/zone-a",
            "datastore": "ds-a", "numCPUs": 2, "memoryMiB": 4096,
            "network": {"devices": [{"networkName": "VM Network", "dhcp4": true}]},
            "customVMXKeys": {"disk.EnableUUID": "TRUE"},
            "bootstrapRef": {"name": "demo-md-0-x"}}
    }))
    .unwrap()
}

#[test]
fn the_stand_in_carries_the_placement_the_bootstrap_secret_and_the_vsphere_vm_uid() {
    let vm = sample_vm();
    let m = machine_for(&vm);
    assert!(is_actuated(&m));
    let spec = m.vsphere_provider_spec().unwrap().unwrap();
    let ws = spec.workspace.unwrap();
    assert_eq!(ws.server.as_deref(), Some("vc.example"));
    assert_eq!(ws.folder.as_deref(), Some("/DC0/vm/zone-a"));
    assert_eq!(
        ws.resource_pool.as_deref(),
        Some("/DC0/host/C0/Resources/zone-a")
    );
    assert_eq!(ws.datastore.as_deref(), Some("ds-a"));
    assert_eq!(
        ws.vm_group.as_deref(),
        Some("zone-a-vms"),
        "the VM group annotation"
    );
    assert_eq!(spec.user_data_secret.unwrap().name, "demo-md-0-x");
    // The instance UUID of the clone is the VSphereVM's UID, as CAPV clones it.
    assert_eq!(
        crate::plan::machine::vm_instance_uuid(&m).as_deref(),
        vm.metadata.uid.as_deref()
    );
    assert_eq!(machine_identity(&m), "VSphereVM ns/demo-md-0-x");
    assert_eq!(vsphere_vm(&m).unwrap().spec, vm.spec);
    assert!(m.spec.provider_id.is_none(), "no BIOS UUID yet");
}

#[test]
fn finalizer_bios_uuid_and_state_round_trip_through_the_vsphere_vm() {
    let vm = sample_vm();
    let mut after = machine_for(&vm);
    after.metadata.finalizers = Some(vec![MACHINE_FINALIZER.to_string()]);
    after.spec.provider_id = Some("vsphere://4211-bios".into());
    let ps = json!({"instanceId": "4211-bios", "instanceState": "poweredOn", "taskRef": "task-9",
        "conditions": []});
    after.status = Some(MachineStatus {
        phase: Some("Provisioned".into()),
        provider_status: Some(ps),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: "10.0.0.7".into(),
            },
            NodeAddress {
                type_: "InternalDNS".into(),
                address: "demo-md-0-x".into(),
            },
        ]),
        ..MachineStatus::default()
    });
    let written = vm_after(&vm, &after, &now());
    assert_eq!(
        written.metadata.finalizers.as_deref(),
        Some(&[VM_FINALIZER.to_string()][..])
    );
    assert_eq!(written.spec.bios_uuid.as_deref(), Some("4211-bios"));
    let st = written.status.as_ref().unwrap();
    assert_eq!(st.task_ref.as_deref(), Some("task-9"));
    assert_eq!(st.addresses.as_deref(), Some(&["10.0.0.7".to_string()][..]));
    assert_eq!(st.ready, Some(true));
    assert!(not_provisioned(&written).is_none(), "provisioned");
    // Both condition sets say so; metav1's with a reason, as it must have one.
    let provisioned = |w: &VSphereVM| {
        let st = w.status.as_ref().unwrap();
        let v1 = DeprecatedFailureStatus::v1beta1_conditions(&st.deprecated);
        let meta = st.conditions.as_deref().unwrap_or_default();
        (
            crate::api::conditions::find_capi(v1, VM_PROVISIONED).map(|c| c.status.clone()),
            crate::api::conditions::find_meta(meta, VM_PROVISIONED)
                .map(|c| (c.status.clone(), c.reason.clone())),
        )
    };
    assert_eq!(
        provisioned(&written),
        (
            Some("True".into()),
            Some(("True".into(), "Provisioned".into()))
        )
    );

    // The conversion annotation is anyone's to write: a state held there (as an earlier
    // release stored it, or as a tenant forges it) is never taken as the actuator's. The
    // stand-in starts from what the object's own status says; its VM is found again in vCenter
    // by the VSphereVM's UID and its identity marker.
    let mut stored = written.clone();
    let state = stored
        .status
        .as_mut()
        .unwrap()
        .actuator_state
        .take()
        .unwrap();
    let held = json!({crate::api::infrastructure::V1BETA1: [
        {"path": "/status/actuatorState", "value": state}]});
    stored
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            crate::api::conversion::CONVERSION_DATA.into(),
            held.to_string(),
        );
    assert!(
        machine_for(&stored).status.is_none(),
        "a held state is not the actuator's"
    );

    // The next pass's stand-in is the machine the planner left: same status, providerID,
    // finalizer; the VSphereMachine sees the VM.
    let again = machine_for(&written);
    assert_eq!(again.status, after.status);
    assert_eq!(
        again.spec.provider_id.as_deref(),
        Some("vsphere://4211-bios")
    );
    assert_eq!(again.metadata.finalizers, after.metadata.finalizers);
    assert_eq!(provider_status(&again).task_ref, "task-9");
    let obs = observed(&written).unwrap();
    assert!(obs.powered_on());
    assert_eq!(obs.ip_address.as_deref(), Some("10.0.0.7"));

    // Released: the finalizer goes, others stay.
    let mut deleting = written.clone();
    deleting.metadata.finalizers = Some(vec![VM_FINALIZER.into(), "other.example/keep".into()]);
    let mut released = machine_for(&deleting);
    released.metadata.finalizers = Some(vec!["other.example/keep".into()]);
    let out = vm_after(&deleting, &released, &now());
    assert_eq!(
        out.metadata.finalizers.as_deref(),
        Some(&["other.example/keep".to_string()][..])
    );
}

#[test]
fn the_stand_in_fingerprint_ignores_the_vsphere_vm_status() {
    // Our own status writes must not look like a change of the machine (the sweep gate would
    // sweep again for every write).
    let vm = sample_vm();
    let mut written = vm.clone();
    written.status = Some(VSphereVMStatus {
        task_ref: Some("task-1".into()),
        ..VSphereVMStatus::default()
    });
    written.metadata.resource_version = Some("8".into());
    assert_eq!(
        machine_for(&vm).metadata.annotations,
        machine_for(&written).metadata.annotations
    );
}

#[test]
fn not_provisioned_says_why_in_the_planners_words() {
    let vm = sample_vm();
    let mut after = machine_for(&vm);
    after.status = Some(MachineStatus {
        provider_status: Some(
            json!({"conditions": [{"type": "MachineCreation", "status": "False",
            "reason": "MachineCreationFailed", "message": "spec.providerSpec.value.template: template ubuntu not found",
            "lastTransitionTime": "2023-11-14T22:13:20Z"}]}),
        ),
        ..MachineStatus::default()
    });
    let written = vm_after(&vm, &after, &now());
    let c = not_provisioned(&written).unwrap();
    assert_eq!(c.reason.as_deref(), Some("MachineCreationFailed"));
    assert_eq!(
        c.message.as_deref(),
        Some("spec.template: template ubuntu not found"),
        "named as the VSphereVM field"
    );
    // The same condition for v1beta2 readers, in the metav1 set.
    let st = written.status.clone().unwrap();
    let meta = crate::api::conditions::find_meta(st.conditions.as_deref().unwrap(), VM_PROVISIONED)
        .unwrap();
    assert_eq!(
        (
            meta.status.as_str(),
            meta.reason.as_str(),
            meta.message.as_str()
        ),
        (
            "False",
            "MachineCreationFailed",
            "spec.template: template ubuntu not found"
        )
    );
    assert_eq!(written.status.unwrap().ready, Some(false));
    assert!(observed(&vm).is_none(), "no VM before a BIOS UUID");
}

#[test]
fn metadata_is_wanted_once_before_the_first_power_on_and_matches_the_macs() {
    let vm = sample_vm();
    let m = machine_for(&vm);
    let mut obs = VmObs {
        power_state: Some("poweredOff".into()),
        ..VmObs::default()
    };
    assert!(needs_guest_metadata(&m, &obs));
    obs.guest_metadata = Some("demo-md-0-x".into());
    assert!(!needs_guest_metadata(&m, &obs), "written for this VM");
    obs.guest_metadata = Some("another-vm".into());
    assert!(
        needs_guest_metadata(&m, &obs),
        "a template's or another VM's metadata"
    );
    obs.power_state = Some("poweredOn".into());
    assert!(
        !needs_guest_metadata(&m, &obs),
        "never rewritten under a running guest"
    );

    let keys = guest_metadata_keys(
        &m,
        &["00:50:56:aa:bb:cc".to_string()],
        &[(
            0,
            (
                vec!["10.1.0.5/24".to_string()],
                Some("10.1.0.1".to_string()),
            ),
        )]
        .into(),
    )
    .unwrap();
    let get = |k: &str| {
        keys.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        get("guestinfo.metadata.encoding").as_deref(),
        Some("base64")
    );
    assert_eq!(get(GUEST_METADATA_KEY).as_deref(), Some("demo-md-0-x"));
    use base64::Engine as _;
    let yaml = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(get("guestinfo.metadata").unwrap())
            .unwrap(),
    )
    .unwrap();
    assert!(yaml.contains("local-hostname: demo-md-0-x"), "{yaml}");
    assert!(yaml.contains("00:50:56:aa:bb:cc"), "{yaml}");
    assert!(yaml.contains("10.1.0.5/24"), "the pool's address: {yaml}");
    assert!(
        yaml.contains("gateway4: \"10.1.0.1\""),
        "the pool's gateway: {yaml}"
    );

    // An OpenShift Machine never gets this step.
    let mut plain = m.clone();
    plain.metadata.annotations = None;
    obs.power_state = Some("poweredOff".into());
    obs.guest_metadata = None;
    assert!(!needs_guest_metadata(&plain, &obs));
}

#[test]
fn a_vsphere_vms_claims_are_owned_by_it_and_named_as_capv_names_them() {
    use crate::plan::machine::ipam::{Network, claim_object, network};
    let mut vm = sample_vm();
    vm.spec.clone.network = Some(serde_json::from_value(json!({"devices": [
        {"networkName": "VM Network", "addressesFromPools": [
            {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "workers"}]}
    ]})).unwrap());
    let m = machine_for(&vm);
    let Network::Waiting { create, .. } = network(&m, &BTreeMap::new(), &BTreeMap::new()) else {
        panic!("waits for its claim")
    };
    let claim = claim_object(&create[0]);
    assert_eq!(claim.metadata.name.as_deref(), Some("demo-md-0-x-0-0"));
    let owner = &claim.metadata.owner_references.unwrap()[0];
    // A controller reference to a Machine of that UID would have the claim collected.
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.api_version.as_str(),
            owner.uid.as_str()
        ),
        (
            "VSphereVM",
            "infrastructure.cluster.x-k8s.io/v1beta2",
            "6b4c5a7e-1111-2222-3333-444455556666"
        )
    );
    assert_eq!(claim.spec.pool_ref.kind, "InClusterIPPool");
}

/// Whatever its status or annotations led it to, a VSphereVM never acts on another object's
/// VM, and says so where CAPV's readers look: `VirtualMachineProvisioned=False`,
/// `InstanceNotOwned`, naming whose the VM is.
#[test]
fn another_objects_vm_is_reported_on_the_vsphere_vm() {
    let vm = sample_vm();
    let m = machine_for(&vm);
    let mut i = crate::plan::machine::tests::input(&m);
    i.vm = Some(VmObs {
        moref: Some(crate::vcenter::model::moref::MoRef::new(
            "VirtualMachine",
            "vm-victim",
        )),
        power_state: Some("poweredOff".into()),
        path: "/DC0/vm/db-0".into(),
        instance_uuid: Some("victim-uuid".into()),
        identity: Some("VSphereVM other/db-0".into()),
        ..VmObs::default()
    });
    let plan = crate::plan::machine::plan_machine(&i);
    assert_eq!(plan.vm, None, "{plan:#?}");
    let written = vm_after(&vm, &plan.machine, &now());
    let st = written.status.unwrap();
    let c = crate::api::conditions::find_capi(
        DeprecatedFailureStatus::v1beta1_conditions(&st.deprecated),
        VM_PROVISIONED,
    )
    .unwrap();
    assert_eq!(c.status, "False");
    assert_eq!(c.reason.as_deref(), Some("InstanceNotOwned"));
    assert!(
        c.message
            .as_deref()
            .is_some_and(|m| m.contains("VSphereVM other/db-0")),
        "{c:?}"
    );
}
