//! VSphereDeploymentZone admission.
//!
//! Upstream (CAPV v1.15.0) only defaults `spec.controlPlane` to true and validates nothing, so a
//! zone with an empty or changing `failureDomain` is accepted (capv-failure-domains.md §2).
//! Added here: `failureDomain` required, non-empty and immutable; `placementConstraint` with at
//! least one of `resourcePool` / `folder` (as CAPV v1beta2's MinProperties=1), none empty;
//! `server` required and a valid host name, IP address or URL.

use serde_json::Value;

use super::{Ctx, FieldError, check_server};
use crate::api::VSphereDeploymentZone;

/// The mutating webhook: `spec.controlPlane` defaults to true.
pub fn default(obj: &mut Value) -> Vec<String> {
    match obj.pointer_mut("/spec").and_then(Value::as_object_mut) {
        Some(spec) if spec.get("controlPlane").is_none_or(Value::is_null) => {
            spec.insert("controlPlane".into(), Value::Bool(true));
            vec!["spec.controlPlane".into()]
        }
        _ => Vec::new(),
    }
}

/// Validation on create.
pub fn validate_create(zone: &VSphereDeploymentZone, ctx: &Ctx) -> Vec<FieldError> {
    let spec = &zone.spec;
    let mut errors = Vec::new();
    match spec.server.as_deref() {
        None | Some("") => errors.push(FieldError::required(
            "spec.server",
            "the vCenter server of this zone",
        )),
        Some(s) if ctx.exempt(s) => {}
        Some(s) => {
            if let Err(reason) = check_server(s) {
                errors.push(FieldError::invalid_str("spec.server", s, reason));
            }
        }
    }
    if let Some(t) = spec
        .thumbprint
        .as_deref()
        .filter(|t| !t.is_empty() && !ctx.exempt(t))
        && let Err(reason) = super::check_thumbprint(t)
    {
        errors.push(FieldError::invalid_str("spec.thumbprint", t, reason));
    }
    match spec.failure_domain_name() {
        None | Some("") => errors.push(FieldError::required(
            "spec.failureDomain",
            "must name a VSphereFailureDomain",
        )),
        Some(fd) if ctx.exempt(fd) => {}
        Some(fd) => {
            if !super::is_dns1123_subdomain(fd) {
                errors.push(FieldError::invalid_str(
                    "spec.failureDomain",
                    fd,
                    format!(
                        "must be the name of a VSphereFailureDomain: {}",
                        super::DNS1123_SUBDOMAIN_MESSAGE
                    ),
                ));
            }
        }
    }
    errors
}

/// The placement constraint as the request wrote it: at least one of `resourcePool` and
/// `folder`, neither empty. Judged on the request's JSON, not the typed zone: an empty string
/// is valid at v1beta1 but has no place at v1beta2 (minLength 1), so converting a v1beta1
/// request to the zone's type drops it, and the user would be told the wrong thing.
pub fn validate_placement(request: &Value) -> Vec<FieldError> {
    let pc = request.pointer("/spec/placementConstraint");
    let field = |name: &str| pc.and_then(|pc| pc.get(name)).filter(|v| !v.is_null());
    let mut errors = Vec::new();
    if field("resourcePool").is_none() && field("folder").is_none() {
        errors.push(FieldError::required(
            "spec.placementConstraint",
            "must set resourcePool, folder or both",
        ));
    }
    for name in ["resourcePool", "folder"] {
        if field(name).and_then(Value::as_str) == Some("") {
            errors.push(FieldError::required(
                format!("spec.placementConstraint.{name}"),
                "cannot be empty if set",
            ));
        }
    }
    errors
}

