//! Least privilege: every permission config/rbac grants is **needed**. Each grant has a witness
//! here, the place in the code that makes the call (file and a line of it), and each witness is
//! checked against the source; a grant without a witness fails the first test by name ("unused:
//! drop it"), and a witness whose grant was removed fails it too (naming the call that would be
//! refused). tests/realapi_rbac.rs then runs those calls as the controller's ServiceAccount on a
//! real API server, so a grant removed from config/rbac also fails there with 403.
//!
//! `list`/`watch` of a watched kind are the reflectors of `controllers::runtime`; kube-runtime's
//! `finalizer()` patches the main resource; an owner reference with `blockOwnerDeletion` needs
//! `update` on the owner's `finalizers` subresource (the OwnerReferencesPermissionEnforcement
//! admission plugin).
use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

/// (`verb group/resource[/subresource]`, file, a line of that file making the call).
const WITNESSES: &[(&str, &str, &str)] = &[
    // Zones and failure domains.
    (
        "list infrastructure.cluster.x-k8s.io/vspheredeploymentzones",
        "src/controllers/runtime.rs",
        "watch_kind::<VSphereDeploymentZone",
    ),
    (
        "watch infrastructure.cluster.x-k8s.io/vspheredeploymentzones",
        "src/controllers/runtime.rs",
        "watch_kind::<VSphereDeploymentZone",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vspheredeploymentzones",
        "src/controllers/zone/mod.rs",
        "finalizer(&api, ZONE_FINALIZER",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vspheredeploymentzones/status",
        "src/controllers/zone/apply.rs",
        "apply_status(&api, &name, &status)",
    ),
    (
        "list infrastructure.cluster.x-k8s.io/vspherefailuredomains",
        "src/controllers/runtime.rs",
        "watch_kind::<VSphereFailureDomain",
    ),
    (
        "watch infrastructure.cluster.x-k8s.io/vspherefailuredomains",
        "src/controllers/runtime.rs",
        "watch_kind::<VSphereFailureDomain",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vspherefailuredomains",
        "src/controllers/zone/apply.rs",
        "set_owner_references(&fds, fd, &refs)",
    ),
    (
        "delete infrastructure.cluster.x-k8s.io/vspherefailuredomains",
        "src/controllers/zone/cleanup.rs",
        "delete_failure_domain(&fds, &fd)",
    ),
    // VSphereClusters and their identities.
    (
        "list infrastructure.cluster.x-k8s.io/vsphereclusters",
        "src/controllers/runtime.rs",
        "watch_kind::<VSphereCluster",
    ),
    (
        "watch infrastructure.cluster.x-k8s.io/vsphereclusters",
        "src/controllers/runtime.rs",
        "watch_kind::<VSphereCluster",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vsphereclusters",
        "src/controllers/patch.rs",
        "api.patch(name, &PatchParams::default(), &Patch::Merge(&body))",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vsphereclusters/status",
        "src/controllers/patch.rs",
        "api.patch_status(",
    ),
    (
        "list infrastructure.cluster.x-k8s.io/vsphereclusteridentities",
        "src/controllers/runtime.rs",
        "watch_kind::<VSphereClusterIdentity",
    ),
    (
        "watch infrastructure.cluster.x-k8s.io/vsphereclusteridentities",
        "src/controllers/runtime.rs",
        "watch_kind::<VSphereClusterIdentity",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vsphereclusteridentities",
        "src/controllers/cluster_identity.rs",
        "set_finalizers(&api, &name, rv, &with_ours)",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vsphereclusteridentities/status",
        "src/controllers/cluster_identity.rs",
        ".patch_status(",
    ),
    (
        "get core/secrets",
        "src/controllers/cluster_identity.rs",
        "secrets.get_metadata(secret_name)",
    ),
    (
        "patch core/secrets",
        "src/controllers/cluster_identity.rs",
        ".patch_metadata(secret_name, &PatchParams::default(), &Patch::Merge(&body))",
    ),
    (
        "get core/secrets",
        "src/controllers/secrets.rs",
        "let read = api.get_opt(name).await;",
    ),
    (
        "patch core/secrets",
        "src/controllers/identity_secret.rs",
        ".patch_metadata(&r.name, &PatchParams::default(), &Patch::Merge(&body))",
    ),
    (
        "get core/namespaces",
        "src/controllers/credentials.rs",
        "get_logged(&namespaces, &ns, \"Namespace\")",
    ),
    // Cluster API core objects, read.
    (
        "get cluster.x-k8s.io/clusters",
        "src/controllers/pause.rs",
        "dynamic_api(&ctx.client, ns, CORE_API_VERSION, \"Cluster\")",
    ),
    (
        "list cluster.x-k8s.io/clusters",
        "src/controllers/runtime.rs",
        "watch_optional_kind::<CapiCluster",
    ),
    (
        "watch cluster.x-k8s.io/clusters",
        "src/controllers/runtime.rs",
        "watch_optional_kind::<CapiCluster",
    ),
    (
        "list cluster.x-k8s.io/machines",
        "src/controllers/runtime.rs",
        "watch_optional_kind::<CapiMachine",
    ),
    (
        "watch cluster.x-k8s.io/machines",
        "src/controllers/runtime.rs",
        "watch_optional_kind::<CapiMachine",
    ),
    (
        "list cluster.x-k8s.io/machines",
        "src/controllers/cluster.rs",
        "match api.list(&params).await",
    ),
    // Cluster API machines.
    (
        "list infrastructure.cluster.x-k8s.io/vspheremachines",
        "src/controllers/runtime.rs",
        "watch_kind::<VSphereMachine",
    ),
    (
        "watch infrastructure.cluster.x-k8s.io/vspheremachines",
        "src/controllers/runtime.rs",
        "watch_kind::<VSphereMachine",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vspheremachines",
        "src/controllers/capi_machine.rs",
        "ctx.api_server()",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vspheremachines/status",
        "src/controllers/capi_machine.rs",
        "super::api_server::status_patch(&before.status, &after.status)",
    ),
    (
        "update infrastructure.cluster.x-k8s.io/vspheremachines/finalizers",
        "src/plan/capi_machine/resolve.rs",
        "block_owner_deletion: Some(true)",
    ),
    (
        "list infrastructure.cluster.x-k8s.io/vspherevms",
        "src/controllers/runtime.rs",
        "watch_kind::<VSphereVM",
    ),
    (
        "watch infrastructure.cluster.x-k8s.io/vspherevms",
        "src/controllers/runtime.rs",
        "watch_kind::<VSphereVM",
    ),
    (
        "create infrastructure.cluster.x-k8s.io/vspherevms",
        "src/controllers/capi_machine.rs",
        "api.create(&pp, vm)",
    ),
    (
        "get infrastructure.cluster.x-k8s.io/vspherevms",
        "src/controllers/capi_machine.rs",
        ".map_err(|e| KubeError::from_client(format!(\"get VSphereVM {ns}/{name}\"), &e))",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vspherevms",
        "src/controllers/api_server.rs",
        "async fn update_vsphere_vm(",
    ),
    (
        "delete infrastructure.cluster.x-k8s.io/vspherevms",
        "src/controllers/capi_machine.rs",
        "async fn delete_vm(",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vspherevms/status",
        "src/controllers/api_server.rs",
        "async fn update_vsphere_vm(",
    ),
    (
        "update infrastructure.cluster.x-k8s.io/vspherevms/finalizers",
        "src/plan/ipam.rs",
        "block_owner_deletion: Some(true)",
    ),
    // OpenShift: the machine set, machines, health checks, the Infrastructure.
    (
        "get config.openshift.io/infrastructures",
        "src/controllers/cpms.rs",
        "match api.get_opt(CLUSTER).await",
    ),
    (
        "list machine.openshift.io/controlplanemachinesets",
        "src/controllers/runtime.rs",
        "watch_kind::<ControlPlaneMachineSet",
    ),
    (
        "watch machine.openshift.io/controlplanemachinesets",
        "src/controllers/runtime.rs",
        "watch_kind::<ControlPlaneMachineSet",
    ),
    (
        "patch machine.openshift.io/controlplanemachinesets",
        "src/controllers/cpms.rs",
        "finalizer(&api, CPMS_FINALIZER",
    ),
    (
        "patch machine.openshift.io/controlplanemachinesets/status",
        "src/controllers/api_server.rs",
        "async fn set_machine_set_status(",
    ),
    (
        "update machine.openshift.io/controlplanemachinesets/finalizers",
        "src/plan/cpms/mod.rs",
        "block_owner_deletion: Some(true)",
    ),
    (
        "list machine.openshift.io/machines",
        "src/controllers/runtime.rs",
        "watch_kind::<Machine",
    ),
    (
        "watch machine.openshift.io/machines",
        "src/controllers/runtime.rs",
        "watch_kind::<Machine",
    ),
    (
        "create machine.openshift.io/machines",
        "src/controllers/api_server.rs",
        "async fn create_machine(",
    ),
    (
        "patch machine.openshift.io/machines",
        "src/controllers/api_server.rs",
        "async fn update_machine(",
    ),
    (
        "delete machine.openshift.io/machines",
        "src/controllers/api_server.rs",
        "async fn delete_machine(",
    ),
    (
        "patch machine.openshift.io/machines/status",
        "src/controllers/api_server.rs",
        "api.patch_status(&name, &pp, &Patch::Merge(&patch))",
    ),
    (
        "update machine.openshift.io/machines/finalizers",
        "src/plan/machine/ipam.rs",
        "block_owner_deletion: Some(true)",
    ),
    (
        "list machine.openshift.io/machinehealthchecks",
        "src/controllers/runtime.rs",
        "watch_kind::<MachineHealthCheck",
    ),
    (
        "watch machine.openshift.io/machinehealthchecks",
        "src/controllers/runtime.rs",
        "watch_kind::<MachineHealthCheck",
    ),
    (
        "patch machine.openshift.io/machinehealthchecks",
        "src/controllers/api_server.rs",
        "async fn update_health_check(",
    ),
    (
        "patch machine.openshift.io/machinehealthchecks/status",
        "src/controllers/api_server.rs",
        "async fn update_health_check(",
    ),
    // Remediation providers an MHC may name (plan::health::remediation::REMEDIATION_GROUPS):
    // the template is read, the requests listed, created and deleted.
    (
        "get infrastructure.cluster.x-k8s.io/metal3remediationtemplates",
        "src/controllers/mhc.rs",
        ".get_opt(&tname)",
    ),
    (
        "list infrastructure.cluster.x-k8s.io/metal3remediations",
        "src/controllers/mhc.rs",
        ".list(&Default::default())",
    ),
    (
        "create infrastructure.cluster.x-k8s.io/metal3remediations",
        "src/controllers/api_server.rs",
        "async fn create_remediation_request(",
    ),
    (
        "delete infrastructure.cluster.x-k8s.io/metal3remediations",
        "src/controllers/api_server.rs",
        "async fn delete_remediation_request(",
    ),
    (
        "get remediation.medik8s.io/selfnoderemediationtemplates",
        "src/controllers/mhc.rs",
        ".get_opt(&tname)",
    ),
    (
        "list remediation.medik8s.io/selfnoderemediations",
        "src/controllers/mhc.rs",
        ".list(&Default::default())",
    ),
    (
        "create remediation.medik8s.io/selfnoderemediations",
        "src/controllers/api_server.rs",
        "async fn create_remediation_request(",
    ),
    (
        "delete remediation.medik8s.io/selfnoderemediations",
        "src/controllers/api_server.rs",
        "async fn delete_remediation_request(",
    ),
    (
        "get fence-agents-remediation.medik8s.io/fenceagentsremediationtemplates",
        "src/controllers/mhc.rs",
        ".get_opt(&tname)",
    ),
    (
        "list fence-agents-remediation.medik8s.io/fenceagentsremediations",
        "src/controllers/mhc.rs",
        ".list(&Default::default())",
    ),
    (
        "create fence-agents-remediation.medik8s.io/fenceagentsremediations",
        "src/controllers/api_server.rs",
        "async fn create_remediation_request(",
    ),
    (
        "delete fence-agents-remediation.medik8s.io/fenceagentsremediations",
        "src/controllers/api_server.rs",
        "async fn delete_remediation_request(",
    ),
    (
        "get machine-deletion-remediation.medik8s.io/machinedeletionremediationtemplates",
        "src/controllers/mhc.rs",
        ".get_opt(&tname)",
    ),
    (
        "list machine-deletion-remediation.medik8s.io/machinedeletionremediations",
        "src/controllers/mhc.rs",
        ".list(&Default::default())",
    ),
    (
        "create machine-deletion-remediation.medik8s.io/machinedeletionremediations",
        "src/controllers/api_server.rs",
        "async fn create_remediation_request(",
    ),
    (
        "delete machine-deletion-remediation.medik8s.io/machinedeletionremediations",
        "src/controllers/api_server.rs",
        "async fn delete_remediation_request(",
    ),
    // IP address management (claims made, bound addresses read).
    (
        "get ipam.cluster.x-k8s.io/ipaddressclaims",
        "src/controllers/api_server.rs",
        "api.get_opt(name),",
    ),
    (
        "list ipam.cluster.x-k8s.io/ipaddressclaims",
        "src/controllers/machine/mod.rs",
        "list_typed::<IpAddressClaim>(ctx, ns, CLAIM_KIND)",
    ),
    (
        "create ipam.cluster.x-k8s.io/ipaddressclaims",
        "src/controllers/api_server.rs",
        "async fn create_ip_address_claim(",
    ),
    (
        "patch ipam.cluster.x-k8s.io/ipaddressclaims",
        "src/controllers/api_server.rs",
        "async fn release_ip_address_claim(",
    ),
    (
        "delete ipam.cluster.x-k8s.io/ipaddressclaims",
        "src/controllers/api_server.rs",
        "async fn release_ip_address_claim(",
    ),
    (
        "list ipam.cluster.x-k8s.io/ipaddresses",
        "src/controllers/machine/mod.rs",
        "list_typed::<IpAddress>(ctx, ns, ADDRESS_KIND)",
    ),
    // Nodes and the drain of an OpenShift machine's node.
    (
        "list core/nodes",
        "src/controllers/runtime.rs",
        "watch_kind::<Node",
    ),
    (
        "watch core/nodes",
        "src/controllers/runtime.rs",
        "watch_kind::<Node",
    ),
    (
        "patch core/nodes",
        "src/controllers/api_server.rs",
        "async fn cordon(",
    ),
    (
        "delete core/nodes",
        "src/controllers/api_server.rs",
        "async fn delete_node(",
    ),
    (
        "list core/pods",
        "src/controllers/machine/mod.rs",
        ".list(&ListParams::default().fields(&format!(\"spec.nodeName={node}\")))",
    ),
    (
        "create core/pods/eviction",
        "src/controllers/api_server.rs",
        "async fn evict(",
    ),
    // Events (kube-runtime's Recorder writes events.k8s.io/v1).
    (
        "create events.k8s.io/events",
        "src/controllers/events.rs",
        "recorder.publish(&event, about)",
    ),
    (
        "patch events.k8s.io/events",
        "src/controllers/events.rs",
        "recorder.publish(&event, about)",
    ),
    // Leader election, in the manager's namespace.
    (
        "get coordination.k8s.io/leases",
        "src/controllers/leader/lease.rs",
        "self.api.get_opt(&self.settings.name)",
    ),
    (
        "create coordination.k8s.io/leases",
        "src/controllers/leader/lease.rs",
        ".create(",
    ),
    (
        "update coordination.k8s.io/leases",
        "src/controllers/leader/lease.rs",
        ".replace(",
    ),
    (
        "list infrastructure.cluster.x-k8s.io/vsphereclusteridentities",
        "src/controllers/storage_migration.rs",
        "all.list_metadata(&params)",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vsphereclusteridentities",
        "src/controllers/storage_migration.rs",
        ".patch_metadata(",
    ),
    (
        "list infrastructure.cluster.x-k8s.io/vspheremachinetemplates",
        "src/controllers/storage_migration.rs",
        "all.list_metadata(&params)",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vspheremachinetemplates",
        "src/controllers/storage_migration.rs",
        ".patch_metadata(",
    ),
    (
        "list infrastructure.cluster.x-k8s.io/vsphereclustertemplates",
        "src/controllers/storage_migration.rs",
        "all.list_metadata(&params)",
    ),
    (
        "patch infrastructure.cluster.x-k8s.io/vsphereclustertemplates",
        "src/controllers/storage_migration.rs",
        ".patch_metadata(",
    ),
    // The storage migration's own CRDs (resourceNames: ours only).
    (
        "get apiextensions.k8s.io/customresourcedefinitions",
        "src/controllers/storage_migration.rs",
        "let crd = crds.get(&name)",
    ),
    (
        "patch apiextensions.k8s.io/customresourcedefinitions/status",
        "src/controllers/storage_migration.rs",
        "crds.patch_status(",
    ),
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `verb group/resource[/subresource]` of every rule of a role file (one or more documents).
fn granted(path: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo().join(path)).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let mut out = BTreeSet::new();
    for doc in docs.iter().filter(|d| !d.is_null()) {
        for rule in doc["rules"].as_array().into_iter().flatten() {
            let list = |k: &str| -> Vec<String> {
                rule[k]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect()
            };
            for group in list("apiGroups") {
                let group = if group.is_empty() {
                    "core".into()
                } else {
                    group
                };
                for resource in list("resources") {
                    for verb in list("verbs") {
                        out.insert(format!("{verb} {group}/{resource}"));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_grant_of_config_rbac_has_a_witness_in_the_code_and_every_witness_a_grant() {
    let mut grants = granted("config/rbac/role.yaml");
    grants.extend(granted("config/rbac/openshift_role.yaml"));
    grants.extend(granted("config/rbac/secrets_role.yaml"));
    grants.extend(granted("config/rbac/leader_election_role.yaml"));
    let witnessed: BTreeSet<String> = WITNESSES.iter().map(|(p, _, _)| p.to_string()).collect();
    let unused: Vec<&String> = grants.difference(&witnessed).collect();
    assert!(
        unused.is_empty(),
        "granted but no code needs it (drop it from config/rbac, or add the call's witness): {unused:#?}"
    );
    let missing: Vec<String> = witnessed
        .difference(&grants)
        .map(|p| {
            let (_, file, line) = WITNESSES.iter().find(|(w, _, _)| w == p).unwrap();
            format!("{p}: needed by {file}: {line}")
        })
        .collect();
    assert!(
        missing.is_empty(),
        "needed but not granted (the call would be refused with 403): {missing:#?}"
    );
}

#[test]
fn every_witness_is_a_call_the_code_still_makes() {
    let mut stale = Vec::new();
    for (perm, file, line) in WITNESSES {
        let text = std::fs::read_to_string(repo().join(file))
            .unwrap_or_else(|e| panic!("{perm}: {file}: {e}"));
        if !text.contains(line) {
            stale.push(format!("{perm}: {file} no longer has {line:?}"));
        }
    }
    assert!(
        stale.is_empty(),
        "witnesses that no longer hold (the grant may be unused now): {stale:#?}"
    );
}

/// The remediation kinds granted are exactly the groups the webhook and controller accept.
#[test]
fn remediation_grants_cover_exactly_the_accepted_groups() {
    let grants = granted("config/rbac/openshift_role.yaml");
    let remediation_groups: BTreeSet<&str> = grants
        .iter()
        .filter(|g| g.contains("remediation"))
        .filter_map(|g| g.split_once(' ')?.1.split_once('/').map(|(group, _)| group))
        .collect();
    let accepted: BTreeSet<&str> = vsphere_provider::plan::health::remediation::REMEDIATION_GROUPS
        .iter()
        .copied()
        .collect();
    assert_eq!(remediation_groups, accepted);
}

/// What only OpenShift's machine API needs is ClusterRole vsphere-provider-openshift
/// (openshift_role.yaml), which config/capi-only leaves out: the ClusterRole a Cluster API-only
/// install keeps (role.yaml) neither drains nor deletes a Node, and only reads (the watches) the
/// OpenShift kinds and Nodes.
#[test]
fn node_drain_and_openshift_writes_are_in_the_openshift_role_only() {
    let kept = granted("config/rbac/role.yaml");
    let openshift = granted("config/rbac/openshift_role.yaml");
    for p in [
        "patch core/nodes",
        "delete core/nodes",
        "list core/pods",
        "create core/pods/eviction",
        "create machine.openshift.io/machines",
        "delete machine.openshift.io/machines",
        "patch machine.openshift.io/machines",
        "get config.openshift.io/infrastructures",
    ] {
        assert!(!kept.contains(p), "role.yaml grants {p}");
        assert!(openshift.contains(p), "openshift_role.yaml lacks {p}");
    }
    for g in &kept {
        let (verb, what) = g.split_once(' ').unwrap();
        if what.starts_with("machine.openshift.io/")
            || what.starts_with("config.openshift.io/")
            || what.starts_with("core/nodes")
            || what.starts_with("core/pods")
        {
            assert!(
                matches!(verb, "list" | "watch"),
                "role.yaml (kept by config/capi-only) grants {g}"
            );
        }
    }
}
