//! The status of a VSphereClusterIdentity, as CAPV's VSphereClusterIdentity controller writes it,
//! pure: the controller says what it found (paused, being deleted, the Secret's state) and
//! writes what [`status`] answers when it differs from what is there.
//!
//! * `ready` — true once the Secret is the identity's own; false when another owner has it or
//!   it cannot be read (CAPV leaves `ready` as it was when the Secret is missing: an identity
//!   whose Secret was deleted would stay ready, see docs/differences.md).
//! * v1beta1 `CredentialsAvailable`, summarized into v1beta1 `Ready` (Cluster API's summary of a
//!   single condition: the same status, reason, severity and message).
//! * v1beta2 `Available` (reasons `Available`, `SecretNotAvailable`, `SecretAlreadyInUse`,
//!   `SettingSecretOwnerReferenceFailed`, `Deleting`) and `Paused` (the `cluster.x-k8s.io/paused`
//!   annotation; an identity belongs to no Cluster, so nothing else pauses it).
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::api::capi_core::PAUSED_ANNOTATION;
use crate::api::cluster_identity::VSphereClusterIdentityStatus;
use crate::api::conditions::{
    self, CapiCondition, ConditionUpdate, MetaCondition, common, identity, identity_v1beta1,
    severity,
};
use crate::api::infrastructure::v1beta2::common::DeprecatedStatus;

/// Why the identity is paused, if it is: its `cluster.x-k8s.io/paused` annotation (it belongs
/// to no Cluster, so that is the only way; CAPV's `EnsurePausedCondition` without a Cluster).
pub fn paused(meta: &ObjectMeta) -> Option<String> {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(PAUSED_ANNOTATION))
        .then(|| format!("VSphereClusterIdentity has the annotation {PAUSED_ANNOTATION}"))
}

/// What became of the identity's Secret this pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
    /// The Secret carries the identity's owner reference and the finalizer.
    Available,
    /// The Secret cannot be read (the message names it as `namespace/name`).
    SecretNotAvailable(String),
    /// Another VSphereCluster or VSphereClusterIdentity owns it.
    SecretInUse(String),
    /// Writing the owner reference or finalizer failed.
    OwnerReferenceFailed(String),
}

/// What the controller found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Paused (the message says why): only `Paused` is written, nothing else is done.
    Paused(String),
    /// Being deleted: `Available` is False with `Deleting` while the Secret is let go.
    Deleting,
    /// Reconciled: the Secret's state.
    Active(Credentials),
}

/// The status after `phase`, from `current`; `lastTransitionTime`s move only on a flip, so an
/// unchanged outcome gives back `current` (compared by the caller: no write, no event).
pub fn status(
    current: Option<&VSphereClusterIdentityStatus>,
    phase: &Phase,
    generation: Option<i64>,
    now: &Time,
) -> VSphereClusterIdentityStatus {
    let mut out = current.cloned().unwrap_or_default();
    let mut v1: Vec<CapiCondition> = out
        .deprecated
        .take()
        .and_then(|d| d.v1beta1)
        .and_then(|v| v.conditions)
        .unwrap_or_default();
    let mut v2: Vec<MetaCondition> = out.conditions.take().unwrap_or_default();
    let paused = match phase {
        Phase::Paused(why) => {
            ConditionUpdate::true_reason(common::PAUSED, common::PAUSED_REASON, why.as_str())
        }
        _ => ConditionUpdate::false_(common::PAUSED, common::NOT_PAUSED_REASON, "", ""),
    };
    conditions::set_meta_condition(&mut v2, &paused, generation, now);
    match phase {
        Phase::Paused(_) => {}
        Phase::Deleting => {
            let deleting =
                ConditionUpdate::false_(identity::AVAILABLE, common::DELETING_REASON, "", "");
            conditions::set_meta_condition(&mut v2, &deleting, generation, now);
        }
        Phase::Active(credentials) => {
            let (v1_update, v2_update, ready) = updates(credentials);
            conditions::set_capi_condition(&mut v1, &v1_update, now);
            // The v1beta1 summary of the one condition.
            let summary = ConditionUpdate {
                type_: common::READY,
                ..v1_update
            };
            conditions::set_capi_condition(&mut v1, &summary, now);
            conditions::set_meta_condition(&mut v2, &v2_update, generation, now);
            if let Some(ready) = ready {
                out.ready = Some(ready);
            }
        }
    }
    if !v1.is_empty() {
        *DeprecatedStatus::v1beta1_conditions_mut(&mut out.deprecated) = v1;
    }
    out.conditions = Some(v2);
    out
}

