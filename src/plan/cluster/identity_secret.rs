//! The identity Secret a VSphereCluster names (`identityRef: {kind: Secret}`) belongs to that
//! cluster, as with CAPV:
//! * an owner reference to the VSphereCluster, so that `clusterctl move` takes the Secret
//!   along (it moves a namespace's Secrets only through owner references) and the garbage
//!   collector removes it with the cluster;
//! * the finalizer [`SECRET_FINALIZER`], so that the credentials outlive a namespace or manifest
//!   deletion until the cluster's own deletion has no more use for them (its machines' VMs are
//!   destroyed with them);
//! * a Secret another VSphereCluster owns is refused: one cluster's credentials are not a
//!   second cluster's to use (CAPV's "another cluster has set the OwnerRef").
//!
//! Pure: the controller reads the Secret, asks [`plan`], and patches what it answers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::INFRA_GROUP;

/// CAPV's finalizer on an identity Secret (`SecretIdentitySetFinalizer`).
pub const SECRET_FINALIZER: &str = "vspherecluster/infrastructure.cluster.x-k8s.io";

/// The VSphereCluster as an owner.
#[derive(Clone, Debug)]
pub struct Owner<'a> {
    pub api_version: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    /// The cluster is being deleted and has nothing left that needs the credentials.
    pub released: bool,
}

/// What to write to the Secret's metadata.
#[derive(Clone, Debug, PartialEq)]
pub enum Edit {
    /// Nothing: it is as it should be.
    Keep,
    /// Write these owner references and finalizers (the whole lists).
    Set {
        owner_references: Vec<OwnerReference>,
        finalizers: Vec<String>,
    },
}

/// Whether an owner reference is a VSphereCluster or a VSphereClusterIdentity of our group (at
/// any version): the owners that make a Secret some cluster's identity.
fn identity_owner(r: &OwnerReference) -> bool {
    r.api_version.starts_with(&format!("{INFRA_GROUP}/"))
        && matches!(r.kind.as_str(), "VSphereCluster" | "VSphereClusterIdentity")
}

/// The edit that makes `secret` belong to `owner`, or why it cannot.
pub fn plan(secret: &ObjectMeta, owner: &Owner<'_>) -> Result<Edit, String> {
    let refs = secret.owner_references.clone().unwrap_or_default();
    let mine = |r: &OwnerReference| r.kind == "VSphereCluster" && r.name == owner.name;
    let finalizers = secret.finalizers.clone().unwrap_or_default();
    let has_finalizer = finalizers.iter().any(|f| f == SECRET_FINALIZER);
    // Released first: a cluster going away lets go whatever else owns the Secret.
    if owner.released {
        if !has_finalizer {
            return Ok(Edit::Keep);
        }
        return Ok(Edit::Set {
            owner_references: refs,
            finalizers: finalizers
                .into_iter()
                .filter(|f| f != SECRET_FINALIZER)
                .collect(),
        });
    }
    if let Some(other) = refs.iter().find(|r| identity_owner(r) && !mine(r)) {
        return Err(format!(
            "identity Secret {} is already owned by {} {}: a Secret holds one cluster's credentials",
            secret.name.as_deref().unwrap_or_default(),
            other.kind,
            other.name
        ));
    }
    let wanted = OwnerReference {
        api_version: owner.api_version.to_string(),
        kind: "VSphereCluster".into(),
        name: owner.name.to_string(),
        uid: owner.uid.to_string(),
        controller: None,
        block_owner_deletion: None,
    };
    // Ours once, up to date (a moved cluster has a new UID; another API version is replaced).
    let mut ours = refs.iter().filter(|r| mine(r));
    let current = matches!((ours.next(), ours.next()),
        (Some(r), None) if r.api_version == wanted.api_version && r.uid == wanted.uid);
    if current && has_finalizer {
        return Ok(Edit::Keep);
    }
    let mut owner_references: Vec<OwnerReference> = refs.into_iter().filter(|r| !mine(r)).collect();
    owner_references.push(wanted);
    let mut finalizers = finalizers;
    if !has_finalizer {
        finalizers.push(SECRET_FINALIZER.to_string());
    }
    Ok(Edit::Set {
        owner_references,
        finalizers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "infrastructure.cluster.x-k8s.io/v1beta1";

    fn owner(released: bool) -> Owner<'static> {
        Owner {
            api_version: V1,
            name: "c1",
            uid: "uid-1",
            released,
        }
    }

    fn reference(kind: &str, name: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: V1.into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            ..OwnerReference::default()
        }
    }

    fn secret(refs: Vec<OwnerReference>, finalizers: &[&str]) -> ObjectMeta {
        ObjectMeta {
            name: Some("creds".into()),
            owner_references: Some(refs),
            finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_fresh_secret_gets_the_cluster_as_owner_and_the_finalizer_once() {
        let other = OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "x".into(),
            uid: "u".into(),
            ..OwnerReference::default()
        };
        let edit = plan(&secret(vec![other.clone()], &["keep"]), &owner(false)).unwrap();
        let Edit::Set {
            owner_references,
            finalizers,
        } = edit
        else {
            panic!("{edit:?}")
        };
        assert_eq!(
            owner_references,
            [other, reference("VSphereCluster", "c1", "uid-1")]
        );
        assert_eq!(finalizers, ["keep", SECRET_FINALIZER]);
        // Written once: the same plan on the result keeps it (no hot loop).
        let done = secret(owner_references, &["keep", SECRET_FINALIZER]);
        assert_eq!(plan(&done, &owner(false)), Ok(Edit::Keep));
    }

    #[test]
    fn a_moved_cluster_replaces_its_stale_owner_reference() {
        // clusterctl move recreates the VSphereCluster with a new UID; the Secret keeps the
        // old reference until this cluster's reconcile puts the new one in its place.
        let moved = secret(
            vec![reference("VSphereCluster", "c1", "old")],
            &[SECRET_FINALIZER],
        );
        let Ok(Edit::Set {
            owner_references, ..
        }) = plan(&moved, &owner(false))
        else {
            panic!()
        };
        assert_eq!(
            owner_references,
            [reference("VSphereCluster", "c1", "uid-1")]
        );
    }

    #[test]
    fn another_clusters_secret_is_refused_naming_the_owner() {
        for kind in ["VSphereCluster", "VSphereClusterIdentity"] {
            let taken = secret(vec![reference(kind, "c2", "uid-2")], &[]);
            let err = plan(&taken, &owner(false)).unwrap_err();
            assert!(
                err.contains(&format!("already owned by {kind} c2")),
                "{err}"
            );
            assert!(err.contains("creds"), "{err}");
        }
    }

    #[test]
    fn a_released_cluster_drops_only_its_finalizer() {
        let held = secret(
            vec![reference("VSphereCluster", "c1", "uid-1")],
            &["other", SECRET_FINALIZER],
        );
        assert_eq!(
            plan(&held, &owner(true)),
            Ok(Edit::Set {
                owner_references: vec![reference("VSphereCluster", "c1", "uid-1")],
                finalizers: vec!["other".into()],
            })
        );
        let free = secret(vec![reference("VSphereCluster", "c1", "uid-1")], &["other"]);
        assert_eq!(plan(&free, &owner(true)), Ok(Edit::Keep));
    }
}
