//! ControlPlaneMachineSet admission: the CRD's CEL rules (openshift/api, implemented here so
//! offline `validate` enforces them), the CPMS operator's webhook rules, and ours.
//!
//! * CEL (upstream): `machineNamePrefix` an RFC 1123 subdomain; `replicas` and `selector`
//!   immutable; `state` never back from Active; the template union on `machineType`; each
//!   platform list present exactly when `platform` names it; the three required template labels.
//! * Schema (upstream, checked by [`super::schema`]): replicas 3 or 5, strategy RollingUpdate or
//!   OnDelete, unique failure-domain names (list-map key), required fields, defaults.
//! * CPMS operator webhook (upstream): the selector must match the template labels; with failure
//!   domains, the provider spec must not set what the domain supplies (OCPBUGS-32947).
//! * Ours: vSphere failure-domain names are VSphereDeploymentZone names (RFC 1123 subdomains),
//!   the vsphere list is not empty, non-vSphere platforms warn (this provider ignores them).

use serde_json::Value;

use super::machine::{
    ProviderSpecUse, check_hooks, check_label_selector, check_provider_spec, selector_matches,
};
use super::{Ctx, FieldError, child, index};
use crate::api::ControlPlaneMachineSet;
use crate::api::control_plane_machine_set::{ControlPlaneMachineSetState, cel};

const TEMPLATE_PATH: &str = "spec.template";
const MACHINE_TEMPLATE_PATH: &str = "spec.template.machines_v1beta1_machine_openshift_io";

/// Validation on create: the CRD's CEL rules and the webhook rules.
pub fn validate_create(cpms: &ControlPlaneMachineSet, ctx: &Ctx) -> Vec<FieldError> {
    let mut errors = cel_create(cpms, ctx);
    errors.extend(validate_webhook(cpms, ctx));
    errors
}

/// Validation on update: the CEL rules (transition rules too) and the webhook rules.
pub fn validate_update(
    old: &ControlPlaneMachineSet,
    new: &ControlPlaneMachineSet,
    ctx: &Ctx,
) -> Vec<FieldError> {
    let mut errors = cel_update(old, new, ctx);
    errors.extend(validate_webhook(new, ctx));
    errors
}

/// The CRD's CEL rules that need no old object (what the apiserver checks on create).
pub fn cel_create(cpms: &ControlPlaneMachineSet, ctx: &Ctx) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = &cpms.spec;
    // machineNamePrefix (an empty prefix is reported by the schema's minLength).
    if let Some(prefix) = spec.machine_name_prefix.as_deref()
        && !prefix.is_empty()
        && !ctx.exempt(prefix)
        && !super::is_dns1123_subdomain(prefix)
    {
        errors.push(FieldError::invalid_type(
            "spec.machineNamePrefix",
            "string",
            cel::NAME_PREFIX_MESSAGE,
        ));
    }
    // The template union.
    let tmpl = &spec.template;
    if tmpl.machine_type.is_some() != tmpl.machines_v1beta1_machine_openshift_io.is_some() {
        errors.push(FieldError::invalid_type(
            TEMPLATE_PATH,
            "object",
            cel::TEMPLATE_MESSAGE,
        ));
    }
    let Some(mt) = &tmpl.machines_v1beta1_machine_openshift_io else {
        return errors;
    };
    // Required labels.
    let labels_path = format!("{MACHINE_TEMPLATE_PATH}.metadata.labels");
    let labels = &mt.metadata.labels;
    for (i, (rule_key, want)) in crate::api::control_plane_machine_set::REQUIRED_TEMPLATE_LABELS
        .iter()
        .enumerate()
    {
        let ok = match (labels.get(*rule_key), want) {
            (Some(v), Some(want)) => v == want,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if !ok {
            errors.push(FieldError::invalid_type(
                &labels_path,
                "object",
                cel::LABEL_RULES[i].1,
            ));
        }
    }
    // Platform lists.
    if let Some(fds) = &mt.failure_domains {
        let fds_path = format!("{MACHINE_TEMPLATE_PATH}.failureDomains");
        let present = [
            fds.aws.is_some(),
            fds.azure.is_some(),
            fds.gcp.is_some(),
            fds.openstack.is_some(),
            fds.vsphere.is_some(),
            fds.nutanix.is_some(),
        ];
        for ((field, platform), has) in cel::PLATFORM_LISTS.iter().zip(present) {
            if (fds.platform == *platform) != has {
                errors.push(FieldError::invalid_type(
                    &fds_path,
                    "object",
                    cel::platform_message(field, platform),
                ));
            }
        }
    }
    errors
}

