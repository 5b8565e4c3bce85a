//! Upstream webhook test tables written in Go, ported case by case under their upstream names:
//!
//! * CAPV `internal/webhooks/vspherefailuredomain_test.go` and `vspheredeploymentzone_test.go`,
//!   v1.15.0 (`d10abe40…`, v1beta1) and main (`111a1ba9…`, v1beta2);
//! * machine-api-operator `pkg/webhooks/machine_webhook_test.go` (`95119612…`): every vSphere case
//!   of `TestValidateVSphereProviderSpec`, `TestDefaultVSphereProviderSpec`,
//!   `TestMachineCreation` and `TestMachineUpdate`.
//!
//! Inputs and expected outcomes are upstream's (Go structs written as the JSON they marshal to).
//! Where we decide differently, the case carries our outcome and the reason, as docs/differences.md
//! gives it; we only ever differ by admitting more, by naming the
//! field more precisely, or by our own added rules.

use serde_json::{Value, json};
use vsphere_provider::api::Kind;
use vsphere_provider::api::manifest;
use vsphere_provider::cli::validate::check_all;
use vsphere_provider::webhook::admission::{admit, default_object};
use vsphere_provider::webhook::machine::{ProviderSpecUse, check_provider_spec};
use vsphere_provider::webhook::{Ctx, FieldError, failure_domain};

/// Go's `field.ErrorList.ToAggregate().Error()`: one error as is, several in brackets.
fn aggregate(errors: &[FieldError]) -> String {
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    match texts.len() {
        0 => String::new(),
        1 => texts[0].clone(),
        _ => format!("[{}]", texts.join(", ")),
    }
}

fn texts(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

// ---------------------------------------------------------------------------------------------
// CAPV: VSphereFailureDomain and VSphereDeploymentZone
// ---------------------------------------------------------------------------------------------

/// Upstream's Go test objects leave region, zone and topology at their zero values where a case
/// does not need them; the API server would reject those (empty enums, empty required names)
/// before the webhook runs. The port fills them with the one value that triggers no upstream
/// rule — a Datacenter region and zone (upstream's own name and category, shared) and
/// datacenter `/blah` — so each case meets exactly the rule it is named for.
fn capv_failure_domain(api_version: &str, spec: Value) -> Value {
    let neutral = json!({"name": "foo", "type": "Datacenter", "tagCategory": "k8s-bar"});
    let mut full = json!({"region": neutral, "zone": neutral, "topology": {"datacenter": "/blah"}});
    for (k, v) in spec.as_object().unwrap() {
        full[k] = v.clone();
    }
    json!({"apiVersion": api_version, "kind": "VSphereFailureDomain",
        "metadata": {"name": "fd"}, "spec": full})
}

/// One case of `TestVSphereFailureDomain_ValidateCreate`: upstream expects an error from every
/// case; `upstream` is the error list its webhook gives (paths in JSON case), `ours_extra` the
/// errors of rules we add on top.
struct FdCase {
    name: &'static str,
    v1beta1: Value,
    v1beta2: Value,
    upstream: &'static [&'static str],
    ours_extra: &'static [&'static str],
}

