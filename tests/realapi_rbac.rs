//! config/rbac in a real API server: Kubernetes' own kube-apiserver v1.37.2 (RBAC authorizer)
//! and etcd v3.7.0, built from source (hack/kube/, harness in tests/support/realapi.rs), with
//! config/rbac applied unmodified by kubectl and the controller's ServiceAccount holding a
//! TokenRequest token. There is no kube-controller-manager: no garbage collection, no namespace
//! deletion, pods stay Pending (nothing here needs more).
//!
//! * every verb of every rule of config/rbac is allowed to the controller's ServiceAccount, where
//!   the rule applies (SelfSubjectAccessReview through the SA's own token), the leader
//!   election Role only in its namespace, and Secrets only where a RoleBinding opens them (the
//!   manager's namespace, a test namespace the harness bound), never cluster-wide;
//! * the same check finds a verb removed from a copy of the ClusterRole (bound to another SA),
//!   and that SA's request is refused with 403;
//! * every call the controllers make through `KubeOps` (`ApiServer`) succeeds as the
//!   ServiceAccount.
#[path = "support/realapi.rs"]
mod realapi;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use realapi::{ControlPlane, Identity, SA_NAMESPACE, control_plane, repo};
use serde_json::{Value, json};
use vsphere_provider::api::Machine;
use vsphere_provider::api::control_plane_machine_set::ControlPlaneMachineSet;
use vsphere_provider::api::machine_health_check::MachineHealthCheck;
use vsphere_provider::controllers::api_server::ApiServer;
use vsphere_provider::plan::machine::drain::PodRef;
use vsphere_provider::reconcile::kube_ops::{Eviction, KubeOps, machine_ref};

fn yaml_file(path: &str) -> Value {
    let text = std::fs::read_to_string(repo().join(path)).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One permission a role grants: verb on group/resource[/subresource], in `namespace` (None:
/// every namespace, or a cluster-scoped resource).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Permission {
    verb: String,
    group: String,
    resource: String,
    subresource: Option<String>,
    namespace: Option<String>,
    /// The one object a `resourceNames` rule grants it on.
    name: Option<String>,
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)?;
        if let Some(s) = &self.subresource {
            write!(f, "/{s}")?;
        }
        if let Some(n) = &self.name {
            write!(f, " named {n}")?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in {ns}"),
            None => write!(f, " (all namespaces)"),
        }
    }
}

/// Every verb × group × resource a role's rules name.
fn permissions(role: &Value) -> Vec<Permission> {
    let namespace = role["metadata"]["namespace"].as_str().map(str::to_string);
    let mut out = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        let strs = |k: &str| -> Vec<String> {
            rule[k]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect()
        };
        let names: Vec<Option<String>> = match rule.get("resourceNames") {
            Some(_) => strs("resourceNames").into_iter().map(Some).collect(),
            None => vec![None],
        };
        for group in strs("apiGroups") {
            for resource in strs("resources") {
                let (resource, subresource) = match resource.split_once('/') {
                    Some((r, s)) => (r.to_string(), Some(s.to_string())),
                    None => (resource.clone(), None),
                };
                for verb in strs("verbs") {
                    for name in &names {
                        out.push(Permission {
                            verb: verb.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            subresource: subresource.clone(),
                            namespace: namespace.clone(),
                            name: name.clone(),
                        });
                    }
                }
            }
        }
    }
    out
}

/// What the controllers are meant to be able to do: every rule of config/rbac's ClusterRoles
/// (the manager's and the OpenShift one) and of its leader election Role, and the Secret
/// ClusterRole's in the namespace its RoleBinding names (the manager's).
fn granted_by_config_rbac() -> Vec<Permission> {
    let mut all = permissions(&yaml_file("config/rbac/role.yaml"));
    all.extend(permissions(&yaml_file("config/rbac/openshift_role.yaml")));
    let binding = yaml_file("config/rbac/secrets_role_binding.yaml");
    assert_eq!(
        binding["kind"], "RoleBinding",
        "Secrets are bound per namespace"
    );
    let bound_in = binding["metadata"]["namespace"].as_str().unwrap();
    assert_eq!(bound_in, SA_NAMESPACE);
    all.extend(
        permissions(&yaml_file("config/rbac/secrets_role.yaml"))
            .into_iter()
            .map(|p| Permission {
                namespace: Some(bound_in.to_string()),
                ..p
            }),
    );
    all.extend(permissions(&yaml_file(
        "config/rbac/leader_election_role.yaml",
    )));
    all
}

/// SelfSubjectAccessReview through `client`'s own identity.
async fn allowed(client: &kube::Client, p: &Permission) -> bool {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(p.verb.clone()),
                group: Some(p.group.clone()),
                resource: Some(p.resource.clone()),
                subresource: p.subresource.clone(),
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = api
        .create(&PostParams::default(), &review)
        .await
        .unwrap_or_else(|e| panic!("SelfSubjectAccessReview for {p}: {e}"));
    answer.status.unwrap().allowed
}

