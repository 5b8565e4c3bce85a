//! The Cluster API machine kinds (VSphereMachine, VSphereMachineTemplate, VSphereVM) against
//! CAPV v1.15.0 (`d10abe40…`):
//!
//! * CAPV's webhook test tables (`internal/webhooks/{vspheremachine,vspheremachinetemplate,
//!   vspherevm}_test.go`), ported case by case under their upstream names. Upstream asserts only
//!   "error or not"; each case here also names the field paths the denial must carry. Inputs are
//!   CAPV's Go objects written as the JSON they marshal to (a `metav1.Duration` of 1234 is
//!   `"1.234µs"`). Upstream's objects leave `template` empty, which the CRD schema (CAPV's too:
//!   `minLength: 1`) rejects before any webhook runs; the port fills `template: "t"` so each case
//!   meets exactly the rule it is named for.
//! * CAPV's own VSphereMachineTemplate manifests (`templates/*.yaml`, two e2e patches), stored
//!   verbatim in tests/fixtures/manifests/upstream (SOURCES.md), pass unchanged.
//! * Our generated schemas against CAPV's generated CRDs (tests/fixtures/crds/capv/): every
//!   field CAPV's v1beta1 schema has, with its type, enum and default.
//!
//! The same objects in a real kube-apiserver: tests/realapi_upstream.rs.

use serde_json::{Value, json};
use vsphere_provider::api::manifest;
use vsphere_provider::api::{Kind, infrastructure};
use vsphere_provider::webhook::Ctx;
use vsphere_provider::webhook::admission::{admit, default_object};

const GROUP_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const PROVIDER_ID: &str = "vsphere://42305f0b-dad7-1d3d-5727-0eaffffffffc";
const DEFAULT_TIMEOUT: &str = "5m0s";

fn devices(ips: &[&str]) -> Value {
    Value::Array(
        ips.iter()
            .map(|ip| json!({"networkName": "", "ipAddrs": [ip]}))
            .collect(),
    )
}

/// CAPV's `createVSphereMachine(server, providerID, preferredAPIServerCIDR, ips, powerOffMode,
/// guestSoftPowerOffTimeout, pciDevices)`.
fn machine(
    server: &str,
    provider_id: Option<&str>,
    cidr: &str,
    ips: &[&str],
    mode: &str,
    timeout: Option<&str>,
    pci: Option<Value>,
) -> Value {
    let mut spec = json!({"template": "t", "server": server,
        "network": {"devices": devices(ips)}, "powerOffMode": mode});
    if !cidr.is_empty() {
        spec["network"]["preferredAPIServerCidr"] = cidr.into();
    }
    if let Some(p) = provider_id {
        spec["providerID"] = p.into();
    }
    if let Some(t) = timeout {
        spec["guestSoftPowerOffTimeout"] = t.into();
    }
    if let Some(p) = pci {
        spec["pciDevices"] = p;
    }
    json!({"apiVersion": GROUP_VERSION, "kind": "VSphereMachine",
        "metadata": {"name": "m", "namespace": "default"}, "spec": spec})
}

/// CAPV's `createVSphereMachineTemplate(server, hwVersion, providerID, preferredAPIServerCIDR,
/// ips, pciDevices, namingStrategy)`.
fn template(
    server: &str,
    hw: &str,
    provider_id: Option<&str>,
    cidr: &str,
    ips: &[&str],
    pci: Option<Value>,
    naming: Option<Value>,
) -> Value {
    let mut spec = json!({"template": "t", "server": server, "network": {"devices": devices(ips)}});
    if !hw.is_empty() {
        spec["hardwareVersion"] = hw.into();
    }
    if !cidr.is_empty() {
        spec["network"]["preferredAPIServerCidr"] = cidr.into();
    }
    if let Some(p) = provider_id {
        spec["providerID"] = p.into();
    }
    if let Some(p) = pci {
        spec["pciDevices"] = p;
    }
    if let Some(n) = naming {
        spec["namingStrategy"] = n;
    }
    json!({"apiVersion": GROUP_VERSION, "kind": "VSphereMachineTemplate",
        "metadata": {"name": "mt", "namespace": "default"}, "spec": {"template": {"spec": spec}}})
}