fn capv_failure_domain_cases() -> Vec<FdCase> {
    let hosts = json!({"vmGroupName": "vm-foo", "hostGroupName": "host-foo"});
    vec![
        FdCase {
            name: "region failureDomain type is hostGroup",
            v1beta1: json!({"region": {"name": "foo", "type": "HostGroup", "tagCategory": "k8s-bar", "autoConfigure": true}}),
            v1beta2: json!({"region": {"name": "foo", "type": "HostGroup", "tagCategory": "k8s-bar"}}),
            upstream: &[
                "spec.region.type: Forbidden: region's Failure Domain type cannot be HostGroup",
            ],
            ours_extra: &[
                "spec.zone.type: Forbidden: zone's Failure Domain type Datacenter is wider than region's Failure Domain type HostGroup: a zone must lie within its region",
            ],
        },
        FdCase {
            name: "hostGroup failureDomain set but compute Cluster is empty",
            v1beta1: json!({"topology": {"datacenter": "/blah", "hosts": hosts}}),
            v1beta2: json!({"topology": {"datacenter": "/blah", "hosts": hosts}}),
            upstream: &[
                "spec.topology.computeCluster: Forbidden: cannot be empty if Hosts is not empty",
            ],
            ours_extra: &[],
        },
        FdCase {
            name: "type of zone failure domain is Hostgroup but topology's hostgroup is not set",
            v1beta1: json!({
                "region": {"name": "foo", "type": "ComputeCluster", "tagCategory": "k8s-bar"},
                "zone": {"name": "foo", "type": "HostGroup", "tagCategory": "k8s-bar"},
                "topology": {"datacenter": "/blah", "computeCluster": "blah2"}}),
            v1beta2: json!({
                "region": {"name": "foo", "type": "ComputeCluster", "tagCategory": "k8s-bar"},
                "zone": {"name": "foo", "type": "HostGroup", "tagCategory": "k8s-bar"},
                "topology": {"datacenter": "/blah", "computeCluster": "blah2"}}),
            upstream: &[
                "spec.topology.hosts: Forbidden: cannot be nil if zone's Failure Domain type is HostGroup",
            ],
            ours_extra: &[],
        },
        FdCase {
            name: "type of region failure domain is Compute Cluster but topology is not set",
            v1beta1: json!({
                "region": {"name": "foo", "type": "ComputeCluster", "tagCategory": "k8s-bar"},
                "zone": {"name": "foo", "type": "HostGroup", "tagCategory": "k8s-bar"},
                "topology": {"datacenter": "/blah", "hosts": hosts}}),
            v1beta2: json!({
                "region": {"name": "foo", "type": "ComputeCluster", "tagCategory": "k8s-bar"},
                "zone": {"name": "foo", "type": "HostGroup", "tagCategory": "k8s-bar"},
                "topology": {"datacenter": "/blah", "hosts": hosts}}),
            upstream: &[
                "spec.topology.computeCluster: Forbidden: cannot be empty if Hosts is not empty",
                "spec.topology.computeCluster: Forbidden: cannot be nil if region's Failure Domain type is ComputeCluster",
            ],
            ours_extra: &[],
        },
        FdCase {
            name: "type of zone failure domain is Compute Cluster but topology is not set",
            v1beta1: json!({
                "zone": {"name": "foo", "type": "ComputeCluster", "tagCategory": "k8s-bar"},
                "topology": {"datacenter": "/blah"}}),
            v1beta2: json!({
                "zone": {"name": "foo", "type": "ComputeCluster", "tagCategory": "k8s-bar"},
                "topology": {"datacenter": "/blah"}}),
            upstream: &[
                "spec.topology.computeCluster: Forbidden: cannot be nil if zone's Failure Domain type is ComputeCluster",
            ],
            ours_extra: &[],
        },
        FdCase {
            name: "topology.networks and topology.networkConfigurations set simultaneously",
            v1beta1: json!({
                "zone": {"name": "foo", "type": "ComputeCluster", "tagCategory": "k8s-bar"},
                "topology": {"datacenter": "/blah", "computeCluster": "blah2", "networks": ["nw-1"],
                    "networkConfigurations": [{"networkName": "nw-1"}]}}),
            v1beta2: json!({
                "zone": {"name": "foo", "type": "ComputeCluster", "tagCategory": "k8s-bar"},
                "topology": {"datacenter": "/blah", "computeCluster": "blah2", "networks": ["nw-1"],
                    "networkConfigurations": [{"networkName": "nw-1"}]}}),
            upstream: &[
                "spec.topology.networks: Forbidden: cannot be set if spec.topology.networkConfigurations is already set",
            ],
            ours_extra: &[],
        },
    ]
}

fn check_failure_domain_table(api_version: &str, pick: fn(&FdCase) -> &Value) {
    for case in capv_failure_domain_cases() {
        let obj = capv_failure_domain(api_version, pick(&case).clone());
        let out = admit(&obj, None, &Ctx::default());
        let mut want: Vec<String> = case
            .upstream
            .iter()
            .chain(case.ours_extra)
            .map(ToString::to_string)
            .collect();
        want.sort();
        let mut got = texts(&out.errors);
        got.sort();
        assert_eq!(got, want, "{api_version}: {}", case.name);
        // Every upstream case shares one tag category between region and zone: a warning only.
        assert!(
            out.warnings
                .iter()
                .any(|w| w.starts_with("spec.zone.tagCategory: \"k8s-bar\" is also")),
            "{api_version}: {}: {:?}",
            case.name,
            out.warnings
        );
    }
}

