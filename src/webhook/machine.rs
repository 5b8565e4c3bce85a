//! Machine admission, and the label-selector and lifecycle-hook checks shared with
//! ControlPlaneMachineSet templates.
//!
//! Upstream (machine-api-operator's machine webhook): lifecycle hook names are qualified names
//! of 3–256 characters, unique per list (CRD), and once the machine is being deleted hooks may be
//! removed but not added or changed. The provider spec is defaulted and checked by
//! [`super::provider_spec`].

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

pub use super::provider_spec::{ProviderSpecReport, ProviderSpecUse, check as check_provider_spec};
use super::{Ctx, FieldError, child, index, is_label_value, is_qualified_name, key};
use crate::api::Machine;
use crate::api::machine::{LIFECYCLE_HOOK_NAME_PATTERN, LifecycleHook};

/// The mutating webhook: the provider spec's default secrets. Returns the defaulted paths.
pub fn default(obj: &mut Value) -> Vec<String> {
    match obj.pointer_mut("/spec/providerSpec/value") {
        Some(value) => super::provider_spec::default(value, "spec.providerSpec.value"),
        None => Vec::new(),
    }
}

/// How a Machine's provider spec is judged: complete, unless the Machine is placed in a
/// deployment zone (`vsphere-provider.io/deployment-zone`), which then fills in the workspace
/// and the networks it leaves out.
fn machine_use(m: &Machine) -> ProviderSpecUse {
    if crate::plan::placement::named_zone(m).is_some() {
        ProviderSpecUse::MachineInZone
    } else {
        ProviderSpecUse::Machine
    }
}

/// Validation on create.
pub fn validate_create(m: &Machine, ctx: &Ctx) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let (pre_drain, pre_terminate) = m.hooks();
    check_hooks("spec.lifecycleHooks.preDrain", pre_drain, &mut errors);
    check_hooks(
        "spec.lifecycleHooks.preTerminate",
        pre_terminate,
        &mut errors,
    );
    if let Some(value) = m.spec.provider_spec.as_ref().and_then(|p| p.value.as_ref()) {
        errors.extend(
            check_provider_spec(value, "spec.providerSpec.value", machine_use(m), ctx).errors,
        );
    }
    errors
}

/// Validation on update: the create rules, and no hook may be added or changed once deletion has
/// started (removing hooks is allowed).
pub fn validate_update(old: &Machine, new: &Machine, ctx: &Ctx) -> Vec<FieldError> {
    let mut errors = validate_create(new, ctx);
    let deleting =
        old.metadata.deletion_timestamp.is_some() || new.metadata.deletion_timestamp.is_some();
    if deleting {
        let (old_drain, old_term) = old.hooks();
        let (new_drain, new_term) = new.hooks();
        let changed_drain = changed_hooks(old_drain, new_drain);
        if !changed_drain.is_empty() {
            errors.push(FieldError::forbidden(
                "spec.lifecycleHooks.preDrain",
                format!(
                    "pre-drain hooks are immutable when machine is marked for deletion: the following hooks are new or changed: {}",
                    render_hooks(&changed_drain)
                ),
            ));
        }
        let changed_term = changed_hooks(old_term, new_term);
        if !changed_term.is_empty() {
            errors.push(FieldError::forbidden(
                "spec.lifecycleHooks.preTerminate",
                format!(
                    "pre-terminate hooks are immutable when machine is marked for deletion: the following hooks are new or changed: {}",
                    render_hooks(&changed_term)
                ),
            ));
        }
    }
    errors
}

/// Warnings for a Machine (e.g. a provider spec this provider cannot act on).
pub fn warnings(m: &Machine, ctx: &Ctx) -> Vec<String> {
    match m.spec.provider_spec.as_ref().and_then(|p| p.value.as_ref()) {
        Some(value) => {
            check_provider_spec(value, "spec.providerSpec.value", machine_use(m), ctx).warnings
        }
        None => vec![
            "spec.providerSpec.value is not set: this provider cannot create the machine".into(),
        ],
    }
}

