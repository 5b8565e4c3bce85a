//! The injection rules of reference §1 ("Injecting a domain into the providerSpec", CPMSO @
//! 85f92f79), one test per rule, on an inventory laid out like the CPMSO doc's example
//! (fixture `cpms-02`, CPMSO `docs/user/failure-domains.md`, vSphere section).
use serde_json::{Value, json};

use super::*;
use crate::api::openshift_config::v1::infrastructure::{HostGroup, ZoneAffinity};
use crate::plan::cpms::spec::inject;
use crate::vcenter::model::inventory::tests::record;

const FIXTURE_02: &str = include_str!(
    "../../../tests/fixtures/manifests/upstream/cpms-02-vsphere-failuredomains-infra-and-cpms.fragments.yaml"
);

/// `IBMCloud` with two clusters, a datastore each, the network, an `infra-x` folder and a
/// template in `vm/templates`.
fn inv() -> Inventory {
    let mut c = vec![
        record("Folder", "group-d1", "Datacenters", None),
        record(
            "Datacenter",
            "dc-1",
            "IBMCloud",
            Some(("Folder", "group-d1")),
        ),
        record("Folder", "f-vm", "vm", Some(("Datacenter", "dc-1"))),
        record("Folder", "f-host", "host", Some(("Datacenter", "dc-1"))),
        record("Folder", "f-ds", "datastore", Some(("Datacenter", "dc-1"))),
        record("Folder", "f-net", "network", Some(("Datacenter", "dc-1"))),
        record("Folder", "f-infra", "infra-x", Some(("Folder", "f-vm"))),
        record("Folder", "f-tmpl", "templates", Some(("Folder", "f-vm"))),
        record("Folder", "f-own", "own", Some(("Folder", "f-vm"))),
        record(
            "Network",
            "net-1",
            "ci-vlan-1289",
            Some(("Folder", "f-net")),
        ),
        record("Network", "net-2", "ci-vlan-2", Some(("Folder", "f-net"))),
        record(
            "VirtualMachine",
            "vm-t",
            "rhcos-415",
            Some(("Folder", "f-tmpl")),
        ),
    ];
    for i in 1..=2 {
        c.push(record(
            "ClusterComputeResource",
            &format!("c-{i}"),
            &format!("vcs-mdcnc-workload-{i}"),
            Some(("Folder", "f-host")),
        ));
        c.push(record(
            "ResourcePool",
            &format!("rp-{i}"),
            "Resources",
            Some(("ClusterComputeResource", &format!("c-{i}"))),
        ));
        c.push(record(
            "ResourcePool",
            &format!("rp-{i}a"),
            "ocp",
            Some(("ResourcePool", &format!("rp-{i}"))),
        ));
        c.push(record(
            "Datastore",
            &format!("ds-{i}"),
            &format!("mdcnc-ds-{i}"),
            Some(("Folder", "f-ds")),
        ));
    }
    Inventory::from_records(c)
}

/// The Infrastructure `cluster` of fixture 02: its `spec` fragment as given, in a whole object.
fn fixture_infra() -> Infrastructure {
    let docs: Vec<Value> = serde_saphyr::from_multiple(FIXTURE_02).unwrap();
    serde_json::from_value(json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "spec": docs[0]["spec"],
    }))
    .unwrap()
}

fn with_status(mut i: Infrastructure, name: &str) -> Infrastructure {
    i.status = Some(
        crate::api::openshift_config::v1::infrastructure::InfrastructureStatus {
            infrastructure_name: Some(name.into()),
            ..Default::default()
        },
    );
    i
}

fn edit(i: &mut Infrastructure, name: &str, f: impl FnOnce(&mut VSpherePlatformFailureDomainSpec)) {
    let d = i
        .spec
        .platform_spec
        .as_mut()
        .and_then(|p| p.vsphere.as_mut())
        .and_then(|v| v.failure_domains.iter_mut().find(|d| d.name == name))
        .unwrap();
    f(d);
}

fn fill_of(i: &Infrastructure, name: &str) -> InfraFill {
    infra_domain_fill(i, name, &inv()).unwrap().unwrap()
}

fn fail_of(i: &Infrastructure, name: &str) -> ConfigError {
    infra_domain_fill(i, name, &inv()).unwrap_err()
}

/// Fixture 02 as the CPMSO doc gives it: server, datacenter, datastore and networks from the
/// domain (rule rows 2 and 5), region and zone labels from it.
#[test]
fn fixture_02_domain_us_east_1_server_datacenter_datastore_networks_from_the_domain() {
    let f = fill_of(&with_status(fixture_infra(), "infra-x"), "us-east-1");
    let ws = &f.fill.workspace;
    assert_eq!(ws.server.as_deref(), Some("vcs8e-vc.ocp2.dev.cluster.com"));
    assert_eq!(ws.datacenter.as_deref(), Some("/IBMCloud"));
    assert_eq!(
        ws.datastore.as_deref(),
        Some("/IBMCloud/datastore/mdcnc-ds-1")
    );
    assert_eq!(f.fill.networks, ["/IBMCloud/network/ci-vlan-1289"]);
    assert_eq!(
        (f.fill.region.as_str(), f.fill.zone.as_str()),
        ("us-east", "us-east-1a")
    );
    assert!(f.notes.is_empty(), "{:?}", f.notes);
    // The fragment's second domain has no zone: the label is empty, nothing else missing.
    let f2 = fill_of(&with_status(fixture_infra(), "infra-x"), "us-east-2");
    assert_eq!(
        f2.fill.workspace.resource_pool.as_deref(),
        Some("/IBMCloud/host/vcs-mdcnc-workload-2/Resources")
    );
    assert_eq!(f2.fill.zone, "");
}

