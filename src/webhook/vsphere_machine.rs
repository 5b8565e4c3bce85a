//! Admission of the Cluster API machine kinds, with CAPV v1.15.0's rules
//! (`internal/webhooks/{vspheremachine,vspheremachinetemplate,vspherevm}.go`), registered under
//! CAPV's webhook names (`validation.vspheremachine.infrastructure.cluster.x-k8s.io`, …).
//!
//! * VSphereMachine: defaults `spec.datacenter` to `*`; rejects `preferredAPIServerCidr`,
//!   addresses not in CIDR form, a `guestSoftPowerOffTimeout` unless the mode is trySoft or one
//!   that is not positive, a PCI device that is neither deviceId+vendorId nor a vGPU profile;
//!   on update only `providerID`, `powerOffMode`, `guestSoftPowerOffTimeout` and
//!   `network.devices` may change.
//! * VSphereMachineTemplate: no providerID or ipAddrs in templates, `hardwareVersion` `vmx-N`,
//!   the power-off rules, the PCI rule, a naming template that renders a valid object name; the
//!   template's spec is immutable except for Cluster API topology dry-runs (a dry-run request
//!   whose object carries `topology.cluster.x-k8s.io/dry-run`), which the topology controller
//!   uses to compute its server-side-apply diffs.
//! * VSphereVM: defaults `spec.os` to Linux; a Windows VM's name has at most 15 characters;
//!   on update only `bootstrapRef`, `thumbprint`, the power-off fields, `network.devices`, and
//!   `os` and `biosUUID` while unset may change.
//!
//! All three refuse a negative `numCPUs`, `numCoresPerSocket`, `memoryMiB` or `diskGiB` (CAPV
//! has no rule and drops them; 0 keeps meaning the template's value, `plan::vm_size`), and a
//! `customVMXKeys` key of a refused class (`plan::capi_machine::vmx_keys`: isolation, devices,
//! identity, the provider's own keys; CAPV takes any), naming `spec.customVMXKeys[<key>]`. On
//! update only keys the old object lacked are judged, so an object stored before the rule
//! still takes the controller's own updates (its VM is held at the clone instead).
//!
//! Paths use JSON names and, where CAPV's are vague (`spec.PreferredAPIServerCIDR`,
//! `spec.template.spec.pciDevices` on a VSphereMachine, `devices.ipAddrs` without an index),
//! name the field exactly. Messages keep CAPV's text.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{Ctx, FieldError, child, index, key, negative_sizes};
use crate::api::infrastructure::v1beta2::clone_spec::{NetworkSpec, PciDeviceSpec, PowerOffMode};
use crate::api::vsphere_machine::{VSphereMachine, VSphereMachineSpec, VSphereMachineTemplate};
use crate::api::vsphere_vm::VSphereVM;
use crate::plan::capi_machine::{naming, vmx_keys};

/// The annotation Cluster API's topology controller puts on its dry-run objects.
pub const TOPOLOGY_DRY_RUN_ANNOTATION: &str = "topology.cluster.x-k8s.io/dry-run";

const TEMPLATE_IMMUTABLE: &str = "VSphereMachineTemplate spec.template.spec field is immutable. Please create a new resource instead.";
const NOT_TRY_SOFT: &str = "should not be set in templates unless the powerOffMode is trySoft";

static HARDWARE_VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^vmx-[1-9][0-9]?$").expect("regex"));

/// Sets `spec.<key>` to `value` when it is missing or empty; returns the path set, if any.
fn default_spec_string(obj: &mut Value, key: &str, value: &str) -> Vec<String> {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return Vec::new();
    };
    if spec
        .get(key)
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        spec.insert(key.into(), value.into());
        return vec![format!("spec.{key}")];
    }
    Vec::new()
}

/// `spec.datacenter` ← `*` when empty (CAPV's VSphereMachine defaulter). Returns the set paths.
pub fn default_machine(obj: &mut Value) -> Vec<String> {
    default_spec_string(obj, "datacenter", "*")
}

