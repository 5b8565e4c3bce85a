//! Before the controllers start: the API server answers and serves every kind they watch.
//!
//! Neither is a reason to exit. In a Deployment an exit is a crash loop: the kubelet restarts
//! the container after 10 s, 20 s … 5 min, the reason scrolls away into the previous
//! container's log, and the probes say nothing meanwhile. Both faults are usually transient
//! too: `kubectl apply -k config/default` creates the CRDs and the Deployment together, so the
//! manager may start before its CRDs are Established; an API server restarts during an
//! upgrade. So the manager keeps running (its `/healthz` answers, `/readyz` says what it waits
//! for), logs what is wrong — the server's URL, the missing CustomResourceDefinition and how
//! to install it, the refused verb — and checks again with a growing delay until it can start.
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;

use super::Shutdown;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::api::Kind;
use crate::api::control_plane_machine_set::ControlPlaneMachineSet;
use crate::api::machine_health_check::MachineHealthCheck;
use crate::api::{Machine, VSphereCluster, VSphereDeploymentZone, VSphereFailureDomain};

/// The first wait after a failed check; doubled after each failure up to [`RETRY_CAP`].
pub const RETRY_BASE: Duration = Duration::from_secs(1);
/// The longest wait between two checks.
pub const RETRY_CAP: Duration = Duration::from_secs(30);
/// How long one check may wait for an answer (a black-holed address never refuses).
const CHECK_TIMEOUT: Duration = Duration::from_secs(15);

/// Why the controllers cannot start yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotServed {
    /// No answer from the server (refused, reset, TLS, DNS, timeout).
    #[error("cannot reach the Kubernetes API server at {server}: {error}")]
    Unreachable { server: String, error: String },
    /// The kind's CustomResourceDefinition is not installed (or not Established yet).
    #[error(
        "the CustomResourceDefinition {plural}.{group} ({kind}) is not installed; install the \
         CRDs: `vsphere-provider crds | kubectl apply -f -` (or `kubectl apply -k config/crd`)"
    )]
    MissingCrd {
        plural: String,
        group: String,
        kind: String,
    },
    /// The kind's CRD stores another version than the manager writes, with no conversion
    /// webhook to convert between them ([`crate::plan::storage_version::writable`]).
    #[error(
        "the CustomResourceDefinition {crd} stores {stores} and has no conversion webhook, but \
         this manager writes {kind} at {writes}: the API server would store those writes \
         unconverted; apply this release's CRDs with their conversion webhook \
         (`kubectl apply -k config/crd`) first"
    )]
    CrdOlderThanManager {
        crd: String,
        stores: String,
        kind: String,
        writes: String,
    },
    /// The server refused to list the kind to this identity.
    #[error(
        "the Kubernetes API server refuses to list {resource}: {error}; bind the manager's \
         ServiceAccount with config/rbac"
    )]
    Forbidden { resource: String, error: String },
    /// Any other answer.
    #[error("cannot list {resource} from the Kubernetes API server at {server}: {error}")]
    Other {
        resource: String,
        server: String,
        error: String,
    },
}

/// What a failed list of `K` means.
fn classify<K>(server: &str, e: &kube::Error) -> NotServed
where
    K: kube::Resource<DynamicType = ()>,
{
    let resource = if K::group(&()).is_empty() {
        K::plural(&()).into_owned()
    } else {
        format!("{}.{}", K::plural(&()), K::group(&()))
    };
    match e {
        kube::Error::Api(s) if s.code == 404 => NotServed::MissingCrd {
            plural: K::plural(&()).into_owned(),
            group: K::group(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
        },
        kube::Error::Api(s) if s.code == 401 || s.code == 403 => NotServed::Forbidden {
            resource,
            error: s.message.clone(),
        },
        kube::Error::Api(s) => NotServed::Other {
            resource,
            server: server.to_string(),
            error: format!("{} ({})", s.message, s.code),
        },
        other => NotServed::Unreachable {
            server: server.to_string(),
            error: full_chain(other),
        },
    }
}

/// An error with its sources (`client error (Connect)` alone does not say "connection refused").
fn full_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// One check: every kind the controllers watch can be listed.
pub async fn check(client: &kube::Client, server: &str) -> Result<(), NotServed> {
    async fn served<K>(client: &kube::Client, server: &str) -> Result<(), NotServed>
    where
        K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let api = Api::<K>::all(client.clone());
        let params = ListParams::default().limit(1);
        match tokio::time::timeout(CHECK_TIMEOUT, api.list_metadata(&params)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(classify::<K>(server, &e)),
            Err(_) => Err(NotServed::Unreachable {
                server: server.to_string(),
                error: format!("no answer within {CHECK_TIMEOUT:?}"),
            }),
        }
    }
    served::<VSphereDeploymentZone>(client, server).await?;
    served::<VSphereFailureDomain>(client, server).await?;
    served::<VSphereCluster>(client, server).await?;
    served::<Machine>(client, server).await?;
    served::<ControlPlaneMachineSet>(client, server).await?;
    served::<MachineHealthCheck>(client, server).await?;
    served::<Node>(client, server).await?;
    for kind in Kind::ALL.into_iter().filter(|k| k.api_versions().len() > 1) {
        stores_what_we_write(client, server, kind).await?;
    }
    Ok(())
}