/// CAPV's `createVSphereVM(name, server, biosUUID, preferredAPIServerCIDR, thumbprint, ips,
/// bootstrapRef, os, powerOffMode, guestSoftPowerOffTimeout)`.
#[allow(clippy::too_many_arguments)]
fn vm(
    name: &str,
    server: &str,
    bios: &str,
    cidr: &str,
    thumbprint: &str,
    ips: &[&str],
    bootstrap_ref: Option<Value>,
    os: &str,
    mode: &str,
    timeout: Option<&str>,
) -> Value {
    let mut spec = json!({"template": "t", "server": server, "network": {"devices": devices(ips)},
        "powerOffMode": mode});
    for (k, v) in [("biosUUID", bios), ("thumbprint", thumbprint), ("os", os)] {
        if !v.is_empty() {
            spec[k] = v.into();
        }
    }
    if !cidr.is_empty() {
        spec["network"]["preferredAPIServerCidr"] = cidr.into();
    }
    if let Some(r) = bootstrap_ref {
        spec["bootstrapRef"] = r;
    }
    if let Some(t) = timeout {
        spec["guestSoftPowerOffTimeout"] = t.into();
    }
    json!({"apiVersion": GROUP_VERSION, "kind": "VSphereVM",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

struct Case {
    name: &'static str,
    old: Option<Value>,
    new: Value,
    dry_run: bool,
    /// The field paths of the denial (empty: admitted).
    denied_at: &'static [&'static str],
}

fn create(name: &'static str, new: Value, denied_at: &'static [&'static str]) -> Case {
    Case {
        name,
        old: None,
        new,
        dry_run: false,
        denied_at,
    }
}

fn update(name: &'static str, old: Value, new: Value, denied_at: &'static [&'static str]) -> Case {
    Case {
        name,
        old: Some(old),
        new,
        dry_run: false,
        denied_at,
    }
}

fn run(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for c in &cases {
        let ctx = Ctx {
            dry_run: c.dry_run,
            ..Ctx::default()
        };
        let out = admit(&c.new, c.old.as_ref(), &ctx);
        let mut paths: Vec<&str> = out.errors.iter().map(|e| e.path.as_str()).collect();
        paths.dedup();
        if paths != c.denied_at {
            failures.push(format!(
                "{}: want denial at {:?}, got {:?}",
                c.name,
                c.denied_at,
                out.errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn pci(v: Value) -> Option<Value> {
    Some(v)
}

// ---------------------------------------------------------------------------------------------
// tagIDs (ours: CAPV does not validate them; they end up in a REST path)
// ---------------------------------------------------------------------------------------------

const TAG: &str = "urn:vmomi:InventoryServiceTag:bd0346ac-2b03-4125-8ad6-2ddb3d0ec350:GLOBAL";

fn with_tags(mut obj: Value, tags: &[&str]) -> Value {
    let spec = if obj["kind"] == "VSphereMachineTemplate" {
        &mut obj["spec"]["template"]["spec"]
    } else {
        &mut obj["spec"]
    };
    spec["tagIDs"] = json!(tags);
    obj
}

#[test]
fn tag_ids_must_be_vcenter_tag_urns_on_every_capi_machine_kind() {
    let evil = format!("{TAG}/../../../../vcenter/vm/vm-42/power?action=stop&x=");
    let query = format!("{TAG}?action=detach");
    let machine = || machine("foo.com", None, "", &[], "hard", None, None);
    let template = || template("foo.com", "", None, "", &[], None, None);
    let vm = || vm("v", "foo.com", "", "", "", &[], None, "", "hard", None);
    run(vec![
        create("machine: a tag URN", with_tags(machine(), &[TAG]), &[]),
        create(
            "machine: a path in a tag",
            with_tags(machine(), &[TAG, &evil]),
            &["spec.tagIDs[1]"],
        ),
        create(
            "template: a query in a tag",
            with_tags(template(), &[&query]),
            &["spec.template.spec.tagIDs[0]"],
        ),
        create(
            "vm: a name instead of an id",
            with_tags(vm(), &["zone-a", TAG]),
            &["spec.tagIDs[0]"],
        ),
        // CAPV forbids changing a VSphereMachine's spec at all; the tags' own rule holds too.
        update(
            "machine: a new bad tag",
            with_tags(machine(), &[TAG]),
            with_tags(machine(), &["a b"]),
            &["spec", "spec.tagIDs[0]"],
        ),
    ]);
    let out = admit(&with_tags(vm(), &[&evil]), None, &Ctx::default());
    assert_eq!(
        out.errors[0].to_string(),
        format!(
            "spec.tagIDs[0]: Invalid value: {evil:?}: tag ID must be in the format of urn:vmomi:InventoryServiceTag:<UUID>:GLOBAL"
        )
    );
}

// ---------------------------------------------------------------------------------------------
// customVMXKeys (ours: CAPV copies any key into the VM's extraConfig; docs/vmx-keys.md)
// ---------------------------------------------------------------------------------------------

fn with_vmx_keys(mut obj: Value, keys: &[&str]) -> Value {
    let spec = if obj["kind"] == "VSphereMachineTemplate" {
        &mut obj["spec"]["template"]["spec"]
    } else {
        &mut obj["spec"]
    };
    spec["customVMXKeys"] = keys
        .iter()
        .map(|k| (k.to_string(), json!("TRUE")))
        .collect();
    obj
}

/// One key of each refused class (isolation, devices, identity, files, the provider's own),
/// in the case users might write it, is refused on every kind, naming the key; the common
/// benign settings pass.
#[test]
fn custom_vmx_keys_of_a_refused_class_are_refused_naming_the_key_on_every_kind() {
    let machine = || machine("foo.com", None, "", &[], "hard", None, None);
    let template = || template("foo.com", "", None, "", &[], None, None);
    let vm = || vm("v", "foo.com", "", "", "", &[], None, "", "hard", None);
    let benign = [
        "disk.EnableUUID",
        "pciPassthru.use64bitMMIO",
        "guestinfo.mytool",
    ];
    let refused = [
        "isolation.tools.copy.disable",
        "Isolation.Device.Edit.Disable",
        "RemoteDisplay.vnc.enabled",
        "ethernet1.present",
        "pciPassthru0.id",
        "scsi0:1.fileName",
        "uuid.bios",
        "vc.uuid",
        "log.rotateSize",
        "vsphere-provider.machine",
        "guestinfo.userdata",
        "guestinfo.ignition.config.data",
        "guestinfo.metadata.encoding",
        "sched.mem.pshare.salt",
    ];
    for (kind, obj, base) in [
        ("VSphereMachine", machine(), "spec"),
        ("VSphereMachineTemplate", template(), "spec.template.spec"),
        ("VSphereVM", vm(), "spec"),
    ] {
        let ok = admit(&with_vmx_keys(obj.clone(), &benign), None, &Ctx::default());
        assert!(ok.errors.is_empty(), "{kind}: {:?}", ok.errors);
        for key in refused {
            let out = admit(
                &with_vmx_keys(obj.clone(), &["disk.EnableUUID", key]),
                None,
                &Ctx::default(),
            );
            let shown: Vec<String> = out.errors.iter().map(ToString::to_string).collect();
            let want = format!("{base}.customVMXKeys[{key}]");
            assert_eq!(
                out.errors
                    .iter()
                    .map(|e| e.path.as_str())
                    .collect::<Vec<_>>(),
                [want.as_str()],
                "{kind} {key}: {shown:?}"
            );
            assert!(
                shown[0].contains("Forbidden: this key may not be set")
                    && shown[0].contains("docs/vmx-keys.md"),
                "{shown:?}"
            );
        }
    }
    // On update only a key the stored object lacks is judged: a VSphereVM stored before the
    // rule still takes the controller's own updates (its VM is held at the clone instead).
    let stored = with_vmx_keys(vm(), &["isolation.tools.copy.disable"]);
    let mut bumped = stored.clone();
    bumped["spec"]["thumbprint"] =
        json!("AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD");
    run(vec![
        update("vm: a stored refused key", stored.clone(), bumped, &[]),
        update(
            "vm: a refused key added",
            vm(),
            with_vmx_keys(vm(), &["vhv.enable"]),
            &["spec.customVMXKeys[vhv.enable]", "spec"],
        ),
    ]);
}

// ---------------------------------------------------------------------------------------------
// VSphereMachine
// ---------------------------------------------------------------------------------------------

#[test]
fn test_vsphere_machine_default() {
    let mut m = json!({"apiVersion": GROUP_VERSION, "kind": "VSphereMachine",
        "metadata": {"name": "m", "namespace": "default"}, "spec": {"template": "t"}});
    let set = default_object(Kind::VSphereMachine, &mut m);
    assert_eq!(m["spec"]["datacenter"], "*");
    assert!(set.contains(&"spec.datacenter".to_string()), "{set:?}");
    // The CRD default CAPV's schema carries too.
    assert_eq!(m["spec"]["powerOffMode"], "hard");
    let mut given = m.clone();
    given["spec"]["datacenter"] = "DC0".into();
    default_object(Kind::VSphereMachine, &mut given);
    assert_eq!(given["spec"]["datacenter"], "DC0");
}

#[test]
fn test_vsphere_machine_validate_create() {
    let ips = &["192.168.0.1/32", "192.168.0.3/32"];
    let t = Some(DEFAULT_TIMEOUT);
    run(vec![
        create(
            "preferredAPIServerCIDR set on creation",
            machine(
                "foo.com",
                None,
                "192.168.0.1/32",
                &[],
                "trySoft",
                None,
                None,
            ),
            &["spec.network.preferredAPIServerCidr"],
        ),
        create(
            "IPs are not in CIDR format",
            machine(
                "foo.com",
                None,
                "",
                &["192.168.0.1/32", "192.168.0.3"],
                "trySoft",
                None,
                None,
            ),
            &["spec.network.devices[1].ipAddrs[0]"],
        ),
        create(
            "IPs are not valid IPs in CIDR format",
            machine(
                "foo.com",
                None,
                "",
                &["<nil>/32", "192.168.0.644/33"],
                "trySoft",
                None,
                None,
            ),
            &[
                "spec.network.devices[0].ipAddrs[0]",
                "spec.network.devices[1].ipAddrs[0]",
            ],
        ),
        create(
            "guestSoftPowerOffTimeout should not be set with powerOffMode set to hard",
            machine("foo.com", None, "", ips, "hard", t, None),
            &["spec.guestSoftPowerOffTimeout"],
        ),
        create(
            "guestSoftPowerOffTimeout should not be set with powerOffMode set to soft",
            machine("foo.com", None, "", ips, "soft", t, None),
            &["spec.guestSoftPowerOffTimeout"],
        ),
        create(
            "guestSoftPowerOffTimeout should not be negative",
            machine("foo.com", None, "", ips, "hard", Some("-1.234µs"), None),
            &["spec.guestSoftPowerOffTimeout"],
        ),
        create(
            "empty pciDevice",
            machine("foo.com", None, "", ips, "trySoft", None, pci(json!([{}]))),
            &["spec.pciDevices[0]"],
        ),
        create(
            "incorrect pciDevice (vGPU and deviceId)",
            machine(
                "foo.com",
                None,
                "",
                ips,
                "trySoft",
                None,
                pci(json!([{"vGPUProfile": "vgpu", "deviceId": 1}])),
            ),
            &["spec.pciDevices[0]"],
        ),
        create(
            "incorrect pciDevice (vGPU, deviceId and vendorId)",
            machine(
                "foo.com",
                None,
                "",
                ips,
                "trySoft",
                None,
                pci(json!([{"vGPUProfile": "vgpu", "deviceId": 1, "vendorId": 1}])),
            ),
            &["spec.pciDevices[0]"],
        ),
        create(
            "incomplete pciDevice (deviceId only)",
            machine(
                "foo.com",
                None,
                "",
                ips,
                "trySoft",
                None,
                pci(json!([{"deviceId": 1}])),
            ),
            &["spec.pciDevices[0]"],
        ),
        create(
            "incomplete pciDevice (vendorId only)",
            machine(
                "foo.com",
                None,
                "",
                ips,
                "trySoft",
                None,
                pci(json!([{"vendorId": 1}])),
            ),
            &["spec.pciDevices[0]"],
        ),
        create(
            "successful VSphereMachine creation with PCI device",
            machine(
                "foo.com",
                None,
                "",
                ips,
                "trySoft",
                None,
                pci(json!([{"deviceId": 1, "vendorId": 1}])),
            ),
            &[],
        ),
        create(
            "successful VSphereMachine creation with vgpu",
            machine(
                "foo.com",
                None,
                "",
                ips,
                "trySoft",
                None,
                pci(json!([{"vGPUProfile": "vgpu"}])),
            ),
            &[],
        ),
        create(
            "successful VSphereMachine creation",
            machine("foo.com", None, "", ips, "trySoft", None, None),
            &[],
        ),
        create(
            "successful VSphereMachine creation with powerOffMode set to hard",
            machine("foo.com", None, "", ips, "hard", None, None),
            &[],
        ),
        create(
            "successful VSphereMachine creation with powerOffMode set to soft",
            machine("foo.com", None, "", ips, "soft", None, None),
            &[],
        ),
        create(
            "successful VSphereMachine creation with powerOffMode set to trySoft and non-default timeout",
            machine("foo.com", None, "", ips, "trySoft", Some("1.234µs"), None),
            &[],
        ),
    ]);
}

#[test]
fn test_vsphere_machine_validate_update() {
    let one = &["192.168.0.1/32"];
    let two = &["192.168.0.1/32", "192.168.0.10/32"];
    let pid = Some(PROVIDER_ID);
    run(vec![
        update(
            "ProviderID can be updated",
            machine("foo.com", None, "", one, "soft", None, None),
            machine("foo.com", pid, "", one, "soft", None, None),
            &[],
        ),
        update(
            "updating ips can be done",
            machine("foo.com", None, "", one, "soft", None, None),
            machine("foo.com", pid, "", two, "soft", None, None),
            &[],
        ),
        update(
            "updating non-existing IP with invalid ips can not be done",
            machine("foo.com", None, "", &[], "soft", None, None),
            machine(
                "foo.com",
                pid,
                "",
                &["<nil>/32", "192.168.0.10/33"],
                "soft",
                None,
                None,
            ),
            &[
                "spec.network.devices[0].ipAddrs[0]",
                "spec.network.devices[1].ipAddrs[0]",
            ],
        ),
        update(
            "updating existing IP with invalid ips can not be done",
            machine("foo.com", None, "", one, "soft", None, None),
            machine(
                "foo.com",
                pid,
                "",
                &["<nil>/32", "192.168.0.10/33"],
                "soft",
                None,
                None,
            ),
            &[
                "spec.network.devices[0].ipAddrs[0]",
                "spec.network.devices[1].ipAddrs[0]",
            ],
        ),
        update(
            "updating server cannot be done",
            machine("foo.com", None, "", one, "soft", None, None),
            machine("bar.com", pid, "", two, "soft", None, None),
            &["spec"],
        ),
        update(
            "updating pci devices cannot be done",
            machine(
                "foo.com",
                None,
                "",
                one,
                "soft",
                None,
                pci(json!([{"vGPUProfile": "vgpu"}])),
            ),
            machine(
                "foo.com",
                None,
                "",
                one,
                "soft",
                None,
                pci(json!([{"vGPUProfile": "new-vgpu"}])),
            ),
            &["spec"],
        ),
        update(
            "powerOffMode cannot be updated when new powerOffMode is not valid",
            machine("foo.com", pid, "", one, "trySoft", None, None),
            machine("foo.com", pid, "", one, "hard", Some(DEFAULT_TIMEOUT), None),
            &["spec.guestSoftPowerOffTimeout"],
        ),
        update(
            "powerOffMode can be updated to hard",
            machine(
                "foo.com",
                pid,
                "",
                one,
                "trySoft",
                Some(DEFAULT_TIMEOUT),
                None,
            ),
            machine("foo.com", pid, "", one, "hard", None, None),
            &[],
        ),
        update(
            "powerOffMode can be updated to soft",
            machine(
                "foo.com",
                pid,
                "",
                one,
                "trySoft",
                Some(DEFAULT_TIMEOUT),
                None,
            ),
            machine("foo.com", pid, "", one, "soft", None, None),
            &[],
        ),
    ]);
}

// ---------------------------------------------------------------------------------------------
// VSphereMachineTemplate
// ---------------------------------------------------------------------------------------------

const WINDOWS_EXAMPLE: &str = "{{ if le (len .machine.name) 20 }}{{ .machine.name }}{{else}}{{ trimSuffix \"-\" (trunc 14 .machine.name) }}-{{ trunc -5 .machine.name }}{{end}}";

#[test]
fn test_vsphere_machine_template_validate_create() {
    let two = &["192.168.0.1/32", "192.168.0.3/32"];
    // `Template *string` with omitempty: a nil template is no key at all.
    let named = |t: Option<&str>| Some(t.map_or(json!({}), |t| json!({"template": t})));
    let both_ips = &[
        "spec.template.spec.network.devices[0].ipAddrs",
        "spec.template.spec.network.devices[1].ipAddrs",
    ];
    run(vec![
        create(
            "preferredAPIServerCIDR set on creation",
            template("foo.com", "", None, "192.168.0.1/32", &[], None, None),
            &["spec.template.spec.network.preferredAPIServerCidr"],
        ),
        create(
            "ProviderID set on creation",
            template("foo.com", "", Some(PROVIDER_ID), "", &[], None, None),
            &["spec.template.spec.providerID"],
        ),
        create(
            "IPs are not in CIDR format",
            template(
                "foo.com",
                "",
                None,
                "",
                &["192.168.0.1/32", "192.168.0.3"],
                None,
                None,
            ),
            both_ips,
        ),
        // Upstream's name; it expects an error: templates may carry no IP addresses.
        create(
            "successful VSphereMachine creation",
            template("foo.com", "", None, "", two, None, None),
            both_ips,
        ),
        create(
            "incomplete hardware version",
            template("foo.com", "vmx-", None, "", &[], None, None),
            &["spec.template.spec.hardwareVersion"],
        ),
        create(
            "incorrect hardware version",
            template("foo.com", "vmx-0", None, "", &[], None, None),
            &["spec.template.spec.hardwareVersion"],
        ),
        create(
            "empty pciDevice",
            template("foo.com", "vmx-17", None, "", &[], pci(json!([{}])), None),
            &["spec.template.spec.pciDevices[0]"],
        ),
        create(
            "incorrect pciDevice",
            template(
                "foo.com",
                "vmx-17",
                None,
                "",
                &[],
                pci(json!([{"vGPUProfile": "vgpu", "deviceId": 1}])),
                None,
            ),
            &["spec.template.spec.pciDevices[0]"],
        ),
        create(
            "incorrect pciDevice (all three)",
            template(
                "foo.com",
                "vmx-17",
                None,
                "",
                &[],
                pci(json!([{"vGPUProfile": "vgpu", "deviceId": 1, "vendorId": 1}])),
                None,
            ),
            &["spec.template.spec.pciDevices[0]"],
        ),
        create(
            "incomplete pciDevice",
            template(
                "foo.com",
                "vmx-17",
                None,
                "",
                &[],
                pci(json!([{"deviceId": 1}])),
                None,
            ),
            &["spec.template.spec.pciDevices[0]"],
        ),
        create(
            "incomplete pciDevice (vendorId only)",
            template(
                "foo.com",
                "vmx-17",
                None,
                "",
                &[],
                pci(json!([{"vendorId": 1}])),
                None,
            ),
            &["spec.template.spec.pciDevices[0]"],
        ),
        create(
            "successful VSphereMachine creation with PCI device",
            template(
                "foo.com",
                "vmx-17",
                None,
                "",
                &[],
                pci(json!([{"deviceId": 1, "vendorId": 1}])),
                None,
            ),
            &[],
        ),
        create(
            "successful VSphereMachine creation with vgpu",
            template(
                "foo.com",
                "vmx-17",
                None,
                "",
                &[],
                pci(json!([{"vGPUProfile": "vgpu"}])),
                None,
            ),
            &[],
        ),
        create(
            "successful VSphereMachine creation with hardware version set and namingStrategy not set",
            template("foo.com", "vmx-17", None, "", &[], None, None),
            &[],
        ),
        create(
            "successful VSphereMachineTemplate creation with namingStrategy.Template not set",
            template("foo.com", "vmx-17", None, "", &[], None, named(None)),
            &[],
        ),
        create(
            "successful VSphereMachineTemplate creation with namingStrategy.template is set to the fallback value",
            template(
                "foo.com",
                "vmx-17",
                None,
                "",
                &[],
                None,
                named(Some("{{ .machine.name }}")),
            ),
            &[],
        ),
        create(
            "successful VSphereMachineTemplate creation with namingStrategy.template is set the Windows example",
            template(
                "foo.com",
                "vmx-17",
                None,
                "",
                &[],
                None,
                named(Some(WINDOWS_EXAMPLE)),
            ),
            &[],
        ),
        create(
            "failed VSphereMachineTemplate creation with namingStrategy.template is set to an invalid template",
            template(
                "foo.com",
                "vmx-17",
                None,
                "",
                &[],
                None,
                named(Some("{{ invalid")),
            ),
            &["spec.template.spec.namingStrategy.template"],
        ),
        create(
            "failed VSphereMachineTemplate creation with namingStrategy.template  is set to a valid template that renders an invalid name",
            template(
                "foo.com",
                "vmx-17",
                None,
                "",
                &[],
                None,
                named(Some("-{{ .machine.name }}")),
            ),
            &["spec.template.spec.namingStrategy.template"],
        ),
    ]);
}

#[test]
fn test_vsphere_machine_template_validate_update() {
    let one = &["192.168.0.1/32"];
    let frozen = &["spec.template.spec"];
    run(vec![
        update(
            "ProviderID cannot be updated",
            template("foo.com", "", None, "", one, None, None),
            template("foo.com", "", Some(PROVIDER_ID), "", one, None, None),
            frozen,
        ),
        update(
            "ip addresses cannot be updated",
            template("foo.com", "", None, "", one, None, None),
            template(
                "foo.com",
                "",
                Some(PROVIDER_ID),
                "",
                &["192.168.0.1/32", "192.168.0.10/32"],
                None,
                None,
            ),
            frozen,
        ),
        update(
            "server cannot be updated",
            template("foo.com", "", None, "", one, None, None),
            template(
                "baz.com",
                "",
                Some(PROVIDER_ID),
                "",
                &["192.168.0.1/32", "192.168.0.10/32"],
                None,
                None,
            ),
            frozen,
        ),
        update(
            "hardware version cannot be updated",
            template("foo.com", "vmx-16", None, "", one, None, None),
            template("baz.com", "vmx-17", None, "", one, None, None),
            frozen,
        ),
        update(
            "pci devices cannot be updated",
            template(
                "foo.com",
                "vmx-16",
                None,
                "",
                one,
                pci(json!([{"vGPUProfile": "vgpu"}])),
                None,
            ),
            template(
                "foo.com",
                "vmx-16",
                None,
                "",
                one,
                pci(json!([{"vGPUProfile": "new-vgpu"}])),
                None,
            ),
            frozen,
        ),
        update(
            "with hardware version set and not updated",
            template("foo.com", "vmx-16", None, "", one, None, None),
            template("foo.com", "vmx-16", None, "", one, None, None),
            &[],
        ),
        update(
            "naming strategy can not be updated",
            template("foo.com", "vmx-16", None, "", one, None, None),
            template(
                "foo.com",
                "vmx-16",
                None,
                "",
                &[],
                None,
                Some(json!({"template": "{{ .machine.name }}"})),
            ),
            frozen,
        ),
    ]);
}

/// The topology controller computes its diffs with server-side-apply dry-runs of a changed
/// template carrying `topology.cluster.x-k8s.io/dry-run`: those pass; the same change without
/// the annotation, or the annotation on a real (non-dry-run) request, does not.
#[test]
fn template_immutability_lets_topology_dry_runs_through() {
    let old = template("foo.com", "vmx-16", None, "", &[], None, None);
    let mut changed = template("foo.com", "vmx-17", None, "", &[], None, None);
    let plain = changed.clone();
    changed["metadata"]["annotations"] = json!({"topology.cluster.x-k8s.io/dry-run": ""});
    let case = |name, new: &Value, dry_run, denied_at| Case {
        name,
        old: Some(old.clone()),
        new: new.clone(),
        dry_run,
        denied_at,
    };
    run(vec![
        case("topology dry-run", &changed, true, &[]),
        case(
            "dry-run without the annotation",
            &plain,
            true,
            &["spec.template.spec"],
        ),
        case(
            "annotation on a real request",
            &changed,
            false,
            &["spec.template.spec"],
        ),
    ]);
}

// ---------------------------------------------------------------------------------------------
// VSphereVM
// ---------------------------------------------------------------------------------------------

const BIOS_UUID: &str = "vsphere://42305f0b-dad7-1d3d-5727-0eafffffbbbfc";
const WINDOWS_VM_NAME: &str = "cluster-md-containerd-b7fccbf59-2qj6q";
const LINUX_VM_NAME: &str = "linux-control-plane-qkkbv";

#[test]
fn test_vsphere_vm_default() {
    let ips = &["192.168.0.1/32", "192.168.0.3/32"];
    for (os, want) in [("Windows", "Windows"), ("Linux", "Linux"), ("", "Linux")] {
        let mut v = vm(
            LINUX_VM_NAME,
            "foo.com",
            "",
            "",
            "",
            ips,
            None,
            os,
            "trySoft",
            None,
        );
        default_object(Kind::VSphereVM, &mut v);
        assert_eq!(v["spec"]["os"], want, "{os:?}");
    }
}

#[test]
fn test_vsphere_vm_validate_create() {
    let ips = &["192.168.0.1/32", "192.168.0.3/32"];
    let t = Some(DEFAULT_TIMEOUT);
    run(vec![
        create(
            "preferredAPIServerCIDR set on creation",
            vm(
                "vsphere-vm-1",
                "foo.com",
                "",
                "192.168.0.1/32",
                "",
                &[],
                None,
                "Linux",
                "trySoft",
                None,
            ),
            &["spec.network.preferredAPIServerCidr"],
        ),
        create(
            "IPs are not in CIDR format",
            vm(
                "vsphere-vm-1",
                "foo.com",
                "",
                "",
                "",
                &["192.168.0.1/32", "192.168.0.3"],
                None,
                "Linux",
                "trySoft",
                None,
            ),
            &["spec.network.devices[1].ipAddrs[0]"],
        ),
        create(
            "successful VSphereVM creation",
            vm(
                "vsphere-vm-1",
                "foo.com",
                "",
                "",
                "",
                ips,
                None,
                "Linux",
                "trySoft",
                None,
            ),
            &[],
        ),
        create(
            "successful VSphereVM creation with powerOffMode set to hard",
            vm(
                "vsphere-vm-1",
                "foo.com",
                "",
                "",
                "",
                ips,
                None,
                "Linux",
                "hard",
                None,
            ),
            &[],
        ),
        create(
            "successful VSphereVM creation with powerOffMode set to soft",
            vm(
                "vsphere-vm-1",
                "foo.com",
                "",
                "",
                "",
                ips,
                None,
                "Linux",
                "soft",
                None,
            ),
            &[],
        ),
        create(
            "successful VSphereVM creation with powerOffMode set to trySoft and non-default timeout",
            vm(
                "vsphere-vm-1",
                "foo.com",
                "",
                "",
                "",
                ips,
                None,
                "Linux",
                "trySoft",
                Some("1.234µs"),
            ),
            &[],
        ),
        create(
            "name too long for Windows VM",
            vm(
                WINDOWS_VM_NAME,
                "foo.com",
                "",
                "",
                "",
                ips,
                None,
                "Windows",
                "trySoft",
                None,
            ),
            &["metadata.name"],
        ),
        create(
            "no error with name too long for Linux VM",
            vm(
                LINUX_VM_NAME,
                "foo.com",
                "",
                "",
                "",
                ips,
                None,
                "Linux",
                "trySoft",
                None,
            ),
            &[],
        ),
        create(
            "guestSoftPowerOffTimeout should not be set with powerOffMode set to hard",
            vm(
                LINUX_VM_NAME,
                "foo.com",
                "",
                "",
                "",
                ips,
                None,
                "Linux",
                "hard",
                t,
            ),
            &["spec.guestSoftPowerOffTimeout"],
        ),
        create(
            "guestSoftPowerOffTimeout should not be set with powerOffMode set to soft",
            vm(
                LINUX_VM_NAME,
                "foo.com",
                "",
                "",
                "",
                ips,
                None,
                "Linux",
                "soft",
                t,
            ),
            &["spec.guestSoftPowerOffTimeout"],
        ),
        create(
            "guestSoftPowerOffTimeout should not be negative",
            vm(
                LINUX_VM_NAME,
                "foo.com",
                "",
                "",
                "",
                ips,
                None,
                "Linux",
                "trySoft",
                Some("-1.234µs"),
            ),
            &["spec.guestSoftPowerOffTimeout"],
        ),
    ]);
}

#[test]
fn test_vsphere_vm_validate_update() {
    let one = &["192.168.0.1/32"];
    let two = &["192.168.0.1/32", "192.168.0.10/32"];
    let n = "vsphere-vm-1";
    let tp = "AA:BB:CC:DD:EE";
    let t = Some(DEFAULT_TIMEOUT);
    run(vec![
        update(
            "ProviderID can be updated",
            vm(
                n, "foo.com", "", "", "", one, None, "Linux", "trySoft", None,
            ),
            vm(
                n, "foo.com", BIOS_UUID, "", "", one, None, "Linux", "trySoft", None,
            ),
            &[],
        ),
        update(
            "updating ips can be done",
            vm(
                n, "foo.com", "", "", "", one, None, "Linux", "trySoft", None,
            ),
            vm(
                n, "foo.com", BIOS_UUID, "", "", two, None, "Linux", "trySoft", None,
            ),
            &[],
        ),
        update(
            "updating bootstrapRef can be done",
            vm(
                n, "foo.com", "", "", "", one, None, "Linux", "trySoft", None,
            ),
            vm(
                n,
                "foo.com",
                BIOS_UUID,
                "",
                "",
                two,
                Some(json!({})),
                "Linux",
                "trySoft",
                None,
            ),
            &[],
        ),
        update(
            "updating server cannot be done",
            vm(
                n, "foo.com", "", "", "", one, None, "Linux", "trySoft", None,
            ),
            vm(
                n, "bar.com", BIOS_UUID, "", "", two, None, "Linux", "trySoft", None,
            ),
            &["spec"],
        ),
        update(
            "updating OS can be done only when empty",
            vm(
                "vsphere-vm-1-os",
                "foo.com",
                "",
                "",
                "",
                one,
                None,
                "",
                "trySoft",
                None,
            ),
            vm(
                "vsphere-vm-1-os",
                "foo.com",
                "",
                "",
                "",
                one,
                None,
                "Linux",
                "trySoft",
                None,
            ),
            &[],
        ),
        update(
            "updating OS cannot be done when alreadySet",
            vm(
                "vsphere-vm-1-os",
                "foo.com",
                "",
                "",
                "",
                one,
                None,
                "Windows",
                "trySoft",
                None,
            ),
            vm(
                "vsphere-vm-1-os",
                "foo.com",
                "",
                "",
                "",
                one,
                None,
                "Linux",
                "trySoft",
                None,
            ),
            &["spec"],
        ),
        update(
            "updating thumbprint can be updated",
            vm(
                n, "foo.com", "", "", tp, one, None, "Linux", "trySoft", None,
            ),
            vm(
                n,
                "foo.com",
                BIOS_UUID,
                "",
                "BB:CC:DD:EE:FF",
                one,
                None,
                "Linux",
                "trySoft",
                None,
            ),
            &[],
        ),
        update(
            "powerOffMode cannot be updated when new powerOffMode is not valid",
            vm(
                n, "foo.com", "", "", tp, one, None, "Linux", "trySoft", None,
            ),
            vm(
                n,
                "foo.com",
                BIOS_UUID,
                "",
                "BB:CC:DD:EE:FF",
                one,
                None,
                "Linux",
                "soft",
                t,
            ),
            &["spec.guestSoftPowerOffTimeout"],
        ),
        update(
            "powerOffMode can be updated to hard",
            vm(n, "foo.com", "", "", tp, one, None, "Linux", "trySoft", t),
            vm(
                n,
                "foo.com",
                BIOS_UUID,
                "",
                "BB:CC:DD:EE:FF",
                one,
                None,
                "Linux",
                "hard",
                None,
            ),
            &[],
        ),
        update(
            "powerOffMode can be updated to soft",
            vm(n, "foo.com", "", "", tp, one, None, "Linux", "trySoft", t),
            vm(
                n,
                "foo.com",
                BIOS_UUID,
                "",
                "BB:CC:DD:EE:FF",
                one,
                None,
                "Linux",
                "soft",
                None,
            ),
            &[],
        ),
        update(
            "biosUUID can be set to a value",
            vm(
                n, "foo.com", "", "", tp, one, None, "Linux", "trySoft", None,
            ),
            vm(
                n, "foo.com", BIOS_UUID, "", tp, one, None, "Linux", "trySoft", None,
            ),
            &[],
        ),
        update(
            "biosUUID cannot be updated to a different value",
            vm(
                n, "foo.com", "old-uuid", "", tp, one, None, "Linux", "trySoft", None,
            ),
            vm(
                n, "foo.com", BIOS_UUID, "", tp, one, None, "Linux", "trySoft", None,
            ),
            &["spec"],
        ),
    ]);
}

// ---------------------------------------------------------------------------------------------
// CAPV's manifests and CRDs
// ---------------------------------------------------------------------------------------------

const UPSTREAM: &str = "tests/fixtures/manifests/upstream";

fn fixture_docs(name: &str) -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(UPSTREAM)
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The VSphereMachineTemplates of CAPV's cluster templates.
pub fn capv_machine_templates() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for file in [
        "capv-04-cluster-template.yaml",
        "capv-05-cluster-template-ignition.yaml",
        "capv-06-cluster-template-node-ipam.yaml",
        "capv-07-clusterclass-template.yaml",
    ] {
        for d in fixture_docs(file) {
            if d["kind"] == "VSphereMachineTemplate" {
                let name = d["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                out.push((format!("{file}: {name}"), d));
            }
        }
    }
    out
}

/// JSON merge (what the e2e suite's strategic-merge patches do to these maps).
fn merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p.clone(),
    }
}

#[test]
fn capv_machine_templates_pass_unchanged() {
    let templates = capv_machine_templates();
    assert_eq!(
        templates.len(),
        7,
        "{:?}",
        templates.iter().map(|t| &t.0).collect::<Vec<_>>()
    );
    let ctx = Ctx {
        allow_placeholders: true,
        ..Ctx::default()
    };
    for (name, doc) in &templates {
        let out = admit(doc, None, &ctx);
        assert!(out.allowed(), "{name}: {:?}", out.errors);
    }
    // Decoded through the typed path too (what local mode and the controllers read).
    let paths: Vec<std::path::PathBuf> = (4..=7)
        .map(|i| {
            std::fs::read_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(UPSTREAM))
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .find(|p| {
                    p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with(&format!("capv-0{i}-"))
                })
                .unwrap()
        })
        .collect();
    let (objects, _) = manifest::load_paths(&paths);
    let typed = objects
        .iter()
        .filter(|o| o.kind() == "VSphereMachineTemplate")
        .map(|o| o.typed().map_err(|e| format!("{}: {e}", o.name())))
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    assert_eq!(typed.len(), templates.len());
    // The e2e suite's patches (DHCP overrides, data disks) laid over the cluster template.
    let (_, base) = templates
        .iter()
        .find(|(n, _)| n.starts_with("capv-04"))
        .cloned()
        .unwrap();
    for file in [
        "capv-08-e2e-dhcp-overrides.yaml",
        "capv-09-e2e-data-disks-patch.yaml",
    ] {
        for patch in fixture_docs(file) {
            let mut obj = base.clone();
            merge(&mut obj, &patch);
            let out = admit(&obj, None, &ctx);
            assert!(out.allowed(), "{file}: {:?}", out.errors);
        }
    }
}

/// `(path, type, enum, default)` of every property under `schema`.
fn fields(schema: &Value, at: &str, out: &mut Vec<(String, Value, Value, Value)>) {
    out.push((
        at.to_string(),
        schema.get("type").cloned().unwrap_or(Value::Null),
        schema.get("enum").cloned().unwrap_or(Value::Null),
        schema.get("default").cloned().unwrap_or(Value::Null),
    ));
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            fields(v, &format!("{at}.{k}"), out);
        }
    }
    if let Some(items) = schema.get("items") {
        fields(items, &format!("{at}[]"), out);
    }
    if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        fields(ap, &format!("{at}{{}}"), out);
    }
}

fn capv_schema(kind: Kind) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "tests/fixtures/crds/capv/infrastructure.cluster.x-k8s.io_{}.yaml",
        kind.plural()
    ));
    let crd: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1beta1")
        .map(|v| v["schema"]["openAPIV3Schema"].clone())
        .unwrap()
}

