//! `ControlPlaneMachineSet` (`machine.openshift.io/v1`, namespaced).
//!
//! Fields, defaults, enums and CEL rules follow openshift/api `machine/v1/types_controlplanemachineset.go`
//! and its ungated generated CRD. A vSphere failure-domain name is the name of a
//! VSphereDeploymentZone (DESIGN.md §3), else of a failure domain of OpenShift's `Infrastructure`
//! `cluster` (`api::infrastructure`, `plan::infra_domain`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::api::conditions::MetaCondition;
use crate::api::machine::{CLUSTER_ID_LABEL, MACHINE_ROLE_LABEL, MACHINE_TYPE_LABEL, MachineSpec};

/// Finalizer the CPMS operator puts on the ControlPlaneMachineSet.
pub const CPMS_FINALIZER: &str = "controlplanemachineset.machine.openshift.io";
/// The only supported `template.machineType`.
pub const MACHINE_TYPE_V1BETA1: &str = "machines_v1beta1_machine_openshift_io";

/// CEL rules of the CRD, with their messages, as upstream writes them. The admission code
/// implements each one (see `webhook::control_plane_machine_set`); a test checks that the CRD
/// carries exactly these.
pub mod cel {
    /// `spec.machineNamePrefix`.
    pub const NAME_PREFIX_RULE: &str = "!format.dns1123Subdomain().validate(self).hasValue()";
    /// Message of [`NAME_PREFIX_RULE`].
    pub const NAME_PREFIX_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lowercase alphanumeric characters, hyphens ('-'), and periods ('.'). Each block, separated by periods, must start and end with an alphanumeric character. Hyphens are not allowed at the start or end of a block, and consecutive periods are not permitted.";
    /// `spec.replicas`.
    pub const REPLICAS_RULE: &str = "self == oldSelf";
    /// Message of [`REPLICAS_RULE`].
    pub const REPLICAS_MESSAGE: &str = "replicas is immutable";
    /// `spec.selector`.
    pub const SELECTOR_RULE: &str = "self == oldSelf";
    /// Message of [`SELECTOR_RULE`].
    pub const SELECTOR_MESSAGE: &str = "selector is immutable";
    /// `spec.state`.
    pub const STATE_RULE: &str = "oldSelf != 'Active' || self == oldSelf";
    /// Message of [`STATE_RULE`].
    pub const STATE_MESSAGE: &str = "state cannot be changed once Active";
    /// `spec.template`.
    pub const TEMPLATE_RULE: &str = "has(self.machineType) && self.machineType == 'machines_v1beta1_machine_openshift_io' ?  has(self.machines_v1beta1_machine_openshift_io) : !has(self.machines_v1beta1_machine_openshift_io)";
    /// Message of [`TEMPLATE_RULE`].
    pub const TEMPLATE_MESSAGE: &str = "machines_v1beta1_machine_openshift_io configuration is required when machineType is machines_v1beta1_machine_openshift_io, and forbidden otherwise";
    /// Template label rules: (rule, message).
    pub const LABEL_RULES: [(&str, &str); 3] = [
        (
            "'machine.openshift.io/cluster-api-machine-role' in self && self['machine.openshift.io/cluster-api-machine-role'] == 'master'",
            "label 'machine.openshift.io/cluster-api-machine-role' is required, and must have value 'master'",
        ),
        (
            "'machine.openshift.io/cluster-api-machine-type' in self && self['machine.openshift.io/cluster-api-machine-type'] == 'master'",
            "label 'machine.openshift.io/cluster-api-machine-type' is required, and must have value 'master'",
        ),
        (
            "'machine.openshift.io/cluster-api-cluster' in self",
            "label 'machine.openshift.io/cluster-api-cluster' is required",
        ),
    ];
    /// Failure-domain platform lists: (JSON field, platform value). Each has the rule
    /// `has(self.platform) && self.platform == '<P>' ?  has(self.<f>) : !has(self.<f>)`.
    pub const PLATFORM_LISTS: [(&str, &str); 6] = [
        ("aws", "AWS"),
        ("azure", "Azure"),
        ("gcp", "GCP"),
        ("openstack", "OpenStack"),
        ("vsphere", "VSphere"),
        ("nutanix", "Nutanix"),
    ];

