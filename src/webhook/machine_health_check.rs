//! MachineHealthCheck admission.
//!
//! Upstream (openshift/api CRD): `maxUnhealthy` defaults to `100%` and matches
//! `^((100|[0-9]{1,2})%|[0-9]+)$`; `nodeStartupTimeout` defaults to `10m` and matches a loose
//! pattern (`^0|…` lets `0abc` and `abc10m` through); `unhealthyConditions` is optional, and when
//! given has MinItems 1. A check without unhealthy conditions is legitimate: it remediates
//! machines that never get a node within `nodeStartupTimeout` (upstream's tested minimal object
//! is `spec: {}`), so it is admitted.
//! Added here: `maxUnhealthy` as an integer must not be negative (the pattern only applies to
//! strings); `nodeStartupTimeout` and each condition `timeout` must parse as Go durations
//! (`"0"` disables the startup check); condition status True, False or Unknown; a remediation
//! template needs apiVersion, kind and name, in the check's own namespace, of a remediation
//! provider's `*RemediationTemplate` kind (the manager reads it and creates the request with its
//! own rights: `plan::health::remediation::template_ref_refused`). Parsing is shared with the health planner
//! ([`crate::api::health_values`]).

use super::machine::check_label_selector;
use super::{Ctx, FieldError, child, index};
use crate::api::MachineHealthCheck;
use crate::api::health_values::{parse_go_duration, parse_max_unhealthy};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Validation on create and update.
pub fn validate(mhc: &MachineHealthCheck, ctx: &Ctx) -> Vec<FieldError> {
    let spec = &mhc.spec;
    let mut errors = Vec::new();
    let exempt = matches!(&spec.max_unhealthy, Some(IntOrString::String(s)) if ctx.exempt(s));
    if !exempt && let Err(reason) = parse_max_unhealthy(spec.max_unhealthy.as_ref()) {
        let value = match &spec.max_unhealthy {
            Some(IntOrString::Int(i)) => (*i).into(),
            Some(IntOrString::String(s)) => s.clone().into(),
            None => serde_json::Value::Null,
        };
        errors.push(FieldError::invalid("spec.maxUnhealthy", &value, reason));
    }
    if let Some(t) = &spec.node_startup_timeout
        && !ctx.exempt(t)
        && let Err(reason) = parse_go_duration(t)
    {
        errors.push(FieldError::invalid_str(
            "spec.nodeStartupTimeout",
            t,
            format!("must be a duration such as 10m or 1h30m, or \"0\" to disable the startup check: {reason}"),
        ));
    }
    if let Some(conds) = &spec.unhealthy_conditions {
        if conds.is_empty() {
            errors.push(FieldError::required(
                "spec.unhealthyConditions",
                "at least one unhealthy condition is required",
            ));
        }
        for (i, c) in conds.iter().enumerate() {
            let p = index("spec.unhealthyConditions", i);
            if c.type_.is_empty() {
                errors.push(FieldError::required(
                    child(&p, "type"),
                    "the node condition type",
                ));
            }
            if !matches!(c.status.as_str(), "True" | "False" | "Unknown") && !ctx.exempt(&c.status)
            {
                errors.push(FieldError::not_supported(
                    child(&p, "status"),
                    &c.status.clone().into(),
                    &["True".into(), "False".into(), "Unknown".into()],
                ));
            }
            if !ctx.exempt(&c.timeout)
                && let Err(reason) = parse_go_duration(&c.timeout).and_then(|_| {
                    if c.timeout == "0" {
                        Err("use a unit, e.g. 0s".to_string())
                    } else {
                        Ok(())
                    }
                })
            {
                errors.push(FieldError::invalid_str(
                    child(&p, "timeout"),
                    &c.timeout,
                    format!("must be a duration such as 300s or 5m: {reason}"),
                ));
            }
        }
    }
    if let Some(sel) = &spec.selector {
        check_label_selector("spec.selector", sel, &mut errors);
    }
    if let Some(t) = &spec.remediation_template {
        for (field, v) in [
            ("apiVersion", &t.api_version),
            ("kind", &t.kind),
            ("name", &t.name),
        ] {
            if v.as_deref().unwrap_or("").is_empty() {
                errors.push(FieldError::required(
                    child("spec.remediationTemplate", field),
                    "a remediation template reference needs it",
                ));
            }
        }
        let ns = mhc.metadata.namespace.as_deref().unwrap_or("default");
        if errors.is_empty()
            && let Some((field, why)) =
                crate::plan::health::remediation::template_ref_refused(t, ns)
        {
            errors.push(FieldError::forbidden(field, why));
        }
    }
    errors
}

