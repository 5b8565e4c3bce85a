//! The identity Secret of a VSphereCluster (`identityRef: {kind: Secret}`, in the cluster's
//! namespace) or of a VSphereClusterIdentity (`spec.secretName`, in the manager's namespace)
//! belongs to that object, as with CAPV:
//! * an owner reference to it, so that `clusterctl move` takes the Secret along (it moves a
//!   namespace's Secrets only through owner references; a VSphereClusterIdentity is itself moved
//!   because its CRD carries `clusterctl.cluster.x-k8s.io/move-hierarchy`) and the garbage
//!   collector removes it with its owner;
//! * the finalizer [`SECRET_FINALIZER`], so that the credentials outlive a namespace or manifest
//!   deletion until the owner's own deletion has no more use for them (a cluster's machines' VMs
//!   are destroyed with them);
//! * a Secret another VSphereCluster or VSphereClusterIdentity owns is refused: one owner's
//!   credentials are not a second one's to use (CAPV's `SecretAlreadyInUse`, "another cluster
//!   has set the OwnerRef").
//!
//! Which Secret a VSphereCluster may adopt at all (a tenant names it) is
//! [`super::secret_adoption`]'s to say.
//!
//! Pure: the controller reads the Secret, asks [`plan`], and patches what it answers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::INFRA_GROUP;
use crate::plan::capi_machine::pause::DELETE_FOR_MOVE_ANNOTATION;

/// CAPV's finalizer on an identity Secret (`SecretIdentitySetFinalizer`).
pub const SECRET_FINALIZER: &str = "vspherecluster/infrastructure.cluster.x-k8s.io";

/// The kinds that own identity Secrets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerKind {
    /// A namespaced VSphereCluster naming a Secret of its namespace.
    VSphereCluster,
    /// A cluster-scoped VSphereClusterIdentity naming a Secret of the manager's namespace.
    VSphereClusterIdentity,
}

impl OwnerKind {
    /// The kind as owner references spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerKind::VSphereCluster => "VSphereCluster",
            OwnerKind::VSphereClusterIdentity => "VSphereClusterIdentity",
        }
    }
}

/// The object that owns (or lets go of) the Secret.
#[derive(Clone, Debug)]
pub struct Owner<'a> {
    pub kind: OwnerKind,
    pub api_version: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    /// The owner is being deleted and has nothing left that needs the credentials.
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

/// Why the Secret cannot be made the owner's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Another VSphereCluster or VSphereClusterIdentity owns it (CAPV's `SecretAlreadyInUse`).
    InUse(String),
    /// It is being deleted, or `clusterctl move` is taking it away (`delete-for-move`): a
    /// finalizer added now would keep it from going (the API server refuses new finalizers on
    /// an object being deleted, and clusterctl removes them before its delete, once).
    Leaving(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::InUse(m) | Refusal::Leaving(m) => f.write_str(m),
        }
    }
}

/// Whether an owner reference is a VSphereCluster or a VSphereClusterIdentity of our group (at
/// any version): the owners that make a Secret some cluster's identity.
pub fn identity_owner(r: &OwnerReference) -> bool {
    r.api_version.starts_with(&format!("{INFRA_GROUP}/"))
        && matches!(r.kind.as_str(), "VSphereCluster" | "VSphereClusterIdentity")
}

/// Whether `r` names `owner` (by kind and name, at any version and UID: a moved owner's stale
/// reference is still its own).
pub fn names_owner(r: &OwnerReference, owner: &Owner<'_>) -> bool {
    identity_owner(r) && r.kind == owner.kind.as_str() && r.name == owner.name
}

