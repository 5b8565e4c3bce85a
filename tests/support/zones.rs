//! Zones as config/samples writes them, on a vcsim with the samples' topology (`-cluster 3
//! -pool 1`), for the tests that need ready failure domains on a real API server.

use serde_json::{Value, json};

use crate::vcsim::Vcsim;

/// config/samples-style objects on a vcsim with the samples' topology: for each zone name a
/// VSphereFailureDomain (autoConfigure, so the controller tags vCenter itself) and a
/// VSphereDeploymentZone (controlPlane left unset); and, apart, the credentials Secret and a
/// VSphereCluster in `ns` selecting every zone of the server.
pub fn samples_style(sim: &Vcsim, ns: &str, zones: &[String]) -> (Value, Value) {
    let server = sim.url().to_string();
    let (user, password) = sim.credentials();
    let mut domains = Vec::new();
    for (i, name) in zones.iter().enumerate() {
        domains.push(json!({
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
        domains.push(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereDeploymentZone",
            "metadata": {"name": name},
            "spec": {
                "server": server,
                "failureDomain": name,
                "placementConstraint": {"resourcePool": format!("DC0_C{i}_RP1"), "folder": "vm"}
            }
        }));
    }
    let cluster = vec![
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "vsphere-credentials", "namespace": ns},
            "type": "Opaque",
            "stringData": {"username": user, "password": password}
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
    ];
    let list = |items: Vec<Value>| json!({"apiVersion": "v1", "kind": "List", "items": items});
    (list(domains), list(cluster))
}
