//! `admit`: default and validate any object the way the apiserver and our webhooks would on
//! create or update — mutating webhook defaults and schema defaults, metadata and schema checks,
//! then the kind's webhook rules. Pure: objects in, outcome out.
//!
//! Used by `vsphere-provider validate`, by the admission server and by local mode.

use serde_json::Value;

use super::vsphere_machine as vm;
use super::{Ctx, FieldError, dedup, schema};
use crate::api::ipam;
use crate::api::manifest::{self, LoadedObject, ObjectType, Unserved, object_type};
use crate::api::{
    ControlPlaneMachineSet, Kind, Machine, MachineHealthCheck, VSphereCluster,
    VSphereDeploymentZone, VSphereFailureDomain, VSphereMachine, VSphereMachineTemplate, VSphereVM,
};

/// What admission decided about one object.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionOutcome {
    /// What the object is.
    pub object_type: ObjectType,
    /// The object after defaulting.
    pub object: Value,
    /// The paths that defaulting set, in order.
    pub defaulted: Vec<String>,
    /// Why the object is rejected (empty: admitted).
    pub errors: Vec<FieldError>,
    /// Warnings (admitted all the same).
    pub warnings: Vec<String>,
}

impl AdmissionOutcome {
    /// True if the object is admitted.
    pub fn allowed(&self) -> bool {
        self.errors.is_empty() && self.object_type != ObjectType::Unknown
    }
}

/// Admits a loaded object as a create.
pub fn admit_loaded(obj: &LoadedObject, ctx: &Ctx) -> AdmissionOutcome {
    admit(&obj.value, None, ctx)
}

/// Which admission layers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layers {
    /// What the apiserver does with the CRD alone: schema defaults, schema and CEL rules.
    Crd,
    /// The CRD layer plus this provider's mutating and validating webhooks.
    CrdAndWebhooks,
}

/// Defaults and validates `new` (an update when `old` is given, else a create) through the CRD
/// and the webhooks.
pub fn admit(new: &Value, old: Option<&Value>, ctx: &Ctx) -> AdmissionOutcome {
    admit_layers(new, old, ctx, Layers::CrdAndWebhooks)
}