/// The permissions of `wanted` that `client` is refused.
async fn refused(client: &kube::Client, wanted: &[Permission]) -> Vec<Permission> {
    let mut out = Vec::new();
    for p in wanted {
        if !allowed(client, p).await {
            out.push(p.clone());
        }
    }
    out
}

#[tokio::test]
async fn every_verb_of_config_rbac_is_allowed_to_the_controller_and_no_more() {
    let cp = control_plane();
    let sa = cp.client(&Identity::Controller).await;
    let wanted = granted_by_config_rbac();
    assert!(wanted.len() > 50, "{}", wanted.len());
    let refused = refused(&sa, &wanted).await;
    assert!(
        refused.is_empty(),
        "refused to the controller's ServiceAccount:\n{}",
        refused
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );

    // The Role's permissions hold in its namespace only; what no rule names is refused.
    let elsewhere = cp.namespace("rbac-elsewhere");
    let leases = |verb: &str, ns: &str| Permission {
        verb: verb.into(),
        group: "coordination.k8s.io".into(),
        resource: "leases".into(),
        subresource: None,
        namespace: Some(ns.into()),
        name: None,
    };
    assert!(allowed(&sa, &leases("update", SA_NAMESPACE)).await);
    assert!(!allowed(&sa, &leases("update", &elsewhere)).await);
    // Secrets (security review F6): in the manager's namespace and where the admin bound them
    // (the harness does, per test namespace), never cluster-wide nor in a namespace not bound.
    let unbound = cp.namespace_unbound("rbac-unbound");
    let secrets = |verb: &str, ns: Option<&str>| Permission {
        verb: verb.into(),
        group: String::new(),
        resource: "secrets".into(),
        subresource: None,
        namespace: ns.map(str::to_string),
        name: None,
    };
    for verb in ["get", "patch"] {
        assert!(allowed(&sa, &secrets(verb, Some(SA_NAMESPACE))).await);
        assert!(allowed(&sa, &secrets(verb, Some(&elsewhere))).await);
        assert!(
            !allowed(&sa, &secrets(verb, Some(&unbound))).await,
            "{verb} in {unbound}"
        );
        assert!(
            !allowed(&sa, &secrets(verb, None)).await,
            "{verb} cluster-wide"
        );
    }
    let not_granted = [
        ("list", "", "secrets", None),
        ("create", "", "secrets", None),
        (
            "delete",
            "infrastructure.cluster.x-k8s.io",
            "vspheredeploymentzones",
            None,
        ),
        (
            "create",
            "infrastructure.cluster.x-k8s.io",
            "vspherefailuredomains",
            None,
        ),
        (
            "update",
            "infrastructure.cluster.x-k8s.io",
            "vsphereclusters",
            None,
        ),
        (
            "delete",
            "machine.openshift.io",
            "controlplanemachinesets",
            None,
        ),
        ("list", "config.openshift.io", "infrastructures", None),
        ("create", "", "pods", None),
        ("update", "", "nodes", Some("status")),
    ];
    for (verb, group, resource, sub) in not_granted {
        let p = Permission {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.map(str::to_string),
            namespace: None,
            name: None,
        };
        assert!(!allowed(&sa, &p).await, "{p} should be refused");
    }
    // The storage migration may touch our CRDs only: not Cluster API's, and none by list.
    for (verb, sub, name) in [
        ("get", None, Some("clusters.cluster.x-k8s.io")),
        ("patch", Some("status"), Some("machines.cluster.x-k8s.io")),
        ("list", None, None),
        (
            "update",
            None,
            Some("vsphereclusters.infrastructure.cluster.x-k8s.io"),
        ),
    ] {
        let p = Permission {
            verb: verb.into(),
            group: "apiextensions.k8s.io".into(),
            resource: "customresourcedefinitions".into(),
            subresource: sub.map(str::to_string),
            namespace: None,
            name: name.map(str::to_string),
        };
        assert!(!allowed(&sa, &p).await, "{p} should be refused");
    }
}

