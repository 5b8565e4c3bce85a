//! `VSphereFailureDomain` (`infrastructure.cluster.x-k8s.io/v1beta1`, cluster-scoped): a region and
//! a zone, each a vSphere tag on a Datacenter, ComputeCluster or the hosts of a HostGroup, plus the
//! topology (datacenter, compute cluster, hosts, networks, datastore) machines in it use.
//!
//! Fields, JSON names and enum values are those of cluster-api-provider-vsphere v1.15.0
//! (`apis/v1beta1/vspherefailuredomain_types.go`). Upstream has no status subresource for this kind.

use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// VSphereFailureDomainSpec defines the desired state of VSphereFailureDomain.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "VSphereFailureDomain",
    plural = "vspherefailuredomains",
    shortname = "vspherefd",
    category = "cluster-api",
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
    /// Region defines the name and type of a region
    pub region: FailureDomain,
    /// Zone defines the name and type of a zone
    pub zone: FailureDomain,
    /// Topology describes a given failure domain using vSphere constructs
    pub topology: Topology,
}

/// The name and type of a region or zone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    /// Name is the name of the tag that represents this failure domain
    pub name: String,
    /// Type is the type of failure domain, the current values are "Datacenter", "ComputeCluster" and "HostGroup"
    #[serde(rename = "type")]
    pub type_: FailureDomainType,
    /// TagCategory is the category used for the tag
    pub tag_category: String,
    /// AutoConfigure tags the Type which is specified in the Topology
    ///
    /// Deprecated upstream (removed in CAPV v1beta2). This provider honours it: it creates the tag
    /// category and tag and attaches them, and for a HostGroup zone also the host group, VM group
    /// and VM-host affinity rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_configure: Option<bool>,
}

pub use crate::api::infrastructure::v1beta2::vsphere_failure_domain::FailureDomainType;

/// Topology describes a given failure domain using vSphere constructs
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    /// Datacenter as the failure domain.
    pub datacenter: String,
    /// ComputeCluster as the failure domain
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_cluster: Option<String>,
    /// Hosts has information required for placement of machines on VSphere hosts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<FailureDomainHosts>,
    /// Networks is the list of networks within this failure domain
    #[serde(skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<String>>,
    /// NetworkConfigurations is a list of network configurations within this failure domain.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["networkName"]))]
    pub network_configurations: Option<Vec<NetworkConfiguration>>,
    /// Datastore is the name or inventory path of the datastore in which the
    /// virtual machine is created/located.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datastore: Option<String>,
}

/// The VM group and host group of a HostGroup failure domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainHosts {
    /// VMGroupName is the name of the VM group
    pub vm_group_name: String,
    /// HostGroupName is the name of the Host group
    pub host_group_name: String,
}

/// NetworkConfiguration defines a network configuration that should be used when consuming
/// a failure domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkConfiguration {
    /// NetworkName is the network name for this machine's VM.
    pub network_name: String,
    /// DHCP4 is a flag that indicates whether or not to use DHCP for IPv4.
    #[serde(rename = "dhcp4", skip_serializing_if = "Option::is_none")]
    pub dhcp4: Option<bool>,
    /// DHCP6 is a flag that indicates whether or not to use DHCP for IPv6.
    #[serde(rename = "dhcp6", skip_serializing_if = "Option::is_none")]
    pub dhcp6: Option<bool>,
    /// Nameservers is a list of IPv4 and/or IPv6 addresses used as DNS nameservers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nameservers: Option<Vec<String>>,
    /// SearchDomains is a list of search domains used when resolving IP addresses with DNS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_domains: Option<Vec<String>>,
    /// DHCP4Overrides allows for the control over several DHCP behaviors.
    #[serde(rename = "dhcp4Overrides", skip_serializing_if = "Option::is_none")]
    pub dhcp4_overrides: Option<DhcpOverrides>,
    /// DHCP6Overrides allows for the control over several DHCP behaviors.
    #[serde(rename = "dhcp6Overrides", skip_serializing_if = "Option::is_none")]
    pub dhcp6_overrides: Option<DhcpOverrides>,
    /// AddressesFromPools is a list of IPAddressPools that should be assigned to IPAddressClaims.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addresses_from_pools: Option<Vec<TypedLocalObjectReference>>,
}

/// DHCPOverrides allows for the control over several DHCP behaviors (netplan dhcp-overrides).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DhcpOverrides {
    /// Hostname is the name which will be sent to the DHCP server instead of the machine's hostname.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// RouteMetric is used to prioritize routes for devices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_metric: Option<i64>,
    /// SendHostname when `true`, the hostname of the machine will be sent to the DHCP server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_hostname: Option<bool>,
    /// UseDNS when `true`, the DNS servers in the DHCP server will be used and take precedence.
    #[serde(rename = "useDNS", skip_serializing_if = "Option::is_none")]
    pub use_dns: Option<bool>,
    /// UseDomains can take the values `true`, `false`, or `route`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_domains: Option<String>,
    /// UseHostname when `true`, the hostname from the DHCP server will be set as the transient hostname.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_hostname: Option<bool>,
    /// UseMTU when `true`, the MTU from the DHCP server will be set as the MTU of the device.
    #[serde(rename = "useMTU", skip_serializing_if = "Option::is_none")]
    pub use_mtu: Option<bool>,
    /// UseNTP when `true`, the NTP servers from the DHCP server will be used by systemd-timesyncd.
    #[serde(rename = "useNTP", skip_serializing_if = "Option::is_none")]
    pub use_ntp: Option<bool>,
    /// UseRoutes when `true`, the routes from the DHCP server will be installed in the routing table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_routes: Option<String>,
}