/// As [`admit`], with only the given layers (upstream CRD test suites test the CRD alone).
pub fn admit_layers(
    new: &Value,
    old: Option<&Value>,
    ctx: &Ctx,
    layers: Layers,
) -> AdmissionOutcome {
    let api_version = new
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind_name = new.get("kind").and_then(Value::as_str).unwrap_or_default();
    let ty = object_type(api_version, kind_name);
    let mut outcome = AdmissionOutcome {
        object_type: ty,
        object: new.clone(),
        defaulted: Vec::new(),
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    match ty {
        ObjectType::Unknown => {
            outcome
                .errors
                .push(unknown_type_error(api_version, kind_name));
        }
        ObjectType::Secret => admit_secret(&mut outcome, ctx),
        // Nodes are the kubelet's, the Infrastructure is OpenShift's and the Cluster API core
        // kinds are CAPI's; local mode only needs them to decode (what it reads of CAPI's
        // objects, it checks when it plays CAPI, naming the field).
        ObjectType::Node | ObjectType::Infrastructure | ObjectType::CapiCore => {
            let mut errors = Vec::new();
            outcome.warnings = schema::validate_metadata(
                outcome.object.get("metadata"),
                ty == ObjectType::CapiCore,
                ctx,
                &mut errors,
            );
            if ty == ObjectType::Infrastructure
                && let Some(name) = outcome.object["metadata"]["name"].as_str()
                && name != crate::api::openshift_config::v1::infrastructure::CLUSTER
            {
                outcome.warnings.push(format!(
                    "metadata.name: only the Infrastructure named {:?} is read (this one is {name:?})",
                    crate::api::openshift_config::v1::infrastructure::CLUSTER
                ));
            }
            outcome.errors = errors;
        }
        ObjectType::IpPool => {
            let mut errors = Vec::new();
            let namespaced = kind_name == ipam::POOL_KIND;
            outcome.warnings = schema::validate_metadata(
                outcome.object.get("metadata"),
                namespaced,
                ctx,
                &mut errors,
            );
            match serde_json::from_value::<ipam::InClusterIpPool>(outcome.object.clone()) {
                Err(e) => errors.push(FieldError::invalid("spec", &Value::Null, e.to_string())),
                Ok(pool) => {
                    if let Err(e) = crate::plan::ipam::parse_pool(&pool) {
                        let at = outcome.object.pointer(&format!(
                            "/{}",
                            e.field.replace(['.', '['], "/").replace(']', "")
                        ));
                        errors.push(FieldError::invalid(
                            &e.field,
                            at.unwrap_or(&Value::Null),
                            &e.message,
                        ));
                    }
                }
            }
            outcome.errors = errors;
        }
        ObjectType::IpamRecord => {
            outcome.errors.push(FieldError::invalid(
                "kind",
                &Value::String(kind_name.to_string()),
                "IP address claims are made by the machine controller and bound by the IPAM provider (local mode binds them itself); give the pools (InClusterIPPool, GlobalInClusterIPPool) instead",
            ));
        }
        ObjectType::Served(kind) => {
            let mut old_defaulted = old.cloned();
            if let Some(o) = old_defaulted.as_mut() {
                default_layers(kind, o, layers);
            }
            outcome.defaulted = default_layers(kind, &mut outcome.object, layers);
            let (errors, warnings) =
                validate_layers(kind, &outcome.object, old_defaulted.as_ref(), ctx, layers);
            outcome.errors = errors;
            outcome.warnings = warnings;
        }
    }
    outcome
}

/// Why an object of a type this provider does not know is refused, in the words that help
/// most: a missing `apiVersion` or `kind` said as such, a kind of ours at a version it is not
/// served at named with the versions it is, else the kinds that are served.
fn unknown_type_error(api_version: &str, kind_name: &str) -> FieldError {
    let versions = |k: Kind| k.api_versions().join(" or ");
    match manifest::unserved(api_version, kind_name) {
        Some(Unserved::MissingApiVersion) => {
            let hint = Kind::ALL
                .into_iter()
                .find(|k| k.name() == kind_name)
                .map(|k| format!(" ({kind_name} is {})", versions(k)))
                .unwrap_or_default();
            FieldError::required("apiVersion", format!("missing apiVersion{hint}"))
        }
        Some(Unserved::MissingKind) => FieldError::required("kind", "missing kind"),
        Some(Unserved::NotServedAs(k)) if k.name() != kind_name => FieldError::invalid_str(
            "kind",
            kind_name,
            format!("no such kind; did you mean {} ({})?", k.name(), versions(k)),
        ),
        Some(Unserved::NotServedAs(k)) => FieldError::invalid_str(
            "apiVersion",
            api_version,
            format!("{kind_name} is served as {}", versions(k)),
        ),
        Some(Unserved::CapvKind) => FieldError::invalid_str(
            "kind",
            kind_name,
            format!(
                "a CAPV kind vsphere-provider does not serve, so a cluster running it has no CRD for it (served: {})",
                Kind::ALL.map(Kind::name).join(", ")
            ),
        ),
        None => {
            let known: Vec<Value> = Kind::ALL
                .iter()
                .map(|k| Value::String(format!("{}/{}", k.api_version(), k.name())))
                .chain([
                    Value::String("v1/Secret".into()),
                    Value::String("v1/Node".into()),
                    Value::String(format!(
                        "{}/{}",
                        crate::api::openshift_config::v1::infrastructure::API_VERSION,
                        crate::api::openshift_config::v1::infrastructure::KIND
                    )),
                    Value::String(format!("{}/{}", ipam::POOL_API_VERSION, ipam::POOL_KIND)),
                    Value::String(format!(
                        "{}/{}",
                        ipam::POOL_API_VERSION,
                        ipam::GLOBAL_POOL_KIND
                    )),
                ])
                .chain(
                    crate::api::capi_core::LOCAL_KINDS
                        .iter()
                        .map(|k| Value::String(format!("cluster.x-k8s.io/v1beta1/{k}"))),
                )
                .collect();
            FieldError::not_supported("kind", &format!("{api_version}/{kind_name}").into(), &known)
        }
    }
}

/// Applies schema defaults and the kind's mutating webhook. Returns the defaulted paths.
pub fn default_object(kind: Kind, obj: &mut Value) -> Vec<String> {
    default_layers(kind, obj, Layers::CrdAndWebhooks)
}

fn default_layers(kind: Kind, obj: &mut Value, layers: Layers) -> Vec<String> {
    let mut defaulted = Vec::new();
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or(kind.api_version())
        .to_string();
    schema::apply_defaults(&kind.schema_for(&api_version), obj, "", &mut defaulted);
    if layers == Layers::Crd {
        return defaulted;
    }
    // The defaulters' paths are the same in v1beta1 and v1beta2 (our v1beta2 keeps
    // autoConfigure); in a cluster a v1beta2 request is converted and defaulted as v1beta1.
    match kind {
        Kind::VSphereFailureDomain => defaulted.extend(super::failure_domain::default(obj)),
        Kind::VSphereDeploymentZone => defaulted.extend(super::deployment_zone::default(obj)),
        Kind::Machine => defaulted.extend(super::machine::default(obj)),
        Kind::VSphereMachine => defaulted.extend(super::vsphere_machine::default_machine(obj)),
        Kind::VSphereVM => defaulted.extend(super::vsphere_machine::default_vm(obj)),
        _ => {}
    }
    defaulted
}

/// Validates a defaulted object (and its defaulted old version on update): metadata, schema,
/// then the kind's rules. Webhook errors on a path the schema already rejected are dropped (the
/// apiserver would not have called the webhook). Returns errors and warnings.
pub fn validate_object(
    kind: Kind,
    new: &Value,
    old: Option<&Value>,
    ctx: &Ctx,
) -> (Vec<FieldError>, Vec<String>) {
    validate_layers(kind, new, old, ctx, Layers::CrdAndWebhooks)
}

fn validate_layers(
    kind: Kind,
    new: &Value,
    old: Option<&Value>,
    ctx: &Ctx,
    layers: Layers,
) -> (Vec<FieldError>, Vec<String>) {
    let mut errors = Vec::new();
    let mut warnings =
        schema::validate_metadata(new.get("metadata"), kind.namespaced(), ctx, &mut errors);
    // CRD layer: the Machine status transition rules (judged even when the spec is unchanged:
    // status updates leave it alone).
    if kind == Kind::Machine
        && let Some(old) = old
    {
        errors.extend(super::machine::status_transition_rules(old, new));
    }
    if let Some(old) = old {
        errors.extend(super::machine::provider_id_transition_rule(kind, old, new));
    }
    if layers == Layers::CrdAndWebhooks {
        errors.extend(forged_conversion_data(kind, new, old));
    }
    // Ratcheting: an update that leaves the spec alone (finalizers, owner references, labels,
    // status) is not judged again by rules the object may predate — otherwise an object admitted
    // before a rule existed could never lose its finalizer or be deleted. "Alone" holds for the
    // spec that is stored too (the hub's, converted with the conversion annotation), not only
    // the one the request's version shows.
    if let Some(old) = old
        && old.get("spec") == new.get("spec")
        && hub_spec(kind, old) == hub_spec(kind, new)
    {
        dedup(&mut errors);
        return (errors, warnings);
    }
    let api_version = new
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or(kind.api_version());
    // A missing spec is Go's zero value upstream: judge `spec: {}`, and if the kind cannot be
    // without one (v1beta2 requires it; required fields in v1beta1), say so at `spec` rather
    // than "cannot decode". `spec: null` is a missing spec: the apiserver drops nulls of
    // non-nullable fields before it validates.
    let spec_missing = new.get("spec").is_none_or(Value::is_null);
    let spec_required = kind.schema_for(api_version)["required"]
        .as_array()
        .is_some_and(|r| r.contains(&Value::from("spec")));
    if spec_missing && spec_required {
        // CAPV's v1beta2 CRDs require the spec (but for the templates').
        errors.push(FieldError::required("spec", ""));
        dedup(&mut errors);
        return (errors, warnings);
    }
    let without_null_spec;
    let schema_input = if new.get("spec").is_some_and(Value::is_null) {
        let mut v = new.clone();
        if let Some(map) = v.as_object_mut() {
            map.remove("spec");
        }
        without_null_spec = v;
        &without_null_spec
    } else {
        new
    };
    schema::validate(
        &kind.schema_for(api_version),
        schema_input,
        "",
        ctx,
        &mut errors,
    );
    if errors.is_empty() && layers == Layers::CrdAndWebhooks {
        errors.extend(stored_schema_errors(kind, api_version, new, ctx));
    }
    let schema_paths: std::collections::HashSet<String> =
        errors.iter().map(|e| e.path.clone()).collect();

    let with_spec;
    let new = if spec_missing {
        let mut v = new.clone();
        if let Some(map) = v.as_object_mut() {
            map.insert("spec".into(), Value::Object(Default::default()));
        }
        with_spec = v;
        &with_spec
    } else {
        new
    };
    let mut rules = Vec::new();
    match run_rules(kind, new, old, ctx, layers, &mut rules, &mut warnings) {
        // What the rules miss in an absent spec is the spec itself.
        Ok(()) if spec_missing && !rules.is_empty() => {
            rules = vec![FieldError::required("spec", "")];
        }
        Ok(()) => {}
        Err(_) if spec_missing => {
            if !schema_paths.contains("spec") {
                errors.push(FieldError::required("spec", ""));
            }
        }
        Err(e) if ctx.allow_placeholders && schema::contains_placeholder(new) => warnings.push(format!(
            "webhook rules skipped: the object has placeholders where typed values are expected ({e})"
        )),
        Err(e) if errors.is_empty() => errors.push(FieldError::invalid_type("spec", "object", format!("cannot decode: {e}"))),
        Err(_) => {}
    }
    let converted = api_version != kind.api_version() && kind.api_versions().len() > 1;
    errors.extend(
        rules
            .into_iter()
            .map(|e| {
                if converted {
                    at_request_version(e, api_version, new)
                } else {
                    e
                }
            })
            .filter(|e| !schema_paths.contains(&e.path)),
    );
    dedup(&mut errors);
    warnings.dedup();
    (errors, warnings)
}

/// The conversion annotation, as an error path names it.
const CONVERSION_DATA_PATH: &str = "metadata.annotations[cluster.x-k8s.io/conversion-data]";

/// The spec `object` is stored with: its kind's Rust type's version, converted with what the
/// conversion annotation holds.
fn hub_spec(kind: Kind, object: &Value) -> Option<Value> {
    if kind.api_versions().len() < 2 {
        return object.get("spec").cloned();
    }
    crate::api::conversion::to_typed(object)
        .get("spec")
        .cloned()
}

/// The conversion annotation is the provider's own record: a create, or an update that changes
/// it, is refused when it holds what no conversion writes ([`conversion::forged_entries`]: an
/// entry for the request's own version, or one that would change a field the request shows).
/// The conversion ignores such entries anyway; refusing them says so to whoever wrote them.
///
/// [`conversion::forged_entries`]: crate::api::conversion::forged_entries
fn forged_conversion_data(kind: Kind, new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    use crate::api::conversion::{CONVERSION_DATA, LEGACY_CONVERSION_DATA};
    if kind.api_versions().len() < 2 {
        return Vec::new();
    }
    let held = |v: &Value| {
        let a = v.pointer("/metadata/annotations");
        [CONVERSION_DATA, LEGACY_CONVERSION_DATA].map(|k| a.and_then(|a| a.get(k)).cloned())
    };
    if old.is_some_and(|old| held(old) == held(new)) {
        return Vec::new();
    }
    let own = new
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    crate::api::conversion::forged_entries(new)
        .into_iter()
        .map(|(version, pointer)| {
            let why = if pointer.starts_with("unreadable") {
                pointer
            } else if version == own {
                format!(
                    "holds {pointer} for {version}, the version of this request: the provider keeps there only what another version cannot show"
                )
            } else {
                format!(
                    "holds {pointer} for {version}, which would change what {own} shows: the annotation is the provider's conversion record, not a way to set fields"
                )
            };
            FieldError::forbidden(CONVERSION_DATA_PATH, why)
        })
        .collect()
}

/// Schema errors the conversion annotation adds to the object as it would be stored (converted
/// to the kind's Rust type's version), when the request is at another version: the stored
/// object is validated with and without what the annotation holds, and what fails only with it
/// is the annotation's doing.
fn stored_schema_errors(
    kind: Kind,
    api_version: &str,
    request: &Value,
    ctx: &Ctx,
) -> Vec<FieldError> {
    use crate::api::conversion::{CONVERSION_DATA, LEGACY_CONVERSION_DATA};
    if api_version == kind.api_version() || kind.api_versions().len() < 2 {
        return Vec::new();
    }
    let held = |k: &str| {
        request
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(k))
    };
    if held(CONVERSION_DATA).is_none() && held(LEGACY_CONVERSION_DATA).is_none() {
        return Vec::new();
    }
    let stored_errors = |object: &Value| {
        let stored = crate::api::conversion::to_typed(object);
        let mut found = Vec::new();
        if stored.get("apiVersion") == Some(&Value::from(kind.api_version())) {
            schema::validate(
                &kind.schema_for(kind.api_version()),
                &stored,
                "",
                ctx,
                &mut found,
            );
        }
        found
    };
    let mut bare = request.clone();
    if let Some(a) = bare
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(CONVERSION_DATA);
        a.remove(LEGACY_CONVERSION_DATA);
    }
    let without = stored_errors(&bare);
    stored_errors(request)
        .into_iter()
        .filter(|e| !without.contains(e))
        .map(|e| {
            FieldError::forbidden(
                CONVERSION_DATA_PATH,
                format!(
                    "converted to {} with this annotation the object is invalid: {e}",
                    kind.api_version()
                ),
            )
        })
        .collect()
}

