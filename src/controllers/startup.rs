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
//!
//! # What it costs: one request per CRD we write, and nothing per watched kind
//!
//! The check before the controllers ([`check`]) reads, by name, the CRD of each kind we serve
//! at more than one version (8 GETs, all at once: one round trip). That read is needed anyway:
//! it is the only way to learn that a CRD is older than the manager
//! ([`NotServed::CrdOlderThanManager`]) and it is the storage migration's read too
//! ([`storage_migration::note_checked`]). It proves, with no request of its own, what a `list
//! ?limit=1` per kind proved before: the server answers (else [`NotServed::Unreachable`] with its
//! URL), and each of our kinds has its CRD installed and Established (else
//! [`NotServed::MissingCrd`]). Every watched VSphere kind is one of these.
//!
//! What a CRD read cannot prove — that this identity may list and watch a kind, and that the
//! kinds without a CRD of ours to read (Node; OpenShift's Machine, ControlPlaneMachineSet and
//! MachineHealthCheck) are served — the watches prove with their first request, which the
//! controllers make anyway. Until a watch has its first answer, its refusals are told as the
//! check tells its own ([`FirstAnswer`]): the same classified message ("the
//! CustomResourceDefinition … is not installed; install the CRDs …", "refuses to watch …;
//! bind the manager's ServiceAccount with config/rbac", the server's URL), logged as `cannot
//! start the controllers yet`, retried at [`retry_delay`] (1 s, 2 s … 30 s), and named by
//! `/readyz`; the controllers start once every watch has answered. This saved 7 requests on
//! every process start (a `list ?limit=1` per kind, the 15-request check became 8). One
//! difference: with leader election, a standby replica makes no watch, so it finds a missing
//! OpenShift CRD or a refused watch only when it leads (the leader tells meanwhile); an
//! unreachable server and our own CRDs it still finds before the lease.
//!
//! Not done: one `list` of CustomResourceDefinitions instead of 8 GETs. RBAC can narrow `get`
//! to our CRDs' names (config/rbac does), not `list`: that would be a cluster-wide grant to
//! read every CRD, for 7 requests per process start; and with no label of ours on the CRDs
//! (installs made before one would lack it) the list would carry every CRD of the cluster.
use crate::api::conditions::STATUS_TRUE;
use std::sync::Arc;
use std::time::Duration;

use kube::Api;

use super::{Health, Shutdown, storage_migration};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::api::Kind;

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
    /// The server refused a request (`verb`: list, watch or get) on the resource to this
    /// identity.
    #[error(
        "the Kubernetes API server refuses to {verb} {resource}: {error}; bind the manager's \
         ServiceAccount with config/rbac"
    )]
    Forbidden {
        verb: String,
        resource: String,
        error: String,
    },
    /// Any other answer.
    #[error("cannot {verb} {resource} from the Kubernetes API server at {server}: {error}")]
    Other {
        verb: String,
        resource: String,
        server: String,
        error: String,
    },
}

/// `plural.group`, or `plural` for the core group.
fn resource_name(plural: &str, group: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// The verb a refusal names (`… cannot watch resource "nodes" …`: the server says which one it
/// checked), else the one the request was made with.
fn refused_verb<'a>(message: &'a str, requested: &'a str) -> &'a str {
    message
        .split_once("cannot ")
        .and_then(|(_, rest)| rest.split_once(" resource"))
        .map(|(verb, _)| verb)
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_lowercase()))
        .unwrap_or(requested)
}

