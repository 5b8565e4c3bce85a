//! Custom resource types (kube-derive + schemars), condition constants and helpers, and the
//! manifest loader. No network I/O here (the loader reads files).
//!
//! | group/version of the Rust type | kind | scope |
//! |---|---|---|
//! | infrastructure.cluster.x-k8s.io/v1beta2 | [`VSphereFailureDomain`] | cluster |
//! | infrastructure.cluster.x-k8s.io/v1beta2 | [`VSphereDeploymentZone`] | cluster |
//! | infrastructure.cluster.x-k8s.io/v1beta2 | [`VSphereCluster`] | namespaced |
//! | infrastructure.cluster.x-k8s.io/v1beta2 | [`VSphereClusterIdentity`] | cluster |
//! | infrastructure.cluster.x-k8s.io/v1beta2 | [`VSphereMachine`] | namespaced |
//! | infrastructure.cluster.x-k8s.io/v1beta2 | [`VSphereMachineTemplate`] | namespaced |
//! | infrastructure.cluster.x-k8s.io/v1beta2 | [`VSphereVM`] | namespaced |
//! | infrastructure.cluster.x-k8s.io/v1beta2 | [`VSphereClusterTemplate`] | namespaced |
//! | machine.openshift.io/v1beta1 | [`Machine`] | namespaced |
//! | machine.openshift.io/v1beta1 | [`MachineHealthCheck`] | namespaced |
//! | machine.openshift.io/v1 | [`ControlPlaneMachineSet`] | namespaced |
//!
//! Every `infrastructure.cluster.x-k8s.io` kind is served at v1beta1 (deprecated) and v1beta2
//! (stored, the hub: [`infrastructure::v1beta2`]); the planners and controllers work on the
//! hub types only ([`Kind::api_version`]), and v1beta1 objects are converted at the edge
//! ([`conversion`]).

// `#[kube(printcolumn(type_ = ...))]` repeats attribute keys by design.
#![allow(clippy::duplicated_attributes)]

pub mod cluster_api;
pub mod conditions;
pub mod contract;
pub mod infrastructure;
pub mod manifest;
pub mod openshift_config;
pub mod openshift_machine;

// The modules' former flat paths (`api::failure_domain`, `api::machine`, …), which the
// planners, controllers and tests name.
pub use cluster_api::{capi_core, ipam};
pub use infrastructure::conversion;
// The infrastructure kinds' flat paths name the hub (v1beta2); v1beta1 is reached only as
// `infrastructure::v1beta1` (its schemas, for the CRDs and the conversion).
pub use infrastructure::v1beta2::{
    vsphere_cluster, vsphere_cluster_identity as cluster_identity, vsphere_cluster_template,
    vsphere_deployment_zone as deployment_zone, vsphere_failure_domain as failure_domain,
    vsphere_machine, vsphere_vm,
};
pub use openshift_machine::v1::control_plane_machine_set;
pub use openshift_machine::v1beta1::{
    health_values, machine, machine_health_check, machine_status,
};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

pub use cluster_identity::{VSphereClusterIdentity, VSphereClusterIdentitySpec};
pub use control_plane_machine_set::{
    ControlPlaneMachineSet, ControlPlaneMachineSetSpec, ControlPlaneMachineSetStatus,
};
pub use deployment_zone::{
    VSphereDeploymentZone, VSphereDeploymentZoneSpec, VSphereDeploymentZoneStatus,
};
pub use failure_domain::{VSphereFailureDomain, VSphereFailureDomainSpec};
pub use machine::{Machine, MachineSpec, MachineStatus, VSphereMachineProviderSpec};
pub use machine_health_check::{
    MachineHealthCheck, MachineHealthCheckSpec, MachineHealthCheckStatus,
};
pub use openshift_config::v1::infrastructure::Infrastructure;
pub use vsphere_cluster::{VSphereCluster, VSphereClusterSpec, VSphereClusterStatus};
pub use vsphere_cluster_template::{VSphereClusterTemplate, VSphereClusterTemplateSpec};
pub use vsphere_machine::{VSphereMachine, VSphereMachineTemplate};
pub use vsphere_vm::VSphereVM;

