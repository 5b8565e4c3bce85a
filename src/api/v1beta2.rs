//! `infrastructure.cluster.x-k8s.io/v1beta2` VSphereFailureDomain and VSphereDeploymentZone, as
//! cluster-api-provider-vsphere main stores them (`api/govmomi/v1beta2`), so manifests written
//! for CAPV main apply unchanged.
//!
//! Served, not stored: v1beta1 stays the storage version and the one the controllers use. The
//! CRD's conversion strategy is `None` (the apiserver only rewrites `apiVersion`): the specs are
//! compatible (v1beta2 drops `autoConfigure`, makes `computeCluster` and `hosts` plain values,
//! adds length limits and, on main, `topology.template` and the zone's `thumbprint` /
//! `identityRef`, which the v1beta1 storage schema prunes). Status moved in v1beta2
//! (`status.conditions` became metav1 conditions); reading a zone's status through v1beta2 is
//! therefore lossy — use v1beta1 for status. [`to_v1beta1`] is the conversion local mode and
//! admission use for objects read from files.

use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::conditions::{CapiCondition, MetaCondition};
use super::failure_domain::{DhcpOverrides, FailureDomainType};
use super::vsphere_cluster::VSphereIdentityReference;

/// The `apiVersion` of this module's kinds.
pub const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1beta2";

/// VSphereFailureDomainSpec defines the desired state of VSphereFailureDomain.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereFailureDomain",
    plural = "vspherefailuredomains",
    shortname = "vspherefd",
    category = "cluster-api",
    storage = false,
    doc = "VSphereFailureDomain is the Schema for the vspherefailuredomains API.",
    derive = "PartialEq",
    printcolumn(
        name = "Region",
        type_ = "string",
        json_path = ".spec.region.name",
        description = "Region tag"
    ),
    printcolumn(
        name = "Zone",
        type_ = "string",
        json_path = ".spec.zone.name",
        description = "Zone tag"
    ),
    printcolumn(
        name = "Zone Type",
        type_ = "string",
        json_path = ".spec.zone.type",
        description = "What the zone tag is attached to"
    ),
    printcolumn(
        name = "Datacenter",
        type_ = "string",
        json_path = ".spec.topology.datacenter",
        description = "Datacenter"
    ),
    printcolumn(
        name = "Compute Cluster",
        type_ = "string",
        json_path = ".spec.topology.computeCluster",
        description = "Compute cluster"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereFailureDomainSpec {
    /// region defines the name and type of a region
    pub region: FailureDomain,
    /// zone defines the name and type of a zone
    pub zone: FailureDomain,
    /// topology describes a given failure domain using vSphere constructs
    pub topology: Topology,
}

/// FailureDomain contains data to identify and configure a failure domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    /// name is the name of the tag that represents this failure domain
    #[schemars(length(min = 1, max = 1024))]
    pub name: String,
    /// type is the type of failure domain, the current values are "Datacenter", "ComputeCluster" and "HostGroup"
    #[serde(rename = "type")]
    pub type_: FailureDomainType,
    /// tagCategory is the category used for the tag
    #[schemars(length(min = 1, max = 1024))]
    pub tag_category: String,
}

/// Topology describes a given failure domain using vSphere constructs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    /// datacenter as the failure domain.
    #[schemars(length(min = 1, max = 2048))]
    pub datacenter: String,
    /// computeCluster as the failure domain
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub compute_cluster: Option<String>,
    /// hosts has information required for placement of machines on VSphere hosts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<FailureDomainHosts>,
    /// networks is the list of networks within this failure domain
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), inner(length(min = 1, max = 2048)))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub networks: Option<Vec<String>>,
    /// networkConfigurations is a list of network configurations within this failure domain.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["networkName"]))]
    pub network_configurations: Option<Vec<NetworkConfiguration>>,
    /// datastore is the name or inventory path of the datastore in which the virtual machine is
    /// created/located.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub datastore: Option<String>,
    /// template is the name or inventory path of the template used to clone new machines in this
    /// failure domain (CAPV main; not used by this provider's v1beta1 storage).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub template: Option<String>,
}

/// FailureDomainHosts has information required for placement of machines on VSphere hosts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainHosts {
    /// vmGroupName is the name of the VM group
    #[schemars(length(min = 1, max = 2048))]
    pub vm_group_name: String,
    /// hostGroupName is the name of the Host group
    #[schemars(length(min = 1, max = 2048))]
    pub host_group_name: String,
}