/// A rule's error, found on the kind's Rust type, as the request `request` at `version` reads:
/// the field under its name there, and the value the user wrote (`60`, not the `"1m0s"` it
/// converts to).
fn at_request_version(mut e: FieldError, version: &str, request: &Value) -> FieldError {
    let path = crate::api::conversion::field_path_at(version, &e.path);
    if path != e.path {
        if e.value.is_some()
            && let Some(v) = value_at(request, &path)
        {
            e.value = Some(super::render(v));
        }
        e.path = path;
    }
    e
}

/// The value at a dotted field path with `[i]` list indexes, as errors print them.
fn value_at<'v>(object: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(object, |v, segment| {
        let (name, mut rest) = segment.split_at(segment.find('[').unwrap_or(segment.len()));
        let mut v = v.get(name)?;
        while let Some(inner) = rest.strip_prefix('[') {
            let (i, after) = inner.split_once(']')?;
            v = v.get(i.parse::<usize>().ok()?)?;
            rest = after;
        }
        Some(v)
    })
}

fn decode<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, serde_json::Error> {
    serde_json::from_value(v.clone())
}

fn run_rules(
    kind: Kind,
    new: &Value,
    old: Option<&Value>,
    ctx: &Ctx,
    layers: Layers,
    errors: &mut Vec<FieldError>,
    warnings: &mut Vec<String>,
) -> Result<(), serde_json::Error> {
    let request = new;
    // The rules are written against the kind's Rust type; other served versions convert to it.
    let new = &crate::api::conversion::to_typed(new);
    let old_converted = old.map(crate::api::conversion::to_typed);
    let old = old_converted.as_ref();
    // CRD layer: the CEL rules (only ControlPlaneMachineSet has any).
    if kind == Kind::ControlPlaneMachineSet {
        let n: ControlPlaneMachineSet = decode(new)?;
        match old.map(decode::<ControlPlaneMachineSet>).transpose()? {
            Some(o) => errors.extend(super::control_plane_machine_set::cel_update(&o, &n, ctx)),
            None => errors.extend(super::control_plane_machine_set::cel_create(&n, ctx)),
        }
    }
    if layers == Layers::Crd {
        return Ok(());
    }
    match kind {
        Kind::VSphereFailureDomain => {
            let n: VSphereFailureDomain = decode(new)?;
            match old.map(decode::<VSphereFailureDomain>).transpose()? {
                Some(o) => errors.extend(super::failure_domain::validate_update(&o, &n, ctx)),
                None => errors.extend(super::failure_domain::validate_create(&n, ctx)),
            }
            warnings.extend(super::failure_domain::warnings(&n));
        }
        Kind::VSphereDeploymentZone => {
            let n: VSphereDeploymentZone = decode(new)?;
            match old.map(decode::<VSphereDeploymentZone>).transpose()? {
                Some(o) => errors.extend(super::deployment_zone::validate_update(&o, &n, ctx)),
                None => errors.extend(super::deployment_zone::validate_create(&n, ctx)),
            }
            errors.extend(super::deployment_zone::validate_placement(request));
        }
        Kind::VSphereCluster => {
            let n: VSphereCluster = decode(new)?;
            errors.extend(super::vsphere_cluster::validate(&n, ctx));
            warnings.extend(super::vsphere_cluster::warnings(&n));
        }
        // CAPV has no webhook for it: the CRD schema is all there is to check.
        Kind::VSphereClusterIdentity => {}
        // As CAPV: the stamped spec never changes (ClusterClass rotates to a new template),
        // but the topology controller's server-side dry run must pass.
        Kind::VSphereClusterTemplate => {
            // Compared as JSON: CAPV's ClusterClass template has no spec at all.
            let stamped = |v: &Value| v.pointer("/spec/template/spec").cloned();
            if let Some(o) = old
                && stamped(o) != stamped(new)
                && !vm::is_topology_dry_run(new, ctx)
            {
                errors.push(FieldError::forbidden(
                    "spec.template.spec",
                    "VSphereClusterTemplate spec is immutable",
                ));
            }
        }
        Kind::VSphereMachine => {
            let n: VSphereMachine = decode(new)?;
            match old {
                Some(o) => errors.extend(vm::validate_machine_update(&n, new, o, request)),
                None => errors.extend(vm::validate_machine_create(&n, request, ctx)),
            }
        }
        Kind::VSphereMachineTemplate => {
            let n: VSphereMachineTemplate = decode(new)?;
            match old.map(decode::<VSphereMachineTemplate>).transpose()? {
                Some(o) => errors.extend(vm::validate_template_update(&o, &n, new, ctx)),
                None => errors.extend(vm::validate_template_create(&n, request, ctx)),
            }
        }
        Kind::VSphereVM => {
            let n: VSphereVM = decode(new)?;
            match old {
                Some(o) => {
                    let typed_old: VSphereVM = decode(o)?;
                    errors.extend(vm::validate_vm_update(&typed_old, &n, new, o, request))
                }
                None => errors.extend(vm::validate_vm_create(&n, request, ctx)),
            }
        }
        Kind::Machine => {
            let n: Machine = decode(new)?;
            match old.map(decode::<Machine>).transpose()? {
                Some(o) => errors.extend(super::machine::validate_update(&o, &n, ctx)),
                None => errors.extend(super::machine::validate_create(&n, ctx)),
            }
            warnings.extend(super::machine::warnings(&n, ctx));
        }
        Kind::MachineHealthCheck => {
            let n: MachineHealthCheck = decode(new)?;
            errors.extend(super::machine_health_check::validate(&n, ctx));
            warnings.extend(super::machine_health_check::warnings(&n));
        }
        Kind::ControlPlaneMachineSet => {
            let n: ControlPlaneMachineSet = decode(new)?;
            errors.extend(super::control_plane_machine_set::validate_webhook(&n, ctx));
            warnings.extend(super::control_plane_machine_set::warnings(&n, ctx));
        }
    }
    errors.extend(super::tag_ids::validate(kind, new, old, ctx));
    Ok(())
}