/// The CRD rule that makes a machine's `spec.providerID` immutable once set (OpenShift Machine
/// and VSphereMachine): the Node a machine is linked to, drained and deleted through is the
/// one its providerID names, and only the provider sets it (from the VM's BIOS UUID). Admission
/// implements the same rule for offline checks.
pub mod provider_id_cel {
    /// On the spec (a transition rule: updates only). Unset or empty may become set.
    pub const RULE: &str = "!has(oldSelf.providerID) || oldSelf.providerID == '' || (has(self.providerID) && self.providerID == oldSelf.providerID)";
    /// Message of [`RULE`].
    pub const MESSAGE: &str = "providerID is immutable once set";
}

/// `infrastructure.cluster.x-k8s.io`.
pub const INFRA_GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// The CRD label that makes `clusterctl move` move every object of the kind with everything
/// it owns (`clusterctl.cluster.x-k8s.io/move-hierarchy`, cluster-api
/// cmd/clusterctl/api/v1alpha3/labels.go). Set on VSphereClusterIdentity's CRD.
pub const MOVE_HIERARCHY_LABEL: &str = "clusterctl.cluster.x-k8s.io/move-hierarchy";
/// `machine.openshift.io`.
pub const MACHINE_GROUP: &str = "machine.openshift.io";

/// The kinds this provider serves, in a fixed order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// VSphereFailureDomain.
    VSphereFailureDomain,
    /// VSphereDeploymentZone.
    VSphereDeploymentZone,
    /// VSphereCluster.
    VSphereCluster,
    /// VSphereClusterIdentity.
    VSphereClusterIdentity,
    /// VSphereMachine (Cluster API InfraMachine).
    VSphereMachine,
    /// VSphereMachineTemplate.
    VSphereMachineTemplate,
    /// VSphereVM.
    VSphereVM,
    /// VSphereClusterTemplate (Cluster API InfraClusterTemplate, for ClusterClass).
    VSphereClusterTemplate,
    /// Machine.
    Machine,
    /// MachineHealthCheck.
    MachineHealthCheck,
    /// ControlPlaneMachineSet.
    ControlPlaneMachineSet,
}

impl Kind {
    /// Every kind, in order.
    pub const ALL: [Kind; 11] = [
        Kind::VSphereFailureDomain,
        Kind::VSphereDeploymentZone,
        Kind::VSphereCluster,
        Kind::VSphereClusterIdentity,
        Kind::VSphereMachine,
        Kind::VSphereMachineTemplate,
        Kind::VSphereVM,
        Kind::VSphereClusterTemplate,
        Kind::Machine,
        Kind::MachineHealthCheck,
        Kind::ControlPlaneMachineSet,
    ];

