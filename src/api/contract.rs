//! The Cluster API contract label on generated CRDs (reference capi-infra-contract.md §1).
//!
//! CAPI finds an infrastructure kind's CRD by name and reads the label
//! `cluster.x-k8s.io/<contract>`, whose value lists the served versions (`_`-separated) that
//! follow that contract; without it the Cluster and Machine reconciles fail ("cannot find any
//! versions matching contract"). The label is computed here from the CRD's own served versions
//! when the CRD is generated, so every kind of the infrastructure group, present and future,
//! carries it and it cannot drift from `spec.versions`.
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::INFRA_GROUP;

/// The contract this provider implements (CAPI v1.10's v1beta1; v1.11+ still accept it).
pub const CONTRACT: &str = "v1beta1";
/// The label key CAPI reads: `cluster.x-k8s.io/v1beta1`.
pub const CONTRACT_LABEL: &str = "cluster.x-k8s.io/v1beta1";

/// The versions whose schema follows [`CONTRACT`]. CAPI GETs and clones objects at the *last*
/// version the label lists and reads the contract's fields there, so a version with another
/// contract's shape (v1beta2: no `status.ready`) must not be listed: CAPI would read a v1beta1
/// field from a v1beta2 object and never see the cluster ready. v1beta2 gets its own label
/// (`cluster.x-k8s.io/v1beta2`) once the controllers write the v1beta2 contract's fields.
const CONTRACT_VERSIONS: [&str; 1] = ["v1beta1"];

/// The label value for a CRD: its served versions that follow [`CONTRACT`], in `spec.versions`
/// order, `_`-separated; `None` outside the infrastructure group or when none is served.
pub fn contract_label_value(crd: &CustomResourceDefinition) -> Option<String> {
    if crd.spec.group != INFRA_GROUP {
        return None;
    }
    let served: Vec<&str> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.served && CONTRACT_VERSIONS.contains(&v.name.as_str()))
        .map(|v| v.name.as_str())
        .collect();
    (!served.is_empty()).then(|| served.join("_"))
}

/// The v1beta2 contract's label: `cluster.x-k8s.io/v1beta2: v1beta2`. CAPI v1.11+ prefers it and
/// reads our objects at v1beta2 (through the conversion webhook, from the v1beta1 we store:
/// `ready` → `initialization.provisioned`, the failure-domain map → a sorted list,
/// `status.v1beta2.conditions` → `status.conditions`).
pub const V1BETA2_CONTRACT_LABEL: &str = "cluster.x-k8s.io/v1beta2";

/// Adds [`CONTRACT_LABEL`] (and, where v1beta2 is served, [`V1BETA2_CONTRACT_LABEL`]) to an
/// infrastructure-group CRD (others are returned unchanged).
pub fn with_contract_label(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let v1beta2 = crd.spec.group == INFRA_GROUP
        && crd
            .spec
            .versions
            .iter()
            .any(|v| v.served && v.name == "v1beta2");
    if let Some(value) = contract_label_value(&crd) {
        let labels = crd.metadata.labels.get_or_insert_with(Default::default);
        labels.insert(CONTRACT_LABEL.to_string(), value);
        if v1beta2 {
            labels.insert(V1BETA2_CONTRACT_LABEL.to_string(), "v1beta2".to_string());
        }
    }
    crd
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Kind;

    #[test]
    fn every_infrastructure_crd_lists_its_served_v1beta1_contract_versions() {
        for kind in Kind::ALL {
            let crd = kind.crd();
            let label = crd
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CONTRACT_LABEL));
            if crd.spec.group == INFRA_GROUP {
                let served: Vec<String> = crd
                    .spec
                    .versions
                    .iter()
                    .filter(|v| v.served && v.name == "v1beta1")
                    .map(|v| v.name.clone())
                    .collect();
                assert_eq!(label, Some(&served.join("_")), "{kind}");
            } else {
                assert_eq!(label, None, "{kind}: not a Cluster API kind");
            }
        }
        // Served as v1beta2 too, but not to CAPI under the v1beta1 contract; and no
        // cluster.x-k8s.io/v1beta2 label until the controllers write that contract's fields.
        let vc = Kind::VSphereCluster.crd();
        let labels = vc.metadata.labels.unwrap();
        assert_eq!(labels[CONTRACT_LABEL], "v1beta1");
        assert_eq!(labels[V1BETA2_CONTRACT_LABEL], "v1beta2");
    }

    #[test]
    fn an_unserved_version_is_left_out() {
        let mut crd = Kind::VSphereFailureDomain.crd();
        crd.metadata.labels = None;
        assert_eq!(contract_label_value(&crd).as_deref(), Some("v1beta1"));
        crd.spec.versions[0].served = false;
        assert_eq!(
            contract_label_value(&crd),
            None,
            "v1beta2 is another contract"
        );
        for v in &mut crd.spec.versions {
            v.served = false;
        }
        assert_eq!(contract_label_value(&crd), None);
        assert!(with_contract_label(crd).metadata.labels.is_none());
    }
}
