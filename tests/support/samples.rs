//! The objects the real-API-server manager tests apply, in the shapes of config/samples: the
//! failure domains and zones of a vcsim with the samples' topology (`-cluster 3 -pool 1`), the
//! credentials Secret and VSphereCluster, worker Machines and a control plane machine set.
#![allow(dead_code)]

use serde_json::{Value, json};

/// `{"kind": "List", "items": …}` as text, for `kubectl apply -f -`.
pub fn list(items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// The Secret `name` in the controller's namespace `controller_ns` that the zones of [`zones`]
/// name as their identityRef: zones are admin-owned and never use a tenant's credentials.
pub fn zone_credentials(controller_ns: &str, name: &str, user: &str, password: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": controller_ns},
        "type": "Opaque",
        "stringData": {"username": user, "password": password}
    })
}

/// For each zone name (the i-th on cluster `DC0_C{i}`, pool `DC0_C{i}_RP1`, folder `vm`): a
/// VSphereFailureDomain (autoConfigure: the controller tags vCenter itself) and a
/// VSphereDeploymentZone on `server` acting as the Secret `identity` of the controller's
/// namespace ([`zone_credentials`]), its `controlPlane` set when given (else left to the
/// mutating webhook).
pub fn zones(
    server: &str,
    names: &[String],
    control_plane: Option<bool>,
    identity: &str,
) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        out.push(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereFailureDomain",
            "metadata": {"name": name},
            "spec": {
                "region": {"name": "region-a", "type": "Datacenter", "tagCategory": "k8s-region", "autoConfigure": true},
                "zone": {"name": name, "type": "ComputeCluster", "tagCategory": "k8s-zone", "autoConfigure": true},
                "topology": {"datacenter": "DC0", "computeCluster": format!("DC0_C{i}"),
                             "datastore": "LocalDS_0", "networks": ["VM Network"]}
            }
        }));
        let mut zone = json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereDeploymentZone",
            "metadata": {"name": name},
            "spec": {
                "server": server,
                "identityRef": {"kind": "Secret", "name": identity},
                "failureDomain": name,
                "placementConstraint": {"resourcePool": format!("DC0_C{i}_RP1"), "folder": "vm"}
            }
        });
        if let Some(cp) = control_plane {
            zone["spec"]["controlPlane"] = json!(cp);
        }
        out.push(zone);
    }
    out
}

/// The credentials Secret `vsphere-credentials` and the VSphereCluster `demo` in `ns`,
/// selecting every zone of `server`; and the OpenShift machines' credentialsSecret
/// `vsphere-cloud-credentials` (the webhook's default name) with machine-api-operator's keys,
/// `<vCenter host>.username` and `.password`.
pub fn cluster(ns: &str, server: &str, user: &str, password: &str) -> Vec<Value> {
    let host = url::Url::parse(server)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| server.to_string());
    vec![
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "vsphere-credentials", "namespace": ns},
            "type": "Opaque",
            "stringData": {"username": user, "password": password}
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "vsphere-cloud-credentials", "namespace": ns},
            "type": "Opaque",
            "stringData": {format!("{host}.username"): user, format!("{host}.password"): password}
        }),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereCluster",
            "metadata": {"name": "demo", "namespace": ns},
            "spec": {
                "server": server,
                "identityRef": {"kind": "Secret", "name": "vsphere-credentials"},
                "controlPlaneEndpoint": {"host": "10.0.0.10", "port": 6443},
                "failureDomainSelector": {}
            }
        }),
    ]
}

/// The user data Secret `worker-user-data` the provider specs name.
pub fn user_data(ns: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "worker-user-data", "namespace": ns},
        "stringData": {"userData": "{\"ignition\":{\"version\":\"3.2.0\"}}"}
    })
}

/// A provider spec cloning vcsim's `DC0_H0_VM0` (what the mutating webhook would default,
/// `userDataSecret` and `credentialsSecret`, set).
pub fn provider_spec() -> Value {
    json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "VSphereMachineProviderSpec",
        "template": "DC0_H0_VM0",
        "numCPUs": 2,
        "memoryMiB": 2048,
        "network": {"devices": []},
        "userDataSecret": {"name": "worker-user-data"},
        "credentialsSecret": {"name": "vsphere-cloud-credentials"},
        "workspace": {}
    })
}

/// A worker Machine in zone `zone`, with `hooks` as its lifecycleHooks.
pub fn worker(ns: &str, name: &str, zone: &str, hooks: Value) -> Value {
    json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {
                "vsphere-provider.io/deployment-zone": zone,
                "machine.openshift.io/cluster-api-cluster": "demo",
                "machine.openshift.io/cluster-api-machine-role": "worker",
                "machine.openshift.io/cluster-api-machine-type": "worker"
            }
        },
        "spec": {"lifecycleHooks": hooks, "providerSpec": {"value": provider_spec()}}
    })
}

/// The ControlPlaneMachineSet `cluster` in `ns`: 3 replicas, RollingUpdate, one failure
/// domain per zone.
pub fn control_plane_machine_set(ns: &str, zones: &[String]) -> Value {
    let domains: Vec<Value> = zones.iter().map(|z| json!({"name": z})).collect();
    json!({
        "apiVersion": "machine.openshift.io/v1",
        "kind": "ControlPlaneMachineSet",
        "metadata": {"name": "cluster", "namespace": ns},
        "spec": {
            "replicas": 3,
            "state": "Active",
            "strategy": {"type": "RollingUpdate"},
            "selector": {"matchLabels": {
                "machine.openshift.io/cluster-api-machine-role": "master",
                "machine.openshift.io/cluster-api-machine-type": "master"
            }},
            "template": {
                "machineType": "machines_v1beta1_machine_openshift_io",
                "machines_v1beta1_machine_openshift_io": {
                    "failureDomains": {"platform": "VSphere", "vsphere": domains},
                    "metadata": {"labels": {
                        "machine.openshift.io/cluster-api-cluster": "demo",
                        "machine.openshift.io/cluster-api-machine-role": "master",
                        "machine.openshift.io/cluster-api-machine-type": "master"
                    }},
                    "spec": {"providerSpec": {"value": provider_spec()}}
                }
            }
        }
    })
}
