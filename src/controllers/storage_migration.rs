//! The storage-version migration of our CRDs (`plan::storage_version` decides what is
//! outdated): objects stored as v1beta1 by earlier releases are written again, unchanged, so
//! the API server re-encodes them as v1beta2, and then each CRD's `status.storedVersions` is
//! narrowed to v1beta2. CAPV's manager does the same at start (CAPI's CRD migrator); `clusterctl
//! upgrade` does it too, and a CRD it already migrated is skipped here after one read.
//!
//! Runs once per leadership term, beside the controllers; a failure (RBAC, an API server
//! restart) is logged with the CRD and retried with a growing delay, never fatal: the objects
//! stay readable through the conversion webhook meanwhile.
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::Shutdown;
use crate::api::{INFRA_GROUP, Kind};
use crate::plan::storage_version::{Migration, Rewrite, decide};

/// The first wait after a failed attempt; doubled up to [`RETRY_CAP`].
const RETRY_BASE: Duration = Duration::from_secs(2);
const RETRY_CAP: Duration = Duration::from_secs(300);
/// Objects per list page.
const PAGE: u32 = 250;

/// What one pass over a CRD came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing stored in an older version.
    NothingToDo,
    /// The CRD still stores an older version (warned): checked again later.
    CrdNotUpgraded,
    /// Every object rewritten and `storedVersions` narrowed.
    Migrated(Migrated),
}

/// What one CRD's migration did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// Objects written again.
    pub rewritten: usize,
    /// Objects changed or deleted by others meanwhile (already in the new version, or gone).
    pub skipped: usize,
}

/// Migrates every kind served at more than one version (objects an earlier release stored at
/// another one may exist, whichever version the controllers' types are), until each is done
/// or `shutdown`.
pub async fn run(client: Client, shutdown: Shutdown) {
    let kinds = Kind::ALL.into_iter().filter(|k| k.api_versions().len() > 1);
    for kind in kinds {
        let mut wait = RETRY_BASE;
        loop {
            if shutdown.is_triggered() {
                return;
            }
            let result = migrate(&client, kind).await;
            match result {
                Ok(Outcome::NothingToDo) => break,
                Ok(Outcome::Migrated(m)) => {
                    tracing::info!(
                        crd = %crd_name(kind),
                        storage = kind.storage_version(),
                        rewritten = m.rewritten,
                        changed_or_deleted_meanwhile = m.skipped,
                        "storage migration done: every object is stored in the storage version"
                    );
                    break;
                }
                Ok(Outcome::CrdNotUpgraded) | Err(_) => {
                    if let Err(e) = &result {
                        tracing::warn!(
                            crd = %crd_name(kind),
                            error = %e,
                            retry_in = ?wait,
                            "storage migration failed; objects stay readable through the conversion webhook"
                        );
                    }
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = shutdown.clone().wait() => return,
                    }
                    wait = (wait * 2).min(RETRY_CAP);
                }
            }
        }
    }
}

/// How long the startup check's finding that a CRD has nothing to migrate stands in for the
/// migration's own read of it: the controllers (and this migration) start moments after the
/// check, so reading each CRD again was one request per kind on every process start.
const FOUND_MIGRATED_FOR: Duration = Duration::from_secs(60);

/// The kinds the startup check (`startup::check`, which reads each CRD anyway) found fully
/// migrated, and when. A process-wide note, not state to share: a kind is looked up once and
/// forgotten, so a later leadership term reads its CRD again.
static FOUND_MIGRATED: std::sync::Mutex<Vec<(Kind, std::time::Instant)>> =
    std::sync::Mutex::new(Vec::new());

/// The startup check read `crd` of `kind`: note whether it has nothing to migrate.
pub(crate) fn note_checked(kind: Kind, crd: &CustomResourceDefinition) {
    if crd_outcome(kind, crd) == Some(Outcome::NothingToDo) {
        let mut found = FOUND_MIGRATED.lock().unwrap_or_else(|e| e.into_inner());
        found.retain(|(k, _)| *k != kind);
        found.push((kind, std::time::Instant::now()));
    }
}

