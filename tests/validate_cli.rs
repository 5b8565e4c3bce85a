//! `vsphere-provider validate` as a CI pipeline runs it: lines, exit codes, file:line.

use std::path::Path;
use std::process::Command;

fn validate(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vsphere-provider"))
        .arg("validate")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run vsphere-provider");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

const ZONE: &str = "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata:
  name: zone-a
spec:
  server: 127.0.0.1
  failureDomain: zone-a
  placementConstraint:
    resourcePool: DC0_C0_RP1
";

#[test]
fn ok_objects_exit_zero_with_defaults_listed() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "zone.yaml", ZONE);
    let (code, out, _) = validate(&["-f", &f]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        format!("{f}:1: VSphereDeploymentZone zone-a: ok (defaulted spec.controlPlane)\n")
    );
}

#[test]
fn rejected_objects_exit_one_with_field_paths() {
    let dir = tempfile::tempdir().unwrap();
    let bad = ZONE
        .replace("  failureDomain: zone-a\n", "")
        .replace("DC0_C0_RP1", "\"\"");
    let f = write(dir.path(), "zone.yaml", &format!("{ZONE}---\n{bad}"));
    let (code, out, _) = validate(&["-f", &f]);
    assert_eq!(code, 1, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].ends_with(": ok (defaulted spec.controlPlane)"));
    assert!(
        lines[1].starts_with(&format!("{f}:11: VSphereDeploymentZone zone-a: rejected: ")),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].contains("spec.failureDomain: Required value"),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].contains("spec.placementConstraint.resourcePool: Required value"),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].contains("metadata.name: Duplicate value"),
        "{}",
        lines[1]
    );
}

/// Kinds other controllers serve are listed as skipped and do not fail the run (before, a
/// ConfigMap made the exit code 1, so no cluster template could pass).
#[test]
fn kinds_served_elsewhere_are_skipped_not_failed() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
    );
    let (code, out, err) = validate(&["-f", &f]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!("{f}:1: v1/ConfigMap cm: skipped: not served by vsphere-provider\n")
    );
    assert!(
        err.contains("1 object(s): 0 ok, 0 rejected, 1 skipped (not served by vsphere-provider)"),
        "{err}"
    );
    let (code, out, _) = validate(&["-q", "-f", &f]);
    assert_eq!(
        (code, out.as_str()),
        (0, ""),
        "-q prints only rejected objects"
    );
}

/// A whole clusterctl template gates CI: our kinds are judged, the KubeadmControlPlane,
/// ConfigMaps and ClusterResourceSet are skipped, and it exits 0.
#[test]
fn a_cluster_template_passes_with_the_kinds_we_do_not_serve_skipped() {
    let (code, out, err) = validate(&["-f", "tests/fixtures/capv/cluster-template.yaml"]);
    assert_eq!(code, 0, "{out}{err}");
    for kind in ["KubeadmControlPlane", "ConfigMap", "ClusterResourceSet"] {
        let lines: Vec<&str> = out
            .lines()
            .filter(|l| l.contains(&format!("/{kind} ")))
            .collect();
        assert!(!lines.is_empty(), "{kind} listed: {out}");
        assert!(
            lines
                .iter()
                .all(|l| l.ends_with(": skipped: not served by vsphere-provider")),
            "{kind}: {lines:?}"
        );
    }
    for kind in ["VSphereCluster", "VSphereMachineTemplate"] {
        let lines: Vec<&str> = out
            .lines()
            .filter(|l| l.contains(&format!(" {kind} ")))
            .collect();
        assert!(!lines.is_empty(), "{kind} listed: {out}");
        assert!(
            lines.iter().all(|l| l.contains(": ok")),
            "{kind}: {lines:?}"
        );
    }
    assert!(err.contains(" 0 rejected, "), "{err}");
}

/// A document without `apiVersion` says so (it was "unknown kind: not served"), and fails.
#[test]
fn a_missing_api_version_is_said_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "zone.yaml",
        &ZONE.replace("apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\n", ""),
    );
    let (code, out, _) = validate(&["-f", &f]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        out,
        format!(
            "{f}:1: VSphereDeploymentZone zone-a: rejected: apiVersion: Required value: missing apiVersion (VSphereDeploymentZone is infrastructure.cluster.x-k8s.io/v1beta1 or infrastructure.cluster.x-k8s.io/v1beta2)\n"
        )
    );
}

/// What looks like ours but is not served is rejected, not skipped: a cluster running this
/// provider would refuse it (a kind of ours at another version, a CAPV kind we do not serve).
#[test]
fn kinds_of_our_groups_we_do_not_serve_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "x.yaml",
        "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha3
kind: VSphereMachine
metadata: {name: old, namespace: ns}
spec: {template: t}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereMachineSet
metadata: {name: cc, namespace: ns}
spec: {}
",
    );
    let (code, out, _) = validate(&["-f", &f]);
    assert_eq!(code, 1, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "{f}:1: infrastructure.cluster.x-k8s.io/v1alpha3/VSphereMachine ns/old: rejected: apiVersion: Invalid value: \"infrastructure.cluster.x-k8s.io/v1alpha3\": VSphereMachine is served as infrastructure.cluster.x-k8s.io/v1beta1 or infrastructure.cluster.x-k8s.io/v1beta2"
        )
    );
    assert!(
        lines[1].contains(
            "VSphereMachineSet ns/cc: rejected: kind: Invalid value: \"VSphereMachineSet\": a CAPV kind vsphere-provider does not serve"
        ),
        "{}",
        lines[1]
    );
}

