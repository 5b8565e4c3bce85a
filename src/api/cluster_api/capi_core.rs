//! Read-only views of the two Cluster API core objects a VSphereMachine depends on:
//! `cluster.x-k8s.io/v1beta1` `Machine` and `Cluster`. Only the fields the infra-machine
//! contract reads are decoded; everything else is ignored, so these parse v1beta1 objects and
//! the v1beta2 objects CAPI ≥ 1.11 serves alike (where a field moved, both places are read).
//! This provider serves neither kind: CAPI owns them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version the controllers read Cluster API's Cluster and Machine at, whatever version an
/// owner reference names: v1beta2, served from CAPI v1.11 on (the v1beta2 contract's release),
/// so CAPI v1.11 is the oldest this provider runs with. CAPI v1.10 and older serve only v1beta1
/// and are out of support; CAPI stops serving v1beta1 in a later release, and reading v1beta2
/// needs no conversion webhook round trip from v1.11 on (CAPI stores v1beta2).
pub const CORE_API_VERSION: &str = "cluster.x-k8s.io/v1beta2";

/// `cluster.x-k8s.io/cluster-name`: the cluster a CAPI object belongs to.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// `cluster.x-k8s.io/control-plane`: set on control-plane Machines.
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
/// `cluster.x-k8s.io/paused`: an object so annotated is not reconciled.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";

/// The Cluster API core kinds local mode accepts in manifests (`cluster.x-k8s.io/*`).
pub const LOCAL_KINDS: [&str; 3] = ["Cluster", "Machine", "MachineDeployment"];

/// A Cluster API core object (`Cluster`, `Machine`, `MachineDeployment`) as local mode keeps
/// it: its metadata typed, spec and status as the manifest (and local mode's play of CAPI) left
/// them, so it round-trips through the state file with every field the user wrote.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CapiObject {
    /// `cluster.x-k8s.io/v1beta1` (or v1beta2).
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// One of [`LOCAL_KINDS`].
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The spec, as JSON.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub spec: Value,
    /// The status, as JSON.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub status: Value,
}

impl CapiObject {
    /// The Machine view of this object (meaningful for a Machine).
    pub fn as_machine(&self) -> CapiMachine {
        CapiMachine {
            metadata: self.metadata.clone(),
            spec: serde_json::from_value(self.spec.clone()).unwrap_or_default(),
        }
    }

    /// The Cluster view of this object (meaningful for a Cluster).
    pub fn as_cluster(&self) -> CapiCluster {
        CapiCluster {
            metadata: self.metadata.clone(),
            spec: self.spec.clone(),
            status: self.status.clone(),
        }
    }
}

/// A Cluster API Machine (the fields an infrastructure provider reads).
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CapiMachine {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The Machine's spec.
    #[serde(default)]
    pub spec: CapiMachineSpec,
}

/// The part of `Machine.spec` read here.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CapiMachineSpec {
    /// The Cluster this Machine belongs to.
    #[serde(default)]
    pub cluster_name: String,
    /// The bootstrap configuration and its data Secret.
    #[serde(default)]
    pub bootstrap: CapiBootstrap,
    /// The failure domain (a VSphereDeploymentZone name) the Machine must be placed in.
    #[serde(default)]
    pub failure_domain: Option<String>,
    /// The provider ID, once CAPI copied it from the infra machine.
    #[serde(default, rename = "providerID")]
    pub provider_id: Option<String>,
    /// The infrastructure machine (a VSphereMachine): how a change of the Machine finds the
    /// VSphereMachine to wake.
    #[serde(default)]
    pub infrastructure_ref: Option<CapiInfrastructureRef>,
}

/// `Machine.spec.infrastructureRef`: v1beta2's `{apiGroup, kind, name}` and v1beta1's
/// `{apiVersion, kind, name, namespace}` alike (the kind and the name are all that is read).
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CapiInfrastructureRef {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

/// `Machine.spec.bootstrap`.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CapiBootstrap {
    /// The Secret holding the bootstrap data (`value`, `format`), once the bootstrap provider
    /// produced it.
    #[serde(default)]
    pub data_secret_name: Option<String>,
}

/// A Cluster API Cluster (the fields an infrastructure provider reads).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CapiCluster {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec.paused` and the rest, as JSON.
    #[serde(default)]
    pub spec: Value,
    /// `status`, as JSON (its layout differs between v1beta1 and v1beta2).
    #[serde(default)]
    pub status: Value,
}

impl CapiMachine {
    /// `metadata.labels`, empty when unset.
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.metadata.labels.clone().unwrap_or_default()
    }

    /// True for a control-plane Machine (labelled [`CONTROL_PLANE_LABEL`]).
    pub fn is_control_plane(&self) -> bool {
        self.labels().contains_key(CONTROL_PLANE_LABEL)
    }
}

impl CapiCluster {
    /// `spec.paused`, or the paused annotation.
    pub fn paused(&self) -> bool {
        self.spec.get("paused").and_then(Value::as_bool) == Some(true)
            || self
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(PAUSED_ANNOTATION))
    }

    /// The cluster infrastructure is provisioned: v1beta1 `status.infrastructureReady`, or
    /// v1beta2 `status.initialization.infrastructureProvisioned`.
    pub fn infrastructure_ready(&self) -> bool {
        self.status
            .get("infrastructureReady")
            .and_then(Value::as_bool)
            == Some(true)
            || self
                .status
                .pointer("/initialization/infrastructureProvisioned")
                .and_then(Value::as_bool)
                == Some(true)
    }

    /// The control plane is initialized: v1beta1 condition `ControlPlaneInitialized` True, or
    /// v1beta2 `status.initialization.controlPlaneInitialized` (also a v1beta2 condition).
    pub fn control_plane_initialized(&self) -> bool {
        let true_in = |conditions: Option<&Value>| {
            conditions
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "ControlPlaneInitialized" && c["status"] == "True")
        };
        self.status
            .pointer("/initialization/controlPlaneInitialized")
            .and_then(Value::as_bool)
            == Some(true)
            || true_in(self.status.get("conditions"))
            || true_in(self.status.pointer("/v1beta2/conditions"))
    }
}

/// Cluster API's Machine and Cluster as watched kinds (their caches), at [`CORE_API_VERSION`]:
/// written by hand because this provider serves neither kind, and only the fields above are
/// decoded, so a cache holds a fraction of each object.
macro_rules! capi_resource {
    ($ty:ty, $kind:literal, $plural:literal) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                "cluster.x-k8s.io".into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                "v1beta2".into()
            }
            fn api_version(_: &()) -> std::borrow::Cow<'_, str> {
                CORE_API_VERSION.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

capi_resource!(CapiMachine, "Machine", "machines");
capi_resource!(CapiCluster, "Cluster", "clusters");

#[cfg(test)]
mod resource_tests {
    use super::*;

    #[test]
    fn the_watched_kinds_are_read_at_the_core_api_version() {
        use kube::Resource;
        assert_eq!(CapiMachine::api_version(&()), CORE_API_VERSION);
        assert_eq!(
            format!("{}/{}", CapiCluster::group(&()), CapiCluster::version(&())),
            CORE_API_VERSION
        );
        let m: CapiMachine = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "m"},
            "spec": {"clusterName": "c", "infrastructureRef":
                {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "VSphereMachine", "name": "m-x"}}
        }))
        .unwrap();
        let r = m.spec.infrastructure_ref.unwrap();
        assert_eq!(
            (r.kind.as_str(), r.name.as_str()),
            ("VSphereMachine", "m-x")
        );
    }
}