/// The kind's CRD takes the manager's writes as they are meant ([`NotServed::CrdOlderThanManager`]).
async fn stores_what_we_write(
    client: &kube::Client,
    server: &str,
    kind: Kind,
) -> Result<(), NotServed> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crate::controllers::storage_migration::crd_name(kind);
    let crd = match tokio::time::timeout(CHECK_TIMEOUT, crds.get(&name)).await {
        Ok(Ok(crd)) => crd,
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => {
            let (group, _) = kind.api_version().split_once('/').unwrap_or_default();
            return Err(NotServed::MissingCrd {
                plural: kind.plural().into(),
                group: group.into(),
                kind: kind.name().into(),
            });
        }
        Ok(Err(e)) => return Err(classify::<CustomResourceDefinition>(server, &e)),
        Err(_) => {
            return Err(NotServed::Unreachable {
                server: server.to_string(),
                error: format!("no answer within {CHECK_TIMEOUT:?}"),
            });
        }
    };
    crate::controllers::storage_migration::note_checked(kind, &crd);
    let stores = crate::controllers::storage_migration::crd_stores(&crd);
    let converts = crd
        .spec
        .conversion
        .as_ref()
        .is_some_and(|c| c.strategy == "Webhook");
    let writes = kind.api_version().rsplit('/').next().unwrap_or_default();
    if crate::plan::storage_version::writable(stores, converts, writes) {
        Ok(())
    } else {
        Err(NotServed::CrdOlderThanManager {
            crd: name,
            stores: stores.unwrap_or("no version").into(),
            kind: kind.name().into(),
            writes: writes.into(),
        })
    }
}

/// The wait after the `failures`-th failed check in a row (1-based): 1 s, 2 s, 4 s … 30 s.
pub fn retry_delay(failures: u32) -> Duration {
    RETRY_BASE
        .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(16)))
        .min(RETRY_CAP)
}

/// Check until everything is served (true) or `shutdown` fires (false), logging each failure
/// with what to fix and when the next check is.
pub async fn wait_until_served(client: &kube::Client, server: &str, shutdown: &Shutdown) -> bool {
    let mut failures = 0u32;
    loop {
        if shutdown.is_triggered() {
            return false;
        }
        match check(client, server).await {
            Ok(()) => {
                if failures > 0 {
                    tracing::info!(%server, failures, "the Kubernetes API server serves every kind the controllers watch");
                }
                return true;
            }
            Err(why) => {
                failures += 1;
                let delay = retry_delay(failures);
                tracing::warn!(%server, attempt = failures, retry_in = ?delay, "cannot start the controllers yet: {why}");
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = shutdown.clone().wait() => return false,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_up_to_the_cap() {
        let secs: Vec<u64> = (1..=8).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(retry_delay(u32::MAX), RETRY_CAP);
    }

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, "Reason")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn each_failure_names_what_to_fix() {
        let server = "https://127.0.0.1:6443";
        let missing = classify::<MachineHealthCheck>(server, &api_error(404, "not found"));
        assert_eq!(
            missing.to_string(),
            "the CustomResourceDefinition machinehealthchecks.machine.openshift.io \
             (MachineHealthCheck) is not installed; install the CRDs: `vsphere-provider crds | \
             kubectl apply -f -` (or `kubectl apply -k config/crd`)"
        );
        let refused = classify::<Node>(
            server,
            &api_error(
                403,
                "nodes is forbidden: User \"x\" cannot list resource \"nodes\"",
            ),
        );
        assert!(
            refused
                .to_string()
                .starts_with("the Kubernetes API server refuses to list nodes: nodes is forbidden"),
            "{refused}"
        );
        let other = classify::<Machine>(server, &api_error(500, "etcd is down"));
        assert!(other.to_string().contains(server), "{other}");
        assert!(other.to_string().contains("(500)"), "{other}");
    }
}