/// `spec.os` ← `Linux` when empty (CAPV's VSphereVM defaulter).
pub fn default_vm(obj: &mut Value) -> Vec<String> {
    default_spec_string(obj, "os", "Linux")
}

/// Parses a signed Go `time.Duration` string (`5m`, `-1.234µs`) into nanoseconds: the sign
/// here, the rest by the MachineHealthCheck parser, so both read durations alike.
pub fn parse_go_duration(s: &str) -> Result<i128, String> {
    let (neg, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let ns = crate::api::health_values::parse_go_duration(rest)? as i128;
    Ok(if neg { -ns } else { ns })
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, len)) = s.split_once('/') else {
        return false;
    };
    let Ok(len) = len.parse::<u8>() else {
        return false;
    };
    if len.to_string().len() != s.split_once('/').map_or(0, |(_, l)| l.len()) {
        return false;
    }
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => len <= 32,
        Ok(std::net::IpAddr::V6(_)) => len <= 128,
        Err(_) => false,
    }
}

/// v1beta1's `guestSoftPowerOffTimeout` (a Go duration): only with trySoft, and positive.
fn check_power_off(
    base: &str,
    mode: Option<PowerOffMode>,
    timeout: Option<&str>,
    errors: &mut Vec<FieldError>,
) {
    let Some(t) = timeout else {
        return;
    };
    let path = child(base, "guestSoftPowerOffTimeout");
    if mode != Some(PowerOffMode::TrySoft) {
        errors.push(FieldError::invalid_str(&path, t, NOT_TRY_SOFT));
    }
    match parse_go_duration(t) {
        Ok(ns) if ns <= 0 => errors.push(FieldError::invalid_str(
            &path,
            t,
            "should be greater than 0",
        )),
        Ok(_) => {}
        Err(e) => errors.push(FieldError::invalid_str(&path, t, e)),
    }
}

/// v1beta2's `guestSoftPowerOffTimeoutSeconds`: only with trySoft, and positive (the CRD's
/// minimum says so too; this names the rule as v1beta1's does).
fn check_power_off_seconds(
    base: &str,
    mode: Option<PowerOffMode>,
    seconds: Option<i32>,
    errors: &mut Vec<FieldError>,
) {
    let Some(n) = seconds else {
        return;
    };
    let path = child(base, "guestSoftPowerOffTimeoutSeconds");
    if mode != Some(PowerOffMode::TrySoft) {
        errors.push(FieldError::invalid(&path, &n.into(), NOT_TRY_SOFT));
    }
    if n <= 0 {
        errors.push(FieldError::invalid(
            path,
            &n.into(),
            "should be greater than 0",
        ));
    }
}

/// Each device's `ipAddrs` (in device order) in CIDR form.
fn check_cidrs<'a>(
    base: &str,
    devices: impl Iterator<Item = Option<&'a Vec<String>>>,
    errors: &mut Vec<FieldError>,
) {
    for (i, ips) in devices.enumerate() {
        for (j, ip) in ips.into_iter().flatten().enumerate() {
            if !is_cidr(ip) {
                let path = index(
                    &child(&index(&child(base, "network.devices"), i), "ipAddrs"),
                    j,
                );
                errors.push(FieldError::invalid_str(
                    path,
                    ip,
                    "ip addresses should be in the CIDR format",
                ));
            }
        }
    }
}

/// v1beta1's `network.preferredAPIServerCidr` (v1beta2 has no such field: a VSphereVM's rules
/// read it from the request).
fn check_preferred_cidr(base: &str, cidr: Option<&str>, errors: &mut Vec<FieldError>) {
    if let Some(c) = cidr.filter(|c| !c.is_empty()) {
        errors.push(FieldError::invalid_str(
            child(base, "network.preferredAPIServerCidr"),
            c,
            "cannot be set, as it will be removed and is no longer used",
        ));
    }
}