/// The CRD's CEL rules on the `MachineAPIMigration` status fields (transition rules: update
/// only), on raw objects: `authoritativeAPI` changes only through `Migrating` and is never
/// removed; `synchronizedGeneration` never decreases, except when authority moves on from
/// `Migrating`.
pub fn status_transition_rules(old: &Value, new: &Value) -> Vec<FieldError> {
    use crate::api::machine::status_cel;
    let mut errors = Vec::new();
    let (Some(old), Some(new)) = (
        old.get("status").and_then(Value::as_object),
        new.get("status").and_then(Value::as_object),
    ) else {
        return errors;
    };
    let authority = |s: &serde_json::Map<String, Value>| {
        s.get("authoritativeAPI")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let (old_api, new_api) = (authority(old), authority(new));
    if let (Some(o), Some(n)) = (&old_api, &new_api)
        && !(n == "Migrating" || n == o || o == "Migrating")
    {
        errors.push(FieldError::invalid_type(
            "status.authoritativeAPI",
            "string",
            status_cel::AUTHORITY_TRANSITION_MESSAGE,
        ));
    }
    let generation = |s: &serde_json::Map<String, Value>| {
        s.get("synchronizedGeneration").and_then(Value::as_i64)
    };
    if let Some(o) = generation(old) {
        let kept = generation(new).is_some_and(|n| n >= o);
        let leaving_migration =
            old_api.as_deref() == Some("Migrating") && new_api.as_deref() != Some("Migrating");
        if !kept && !leaving_migration {
            errors.push(FieldError::invalid_type(
                "status.synchronizedGeneration",
                "object",
                status_cel::SYNCHRONIZED_GENERATION_MESSAGE,
            ));
        }
    }
    if old_api.is_some() && new_api.is_none() {
        errors.push(FieldError::invalid_type(
            "status",
            "object",
            status_cel::AUTHORITY_KEPT_MESSAGE,
        ));
    }
    errors
}

/// Where a kind's schema carries the `spec.providerID` rule ([`crate::api::provider_id_cel`]):
/// the machine spec itself, and the machine specs templates embed (the same Rust type).
pub fn provider_id_rule_paths(kind: crate::api::Kind) -> &'static [&'static str] {
    use crate::api::Kind;
    match kind {
        Kind::Machine | Kind::VSphereMachine => &["spec"],
        Kind::VSphereMachineTemplate => &["spec.template.spec"],
        Kind::ControlPlaneMachineSet => {
            &["spec.template.machines_v1beta1_machine_openshift_io.spec"]
        }
        _ => &[],
    }
}