/// Rule `workspace.resourcePool` = `topology.resourcePool` (reference §1 row 1, first half).
#[test]
fn rule_resource_pool_from_topology_resource_pool() {
    let mut i = with_status(fixture_infra(), "infra-x");
    edit(&mut i, "us-east-1", |d| {
        // Installer paths may carry `//` (fixture cpms-04): cleaned as upstream's path.Clean.
        d.topology.resource_pool =
            Some("/IBMCloud/host/vcs-mdcnc-workload-1//Resources/ocp".into());
    });
    assert_eq!(
        fill_of(&i, "us-east-1")
            .fill
            .workspace
            .resource_pool
            .as_deref(),
        Some("/IBMCloud/host/vcs-mdcnc-workload-1/Resources/ocp")
    );
}

/// Rule `workspace.resourcePool` = `<computeCluster>/Resources` when `topology.resourcePool`
/// is not set (reference §1 row 1, second half).
#[test]
fn rule_resource_pool_defaults_to_the_compute_clusters_resources() {
    let mut i = with_status(fixture_infra(), "infra-x");
    edit(&mut i, "us-east-2", |d| d.topology.resource_pool = None);
    assert_eq!(
        fill_of(&i, "us-east-2")
            .fill
            .workspace
            .resource_pool
            .as_deref(),
        Some("/IBMCloud/host/vcs-mdcnc-workload-2/Resources")
    );
    edit(&mut i, "us-east-2", |d| d.topology.compute_cluster.clear());
    let e = fail_of(&i, "us-east-2");
    assert_eq!(
        e.field,
        "Infrastructure cluster spec.platformSpec.vsphere.failureDomains[1].topology.computeCluster"
    );
}

/// Rule `workspace.folder` = `topology.folder` (reference §1 row 3, first half).
#[test]
fn rule_folder_from_topology_folder() {
    let mut i = with_status(fixture_infra(), "infra-x");
    edit(&mut i, "us-east-1", |d| {
        d.topology.folder = Some("/IBMCloud/vm/own".into());
    });
    assert_eq!(
        fill_of(&i, "us-east-1").fill.workspace.folder.as_deref(),
        Some("/IBMCloud/vm/own")
    );
}

/// Rule `workspace.folder` = `/<dc>/vm/<infraName>` (reference §1 row 3, second half), with
/// `infraName` from `status.infrastructureName`; a folder that is not there fails naming it.
#[test]
fn rule_folder_defaults_to_dc_vm_infrastructure_name() {
    let f = fill_of(&with_status(fixture_infra(), "infra-x"), "us-east-1");
    assert_eq!(
        f.fill.workspace.folder.as_deref(),
        Some("/IBMCloud/vm/infra-x")
    );
    let e = fail_of(&with_status(fixture_infra(), "infra-gone"), "us-east-1");
    assert_eq!(e.field, "Infrastructure cluster status.infrastructureName");
    assert!(e.message.contains("/IBMCloud/vm/infra-gone"), "{e}");
}

/// Ours, not upstream's: without `status.infrastructureName` the datacenter's `vm` folder, and
/// a note saying so.
#[test]
fn without_an_infrastructure_name_the_datacenters_vm_folder_and_a_note() {
    let f = fill_of(&fixture_infra(), "us-east-1");
    assert_eq!(f.fill.workspace.folder.as_deref(), Some("/IBMCloud/vm"));
    assert_eq!(f.notes.len(), 1);
    assert!(
        f.notes[0].contains("no status.infrastructureName"),
        "{:?}",
        f.notes
    );
}