/// NetworkConfiguration defines a network configuration that should be used when consuming a
/// failure domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkConfiguration {
    /// networkName is the network name for this machine's VM.
    #[schemars(length(min = 1, max = 2048))]
    pub network_name: String,
    /// dhcp4 is a flag that indicates whether or not to use DHCP for IPv4.
    #[serde(rename = "dhcp4", skip_serializing_if = "Option::is_none")]
    pub dhcp4: Option<bool>,
    /// dhcp6 is a flag that indicates whether or not to use DHCP for IPv6.
    #[serde(rename = "dhcp6", skip_serializing_if = "Option::is_none")]
    pub dhcp6: Option<bool>,
    /// nameservers is a list of IPv4 and/or IPv6 addresses used as DNS nameservers.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), inner(length(min = 1, max = 64)))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub nameservers: Option<Vec<String>>,
    /// searchDomains is a list of search domains used when resolving IP addresses with DNS.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), inner(length(min = 1, max = 1024)))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub search_domains: Option<Vec<String>>,
    /// dhcp4Overrides allows for the control over several DHCP behaviors.
    #[serde(rename = "dhcp4Overrides", skip_serializing_if = "Option::is_none")]
    pub dhcp4_overrides: Option<DhcpOverrides>,
    /// dhcp6Overrides allows for the control over several DHCP behaviors.
    #[serde(rename = "dhcp6Overrides", skip_serializing_if = "Option::is_none")]
    pub dhcp6_overrides: Option<DhcpOverrides>,
    /// addressesFromPools is a list of IPAddressPools that should be assigned to IPAddressClaims.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub addresses_from_pools: Option<Vec<TypedLocalObjectReference>>,
}

/// VSphereDeploymentZoneSpec defines the desired state of VSphereDeploymentZone.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereDeploymentZone",
    plural = "vspheredeploymentzones",
    shortname = "vspherezone",
    category = "cluster-api",
    storage = false,
    status = "VSphereDeploymentZoneStatus",
    doc = "VSphereDeploymentZone is the Schema for the vspheredeploymentzones API.",
    derive = "PartialEq",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.ready",
        description = "The zone was verified in vCenter"
    ),
    printcolumn(
        name = "Failure Domain",
        type_ = "string",
        json_path = ".spec.failureDomain",
        description = "The VSphereFailureDomain of this zone"
    ),
    printcolumn(
        name = "Server",
        type_ = "string",
        json_path = ".spec.server",
        description = "The vCenter server"
    ),
    printcolumn(
        name = "Control Plane",
        type_ = "boolean",
        json_path = ".spec.controlPlane",
        description = "Usable by control plane machines",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereDeploymentZoneSpec {
    /// server is the address of the vSphere endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub server: Option<String>,
    /// thumbprint is the colon-separated SHA-1 checksum of the given vCenter server's host
    /// certificate (CAPV main; pruned by the v1beta1 storage schema).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thumbprint: Option<String>,
    /// identityRef names the credentials for this zone's vCenter (CAPV main; pruned by the
    /// v1beta1 storage schema).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<VSphereIdentityReference>,
    /// failureDomain is the name of the VSphereFailureDomain used for this VSphereDeploymentZone
    #[schemars(length(min = 1, max = 253))]
    pub failure_domain: String,
    /// controlPlane determines if this failure domain is suitable for use by control plane machines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// placementConstraint encapsulates the placement constraints used within this deployment zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_constraint: Option<PlacementConstraint>,
}

/// PlacementConstraint is the context information for VM placements within a failure domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct PlacementConstraint {
    /// resourcePool is the name or inventory path of the resource pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub resource_pool: Option<String>,
    /// folder is the name or inventory path of the folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub folder: Option<String>,
}

/// VSphereDeploymentZoneStatus contains the status for a VSphereDeploymentZone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereDeploymentZoneStatus {
    /// conditions represents the observations of a VSphereDeploymentZone's current state.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<MetaCondition>>,
    /// ready is true when the VSphereDeploymentZone resource is ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// deprecated groups all the status fields that are deprecated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<DeprecatedStatus>,
}

/// `status.deprecated`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DeprecatedStatus {
    /// v1beta1 groups the status fields that are removed with v1beta1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<DeprecatedV1Beta1Status>,
}

/// `status.deprecated.v1beta1`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DeprecatedV1Beta1Status {
    /// conditions defines current service state of the VSphereDeploymentZone (CAPI v1beta1 style).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
}

