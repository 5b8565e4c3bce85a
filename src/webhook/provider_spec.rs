//! The vSphere provider spec (`spec.providerSpec.value` of a Machine, and of a
//! ControlPlaneMachineSet's machine template): machine-api-operator's defaulting and validation
//! (`pkg/webhooks/machine_webhook.go`, `defaultVSphere` / `validateVSphere`), and ours.
//!
//! Upstream, in its order: template required; workspace required, its server required, an unset
//! datacenter warned, a folder must lie under the datacenter's `vm` folder, a VM group name at
//! most 80 characters; at least one and at most 10 network devices, each with a network name;
//! numCPUs, memoryMiB and diskGiB under the recommended minimum warned, and a disk size with a
//! linked clone warned (it is ignored); user-data and credentials secrets required (the defaulter
//! fills them first); at most 10 tag IDs in URN form; data disks: at most 29, named (at most 80
//! characters, alphanumerics, `-` and `_`), sized (1 to 16384 GiB), provisioning mode Thin, Thick
//! or EagerlyZeroed. Unknown fields and an unexpected apiVersion only warn.
//!
//! Where ours differ (docs/differences.md): paths name the real field
//! (`dataDisks[i]`, not `disks[i]`; `tagIDs[i]`), a negative data disk size and a repeated data
//! disk name are rejected, a negative numCPUs, numCoresPerSocket, memoryMiB or diskGiB is
//! rejected (upstream only warns that it is under the minimum; 0 keeps the template's value),
//! the server must be a host name, IP or URL, the datacenter's `vm` folder itself is accepted,
//! VM groups need no feature gate, and a tag ID's scope must be `GLOBAL` (upstream accepts any,
//! which lets `/`, `?` and `.` into the REST path it ends up in). With failure domains (a CPMS
//! template), the zone supplies the workspace and networks, so those must not be set
//! (OCPBUGS-32947).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{Ctx, ErrorKind, FieldError, child, index, negative_sizes, schema};
use crate::api::machine::{
    CloneMode, PROVIDER_SPEC_KIND, VSphereMachineProviderSpec,
    is_vsphere_provider_spec as is_vsphere,
};
use crate::vcenter::model::tag_id::is_tag_id;

pub use crate::api::machine::{DEFAULT_CREDENTIALS_SECRET, DEFAULT_USER_DATA_SECRET};

/// Recommended minimum vCPUs (upstream: below it nodes may not boot).
pub const MIN_CPUS: i64 = 2;
/// Recommended minimum memory, MiB.
pub const MIN_MEMORY_MIB: i64 = 2048;
/// Recommended minimum OS disk, GiB (OpenShift's documented minimum).
pub const MIN_DISK_GIB: i64 = 120;
/// vSphere allows 10 network adapters per VM.
pub const MAX_NETWORK_DEVICES: usize = 10;
/// At most this many tags per VM.
pub const MAX_TAG_IDS: usize = 10;
/// Data disks per VM (SCSI slots left beside the OS disk).
pub const MAX_DATA_DISKS: usize = 29;
/// Longest data disk name.
pub const MAX_DATA_DISK_NAME: usize = 80;
/// Largest data disk, GiB (upstream's starting limit; vSphere allows 62 TiB).
pub const MAX_DATA_DISK_GIB: i64 = 16384;
/// Longest VM group name.
pub const MAX_VM_GROUP_NAME: usize = 80;

/// The accepted groups and versions of the provider spec (upstream's `validateGVK`: the current
/// `machine.openshift.io` group and the legacy `vsphereprovider.openshift.io` one, v1beta1 or v1).
const PROVIDER_SPEC_GROUPS: [&str; 2] = ["machine.openshift.io", "vsphereprovider.openshift.io"];
const PROVIDER_SPEC_VERSIONS: [&str; 2] = ["v1beta1", "v1"];

const TAG_ID_MESSAGE: &str =
    "tag ID must be in the format of urn:vmomi:InventoryServiceTag:<UUID>:GLOBAL";