fn admit_secret(outcome: &mut AdmissionOutcome, ctx: &Ctx) {
    let obj = &mut outcome.object;
    let mut errors = Vec::new();
    outcome.warnings = schema::validate_metadata(obj.get("metadata"), true, ctx, &mut errors);
    if let Some(map) = obj.as_object_mut() {
        if map.get("type").is_none_or(Value::is_null) {
            map.insert("type".into(), "Opaque".into());
            outcome.defaulted.push("type".into());
        }
        for (k, v) in map.iter() {
            match k.as_str() {
                "apiVersion" | "kind" | "metadata" => {}
                "type" if v.is_string() => {}
                "immutable" if v.is_boolean() => {}
                "data" | "stringData" => {
                    match v.as_object() {
                        Some(entries) => {
                            for (ek, ev) in entries {
                                let p = super::key(k, ek);
                                let valid_key = !ek.is_empty()
                                    && ek.len() <= 253
                                    && ek.chars().all(|c| {
                                        c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
                                    });
                                if !valid_key {
                                    errors.push(FieldError::invalid_str(
                                    k.as_str(),
                                    ek,
                                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                ));
                                }
                                match ev.as_str() {
                                // Never echo secret data.
                                Some(s) if k == "data" && !is_base64(s) => errors.push(FieldError::invalid_type(
                                    p,
                                    "string",
                                    "must be base64-encoded (use stringData for plain text)",
                                )),
                                Some(_) => {}
                                None => errors.push(FieldError::invalid_type(p, crate::api::manifest::json_type(ev), "must be a string")),
                            }
                            }
                        }
                        None if v.is_null() => {}
                        None => errors.push(FieldError::invalid_type(
                            k.as_str(),
                            crate::api::manifest::json_type(v),
                            "must be an object",
                        )),
                    }
                }
                _ => errors.push(FieldError::unknown_field(k.as_str())),
            }
        }
    }
    outcome.errors = errors;
}