fn check_pci(base: &str, devices: Option<&Vec<PciDeviceSpec>>, errors: &mut Vec<FieldError>) {
    for (i, d) in devices.into_iter().flatten().enumerate() {
        let vgpu = d.vgpu_profile.as_deref().is_some_and(|p| !p.is_empty());
        let ids = (d.device_id.is_some(), d.vendor_id.is_some());
        let ok = (vgpu && ids == (false, false)) || (!vgpu && ids == (true, true));
        if !ok {
            errors.push(FieldError::invalid(
                index(&child(base, "pciDevices"), i),
                &serde_json::to_value(d).unwrap_or_default(),
                "should have either deviceId + vendorId or vGPUProfile set",
            ));
        }
    }
}

/// The `network.preferredAPIServerCidr` of the clone spec at `spec` (a JSON pointer) in the
/// request as sent: a v1beta1-only field, which the hub the rules read has no place for.
fn preferred_cidr<'a>(request: &'a Value, spec: &str) -> Option<&'a str> {
    request
        .pointer(&format!("{spec}/network/preferredAPIServerCidr"))
        .and_then(Value::as_str)
}

/// A network's devices' `ipAddrs`.
fn device_ips(network: Option<&NetworkSpec>) -> impl Iterator<Item = Option<&Vec<String>>> {
    network
        .into_iter()
        .flat_map(|n| &n.devices)
        .map(|d| d.ip_addrs.as_ref())
}

/// The spec as JSON without the keys an update may change (and `network` when nothing else of
/// it is left), for the "cannot be modified" comparison.
fn frozen(spec: Option<&Value>, keys: &[&str]) -> Value {
    let mut spec = spec
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    if let Some(map) = spec.as_object_mut() {
        for k in keys {
            map.remove(*k);
        }
        if let Some(net) = map.get_mut("network").and_then(Value::as_object_mut) {
            net.remove("devices");
            if net.is_empty() {
                map.remove("network");
            }
        }
    }
    spec
}

/// Each key of `keys` that [`vmx_keys`] refuses and `old` (the stored object's, on update)
/// lacks, at `base.customVMXKeys[<key>]`.
fn check_vmx_keys(
    base: &str,
    keys: Option<&BTreeMap<String, String>>,
    old: Option<&BTreeMap<String, String>>,
    errors: &mut Vec<FieldError>,
) {
    let path = child(base, "customVMXKeys");
    for (k, why) in keys.map(vmx_keys::refused).unwrap_or_default() {
        if old.is_none_or(|o| !o.contains_key(k)) {
            errors.push(FieldError::forbidden(key(&path, k), vmx_keys::message(why)));
        }
    }
}

/// The `customVMXKeys` of the clone spec at `pointer` in a stored object (JSON at the hub).
fn stored_vmx_keys(obj: &Value, pointer: &str) -> Option<BTreeMap<String, String>> {
    let keys = obj.pointer(&format!("{pointer}/customVMXKeys"))?;
    serde_json::from_value(keys.clone()).ok()
}

/// `server` and `thumbprint` of a clone spec: a vCenter address the client will accept (no
/// credentials, path or query in it) and a well-formed thumbprint. The server a machine names
/// decides where its cluster's credentials go, so a malformed one is refused here rather than
/// at the first connection.
fn check_clone_server(
    base: &str,
    (server, thumbprint): (&Option<String>, &Option<String>),
    ctx: &Ctx,
    errors: &mut Vec<FieldError>,
) {
    if let Some(s) = server
        .as_deref()
        .filter(|s| !s.is_empty() && !ctx.exempt(s))
        && let Err(reason) = super::check_server(s)
    {
        errors.push(FieldError::invalid_str(child(base, "server"), s, reason));
    }
    if let Some(t) = thumbprint
        .as_deref()
        .filter(|t| !t.is_empty() && !ctx.exempt(t))
        && let Err(reason) = super::check_thumbprint(t)
    {
        errors.push(FieldError::invalid_str(
            child(base, "thumbprint"),
            t,
            reason,
        ));
    }
}