const DATA_DISK_NAME_MESSAGE: &str = "data disk name must consist only of alphanumeric characters, hyphens and underscores, and must start and end with an alphanumeric character.";

static DATA_DISK_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-zA-Z0-9]([-_a-zA-Z0-9]*[a-zA-Z0-9])?$").expect("regex"));

/// Where a provider spec is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderSpecUse {
    /// In a Machine: it must be complete (after defaulting).
    Machine,
    /// In a ControlPlaneMachineSet template without failure domains: complete, like a Machine,
    /// except the secrets, which the Machine defaulter fills in for every machine created.
    CpmsTemplate,
    /// In a ControlPlaneMachineSet template with vSphere failure domains: the zone supplies the
    /// server, datacenter, datastore, networks, folder, resource pool and VM group, so the
    /// template must leave them out.
    CpmsTemplateWithFailureDomains,
    /// In a Machine placed in a deployment zone: the zone fills what the spec leaves empty and
    /// what the spec sets wins (`plan::placement::with_zone`), so it need not be complete and may
    /// carry the workspace and networks — a control plane machine set injects exactly its failure
    /// domain's (found on the real API server: forbidding them refused every machine a set made).
    MachineInZone,
}

/// Errors and warnings about a provider spec.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderSpecReport {
    /// Errors.
    pub errors: Vec<FieldError>,
    /// Warnings.
    pub warnings: Vec<String>,
}

/// The Machine mutating webhook's part for the provider spec: the type's own defaulting
/// ([`crate::api::machine::default_provider_spec`]), which the store's admission and the
/// machine set's template comparison use too.
pub use crate::api::machine::default_provider_spec as default;

/// Removes `null` members at any depth: Go decodes `null` as the zero value (an empty list, an
/// unset pointer), and upstream tooling writes `devices: null` for an empty list.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Checks `providerSpec.value`. Only a vSphere provider spec (`kind: VSphereMachineProviderSpec`
/// or none) is understood; other kinds only warn. Unknown fields and an unexpected apiVersion
/// warn (newer upstream fields must not reject a machine).
pub fn check(value: &Value, path: &str, usage: ProviderSpecUse, ctx: &Ctx) -> ProviderSpecReport {
    let mut report = ProviderSpecReport::default();
    if !is_vsphere(value) {
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
        report.warnings.push(format!(
            "{path}: kind {kind:?} is not {PROVIDER_SPEC_KIND}: this provider only creates vSphere machines"
        ));
        return report;
    }
    let av = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let known_version = av.split_once('/').is_some_and(|(g, v)| {
        PROVIDER_SPEC_GROUPS.contains(&g) && PROVIDER_SPEC_VERSIONS.contains(&v)
    });
    let expected_gvk = known_version && kind == PROVIDER_SPEC_KIND;
    if !expected_gvk && !ctx.exempt(av) {
        let shown_av = if av.is_empty() { "/" } else { av };
        report.warnings.push(format!(
            "{path}: incorrect GroupVersionKind for VSphereMachineProviderSpec object: {shown_av}, Kind={kind}"
        ));
    }
    let value = without_nulls(value);
    let mut schema_errors = Vec::new();
    schema::validate(
        &VSphereMachineProviderSpec::schema(),
        &value,
        path,
        ctx,
        &mut schema_errors,
    );
    // Upstream keeps providerSpec.value as preserve-unknown-fields: its markers (patterns, enums)
    // are never enforced, and installer output does not follow them (`resource: IPPool`). Only
    // what would break decoding (types, required fields) is an error here; the rest warns,
    // unless one of the webhook rules below rejects the same field.
    let mut schema_warnings = Vec::new();
    let mut decoding_errors = Vec::new();
    for e in schema_errors {
        let decoding = e.kind == ErrorKind::Required || e.message.contains("must be of type");
        if e.kind == ErrorKind::UnknownField {
            report
                .warnings
                .push(format!("{}: unknown field (ignored)", e.path));
        } else if decoding {
            decoding_errors.push(e);
        } else {
            schema_warnings.push(e);
        }
    }
    let decoded = serde_json::from_value::<VSphereMachineProviderSpec>(value);
    let spec = match decoded {
        Ok(spec)
            if decoding_errors
                .iter()
                .all(|e| e.kind == ErrorKind::Required) =>
        {
            spec
        }
        _ => {
            report.errors = decoding_errors;
            return report;
        }
    };
    let rules = match usage {
        ProviderSpecUse::Machine | ProviderSpecUse::CpmsTemplate => {
            complete_spec_rules(&spec, path, usage, ctx, &mut report)
        }
        ProviderSpecUse::CpmsTemplateWithFailureDomains => {
            zone_supplied_rules(&spec, path, &mut report)
        }
        ProviderSpecUse::MachineInZone => Vec::new(),
    };
    let mut errors = rules;
    errors.extend(common_rules(&spec, path, ctx));
    if matches!(
        usage,
        ProviderSpecUse::Machine | ProviderSpecUse::MachineInZone
    ) {
        report.warnings.extend(sizing_warnings(&spec, path));
    }
    let overlaps = |p: &str| {
        errors
            .iter()
            .any(|e| p.starts_with(&e.path) || e.path.starts_with(p))
    };
    report.warnings.extend(
        schema_warnings
            .into_iter()
            .filter(|w| !overlaps(&w.path))
            .map(|w| w.to_string()),
    );
    // A required field the rules report with their own words is reported once.
    let missing: Vec<FieldError> = decoding_errors
        .into_iter()
        .filter(|e| !overlaps(&e.path))
        .collect();
    report.errors.extend(errors);
    report.errors.extend(missing);
    report
}