#[test]
fn every_capv_v1beta1_field_is_served_with_its_type_enum_and_default() {
    for kind in [
        Kind::VSphereMachine,
        Kind::VSphereMachineTemplate,
        Kind::VSphereVM,
    ] {
        let (mut theirs, mut ours) = (Vec::new(), Vec::new());
        fields(&capv_schema(kind), "", &mut theirs);
        fields(&kind.schema_for(infrastructure::V1BETA1), "", &mut ours);
        let ours: std::collections::BTreeMap<_, _> = ours
            .into_iter()
            .map(|(p, t, e, d)| (p, (t, e, d)))
            .collect();
        let mut missing = Vec::new();
        for (path, t, e, d) in theirs {
            // The metav1.Condition type shared with the zone kinds carries no status enum; only
            // this controller writes these conditions.
            if path == ".status.v1beta2.conditions[].status" {
                continue;
            }
            match ours.get(&path) {
                None => missing.push(format!("{path}: missing")),
                Some(o) if o != &(t.clone(), e.clone(), d.clone()) => missing.push(format!(
                    "{path}: CAPV {t}/{e}/{d}, ours {}/{}/{}",
                    o.0, o.1, o.2
                )),
                Some(_) => {}
            }
        }
        assert!(missing.is_empty(), "{kind}:\n{}", missing.join("\n"));
    }
}