/// A negative size is refused naming the field, on each of the three CAPV machine kinds (it
/// passed, and the VM silently got the template's size); 0 passes, as "the template's".
#[test]
fn negative_vm_sizes_are_rejected_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "m.yaml",
        "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereMachine
metadata: {name: m, namespace: ns}
spec: {template: t, numCPUs: -2}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereMachineTemplate
metadata: {name: mt, namespace: ns}
spec: {template: {spec: {template: t, memoryMiB: -1, numCoresPerSocket: 0}}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereVM
metadata: {name: vm, namespace: ns}
spec: {template: t, diskGiB: -40}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereMachine
metadata: {name: zero, namespace: ns}
spec: {template: t, numCPUs: 0, memoryMiB: 0, diskGiB: 0, numCoresPerSocket: 0}
",
    );
    let (code, out, _) = validate(&["-f", &f]);
    assert_eq!(code, 1, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    for (line, field, value) in [
        (lines[0], "spec.numCPUs", -2),
        (lines[1], "spec.template.spec.memoryMiB", -1),
        (lines[2], "spec.diskGiB", -40),
    ] {
        assert!(
            line.contains(&format!(
                "rejected: {field}: Invalid value: {value}: {field} in body should be greater than or equal to 0"
            )),
            "{line}"
        );
    }
    assert!(
        lines[3]
            .ends_with("VSphereMachine ns/zero: ok (defaulted spec.powerOffMode, spec.datacenter)"),
        "{}",
        lines[3]
    );
}

#[test]
fn syntax_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "broken.yaml",
        &format!("{ZONE}---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: [oops\n"),
    );
    let (code, _, err) = validate(&["-f", &f]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("{f}:")), "{err}");
    assert!(err.contains("YAML syntax error"), "{err}");
    let line: u32 = err
        .split(&format!("{f}:"))
        .nth(1)
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((14..=15).contains(&line), "line {line}: {err}");
}

#[test]
fn secrets_are_ok_and_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: vsphere-credentials\n  namespace: default\nstringData:\n  username: administrator@vsphere.local\n  password: sup3r-s3cret\n",
    );
    let (code, out, err) = validate(&["-f", &f, "-o", "json"]);
    assert_eq!(code, 0);
    assert!(!out.contains("sup3r-s3cret") && !err.contains("sup3r-s3cret"));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["objects"][0]["result"], "ok");
}

#[test]
fn directories_are_walked_and_kustomizations_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    write(
        dir.path(),
        "kustomization.yaml",
        "resources: [sub/zone.yaml]\n",
    );
    write(&dir.path().join("sub"), "zone.yaml", ZONE);
    let (code, out, _) = validate(&["-f", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.lines().count(), 1);
}

#[test]
fn placeholders_strict_mode() {
    let (code, _, _) = validate(&[
        "-f",
        "tests/fixtures/manifests/upstream/capv-01-e2e-failure-domains.v1beta1.yaml",
    ]);
    assert_eq!(code, 0);
    let (code, out, _) = validate(&[
        "--strict-placeholders",
        "-f",
        "tests/fixtures/manifests/upstream/capv-01-e2e-failure-domains.v1beta1.yaml",
    ]);
    assert_eq!(code, 1);
    assert!(
        out.contains("spec.server: Invalid value: \"${VSPHERE_SERVER}\""),
        "{out}"
    );
}

#[test]
fn references_between_given_objects_warn() {
    let dir = tempfile::tempdir().unwrap();
    let fd = "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereFailureDomain
metadata:
  name: zone-b
spec:
  region: {name: region-a, type: Datacenter, tagCategory: k8s-region}
  zone: {name: zone-b, type: ComputeCluster, tagCategory: k8s-zone}
  topology: {datacenter: DC0, computeCluster: DC0_C1}
";
    let f = write(dir.path(), "set.yaml", &format!("{fd}---\n{ZONE}"));
    let (code, _, err) = validate(&["-f", &f]);
    assert_eq!(code, 0, "warnings do not fail");
    assert!(
        err.contains("VSphereDeploymentZone zone-a: warning: spec.failureDomain: no VSphereFailureDomain \"zone-a\""),
        "{err}"
    );
}

#[test]
fn usage_errors_exit_two() {
    let (code, _, _) = validate(&[]);
    assert_eq!(code, 2);
    let (code, _, err) = validate(&["-f", "does/not/exist.yaml"]);
    assert_eq!(code, 2);
    assert!(err.contains("does/not/exist.yaml"), "{err}");
}

/// Objects from a cluster with upstream's `MachineAPIMigration` gate carry `authoritativeAPI`
/// (the API server sets it): `validate` admits them as they are.
#[test]
fn machine_and_cpms_with_authoritative_api_pass() {
    let upstream = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifests/upstream");
    let load = |name: &str| -> serde_json::Value {
        serde_saphyr::from_str(&std::fs::read_to_string(upstream.join(name)).unwrap()).unwrap()
    };
    let mut machine = load("cpms-04-machine-vsphere-master-0.yaml");
    machine["spec"]["authoritativeAPI"] = "MachineAPI".into();
    let mut cpms = load("cpms-01-cpms-vsphere-3fd-static-ip.yaml");
    cpms["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["spec"]["authoritativeAPI"] =
        "ClusterAPI".into();
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "gated.json",
        &format!("{machine}\n---\n{cpms}\n"),
    );
    let (code, out, err) = validate(&["-f", &f]);
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].ends_with("Machine openshift-machine-api/ngirard-dev-fhshn-master-0: ok"),
        "{out}"
    );
    assert!(
        lines[1].contains("ControlPlaneMachineSet openshift-machine-api/cluster: ok"),
        "{out}"
    );
}