/// A Machine's (or a CPMS template's without failure domains) own placement: template,
/// workspace, network devices, and for a Machine the secrets.
fn complete_spec_rules(
    spec: &VSphereMachineProviderSpec,
    path: &str,
    usage: ProviderSpecUse,
    ctx: &Ctx,
    report: &mut ProviderSpecReport,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if spec.template.is_empty() {
        errors.push(FieldError::required(
            child(path, "template"),
            "template must be provided",
        ));
    }
    let ws_path = child(path, "workspace");
    match &spec.workspace {
        None => errors.push(FieldError::required(&ws_path, "workspace must be provided")),
        Some(w) => {
            let server_path = child(&ws_path, "server");
            match w.server.as_deref() {
                None | Some("") => errors.push(FieldError::required(
                    &server_path,
                    "server must be provided",
                )),
                Some(s) if ctx.exempt(s) => {}
                Some(s) => {
                    if let Err(reason) = super::check_server(s) {
                        errors.push(FieldError::invalid_str(&server_path, s, reason));
                    }
                }
            }
            let datacenter = w.datacenter.as_deref().unwrap_or("");
            if datacenter.is_empty() {
                report.warnings.push(format!(
                    "{}: datacenter is unset: if more than one datacenter is present, VMs cannot be created",
                    child(&ws_path, "datacenter")
                ));
            }
            if let Some(folder) = w.folder.as_deref()
                && !folder.is_empty()
                && !ctx.exempt(folder)
                && !ctx.exempt(datacenter)
            {
                let vm_folder = format!("/{datacenter}/vm");
                let expected_prefix = format!("{vm_folder}/");
                if folder != vm_folder && !folder.starts_with(&expected_prefix) {
                    errors.push(FieldError::invalid_str(
                        child(&ws_path, "folder"),
                        folder,
                        format!(
                            "folder must be absolute path: expected prefix {expected_prefix:?}"
                        ),
                    ));
                }
            }
            if let Some(group) = w.vm_group.as_deref()
                && group.len() > MAX_VM_GROUP_NAME
            {
                errors.push(FieldError::invalid_str(
                    child(&ws_path, "vmGroup"),
                    group,
                    "vmGroup must be less than 80 characters in length",
                ));
            }
        }
    }
    let devices_path = child(&child(path, "network"), "devices");
    let devices = &spec.network.devices;
    if devices.is_empty() {
        errors.push(FieldError::required(
            &devices_path,
            "at least 1 network device must be provided",
        ));
    } else if devices.len() <= MAX_NETWORK_DEVICES {
        for (i, d) in devices.iter().enumerate() {
            if d.network_name.as_deref().unwrap_or("").is_empty() {
                errors.push(FieldError::required(
                    child(&index(&devices_path, i), "networkName"),
                    "networkName must be provided",
                ));
            }
        }
    }
    if usage == ProviderSpecUse::Machine {
        for (field, reference) in [
            ("userDataSecret", &spec.user_data_secret),
            ("credentialsSecret", &spec.credentials_secret),
        ] {
            let p = child(path, field);
            match reference {
                None => errors.push(FieldError::required(
                    &p,
                    format!("{field} must be provided"),
                )),
                Some(r) if r.name.is_empty() => errors.push(FieldError::required(
                    child(&p, "name"),
                    "name must be provided",
                )),
                Some(_) => {}
            }
        }
    }
    errors
}