/// The edit that makes `secret` belong to `owner`, or why it cannot.
pub fn plan(secret: &ObjectMeta, owner: &Owner<'_>) -> Result<Edit, Refusal> {
    let refs = secret.owner_references.clone().unwrap_or_default();
    let kind = owner.kind.as_str();
    let mine = |r: &OwnerReference| names_owner(r, owner);
    let other = refs.iter().find(|r| identity_owner(r) && !mine(r));
    let finalizers = secret.finalizers.clone().unwrap_or_default();
    let has_finalizer = finalizers.iter().any(|f| f == SECRET_FINALIZER);
    let name = secret.name.as_deref().unwrap_or_default();
    // Released first, whatever state the Secret is in. The finalizer is dropped when the
    // Secret is ours, or nobody's (an owner reference removed by hand must not pin it forever);
    // another owner's finalizer (the same value) is that owner's to drop.
    if owner.released {
        let ours = refs.iter().any(mine) || other.is_none();
        if !has_finalizer || !ours {
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
    if let Some(other) = other {
        return Err(Refusal::InUse(format!(
            "identity Secret {name} is already owned by {} {}: a Secret holds one cluster's credentials",
            other.kind, other.name
        )));
    }
    let moving = secret
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(DELETE_FOR_MOVE_ANNOTATION));
    if secret.deletion_timestamp.is_some() || moving {
        return Err(Refusal::Leaving(format!(
            "identity Secret {name} is being deleted{}",
            if moving { " by clusterctl move" } else { "" }
        )));
    }
    let wanted = OwnerReference {
        api_version: owner.api_version.to_string(),
        kind: kind.into(),
        name: owner.name.to_string(),
        uid: owner.uid.to_string(),
        controller: None,
        block_owner_deletion: None,
    };
    // Ours once, up to date (a moved owner has a new UID; another API version is replaced).
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
            kind: OwnerKind::VSphereCluster,
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
            let Refusal::InUse(err) = err else {
                panic!("{err:?}")
            };
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

    fn identity(name: &'static str, uid: &'static str, released: bool) -> Owner<'static> {
        Owner {
            kind: OwnerKind::VSphereClusterIdentity,
            api_version: V1,
            name,
            uid,
            released,
        }
    }

    #[test]
    fn an_identity_owns_its_secret_as_a_vsphereclusteridentity() {
        let edit = plan(&secret(vec![], &[]), &identity("id1", "uid-1", false)).unwrap();
        let Edit::Set {
            owner_references,
            finalizers,
        } = edit
        else {
            panic!("{edit:?}")
        };
        assert_eq!(
            owner_references,
            [reference("VSphereClusterIdentity", "id1", "uid-1")]
        );
        assert_eq!(finalizers, [SECRET_FINALIZER]);
        let done = secret(owner_references, &[SECRET_FINALIZER]);
        assert_eq!(
            plan(&done, &identity("id1", "uid-1", false)),
            Ok(Edit::Keep)
        );
    }

    #[test]
    fn a_secret_owned_by_another_identity_or_a_cluster_is_refused_to_an_identity() {
        // Same name, other kind: a VSphereCluster "id1" is not the identity "id1".
        for (kind, name) in [
            ("VSphereClusterIdentity", "id2"),
            ("VSphereCluster", "c1"),
            ("VSphereCluster", "id1"),
        ] {
            let taken = secret(vec![reference(kind, name, "uid-2")], &[SECRET_FINALIZER]);
            let Err(Refusal::InUse(err)) = plan(&taken, &identity("id1", "uid-1", false)) else {
                panic!("{kind} {name}")
            };
            assert!(
                err.contains(&format!("already owned by {kind} {name}")),
                "{err}"
            );
        }
        // A cluster is refused a Secret an identity owns, too.
        let taken = secret(
            vec![reference("VSphereClusterIdentity", "c1", "uid-2")],
            &[],
        );
        assert!(matches!(
            plan(&taken, &owner(false)),
            Err(Refusal::InUse(_))
        ));
    }

    #[test]
    fn a_moved_identity_with_a_new_uid_owns_its_secret_again() {
        // clusterctl move recreates the identity and its Secret on the target; the Secret's
        // reference names the identity's source UID until this reconcile replaces it.
        let moved = secret(
            vec![reference("VSphereClusterIdentity", "id1", "source-uid")],
            &[SECRET_FINALIZER],
        );
        assert_eq!(
            plan(&moved, &identity("id1", "target-uid", false)),
            Ok(Edit::Set {
                owner_references: vec![reference("VSphereClusterIdentity", "id1", "target-uid")],
                finalizers: vec![SECRET_FINALIZER.into()],
            })
        );
    }

    #[test]
    fn a_released_identity_drops_the_finalizer_only_of_its_own_or_an_unowned_secret() {
        let held = secret(
            vec![reference("VSphereClusterIdentity", "id1", "uid-1")],
            &[SECRET_FINALIZER, "other"],
        );
        assert_eq!(
            plan(&held, &identity("id1", "uid-1", true)),
            Ok(Edit::Set {
                owner_references: vec![reference("VSphereClusterIdentity", "id1", "uid-1")],
                finalizers: vec!["other".into()],
            })
        );
        // The second identity naming the first one's Secret goes: the first keeps its hold.
        assert_eq!(plan(&held, &identity("id2", "uid-2", true)), Ok(Edit::Keep));
        // Nobody's (the reference was removed by hand): nothing else will ever drop it.
        let orphan = secret(vec![], &[SECRET_FINALIZER]);
        assert_eq!(
            plan(&orphan, &identity("id2", "uid-2", true)),
            Ok(Edit::Set {
                owner_references: vec![],
                finalizers: vec![],
            })
        );
    }

    #[test]
    fn a_secret_being_deleted_or_moved_away_gets_no_finalizer() {
        let mut going = secret(vec![], &[]);
        going.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::UNIX_EPOCH,
        ));
        assert!(matches!(
            plan(&going, &identity("id1", "uid-1", false)),
            Err(Refusal::Leaving(_))
        ));
        let mut moving = secret(vec![], &[]);
        moving.annotations = Some([(DELETE_FOR_MOVE_ANNOTATION.to_string(), String::new())].into());
        let Err(Refusal::Leaving(m)) = plan(&moving, &identity("id1", "uid-1", false)) else {
            panic!()
        };
        assert!(m.contains("clusterctl move"), "{m}");
    }
}
