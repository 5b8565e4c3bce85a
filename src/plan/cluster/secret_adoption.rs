//! Which Secret a VSphereCluster may adopt (security review N4). A tenant names any Secret of
//! its namespace as `identityRef: {kind: Secret}`; adopting it (owner reference + finalizer,
//! [`super::identity_secret`]) hands its life to the cluster: the garbage collector deletes it
//! with the cluster. So only a Secret that is nothing but a vCenter identity is adopted:
//! * its credentials were accepted by vCenter (the controller asks only after a login with them
//!   succeeded);
//! * it has no owner but this cluster: another owner's Secret (a ServiceAccount token, a
//!   certificate an issuer manages, another cluster's identity) is not the tenant's to give;
//! * its keys are the identity's, `username` and `password` (CAPV's contract), and its type is
//!   one an identity is written as (`Opaque`, `kubernetes.io/basic-auth`): a Secret holding
//!   anything else serves something besides this cluster.
//!
//! A Secret that fails these is left alone (and, if this cluster owned it, let go): the cluster
//! still uses its credentials, only their lifetime stays the tenant's. Messages name keys,
//! types and owners, never a value or a user name.
//!
//! Pure: the controller reads the Secret, asks [`refusal`], writes what [`release`] says, and
//! puts the refusal in the cluster's status with [`apply`].

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::identity_secret::{Edit, Owner, SECRET_FINALIZER, identity_owner, names_owner};
use crate::api::conditions::{self, ConditionUpdate};
use crate::api::vsphere_cluster::VSphereClusterStatus;

/// **Ours**, v1beta2 condition of a VSphereCluster whose identity Secret is not adopted: False
/// with reason [`NOT_ADOPTED_REASON`] and the refusal as message. Absent otherwise, so clusters
/// whose Secret is adopted (or that have none) show nothing new.
pub const CONDITION: &str = "IdentitySecretAdopted";
/// Reason of [`CONDITION`].
pub const NOT_ADOPTED_REASON: &str = "SecretNotAdopted";

/// The keys an identity Secret holds (CAPV's `identityRef` Secret contract).
pub const IDENTITY_KEYS: [&str; 2] = ["username", "password"];

/// The Secret types an identity is written as: `Opaque` (`kubectl create secret generic`, CAPV's
/// cluster templates; also an unset type) and `kubernetes.io/basic-auth` (whose keys are these).
pub const IDENTITY_TYPES: [&str; 2] = ["Opaque", "kubernetes.io/basic-auth"];

/// How many key names a message lists before it says how many more.
const NAMED_KEYS: usize = 5;

/// Why `secret` is not `owner`'s to adopt, or `None` when it may be. Asked only once the
/// Secret's credentials were accepted.
pub fn refusal(secret: &Secret, owner: &Owner<'_>) -> Option<String> {
    let name = secret.metadata.name.as_deref().unwrap_or_default();
    let why = |what: String| {
        Some(format!(
            "identity Secret {name} is not adopted, so it is not deleted with this {}: {what}",
            owner.kind.as_str()
        ))
    };
    let others: Vec<String> = secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| !names_owner(r, owner))
        .map(|r| format!("{} {}", r.kind, r.name))
        .collect();
    if !others.is_empty() {
        return why(format!(
            "it is owned by {}; an identity Secret has no owner but its cluster",
            others.join(", ")
        ));
    }
    let type_ = secret.type_.as_deref().unwrap_or("Opaque");
    if !IDENTITY_TYPES.contains(&type_) {
        return why(format!(
            "its type is {type_}; an identity Secret is {}",
            IDENTITY_TYPES.join(" or ")
        ));
    }
    let mut extra: Vec<&str> = secret
        .data
        .iter()
        .flat_map(|d| d.keys())
        .chain(secret.string_data.iter().flat_map(|d| d.keys()))
        .map(String::as_str)
        .filter(|k| !IDENTITY_KEYS.contains(k))
        .collect();
    extra.sort_unstable();
    extra.dedup();
    if !extra.is_empty() {
        let more = extra.len().saturating_sub(NAMED_KEYS);
        let mut listed = extra[..extra.len().min(NAMED_KEYS)].join(", ");
        if more > 0 {
            listed.push_str(&format!(" and {more} more"));
        }
        return why(format!(
            "it holds keys besides {}: {listed}",
            IDENTITY_KEYS.join(" and ")
        ));
    }
    None
}

/// The edit that lets go of a Secret `owner` may not keep: its owner references to `owner`
/// dropped, and the finalizer too unless another VSphereCluster or VSphereClusterIdentity
/// still owns the Secret (the finalizer is then that owner's).
pub fn release(secret: &Secret, owner: &Owner<'_>) -> Edit {
    let refs = secret.metadata.owner_references.clone().unwrap_or_default();
    let finalizers = secret.metadata.finalizers.clone().unwrap_or_default();
    if !refs.iter().any(|r| names_owner(r, owner)) {
        return Edit::Keep;
    }
    let owner_references: Vec<_> = refs
        .into_iter()
        .filter(|r| !names_owner(r, owner))
        .collect();
    let held_by_another = owner_references.iter().any(identity_owner);
    let finalizers = if held_by_another {
        finalizers
    } else {
        finalizers
            .into_iter()
            .filter(|f| f != SECRET_FINALIZER)
            .collect()
    };
    Edit::Set {
        owner_references,
        finalizers,
    }
}