/// A CPMS template with failure domains: what the zone supplies must not be set.
fn zone_supplied_rules(
    spec: &VSphereMachineProviderSpec,
    path: &str,
    report: &mut ProviderSpecReport,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ws = spec.workspace.clone().unwrap_or_default();
    // The zone supplies these; a value here would fight the failure domain (OCPBUGS-32947).
    let ws_path = child(path, "workspace");
    for (field, v) in [
        ("server", &ws.server),
        ("datacenter", &ws.datacenter),
        ("datastore", &ws.datastore),
    ] {
        if v.as_deref().is_some_and(|s| !s.is_empty()) {
            errors.push(FieldError::forbidden(
                child(&ws_path, field),
                "must not be set when failure domains are used: the failure domain supplies it",
            ));
        }
    }
    let devices_path = child(&child(path, "network"), "devices");
    for (i, d) in spec.network.devices.iter().enumerate() {
        if d.network_name.as_deref().is_some_and(|s| !s.is_empty()) {
            errors.push(FieldError::forbidden(
                child(&index(&devices_path, i), "networkName"),
                "must not be set when failure domains are used: the failure domain supplies it",
            ));
        }
    }
    for (field, v) in [
        ("folder", &ws.folder),
        ("resourcePool", &ws.resource_pool),
        ("vmGroup", &ws.vm_group),
    ] {
        if v.as_deref().is_some_and(|s| !s.is_empty()) {
            report.warnings.push(format!(
                "{}: is ignored when failure domains are used: the deployment zone supplies it",
                child(&ws_path, field)
            ));
        }
    }
    if spec.template.is_empty() {
        report.warnings.push(format!(
            "{}: is empty: deployment zones supply no template, so machines cannot be created until it is set",
            child(path, "template")
        ));
    }
    errors
}

