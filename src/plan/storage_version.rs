//! When a CRD's stored objects must be rewritten: its storage version moved (v1beta1 → v1beta2
//! in this release) and `status.storedVersions` still lists an older one, so etcd may hold
//! objects encoded in it. The API server reads those through the conversion webhook for as
//! long as they stay, and a future release that stops serving v1beta1 could not read them at
//! all; Kubernetes refuses to drop a version from a CRD while `storedVersions` lists it.
//!
//! The rewrite itself is a no-op write of each object, which the API server re-encodes in the
//! storage version ([`crate::controllers::storage_migration`]); only after every object has
//! been rewritten may `storedVersions` shrink to the storage version alone.

/// The versions (names, e.g. `v1beta1`) other than `storage` that `stored_versions` lists:
/// empty when nothing needs rewriting.
pub fn outdated<'a>(stored_versions: &'a [String], storage: &str) -> Vec<&'a str> {
    stored_versions
        .iter()
        .map(String::as_str)
        .filter(|v| *v != storage)
        .collect()
}

/// What to do with one CRD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Migration {
    /// Every stored object is in `storage` already.
    Done,
    /// The installed CRD stores another version than this release (`stores`): its objects
    /// cannot be moved to `storage` until this release's CRDs are applied. Rewriting them would
    /// store the old version again, and narrowing `storedVersions` would then be a lie.
    CrdOlderThanManager {
        /// The version the installed CRD stores (None: it marks none).
        stores: Option<String>,
    },
    /// Rewrite every object, then narrow `storedVersions` to `storage`.
    Rewrite,
}

/// The decision for a CRD whose `status.storedVersions` is `stored_versions` and whose spec
/// stores `crd_stores`, when this release stores `storage`.
pub fn decide(stored_versions: &[String], crd_stores: Option<&str>, storage: &str) -> Migration {
    if outdated(stored_versions, storage).is_empty() {
        Migration::Done
    } else if crd_stores != Some(storage) {
        Migration::CrdOlderThanManager {
            stores: crd_stores.map(str::to_string),
        }
    } else {
        Migration::Rewrite
    }
}

/// Whether the manager may write a kind at `writes` (a version name) to a CRD that stores
/// `crd_stores` and converts through a webhook or not. Without a webhook the API server does
/// not convert: it stores what it is sent relabelled as the storage version, so a v1beta2 zone
/// written to the previous release's CRDs (which store v1beta1) would be stored as a v1beta1
/// zone with v1beta2's fields, pruned and broken. The CRDs come first in an upgrade.
pub fn writable(crd_stores: Option<&str>, converts: bool, writes: &str) -> bool {
    converts || crd_stores == Some(writes)
}

/// What a rewrite of one object came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rewrite {
    /// Written again: now in the storage version.
    Written,
    /// Someone wrote it since it was listed (409): any write since the storage version moved is
    /// in the new version, so it needs nothing more.
    ChangedMeanwhile,
    /// Deleted since it was listed (404).
    Gone,
}

impl Rewrite {
    /// The outcome of the no-op write by its HTTP status (`None`: success), or `None` when the
    /// status is an error that leaves the object unmigrated (retry the whole CRD later).
    pub fn from_status(code: Option<u16>) -> Option<Rewrite> {
        match code {
            None => Some(Rewrite::Written),
            Some(409) => Some(Rewrite::ChangedMeanwhile),
            Some(404) => Some(Rewrite::Gone),
            Some(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crd_without_conversion_takes_only_the_version_it_stores() {
        // This release's CRDs (v1beta2 stored, webhook) take writes at either version.
        assert!(writable(Some("v1beta2"), true, "v1beta1"));
        assert!(writable(Some("v1beta2"), true, "v1beta2"));
        // The previous release's CRDs (v1beta1 stored, no webhook): a hub-typed manager must
        // wait for this release's CRDs.
        assert!(!writable(Some("v1beta1"), false, "v1beta2"));
        assert!(writable(Some("v1beta1"), false, "v1beta1"));
        // crds/ applied without config/crd's webhook.
        assert!(!writable(Some("v1beta2"), false, "v1beta1"));
        assert!(!writable(None, false, "v1beta2"));
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_crd_that_only_ever_stored_the_storage_version_needs_nothing() {
        assert!(outdated(&names(&["v1beta2"]), "v1beta2").is_empty());
        // Fresh installs of this release: nothing was ever stored as v1beta1.
        assert!(outdated(&[], "v1beta2").is_empty());
    }

    #[test]
    fn an_upgraded_crd_lists_the_versions_to_rewrite_away() {
        assert_eq!(
            outdated(&names(&["v1beta1", "v1beta2"]), "v1beta2"),
            ["v1beta1"]
        );
        assert_eq!(outdated(&names(&["v1beta1"]), "v1beta2"), ["v1beta1"]);
        assert_eq!(
            outdated(&names(&["v1alpha3", "v1beta1", "v1beta2"]), "v1beta2"),
            ["v1alpha3", "v1beta1"]
        );
    }

    #[test]
    fn objects_are_rewritten_only_once_the_crd_stores_the_new_version() {
        let upgraded = names(&["v1beta1", "v1beta2"]);
        assert_eq!(
            decide(&upgraded, Some("v1beta2"), "v1beta2"),
            Migration::Rewrite
        );
        // A new manager against the previous release's CRDs (still storing v1beta1).
        assert_eq!(
            decide(&names(&["v1beta1"]), Some("v1beta1"), "v1beta2"),
            Migration::CrdOlderThanManager {
                stores: Some("v1beta1".into())
            }
        );
        assert_eq!(
            decide(&names(&["v1beta2"]), Some("v1beta2"), "v1beta2"),
            Migration::Done
        );
    }

    #[test]
    fn a_conflict_or_a_deletion_needs_no_retry_but_other_errors_do() {
        assert_eq!(Rewrite::from_status(None), Some(Rewrite::Written));
        assert_eq!(
            Rewrite::from_status(Some(409)),
            Some(Rewrite::ChangedMeanwhile)
        );
        assert_eq!(Rewrite::from_status(Some(404)), Some(Rewrite::Gone));
        for code in [400, 403, 422, 500, 503] {
            assert_eq!(Rewrite::from_status(Some(code)), None, "{code}");
        }
    }
}