/// The power-off fields of the spec at `base` (`spec` as a JSON pointer: `pointer`). A v1beta1
/// request's Go duration is judged as v1beta1 judges it, from the request (`1.234µs` is
/// positive there and 0 whole seconds on the hub; one that does not parse has no hub value at
/// all); the hub's seconds otherwise.
fn check_power_off_at(
    (base, pointer): (&str, &str),
    mode: Option<PowerOffMode>,
    seconds: Option<i32>,
    request: &Value,
    errors: &mut Vec<FieldError>,
) {
    match request.pointer(&format!("{pointer}/guestSoftPowerOffTimeout")) {
        Some(t) => check_power_off(base, mode, t.as_str(), errors),
        None => check_power_off_seconds(base, mode, seconds, errors),
    }
}

/// VSphereMachine on create (`request`: the object as sent, at whichever version).
pub fn validate_machine_create(m: &VSphereMachine, request: &Value, ctx: &Ctx) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let s = &m.spec;
    check_clone_server(
        "spec",
        (&s.clone.server, &s.clone.thumbprint),
        ctx,
        &mut errors,
    );
    check_preferred_cidr("spec", preferred_cidr(request, "/spec"), &mut errors);
    check_cidrs("spec", device_ips(s.clone.network.as_ref()), &mut errors);
    check_power_off_at(
        ("spec", "/spec"),
        s.power_off_mode,
        s.guest_soft_power_off_timeout_seconds,
        request,
        &mut errors,
    );
    check_pci("spec", s.clone.pci_devices.as_ref(), &mut errors);
    check_vmx_keys("spec", s.clone.custom_vmx_keys.as_ref(), None, &mut errors);
    errors.extend(negative_sizes("spec", (&s.clone).into()));
    errors
}

/// VSphereMachine on update (`new_value`/`old_value`: the objects as JSON at the hub, for the
/// comparison; `request`: the new object as sent).
pub fn validate_machine_update(
    new: &VSphereMachine,
    new_value: &Value,
    old_value: &Value,
    request: &Value,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let s = &new.spec;
    check_clone_server(
        "spec",
        (&s.clone.server, &s.clone.thumbprint),
        &Ctx::default(),
        &mut errors,
    );
    check_power_off_at(
        ("spec", "/spec"),
        s.power_off_mode,
        s.guest_soft_power_off_timeout_seconds,
        request,
        &mut errors,
    );
    check_cidrs("spec", device_ips(s.clone.network.as_ref()), &mut errors);
    check_vmx_keys(
        "spec",
        s.clone.custom_vmx_keys.as_ref(),
        Some(&stored_vmx_keys(old_value, "/spec").unwrap_or_default()),
        &mut errors,
    );
    let keys = [
        "providerID",
        "powerOffMode",
        "guestSoftPowerOffTimeoutSeconds",
    ];
    if frozen(new_value.get("spec"), &keys) != frozen(old_value.get("spec"), &keys) {
        errors.push(FieldError::forbidden("spec", "cannot be modified"));
    }
    errors
}

fn check_naming(base: &str, spec: Option<&VSphereMachineSpec>, errors: &mut Vec<FieldError>) {
    let Some(tpl) = spec
        .and_then(|s| s.naming.as_ref())
        .and_then(|n| n.template.as_deref())
    else {
        return;
    };
    let path = child(base, "naming.template");
    match naming::render_name("machine", Some(tpl)) {
        Err(e) => errors.push(FieldError::invalid_str(
            path,
            tpl,
            format!("invalid VSphereVM name template: {e}"),
        )),
        Ok(name) if !super::is_dns1123_subdomain(&name) => {
            errors.push(FieldError::invalid_str(
                path,
                tpl,
                format!(
                    "invalid VSphereVM name template, generated name is not a valid Kubernetes object name: {}",
                    super::DNS1123_SUBDOMAIN_MESSAGE
                ),
            ))
        }
        Ok(_) => {}
    }
}