fn is_base64(s: &str) -> bool {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    s.len().is_multiple_of(4)
        && s.trim_end_matches('=')
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/')
        && s.len() - s.trim_end_matches('=').len() <= 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_kind_is_rejected() {
        let out = admit(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
            None,
            &Ctx::default(),
        );
        assert!(!out.allowed());
        assert_eq!(out.object_type, ObjectType::Unknown);
        let out = admit(
            &json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereFailureDomain"}),
            None,
            &Ctx::default(),
        );
        assert!(!out.allowed());
    }

    #[test]
    fn secrets_are_checked_without_echoing_data() {
        let good = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "default"},
            "stringData": {"username": "user", "password": "pass"}});
        let out = admit(&good, None, &Ctx::default());
        assert!(out.allowed(), "{:?}", out.errors);
        assert_eq!(out.defaulted, ["type"]);
        let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "data": {"password": "not base64!"}});
        let out = admit(&bad, None, &Ctx::default());
        assert_eq!(out.errors.len(), 1);
        assert!(!out.errors[0].to_string().contains("not base64"));
        assert_eq!(out.errors[0].path, "data[password]");
    }

    #[test]
    fn zone_defaults_and_rules() {
        let zone = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereDeploymentZone",
            "metadata": {"name": "zone-a"},
            "spec": {"server": "127.0.0.1", "failureDomain": "zone-a", "placementConstraint": {"resourcePool": "rp"}}});
        let out = admit(&zone, None, &Ctx::default());
        assert!(out.allowed(), "{:?}", out.errors);
        assert_eq!(out.defaulted, ["spec.controlPlane"]);
        let mut changed = zone.clone();
        changed["spec"]["failureDomain"] = json!("zone-b");
        let out = admit(&changed, Some(&zone), &Ctx::default());
        assert_eq!(out.errors.len(), 1);
        assert_eq!(out.errors[0].path, "spec.failureDomain");
    }

    #[test]
    fn errors_on_a_v1beta2_request_name_its_own_fields() {
        // The rules read VSphereMachine's Rust type (v1beta1); a v1beta2 user must be told about the
        // fields they wrote, under their names and with their values.
        let template = |api_version: &str, spec: Value| {
            json!({"apiVersion": api_version, "kind": "VSphereMachineTemplate",
                "metadata": {"name": "t", "namespace": "default"},
                "spec": {"template": {"spec": spec}}})
        };
        let base = json!({"template": "/DC0/vm/tmpl", "server": "vc.example.com",
            "powerOffMode": "hard", "network": {"devices": [{"networkName": "VM Network", "dhcp4": true}]}});
        let mut v2 = base.clone();
        v2["guestSoftPowerOffTimeoutSeconds"] = json!(60);
        v2["naming"] = json!({"template": "{{ .machine.name | bad"});
        let shown = |o: &AdmissionOutcome| -> Vec<String> {
            o.errors.iter().map(ToString::to_string).collect()
        };
        let out = admit(
            &template("infrastructure.cluster.x-k8s.io/v1beta2", v2),
            None,
            &Ctx::default(),
        );
        let v2_errors = shown(&out);
        assert!(
            v2_errors.iter().any(|e| e.starts_with(
                "spec.template.spec.guestSoftPowerOffTimeoutSeconds: Invalid value: 60: "
            )),
            "{v2_errors:#?}"
        );
        assert!(
            v2_errors
                .iter()
                .any(|e| e.starts_with("spec.template.spec.naming.template: Invalid value: ")),
            "{v2_errors:#?}"
        );
        assert!(
            !v2_errors
                .iter()
                .any(|e| e.contains("guestSoftPowerOffTimeout:") || e.contains("namingStrategy")),
            "no v1beta1 name leaks: {v2_errors:#?}"
        );
        // The same mistakes at v1beta1 keep v1beta1's names.
        let mut v1 = base;
        v1["guestSoftPowerOffTimeout"] = json!("1m0s");
        v1["namingStrategy"] = json!({"template": "{{ .machine.name | bad"});
        let out = admit(
            &template("infrastructure.cluster.x-k8s.io/v1beta1", v1),
            None,
            &Ctx::default(),
        );
        let v1_errors = shown(&out);
        assert!(
            v1_errors.iter().any(|e| e.starts_with(
                "spec.template.spec.guestSoftPowerOffTimeout: Invalid value: \"1m0s\": "
            )),
            "{v1_errors:#?}"
        );
        assert!(
            v1_errors
                .iter()
                .any(|e| e.starts_with("spec.template.spec.namingStrategy.template: ")),
            "{v1_errors:#?}"
        );
    }

    #[test]
    fn schema_and_webhook_errors_are_not_doubled() {
        let mhc = json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineHealthCheck",
            "metadata": {"name": "m", "namespace": "default"}, "spec": {"unhealthyConditions": []}});
        let out = admit(&mhc, None, &Ctx::default());
        let shown: Vec<String> = out.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "spec.unhealthyConditions: Invalid value: 0: spec.unhealthyConditions in body should have at least 1 items"
            ]
        );
    }

    #[test]
    fn ip_pools_are_checked_naming_the_field_and_claims_are_refused() {
        let pool = |kind: &str, ns: Option<&str>, addresses: Value| {
            let mut meta = json!({"name": "workers"});
            if let Some(ns) = ns {
                meta["namespace"] = ns.into();
            }
            json!({"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": kind,
                   "metadata": meta, "spec": {"addresses": addresses, "prefix": 24}})
        };
        let ok = admit(
            &pool("InClusterIPPool", Some("ns"), json!(["10.0.0.0/24"])),
            None,
            &Ctx::default(),
        );
        assert!(ok.allowed() && ok.warnings.is_empty(), "{:?}", ok.warnings);
        let global = admit(
            &pool("GlobalInClusterIPPool", None, json!(["10.0.0.1-10.0.0.9"])),
            None,
            &Ctx::default(),
        );
        assert!(
            global.allowed() && global.warnings.is_empty(),
            "{:?}",
            global.warnings
        );
        let bad = admit(
            &pool("InClusterIPPool", Some("ns"), json!(["10.0.0.1", "nope"])),
            None,
            &Ctx::default(),
        );
        let errs: Vec<String> = bad.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("spec.addresses[1]: Invalid value: \"nope\""),
            "{errs:?}"
        );
        let claim = admit(
            &json!({"apiVersion": "ipam.cluster.x-k8s.io/v1beta1", "kind": "IPAddressClaim",
                    "metadata": {"name": "c", "namespace": "ns"}}),
            None,
            &Ctx::default(),
        );
        assert!(!claim.allowed());
    }

    const V1: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
    const V2: &str = "infrastructure.cluster.x-k8s.io/v1beta2";
    const HELD: &str = crate::api::conversion::CONVERSION_DATA;

    fn vsphere_vm(version: &str) -> Value {
        serde_json::json!({"apiVersion": version, "kind": "VSphereVM",
            "metadata": {"name": "vm-0", "namespace": "ns"},
            "spec": {"server": "vc.example.com", "template": "ubuntu", "datacenter": "DC0",
                     "network": {"devices": [{"networkName": "VM Network", "dhcp4": true}]}}})
    }

    fn holding(mut o: Value, held: Value) -> Value {
        o["metadata"]["annotations"] = serde_json::json!({HELD: held.to_string()});
        o
    }

    fn forged_paths(out: &AdmissionOutcome) -> Vec<String> {
        out.errors
            .iter()
            .filter(|e| e.path == CONVERSION_DATA_PATH)
            .map(ToString::to_string)
            .collect()
    }

    /// N1: an annotation-only update at v1beta1 that would set the stored spec's
    /// `customVMXKeys` is refused, naming the annotation; so is a create carrying it, and one
    /// holding entries for its own version.
    #[test]
    fn a_conversion_annotation_that_sets_fields_is_refused_naming_it() {
        let ctx = Ctx::default();
        let old = vsphere_vm(V1);
        let smuggling = holding(
            old.clone(),
            serde_json::json!({V2: [{"path": "/spec/customVMXKeys", "value": {"guestinfo.smuggled": "1"}}]}),
        );
        let out = admit(&smuggling, Some(&old), &ctx);
        let refused = forged_paths(&out);
        assert_eq!(refused.len(), 1, "{:?}", out.errors);
        assert!(
            refused[0].contains("/spec/customVMXKeys") && refused[0].contains(HELD),
            "{refused:?}"
        );
        assert!(!admit(&smuggling, None, &ctx).allowed());
        let own = holding(
            vsphere_vm(V2),
            serde_json::json!({V2: [{"path": "/status/actuatorState", "value": {"phase": "Provisioned"}}]}),
        );
        let out = admit(&own, None, &ctx);
        assert!(
            forged_paths(&out)[0].contains("the version of this request"),
            "{:?}",
            out.errors
        );
    }

    /// What a conversion kept is admitted, and an update that leaves a stored annotation alone
    /// is not judged again (an object stored before the rule can still lose its finalizer).
    #[test]
    fn kept_entries_and_unchanged_annotations_are_admitted() {
        let ctx = Ctx::default();
        let mut hub = vsphere_vm(V2);
        hub["spec"]["customVMXKeys"] = serde_json::json!({"disk.EnableUUID": "TRUE"});
        let read_at_v1 = crate::api::conversion::convert(&hub, V1).unwrap();
        let out = admit(&read_at_v1, Some(&read_at_v1), &ctx);
        assert!(out.allowed(), "{:?}", out.errors);
        let stored = holding(
            vsphere_vm(V2),
            serde_json::json!({V2: [{"path": "/spec/server", "value": "x"}]}),
        );
        let mut finalized = stored.clone();
        finalized["metadata"]["finalizers"] = serde_json::json!(["a/b"]);
        assert!(admit(&finalized, Some(&stored), &ctx).errors.is_empty());
    }

    /// N2: `spec.providerID` is immutable once set, for both machine APIs; setting it where
    /// it was unset or empty is allowed (the provider does, from the VM's BIOS UUID).
    #[test]
    fn a_machines_provider_id_is_immutable_once_set() {
        let ctx = Ctx::default();
        let machine = |pid: Option<&str>| {
            let mut m = serde_json::json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
                "metadata": {"name": "m-0", "namespace": "ns"}, "spec": {}});
            if let Some(p) = pid {
                m["spec"]["providerID"] = p.into();
            }
            m
        };
        let vsm = |pid: Option<&str>| {
            let mut m = serde_json::json!({"apiVersion": V2, "kind": "VSphereMachine",
                "metadata": {"name": "m-0", "namespace": "ns"},
                "spec": {"template": "ubuntu", "network": {"devices": [{"networkName": "n", "dhcp4": true}]}}});
            if let Some(p) = pid {
                m["spec"]["providerID"] = p.into();
            }
            m
        };
        for object in [&machine as &dyn Fn(Option<&str>) -> Value, &vsm] {
            let set = object(Some("vsphere://4211-a"));
            for layers in [Layers::Crd, Layers::CrdAndWebhooks] {
                let changed =
                    admit_layers(&object(Some("vsphere://cp-0")), Some(&set), &ctx, layers);
                assert!(
                    changed.errors.iter().any(|e| e.path == "spec.providerID"
                        && e.to_string().contains("immutable once set")),
                    "{:?}",
                    changed.errors
                );
                let removed = admit_layers(&object(None), Some(&set), &ctx, layers);
                assert!(removed.errors.iter().any(|e| e.path == "spec.providerID"));
            }
            for unset in [object(None), object(Some(""))] {
                let out = admit(&set, Some(&unset), &ctx);
                assert!(
                    !out.errors.iter().any(|e| e.path == "spec.providerID"),
                    "{:?}",
                    out.errors
                );
            }
        }
    }

    /// The CRDs carry the rule where admission implements it, and nowhere else.
    #[test]
    fn the_crds_carry_the_provider_id_rule_where_admission_implements_it() {
        for kind in Kind::ALL {
            for version in kind.api_versions() {
                let schema = kind.schema_for(version);
                let mut found = Vec::new();
                for path in super::super::machine::provider_id_rule_paths(kind) {
                    let mut at = &schema;
                    for segment in path.split('.') {
                        at = &at["properties"][segment];
                    }
                    found.push(at["x-kubernetes-validations"].to_string());
                }
                assert!(
                    found
                        .iter()
                        .all(|r| r.contains(crate::api::provider_id_cel::RULE)),
                    "{kind:?} {version}: {found:?}"
                );
                let everywhere = schema
                    .to_string()
                    .matches(crate::api::provider_id_cel::MESSAGE)
                    .count();
                assert_eq!(everywhere, found.len(), "{kind:?} {version}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// N1: no annotation content makes conversion store a spec that admission would refuse:
        /// when admission lets a v1beta1 request with any held entries through, the object it
        /// is stored as (v1beta2) passes admission too.
        #[test]
        fn no_annotation_stores_what_admission_refuses(
            entries in proptest::collection::vec((0usize..8, 0usize..7), 1..5)
        ) {
            let paths = ["/spec/customVMXKeys", "/spec/server", "/spec/numCPUs", "/spec/template",
                "/spec/network/devices", "/spec/guestSoftPowerOffTimeoutSeconds", "/spec/powerOffMode",
                "/spec/additionalDisksGiB"];
            let values = [serde_json::json!("x"), serde_json::json!(-3), serde_json::json!({"guestinfo.a": "1"}),
                serde_json::json!([]), serde_json::json!(true), serde_json::json!("hard"), Value::Null];
            let held: Vec<Value> = entries.iter()
                .map(|(p, v)| serde_json::json!({"path": paths[*p], "value": values[*v]}))
                .collect();
            let ctx = Ctx::default();
            let request = holding(vsphere_vm(V1), serde_json::json!({V2: held}));
            // A request the conversion cannot take is refused by the API server itself.
            if admit(&request, None, &ctx).allowed()
                && let Ok(stored) = crate::api::conversion::convert(&request, V2)
            {
                let out = admit(&stored, None, &ctx);
                proptest::prop_assert!(out.allowed(), "{:?}\n{}", out.errors, stored);
            }
        }
    }
}