/// Converts a v1beta2 VSphereFailureDomain or VSphereDeploymentZone (as JSON) to its v1beta1
/// form, as CAPV's conversion does; other objects are returned unchanged.
pub fn to_v1beta1(value: &Value) -> Value {
    let mut v = value.clone();
    if v.get("apiVersion").and_then(Value::as_str) != Some(API_VERSION) {
        return v;
    }
    let kind = v
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    v["apiVersion"] = Value::String("infrastructure.cluster.x-k8s.io/v1beta1".into());
    match kind.as_str() {
        "VSphereFailureDomain" => {
            // `hosts` is a value type in v1beta2: empty means unset.
            let unset = v
                .pointer("/spec/topology/hosts")
                .and_then(Value::as_object)
                .is_some_and(|hosts| {
                    let empty = |k: &str| {
                        hosts
                            .get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .is_empty()
                    };
                    empty("vmGroupName") && empty("hostGroupName")
                });
            if unset
                && let Some(t) = v
                    .pointer_mut("/spec/topology")
                    .and_then(Value::as_object_mut)
            {
                t.remove("hosts");
            }
        }
        "VSphereDeploymentZone" => {
            // Optional in v1beta2, required in v1beta1.
            if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
                spec.entry("placementConstraint")
                    .or_insert_with(|| serde_json::json!({}));
            }
            if let Some(status) = v.get_mut("status").and_then(Value::as_object_mut) {
                let new_conditions = status.remove("conditions");
                let old_conditions = status
                    .remove("deprecated")
                    .and_then(|d| d.pointer("/v1beta1/conditions").cloned());
                if let Some(c) = old_conditions {
                    status.insert("conditions".into(), c);
                }
                if let Some(c) = new_conditions {
                    status.insert("v1beta2".into(), serde_json::json!({"conditions": c}));
                }
            }
        }
        _ => {}
    }
    v
}

/// Converts a v1beta1 VSphereFailureDomain or VSphereDeploymentZone (as JSON) to its v1beta2
/// form, the inverse of [`to_v1beta1`]: the zone's CAPI-style conditions move to
/// `status.deprecated.v1beta1`, its `status.v1beta2.conditions` become `status.conditions`, and
/// an empty `placementConstraint` (required in v1beta1, `minProperties: 1` in v1beta2) is
/// dropped so the object can be written back through v1beta2. Fields v1beta2 has no place for
/// (`autoConfigure`) are the concern of [`super::conversion`], which keeps them.
pub fn to_v1beta2(value: &Value) -> Value {
    let mut v = value.clone();
    if v.get("apiVersion").and_then(Value::as_str)
        != Some("infrastructure.cluster.x-k8s.io/v1beta1")
    {
        return v;
    }
    v["apiVersion"] = Value::String(API_VERSION.into());
    if v.get("kind").and_then(Value::as_str) == Some("VSphereDeploymentZone") {
        if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut)
            && spec
                .get("placementConstraint")
                .and_then(Value::as_object)
                .is_some_and(|p| p.is_empty())
        {
            spec.remove("placementConstraint");
        }
        if let Some(status) = v.get_mut("status").and_then(Value::as_object_mut) {
            let old_conditions = status.remove("conditions");
            let new_conditions = status
                .remove("v1beta2")
                .and_then(|g| g.get("conditions").cloned());
            if let Some(c) = new_conditions {
                status.insert("conditions".into(), c);
            }
            if let Some(c) = old_conditions {
                status.insert(
                    "deprecated".into(),
                    serde_json::json!({"v1beta1": {"conditions": c}}),
                );
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn converts_to_v1beta1() {
        let fd = json!({"apiVersion": API_VERSION, "kind": "VSphereFailureDomain", "metadata": {"name": "a"},
            "spec": {"topology": {"datacenter": "DC0", "hosts": {"vmGroupName": "", "hostGroupName": ""}}}});
        let v1 = to_v1beta1(&fd);
        assert_eq!(v1["apiVersion"], "infrastructure.cluster.x-k8s.io/v1beta1");
        assert!(v1["spec"]["topology"].get("hosts").is_none());
        let zone = json!({"apiVersion": API_VERSION, "kind": "VSphereDeploymentZone", "metadata": {"name": "a"},
            "status": {"ready": true, "conditions": [{"type": "Ready"}],
                       "deprecated": {"v1beta1": {"conditions": [{"type": "Ready", "status": "True"}]}}}});
        let v1 = to_v1beta1(&zone);
        assert_eq!(
            v1["status"],
            json!({"ready": true, "conditions": [{"type": "Ready", "status": "True"}],
            "v1beta2": {"conditions": [{"type": "Ready"}]}})
        );
        let other = json!({"apiVersion": "v1", "kind": "Secret"});
        assert_eq!(to_v1beta1(&other), other);
    }

    #[test]
    fn converts_to_v1beta2_and_back() {
        let zone = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereDeploymentZone", "metadata": {"name": "a"},
            "spec": {"failureDomain": "a", "placementConstraint": {}},
            "status": {"ready": true, "conditions": [{"type": "Ready", "status": "True"}],
                       "v1beta2": {"conditions": [{"type": "Ready"}]}}});
        let v2 = to_v1beta2(&zone);
        assert_eq!(v2["apiVersion"], API_VERSION);
        assert!(v2["spec"].get("placementConstraint").is_none());
        assert_eq!(
            v2["status"],
            json!({"ready": true, "conditions": [{"type": "Ready"}],
                   "deprecated": {"v1beta1": {"conditions": [{"type": "Ready", "status": "True"}]}}})
        );
        assert_eq!(to_v1beta1(&v2), zone);
        let secret = json!({"apiVersion": "v1", "kind": "Secret"});
        assert_eq!(to_v1beta2(&secret), secret);
    }
}