/// Rule `workspace.vmGroup` = `zoneAffinity.hostGroup.vmGroup` (reference §1 row 4).
#[test]
fn rule_vm_group_from_zone_affinity_host_group() {
    let mut i = with_status(fixture_infra(), "infra-x");
    assert_eq!(fill_of(&i, "us-east-1").fill.workspace.vm_group, None);
    edit(&mut i, "us-east-1", |d| {
        d.zone_affinity = Some(ZoneAffinity {
            host_group: Some(HostGroup {
                vm_group: Some("vmg-1".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
    });
    assert_eq!(
        fill_of(&i, "us-east-1").fill.workspace.vm_group.as_deref(),
        Some("vmg-1")
    );
}

/// Rule `network.devices[i].networkName` = `topology.networks[i]`; template devices kept only
/// with `addressesFromPools` (reference §1 row 5), through `plan::cpms::spec::inject`.
#[test]
fn rule_networks_into_network_devices_in_order() {
    let mut i = with_status(fixture_infra(), "infra-x");
    edit(&mut i, "us-east-1", |d| {
        d.topology.networks = vec!["ci-vlan-1289".into(), "ci-vlan-2".into()];
    });
    let f = fill_of(&i, "us-east-1");
    let template = json!({
        "template": "rhcos",
        "network": {"devices": [{"addressesFromPools": [{"group": "installer.openshift.io", "name": "default-0", "resource": "IPPool"}]}]},
    });
    let out = inject(&template, &f.fill);
    let devices = out["network"]["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[0]["networkName"], "/IBMCloud/network/ci-vlan-1289");
    assert_eq!(devices[0]["addressesFromPools"][0]["name"], "default-0");
    assert_eq!(devices[1]["networkName"], "/IBMCloud/network/ci-vlan-2");
    edit(&mut i, "us-east-1", |d| {
        d.topology.networks = vec!["nope".into()]
    });
    let e = fail_of(&i, "us-east-1");
    assert_eq!(
        e.field,
        "Infrastructure cluster spec.platformSpec.vsphere.failureDomains[0].topology.networks[0]"
    );
    assert!(
        e.message
            .contains("candidates: /IBMCloud/network/ci-vlan-1289, /IBMCloud/network/ci-vlan-2"),
        "{e}"
    );
}

/// Rule `template` = basename of `topology.template` (reference §1 row 6, first half); when
/// not set the CPMS template's is kept (ours: upstream's `<infraName>-rhcos-<region>-<zone>`
/// default is not applied).
#[test]
fn rule_template_is_the_basename_of_topology_template_else_the_installers_else_the_cpms_templates()
{
    let template = json!({"template": "from-cpms"});
    // No infrastructure name: the CPMS template stays.
    let f = fill_of(&fixture_infra(), "us-east-1");
    assert_eq!(f.fill.template, None);
    assert_eq!(inject(&template, &f.fill)["template"], "from-cpms");
    // Two domains and an infrastructure name: the template the installer imported per domain,
    // `<infrastructureName>-rhcos-<region>-<zone>` (fixture 02's us-east-2 has no zone).
    let mut i = with_status(fixture_infra(), "infra-x");
    let f = fill_of(&i, "us-east-1");
    assert_eq!(
        f.fill.template.as_deref(),
        Some("infra-x-rhcos-us-east-us-east-1a")
    );
    assert_eq!(
        fill_of(&i, "us-east-2").fill.template.as_deref(),
        Some("infra-x-rhcos-us-east-")
    );
    // One domain: the machine's own template.
    let mut one = i.clone();
    one.spec
        .platform_spec
        .as_mut()
        .and_then(|p| p.vsphere.as_mut())
        .unwrap()
        .failure_domains
        .truncate(1);
    assert_eq!(fill_of(&one, "us-east-1").fill.template, None);
    edit(&mut i, "us-east-1", |d| {
        d.topology.template = Some("/IBMCloud/vm/templates/rhcos-415".into());
    });
    let f = fill_of(&i, "us-east-1");
    assert_eq!(f.fill.template.as_deref(), Some("rhcos-415"));
    assert_eq!(inject(&template, &f.fill)["template"], "rhcos-415");
    edit(&mut i, "us-east-1", |d| {
        d.topology.template = Some("/IBMCloud/vm/templates/rhcos-414".into());
    });
    let e = fail_of(&i, "us-east-1");
    assert!(
        e.field.ends_with("failureDomains[0].topology.template"),
        "{e}"
    );
}

/// Every failure names the Infrastructure field; a name the Infrastructure lacks is not an
/// error (the caller says "unknown domain").
#[test]
fn failures_name_the_infrastructure_field_and_the_candidates() {
    let mut i = with_status(fixture_infra(), "infra-x");
    assert_eq!(infra_domain_fill(&i, "us-west-1", &inv()).unwrap(), None);
    edit(&mut i, "us-east-1", |d| {
        d.topology.datastore = "/IBMCloud/datastore/mdcnc-ds-9".into();
    });
    let e = fail_of(&i, "us-east-1");
    assert_eq!(
        e.field,
        "Infrastructure cluster spec.platformSpec.vsphere.failureDomains[0].topology.datastore"
    );
    assert!(
        e.message
            .contains("/IBMCloud/datastore/mdcnc-ds-1, /IBMCloud/datastore/mdcnc-ds-2"),
        "{e}"
    );
    edit(&mut i, "us-east-1", |d| {
        d.topology.datacenter = "DC9".into()
    });
    let e = fail_of(&i, "us-east-1");
    assert!(e.field.ends_with("topology.datacenter"), "{e}");
    assert!(e.message.contains("candidates: /IBMCloud"), "{e}");
    edit(&mut i, "us-east-1", |d| d.server.clear());
    assert!(fail_of(&i, "us-east-1").field.ends_with("].server"));
}