/// Warnings: an empty selector (every machine in the namespace), and a check that can never
/// remediate (no unhealthy conditions and the startup check disabled).
pub fn warnings(mhc: &MachineHealthCheck) -> Vec<String> {
    let mut out = Vec::new();
    let empty_selector = mhc.spec.selector.as_ref().is_none_or(|s| {
        s.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && s.match_expressions.as_ref().is_none_or(|m| m.is_empty())
    });
    if empty_selector {
        out.push("spec.selector is empty: every machine in the namespace is checked".into());
    }
    let no_conditions = mhc
        .spec
        .unhealthy_conditions
        .as_ref()
        .is_none_or(Vec::is_empty);
    if no_conditions && mhc.spec.node_startup_timeout.as_deref() == Some("0") {
        out.push(
            "spec.unhealthyConditions is empty and spec.nodeStartupTimeout is \"0\": this check never finds a machine unhealthy".into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MachineHealthCheckSpec;
    use crate::api::health_values::MAX_UNHEALTHY_MESSAGE;
    use crate::api::machine_health_check::UnhealthyCondition;

    fn mhc(
        max: Option<IntOrString>,
        startup: Option<&str>,
        conds: Option<Vec<UnhealthyCondition>>,
    ) -> MachineHealthCheck {
        MachineHealthCheck::new(
            "mhc",
            MachineHealthCheckSpec {
                selector: serde_json::from_value(serde_json::json!({"matchLabels": {"a": "b"}}))
                    .unwrap(),
                unhealthy_conditions: conds,
                max_unhealthy: max,
                node_startup_timeout: startup.map(Into::into),
                remediation_template: None,
            },
        )
    }

    fn cond(status: &str, timeout: &str) -> UnhealthyCondition {
        UnhealthyCondition {
            type_: "Ready".into(),
            status: status.into(),
            timeout: timeout.into(),
        }
    }

    fn shown(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn good_neighbours_pass() {
        for (max, startup) in [
            (IntOrString::String("100%".into()), "10m"),
            (IntOrString::String("40%".into()), "0"),
            (IntOrString::Int(1), "1h30m"),
            (IntOrString::String("0".into()), "300s"),
        ] {
            let m = mhc(
                Some(max),
                Some(startup),
                Some(vec![cond("False", "300s"), cond("Unknown", "0s")]),
            );
            assert!(validate(&m, &Ctx::default()).is_empty());
        }
    }

    #[test]
    fn max_unhealthy_pattern() {
        for bad in ["101%", "1.5", "abc", "-1", "%"] {
            let e = validate(
                &mhc(
                    Some(IntOrString::String(bad.into())),
                    None,
                    Some(vec![cond("False", "300s")]),
                ),
                &Ctx::default(),
            );
            assert_eq!(e.len(), 1, "{bad}");
            assert_eq!(e[0].path, "spec.maxUnhealthy");
        }
        let e = validate(
            &mhc(
                Some(IntOrString::Int(-1)),
                None,
                Some(vec![cond("False", "300s")]),
            ),
            &Ctx::default(),
        );
        assert_eq!(
            shown(&e),
            [format!(
                "spec.maxUnhealthy: Invalid value: -1: {MAX_UNHEALTHY_MESSAGE}"
            )]
        );
    }

    #[test]
    fn node_startup_timeout_is_a_duration() {
        for bad in ["10", "0abc", "abc10m", "-5m", "ten minutes"] {
            let e = validate(
                &mhc(None, Some(bad), Some(vec![cond("False", "300s")])),
                &Ctx::default(),
            );
            assert_eq!(e.len(), 1, "{bad}");
            assert_eq!(e[0].path, "spec.nodeStartupTimeout");
        }
        assert!(
            validate(
                &mhc(None, Some("0"), Some(vec![cond("False", "300s")])),
                &Ctx::default()
            )
            .is_empty()
        );
    }

    #[test]
    fn unhealthy_conditions_optional_but_not_empty() {
        let e = validate(&mhc(None, None, Some(vec![])), &Ctx::default());
        assert_eq!(
            shown(&e),
            [
                "spec.unhealthyConditions: Required value: at least one unhealthy condition is required"
            ]
        );
        // Absent: a startup-only check (upstream admits `spec: {}`), admitted without warning.
        let m = mhc(None, Some("10m"), None);
        assert!(validate(&m, &Ctx::default()).is_empty());
        assert!(warnings(&m).is_empty());
        // ... unless the startup check is disabled too: then it can never act.
        let idle = mhc(None, Some("0"), None);
        assert!(validate(&idle, &Ctx::default()).is_empty());
        assert_eq!(
            warnings(&idle),
            [
                "spec.unhealthyConditions is empty and spec.nodeStartupTimeout is \"0\": this check never finds a machine unhealthy"
            ]
        );
    }

    #[test]
    fn condition_fields() {
        let e = validate(
            &mhc(
                None,
                None,
                Some(vec![cond("Maybe", "5"), cond("True", "0")]),
            ),
            &Ctx::default(),
        );
        let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.unhealthyConditions[0].status",
                "spec.unhealthyConditions[0].timeout",
                "spec.unhealthyConditions[1].timeout"
            ]
        );
    }

    #[test]
    fn remediation_template_is_a_remediation_kind_in_the_checks_namespace() {
        let with = |av: &str, kind: &str, ns: Option<&str>| {
            let mut m = mhc(None, None, None);
            m.metadata.namespace = Some("tenant".into());
            m.spec.remediation_template = Some(k8s_openapi::api::core::v1::ObjectReference {
                api_version: Some(av.into()),
                kind: Some(kind.into()),
                name: Some("t".into()),
                namespace: ns.map(str::to_string),
                ..Default::default()
            });
            validate(&m, &Ctx::default())
                .into_iter()
                .map(|e| e.path)
                .collect::<Vec<_>>()
        };
        let none: Vec<String> = Vec::new();
        let snr = "remediation.medik8s.io/v1alpha1";
        let metal3 = "infrastructure.cluster.x-k8s.io/v1beta1";
        assert_eq!(with(snr, "SelfNodeRemediationTemplate", None), none);
        assert_eq!(
            with(snr, "SelfNodeRemediationTemplate", Some("tenant")),
            none
        );
        assert_eq!(with(metal3, "Metal3RemediationTemplate", None), none);
        assert_eq!(
            with(snr, "SelfNodeRemediationTemplate", Some("kube-system")),
            ["spec.remediationTemplate.namespace"]
        );
        assert_eq!(
            with("v1", "Secret", None),
            ["spec.remediationTemplate.apiVersion"]
        );
        assert_eq!(
            with(
                "machine.openshift.io/v1beta1",
                "MachineRemediationTemplate",
                None
            ),
            ["spec.remediationTemplate.apiVersion"]
        );
        assert_eq!(
            with(metal3, "VSphereMachineTemplate", None),
            ["spec.remediationTemplate.kind"]
        );
        assert_eq!(
            with(metal3, "RemediationTemplate", None),
            ["spec.remediationTemplate.kind"]
        );
    }
}