    /// The kind name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::VSphereFailureDomain => "VSphereFailureDomain",
            Kind::VSphereDeploymentZone => "VSphereDeploymentZone",
            Kind::VSphereCluster => "VSphereCluster",
            Kind::VSphereClusterIdentity => "VSphereClusterIdentity",
            Kind::VSphereMachine => "VSphereMachine",
            Kind::VSphereMachineTemplate => "VSphereMachineTemplate",
            Kind::VSphereVM => "VSphereVM",
            Kind::VSphereClusterTemplate => "VSphereClusterTemplate",
            Kind::Machine => "Machine",
            Kind::MachineHealthCheck => "MachineHealthCheck",
            Kind::ControlPlaneMachineSet => "ControlPlaneMachineSet",
        }
    }

    /// The `group/version` of this kind's Rust type, which the planners, the controllers'
    /// requests, admission rules and local mode work on: the hub (v1beta2) for every
    /// `infrastructure.cluster.x-k8s.io` kind.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::VSphereFailureDomain
            | Kind::VSphereDeploymentZone
            | Kind::VSphereClusterIdentity
            | Kind::VSphereCluster
            | Kind::VSphereClusterTemplate
            | Kind::VSphereVM
            | Kind::VSphereMachine
            | Kind::VSphereMachineTemplate => infrastructure::HUB,
            Kind::Machine | Kind::MachineHealthCheck => "machine.openshift.io/v1beta1",
            Kind::ControlPlaneMachineSet => "machine.openshift.io/v1",
        }
    }

    /// The plural resource name.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::VSphereFailureDomain => "vspherefailuredomains",
            Kind::VSphereDeploymentZone => "vspheredeploymentzones",
            Kind::VSphereCluster => "vsphereclusters",
            Kind::VSphereClusterIdentity => "vsphereclusteridentities",
            Kind::VSphereMachine => "vspheremachines",
            Kind::VSphereMachineTemplate => "vspheremachinetemplates",
            Kind::VSphereVM => "vspherevms",
            Kind::VSphereClusterTemplate => "vsphereclustertemplates",
            Kind::Machine => "machines",
            Kind::MachineHealthCheck => "machinehealthchecks",
            Kind::ControlPlaneMachineSet => "controlplanemachinesets",
        }
    }

    /// True for namespaced kinds.
    pub fn namespaced(self) -> bool {
        !matches!(
            self,
            Kind::VSphereFailureDomain | Kind::VSphereDeploymentZone | Kind::VSphereClusterIdentity
        )
    }

    /// Every `group/version` this kind is served at, oldest first (the CRD's order). Every
    /// infrastructure kind is served as v1beta1 (deprecated) and v1beta2, as CAPV v1.16+
    /// serves them.
    pub fn api_versions(self) -> &'static [&'static str] {
        match self {
            Kind::Machine => &["machine.openshift.io/v1beta1"],
            Kind::MachineHealthCheck => &["machine.openshift.io/v1beta1"],
            Kind::ControlPlaneMachineSet => &["machine.openshift.io/v1"],
            _ => &[infrastructure::V1BETA1, infrastructure::HUB],
        }
    }

    /// The `group/version` the API server stores this kind in: the hub (v1beta2) for the
    /// infrastructure kinds, the only served version for the others.
    pub fn storage_version(self) -> &'static str {
        match self.api_versions() {
            [_, .., hub] => hub,
            [only] => only,
            [] => self.api_version(),
        }
    }

    /// The kind for an `apiVersion` and `kind`, if served here (at any served version).
    pub fn from_type(api_version: &str, kind: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == kind && k.api_versions().contains(&api_version))
    }

    /// The generated CRD for this kind (normalized, with the Cluster API contract label for
    /// the infrastructure group, as written to `crds/`).
    pub fn crd(self) -> CustomResourceDefinition {
        use infrastructure::{v1beta1 as v1, v1beta2 as v2};
        let raw = match self {
            Kind::VSphereFailureDomain => merge(
                v1::vsphere_failure_domain::VSphereFailureDomain::crd(),
                v2::VSphereFailureDomain::crd(),
            ),
            Kind::VSphereDeploymentZone => merge(
                v1::vsphere_deployment_zone::VSphereDeploymentZone::crd(),
                v2::VSphereDeploymentZone::crd(),
            ),
            Kind::VSphereCluster => merge(
                v1::vsphere_cluster::VSphereCluster::crd(),
                v2::VSphereCluster::crd(),
            ),
            Kind::VSphereClusterIdentity => merge(
                v1::vsphere_cluster_identity::VSphereClusterIdentity::crd(),
                v2::VSphereClusterIdentity::crd(),
            ),
            Kind::VSphereMachine => merge(
                v1::vsphere_machine::VSphereMachine::crd(),
                v2::VSphereMachine::crd(),
            ),
            Kind::VSphereMachineTemplate => merge(
                v1::vsphere_machine::VSphereMachineTemplate::crd(),
                v2::VSphereMachineTemplate::crd(),
            ),
            Kind::VSphereVM => merge(v1::vsphere_machine::VSphereVM::crd(), v2::VSphereVM::crd()),
            Kind::VSphereClusterTemplate => merge(
                v1::vsphere_cluster_template::VSphereClusterTemplate::crd(),
                v2::VSphereClusterTemplate::crd(),
            ),
            Kind::Machine => Machine::crd(),
            Kind::MachineHealthCheck => MachineHealthCheck::crd(),
            Kind::ControlPlaneMachineSet => ControlPlaneMachineSet::crd(),
        };
        let mut crd = contract::with_contract_label(normalize_crd(raw));
        if self == Kind::VSphereClusterIdentity {
            // `clusterctl move` moves a cluster-scoped object only through owner references to
            // a Cluster's hierarchy, and nothing owns an identity: the label makes it (and the
            // Secret it owns) a hierarchy root of its own, as the clusterctl provider contract
            // suggests for ClusterIdentity kinds.
            crd.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(MOVE_HIERARCHY_LABEL.to_string(), String::new());
        }
        crd
    }

    /// The file name of this kind's CRD in `crds/` (`<group>_<plural>.yaml`, as controller-gen
    /// names them).
    pub fn crd_file_name(self) -> String {
        let group = self.api_version().split('/').next().unwrap_or_default();
        format!("{group}_{}.yaml", self.plural())
    }

    /// The `openAPIV3Schema` of the version the controllers use ([`Kind::api_version`]), as JSON.
    pub fn schema(self) -> serde_json::Value {
        self.schema_for(self.api_version())
    }

    /// The `openAPIV3Schema` of one served `group/version` of this kind (Null if not served).
    /// Computed once per process.
    pub fn schema_for(self, api_version: &str) -> serde_json::Value {
        static SCHEMAS: std::sync::LazyLock<
            std::collections::HashMap<(Kind, String), serde_json::Value>,
        > = std::sync::LazyLock::new(|| {
            let mut out = std::collections::HashMap::new();
            for kind in Kind::ALL {
                let crd = kind.crd();
                for v in crd.spec.versions {
                    let schema = v.schema.and_then(|s| s.open_api_v3_schema);
                    out.insert(
                        (kind, format!("{}/{}", crd.spec.group, v.name)),
                        serde_json::to_value(schema).unwrap_or(serde_json::Value::Null),
                    );
                }
            }
            out
        });
        SCHEMAS
            .get(&(self, api_version.to_string()))
            .cloned()
            .unwrap_or(serde_json::Value::Null)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Every CRD this provider serves, in [`Kind::ALL`] order.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    Kind::ALL.into_iter().map(Kind::crd).collect()
}