    /// The rule for a platform list.
    pub fn platform_rule(field: &str, platform: &str) -> String {
        format!(
            "has(self.platform) && self.platform == '{platform}' ?  has(self.{field}) : !has(self.{field})"
        )
    }

    /// The message for a platform list.
    pub fn platform_message(field: &str, platform: &str) -> String {
        format!(
            "{field} configuration is required when platform is {platform}, and forbidden otherwise"
        )
    }
}

/// Platform types accepted by `failureDomains.platform` (openshift/api `configv1.PlatformType`).
pub const PLATFORM_TYPES: [&str; 17] = [
    "",
    "AWS",
    "Azure",
    "BareMetal",
    "GCP",
    "Libvirt",
    "OpenStack",
    "None",
    "VSphere",
    "oVirt",
    "IBMCloud",
    "KubeVirt",
    "EquinixMetal",
    "PowerVS",
    "AlibabaCloud",
    "Nutanix",
    "External",
];

/// ControlPlaneMachineSet represents the configuration of the ControlPlaneMachineSet.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machine.openshift.io",
    version = "v1",
    kind = "ControlPlaneMachineSet",
    plural = "controlplanemachinesets",
    namespaced,
    shortname = "cpms",
    category = "machine-api",
    status = "ControlPlaneMachineSetStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas"
    ),
    doc = "ControlPlaneMachineSet ensures that a specified number of control plane machine replicas are running at any given time.",
    derive = "PartialEq",
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Desired Replicas"
    ),
    printcolumn(
        name = "Current",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "Current Replicas"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Ready Replicas"
    ),
    printcolumn(
        name = "Updated",
        type_ = "integer",
        json_path = ".status.updatedReplicas",
        description = "Updated Replicas"
    ),
    printcolumn(
        name = "Unavailable",
        type_ = "integer",
        json_path = ".status.unavailableReplicas",
        description = "Observed number of unavailable replicas"
    ),
    printcolumn(
        name = "State",
        type_ = "string",
        json_path = ".spec.state",
        description = "ControlPlaneMachineSet state"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "ControlPlaneMachineSet age"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneMachineSetSpec {
    /// machineNamePrefix is the prefix used when creating machine names. Each machine name will
    /// consist of this prefix, followed by a randomly generated string of 5 characters, and the
    /// index of the machine. It must be a lowercase RFC 1123 subdomain between 1 and 245
    /// characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 245))]
    #[schemars(extend("x-kubernetes-validations" = [{"message": cel::NAME_PREFIX_MESSAGE, "rule": cel::NAME_PREFIX_RULE}]))]
    pub machine_name_prefix: Option<String>,
    /// state defines whether the ControlPlaneMachineSet is Active or Inactive. Once Active, a
    /// ControlPlaneMachineSet cannot be made Inactive. To prevent further action please remove the
    /// ControlPlaneMachineSet.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Inactive", "x-kubernetes-validations" = [{"message": cel::STATE_MESSAGE, "rule": cel::STATE_RULE}]))]
    pub state: Option<ControlPlaneMachineSetState>,
    /// replicas defines how many Control Plane Machines should be created by this
    /// ControlPlaneMachineSet. This field is immutable. 3 and 5 are the only valid values.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required, schema_with = "replicas_schema")]
    pub replicas: Option<i32>,
    /// strategy defines how the ControlPlaneMachineSet will update Machines when it detects a
    /// change to the ProviderSpec.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"type": "RollingUpdate"}))]
    pub strategy: Option<ControlPlaneMachineSetStrategy>,
    /// Label selector for Machines. Existing Machines selected by this selector will be the ones
    /// affected by this ControlPlaneMachineSet. It must match the template's labels. This field
    /// is considered immutable after creation of the resource.
    #[schemars(extend(
        "x-kubernetes-map-type" = "atomic",
        "x-kubernetes-validations" = [{"message": cel::SELECTOR_MESSAGE, "rule": cel::SELECTOR_RULE}]
    ))]
    pub selector: LabelSelector,
    /// template describes the Control Plane Machines that will be created by this
    /// ControlPlaneMachineSet.
    pub template: ControlPlaneMachineSetTemplate,
}

/// Whether the operator acts on the machines.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ControlPlaneMachineSetState {
    /// The operator reconciles the machines.
    Active,
    /// The operator only reports status.
    Inactive,
}