/// Whether the startup check found `kind` migrated moments ago (and forget it).
fn found_migrated(kind: Kind) -> bool {
    let mut found = FOUND_MIGRATED.lock().unwrap_or_else(|e| e.into_inner());
    let fresh = found
        .iter()
        .any(|(k, at)| *k == kind && at.elapsed() < FOUND_MIGRATED_FOR);
    found.retain(|(k, _)| *k != kind);
    fresh
}

/// The version `crd` stores new writes in (`None`: it names none).
pub(crate) fn crd_stores(crd: &CustomResourceDefinition) -> Option<&str> {
    crd.spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.as_str())
}

/// What `crd` says about `kind`'s storage ([`decide`] on its `status.storedVersions` and the
/// version it stores).
fn crd_migration(kind: Kind, crd: &CustomResourceDefinition) -> Migration {
    let stored = crd
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default();
    decide(
        &stored,
        crd_stores(crd),
        version_name(kind.storage_version()),
    )
}

/// What `crd` alone says: nothing to do, the CRD too old, or `None` (objects to rewrite).
fn crd_outcome(kind: Kind, crd: &CustomResourceDefinition) -> Option<Outcome> {
    match crd_migration(kind, crd) {
        Migration::Done => Some(Outcome::NothingToDo),
        Migration::CrdOlderThanManager { .. } => Some(Outcome::CrdNotUpgraded),
        Migration::Rewrite => None,
    }
}

/// `<plural>.<group>`.
pub fn crd_name(kind: Kind) -> String {
    format!("{}.{INFRA_GROUP}", kind.plural())
}

/// Rewrites `kind`'s objects if its CRD still lists an older stored version, then narrows
/// `storedVersions`.
pub async fn migrate(client: &Client, kind: Kind) -> Result<Outcome, kube::Error> {
    if found_migrated(kind) {
        return Ok(Outcome::NothingToDo);
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd_name(kind);
    let crd = crds.get(&name).await?;
    let storage = version_name(kind.storage_version());
    match crd_migration(kind, &crd) {
        Migration::Done => return Ok(Outcome::NothingToDo),
        Migration::CrdOlderThanManager { stores } => {
            tracing::warn!(
                crd = %name,
                stores = stores.as_deref().unwrap_or("nothing"),
                expected = storage,
                "this CRD is older than the manager; apply this release's CRDs (config/crd, or \
                 `vsphere-provider crds`) so that its objects can be stored as {storage}"
            );
            return Ok(Outcome::CrdNotUpgraded);
        }
        Migration::Rewrite => {}
    }
    let resource = ApiResource {
        group: INFRA_GROUP.into(),
        version: storage.into(),
        api_version: kind.storage_version().into(),
        kind: kind.name().into(),
        plural: kind.plural().into(),
    };
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut done = Migrated::default();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = all.list_metadata(&params).await?;
        for object in &page.items {
            let api: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            // A no-op write, guarded by the listed resourceVersion: the server encodes the
            // object anew in the storage version. A 409 means someone wrote it since, which
            // already stored it in the new version.
            let body = json!({"metadata": {"resourceVersion": object.metadata.resource_version}});
            let result = api
                .patch_metadata(
                    &object.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&body),
                )
                .await;
            let rewrite = match result {
                Ok(_) => Rewrite::Written,
                Err(kube::Error::Api(s)) => {
                    Rewrite::from_status(Some(s.code)).ok_or(kube::Error::Api(s))?
                }
                Err(e) => return Err(e),
            };
            match rewrite {
                Rewrite::Written => done.rewritten += 1,
                Rewrite::ChangedMeanwhile | Rewrite::Gone => done.skipped += 1,
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    crds.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"storedVersions": [storage]}})),
    )
    .await?;
    Ok(Outcome::Migrated(done))
}

/// `v1beta2` of `group/v1beta2`.
fn version_name(api_version: &str) -> &str {
    api_version.rsplit('/').next().unwrap_or(api_version)
}