/// CAPV v1.15.0 `TestVSphereFailureDomain_ValidateCreate` (v1beta1).
#[test]
fn capv_v1beta1_failure_domain_validate_create() {
    check_failure_domain_table("infrastructure.cluster.x-k8s.io/v1beta1", |c| &c.v1beta1);
}

/// CAPV main `TestVSphereFailureDomain_ValidateCreate` (v1beta2: `computeCluster` a string,
/// `hosts` a value, no `autoConfigure`).
#[test]
fn capv_v1beta2_failure_domain_validate_create() {
    check_failure_domain_table("infrastructure.cluster.x-k8s.io/v1beta2", |c| &c.v1beta2);
}

/// The neutral object the cases start from is itself admitted (with the shared-category
/// warning), so each case's errors come from its own change.
#[test]
fn capv_failure_domain_neutral_object_is_admitted() {
    for v in ["v1beta1", "v1beta2"] {
        let obj = capv_failure_domain(&format!("infrastructure.cluster.x-k8s.io/{v}"), json!({}));
        let out = admit(&obj, None, &Ctx::default());
        assert!(out.allowed(), "{v}: {:?}", out.errors);
        assert_eq!(out.warnings.len(), 1, "{v}: {:?}", out.warnings);
    }
}

/// CAPV v1.15.0 `TestVsphereFailureDomain_Default`: a zero spec's region and zone get
/// `autoConfigure: false` (v1beta1 only; main dropped the field and the test).
#[test]
fn capv_v1beta1_failure_domain_default() {
    let mut obj = json!({"spec": {"region": {}, "zone": {}}});
    let defaulted = failure_domain::default(&mut obj);
    assert_eq!(
        defaulted,
        ["spec.region.autoConfigure", "spec.zone.autoConfigure"]
    );
    assert_eq!(obj["spec"]["region"]["autoConfigure"], false);
    assert_eq!(obj["spec"]["zone"]["autoConfigure"], false);
}