/// ControlPlaneMachineSetStrategy defines the strategy for applying updates to the Control Plane
/// Machines managed by the ControlPlaneMachineSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ControlPlaneMachineSetStrategy {
    /// type defines the type of update strategy. Valid values are "RollingUpdate" and "OnDelete".
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "RollingUpdate"))]
    pub type_: Option<ControlPlaneMachineSetStrategyType>,
}

/// Update strategies accepted by the CRD.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ControlPlaneMachineSetStrategyType {
    /// Create the replacement first, delete the old machine once it is Ready.
    RollingUpdate,
    /// Replace a machine only once it has been deleted.
    OnDelete,
}

/// ControlPlaneMachineSetTemplate is a template used by the ControlPlaneMachineSet to create the
/// Machines that it will manage in the future (a discriminated union on `machineType`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"message": cel::TEMPLATE_MESSAGE, "rule": cel::TEMPLATE_RULE}]))]
pub struct ControlPlaneMachineSetTemplate {
    /// machineType determines the type of Machines that should be managed by the
    /// ControlPlaneMachineSet. Currently, the only valid value is machines_v1beta1_machine_openshift_io.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required)]
    pub machine_type: Option<ControlPlaneMachineSetMachineType>,
    /// OpenShiftMachineV1Beta1Machine defines the template for creating Machines from the
    /// v1beta1.machine.openshift.io API group.
    #[serde(
        rename = "machines_v1beta1_machine_openshift_io",
        skip_serializing_if = "Option::is_none"
    )]
    pub machines_v1beta1_machine_openshift_io: Option<OpenShiftMachineV1Beta1MachineTemplate>,
}

/// The machine types a ControlPlaneMachineSet can manage.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ControlPlaneMachineSetMachineType {
    /// machine.openshift.io/v1beta1 Machines.
    #[serde(rename = "machines_v1beta1_machine_openshift_io")]
    MachinesV1Beta1MachineOpenshiftIo,
}

/// OpenShiftMachineV1Beta1MachineTemplate is a template for the ControlPlaneMachineSet to create
/// Machines from the v1beta1.machine.openshift.io API group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenShiftMachineV1Beta1MachineTemplate {
    /// failureDomains is the list of failure domains in which the ControlPlaneMachineSet should
    /// balance the Control Plane Machines. On vSphere each name is a VSphereDeploymentZone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_domains: Option<FailureDomains>,
    /// ObjectMeta is the standard object metadata. Labels are required to match the
    /// ControlPlaneMachineSet selector.
    pub metadata: ControlPlaneMachineSetTemplateObjectMeta,
    /// spec contains the desired configuration of the Control Plane Machines.
    pub spec: MachineSpec,
}

/// ControlPlaneMachineSetTemplateObjectMeta is a subset of the metav1.ObjectMeta struct.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ControlPlaneMachineSetTemplateObjectMeta {
    /// Map of string keys and values. This field must contain both the
    /// 'machine.openshift.io/cluster-api-machine-role' and
    /// 'machine.openshift.io/cluster-api-machine-type' labels, both with a value of 'master'.
    /// It must also contain a label with the key 'machine.openshift.io/cluster-api-cluster'.
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": cel::LABEL_RULES[0].1, "rule": cel::LABEL_RULES[0].0},
        {"message": cel::LABEL_RULES[1].1, "rule": cel::LABEL_RULES[1].0},
        {"message": cel::LABEL_RULES[2].1, "rule": cel::LABEL_RULES[2].0}
    ]))]
    pub labels: BTreeMap<String, String>,
    /// annotations is an unstructured key value map.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// FailureDomains represents the different configurations required to spread Machines across
/// failure domains on different platforms (a union on `platform`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = failure_domains_rules)]
pub struct FailureDomains {
    /// platform identifies the platform for which the FailureDomain represents.
    #[schemars(schema_with = "platform_schema")]
    pub platform: String,
    /// aws configures failure domain information for the AWS platform (not used by this provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "foreign_platform_list")]
    pub aws: Option<Vec<serde_json::Value>>,
    /// azure configures failure domain information for the Azure platform (not used by this provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "foreign_platform_list")]
    pub azure: Option<Vec<serde_json::Value>>,
    /// gcp configures failure domain information for the GCP platform (not used by this provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "foreign_platform_list")]
    pub gcp: Option<Vec<serde_json::Value>>,
    /// openstack configures failure domain information for the OpenStack platform (not used by
    /// this provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "foreign_platform_list")]
    pub openstack: Option<Vec<serde_json::Value>>,
    /// vsphere configures failure domain information for the VSphere platform.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub vsphere: Option<Vec<VSphereFailureDomainRef>>,
    /// nutanix configures failure domain information for the Nutanix platform (not used by this
    /// provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "foreign_platform_list")]
    pub nutanix: Option<Vec<serde_json::Value>>,
}