/// Waits (up to 10 s) until `check` holds: RBAC changes reach the authorizer's cache shortly
/// after they are stored.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_check_fails_when_a_verb_is_removed_from_a_copy_of_the_role() {
    let cp = control_plane();
    let ns = cp.namespace("rbac-copy");
    let sa_name = "copy-of-the-controller";
    let kubeconfig = cp.service_account_kubeconfig(&ns, sa_name).unwrap();
    let copy_id = Identity::Kubeconfig(kubeconfig);

    // A copy of the OpenShift ClusterRole without `patch` on machines, bound to this SA.
    let mut role = yaml_file("config/rbac/openshift_role.yaml");
    let role_name = format!("realapi-{ns}");
    role["metadata"]["name"] = json!(role_name);
    let mut removed = 0;
    for rule in role["rules"].as_array_mut().unwrap() {
        if rule["apiGroups"] == json!(["machine.openshift.io"])
            && rule["resources"] == json!(["machines"])
        {
            let verbs = rule["verbs"].as_array_mut().unwrap();
            verbs.retain(|v| v != "patch");
            removed += 1;
        }
    }
    assert_eq!(removed, 1, "openshift_role.yaml has one rule for machines");
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": role_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
        "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": ns}]
    });
    cp.apply_text(&Identity::Admin, &role.to_string(), None)
        .ok();
    cp.apply_text(&Identity::Admin, &binding.to_string(), None)
        .ok();

    let client = cp.client(&copy_id).await;
    let wanted = permissions(&yaml_file("config/rbac/openshift_role.yaml"));
    let create_machines = wanted
        .iter()
        .find(|p| {
            p.verb == "create"
                && p.group == "machine.openshift.io"
                && p.resource == "machines"
                && p.subresource.is_none()
        })
        .unwrap()
        .clone();
    eventually("the copy's binding is in force", || {
        allowed(&client, &create_machines)
    })
    .await;
    // The check that passes for the controller names exactly the removed verb.
    let refused = refused(&client, &wanted).await;
    assert_eq!(
        refused.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["patch machine.openshift.io/machines (all namespaces)"]
    );

    // And the server refuses the request itself: 403, with the reason it gives. (kubectl
    // cannot show it here: `kubectl patch` GETs first, which the manager never needs.)
    cp.apply_text(
        &Identity::Admin,
        &json!({
            "apiVersion": "machine.openshift.io/v1beta1",
            "kind": "Machine",
            "metadata": {"name": "m", "namespace": ns},
            "spec": {}
        })
        .to_string(),
        None,
    )
    .ok();
    let patch = json!({"metadata": {"labels": {"x": "y"}}});
    let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
    let err = machines
        .patch("m", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_err();
    match &err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 403, "{s:?}");
            assert!(
                s.message.contains(&format!(
                    "User \"system:serviceaccount:{ns}:{sa_name}\" cannot patch resource \"machines\" in API group \"machine.openshift.io\""
                )),
                "{s:?}"
            );
        }
        other => panic!("want a 403, got {other:?}"),
    }
    // The controller itself may.
    let as_controller: Api<Machine> = Api::namespaced(cp.client(&Identity::Controller).await, &ns);
    as_controller
        .patch("m", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

// --- KubeOps as the controller ------------------------------------------------------------------

async fn controller_ops(cp: &ControlPlane) -> ApiServer {
    let client = cp.client(&Identity::Controller).await;
    let recorder = kube::runtime::events::Recorder::new(
        client.clone(),
        kube::runtime::events::Reporter {
            controller: "vsphere-provider".into(),
            instance: None,
        },
    );
    ApiServer::new(client, recorder)
}

fn machine(ns: &str, name: &str) -> Machine {
    serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {"name": name, "namespace": ns, "labels": {"a": "1"}},
        "spec": {}
    }))
    .unwrap()
}

/// The machine calls: create, list, metadata + spec + status update, finalizer release, delete,
/// and an event about it.
#[tokio::test]
async fn machine_calls_of_kube_ops_are_allowed_to_the_controller() {
    let cp = control_plane();
    let ns = cp.namespace("ops-machine");
    let ops = controller_ops(cp).await;

    let created = ops.create_machine(&machine(&ns, "m")).await.unwrap();
    let listed = ops.list_machines(&ns).await.unwrap();
    assert_eq!(listed.len(), 1);

    let mut after = created.clone();
    after.metadata.labels = Some(BTreeMap::from([("b".into(), "2".into())]));
    after.metadata.finalizers = Some(vec!["machine.machine.openshift.io".into()]);
    after.spec.provider_id = Some("vsphere://4211".into());
    after.status = Some(serde_json::from_value(json!({"phase": "Provisioning"})).unwrap());
    ops.update_machine(&created, &after).await.unwrap();

    let api: Api<Machine> = Api::namespaced(cp.client(&Identity::Admin).await, &ns);
    let stored = api.get("m").await.unwrap();
    assert_eq!(stored.spec.provider_id.as_deref(), Some("vsphere://4211"));
    assert_eq!(
        stored.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Provisioning")
    );

    ops.record(
        machine_ref(&stored),
        false,
        "Realapi",
        "an event as the controller",
    )
    .await;

    ops.delete_machine(&ns, "m").await.unwrap();
    let deleting = api.get("m").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    let mut released = deleting.clone();
    released.metadata.finalizers = Some(vec![]);
    ops.update_machine(&deleting, &released).await.unwrap();
    assert!(api.get_opt("m").await.unwrap().is_none());

    let events: Api<Event> = Api::namespaced(cp.client(&Identity::Admin).await, &ns);
    let found = events.list(&ListParams::default()).await.unwrap();
    assert!(
        found
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("Realapi")),
        "the controller's event was not stored (events are best effort: a 403 is only logged)"
    );
}