/// CAPV `TestVSphereDeploymentZone_Default` (v1.15.0 on v1beta1, main on v1beta2).
#[test]
fn capv_deployment_zone_default() {
    let cases = [
        ("when control plane is not set", None, true),
        ("when control plane is set", Some(false), false),
    ];
    for version in ["v1beta1", "v1beta2"] {
        for (name, control_plane, want) in cases {
            let mut spec = json!({"server": "vc.example.com", "failureDomain": "fd"});
            if let Some(cp) = control_plane {
                spec["controlPlane"] = json!(cp);
            }
            let mut obj = json!({"apiVersion": format!("infrastructure.cluster.x-k8s.io/{version}"),
                "kind": "VSphereDeploymentZone", "metadata": {"name": "zone"}, "spec": spec});
            default_object(Kind::VSphereDeploymentZone, &mut obj);
            assert_eq!(obj["spec"]["controlPlane"], want, "{version}: {name}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// machine-api-operator: the vSphere provider spec
// ---------------------------------------------------------------------------------------------

/// `TestValidateVSphereProviderSpec`'s base provider spec, as Go marshals it.
fn mao_base_spec() -> Value {
    json!({
        "kind": "VSphereMachineProviderSpec",
        "apiVersion": "vsphereprovider.openshift.io/v1beta1",
        "metadata": {"creationTimestamp": null},
        "template": "template",
        "snapshot": "",
        "workspace": {"datacenter": "datacenter", "server": "server"},
        "network": {"devices": [{"networkName": "networkName"}]},
        "userDataSecret": {"name": "name"},
        "credentialsSecret": {"name": "name"},
        "numCPUs": 2,
        "memoryMiB": 2048,
        "diskGiB": 120
    })
}

/// Where we decide a case differently: our error (aggregated) and warnings, and why.
struct Ours {
    error: &'static str,
    warnings: &'static [&'static str],
    why: &'static str,
}

struct MaoCase {
    name: &'static str,
    modify: fn(&mut Value),
    /// Upstream's `expectedError` (empty: `expectedOk`).
    error: &'static str,
    /// Upstream's `expectedWarnings`.
    warnings: &'static [&'static str],
    ours: Option<Ours>,
}

const LONG_VM_GROUP: &str = "thisvmgroupnameismorethaneightycharactersthisvmgroupnameismorethaneightycharactersthisvmgroupnameismorethaneightycharacters";

fn disk(v: &mut Value, d: Value) {
    v["dataDisks"] = json!([d]);
}

fn mao_validate_cases() -> Vec<MaoCase> {
    vec![
        MaoCase {
            name: "with no template provided",
            modify: |v| v["template"] = json!(""),
            error: "providerSpec.template: Required value: template must be provided",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with no workspace provided",
            modify: |v| {
                v.as_object_mut().unwrap().remove("workspace");
            },
            error: "providerSpec.workspace: Required value: workspace must be provided",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with no workspace server provided",
            modify: |v| v["workspace"] = json!({"datacenter": "datacenter"}),
            error: "providerSpec.workspace.server: Required value: server must be provided",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with no workspace datacenter provided",
            modify: |v| v["workspace"] = json!({"server": "server"}),
            error: "",
            warnings: &[
                "providerSpec.workspace.datacenter: datacenter is unset: if more than one datacenter is present, VMs cannot be created",
            ],
            ours: None,
        },
        MaoCase {
            name: "with a workspace folder outside of the current datacenter",
            modify: |v| {
                v["workspace"] = json!({"server": "server", "datacenter": "datacenter", "folder": "/foo/vm/folder"})
            },
            error: "providerSpec.workspace.folder: Invalid value: \"/foo/vm/folder\": folder must be absolute path: expected prefix \"/datacenter/vm/\"",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with no network devices provided",
            modify: |v| v["network"] = json!({"devices": []}),
            error: "providerSpec.network.devices: Required value: at least 1 network device must be provided",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with no network device name provided",
            modify: |v| v["network"] = json!({"devices": [{"networkName": "networkName"}, {}]}),
            error: "providerSpec.network.devices[1].networkName: Required value: networkName must be provided",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with too few CPUs provided",
            modify: |v| v["numCPUs"] = json!(1),
            error: "",
            warnings: &[
                "providerSpec.numCPUs: 1 is missing or less than the minimum value (2): nodes may not boot correctly",
            ],
            ours: None,
        },
        MaoCase {
            name: "with too little memory provided",
            modify: |v| v["memoryMiB"] = json!(1024),
            error: "",
            warnings: &[
                "providerSpec.memoryMiB: 1024 is missing or less than the recommended minimum value (2048): nodes may not boot correctly",
            ],
            ours: None,
        },
        MaoCase {
            name: "with too little disk size provided",
            modify: |v| v["diskGiB"] = json!(1),
            error: "",
            warnings: &[
                "providerSpec.diskGiB: 1 is missing or less than the recommended minimum (120): nodes may fail to start if disk size is too low",
            ],
            ours: None,
        },
        MaoCase {
            name: "with no user data secret provided",
            modify: |v| {
                v.as_object_mut().unwrap().remove("userDataSecret");
            },
            error: "providerSpec.userDataSecret: Required value: userDataSecret must be provided",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with no user data secret name provided",
            modify: |v| v["userDataSecret"] = json!({}),
            error: "providerSpec.userDataSecret.name: Required value: name must be provided",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with no credentials secret provided",
            modify: |v| {
                v.as_object_mut().unwrap().remove("credentialsSecret");
            },
            error: "providerSpec.credentialsSecret: Required value: credentialsSecret must be provided",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "when the credentials secret does not exist",
            modify: |v| v["credentialsSecret"]["name"] = json!("does-not-exist"),
            error: "",
            warnings: &[
                "providerSpec.credentialsSecret: Invalid value: \"does-not-exist\": not found. Expected CredentialsSecret to exist",
            ],
            ours: Some(Ours {
                error: "",
                warnings: &[],
                why: "admission looks nothing up in the cluster; `validate` warns when the given Secrets lack it (credentials_secret_not_among_the_given_objects)",
            }),
        },
        MaoCase {
            name: "with no credentials secret name provided",
            modify: |v| v["credentialsSecret"] = json!({}),
            error: "providerSpec.credentialsSecret.name: Required value: name must be provided",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with all required fields it succeeds",
            modify: |_| {},
            error: "",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with numCPUs equal to 0",
            modify: |v| v["numCPUs"] = json!(0),
            error: "",
            warnings: &[
                "providerSpec.numCPUs: 0 is missing or less than the minimum value (2): nodes may not boot correctly",
            ],
            ours: None,
        },
        MaoCase {
            name: "with memoryMiB equal to 0",
            modify: |v| v["memoryMiB"] = json!(0),
            error: "",
            warnings: &[
                "providerSpec.memoryMiB: 0 is missing or less than the recommended minimum value (2048): nodes may not boot correctly",
            ],
            ours: None,
        },
        MaoCase {
            name: "with diskGiB equal to 0",
            modify: |v| v["diskGiB"] = json!(0),
            error: "",
            warnings: &[
                "providerSpec.diskGiB: 0 is missing or less than the recommended minimum (120): nodes may fail to start if disk size is too low",
            ],
            ours: None,
        },
        MaoCase {
            name: "linked clone mode and disk size warning",
            modify: |v| {
                v["diskGiB"] = json!(100500);
                v["cloneMode"] = json!("linkedClone");
            },
            error: "",
            warnings: &[
                "linkedClone clone mode is set. DiskGiB parameter will be ignored, disk size from template will be used.",
            ],
            ours: Some(Ours {
                error: "",
                warnings: &[
                    "providerSpec.cloneMode: linkedClone clone mode is set. DiskGiB parameter will be ignored, disk size from template will be used.",
                ],
                why: "warnings name their field",
            }),
        },
        MaoCase {
            name: "with invalid GroupVersionKind",
            modify: |v| {
                v["kind"] = json!("INVALID");
                v["apiVersion"] = json!("INVALID/v1");
            },
            error: "",
            warnings: &[
                "incorrect GroupVersionKind for VSphereMachineProviderSpec object: INVALID/v1, Kind=INVALID",
            ],
            ours: Some(Ours {
                error: "",
                warnings: &[
                    "providerSpec: kind \"INVALID\" is not VSphereMachineProviderSpec: this provider only creates vSphere machines",
                ],
                why: "a provider spec of another kind is not read as a vSphere one (upstream decides by the cluster's platform)",
            }),
        },
        MaoCase {
            name: "with machine.openshift.io API group",
            modify: |v| {
                v["kind"] = json!("VSphereMachineProviderSpec");
                v["apiVersion"] = json!("machine.openshift.io/v1beta1");
            },
            error: "",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with vmGroup greater than 80 characters",
            modify: |v| v["workspace"]["vmGroup"] = json!(LONG_VM_GROUP),
            error: "providerSpec.workspace.vmGroup: Invalid value: \"thisvmgroupnameismorethaneightycharactersthisvmgroupnameismorethaneightycharactersthisvmgroupnameismorethaneightycharacters\": vmGroup must be less than 80 characters in length",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with vmGroup configured without feature gate enabled",
            modify: |v| v["workspace"]["vmGroup"] = json!("thisisavmgroup"),
            error: "providerSpec.workspace.vmGroup: Invalid value: \"thisisavmgroup\": feature gate VSphereHostVMGroupZonal must be enabled to use vmGroup",
            warnings: &[],
            ours: Some(Ours {
                error: "",
                warnings: &[],
                why: "no feature gates: VM groups (host-group zones) are always supported",
            }),
        },
        MaoCase {
            name: "with vmGroup configured with feature gate enabled",
            modify: |v| v["workspace"]["vmGroup"] = json!("thisisavmgroup"),
            error: "",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with data disk configured",
            modify: |v| disk(v, json!({"name": "Disk1", "sizeGiB": 10})),
            error: "",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with data disk configured with max size",
            modify: |v| disk(v, json!({"name": "Disk1", "sizeGiB": 16384})),
            error: "",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with data disk configured with size above max",
            modify: |v| disk(v, json!({"name": "Disk1", "sizeGiB": 17000})),
            error: "providerSpec.disks[0].sizeGiB: Invalid value: 17000: data disk size (GiB) must not exceed 16384",
            warnings: &[],
            ours: Some(Ours {
                error: "providerSpec.dataDisks[0].sizeGiB: Invalid value: 17000: data disk size (GiB) must not exceed 16384",
                warnings: &[],
                why: "paths name the real field, dataDisks",
            }),
        },
        MaoCase {
            name: "with data disk configured without a size",
            modify: |v| disk(v, json!({"name": "Disk1", "sizeGiB": 0})),
            error: "providerSpec.disks[0].sizeGiB: Required value: data disk size must be set",
            warnings: &[],
            ours: Some(Ours {
                error: "providerSpec.dataDisks[0].sizeGiB: Required value: data disk size must be set",
                warnings: &[],
                why: "paths name the real field, dataDisks",
            }),
        },
        MaoCase {
            name: "with data disk configured without a name",
            modify: |v| disk(v, json!({"name": "", "sizeGiB": 10})),
            error: "providerSpec.disks[0].name: Required value: data disk name must be set",
            warnings: &[],
            ours: Some(Ours {
                error: "providerSpec.dataDisks[0].name: Required value: data disk name must be set",
                warnings: &[],
                why: "paths name the real field, dataDisks",
            }),
        },
        MaoCase {
            name: "with data disk configured with invalid name",
            modify: |v| disk(v, json!({"name": "Bad #Name", "sizeGiB": 10})),
            error: "providerSpec.disks[0].name: Invalid value: \"Bad #Name\": data disk name must consist only of alphanumeric characters, hyphens and underscores, and must start and end with an alphanumeric character.",
            warnings: &[],
            ours: Some(Ours {
                error: "providerSpec.dataDisks[0].name: Invalid value: \"Bad #Name\": data disk name must consist only of alphanumeric characters, hyphens and underscores, and must start and end with an alphanumeric character.",
                warnings: &[],
                why: "paths name the real field, dataDisks",
            }),
        },
        MaoCase {
            name: "with data disk configured with provisioning mode",
            modify: |v| {
                disk(
                    v,
                    json!({"name": "Disk1", "sizeGiB": 10, "provisioningMode": "Thin"}),
                )
            },
            error: "",
            warnings: &[],
            ours: None,
        },
        MaoCase {
            name: "with data disk configured with invalid provisioning mode",
            modify: |v| {
                disk(
                    v,
                    json!({"name": "Disk1", "sizeGiB": 10, "provisioningMode": "Fat"}),
                )
            },
            error: "providerSpec.disks[0]: Unsupported value: \"Fat\": supported values: \"EagerlyZeroed\", \"Thick\", \"Thin\"",
            warnings: &[],
            ours: Some(Ours {
                error: "providerSpec.dataDisks[0].provisioningMode: Unsupported value: \"Fat\": supported values: \"EagerlyZeroed\", \"Thick\", \"Thin\"",
                warnings: &[],
                why: "paths name the real field, dataDisks[i].provisioningMode",
            }),
        },
    ]
}

/// machine-api-operator `TestValidateVSphereProviderSpec`: the validating webhook alone, on a
/// provider spec at `providerSpec` (upstream's path).
#[test]
fn mao_validate_vsphere_provider_spec() {
    let cases = mao_validate_cases();
    assert_eq!(cases.len(), 33);
    for case in cases {
        let mut value = mao_base_spec();
        (case.modify)(&mut value);
        let report = check_provider_spec(
            &value,
            "providerSpec",
            ProviderSpecUse::Machine,
            &Ctx::default(),
        );
        let (error, warnings) = match &case.ours {
            Some(ours) => {
                assert!(
                    ours.error != case.error || ours.warnings != case.warnings,
                    "{}: listed as a difference ({}) but upstream agrees",
                    case.name,
                    ours.why
                );
                (ours.error, ours.warnings)
            }
            None => (case.error, case.warnings),
        };
        assert_eq!(aggregate(&report.errors), error, "{}", case.name);
        assert_eq!(report.warnings, warnings, "{}", case.name);
    }
}

/// machine-api-operator `TestDefaultVSphereProviderSpec` "it defaults defaultable fields": an
/// empty provider spec gets upstream's user-data and credentials secrets, and nothing else.
#[test]
fn mao_default_vsphere_provider_spec() {
    let mut machine = json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": "m", "namespace": "default"},
        "spec": {"providerSpec": {"value": {}}}});
    let defaulted = default_object(Kind::Machine, &mut machine);
    assert_eq!(
        defaulted,
        [
            "spec.providerSpec.value.userDataSecret",
            "spec.providerSpec.value.credentialsSecret"
        ]
    );
    assert_eq!(
        machine["spec"]["providerSpec"]["value"],
        json!({"userDataSecret": {"name": "worker-user-data"},
            "credentialsSecret": {"name": "vsphere-cloud-credentials"}})
    );
    // Set references are kept.
    let before = machine.clone();
    assert!(default_object(Kind::Machine, &mut machine).is_empty());
    assert_eq!(machine, before);
}