/// Validation on update: the create rules, and `failureDomain` is immutable.
pub fn validate_update(
    old: &VSphereDeploymentZone,
    new: &VSphereDeploymentZone,
    ctx: &Ctx,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if old.spec.failure_domain != new.spec.failure_domain {
        errors.push(FieldError::invalid(
            "spec.failureDomain",
            &serde_json::to_value(&new.spec.failure_domain).unwrap_or_default(),
            "field is immutable",
        ));
    }
    errors.extend(validate_create(new, ctx));
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::VSphereDeploymentZoneSpec;
    use crate::api::deployment_zone::PlacementConstraint;

    fn zone(
        server: Option<&str>,
        fd: Option<&str>,
        rp: Option<&str>,
        folder: Option<&str>,
    ) -> VSphereDeploymentZone {
        VSphereDeploymentZone::new(
            "zone-a",
            VSphereDeploymentZoneSpec {
                thumbprint: None,
                identity_ref: None,
                server: server.map(Into::into),
                failure_domain: fd.map(Into::into).unwrap_or_default(),
                control_plane: None,
                placement_constraint: Some(PlacementConstraint {
                    resource_pool: rp.map(Into::into),
                    folder: folder.map(Into::into),
                }),
            },
        )
    }

    fn shown(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    fn good() -> VSphereDeploymentZone {
        zone(
            Some("127.0.0.1"),
            Some("zone-a"),
            Some("DC0_C0_RP1"),
            Some("vm"),
        )
    }

    #[test]
    fn good_zone_passes() {
        assert!(validate_create(&good(), &Ctx::default()).is_empty());
        assert!(
            validate_create(
                &zone(
                    Some("https://vc.example.com/sdk"),
                    Some("a"),
                    None,
                    Some("vm")
                ),
                &Ctx::default()
            )
            .is_empty()
        );
    }

    #[test]
    fn defaults_control_plane_true() {
        let mut v = serde_json::json!({"spec": {"failureDomain": "a"}});
        assert_eq!(default(&mut v), ["spec.controlPlane"]);
        assert_eq!(v["spec"]["controlPlane"], true);
        let mut v = serde_json::json!({"spec": {"controlPlane": false}});
        assert!(default(&mut v).is_empty());
        assert_eq!(v["spec"]["controlPlane"], false);
    }

    #[test]
    fn failure_domain_required_and_non_empty() {
        let e = validate_create(&zone(Some("vc"), None, Some("rp"), None), &Ctx::default());
        assert_eq!(
            shown(&e),
            ["spec.failureDomain: Required value: must name a VSphereFailureDomain"]
        );
        let e = validate_create(
            &zone(Some("vc"), Some(""), Some("rp"), None),
            &Ctx::default(),
        );
        assert_eq!(e[0].path, "spec.failureDomain");
        let e = validate_create(
            &zone(Some("vc"), Some("Not_A_Name"), Some("rp"), None),
            &Ctx::default(),
        );
        assert_eq!(e[0].path, "spec.failureDomain");
    }

    #[test]
    fn placement_constraint_required_and_non_empty() {
        let request = |pc: Value| serde_json::json!({"spec": {"placementConstraint": pc}});
        assert_eq!(
            shown(&validate_placement(&serde_json::json!({"spec": {}}))),
            ["spec.placementConstraint: Required value: must set resourcePool, folder or both"]
        );
        assert_eq!(
            shown(&validate_placement(&request(serde_json::json!({})))),
            ["spec.placementConstraint: Required value: must set resourcePool, folder or both"]
        );
        assert_eq!(
            shown(&validate_placement(&request(
                serde_json::json!({"resourcePool": "", "folder": "vm"})
            ))),
            ["spec.placementConstraint.resourcePool: Required value: cannot be empty if set"]
        );
        assert_eq!(
            shown(&validate_placement(&request(
                serde_json::json!({"resourcePool": "rp", "folder": ""})
            ))),
            ["spec.placementConstraint.folder: Required value: cannot be empty if set"]
        );
        assert!(validate_placement(&request(serde_json::json!({"folder": "vm"}))).is_empty());
    }

    #[test]
    fn server_must_be_host_or_url() {
        let e = validate_create(&zone(None, Some("a"), Some("rp"), None), &Ctx::default());
        assert_eq!(e[0].path, "spec.server");
        let e = validate_create(
            &zone(Some("not a host"), Some("a"), Some("rp"), None),
            &Ctx::default(),
        );
        assert_eq!(e.len(), 1);
        assert!(
            e[0].to_string()
                .starts_with("spec.server: Invalid value: \"not a host\""),
            "{}",
            e[0]
        );
        let e = validate_create(
            &zone(Some("https://u:p@vc"), Some("a"), Some("rp"), None),
            &Ctx::default(),
        );
        assert!(e[0].message.contains("credentials"));
        // Placeholders only pass when allowed.
        let templ = zone(Some("${VSPHERE_SERVER}"), Some("a"), Some("${RP}"), None);
        assert!(
            validate_create(
                &templ,
                &Ctx {
                    allow_placeholders: true,
                    ..Ctx::default()
                }
            )
            .is_empty()
        );
        assert_eq!(validate_create(&templ, &Ctx::default()).len(), 1);
    }

    #[test]
    fn failure_domain_immutable() {
        let old = good();
        let mut new = good();
        new.spec.placement_constraint = Some(PlacementConstraint {
            folder: Some("other".into()),
            ..Default::default()
        });
        new.spec.server = Some("vc2.example.com".into());
        assert!(validate_update(&old, &new, &Ctx::default()).is_empty());
        new.spec.failure_domain = "zone-b".into();
        assert_eq!(
            shown(&validate_update(&old, &new, &Ctx::default())),
            ["spec.failureDomain: Invalid value: \"zone-b\": field is immutable"]
        );
    }
}