/// Rules for every use: network device count, tag IDs, data disks.
fn common_rules(spec: &VSphereMachineProviderSpec, path: &str, ctx: &Ctx) -> Vec<FieldError> {
    let mut errors = negative_sizes(path, spec.into());
    let devices = &spec.network.devices;
    if devices.len() > MAX_NETWORK_DEVICES {
        errors.push(FieldError::too_many(
            child(&child(path, "network"), "devices"),
            devices.len(),
            MAX_NETWORK_DEVICES as u64,
        ));
    }
    let tags_path = child(path, "tagIDs");
    let tags = spec.tag_ids.as_deref().unwrap_or_default();
    if tags.len() > MAX_TAG_IDS {
        errors.push(FieldError::invalid(
            &tags_path,
            &serde_json::json!(tags),
            "a maximum of 10 tags are allowed",
        ));
    }
    for (i, tag) in tags.iter().enumerate() {
        if !ctx.exempt(tag) && !is_tag_id(tag) {
            errors.push(FieldError::invalid_str(
                index(&tags_path, i),
                tag,
                TAG_ID_MESSAGE,
            ));
        }
    }
    let disks_path = child(path, "dataDisks");
    let disks = spec.data_disks.as_deref().unwrap_or_default();
    if disks.len() > MAX_DATA_DISKS {
        errors.push(FieldError::invalid(
            &disks_path,
            &disks.len().into(),
            format!("data disk count must not exceed {MAX_DATA_DISKS}"),
        ));
    }
    for (i, disk) in disks.iter().enumerate() {
        let p = index(&disks_path, i);
        let name_path = child(&p, "name");
        if disk.name.is_empty() {
            errors.push(FieldError::required(
                &name_path,
                "data disk name must be set",
            ));
        } else if disks[..i].iter().any(|d| d.name == disk.name) {
            // The list is a map keyed by name (upstream's listMapKey), but inside
            // providerSpec.value the API server does not enforce it.
            errors.push(FieldError::duplicate(
                &name_path,
                &disk.name.as_str().into(),
            ));
        } else if !ctx.exempt(&disk.name) {
            if disk.name.len() > MAX_DATA_DISK_NAME {
                errors.push(FieldError::invalid(
                    &name_path,
                    &disk.name.len().into(),
                    format!("data disk name must not exceed {MAX_DATA_DISK_NAME}"),
                ));
            }
            if !DATA_DISK_NAME.is_match(&disk.name) {
                errors.push(FieldError::invalid_str(
                    &name_path,
                    &disk.name,
                    DATA_DISK_NAME_MESSAGE,
                ));
            }
        }
        let size_path = child(&p, "sizeGiB");
        let size = i64::from(disk.size_gib);
        if size == 0 {
            errors.push(FieldError::required(
                &size_path,
                "data disk size must be set",
            ));
        } else if size < 0 {
            errors.push(FieldError::invalid(
                &size_path,
                &size.into(),
                "data disk size (GiB) must be at least 1",
            ));
        } else if size > MAX_DATA_DISK_GIB {
            errors.push(FieldError::invalid(
                &size_path,
                &size.into(),
                format!("data disk size (GiB) must not exceed {MAX_DATA_DISK_GIB}"),
            ));
        }
        if let Some(mode) = disk.provisioning_mode.as_deref()
            && !mode.is_empty()
            && !ctx.exempt(mode)
            && !matches!(mode, "Thin" | "Thick" | "EagerlyZeroed")
        {
            errors.push(FieldError::not_supported(
                child(&p, "provisioningMode"),
                &mode.into(),
                &["EagerlyZeroed".into(), "Thick".into(), "Thin".into()],
            ));
        }
    }
    errors
}

