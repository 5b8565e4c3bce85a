//! config/manager in a real API server (tests/support/realapi.rs): its namespace enforces Pod
//! Security "restricted" and the manager's Deployment passes that profile as the API server's
//! own PodSecurity admission judges it, and its NetworkPolicy is accepted with each ingress port
//! limited to its own sources. A copy of the Deployment that breaks the profile is warned about,
//! and a bare Pod that breaks it is refused, so the labels are in force.
#[path = "support/realapi.rs"]
mod realapi;

use realapi::{Identity, control_plane};
use serde_json::{Value, json};

const ADMIN: &Identity = &Identity::Admin;

#[test]
fn the_manager_passes_pod_security_restricted_in_its_labelled_namespace() {
    let cp = control_plane();
    let text = cp
        .kubectl(ADMIN, &["kustomize", "config/manager"])
        .ok()
        .stdout;
    let objects: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    // The same objects in a namespace of this test's own (the harness created the real one).
    let ns = format!("{}-psa", cp.namespace("unused"));
    let renamed = |o: &Value| {
        let mut o = o.clone();
        if o["kind"] == "Namespace" {
            o["metadata"]["name"] = json!(ns);
        } else {
            o["metadata"]["namespace"] = json!(ns);
        }
        o
    };
    let of = |kind: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind)
            .map(renamed)
            .unwrap_or_else(|| panic!("config/manager has no {kind}"))
    };
    cp.apply_text(ADMIN, &of("Namespace").to_string(), None)
        .ok();
    cp.apply_text(ADMIN, &of("NetworkPolicy").to_string(), None)
        .ok();
    // Security review F9: the server keeps each port's sources (ipBlocks, valid CIDRs), and no
    // ingress rule is open to every source.
    let stored = cp
        .kubectl(
            ADMIN,
            &[
                "get",
                "networkpolicy",
                "vsphere-provider-controller-manager",
                "-n",
                &ns,
                "-o",
                "json",
            ],
        )
        .ok()
        .json();
    let sources: Vec<(Value, Value)> = stored["spec"]["ingress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["ports"][0]["port"].clone(), r["from"].clone()))
        .collect();
    assert_eq!(
        sources,
        [
            (
                json!(9443),
                json!([{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}])
            ),
            (
                json!(8081),
                json!([{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}])
            ),
        ],
        "{stored}"
    );

    let dry_run = |o: &Value| {
        cp.kubectl_stdin(
            ADMIN,
            &["apply", "--dry-run=server", "-f", "-"],
            Some(&o.to_string()),
        )
    };
    let deployment = of("Deployment");
    let out = dry_run(&deployment).ok();
    assert!(
        !out.stderr.contains("PodSecurity"),
        "the manager's Deployment breaks Pod Security restricted:\n{}",
        out.stderr
    );

    // The labels are in force: a Deployment without the container securityContext is warned
    // about, and such a Pod is refused.
    let mut loose = deployment.clone();
    loose["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("securityContext");
    let out = dry_run(&loose).ok();
    assert!(
        out.stderr
            .contains("would violate PodSecurity \"restricted"),
        "{}",
        out.stderr
    );
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "loose", "namespace": ns},
        "spec": loose["spec"]["template"]["spec"].clone(),
    });
    let err = dry_run(&pod).err();
    assert!(err.contains("violates PodSecurity \"restricted"), "{err}");
}