/// The CRD's CEL rules on update: the transition rules (replicas and selector immutable, state
/// never back from Active) and the create rules on the new object.
pub fn cel_update(
    old: &ControlPlaneMachineSet,
    new: &ControlPlaneMachineSet,
    ctx: &Ctx,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let (Some(o), Some(n)) = (old.spec.replicas, new.spec.replicas)
        && o != n
    {
        errors.push(FieldError::invalid_type(
            "spec.replicas",
            "integer",
            cel::REPLICAS_MESSAGE,
        ));
    }
    if old.spec.selector != new.spec.selector {
        errors.push(FieldError::invalid_type(
            "spec.selector",
            "object",
            cel::SELECTOR_MESSAGE,
        ));
    }
    if let (Some(o), Some(n)) = (old.spec.state, new.spec.state)
        && o == ControlPlaneMachineSetState::Active
        && n != o
    {
        errors.push(FieldError::invalid_type(
            "spec.state",
            "string",
            cel::STATE_MESSAGE,
        ));
    }
    errors.extend(cel_create(new, ctx));
    errors
}

/// The webhook rules (CPMS operator's and ours), on create and update alike.
pub fn validate_webhook(cpms: &ControlPlaneMachineSet, ctx: &Ctx) -> Vec<FieldError> {
    let mut errors = Vec::new();
    // CPMS operator webhook: one control plane machine set per cluster, named `cluster`.
    if let Some(name) = cpms.metadata.name.as_deref()
        && name != "cluster"
        && !ctx.exempt(name)
    {
        errors.push(FieldError::invalid_str(
            "metadata.name",
            name,
            "control plane machine set name must be cluster",
        ));
    }
    let spec = &cpms.spec;
    check_label_selector("spec.selector", &spec.selector, &mut errors);
    let Some(mt) = &spec.template.machines_v1beta1_machine_openshift_io else {
        return errors;
    };
    // CPMS operator: the selector must select the template.
    let labels_path = format!("{MACHINE_TEMPLATE_PATH}.metadata.labels");
    if !selector_matches(&spec.selector, &mt.metadata.labels) {
        errors.push(FieldError::invalid(
            &labels_path,
            &serde_json::to_value(&mt.metadata.labels).unwrap_or_default(),
            "selector does not match template labels",
        ));
    }
    let mut with_domains = false;
    if let Some(fds) = &mt.failure_domains
        && let Some(vsphere) = &fds.vsphere
    {
        let list_path = format!("{MACHINE_TEMPLATE_PATH}.failureDomains.vsphere");
        with_domains = !vsphere.is_empty();
        if vsphere.is_empty() && fds.platform == "VSphere" {
            errors.push(FieldError::required(
                &list_path,
                "must list at least one VSphereDeploymentZone",
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, fd) in vsphere.iter().enumerate() {
            let p = index(&list_path, i);
            if !seen.insert(fd.name.as_str()) {
                errors.push(FieldError::duplicate(
                    &p,
                    &serde_json::json!({"name": fd.name}),
                ));
            }
            if !ctx.exempt(&fd.name) && !super::is_dns1123_subdomain(&fd.name) {
                errors.push(FieldError::invalid_str(
                    child(&p, "name"),
                    &fd.name,
                    format!(
                        "must be the name of a VSphereDeploymentZone: {}",
                        super::DNS1123_SUBDOMAIN_MESSAGE
                    ),
                ));
            }
        }
    }
    let (pre_drain, pre_terminate) = match &mt.spec.lifecycle_hooks {
        Some(h) => (
            h.pre_drain.as_deref().unwrap_or(&[]),
            h.pre_terminate.as_deref().unwrap_or(&[]),
        ),
        None => (&[][..], &[][..]),
    };
    let hooks_path = format!("{MACHINE_TEMPLATE_PATH}.spec.lifecycleHooks");
    check_hooks(&format!("{hooks_path}.preDrain"), pre_drain, &mut errors);
    check_hooks(
        &format!("{hooks_path}.preTerminate"),
        pre_terminate,
        &mut errors,
    );
    if let Some(value) = mt
        .spec
        .provider_spec
        .as_ref()
        .and_then(|p| p.value.as_ref())
    {
        let usage = if with_domains {
            ProviderSpecUse::CpmsTemplateWithFailureDomains
        } else {
            ProviderSpecUse::CpmsTemplate
        };
        errors.extend(
            check_provider_spec(
                value,
                &format!("{MACHINE_TEMPLATE_PATH}.spec.providerSpec.value"),
                usage,
                ctx,
            )
            .errors,
        );
    }
    errors
}

/// Warnings: non-vSphere failure domains, and provider-spec fields the zone overrides.
pub fn warnings(cpms: &ControlPlaneMachineSet, ctx: &Ctx) -> Vec<String> {
    let mut out = Vec::new();
    let Some(mt) = &cpms.spec.template.machines_v1beta1_machine_openshift_io else {
        return out;
    };
    let with_domains = !cpms.spec.vsphere_failure_domains().is_empty();
    if let Some(fds) = &mt.failure_domains
        && !matches!(fds.platform.as_str(), "VSphere" | "")
    {
        out.push(format!(
            "{MACHINE_TEMPLATE_PATH}.failureDomains.platform: {:?} failure domains are ignored: this provider places machines in vSphere deployment zones",
            fds.platform
        ));
    }
    match mt.spec.provider_spec.as_ref().and_then(|p| p.value.as_ref()) {
        Some(value) => {
            let usage =
                if with_domains { ProviderSpecUse::CpmsTemplateWithFailureDomains } else { ProviderSpecUse::CpmsTemplate };
            out.extend(check_provider_spec(value, &format!("{MACHINE_TEMPLATE_PATH}.spec.providerSpec.value"), usage, ctx).warnings);
        }
        None => out.push(format!(
            "{MACHINE_TEMPLATE_PATH}.spec.providerSpec.value is not set: the control plane machine set cannot create machines"
        )),
    }
    out
}

/// Every CEL rule in the generated CRDs (this kind's and the Machine status rules), with its
/// message, so a test can check each is implemented.
pub fn implemented_cel_rules() -> Vec<(String, String)> {
    let mut rules = vec![
        (
            cel::NAME_PREFIX_RULE.to_string(),
            cel::NAME_PREFIX_MESSAGE.to_string(),
        ),
        (
            cel::REPLICAS_RULE.to_string(),
            cel::REPLICAS_MESSAGE.to_string(),
        ),
        (
            cel::SELECTOR_RULE.to_string(),
            cel::SELECTOR_MESSAGE.to_string(),
        ),
        (cel::STATE_RULE.to_string(), cel::STATE_MESSAGE.to_string()),
        (
            cel::TEMPLATE_RULE.to_string(),
            cel::TEMPLATE_MESSAGE.to_string(),
        ),
    ];
    rules.extend(
        cel::LABEL_RULES
            .iter()
            .map(|(r, m)| (r.to_string(), m.to_string())),
    );
    rules.extend(
        cel::PLATFORM_LISTS
            .iter()
            .map(|(f, p)| (cel::platform_rule(f, p), cel::platform_message(f, p))),
    );
    // Machine status (implemented by `machine::status_transition_rules`).
    use crate::api::machine::status_cel as m;
    rules.extend(
        [
            (
                m::AUTHORITY_TRANSITION_RULE,
                m::AUTHORITY_TRANSITION_MESSAGE,
            ),
            (
                m::SYNCHRONIZED_GENERATION_RULE,
                m::SYNCHRONIZED_GENERATION_MESSAGE,
            ),
            (m::AUTHORITY_KEPT_RULE, m::AUTHORITY_KEPT_MESSAGE),
            // `super::machine::provider_id_transition_rule`.
            (
                crate::api::provider_id_cel::RULE,
                crate::api::provider_id_cel::MESSAGE,
            ),
        ]
        .map(|(r, msg)| (r.to_string(), msg.to_string())),
    );
    rules
}

/// Collects `(rule, message)` of every `x-kubernetes-validations` entry in a schema.
pub fn collect_cel_rules(schema: &Value, out: &mut Vec<(String, String)>) {
    match schema {
        Value::Object(map) => {
            if let Some(rules) = map
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
            {
                for r in rules {
                    out.push((
                        r.get("rule")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        r.get("message")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    ));
                }
            }
            map.values().for_each(|v| collect_cel_rules(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_cel_rules(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Kind;

    #[test]
    fn every_crd_cel_rule_is_implemented() {
        let mut in_crds = Vec::new();
        for kind in Kind::ALL {
            collect_cel_rules(&kind.schema(), &mut in_crds);
        }
        in_crds.sort();
        in_crds.dedup();
        let mut implemented = implemented_cel_rules();
        implemented.sort();
        implemented.dedup();
        assert_eq!(in_crds, implemented);
    }
}