/// VSphereFailureDomain configures failure domain information for the vSphere platform: the name
/// of a VSphereDeploymentZone.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
pub struct VSphereFailureDomainRef {
    /// name of the failure domain in which the vSphere machine provider will create the VM: the
    /// name of a VSphereDeploymentZone.
    pub name: String,
}

/// ControlPlaneMachineSetStatus represents the status of the ControlPlaneMachineSet CRD.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneMachineSetStatus {
    /// conditions represents the observations of the ControlPlaneMachineSet's current state.
    /// Known .status.conditions.type are: Available, Degraded and Progressing.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<MetaCondition>>,
    /// observedGeneration is the most recent generation observed for this ControlPlaneMachineSet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// replicas is the number of Control Plane Machines created by the ControlPlaneMachineSet controller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// readyReplicas is the number of Control Plane Machines created by the controller which are ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// updatedReplicas is the number of non-terminated Control Plane Machines that have the
    /// desired provider spec and are ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    /// unavailableReplicas is the number of Control Plane Machines that are still required before
    /// the ControlPlaneMachineSet reaches the desired available capacity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable_replicas: Option<i32>,
}

fn replicas_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "integer",
        "format": "int32",
        "default": 3,
        "enum": [3, 5],
        "description": "replicas defines how many Control Plane Machines should be created by this ControlPlaneMachineSet. This field is immutable and cannot be changed after cluster installation. The ControlPlaneMachineSet only operates with 3 or 5 node control planes, 3 and 5 are the only valid values for this field.",
        "x-kubernetes-validations": [{"message": cel::REPLICAS_MESSAGE, "rule": cel::REPLICAS_RULE}]
    })
}

fn platform_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "enum": PLATFORM_TYPES,
        "description": "platform identifies the platform for which the FailureDomain represents. Currently supported values are AWS, Azure, GCP, OpenStack, VSphere and Nutanix."
    })
}

fn foreign_platform_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "x-kubernetes-list-type": "atomic"
    })
}

fn failure_domains_rules(schema: &mut Schema) {
    let rules: Vec<serde_json::Value> = cel::PLATFORM_LISTS
        .iter()
        .map(|(field, platform)| {
            serde_json::json!({"message": cel::platform_message(field, platform), "rule": cel::platform_rule(field, platform)})
        })
        .collect();
    schema.insert("x-kubernetes-validations".into(), rules.into());
}

impl ControlPlaneMachineSetSpec {
    /// The vSphere failure-domain (deployment zone) names, in the order given.
    pub fn vsphere_failure_domains(&self) -> Vec<&str> {
        self.template
            .machines_v1beta1_machine_openshift_io
            .as_ref()
            .and_then(|t| t.failure_domains.as_ref())
            .and_then(|f| f.vsphere.as_ref())
            .map(|v| v.iter().map(|d| d.name.as_str()).collect())
            .unwrap_or_default()
    }

    /// `replicas`, defaulting to 3.
    pub fn replicas_or_default(&self) -> i32 {
        self.replicas.unwrap_or(3)
    }

    /// `state`, defaulting to Inactive.
    pub fn state_or_default(&self) -> ControlPlaneMachineSetState {
        self.state.unwrap_or(ControlPlaneMachineSetState::Inactive)
    }

    /// `strategy.type`, defaulting to RollingUpdate.
    pub fn strategy_or_default(&self) -> ControlPlaneMachineSetStrategyType {
        self.strategy
            .as_ref()
            .and_then(|s| s.type_)
            .unwrap_or(ControlPlaneMachineSetStrategyType::RollingUpdate)
    }
}

/// The labels every control plane machine template must carry (key, required value or None for
/// any value).
pub const REQUIRED_TEMPLATE_LABELS: [(&str, Option<&str>); 3] = [
    (MACHINE_ROLE_LABEL, Some("master")),
    (MACHINE_TYPE_LABEL, Some("master")),
    (CLUSTER_ID_LABEL, None),
];