/// Write the refusal (or its absence) into the cluster's status. Returns whether anything
/// changed.
pub fn apply(
    status: &mut VSphereClusterStatus,
    refused: Option<&str>,
    generation: Option<i64>,
    now: &Time,
) -> bool {
    super::edit_status(status, |_, _, meta| match refused {
        Some(why) => {
            let update = ConditionUpdate::false_(CONDITION, NOT_ADOPTED_REASON, "", why);
            conditions::set_meta_condition(meta, &update, generation, now);
        }
        None => {
            conditions::remove_meta_condition(meta, CONDITION);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cluster::identity_secret::OwnerKind;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    const V1: &str = "infrastructure.cluster.x-k8s.io/v1beta1";

    fn owner() -> Owner<'static> {
        Owner {
            kind: OwnerKind::VSphereCluster,
            api_version: V1,
            name: "c1",
            uid: "uid-1",
            released: false,
        }
    }

    fn reference(api_version: &str, kind: &str, name: &str) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            ..OwnerReference::default()
        }
    }

    fn secret(keys: &[&str], refs: Vec<OwnerReference>) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("creds".into()),
                owner_references: Some(refs),
                ..ObjectMeta::default()
            },
            data: Some(
                keys.iter()
                    .map(|k| (k.to_string(), ByteString(b"value-never-shown".to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn an_identity_secret_alone_is_adoptable_also_with_a_stale_reference_of_its_cluster() {
        assert_eq!(refusal(&secret(&IDENTITY_KEYS, vec![]), &owner()), None);
        // clusterctl move: the reference names the cluster's source UID.
        let moved = secret(&IDENTITY_KEYS, vec![reference(V1, "VSphereCluster", "c1")]);
        assert_eq!(refusal(&moved, &owner()), None);
        let mut basic = secret(&["username", "password"], vec![]);
        basic.type_ = Some("kubernetes.io/basic-auth".into());
        assert_eq!(refusal(&basic, &owner()), None);
    }

    #[test]
    fn a_secret_with_other_keys_is_refused_naming_the_keys_never_a_value() {
        let s = secret(&["username", "password", "tls.crt", "token"], vec![]);
        let why = refusal(&s, &owner()).unwrap();
        assert!(
            why.contains("identity Secret creds is not adopted"),
            "{why}"
        );
        assert!(
            why.contains("keys besides username and password: tls.crt, token"),
            "{why}"
        );
        assert!(
            why.contains("not deleted with this VSphereCluster"),
            "{why}"
        );
        assert!(!why.contains("value-never-shown"), "{why}");
        // stringData counts too (a Secret as applied, before the API server folds it).
        let mut s = secret(&IDENTITY_KEYS, vec![]);
        s.string_data = Some([("ca.crt".to_string(), "x".to_string())].into());
        assert!(refusal(&s, &owner()).unwrap().contains(": ca.crt"));
        let many: Vec<String> = (0..8).map(|i| format!("k{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let why = refusal(&secret(&many, vec![]), &owner()).unwrap();
        assert!(why.ends_with("k0, k1, k2, k3, k4 and 3 more"), "{why}");
    }

    #[test]
    fn a_secret_with_any_other_owner_is_refused_naming_it() {
        for r in [
            reference("v1", "ServiceAccount", "builder"),
            reference(V1, "VSphereCluster", "c2"),
            reference(V1, "VSphereClusterIdentity", "c1"),
            reference("cert-manager.io/v1", "Certificate", "web"),
        ] {
            let why = refusal(&secret(&IDENTITY_KEYS, vec![r.clone()]), &owner()).unwrap();
            assert!(
                why.contains(&format!("it is owned by {} {}", r.kind, r.name)),
                "{why}"
            );
        }
    }

    #[test]
    fn a_secret_of_another_type_is_refused() {
        let mut s = secret(&IDENTITY_KEYS, vec![]);
        s.type_ = Some("kubernetes.io/service-account-token".into());
        let why = refusal(&s, &owner()).unwrap();
        assert!(
            why.contains("its type is kubernetes.io/service-account-token"),
            "{why}"
        );
    }

    #[test]
    fn a_refusal_is_a_false_condition_until_it_is_gone() {
        let mut status = VSphereClusterStatus::default();
        let now = Time(jiff::Timestamp::UNIX_EPOCH);
        assert!(apply(&mut status, Some("why"), Some(2), &now));
        let c = conditions::find_meta(status.conditions.as_deref().unwrap(), CONDITION).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            ("False", NOT_ADOPTED_REASON, "why")
        );
        assert!(
            !apply(&mut status, Some("why"), Some(2), &now),
            "written once"
        );
        assert!(apply(&mut status, None, Some(2), &now));
        assert_eq!(status, VSphereClusterStatus::default());
        assert!(!apply(&mut status, None, Some(2), &now));
    }

    #[test]
    fn release_drops_only_this_clusters_hold() {
        let mut ours = secret(
            &["username", "password", "extra"],
            vec![
                reference("v1", "ConfigMap", "x"),
                reference(V1, "VSphereCluster", "c1"),
            ],
        );
        ours.metadata.finalizers = Some(vec![SECRET_FINALIZER.into(), "other".into()]);
        assert_eq!(
            release(&ours, &owner()),
            Edit::Set {
                owner_references: vec![reference("v1", "ConfigMap", "x")],
                finalizers: vec!["other".into()],
            }
        );
        // Another cluster holds it too: its finalizer stays.
        ours.metadata.owner_references = Some(vec![
            reference(V1, "VSphereCluster", "c2"),
            reference(V1, "VSphereCluster", "c1"),
        ]);
        let Edit::Set { finalizers, .. } = release(&ours, &owner()) else {
            panic!()
        };
        assert!(finalizers.contains(&SECRET_FINALIZER.to_string()));
        // Never ours: nothing to write.
        let never = secret(&["x"], vec![reference("v1", "ConfigMap", "x")]);
        assert_eq!(release(&never, &owner()), Edit::Keep);
    }
}