/// The v1beta1 and v1beta2 conditions of `credentials`, and `ready` (`None`: left as it is, as
/// CAPV does when the write failed; a retry decides).
fn updates(credentials: &Credentials) -> (ConditionUpdate<'_>, ConditionUpdate<'_>, Option<bool>) {
    use identity_v1beta1::CREDENTIALS_AVAILABLE;
    match credentials {
        Credentials::Available => (
            ConditionUpdate::true_(CREDENTIALS_AVAILABLE),
            ConditionUpdate::true_reason(identity::AVAILABLE, common::AVAILABLE_REASON, ""),
            Some(true),
        ),
        Credentials::SecretNotAvailable(m) => (
            ConditionUpdate::false_(
                CREDENTIALS_AVAILABLE,
                identity_v1beta1::SECRET_NOT_AVAILABLE,
                severity::WARNING,
                m,
            ),
            ConditionUpdate::false_(identity::AVAILABLE, identity::SECRET_NOT_AVAILABLE, "", m),
            Some(false),
        ),
        Credentials::SecretInUse(m) => (
            ConditionUpdate::false_(
                CREDENTIALS_AVAILABLE,
                identity_v1beta1::SECRET_IN_USE,
                severity::ERROR,
                m,
            ),
            ConditionUpdate::false_(identity::AVAILABLE, identity::SECRET_ALREADY_IN_USE, "", m),
            Some(false),
        ),
        Credentials::OwnerReferenceFailed(m) => (
            ConditionUpdate::false_(
                CREDENTIALS_AVAILABLE,
                identity_v1beta1::SECRET_OWNER_REFERENCE_FAILED,
                severity::WARNING,
                m,
            ),
            ConditionUpdate::false_(
                identity::AVAILABLE,
                identity::SETTING_SECRET_OWNER_REFERENCE_FAILED,
                "",
                m,
            ),
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::conditions::{find_capi, find_meta};

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn v2(s: &VSphereClusterIdentityStatus, type_: &str) -> MetaCondition {
        find_meta(s.conditions.as_ref().unwrap(), type_)
            .unwrap()
            .clone()
    }

    fn v1(s: &VSphereClusterIdentityStatus, type_: &str) -> CapiCondition {
        find_capi(DeprecatedStatus::v1beta1_conditions(&s.deprecated), type_)
            .unwrap()
            .clone()
    }

    #[test]
    fn an_owned_secret_makes_the_identity_ready_and_available_once() {
        let s = status(
            None,
            &Phase::Active(Credentials::Available),
            Some(1),
            &at(1),
        );
        assert_eq!(s.ready, Some(true));
        assert_eq!(v1(&s, "CredentialsAvailable").status, "True");
        assert_eq!(v1(&s, "Ready").status, "True");
        let available = v2(&s, "Available");
        assert_eq!(
            (available.status.as_str(), available.reason.as_str()),
            ("True", "Available")
        );
        assert_eq!(available.observed_generation, Some(1));
        let paused = v2(&s, "Paused");
        assert_eq!(
            (paused.status.as_str(), paused.reason.as_str()),
            ("False", "NotPaused")
        );
        // The same outcome later is the same status: nothing to write.
        let again = status(
            Some(&s),
            &Phase::Active(Credentials::Available),
            Some(1),
            &at(9),
        );
        assert_eq!(again, s);
    }

    #[test]
    fn a_secret_in_use_uses_capvs_reasons_in_both_styles() {
        let ready = status(None, &Phase::Active(Credentials::Available), None, &at(1));
        let s = status(
            Some(&ready),
            &Phase::Active(Credentials::SecretInUse("taken".into())),
            None,
            &at(2),
        );
        assert_eq!(s.ready, Some(false));
        let c = v1(&s, "CredentialsAvailable");
        assert_eq!(
            (
                c.status.as_str(),
                c.reason.as_deref(),
                c.severity.as_deref()
            ),
            ("False", Some("SecretInUse"), Some("Error"))
        );
        assert_eq!(c.last_transition_time, at(2));
        assert_eq!(v1(&s, "Ready").reason.as_deref(), Some("SecretInUse"));
        let a = v2(&s, "Available");
        assert_eq!(
            (a.status.as_str(), a.reason.as_str(), a.message.as_str()),
            ("False", "SecretAlreadyInUse", "taken")
        );
    }

    #[test]
    fn a_missing_secret_is_named_and_not_ready() {
        let s = status(
            None,
            &Phase::Active(Credentials::SecretNotAvailable(
                "Secret ns/creds not found".into(),
            )),
            None,
            &at(1),
        );
        assert_eq!(s.ready, Some(false));
        let c = v1(&s, "CredentialsAvailable");
        assert_eq!(c.reason.as_deref(), Some("SecretNotAvailable"));
        assert_eq!(c.severity.as_deref(), Some("Warning"));
        let a = v2(&s, "Available");
        assert_eq!(a.reason, "SecretNotAvailable");
        assert!(a.message.contains("ns/creds"));
    }

    #[test]
    fn a_failed_write_leaves_ready_alone() {
        let ready = status(None, &Phase::Active(Credentials::Available), None, &at(1));
        let s = status(
            Some(&ready),
            &Phase::Active(Credentials::OwnerReferenceFailed("conflict".into())),
            None,
            &at(2),
        );
        assert_eq!(s.ready, Some(true));
        assert_eq!(
            v1(&s, "CredentialsAvailable").reason.as_deref(),
            Some("SecretOwnerReferenceFailed")
        );
        assert_eq!(
            v2(&s, "Available").reason,
            "SettingSecretOwnerReferenceFailed"
        );
    }

    #[test]
    fn only_the_annotation_pauses_an_identity() {
        let mut meta = ObjectMeta::default();
        assert_eq!(paused(&meta), None);
        meta.annotations = Some([(PAUSED_ANNOTATION.to_string(), String::new())].into());
        assert!(paused(&meta).unwrap().contains(PAUSED_ANNOTATION));
    }

    #[test]
    fn deleting_and_paused_touch_only_their_conditions() {
        let ready = status(None, &Phase::Active(Credentials::Available), None, &at(1));
        let deleting = status(Some(&ready), &Phase::Deleting, None, &at(2));
        let a = v2(&deleting, "Available");
        assert_eq!(
            (a.status.as_str(), a.reason.as_str()),
            ("False", "Deleting")
        );
        // The v1beta1 conditions stay as they were.
        assert_eq!(deleting.deprecated, ready.deprecated);
        assert_eq!(deleting.ready, Some(true));
        let paused = status(
            Some(&ready),
            &Phase::Paused("annotated".into()),
            None,
            &at(3),
        );
        let p = v2(&paused, "Paused");
        assert_eq!((p.status.as_str(), p.reason.as_str()), ("True", "Paused"));
        assert_eq!(v2(&paused, "Available"), v2(&ready, "Available"));
    }
}
