//! Pieces several v1beta2 kinds share: the `status.deprecated.v1beta1` group that keeps the
//! v1beta1 condition and failure fields through the conversion, metav1 conditions, identity
//! references and template metadata.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::conditions::{CapiCondition, MetaCondition};

/// `status.deprecated`: where v1beta2 keeps what v1beta1 clients still read until CAPV stops
/// serving v1beta1.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DeprecatedStatus {
    /// v1beta1 groups the status fields that are removed with v1beta1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<DeprecatedV1Beta1Status>,
}

impl DeprecatedStatus {
    /// `deprecated.v1beta1.conditions` of a status, created empty where absent: where a planner
    /// keeps the v1beta1 conditions it still writes for v1beta1 readers.
    pub fn v1beta1_conditions_mut(this: &mut Option<Self>) -> &mut Vec<CapiCondition> {
        this.get_or_insert_with(Default::default)
            .v1beta1
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
    }

    /// `deprecated.v1beta1.conditions` of a status (empty where absent).
    pub fn v1beta1_conditions(this: &Option<Self>) -> &[CapiCondition] {
        this.as_ref()
            .and_then(|d| d.v1beta1.as_ref())
            .and_then(|v| v.conditions.as_deref())
            .unwrap_or_default()
    }
}

/// `status.deprecated.v1beta1`, as the kinds without terminal failures have it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DeprecatedV1Beta1Status {
    /// conditions in the Cluster API v1beta1 shape (the names v1beta1 clients know).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
}

/// `status.deprecated`, for the kinds that had v1beta1 terminal failure fields.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DeprecatedFailureStatus {
    /// v1beta1 groups the status fields that are removed with v1beta1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<DeprecatedV1Beta1FailureStatus>,
}

impl DeprecatedFailureStatus {
    /// `deprecated.v1beta1` of a status, created empty where absent: where a planner writes
    /// the v1beta1 conditions and failure fields it keeps for v1beta1 readers.
    pub fn v1beta1_mut(this: &mut Option<Self>) -> &mut DeprecatedV1Beta1FailureStatus {
        this.get_or_insert_with(Default::default)
            .v1beta1
            .get_or_insert_with(Default::default)
    }

    /// `deprecated.v1beta1.conditions` of a status (empty where absent).
    pub fn v1beta1_conditions(this: &Option<Self>) -> &[CapiCondition] {
        let v1beta1 = this.as_ref().and_then(|d| d.v1beta1.as_ref());
        v1beta1
            .and_then(|v| v.conditions.as_deref())
            .unwrap_or_default()
    }
}

/// `status.deprecated.v1beta1` with the v1beta1 terminal failure fields: v1beta2 reports
/// failures as conditions only, but a v1beta1 reader still gets them back.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeprecatedV1Beta1FailureStatus {
    /// conditions in the Cluster API v1beta1 shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
    /// failureReason: a terminal problem, for v1beta1 readers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// failureMessage: a terminal problem, for v1beta1 readers.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10240))]
    pub failure_message: Option<String>,
}

/// Adds `field` to an object schema's `required` list and drops the default schemars gives it:
/// for a field whose Rust type decodes absent as empty (`serde(default)`, which schemars reads
/// as optional with a default) so that objects stored before the field was required still
/// decode, while the CRD requires it as CAPV's does.
pub(crate) fn require(schema: &mut schemars::Schema, field: &str) {
    if let Some(obj) = schema.as_object_mut() {
        if let Some(property) = obj
            .get_mut("properties")
            .and_then(|p| p.get_mut(field))
            .and_then(serde_json::Value::as_object_mut)
        {
            property.remove("default");
        }
        let required = obj
            .entry("required")
            .or_insert_with(|| serde_json::Value::Array(Vec::new()));
        if let Some(list) = required.as_array_mut()
            && !list.iter().any(|f| f == field)
        {
            list.push(field.into());
            list.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        }
    }
}

/// metav1 conditions are keyed by type (`listType=map`), at most 32 per object.
pub(crate) type Conditions = Option<Vec<MetaCondition>>;

/// `status.initialization`: the v1beta2 contract's `provisioned` flag, which replaces
/// v1beta1's `status.ready` for CAPI.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct Initialization {
    /// provisioned is true once the infrastructure is ready; never set back to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// The kinds of object a VSphereCluster can take its vCenter credentials from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum VSphereIdentityKind {
    /// A cluster-scoped VSphereClusterIdentity lent to the cluster's namespace.
    VSphereClusterIdentity,
    /// A Secret in the cluster's namespace.
    Secret,
}

/// VSphereIdentityReference names the credentials of a cluster.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct VSphereIdentityReference {
    /// kind of the identity.
    pub kind: VSphereIdentityKind,
    /// name of the identity.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Labels and annotations a template stamps onto what it creates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct ObjectMeta {
    /// labels to put on the created object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// annotations to put on the created object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// A reference to a pool in the v1beta2 core shape: no apiVersion, the group is required.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpPoolReference {
    /// apiGroup of the pool kind.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN))]
    pub api_group: String,
    /// kind of the pool (InClusterIPPool, GlobalInClusterIPPool, ...).
    #[schemars(length(min = 1, max = 63), regex(pattern = KIND_PATTERN))]
    pub kind: String,
    /// name of the pool.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN))]
    pub name: String,
}

const DNS_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const KIND_PATTERN: &str = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$";

/// DHCPOverrides: netplan's dhcp-overrides for one device; v1beta2 bounds the strings and
/// makes the route metric an int32.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DhcpOverrides {
    /// hostname sent to the DHCP server instead of the machine's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub hostname: Option<String>,
    /// routeMetric of the routes the DHCP server hands out.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub route_metric: Option<i32>,
    /// sendHostname: whether the machine's hostname goes to the DHCP server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_hostname: Option<bool>,
    /// useDNS: whether the DHCP server's DNS servers take precedence.
    #[serde(rename = "useDNS", skip_serializing_if = "Option::is_none")]
    pub use_dns: Option<bool>,
    /// useDomains: `true`, `false` or `route`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub use_domains: Option<String>,
    /// useHostname: whether the DHCP server's hostname becomes the transient hostname.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_hostname: Option<bool>,
    /// useMTU: whether the DHCP server's MTU is applied.
    #[serde(rename = "useMTU", skip_serializing_if = "Option::is_none")]
    pub use_mtu: Option<bool>,
    /// useNTP: whether the DHCP server's NTP servers are used.
    #[serde(rename = "useNTP", skip_serializing_if = "Option::is_none")]
    pub use_ntp: Option<bool>,
    /// useRoutes: `true`, `false` or `route`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub use_routes: Option<String>,
}