/// VSphereMachineTemplate on create (`request`: the object as sent, at whichever version).
pub fn validate_template_create(
    t: &VSphereMachineTemplate,
    request: &Value,
    ctx: &Ctx,
) -> Vec<FieldError> {
    let base = "spec.template.spec";
    let mut errors = Vec::new();
    let Some(s) = t.spec.template.spec.as_ref() else {
        return errors;
    };
    check_clone_server(
        base,
        (&s.clone.server, &s.clone.thumbprint),
        ctx,
        &mut errors,
    );
    check_preferred_cidr(
        base,
        preferred_cidr(request, "/spec/template/spec"),
        &mut errors,
    );
    if !s.provider_id.is_empty() {
        errors.push(FieldError::forbidden(
            child(base, "providerID"),
            "cannot be set in templates",
        ));
    }
    for (i, d) in s.clone.network.iter().flat_map(|n| &n.devices).enumerate() {
        if d.ip_addrs.as_ref().is_some_and(|a| !a.is_empty()) {
            errors.push(FieldError::forbidden(
                child(&index(&child(base, "network.devices"), i), "ipAddrs"),
                "cannot be set in templates",
            ));
        }
    }
    if let Some(hw) = s
        .clone
        .hardware_version
        .as_deref()
        .filter(|h| !h.is_empty())
        && !HARDWARE_VERSION.is_match(hw)
    {
        errors.push(FieldError::invalid_str(
            child(base, "hardwareVersion"),
            hw,
            "should be a valid VM hardware version, example vmx-17",
        ));
    }
    check_power_off_at(
        (base, "/spec/template/spec"),
        s.power_off_mode,
        s.guest_soft_power_off_timeout_seconds,
        request,
        &mut errors,
    );
    check_pci(base, s.clone.pci_devices.as_ref(), &mut errors);
    check_vmx_keys(base, s.clone.custom_vmx_keys.as_ref(), None, &mut errors);
    check_naming(base, Some(s), &mut errors);
    errors.extend(negative_sizes(base, (&s.clone).into()));
    errors
}

/// True for Cluster API's topology dry-run: a dry-run request for an object annotated
/// [`TOPOLOGY_DRY_RUN_ANNOTATION`].
pub fn is_topology_dry_run(obj: &Value, ctx: &Ctx) -> bool {
    ctx.dry_run
        && obj
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(TOPOLOGY_DRY_RUN_ANNOTATION))
}

/// VSphereMachineTemplate on update.
pub fn validate_template_update(
    old: &VSphereMachineTemplate,
    new: &VSphereMachineTemplate,
    new_value: &Value,
    ctx: &Ctx,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if !is_topology_dry_run(new_value, ctx) && old.spec.template.spec != new.spec.template.spec {
        errors.push(FieldError::forbidden(
            "spec.template.spec",
            TEMPLATE_IMMUTABLE,
        ));
    }
    check_naming(
        "spec.template.spec",
        new.spec.template.spec.as_ref(),
        &mut errors,
    );
    let vmx = |t: &VSphereMachineTemplate| {
        t.spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.clone.custom_vmx_keys.clone())
            .unwrap_or_default()
    };
    check_vmx_keys(
        "spec.template.spec",
        Some(&vmx(new)),
        Some(&vmx(old)),
        &mut errors,
    );
    errors
}

/// A VSphereVM's power-off fields ([`check_power_off_at`]).
fn check_vm_power_off(vm: &VSphereVM, request: &Value, errors: &mut Vec<FieldError>) {
    check_power_off_at(
        ("spec", "/spec"),
        vm.spec.power_off_mode,
        vm.spec.guest_soft_power_off_timeout_seconds,
        request,
        errors,
    );
}

