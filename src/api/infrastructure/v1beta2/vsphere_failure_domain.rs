//! VSphereFailureDomain at `infrastructure.cluster.x-k8s.io/v1beta2`: CAPV v1.17's schema plus
//! `autoConfigure` on the region and zone, which CAPV dropped and this provider implements.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{DhcpOverrides, IpPoolReference};

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
    /// autoConfigure: create the tag category, tag and (for HostGroup) the groups and rule.
    /// CAPV dropped it from v1beta2; this provider implements it, so its v1beta2 keeps it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_configure: Option<bool>,
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
    pub addresses_from_pools: Option<Vec<IpPoolReference>>,
}

/// What a region or zone tag is attached to (the default, Datacenter, is only for building
/// values in code; the field is required).
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    JsonSchema,
)]
pub enum FailureDomainType {
    /// A datacenter.
    #[default]
    Datacenter,
    /// A compute cluster.
    ComputeCluster,
    /// The hosts of a host group.
    HostGroup,
}

impl FailureDomainType {
    /// The JSON value.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureDomainType::Datacenter => "Datacenter",
            FailureDomainType::ComputeCluster => "ComputeCluster",
            FailureDomainType::HostGroup => "HostGroup",
        }
    }

    /// How wide the failure domain is: Datacenter (3) ⊃ ComputeCluster (2) ⊃ HostGroup (1).
    pub fn breadth(self) -> u8 {
        match self {
            FailureDomainType::Datacenter => 3,
            FailureDomainType::ComputeCluster => 2,
            FailureDomainType::HostGroup => 1,
        }
    }
}

impl std::fmt::Display for FailureDomainType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl VSphereFailureDomainSpec {
    /// The networks machines in this failure domain use, in order: `networks`, else the names of
    /// `networkConfigurations`.
    pub fn network_names(&self) -> Vec<&str> {
        if let Some(n) = &self.topology.networks {
            return n.iter().map(String::as_str).collect();
        }
        self.topology
            .network_configurations
            .iter()
            .flatten()
            .map(|c| c.network_name.as_str())
            .collect()
    }
}