/// Upstream's warnings about sizes under the recommended minimums, and a disk size a linked
/// clone ignores. Missing values count as 0, as upstream's Go zero values do; a negative one is
/// an error already ([`negative_sizes`]), not also a warning.
fn sizing_warnings(spec: &VSphereMachineProviderSpec, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let cpus = i64::from(spec.num_cpus.unwrap_or(0));
    if (0..MIN_CPUS).contains(&cpus) {
        out.push(format!(
            "{}: {cpus} is missing or less than the minimum value ({MIN_CPUS}): nodes may not boot correctly",
            child(path, "numCPUs")
        ));
    }
    let memory = spec.memory_mib.unwrap_or(0);
    if (0..MIN_MEMORY_MIB).contains(&memory) {
        out.push(format!(
            "{}: {memory} is missing or less than the recommended minimum value ({MIN_MEMORY_MIB}): nodes may not boot correctly",
            child(path, "memoryMiB")
        ));
    }
    let disk = i64::from(spec.disk_gib.unwrap_or(0));
    if (0..MIN_DISK_GIB).contains(&disk) {
        out.push(format!(
            "{}: {disk} is missing or less than the recommended minimum ({MIN_DISK_GIB}): nodes may fail to start if disk size is too low",
            child(path, "diskGiB")
        ));
    }
    if spec.clone_mode() == CloneMode::LinkedClone && disk > 0 {
        out.push(format!(
            "{}: linkedClone clone mode is set. DiskGiB parameter will be ignored, disk size from template will be used.",
            child(path, "cloneMode")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": PROVIDER_SPEC_KIND,
            "template": "t", "workspace": {"server": "vc", "datacenter": "DC0"},
            "network": {"devices": [{"networkName": "n"}]},
            "userDataSecret": {"name": "u"}, "credentialsSecret": {"name": "c"},
            "numCPUs": 2, "memoryMiB": 2048, "diskGiB": 120})
    }

    #[test]
    fn other_kinds_are_neither_defaulted_nor_checked() {
        let mut aws = json!({"kind": "AWSMachineProviderConfig", "ami": {"id": "x"}});
        assert!(default(&mut aws, "p").is_empty());
        let r = check(&aws, "p", ProviderSpecUse::Machine, &Ctx::default());
        assert!(r.errors.is_empty());
        assert_eq!(r.warnings.len(), 1);
    }

    #[test]
    fn every_accepted_group_and_version_draws_no_warning() {
        for av in [
            "machine.openshift.io/v1beta1",
            "machine.openshift.io/v1",
            "vsphereprovider.openshift.io/v1beta1",
            "vsphereprovider.openshift.io/v1",
        ] {
            let mut v = base();
            v["apiVersion"] = json!(av);
            let r = check(&v, "p", ProviderSpecUse::Machine, &Ctx::default());
            assert_eq!(r, ProviderSpecReport::default(), "{av}");
        }
        let mut v = base();
        v["apiVersion"] = json!("vsphereprovider.openshift.io/v2");
        let r = check(&v, "p", ProviderSpecUse::Machine, &Ctx::default());
        assert_eq!(
            r.warnings,
            [
                "p: incorrect GroupVersionKind for VSphereMachineProviderSpec object: vsphereprovider.openshift.io/v2, Kind=VSphereMachineProviderSpec"
            ]
        );
    }

    /// A negative size is an error naming the field (upstream only warns, and vCenter then
    /// refuses the clone), not also an under-the-minimum warning; 0 keeps the template's value
    /// and only warns, as upstream.
    #[test]
    fn negative_sizes_are_refused_naming_the_field() {
        let mut v = base();
        v["numCPUs"] = json!(-2);
        v["memoryMiB"] = json!(0);
        let r = check(&v, "p", ProviderSpecUse::Machine, &Ctx::default());
        let errors: Vec<String> = r.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            ["p.numCPUs: Invalid value: -2: must be 0 or more (0 or unset: the template's value)"]
        );
        assert!(
            r.warnings.iter().all(|w| !w.starts_with("p.numCPUs")),
            "{:?}",
            r.warnings
        );
        assert!(
            r.warnings.iter().any(|w| w.starts_with("p.memoryMiB: 0 ")),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn the_datacenter_vm_folder_itself_is_accepted() {
        for (folder, ok) in [
            ("/DC0/vm", true),
            ("/DC0/vm/sub", true),
            ("/DC0/vmx", false),
            ("vm", false),
        ] {
            let mut v = base();
            v["workspace"]["folder"] = json!(folder);
            let r = check(&v, "p", ProviderSpecUse::Machine, &Ctx::default());
            assert_eq!(r.errors.is_empty(), ok, "{folder}: {:?}", r.errors);
        }
    }

    #[test]
    fn placeholders_skip_format_rules_offline() {
        let mut v = base();
        v["workspace"]["folder"] = json!("${FOLDER}");
        v["tagIDs"] = json!(["${TAG}"]);
        v["dataDisks"] = json!([{"name": "${DISK}", "sizeGiB": 10, "provisioningMode": "${MODE}"}]);
        let ctx = Ctx {
            allow_placeholders: true,
            ..Ctx::default()
        };
        assert!(
            check(&v, "p", ProviderSpecUse::Machine, &ctx)
                .errors
                .is_empty()
        );
        assert_eq!(
            check(&v, "p", ProviderSpecUse::Machine, &Ctx::default())
                .errors
                .len(),
            4
        );
    }

    #[test]
    fn nulls_read_as_go_zero_values() {
        let mut v = base();
        v["tagIDs"] = Value::Null;
        v["workspace"]["vmGroup"] = Value::Null;
        let r = check(&v, "p", ProviderSpecUse::Machine, &Ctx::default());
        assert_eq!(r, ProviderSpecReport::default());
        v["network"]["devices"] = Value::Null;
        let r = check(&v, "p", ProviderSpecUse::Machine, &Ctx::default());
        assert_eq!(
            r.errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["p.network.devices: Required value: at least 1 network device must be provided"]
        );
    }

    /// The data disk and linked clone rules, case by case: every error and warning, with its
    /// field path, exactly.
    #[test]
    fn data_disk_and_linked_clone_rules() {
        let p = "spec.providerSpec.value";
        let disk = |name: &str, size: i64| json!({"name": name, "sizeGiB": size});
        let many = |n: usize| -> Value {
            (0..n)
                .map(|i| disk(&format!("d{i}"), 1))
                .collect::<Vec<_>>()
                .into()
        };
        let name80 = "a".repeat(80);
        let name81 = "a".repeat(81);
        let cases: Vec<(&str, Value, &[&str], &[&str])> = vec![
            ("29 disks", many(29), &[], &[]),
            (
                "30 disks",
                many(30),
                &[
                    "spec.providerSpec.value.dataDisks: Invalid value: 30: data disk count must not exceed 29",
                ],
                &[],
            ),
            (
                "1 GiB and 16384 GiB",
                json!([disk("a", 1), disk("b", 16384)]),
                &[],
                &[],
            ),
            (
                "0 GiB",
                json!([disk("a", 0)]),
                &[
                    "spec.providerSpec.value.dataDisks[0].sizeGiB: Required value: data disk size must be set",
                ],
                &[],
            ),
            (
                "missing size",
                json!([{"name": "a"}]),
                &[
                    "spec.providerSpec.value.dataDisks[0].sizeGiB: Required value: data disk size must be set",
                ],
                &[],
            ),
            (
                "-1 GiB",
                json!([disk("a", -1)]),
                &[
                    "spec.providerSpec.value.dataDisks[0].sizeGiB: Invalid value: -1: data disk size (GiB) must be at least 1",
                ],
                &[],
            ),
            (
                "16385 GiB",
                json!([disk("a", 1), disk("b", 16385)]),
                &[
                    "spec.providerSpec.value.dataDisks[1].sizeGiB: Invalid value: 16385: data disk size (GiB) must not exceed 16384",
                ],
                &[],
            ),
            (
                "names: alphanumerics inside - and _, 80 characters",
                json!([disk("a", 1), disk("A-b_9", 1), disk(&name80, 1)]),
                &[],
                &[],
            ),
            (
                "81 characters",
                json!([disk(&name81, 1)]),
                &[
                    "spec.providerSpec.value.dataDisks[0].name: Invalid value: 81: data disk name must not exceed 80",
                ],
                &[],
            ),
            (
                "name ends with -",
                json!([disk("disk-", 1)]),
                &[
                    "spec.providerSpec.value.dataDisks[0].name: Invalid value: \"disk-\": data disk name must consist only of alphanumeric characters, hyphens and underscores, and must start and end with an alphanumeric character.",
                ],
                &[],
            ),
            (
                "name with a dot",
                json!([disk("a.b", 1)]),
                &[
                    "spec.providerSpec.value.dataDisks[0].name: Invalid value: \"a.b\": data disk name must consist only of alphanumeric characters, hyphens and underscores, and must start and end with an alphanumeric character.",
                ],
                &[],
            ),
            (
                "missing name",
                json!([{"sizeGiB": 1}]),
                &[
                    "spec.providerSpec.value.dataDisks[0].name: Required value: data disk name must be set",
                ],
                &[],
            ),
            (
                "duplicate names",
                json!([disk("a", 1), disk("b", 1), disk("a", 2)]),
                &["spec.providerSpec.value.dataDisks[2].name: Duplicate value: \"a\""],
                &[],
            ),
            (
                "every provisioning mode",
                json!([
                    {"name": "a", "sizeGiB": 1, "provisioningMode": "Thin"},
                    {"name": "b", "sizeGiB": 1, "provisioningMode": "Thick"},
                    {"name": "c", "sizeGiB": 1, "provisioningMode": "EagerlyZeroed"},
                    {"name": "d", "sizeGiB": 1}
                ]),
                &[],
                &[],
            ),
            (
                "an empty provisioning mode is none (Go's zero value), warned by the schema",
                json!([{"name": "a", "sizeGiB": 1, "provisioningMode": ""}]),
                &[],
                &[
                    "spec.providerSpec.value.dataDisks[0].provisioningMode: Unsupported value: \"\": supported values: \"Thin\", \"Thick\", \"EagerlyZeroed\"",
                ],
            ),
            (
                "provisioning mode not in the enum",
                json!([{"name": "a", "sizeGiB": 1, "provisioningMode": "thin"}]),
                &[
                    "spec.providerSpec.value.dataDisks[0].provisioningMode: Unsupported value: \"thin\": supported values: \"EagerlyZeroed\", \"Thick\", \"Thin\"",
                ],
                &[],
            ),
        ];
        for (name, disks, errors, warnings) in cases {
            let mut v = base();
            v["dataDisks"] = disks;
            let r = check(&v, p, ProviderSpecUse::Machine, &Ctx::default());
            let got: Vec<String> = r.errors.iter().map(ToString::to_string).collect();
            assert_eq!(got, errors, "{name}");
            assert_eq!(r.warnings, warnings, "{name}");
        }
        // Linked clones: a disk size is ignored, so it warns (upstream's text); without one, or
        // with a full clone, nothing is said. A snapshot name is free text.
        let warning = "spec.providerSpec.value.cloneMode: linkedClone clone mode is set. DiskGiB parameter will be ignored, disk size from template will be used.";
        for (mode, disk_gib, snapshot, warned) in [
            ("linkedClone", Some(120), None, true),
            ("linkedClone", Some(120), Some("golden/patched"), true),
            ("linkedClone", None, Some("golden"), false),
            ("fullClone", Some(120), Some("golden"), false),
        ] {
            let mut v = base();
            v["cloneMode"] = json!(mode);
            match disk_gib {
                Some(g) => v["diskGiB"] = json!(g),
                None => {
                    v.as_object_mut().unwrap().remove("diskGiB");
                }
            }
            if let Some(s) = snapshot {
                v["snapshot"] = json!(s);
            }
            let r = check(&v, p, ProviderSpecUse::Machine, &Ctx::default());
            assert!(r.errors.is_empty(), "{mode} {disk_gib:?}: {:?}", r.errors);
            assert_eq!(
                r.warnings.iter().any(|w| w == warning),
                warned,
                "{mode} {disk_gib:?}: {:?}",
                r.warnings
            );
        }
        // An unknown clone mode is a full clone, as upstream: warned, not rejected.
        let mut v = base();
        v["cloneMode"] = json!("quickClone");
        let r = check(&v, p, ProviderSpecUse::Machine, &Ctx::default());
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(
            r.warnings,
            [
                "spec.providerSpec.value.cloneMode: Unsupported value: \"quickClone\": supported values: \"fullClone\", \"linkedClone\""
            ]
        );
    }
}