fn mao_machine(value: Option<Value>) -> Value {
    let mut m = json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": "m", "namespace": "default"}, "spec": {"providerSpec": {}}});
    if let Some(v) = value {
        m["spec"]["providerSpec"]["value"] = v;
    }
    m
}

/// machine-api-operator `TestMachineCreation`, the vSphere cases: defaulting, then validation.
#[test]
fn mao_machine_creation_vsphere() {
    // "with vSphere and a nil provider spec value": upstream rejects
    // "providerSpec.value: Required value: a value must be provided". Ours admits with a warning:
    // without a provider spec the Machine is not this provider's to create.
    let out = admit(&mao_machine(None), None, &Ctx::default());
    assert!(out.allowed(), "{:?}", out.errors);
    assert_eq!(
        out.warnings,
        ["spec.providerSpec.value is not set: this provider cannot create the machine"]
    );

    // "with vSphere and no fields set" (Go marshals `template: ""` and `devices: null`).
    let empty = json!({"template": "", "snapshot": "", "network": {"devices": null},
        "metadata": {"creationTimestamp": null}});
    let out = admit(&mao_machine(Some(empty)), None, &Ctx::default());
    assert_eq!(
        aggregate(&out.errors),
        "[spec.providerSpec.value.template: Required value: template must be provided, spec.providerSpec.value.workspace: Required value: workspace must be provided, spec.providerSpec.value.network.devices: Required value: at least 1 network device must be provided]"
    );

    // "with vSphere and the template, workspace and network devices set".
    let set = json!({"template": "template", "workspace": {"datacenter": "datacenter", "server": "server"},
        "network": {"devices": [{"networkName": "networkName"}]}});
    let out = admit(&mao_machine(Some(set)), None, &Ctx::default());
    assert!(out.allowed(), "{:?}", out.errors);
}