/// VSphereVM on create (`request`: the object as sent, at whichever version).
pub fn validate_vm_create(vm: &VSphereVM, request: &Value, ctx: &Ctx) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let s = &vm.spec;
    check_clone_server(
        "spec",
        (&s.clone.server, &s.clone.thumbprint),
        ctx,
        &mut errors,
    );
    let cidr = request.pointer("/spec/network/preferredAPIServerCidr");
    check_preferred_cidr("spec", cidr.and_then(Value::as_str), &mut errors);
    let devices = s.clone.network.iter().flat_map(|n| &n.devices);
    check_cidrs("spec", devices.map(|d| d.ip_addrs.as_ref()), &mut errors);
    let name = vm.metadata.name.as_deref().unwrap_or_default();
    if s.clone.is_windows() && name.len() > 15 {
        errors.push(FieldError::invalid_str(
            "metadata.name",
            name,
            "name has to be less than 16 characters for Windows VM",
        ));
    }
    check_vm_power_off(vm, request, &mut errors);
    check_vmx_keys("spec", s.clone.custom_vmx_keys.as_ref(), None, &mut errors);
    errors.extend(negative_sizes("spec", (&s.clone).into()));
    errors
}

/// VSphereVM on update (`new_value`/`old_value`: the objects as JSON at the hub, for the
/// comparison; `request`: the new object as sent).
pub fn validate_vm_update(
    old: &VSphereVM,
    new: &VSphereVM,
    new_value: &Value,
    old_value: &Value,
    request: &Value,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    check_vm_power_off(new, request, &mut errors);
    check_vmx_keys(
        "spec",
        new.spec.clone.custom_vmx_keys.as_ref(),
        Some(&old.spec.clone.custom_vmx_keys.clone().unwrap_or_default()),
        &mut errors,
    );
    let mut keys = vec![
        "bootstrapRef",
        "thumbprint",
        "powerOffMode",
        "guestSoftPowerOffTimeoutSeconds",
    ];
    if old.spec.clone.os.is_none() {
        keys.push("os");
    }
    if old.spec.bios_uuid.as_deref().is_none_or(str::is_empty) {
        keys.push("biosUUID");
    }
    if frozen(new_value.get("spec"), &keys) != frozen(old_value.get("spec"), &keys) {
        errors.push(FieldError::forbidden("spec", "cannot be modified"));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::conversion::to_typed;

    /// The server a machine names is where its cluster's credentials go: every kind that takes
    /// one refuses an address with credentials, another scheme or a path, naming the field.
    #[test]
    fn a_machines_server_and_thumbprint_are_checked_in_every_kind() {
        let object = |kind: &str, spec: Value| {
            serde_json::json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": kind, "metadata": {"name": "m", "namespace": "ns"}, "spec": spec})
        };
        let ctx = Ctx::default();
        let paths = |errors: Vec<FieldError>| -> Vec<String> {
            errors.into_iter().map(|e| e.path).collect()
        };
        for (server, thumbprint, ok) in [
            ("vc.corp", "", true),
            ("https://vc.corp/sdk", "", true),
            ("https://admin:pw@vc.corp/sdk", "", false),
            ("ftp://vc.corp", "", false),
            ("vc.corp", "not-hex", false),
        ] {
            let clone =
                serde_json::json!({"template": "t", "server": server, "thumbprint": thumbprint});
            let m: VSphereMachine =
                serde_json::from_value(object("VSphereMachine", clone.clone())).unwrap();
            let vm_request = object("VSphereVM", clone.clone());
            let vm: VSphereVM = serde_json::from_value(to_typed(&vm_request)).unwrap();
            let t: VSphereMachineTemplate = serde_json::from_value(object(
                "VSphereMachineTemplate",
                serde_json::json!({"template": {"spec": clone}}),
            ))
            .unwrap();
            let field = if thumbprint.is_empty() {
                "server"
            } else {
                "thumbprint"
            };
            let want = |base: &str| {
                if ok {
                    vec![]
                } else {
                    vec![format!("{base}.{field}")]
                }
            };
            assert_eq!(
                paths(validate_machine_create(
                    &m,
                    &serde_json::to_value(&m).unwrap(),
                    &ctx
                )),
                want("spec"),
                "{server}"
            );
            assert_eq!(
                paths(validate_vm_create(&vm, &vm_request, &ctx)),
                want("spec"),
                "{server}"
            );
            assert_eq!(
                paths(validate_template_create(
                    &t,
                    &serde_json::to_value(&t).unwrap(),
                    &ctx
                )),
                want("spec.template.spec"),
                "{server}"
            );
        }
    }

    /// Every kind refuses a negative size, naming the field and what 0 means; 0 and unset pass
    /// (the template's value).
    #[test]
    fn negative_sizes_are_refused_naming_the_field() {
        let clone = serde_json::json!({"template": "t", "numCPUs": -2, "numCoresPerSocket": 0,
            "memoryMiB": -1, "diskGiB": 0});
        let object = |kind: &str, spec: Value| {
            serde_json::json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": kind, "metadata": {"name": "m", "namespace": "ns"}, "spec": spec})
        };
        let paths = |errors: Vec<FieldError>| -> Vec<String> {
            errors
                .iter()
                .inspect(|e| assert!(e.message.contains("0 or unset: the template's value")))
                .map(|e| e.path.clone())
                .collect()
        };
        let ctx = Ctx::default();
        let m: VSphereMachine =
            serde_json::from_value(object("VSphereMachine", clone.clone())).unwrap();
        assert_eq!(
            paths(validate_machine_create(
                &m,
                &serde_json::to_value(&m).unwrap(),
                &ctx
            )),
            ["spec.numCPUs", "spec.memoryMiB"]
        );
        let t: VSphereMachineTemplate = serde_json::from_value(object(
            "VSphereMachineTemplate",
            serde_json::json!({"template": {"spec": clone}}),
        ))
        .unwrap();
        assert_eq!(
            paths(validate_template_create(
                &t,
                &serde_json::to_value(&t).unwrap(),
                &ctx
            )),
            ["spec.template.spec.numCPUs", "spec.template.spec.memoryMiB"]
        );
        let vm_request = object("VSphereVM", clone);
        let vm: VSphereVM = serde_json::from_value(to_typed(&vm_request)).unwrap();
        assert_eq!(
            paths(validate_vm_create(&vm, &vm_request, &ctx)),
            ["spec.numCPUs", "spec.memoryMiB"]
        );
        let zero: VSphereMachine = serde_json::from_value(object(
            "VSphereMachine",
            serde_json::json!({"template": "t", "numCPUs": 0}),
        ))
        .unwrap();
        assert!(
            validate_machine_create(&zero, &serde_json::to_value(&zero).unwrap(), &ctx).is_empty()
        );
    }

    #[test]
    fn go_durations() {
        for (s, ns) in [
            ("5m", 300_000_000_000),
            ("1h2m3.5s", 3_723_500_000_000),
            ("1.234µs", 1234),
            ("-1.234µs", -1234),
            ("0", 0),
            ("0s", 0),
            ("10ms", 10_000_000),
        ] {
            assert_eq!(parse_go_duration(s), Ok(ns), "{s}");
        }
        for bad in ["", "5", "m", "5 m", "1d"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cidrs() {
        for ok in ["192.168.0.1/32", "10.0.0.0/8", "fd00::1/64"] {
            assert!(is_cidr(ok), "{ok}");
        }
        for bad in [
            "192.168.0.3",
            "<nil>/32",
            "192.168.0.644/33",
            "10.0.0.1/33",
            "10.0.0.1/+8",
            "::1/129",
        ] {
            assert!(!is_cidr(bad), "{bad}");
        }
    }
}
