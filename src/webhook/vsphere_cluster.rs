//! VSphereCluster admission (rules ours; the schema carries upstream's).
//!
//! * `server`, when set, is a host name, IP address or URL (without one no deployment zone
//!   matches the cluster: a warning, since strategic-merge patches carry no server).
//! * `thumbprint`, when set, is a colon-separated SHA-1 (or SHA-256) fingerprint.
//! * `failureDomainSelector` is a well-formed label selector.
//! * `controlPlaneEndpoint.port` is 0 (unset) or a TCP port.

use super::machine::check_label_selector;
use super::{Ctx, FieldError, check_server, check_thumbprint};
use crate::api::VSphereCluster;

/// Warnings: a failure-domain selector without a server selects nothing.
pub fn warnings(cluster: &VSphereCluster) -> Vec<String> {
    let spec = &cluster.spec;
    if spec.failure_domain_selector.is_some() && spec.server.is_empty() {
        vec!["spec.server is empty: no VSphereDeploymentZone matches this cluster (zones are matched by server)".into()]
    } else {
        Vec::new()
    }
}

/// Validation on create and update.
pub fn validate(cluster: &VSphereCluster, ctx: &Ctx) -> Vec<FieldError> {
    let spec = &cluster.spec;
    let mut errors = Vec::new();
    match spec.server() {
        Some(s) if !s.is_empty() && !ctx.exempt(s) => {
            if let Err(reason) = check_server(s) {
                errors.push(FieldError::invalid_str("spec.server", s, reason));
            }
        }
        _ => {}
    }
    if let Some(t) = spec
        .thumbprint
        .as_deref()
        .filter(|t| !t.is_empty() && !ctx.exempt(t))
        && let Err(reason) = check_thumbprint(t)
    {
        errors.push(FieldError::invalid_str("spec.thumbprint", t, reason));
    }
    if let Some(sel) = &spec.failure_domain_selector {
        check_label_selector("spec.failureDomainSelector", sel, &mut errors);
    }
    if let Some(ep) = &spec.control_plane_endpoint
        && !(0..=65535).contains(&ep.port)
    {
        errors.push(FieldError::invalid(
            "spec.controlPlaneEndpoint.port",
            &ep.port.into(),
            "must be between 0 and 65535",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::VSphereClusterSpec;
    use crate::api::vsphere_cluster::ApiEndpoint;

    fn cluster(server: Option<&str>, selector: bool) -> VSphereCluster {
        VSphereCluster::new(
            "c",
            VSphereClusterSpec {
                server: server.unwrap_or_default().into(),
                failure_domain_selector: selector.then(Default::default),
                ..Default::default()
            },
        )
    }

    #[test]
    fn good_cluster_passes() {
        assert!(validate(&cluster(Some("127.0.0.1"), true), &Ctx::default()).is_empty());
        assert!(validate(&cluster(None, false), &Ctx::default()).is_empty());
    }

    #[test]
    fn server_rules() {
        assert!(validate(&cluster(None, true), &Ctx::default()).is_empty());
        assert_eq!(warnings(&cluster(None, true)).len(), 1);
        assert!(warnings(&cluster(Some("vc"), true)).is_empty());
        let e = validate(&cluster(Some("bad host"), false), &Ctx::default());
        assert_eq!(e[0].path, "spec.server");
    }

    #[test]
    fn thumbprint_and_port() {
        let mut c = cluster(Some("vc"), false);
        c.spec.thumbprint = Some("AB:CD".into());
        c.spec.control_plane_endpoint = Some(ApiEndpoint {
            host: "h".into(),
            port: 70000,
        });
        let paths: Vec<String> = validate(&c, &Ctx::default())
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(paths, ["spec.thumbprint", "spec.controlPlaneEndpoint.port"]);
        c.spec.thumbprint = Some(["0a"; 20].join(":"));
        c.spec.control_plane_endpoint = Some(ApiEndpoint {
            host: "h".into(),
            port: 6443,
        });
        assert!(validate(&c, &Ctx::default()).is_empty());
    }
}