/// Renders a CRD as YAML, the format of the files in `crds/`.
pub fn crd_yaml(crd: &CustomResourceDefinition) -> String {
    let body = serde_saphyr::to_string(crd).unwrap_or_default();
    format!("# Generated by `vsphere-provider crds`; do not edit.\n---\n{body}")
}

/// Merges a kind's v1beta1 CRD with its v1beta2, stores v1beta2 (conversion strategy None here;
/// config/crd adds the manager's conversion webhook, without which v1beta1 writes would lose
/// what v1beta2 renames) and marks v1beta1 deprecated, as CAPV does: a v1beta1 client is told
/// which version to move to, and CAPV stops serving v1beta1 in v1.21.
fn merge(
    v1beta1: CustomResourceDefinition,
    v1beta2: CustomResourceDefinition,
) -> CustomResourceDefinition {
    let storage = v1beta2.spec.versions[0].name.clone();
    let mut crd = kube::core::crd::merge_crds(vec![v1beta1, v1beta2], &storage)
        .expect("versions of one kind merge");
    // v1beta1 listed first, as in CAPV's CRDs (the order means nothing to the server).
    crd.spec.versions.sort_by_key(|v| v.name != "v1beta1");
    let kind = crd.spec.names.kind.clone();
    for version in &mut crd.spec.versions {
        if version.name == "v1beta1" {
            version.deprecated = Some(true);
            version.deprecation_warning = Some(format!(
                "{INFRA_GROUP}/v1beta1 {kind} is deprecated; use {INFRA_GROUP}/v1beta2 {kind}"
            ));
        }
    }
    crd
}

/// Brings a kube-derive CRD closer to controller-gen's output: no `nullable` markers (upstream
/// schemas have none; Option fields are simply not required).
fn normalize_crd(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.take())
        {
            let mut value = serde_json::to_value(schema).unwrap_or_default();
            strip_nullable(&mut value);
            if let Some(root) = value.as_object_mut() {
                // controller-gen neither titles the root nor requires `spec`; it declares the
                // TypeMeta/ObjectMeta properties.
                root.remove("title");
                root.remove("required");
                // CAPV's v1beta2 requires the spec of every kind but the templates.
                if crd.spec.group == INFRA_GROUP
                    && version.name == "v1beta2"
                    && !crd.spec.names.kind.ends_with("Template")
                {
                    root.insert("required".into(), serde_json::json!(["spec"]));
                }
                let props = root
                    .entry("properties")
                    .or_insert_with(|| serde_json::json!({}));
                if let Some(props) = props.as_object_mut() {
                    props.insert("apiVersion".into(), serde_json::json!({
                        "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                        "type": "string"
                    }));
                    props.insert("kind".into(), serde_json::json!({
                        "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                        "type": "string"
                    }));
                    props.insert("metadata".into(), serde_json::json!({"type": "object"}));
                }
            }
            if let Some(s) = version.schema.as_mut() {
                s.open_api_v3_schema = serde_json::from_value(value).ok();
            }
        }
    }
    crd
}