/// `TestMachineUpdate`'s vSphere provider spec (after defaulting).
fn mao_update_base() -> Value {
    json!({"template": "template", "snapshot": "",
        "workspace": {"datacenter": "datacenter", "server": "server"},
        "network": {"devices": [{"networkName": "networkName"}]},
        "userDataSecret": {"name": "worker-user-data"},
        "credentialsSecret": {"name": "vsphere-cloud-credentials"},
        "metadata": {"creationTimestamp": null}})
}

/// machine-api-operator `TestMachineUpdate`, the vSphere cases: an update from the valid base.
#[test]
fn mao_machine_update_vsphere() {
    let tags12: Vec<String> = (0..12)
        .map(|i| {
            format!("urn:vmomi:InventoryServiceTag:5736bf56-49f5-4667-b38c-b97e09dc95{i:02}:GLOBAL")
        })
        .collect();
    let devices11: Vec<Value> = (1..=11)
        .map(|i| json!({"networkName": format!("networkName{i}")}))
        .collect();
    type Modify = Box<dyn Fn(&mut Value)>;
    // (upstream name, change, upstream's error, ours where it differs)
    let cases: Vec<(&str, Modify, String, Option<String>)> = vec![
        ("with a valid VSphere ProviderSpec", Box::new(|_| {}), String::new(), None),
        (
            "with a valid VSphere ProviderSpec with a tag ID",
            Box::new(|v| v["tagIDs"] = json!(["urn:vmomi:InventoryServiceTag:5736bf56-49f5-4667-b38c-b97e09dc9578:GLOBAL"])),
            String::new(),
            None,
        ),
        (
            "with a valid VSphere ProviderSpec with an invalid tag ID",
            Box::new(|v| v["tagIDs"] = json!(["bad:tag:InventoryServiceTag:5736bf56-49f5-4667-b38c-b97e09dc9578:GLOBAL"])),
            "providerSpec.tagIDs: Required value: tag ID must be in the format of urn:vmomi:InventoryServiceTag:<UUID>:GLOBAL".into(),
            // The error names the tag (index and value), as an invalid value.
            Some("spec.providerSpec.value.tagIDs[0]: Invalid value: \"bad:tag:InventoryServiceTag:5736bf56-49f5-4667-b38c-b97e09dc9578:GLOBAL\": tag ID must be in the format of urn:vmomi:InventoryServiceTag:<UUID>:GLOBAL".into()),
        ),
        (
            "with a valid VSphere ProviderSpec with too many tag IDs",
            {
                let tags = tags12.clone();
                Box::new(move |v| v["tagIDs"] = json!(tags))
            },
            format!("providerSpec.tagIDs: Invalid value: {}: a maximum of 10 tags are allowed", json!(tags12)),
            None,
        ),
        (
            "with an VSphere ProviderSpec, removing the template",
            Box::new(|v| v["template"] = json!("")),
            "providerSpec.template: Required value: template must be provided".into(),
            None,
        ),
        (
            "with an VSphere ProviderSpec, removing the workspace server",
            Box::new(|v| v["workspace"]["server"] = json!("")),
            "providerSpec.workspace.server: Required value: server must be provided".into(),
            None,
        ),
        (
            // Go marshals the emptied NetworkSpec as `devices: null`.
            "with an VSphere ProviderSpec, removing the network devices",
            Box::new(|v| v["network"] = json!({"devices": null})),
            "providerSpec.network.devices: Required value: at least 1 network device must be provided".into(),
            None,
        ),
        (
            "with an VSphere ProviderSpec, having more than 10 network devices",
            {
                let devices = devices11.clone();
                Box::new(move |v| v["network"] = json!({"devices": devices}))
            },
            "providerSpec.network.devices: Too many: 11: must have at most 10 items".into(),
            None,
        ),
    ];
    let old = mao_machine(Some(mao_update_base()));
    assert!(admit(&old, None, &Ctx::default()).allowed());
    for (name, modify, upstream, ours) in cases {
        let mut value = mao_update_base();
        modify(&mut value);
        let out = admit(&mao_machine(Some(value)), Some(&old), &Ctx::default());
        let want =
            ours.unwrap_or_else(|| upstream.replace("providerSpec.", "spec.providerSpec.value."));
        assert_eq!(aggregate(&out.errors), want, "{name}");
    }
}

