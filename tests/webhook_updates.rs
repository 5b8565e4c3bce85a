//! Updates through admission: objects that predate a rule can still lose their finalizers
//! (ratcheting on an unchanged spec), and a v1beta2 object relabelled v1beta1 by the apiserver
//! (matchPolicy Equivalent, no conversion) is judged by the version the user sent.
use serde_json::{Value, json};
use vsphere_provider::api::Kind;
use vsphere_provider::webhook::Ctx;
use vsphere_provider::webhook::admission::admit;
use vsphere_provider::webhook::server::{Endpoint, review_response};

/// A zone our rules reject (no server, empty failure domain) but CAPV's webhooks accept.
fn legacy_zone() -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereDeploymentZone",
        "metadata": {"name": "legacy"},
        "spec": {"failureDomain": "", "controlPlane": true, "placementConstraint": {"resourcePool": "rp"}}
    })
}

#[test]
fn an_unchanged_spec_is_not_judged_again() {
    let old = legacy_zone();
    assert!(
        !admit(&old, None, &Ctx::default()).errors.is_empty(),
        "the rules reject it on create"
    );
    let mut finalizing = old.clone();
    finalizing["metadata"]["finalizers"] =
        json!(["vspheredeploymentzone.infrastructure.cluster.x-k8s.io"]);
    let out = admit(&finalizing, Some(&old), &Ctx::default());
    assert!(
        out.errors.is_empty(),
        "adding a finalizer is allowed: {:?}",
        out.errors
    );
    let mut deleting = finalizing.clone();
    deleting["metadata"]["finalizers"] = json!([]);
    deleting["metadata"]["deletionTimestamp"] = json!("2026-11-22T04:00:00Z");
    assert!(
        admit(&deleting, Some(&finalizing), &Ctx::default())
            .errors
            .is_empty()
    );
    // A spec change is judged in full.
    let mut changed = old.clone();
    changed["spec"]["placementConstraint"]["folder"] = json!("vm");
    let errs = admit(&changed, Some(&old), &Ctx::default()).errors;
    assert!(errs.iter().any(|e| e.path == "spec.server"), "{errs:?}");
}

fn review(kind: &str, version: &str, object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta1", "kind": kind},
            "resource": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta1", "resource": "vspherefailuredomains"},
            "requestKind": {"group": "infrastructure.cluster.x-k8s.io", "version": version, "kind": kind},
            "operation": "CREATE",
            "userInfo": {},
            "object": object
        }
    })
}

#[test]
fn v1beta2_objects_relabelled_by_the_apiserver_use_the_v1beta2_schema() {
    // CAPV main's failure domain with a v1beta2-only field (`topology.template`), as the
    // apiserver hands it to the v1beta1 endpoint: apiVersion rewritten, fields untouched.
    let fd = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereFailureDomain",
        "metadata": {"name": "fd"},
        "spec": {
            "region": {"name": "r", "type": "Datacenter", "tagCategory": "k8s-region"},
            "zone": {"name": "z", "type": "ComputeCluster", "tagCategory": "k8s-zone"},
            "topology": {"datacenter": "DC0", "computeCluster": "C0", "template": "/DC0/vm/tmpl"}
        }
    });
    let parse = |v: Value| {
        let review: kube::core::admission::AdmissionReview<kube::core::DynamicObject> =
            serde_json::from_value(v).unwrap();
        review.try_into().unwrap()
    };
    let from_v1beta2 = review_response(
        Kind::VSphereFailureDomain,
        Endpoint::Validate,
        &parse(review("VSphereFailureDomain", "v1beta2", fd.clone())),
    );
    assert!(from_v1beta2.allowed, "{:?}", from_v1beta2.result);
    // Sent as v1beta1 it really has an unknown field.
    let from_v1beta1 = review_response(
        Kind::VSphereFailureDomain,
        Endpoint::Validate,
        &parse(review("VSphereFailureDomain", "v1beta1", fd)),
    );
    assert!(!from_v1beta1.allowed);
    assert!(
        from_v1beta1.result.message.contains("template"),
        "{}",
        from_v1beta1.result.message
    );
}
