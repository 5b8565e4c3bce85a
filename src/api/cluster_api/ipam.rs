//! The Cluster API IPAM objects a Machine with `addressesFromPools` works with, only as far as
//! this provider reads or writes them. None of them is served here: the claim and address types
//! are CAPI's (`ipam.cluster.x-k8s.io/v1beta1`, `api/ipam/v1beta1` in kubernetes-sigs/cluster-api),
//! the pools are the in-cluster IPAM provider's (`ipam.cluster.x-k8s.io/v1alpha2`,
//! kubernetes-sigs/cluster-api-ipam-provider-in-cluster `api/v1alpha2`). In a cluster an IPAM
//! provider binds the claims; in local mode the pools in the manifests are allocated by local
//! mode itself (`plan::ipam`).
//!
//! Fields this provider does not know are dropped when it stores an object (local mode only
//! stores what it created or what the manifests gave).
use k8s_openapi::api::core::v1::{LocalObjectReference, TypedLocalObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::api::conditions::CapiCondition;

/// `ipam.cluster.x-k8s.io`.
pub const IPAM_GROUP: &str = "ipam.cluster.x-k8s.io";
/// The version of the claims and addresses machine-api-operator writes and reads.
pub const CLAIM_API_VERSION: &str = "ipam.cluster.x-k8s.io/v1beta1";
/// The in-cluster provider's pool version.
pub const POOL_API_VERSION: &str = "ipam.cluster.x-k8s.io/v1alpha2";
/// `IPAddressClaim`.
pub const CLAIM_KIND: &str = "IPAddressClaim";
/// `IPAddress`.
pub const ADDRESS_KIND: &str = "IPAddress";
/// The namespaced pool kind.
pub const POOL_KIND: &str = "InClusterIPPool";
/// The cluster-scoped pool kind.
pub const GLOBAL_POOL_KIND: &str = "GlobalInClusterIPPool";
/// machine-api-operator's finalizer on the claims a Machine made; removed once its VM is gone.
pub const CLAIM_FINALIZER: &str = "machine.openshift.io/ip-claim-protection";

fn claim_api_version() -> String {
    CLAIM_API_VERSION.into()
}

/// `IPAddressClaim` (v1beta1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressClaim {
    #[serde(default = "claim_api_version")]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: IpAddressClaimSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<IpAddressClaimStatus>,
}

/// `IPAddressClaimSpec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressClaimSpec {
    /// The pool to allocate from. machine-api-operator puts the provider spec's `resource`
    /// into `kind` (upstream's quirk, kept).
    #[serde(default)]
    pub pool_ref: TypedLocalObjectReference,
}

/// `IPAddressClaimStatus`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressClaimStatus {
    /// The bound IPAddress (set by the IPAM provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_ref: Option<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
}

impl IpAddressClaim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or("default"),
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }

    /// The name of the bound IPAddress, if the claim is bound.
    pub fn bound_address(&self) -> Option<&str> {
        self.status
            .as_ref()?
            .address_ref
            .as_ref()
            .map(|r| r.name.as_str())
            .filter(|n| !n.is_empty())
    }

    /// Why the IPAM provider could not bind it, if it says (a False condition's message).
    pub fn failure(&self) -> Option<&str> {
        self.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.status == crate::api::conditions::STATUS_FALSE)
            .and_then(|c| c.message.as_deref())
    }
}

/// `IPAddress` (v1beta1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IpAddress {
    #[serde(default = "claim_api_version")]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: IpAddressSpec,
}

/// `IPAddressSpec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressSpec {
    #[serde(default)]
    pub claim_ref: LocalObjectReference,
    #[serde(default)]
    pub pool_ref: TypedLocalObjectReference,
    #[serde(default)]
    pub address: String,
    #[serde(default)]
    pub prefix: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
}

fn pool_api_version() -> String {
    POOL_API_VERSION.into()
}

/// `InClusterIPPool` or `GlobalInClusterIPPool` (v1alpha2; the two share their spec).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InClusterIpPool {
    #[serde(default = "pool_api_version")]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: InClusterIpPoolSpec,
}

/// `InClusterIPPoolSpec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InClusterIpPoolSpec {
    /// Single addresses, ranges (`a-b`) and CIDRs; may be non-contiguous.
    #[serde(default)]
    pub addresses: Vec<String>,
    /// The network prefix length of the addresses handed out.
    #[serde(default)]
    pub prefix: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Hand out the network and broadcast addresses (IPv4) or the anycast address (IPv6) too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allocate_reserved_ip_addresses: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_addresses: Vec<String>,
}

impl InClusterIpPool {
    /// True for `GlobalInClusterIPPool` (cluster-scoped).
    pub fn global(&self) -> bool {
        self.kind == GLOBAL_POOL_KIND
    }

    /// How a claim names it: `Kind/name` for a global pool, `Kind/namespace/name` otherwise.
    pub fn key(&self) -> String {
        let name = self.metadata.name.as_deref().unwrap_or_default();
        if self.global() {
            format!("{GLOBAL_POOL_KIND}/{name}")
        } else {
            let ns = self.metadata.namespace.as_deref().unwrap_or("default");
            format!("{POOL_KIND}/{ns}/{name}")
        }
    }
}