/// The missing-credentials warning, offline: `validate` warns when the given objects include
/// Secrets but not the Machine's credentials secret (upstream looks it up in the cluster).
#[test]
fn credentials_secret_not_among_the_given_objects() {
    let dir = tempfile::tempdir().unwrap();
    let mut machine = mao_machine(Some(mao_update_base()));
    machine["spec"]["providerSpec"]["value"]["credentialsSecret"]["name"] = json!("does-not-exist");
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "name", "namespace": "default"}, "stringData": {"a": "b"}});
    let file = dir.path().join("objects.json");
    std::fs::write(&file, format!("{machine}\n---\n{secret}\n")).unwrap();
    let (objects, errors) = manifest::load_paths(std::slice::from_ref(&file));
    assert!(errors.is_empty(), "{errors:?}");
    let verdicts = check_all(objects, &Ctx::default());
    let machine_verdict = verdicts
        .iter()
        .find(|v| v.object.kind() == "Machine")
        .unwrap();
    assert!(machine_verdict.outcome.allowed());
    assert!(
        machine_verdict.outcome.warnings.iter().any(|w| w.starts_with(
            "spec.providerSpec.value.credentialsSecret: Invalid value: \"does-not-exist\": not found. Expected CredentialsSecret to exist"
        )),
        "{:?}",
        machine_verdict.outcome.warnings
    );
    // Named the Secret that is there: no warning.
    machine["spec"]["providerSpec"]["value"]["credentialsSecret"]["name"] = json!("name");
    std::fs::write(&file, format!("{machine}\n---\n{secret}\n")).unwrap();
    let (objects, _) = manifest::load_paths(&[file]);
    let verdicts = check_all(objects, &Ctx::default());
    assert!(verdicts.iter().all(|v| {
        !v.outcome
            .warnings
            .iter()
            .any(|w| w.contains("credentialsSecret"))
    }),);
}