/// CAPV requires `spec.network` (#3376: templates must list devices a failure domain then
/// replaces); here it is optional, everything else CAPV requires is required.
#[test]
fn required_fields_match_capv_except_the_network() {
    fn required(schema: &Value, at: &str, out: &mut Vec<String>) {
        for r in schema["required"].as_array().into_iter().flatten() {
            out.push(format!("{at}.{}", r.as_str().unwrap()));
        }
        for (k, v) in schema["properties"].as_object().into_iter().flatten() {
            required(v, &format!("{at}.{k}"), out);
        }
        if schema.get("items").is_some() {
            required(&schema["items"], &format!("{at}[]"), out);
        }
    }
    for kind in [
        Kind::VSphereMachine,
        Kind::VSphereMachineTemplate,
        Kind::VSphereVM,
    ] {
        let (mut theirs, mut ours) = (Vec::new(), Vec::new());
        required(&capv_schema(kind), "", &mut theirs);
        required(&kind.schema_for(infrastructure::V1BETA1), "", &mut ours);
        let mut theirs: Vec<String> = theirs
            .into_iter()
            .filter(|p| !p.ends_with("spec.network"))
            .collect();
        theirs.sort();
        ours.sort();
        assert_eq!(ours, theirs, "{kind}");
    }
}