/// The CRD's rule on a machine's `providerID` (a transition rule: update only), on raw
/// objects, wherever `kind` carries it ([`provider_id_rule_paths`]): once set, it never
/// changes or goes away.
pub fn provider_id_transition_rule(
    kind: crate::api::Kind,
    old: &Value,
    new: &Value,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for path in provider_id_rule_paths(kind) {
        let pointer = format!("/{}", path.replace('.', "/"));
        let pid = |v: &Value| {
            v.pointer(&pointer).map(|spec| {
                spec.get("providerID")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
        };
        // A transition rule runs only where both objects have the spec.
        let (Some(old_pid), Some(new_pid)) = (pid(old), pid(new)) else {
            continue;
        };
        if let Some(o) = old_pid
            && !o.is_empty()
            && new_pid.as_deref() != Some(o.as_str())
        {
            // The API server names the rule's field path and the type of where the rule sits.
            errors.push(FieldError::invalid_type(
                format!("{path}.providerID"),
                "object",
                crate::api::provider_id_cel::MESSAGE,
            ));
        }
    }
    errors
}

/// Hooks in `new` that are not in `old` with the same owner.
pub fn changed_hooks(old: &[LifecycleHook], new: &[LifecycleHook]) -> Vec<LifecycleHook> {
    new.iter().filter(|h| !old.contains(h)).cloned().collect()
}

fn render_hooks(hooks: &[LifecycleHook]) -> String {
    let inner: Vec<String> = hooks
        .iter()
        .map(|h| format!("{{Name:{} Owner:{}}}", h.name, h.owner))
        .collect();
    format!("[{}]", inner.join(" "))
}

/// Hook names: the CRD's pattern and length, unique within the list.
pub fn check_hooks(path: &str, hooks: &[LifecycleHook], errors: &mut Vec<FieldError>) {
    let re = regex::Regex::new(LIFECYCLE_HOOK_NAME_PATTERN).expect("hook name pattern");
    let mut seen = BTreeSet::new();
    for (i, hook) in hooks.iter().enumerate() {
        let p = index(path, i);
        let name_path = child(&p, "name");
        let len = hook.name.chars().count();
        if len < 3 {
            errors.push(FieldError::invalid_str(
                &name_path,
                &hook.name,
                format!("{name_path} in body should be at least 3 chars long"),
            ));
        } else if len > 256 {
            errors.push(FieldError::too_long(&name_path, 256));
        } else if !re.is_match(&hook.name) {
            errors.push(FieldError::invalid_str(
                &name_path,
                &hook.name,
                format!("{name_path} in body should match '{LIFECYCLE_HOOK_NAME_PATTERN}'"),
            ));
        }
        let owner_path = child(&p, "owner");
        let owner_len = hook.owner.chars().count();
        if owner_len < 3 {
            errors.push(FieldError::invalid_str(
                &owner_path,
                &hook.owner,
                format!("{owner_path} in body should be at least 3 chars long"),
            ));
        } else if owner_len > 512 {
            errors.push(FieldError::too_long(&owner_path, 512));
        }
        if !seen.insert(hook.name.as_str()) {
            errors.push(FieldError::duplicate(
                p,
                &serde_json::json!({"name": hook.name}),
            ));
        }
    }
}

/// Checks a label selector's syntax: operators, values, keys.
pub fn check_label_selector(path: &str, sel: &LabelSelector, errors: &mut Vec<FieldError>) {
    for (k, v) in sel.match_labels.iter().flatten() {
        if !is_qualified_name(k) {
            errors.push(FieldError::invalid_str(
                child(path, "matchLabels"),
                k,
                "invalid label key",
            ));
        }
        if !is_label_value(v) {
            errors.push(FieldError::invalid_str(
                key(&child(path, "matchLabels"), k),
                v,
                "invalid label value",
            ));
        }
    }
    for (i, req) in sel.match_expressions.iter().flatten().enumerate() {
        let p = index(&child(path, "matchExpressions"), i);
        if !is_qualified_name(&req.key) {
            errors.push(FieldError::invalid_str(
                child(&p, "key"),
                &req.key,
                "invalid label key",
            ));
        }
        let n = req.values.as_ref().map_or(0, Vec::len);
        match req.operator.as_str() {
            "In" | "NotIn" if n == 0 => errors.push(FieldError::required(
                child(&p, "values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if n > 0 => errors.push(FieldError::forbidden(
                child(&p, "values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => errors.push(FieldError::not_supported(
                child(&p, "operator"),
                &op.into(),
                &[
                    "In".into(),
                    "NotIn".into(),
                    "Exists".into(),
                    "DoesNotExist".into(),
                ],
            )),
        }
    }
}

pub use crate::plan::selector::matches as selector_matches;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::machine::{LifecycleHooks, MachineSpec, ProviderSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    fn hook(name: &str, owner: &str) -> LifecycleHook {
        LifecycleHook {
            name: name.into(),
            owner: owner.into(),
        }
    }

    fn machine(pre_drain: Vec<LifecycleHook>, pre_terminate: Vec<LifecycleHook>) -> Machine {
        Machine::new(
            "m",
            MachineSpec {
                lifecycle_hooks: Some(LifecycleHooks {
                    pre_drain: Some(pre_drain),
                    pre_terminate: Some(pre_terminate),
                }),
                provider_spec: Some(ProviderSpec {
                    value: Some(provider_spec()),
                }),
                ..Default::default()
            },
        )
    }

    fn provider_spec() -> Value {
        json!({
            "apiVersion": "machine.openshift.io/v1beta1", "kind": "VSphereMachineProviderSpec",
            "template": "rhcos", "workspace": {"server": "127.0.0.1", "datacenter": "DC0"},
            "network": {"devices": [{"networkName": "VM Network"}]}, "numCPUs": 2, "memoryMiB": 4096, "diskGiB": 120,
            "userDataSecret": {"name": "worker-user-data"}, "credentialsSecret": {"name": "vsphere-cloud-credentials"}
        })
    }

    fn shown(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    fn deleting(mut m: Machine) -> Machine {
        m.metadata.deletion_timestamp = Some(Time("2025-01-01T00:00:00Z".parse().unwrap()));
        m
    }

    #[test]
    fn good_hooks_pass() {
        let m = machine(
            vec![hook("EtcdQuorumOperator", "clusteroperator/etcd")],
            vec![hook("example.com/Backup", "me-myself")],
        );
        assert!(validate_create(&m, &Ctx::default()).is_empty());
        assert!(warnings(&m, &Ctx::default()).is_empty());
    }

    #[test]
    fn hook_names_valid() {
        let m = machine(
            vec![
                hook("ab", "owner"),
                hook("-bad-", "owner"),
                hook("Fine", "o"),
            ],
            vec![],
        );
        assert_eq!(
            shown(&validate_create(&m, &Ctx::default())),
            [
                "spec.lifecycleHooks.preDrain[0].name: Invalid value: \"ab\": spec.lifecycleHooks.preDrain[0].name in body should be at least 3 chars long",
                format!("spec.lifecycleHooks.preDrain[1].name: Invalid value: \"-bad-\": spec.lifecycleHooks.preDrain[1].name in body should match '{LIFECYCLE_HOOK_NAME_PATTERN}'").as_str(),
                "spec.lifecycleHooks.preDrain[2].owner: Invalid value: \"o\": spec.lifecycleHooks.preDrain[2].owner in body should be at least 3 chars long",
            ]
        );
    }

    #[test]
    fn hook_names_unique() {
        let m = machine(
            vec![],
            vec![hook("Backup", "a-owner"), hook("Backup", "b-owner")],
        );
        assert_eq!(
            shown(&validate_create(&m, &Ctx::default())),
            ["spec.lifecycleHooks.preTerminate[1]: Duplicate value: {\"name\":\"Backup\"}"]
        );
    }

    #[test]
    fn hooks_frozen_once_deleting_except_removal() {
        let old = deleting(machine(
            vec![hook("EtcdQuorumOperator", "clusteroperator/etcd")],
            vec![hook("Backup", "me-myself")],
        ));
        // Removing is allowed.
        let removed = deleting(machine(vec![], vec![hook("Backup", "me-myself")]));
        assert!(validate_update(&old, &removed, &Ctx::default()).is_empty());
        // Adding is not.
        let added = deleting(machine(
            vec![
                hook("EtcdQuorumOperator", "clusteroperator/etcd"),
                hook("NewHook", "someone"),
            ],
            vec![hook("Backup", "me-myself")],
        ));
        assert_eq!(
            shown(&validate_update(&old, &added, &Ctx::default())),
            [
                "spec.lifecycleHooks.preDrain: Forbidden: pre-drain hooks are immutable when machine is marked for deletion: the following hooks are new or changed: [{Name:NewHook Owner:someone}]"
            ]
        );
        // Changing an owner is not.
        let changed = deleting(machine(
            vec![hook("EtcdQuorumOperator", "clusteroperator/etcd")],
            vec![hook("Backup", "someone-else")],
        ));
        let e = validate_update(&old, &changed, &Ctx::default());
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].path, "spec.lifecycleHooks.preTerminate");
        // Not deleting: anything goes.
        let live_old = machine(vec![], vec![]);
        assert!(
            validate_update(
                &live_old,
                &machine(vec![hook("NewHook", "someone")], vec![]),
                &Ctx::default()
            )
            .is_empty()
        );
    }

    #[test]
    fn provider_spec_rules() {
        let mut m = machine(vec![], vec![]);
        let v = m
            .spec
            .provider_spec
            .as_mut()
            .unwrap()
            .value
            .as_mut()
            .unwrap();
        v["template"] = json!("");
        v["workspace"] = json!({"datacenter": "DC0"});
        v["network"] = json!({"devices": [{}]});
        v["cloneMode"] = json!("quickClone");
        v["futureField"] = json!(1);
        assert_eq!(
            shown(&validate_create(&m, &Ctx::default())),
            [
                "spec.providerSpec.value.template: Required value: template must be provided",
                "spec.providerSpec.value.workspace.server: Required value: server must be provided",
                "spec.providerSpec.value.network.devices[0].networkName: Required value: networkName must be provided",
            ]
        );
        assert_eq!(
            warnings(&m, &Ctx::default()),
            [
                "spec.providerSpec.value.futureField: unknown field (ignored)",
                "spec.providerSpec.value.cloneMode: Unsupported value: \"quickClone\": supported values: \"fullClone\", \"linkedClone\"",
            ]
        );
        // Type errors would break decoding: rejected.
        let v = m
            .spec
            .provider_spec
            .as_mut()
            .unwrap()
            .value
            .as_mut()
            .unwrap();
        v["numCPUs"] = json!("four");
        let e = validate_create(&m, &Ctx::default());
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].path, "spec.providerSpec.value.numCPUs");
    }

    #[test]
    fn provider_spec_in_cpms_with_failure_domains() {
        let mut v = provider_spec();
        let r = check_provider_spec(
            &v,
            "p",
            ProviderSpecUse::CpmsTemplateWithFailureDomains,
            &Ctx::default(),
        );
        assert_eq!(
            shown(&r.errors),
            [
                "p.workspace.server: Forbidden: must not be set when failure domains are used: the failure domain supplies it",
                "p.workspace.datacenter: Forbidden: must not be set when failure domains are used: the failure domain supplies it",
                "p.network.devices[0].networkName: Forbidden: must not be set when failure domains are used: the failure domain supplies it",
            ]
        );
        v["workspace"] = json!({});
        v["network"] = json!({"devices": [{"nameservers": ["8.8.8.8"]}]});
        let r = check_provider_spec(
            &v,
            "p",
            ProviderSpecUse::CpmsTemplateWithFailureDomains,
            &Ctx::default(),
        );
        assert!(r.errors.is_empty(), "{:?}", r.errors);
    }

    /// A Machine in a deployment zone, as a control plane machine set creates it: the zone label
    /// and the failure domain's workspace and networks injected. Admitted (the machine's own
    /// values win over the zone's); a bare one, which the zone completes, is admitted too; the
    /// rules every spec meets still apply.
    #[test]
    fn machine_in_a_zone_may_carry_what_its_set_injected() {
        let mut m = machine(vec![], vec![]);
        m.metadata.labels = Some(
            [(
                crate::plan::placement::DEPLOYMENT_ZONE_LABEL.to_string(),
                "zone-a".to_string(),
            )]
            .into(),
        );
        let value = |m: &mut Machine| {
            m.spec
                .provider_spec
                .as_mut()
                .unwrap()
                .value
                .as_mut()
                .unwrap()
                .clone()
        };
        let mut injected = value(&mut m);
        injected["workspace"] = json!({"server": "https://127.0.0.1:4443/sdk", "datacenter": "/DC0",
            "datastore": "/DC0/datastore/LocalDS_0", "folder": "/DC0/vm",
            "resourcePool": "/DC0/host/DC0_C0/Resources/DC0_C0_RP1"});
        m.spec.provider_spec.as_mut().unwrap().value = Some(injected.clone());
        assert_eq!(
            shown(&validate_create(&m, &Ctx::default())),
            Vec::<String>::new()
        );
        let mut bare = injected.clone();
        bare["workspace"] = json!({});
        bare["network"] = json!({"devices": []});
        m.spec.provider_spec.as_mut().unwrap().value = Some(bare);
        assert_eq!(
            shown(&validate_create(&m, &Ctx::default())),
            Vec::<String>::new()
        );
        injected["numCPUs"] = json!("four");
        m.spec.provider_spec.as_mut().unwrap().value = Some(injected);
        let e = validate_create(&m, &Ctx::default());
        assert_eq!(e.len(), 1, "{:?}", shown(&e));
        assert_eq!(e[0].path, "spec.providerSpec.value.numCPUs");
    }

    #[test]
    fn selectors() {
        let sel: LabelSelector = serde_json::from_value(json!({"matchLabels": {"a": "b"},
            "matchExpressions": [{"key": "c", "operator": "In", "values": ["d"]}]}))
        .unwrap();
        let labels = [
            ("a".to_string(), "b".to_string()),
            ("c".to_string(), "d".to_string()),
        ]
        .into();
        assert!(selector_matches(&sel, &labels));
        assert!(!selector_matches(
            &sel,
            &[("a".to_string(), "b".to_string())].into()
        ));
        assert!(selector_matches(
            &LabelSelector::default(),
            &Default::default()
        ));
        let bad: LabelSelector =
            serde_json::from_value(json!({"matchExpressions": [{"key": "c", "operator": "In"}, {"key": "d", "operator": "Maybe"}]})).unwrap();
        let mut e = Vec::new();
        check_label_selector("spec.selector", &bad, &mut e);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].path, "spec.selector.matchExpressions[0].values");
    }
}