/// What a failed `verb` of `K` means.
pub(crate) fn classify<K>(server: &str, verb: &str, e: &kube::Error) -> NotServed
where
    K: kube::Resource<DynamicType = ()>,
{
    let (plural, group) = (K::plural(&()), K::group(&()));
    let resource = resource_name(&plural, &group);
    match e {
        kube::Error::Api(s) if s.code == 404 => NotServed::MissingCrd {
            plural: plural.into_owned(),
            group: group.into_owned(),
            kind: K::kind(&()).into_owned(),
        },
        kube::Error::Api(s) if s.code == 401 || s.code == 403 => NotServed::Forbidden {
            verb: refused_verb(&s.message, verb).to_string(),
            resource,
            error: s.message.clone(),
        },
        kube::Error::Api(s) => NotServed::Other {
            verb: verb.to_string(),
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

/// One check: the server answers, and the CRD of each kind we serve at more than one version
/// is installed, Established and takes the manager's writes as they are meant. All CRDs are
/// read at once; the first failure in [`Kind::ALL`]'s order is told. What the watches find by
/// themselves (a refused list or watch, OpenShift's CRDs, Node) is not looked at here: see the
/// module documentation.
pub async fn check(client: &kube::Client, server: &str) -> Result<(), NotServed> {
    let kinds = Kind::ALL.into_iter().filter(|k| k.api_versions().len() > 1);
    let reads = kinds.map(|kind| stores_what_we_write(client, server, kind));
    futures::future::join_all(reads)
        .await
        .into_iter()
        .collect::<Result<Vec<()>, NotServed>>()
        .map(|_| ())
}

/// The kind's CRD is served and takes the manager's writes as they are meant
/// ([`NotServed::CrdOlderThanManager`]); its read is noted for the storage migration.
async fn stores_what_we_write(
    client: &kube::Client,
    server: &str,
    kind: Kind,
) -> Result<(), NotServed> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = storage_migration::crd_name(kind);
    let crd = match tokio::time::timeout(CHECK_TIMEOUT, crds.get(&name)).await {
        Ok(Ok(crd)) => crd,
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => return Err(missing(kind)),
        Ok(Err(e)) => return Err(classify::<CustomResourceDefinition>(server, "get", &e)),
        Err(_) => {
            return Err(NotServed::Unreachable {
                server: server.to_string(),
                error: format!("no answer within {CHECK_TIMEOUT:?}"),
            });
        }
    };
    storage_migration::note_checked(kind, &crd);
    crd_verdict(kind, &crd)
}

/// [`NotServed::MissingCrd`] of `kind`.
fn missing(kind: Kind) -> NotServed {
    let (group, _) = kind.api_version().split_once('/').unwrap_or_default();
    NotServed::MissingCrd {
        plural: kind.plural().into(),
        group: group.into(),
        kind: kind.name().into(),
    }
}

/// What `crd`, as read, says of `kind`: served once Established (until then the API server
/// answers 404 for its objects, as for no CRD at all), and writable at the manager's version.
fn crd_verdict(kind: Kind, crd: &CustomResourceDefinition) -> Result<(), NotServed> {
    let established = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Established" && c.status == STATUS_TRUE)
        });
    if !established {
        return Err(missing(kind));
    }
    let stores = storage_migration::crd_stores(crd);
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
            crd: storage_migration::crd_name(kind),
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

/// The rest of the check, made by the watches' first requests (module documentation): how a
/// watch tells a refusal before its first answer, as [`wait_until_served`] tells its own —
/// classified, logged with the attempt and the next one, retried at [`retry_delay`] — and
/// what `/readyz` says meanwhile ([`Health::set_not_served`]).
#[derive(Clone)]
pub struct FirstAnswer {
    server: Arc<str>,
    health: Arc<Health>,
}

impl FirstAnswer {
    /// `server`: the API server's URL, for the messages.
    pub fn new(server: &str, health: Arc<Health>) -> Self {
        FirstAnswer {
            server: server.into(),
            health,
        }
    }

    /// The `failures`-th refusal in a row (1-based) of `verb` on `K` before any answer: told,
    /// noted for `/readyz`; returns how long to wait before the next try.
    pub(crate) fn refused<K>(&self, failures: u32, verb: &str, e: &kube::Error) -> Duration
    where
        K: kube::Resource<DynamicType = ()>,
    {
        let why = classify::<K>(&self.server, verb, e);
        let delay = retry_delay(failures);
        tracing::warn!(server = %self.server, kind = %K::kind(&()), attempt = failures, retry_in = ?delay,
            "cannot start the controllers yet: {why}");
        self.health
            .set_not_served(&K::kind(&()), Some(why.to_string()));
        delay
    }

    /// `K`'s watch has its first answer.
    pub(crate) fn answered<K>(&self, failures: u32)
    where
        K: kube::Resource<DynamicType = ()>,
    {
        if failures > 0 {
            tracing::info!(server = %self.server, kind = %K::kind(&()), failures, "now served: watched");
            self.health.set_not_served(&K::kind(&()), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::machine_health_check::MachineHealthCheck;
    use crate::api::{Machine, VSphereDeploymentZone};
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceConversion, CustomResourceDefinitionCondition, CustomResourceDefinitionStatus,
    };

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
        let missing = classify::<MachineHealthCheck>(server, "watch", &api_error(404, "not found"));
        assert_eq!(
            missing.to_string(),
            "the CustomResourceDefinition machinehealthchecks.machine.openshift.io \
             (MachineHealthCheck) is not installed; install the CRDs: `vsphere-provider crds | \
             kubectl apply -f -` (or `kubectl apply -k config/crd`)"
        );
        let refused = classify::<Node>(
            server,
            "watch",
            &api_error(
                403,
                "nodes is forbidden: User \"x\" cannot list resource \"nodes\"",
            ),
        );
        assert!(
            refused
                .to_string()
                .starts_with("the Kubernetes API server refuses to list nodes: nodes is forbidden"),
            "the verb the server names: {refused}"
        );
        let refused = classify::<VSphereDeploymentZone>(
            server,
            "watch",
            &api_error(403, "forbidden by a webhook authorizer"),
        );
        assert!(
            refused.to_string().starts_with(
                "the Kubernetes API server refuses to watch \
                 vspheredeploymentzones.infrastructure.cluster.x-k8s.io: forbidden"
            ),
            "else the verb of the request: {refused}"
        );
        let other = classify::<Machine>(server, "watch", &api_error(500, "etcd is down"));
        assert!(other.to_string().contains(server), "{other}");
        assert!(other.to_string().contains("(500)"), "{other}");
        assert!(
            other.to_string().starts_with("cannot watch machines."),
            "{other}"
        );
    }

    /// The CRD of a kind, as `kubectl apply -k config/crd` installs it, Established.
    fn installed(kind: Kind) -> CustomResourceDefinition {
        let mut crd = kind.crd();
        crd.spec.conversion = Some(CustomResourceConversion {
            strategy: "Webhook".into(),
            webhook: None,
        });
        crd.status = Some(CustomResourceDefinitionStatus {
            conditions: Some(vec![CustomResourceDefinitionCondition {
                type_: "Established".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        crd
    }

    /// What the `list ?limit=1` looks found before (a CRD not Established yet is not served)
    /// the CRD read finds by itself.
    #[test]
    fn a_crd_read_tells_not_established_and_older_than_the_manager() {
        let kind = Kind::VSphereDeploymentZone;
        assert_eq!(crd_verdict(kind, &installed(kind)), Ok(()));

        let mut pending = installed(kind);
        pending.status = None;
        assert_eq!(crd_verdict(kind, &pending), Err(missing(kind)));
        let mut pending = installed(kind);
        if let Some(c) = pending.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            c[0].status = "False".into();
        }
        let why = crd_verdict(kind, &pending).unwrap_err();
        assert!(
            why.to_string().starts_with(
                "the CustomResourceDefinition \
                 vspheredeploymentzones.infrastructure.cluster.x-k8s.io (VSphereDeploymentZone) \
                 is not installed"
            ),
            "{why}"
        );

        let mut older = installed(kind);
        older.spec.conversion = None;
        for v in &mut older.spec.versions {
            v.storage = v.name == "v1beta1";
        }
        assert!(
            matches!(crd_verdict(kind, &older),
                Err(NotServed::CrdOlderThanManager { stores, writes, .. })
                    if stores == "v1beta1" && writes == "v1beta2"),
            "{:?}",
            crd_verdict(kind, &older)
        );
    }

    #[tokio::test]
    async fn a_watch_refused_before_its_first_answer_is_told_and_named_by_readyz() {
        let health = Health::new(false);
        let first = FirstAnswer::new("https://127.0.0.1:6443", health.clone());
        let refusal = api_error(404, "the server could not find the requested resource");
        assert_eq!(first.refused::<Machine>(1, "watch", &refusal), RETRY_BASE);
        assert_eq!(
            first.refused::<Machine>(2, "watch", &refusal),
            RETRY_BASE * 2
        );
        let why = health.readiness().unwrap_err();
        assert!(
            why.contains("Machine: the CustomResourceDefinition machines.machine.openshift.io"),
            "{why}"
        );
        first.answered::<Machine>(2);
        assert_eq!(
            health.readiness().unwrap_err(),
            "caches not synced yet",
            "no longer waiting for the kind"
        );
    }
}
