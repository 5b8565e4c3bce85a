//! OpenShift's `Infrastructure` (`config.openshift.io/v1`, cluster-scoped), only as far as a
//! control plane machine set needs it: the vSphere failure domains of
//! `spec.platformSpec.vsphere.failureDomains[]` and `status.infrastructureName`.
//!
//! The type is OpenShift's (openshift/api `config/v1/types_infrastructure.go`): this provider
//! serves no CRD for it. Fields it does not know are kept as they are (`extra`), so a stored
//! object round-trips unchanged.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `config.openshift.io/v1`.
pub const API_VERSION: &str = "config.openshift.io/v1";
/// `Infrastructure`.
pub const KIND: &str = "Infrastructure";
/// The one Infrastructure a cluster has.
pub const CLUSTER: &str = "cluster";

/// `config.openshift.io/v1` `Infrastructure`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Infrastructure {
    #[serde(default = "api_version")]
    pub api_version: String,
    #[serde(default = "kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: InfrastructureSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<InfrastructureStatus>,
}

fn api_version() -> String {
    API_VERSION.into()
}

fn kind() -> String {
    KIND.into()
}

/// `spec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_spec: Option<PlatformSpec>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `spec.platformSpec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlatformSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vsphere: Option<VSpherePlatformSpec>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `spec.platformSpec.vsphere`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VSpherePlatformSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure_domains: Vec<VSpherePlatformFailureDomainSpec>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `spec.platformSpec.vsphere.failureDomains`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VSpherePlatformFailureDomainSpec {
    #[serde(default)]
    pub name: String,
    /// The `openshift-region` tag value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub region: String,
    /// The `openshift-zone` tag value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub zone: String,
    /// The vCenter.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub server: String,
    #[serde(default)]
    pub topology: VSpherePlatformTopology,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_affinity: Option<ZoneAffinity>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `topology` of a failure domain. Paths as the installer writes them (absolute, sometimes
/// with `//`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VSpherePlatformTopology {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub datacenter: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub compute_cluster: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub datastore: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_pool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `zoneAffinity`: only `hostGroup.vmGroup` is used.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ZoneAffinity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_group: Option<HostGroup>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `zoneAffinity.hostGroup`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HostGroup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_group: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_name: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Infrastructure {
    /// The vSphere failure domains (empty when there are none).
    pub fn vsphere_failure_domains(&self) -> &[VSpherePlatformFailureDomainSpec] {
        self.spec
            .platform_spec
            .as_ref()
            .and_then(|p| p.vsphere.as_ref())
            .map_or(&[], |v| v.failure_domains.as_slice())
    }

    /// The vSphere failure domain of that name.
    pub fn vsphere_failure_domain(&self, name: &str) -> Option<&VSpherePlatformFailureDomainSpec> {
        self.vsphere_failure_domains()
            .iter()
            .find(|d| d.name == name)
    }

    /// `status.infrastructureName`, when set and not empty.
    pub fn infrastructure_name(&self) -> Option<&str> {
        self.status
            .as_ref()
            .and_then(|s| s.infrastructure_name.as_deref())
            .filter(|n| !n.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_round_trip() {
        let v = serde_json::json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": "cluster"},
            "spec": {
                "cloudConfig": {"key": "config", "name": "cloud-provider-config"},
                "platformSpec": {"type": "VSphere", "vsphere": {
                    "vcenters": [{"server": "vc"}],
                    "failureDomains": [{
                        "name": "us-east-1", "region": "us-east", "zone": "us-east-1a",
                        "server": "vc",
                        "topology": {"datacenter": "IBMCloud", "computeCluster": "/IBMCloud/host/c1",
                                     "datastore": "/IBMCloud/datastore/ds", "networks": ["n"]},
                        "zoneAffinity": {"type": "HostGroup", "hostGroup": {"vmGroup": "vg", "hostGroup": "hg"}}
                    }]
                }}
            },
            "status": {"infrastructureName": "infra-x", "platform": "VSphere"}
        });
        let i: Infrastructure = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(i.infrastructure_name(), Some("infra-x"));
        let d = i.vsphere_failure_domain("us-east-1").unwrap();
        assert_eq!(
            d.zone_affinity
                .as_ref()
                .and_then(|z| z.host_group.as_ref())
                .and_then(|h| h.vm_group.as_deref()),
            Some("vg")
        );
        assert_eq!(serde_json::to_value(&i).unwrap(), v);
    }
}