/// The machine set's status.
#[tokio::test]
async fn machine_set_status_is_allowed_to_the_controller() {
    let cp = control_plane();
    let ns = cp.namespace("ops-cpms");
    let ops = controller_ops(cp).await;
    let labels = json!({
        "machine.openshift.io/cluster-api-cluster": "c",
        "machine.openshift.io/cluster-api-machine-role": "master",
        "machine.openshift.io/cluster-api-machine-type": "master",
    });
    let cpms = json!({
        "apiVersion": "machine.openshift.io/v1",
        "kind": "ControlPlaneMachineSet",
        "metadata": {"name": "cluster", "namespace": ns},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "machineType": "machines_v1beta1_machine_openshift_io",
                "machines_v1beta1_machine_openshift_io": {
                    "failureDomains": {"platform": "VSphere", "vsphere": [{"name": "a"}]},
                    "metadata": {"labels": labels},
                    "spec": {"providerSpec": {"value": {}}}
                }
            }
        }
    });
    cp.apply_text(&Identity::Admin, &cpms.to_string(), None)
        .ok();
    let api: Api<ControlPlaneMachineSet> = Api::namespaced(cp.client(&Identity::Admin).await, &ns);
    let set = api.get("cluster").await.unwrap();
    let status = serde_json::from_value(json!({"replicas": 2, "readyReplicas": 1})).unwrap();
    ops.set_machine_set_status(&set, &status).await.unwrap();
    let stored = api.get("cluster").await.unwrap();
    assert_eq!(stored.status.unwrap().replicas, Some(2));
}

/// The drain and node calls: cordon, evict, delete a Node.
#[tokio::test]
async fn drain_calls_of_kube_ops_are_allowed_to_the_controller() {
    let cp = control_plane();
    let ns = cp.namespace("ops-drain");
    let ops = controller_ops(cp).await;
    let admin = cp.client(&Identity::Admin).await;
    let node_name = format!("node-{ns}");
    let nodes: Api<Node> = Api::all(admin.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": node_name}})).unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "example.invalid/none"}]}
        }))
        .unwrap(),
    )
    .await
    .unwrap();

    ops.cordon(&node_name).await.unwrap();
    assert_eq!(
        nodes
            .get(&node_name)
            .await
            .unwrap()
            .spec
            .unwrap()
            .unschedulable,
        Some(true)
    );
    // An unscheduled pod is evicted at once (no kubelet to wait for).
    let evicted = ops
        .evict(&PodRef {
            namespace: ns.clone(),
            name: "p".into(),
        })
        .await
        .unwrap();
    assert_eq!(evicted, Eviction::Evicted);
    assert!(pods.get_opt("p").await.unwrap().is_none());
    ops.delete_node(&node_name).await.unwrap();
    assert!(nodes.get_opt(&node_name).await.unwrap().is_none());
}

/// The health check: its remediation-backoff annotation (metadata) and its status.
#[tokio::test]
async fn health_check_calls_of_kube_ops_are_allowed_to_the_controller() {
    let cp = control_plane();
    let ns = cp.namespace("ops-mhc");
    let ops = controller_ops(cp).await;
    cp.apply_text(
        &Identity::Admin,
        &json!({
            "apiVersion": "machine.openshift.io/v1beta1",
            "kind": "MachineHealthCheck",
            "metadata": {"name": "c", "namespace": ns},
            "spec": {"selector": {}}
        })
        .to_string(),
        None,
    )
    .ok();
    let api: Api<MachineHealthCheck> = Api::namespaced(cp.client(&Identity::Admin).await, &ns);
    let before = api.get("c").await.unwrap();

    // Status alone.
    let mut after = before.clone();
    after.status =
        Some(serde_json::from_value(json!({"expectedMachines": 3, "currentHealthy": 3})).unwrap());
    ops.update_health_check(&before, &after).await.unwrap();

    // The remediation backoff annotation.
    let before = api.get("c").await.unwrap();
    let mut after = before.clone();
    after.metadata.annotations = Some(BTreeMap::from([(
        "vsphere-provider.io/remediation-backoff".into(),
        "{}".into(),
    )]));
    ops.update_health_check(&before, &after)
        .await
        .unwrap_or_else(|e| {
            panic!("writing the remediation-backoff annotation as the controller: {e}")
        });
    let stored = api.get("c").await.unwrap();
    assert!(
        stored
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("vsphere-provider.io/remediation-backoff")
    );
}