fn strip_nullable(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("nullable");
            map.values_mut().for_each(strip_nullable);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}

/// `{type: object, x-kubernetes-preserve-unknown-fields: true}` (runtime.RawExtension).
pub(crate) fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// A structural schema for any type, generated with the settings kube-derive uses for CRDs and
/// normalized like [`Kind::crd`].
pub fn structural_schema_for<T: JsonSchema>() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube::core::schema::StructuralSchemaRewriter)
        .with_transform(kube::core::schema::OptionalEnum)
        .with_transform(kube::core::schema::OptionalIntOrString)
        .into_generator();
    let mut value = serde_json::to_value(generator.into_root_schema_for::<T>()).unwrap_or_default();
    strip_nullable(&mut value);
    if let Some(map) = value.as_object_mut() {
        map.remove("title");
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip() {
        for k in Kind::ALL {
            assert_eq!(Kind::from_type(k.api_version(), k.name()), Some(k));
            let crd = k.crd();
            assert_eq!(crd.spec.names.kind, k.name());
            assert_eq!(crd.spec.names.plural, k.plural());
            assert_eq!(
                crd.spec.scope,
                if k.namespaced() {
                    "Namespaced"
                } else {
                    "Cluster"
                }
            );
            let served: Vec<String> = crd
                .spec
                .versions
                .iter()
                .map(|v| format!("{}/{}", crd.spec.group, v.name))
                .collect();
            assert_eq!(served, k.api_versions(), "{k}");
            assert!(served.contains(&k.api_version().to_string()), "{k}");
        }
        assert_eq!(
            Kind::from_type(
                "infrastructure.cluster.x-k8s.io/v1beta2",
                "VSphereFailureDomain"
            ),
            Some(Kind::VSphereFailureDomain)
        );
        assert_eq!(
            Kind::from_type(
                "infrastructure.cluster.x-k8s.io/v1beta3",
                "VSphereFailureDomain"
            ),
            None
        );
        assert_eq!(
            Kind::from_type("machine.openshift.io/v1beta2", "Machine"),
            None
        );
    }

    #[test]
    fn every_infrastructure_kind_serves_v1beta1_deprecated_and_stores_v1beta2() {
        let infra: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|k| k.api_version().starts_with(INFRA_GROUP))
            .collect();
        assert_eq!(infra.len(), 8);
        for k in infra {
            let crd = k.crd();
            let versions: Vec<(String, bool, bool, Option<bool>)> = crd
                .spec
                .versions
                .iter()
                .map(|v| (v.name.clone(), v.served, v.storage, v.deprecated))
                .collect();
            assert_eq!(
                versions,
                [
                    ("v1beta1".to_string(), true, false, Some(true)),
                    ("v1beta2".to_string(), true, true, None)
                ],
                "{k}"
            );
            assert!(
                crd.spec.versions[0]
                    .deprecation_warning
                    .as_deref()
                    .is_some_and(|w| w.contains("use infrastructure.cluster.x-k8s.io/v1beta2")),
                "{k}"
            );
            assert!(
                crd.spec.conversion.is_none(),
                "{k}: conversion strategy None in crds/ (config/crd adds the webhook)"
            );
            assert!(
                k.schema_for(infrastructure::v1beta2::API_VERSION)
                    .is_object()
            );
            assert_eq!(
                Kind::from_type(infrastructure::v1beta2::API_VERSION, k.name()),
                Some(k)
            );
        }
        // CAPV dropped autoConfigure from v1beta2; this provider keeps it.
        let fd = Kind::VSphereFailureDomain.schema_for(infrastructure::v1beta2::API_VERSION);
        assert_eq!(
            fd["properties"]["spec"]["properties"]["zone"]["properties"]["autoConfigure"]["type"],
            "boolean"
        );
    }

    #[test]
    fn no_nullable_in_schemas() {
        for k in Kind::ALL {
            assert!(!k.schema().to_string().contains("\"nullable\""), "{k}");
        }
    }
}
