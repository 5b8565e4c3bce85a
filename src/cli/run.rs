//! `vsphere-provider run`: the in-cluster controller manager. Connects to Kubernetes, checks
//! the CRDs are installed, serves `/metrics`, `/healthz`, `/readyz` and the admission webhooks,
//! and runs the zone and cluster controllers (under the leader Lease unless told otherwise)
//! until SIGTERM or SIGINT; then stops the controllers, logs out of vCenter and exits 0.
//!
//! Exit codes: 0 after a clean shutdown, 1 when it cannot start (no kubeconfig, a port taken),
//! 2 for bad flags. An API server that does not answer, a CRD not installed, a list refused by
//! RBAC are not exits: the manager logs what to fix and checks again with a growing delay
//! (`controllers::startup`), so a Deployment does not crash-loop while its CRDs are applied.
use super::out::errln;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::runtime::events::Reporter;
use secrecy::SecretString;
use tokio::net::TcpListener;

use super::connect::ConnectArgs;
use super::{EXIT_FAILED, EXIT_USAGE};
use crate::controllers::leader::LeaseSettings;
use crate::controllers::{self, Health, Metrics, Shared, Shutdown, admin, shutdown, startup};
use crate::plan::credentials::{ManagerIdentity, ServerScope, ServerTrust};
use crate::plan::machine::waiting::Polling;
use crate::reconcile::views::ServerViews;
use crate::vcenter::Endpoint;
use crate::vcenter::model::trust::{Thumbprint, TlsPolicy};
use crate::vcenter::session::SessionCache;
use crate::vcenter::{ClientOptions, Stats};
use crate::webhook::server::{self as webhook_server, TlsFiles};

/// The name events are reported under.
const REPORTER: &str = "vsphere-provider";
/// How long the servers get to finish after the controllers stopped (they were told to stop
/// on the signal, so they have had the whole drain already).
const SERVER_GRACE: Duration = Duration::from_secs(2);
/// How long logging out of vCenter may take on shutdown. With the controllers' 20 s drain
/// and the lease release (3 s at most) this stays within the pod's 30 s grace period.
const LOGOUT_TIMEOUT: Duration = Duration::from_secs(3);

/// The default `--metrics-addr`.
pub const METRICS_ADDR: &str = "127.0.0.1:8080";

/// The address flags also answer to controller-runtime's names (`--metrics-bind-address`, …),
/// shown in `--help`, so manifests written for other Cluster API providers read the same here.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address of `/metrics`, `/healthz` and `/readyz` (`:8080` means all interfaces). Loopback
    /// by default: metrics are plain HTTP without authentication, so only what shares the pod's
    /// network (a sidecar, `kubectl port-forward`) reads them unless you choose otherwise.
    #[arg(long, visible_alias = "metrics-bind-address", default_value = METRICS_ADDR, value_parser = parse_addr)]
    pub metrics_addr: SocketAddr,
    /// Also serve `/healthz`, `/livez` and `/readyz` here (a separate probe port; never
    /// `/metrics`).
    #[arg(long, visible_alias = "health-probe-bind-address", value_parser = parse_addr)]
    pub health_addr: Option<SocketAddr>,
    /// Address of the admission webhooks (HTTPS).
    #[arg(long, visible_alias = "webhook-bind-address", default_value = "0.0.0.0:9443", value_parser = parse_addr)]
    pub webhook_addr: SocketAddr,
    /// Directory holding the webhook certificate (`tls.crt`, `tls.key`); without them the
    /// webhooks are not served.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/tmp/k8s-webhook-server/serving-certs"
    )]
    pub webhook_cert_dir: PathBuf,
    /// Namespace of the leader Lease, and where the Secrets VSphereClusterIdentities name live
    /// (default: the kubeconfig's or service account's namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: Option<String>,
    /// Reconcile only while holding the leader Lease (turn off only with a single replica).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub leader_elect: bool,
    /// How long the leader Lease is valid without renewal: a standby replica takes over this
    /// long after the leader last renewed it (whole seconds, at least 1s).
    #[arg(long, default_value = "15s", value_parser = parse_duration, value_name = "DURATION")]
    pub leader_elect_lease_duration: Duration,
    /// A leader that could not renew the Lease for this long stops reconciling; shorter than
    /// the lease duration. The leader renews every half of it.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub leader_elect_renew_deadline: Duration,
    /// How often a standby replica tries to take the Lease.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub leader_elect_retry_period: Duration,
    /// How often a machine waiting on a vCenter task looks at it again when the long poll does
    /// not watch it (a vCenter without WaitForUpdatesEx, the long poll failing or turned off),
    /// and how often a machine waiting for its node to join looks again.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub task_poll_interval: Duration,
    /// The periodic full read of each machine (the safety net): how often a machine with
    /// nothing pending, or whose task the long poll watches, is looked at again. A VM changed by
    /// hand shows sooner where the long poll runs.
    #[arg(long, default_value = "10m", value_parser = parse_duration, value_name = "DURATION")]
    pub machine_resync_interval: Duration,
    /// The periodic verification of ready zones against vCenter, and of each VSphereCluster's
    /// vCenter session (the safety net; a change to the objects reconciles them at once).
    /// Between two, at rest, nothing but the long poll reads vCenter.
    #[arg(long, default_value = "5m", value_parser = parse_duration, value_name = "DURATION")]
    pub zone_resync_interval: Duration,
    /// How long a vCenter credentials Secret (an identityRef's, a credentialsSecret) is used
    /// before it is read from the API server again: a rotated or deleted Secret takes effect
    /// this late at most, and at once when vCenter refuses the password remembered.
    #[arg(long, default_value = "1m", value_parser = parse_duration, value_name = "DURATION")]
    pub credentials_reread_interval: Duration,
    /// Long-poll each vCenter (one WaitForUpdatesEx per server and identity) for the tasks and
    /// VMs machines wait on, so that a machine's next step follows its task at once. Off: every
    /// wait is polled at --task-poll-interval.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub vcenter_long_poll: bool,
    /// The zones (VSphereDeploymentZones, by label) a VSphereCluster that sets no
    /// `spec.failureDomainSelector` publishes as failure domains, as a label selector
    /// (`kubectl -l` syntax: `tier=prod,region in (eu,us)`; `''` selects every zone on the
    /// cluster's server). Unset (the default), such a cluster publishes none, as CAPV. For
    /// ClusterClasses that cannot carry a selector: CAPV's own sets the VSphereCluster's whole
    /// spec from variables.
    #[arg(long, value_name = "SELECTOR", value_parser = crate::plan::selector::parse)]
    pub default_failure_domain_selector: Option<LabelSelector>,
    /// How long one vCenter inventory read is shared by the zones of a server (`30s`, `2m`).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub view_ttl: Duration,
    /// Pin one vCenter's certificate: `SERVER=HEX` (SHA-256 or SHA-1 thumbprint), repeatable.
    /// Applies to every connection to that server, whoever's credentials; wins over
    /// --ca-file/--thumbprint/--insecure, which then cover the other servers.
    #[arg(long, value_name = "SERVER=HEX")]
    pub server_thumbprint: Vec<String>,
    /// Trust only the CA certificates in FILE for one vCenter: `SERVER=FILE`, repeatable.
    #[arg(long, value_name = "SERVER=FILE")]
    pub server_ca_file: Vec<String>,
    /// The manager's own vCenter credentials (--username/--password, VSPHERE_USERNAME and
    /// VSPHERE_PASSWORD) and the servers they may be sent to: `--server` (VSPHERE_SERVER) takes
    /// a comma-separated list, matched by scheme, host and port, and is required with them.
    /// Objects naming any other server need an identityRef; without one nothing is sent there.
    /// A multi-tenant install runs without manager credentials at all.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `0.0.0.0:8080`, `127.0.0.1:0`, or `:8080` (all interfaces, as controller-runtime flags).
fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_string()
    };
    full.parse()
        .map_err(|e| format!("{s:?} is not an address like 0.0.0.0:8080 or :8080: {e}"))
}

/// `500ms`, `30s`, `2m`, `1h`, or a number of seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 30s, 2m or 500ms"))?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(n)),
        "ms" => Ok(Duration::from_millis(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    }
}

/// The admin's TLS trust: `--server-thumbprint`/`--server-ca-file` per server, else
/// --ca-file/--thumbprint/--insecure, else the system roots.
fn server_trust(args: &Args) -> Result<ServerTrust, String> {
    let mut trust = ServerTrust::uniform(args.connect.tls_policy().map_err(|e| e.to_string())?);
    let split = |flag: &str, v: &str| -> Result<(String, String), String> {
        let (server, value) = v
            .split_once('=')
            .ok_or_else(|| format!("--{flag} {v:?}: expected SERVER=VALUE"))?;
        let server = Endpoint::parse(server.trim())
            .map_err(|e| format!("--{flag}: {e}"))?
            .to_string();
        Ok((server, value.trim().to_string()))
    };
    for v in &args.server_thumbprint {
        let (server, hex) = split("server-thumbprint", v)?;
        let pin =
            Thumbprint::parse(&hex).map_err(|e| format!("--server-thumbprint {server}: {e}"))?;
        trust.per_server.push((server, TlsPolicy::Thumbprint(pin)));
    }
    for v in &args.server_ca_file {
        let (server, file) = split("server-ca-file", v)?;
        let path = PathBuf::from(&file);
        if !path.is_file() {
            return Err(format!("--server-ca-file {server}: {file}: no such file"));
        }
        trust.per_server.push((server, TlsPolicy::CaFile(path)));
    }
    Ok(trust)
}

/// `--server a,b` (or VSPHERE_SERVER): each a valid vCenter address.
fn manager_servers(connect: &ConnectArgs) -> Result<Vec<String>, String> {
    let Some(list) = connect.server.as_deref() else {
        return Ok(Vec::new());
    };
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            Endpoint::parse(s)
                .map(|e| e.to_string())
                .map_err(|e| format!("--server (or VSPHERE_SERVER): {e}"))
        })
        .collect()
}

/// The manager's credentials from the flags: both user and password, or neither; with them,
/// the servers they may go to.
fn manager_identity(connect: &ConnectArgs) -> Result<Option<ManagerIdentity>, String> {
    let connect = &connect.clone().normalized();
    connect.tls_policy().map_err(|e| e.to_string())?;
    let servers = manager_servers(connect)?;
    let user = connect.username.as_deref().filter(|s| !s.is_empty());
    let password = connect.password.as_deref().filter(|s| !s.is_empty());
    match (user, password) {
        (Some(_), Some(_)) if servers.is_empty() => Err(
            "the manager's own credentials (--username/--password, VSPHERE_USERNAME/VSPHERE_PASSWORD) \
             need the vCenter servers they may be sent to: --server vc.example.com[,vc2.example.com] \
             (or VSPHERE_SERVER). Objects naming other servers need an identityRef. For a \
             multi-tenant install, run without manager credentials instead."
                .into(),
        ),
        (Some(u), Some(p)) => Ok(Some(ManagerIdentity {
            username: u.to_string(),
            password: SecretString::from(p.to_string()),
            servers: ServerScope::Only(servers),
        })),
        (None, None) => Ok(None),
        (Some(_), None) => {
            Err("--username is set but --password (or VSPHERE_PASSWORD) is not".into())
        }
        (None, Some(_)) => {
            Err("--password is set but --username (or VSPHERE_USERNAME) is not".into())
        }
    }
}

/// The Lease timing from the flags: a leader must stop acting (renew deadline) before a
/// standby may take over (lease duration), or two replicas would reconcile at once.
fn lease_timing(args: &Args) -> Result<(Duration, Duration, Duration), String> {
    let (lease, renew, retry) = (
        args.leader_elect_lease_duration,
        args.leader_elect_renew_deadline,
        args.leader_elect_retry_period,
    );
    if lease < Duration::from_secs(1) || lease.subsec_nanos() != 0 {
        return Err(format!(
            "--leader-elect-lease-duration={lease:?}: the Lease holds whole seconds; use 1s or more"
        ));
    }
    if renew.is_zero() || renew >= lease {
        return Err(format!(
            "--leader-elect-renew-deadline={renew:?} must be above 0 and below \
             --leader-elect-lease-duration={lease:?}"
        ));
    }
    if retry.is_zero() {
        return Err("--leader-elect-retry-period must be above 0".into());
    }
    Ok((lease, renew, retry))
}

/// This replica's name in the Lease and in Events: the pod name, else the host name with a
/// per-process suffix (two processes on one host must not share an identity).
fn identity() -> String {
    if let Some(pod) = std::env::var("POD_NAME").ok().filter(|s| !s.is_empty()) {
        return pod;
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "vsphere-provider".into());
    format!("{host}_{}", std::process::id())
}

/// SIGTERM or SIGINT.
async fn termination_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

async fn bind(what: &str, addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} for {what}: {e}"))
}

/// Serve the admission webhooks when the certificate is there; say so when it is not.
async fn start_webhooks(
    addr: SocketAddr,
    cert_dir: &Path,
    shutdown: Shutdown,
) -> Result<Option<tokio::task::JoinHandle<()>>, String> {
    let files = TlsFiles::in_dir(cert_dir);
    if !files.cert.is_file() || !files.key.is_file() {
        tracing::warn!(
            dir = %cert_dir.display(),
            "no tls.crt/tls.key in the webhook certificate directory: admission webhooks are NOT served"
        );
        return Ok(None);
    }
    let listener = bind("the admission webhooks", addr).await?;
    tracing::info!(addr = %listener.local_addr().unwrap_or(addr), "admission webhooks listening");
    Ok(Some(tokio::spawn(async move {
        if let Err(e) = webhook_server::serve_listener(listener, Some(files), shutdown.wait()).await
        {
            tracing::error!(error = %e, "admission webhook server stopped");
        }
    })))
}

fn serve_admin(
    listener: TcpListener,
    metrics: Option<Arc<Metrics>>,
    health: Arc<Health>,
    shutdown: Shutdown,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = admin::serve(listener, metrics, health, shutdown.wait()).await {
            tracing::error!(error = %e, "admin server stopped");
        }
    })
}

pub async fn run(args: Args) -> ExitCode {
    let manager = match manager_identity(&args.connect) {
        Ok(m) => m,
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match &manager {
        Some(m) => tracing::info!(
            servers = %m.servers.describe(),
            "the manager's own vCenter credentials go to these servers only"
        ),
        None => tracing::info!(
            "no manager vCenter credentials: every zone and VSphereCluster needs an identityRef"
        ),
    }
    if let Err(e) = server_trust(&args) {
        errln!("error: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    let timing = match lease_timing(&args) {
        Ok(t) => t,
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let (client, server) = match kube_client().await {
        Ok(c) => c,
        Err(e) => {
            errln!(
                "error: no Kubernetes configuration: neither a kubeconfig (KUBECONFIG, ~/.kube/config) \
                 nor the in-cluster service account works: {e}"
            );
            return ExitCode::from(EXIT_FAILED);
        }
    };
    match start(args, client, &server, manager, timing).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("error: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

async fn start(
    args: Args,
    client: kube::Client,
    server: &str,
    manager: Option<ManagerIdentity>,
    (lease_duration, renew_deadline, retry_every): (Duration, Duration, Duration),
) -> Result<(), String> {
    let identity = identity();
    let namespace = args
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| client.default_namespace().to_string());
    let trust = server_trust(&args).map_err(|e| e.to_string())?;
    let tls = trust.default.clone();
    let stats = Stats::default();
    let shared = Shared {
        client,
        server: server.to_string(),
        sessions: SessionCache::new(
            stats.clone(),
            ClientOptions {
                tls,
                allow_remote_http: args.connect.allow_remote_http,
                ..ClientOptions::default()
            },
        ),
        views: Arc::new(ServerViews::new(args.view_ttl)),
        manager,
        trust,
        metrics: Metrics::new(stats),
        reporter: Reporter {
            controller: REPORTER.into(),
            instance: Some(identity.clone()),
        },
        health: Health::new(args.leader_elect),
        namespace: namespace.clone(),
        converts: {
            let files = TlsFiles::in_dir(&args.webhook_cert_dir);
            files.cert.is_file() && files.key.is_file()
        },
        polling: Polling {
            task_poll: args.task_poll_interval,
            resync: args.machine_resync_interval,
            long_poll: args.vcenter_long_poll,
            infrastructure_resync: args.zone_resync_interval,
            credentials_reread: args.credentials_reread_interval,
        },
        default_zone_selector: args.default_failure_domain_selector.clone(),
    };

    let (stop, signal) = shutdown::channel();
    tokio::spawn(async move {
        termination_signal().await;
        tracing::info!("shutdown requested: stopping the controllers");
        stop.trigger();
        // A second signal while reconciles finish exits at once.
        termination_signal().await;
        tracing::warn!("second signal: exiting without waiting");
        std::process::exit(i32::from(EXIT_FAILED));
    });

    let admin_listener = bind("/metrics, /healthz and /readyz", args.metrics_addr).await?;
    tracing::info!(
        addr = %admin_listener.local_addr().unwrap_or(args.metrics_addr),
        "admin endpoints listening (/metrics, /healthz, /readyz)"
    );
    let mut servers = vec![serve_admin(
        admin_listener,
        Some(shared.metrics.clone()),
        shared.health.clone(),
        signal.clone(),
    )];
    if let Some(addr) = args.health_addr.filter(|a| *a != args.metrics_addr) {
        let listener = bind("the health probes", addr).await?;
        tracing::info!(
            addr = %listener.local_addr().unwrap_or(addr),
            "health probes listening (/healthz, /livez, /readyz; no /metrics)"
        );
        servers.push(serve_admin(
            listener,
            None,
            shared.health.clone(),
            signal.clone(),
        ));
    }
    if let Some(webhooks) =
        start_webhooks(args.webhook_addr, &args.webhook_cert_dir, signal.clone()).await?
    {
        servers.push(webhooks);
    }

    // Not ready, but alive, until the API server serves every watched kind (see
    // `controllers::startup` for why this never exits).
    shared.health.set_waiting_for_api(true);
    let served = startup::wait_until_served(&shared.client, &shared.server, &signal).await;
    shared.health.set_waiting_for_api(false);

    if served {
        let lease = args.leader_elect.then(|| {
            tracing::info!(%namespace, %identity, ?lease_duration, ?renew_deadline, "leader election on");
            LeaseSettings {
                lease_duration,
                renew_deadline,
                renew_every: renew_deadline / 2,
                retry_every,
                ..LeaseSettings::new(namespace.clone(), identity.clone())
            }
        });
        // Returns after the drain (at most `controllers::DRAIN_TIMEOUT`) and the lease release.
        controllers::controllers_under_lease(shared.clone(), lease, signal).await;
    }

    if tokio::time::timeout(LOGOUT_TIMEOUT, shared.sessions.logout_all())
        .await
        .is_err()
    {
        tracing::warn!("vCenter logout did not finish in time; the sessions expire by themselves");
    }
    for server in servers {
        if tokio::time::timeout(SERVER_GRACE, server).await.is_err() {
            tracing::warn!("a server did not stop in time");
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// The Kubernetes client of `run`: the default configuration (kubeconfig, else in-cluster),
/// without kube-client's own retries of 429/503/504. Those follow `Retry-After` up to 15 times,
/// so a PodDisruptionBudget's 429 (Retry-After 10 s) never reached the drain — each eviction ran
/// into the write timeout, held its server's sweep 10 s, and said "no answer" instead of
/// "refused by a disruption budget" (found against the real kube-apiserver). Every caller here
/// has its own policy: typed errors, per-object backoff. Also the server's URL, for the logs.
async fn kube_client() -> Result<(kube::Client, String), kube::Error> {
    let mut config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    config.default_retry = false;
    let server = config.cluster_url.to_string();
    Ok((kube::Client::try_from(config)?, server))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Metrics are unauthenticated plain HTTP: by default only loopback may reach them.
    #[test]
    fn metrics_listen_on_loopback_by_default() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            run: Args,
        }
        let cli = <Cli as clap::Parser>::try_parse_from(["run"]).unwrap();
        assert!(
            cli.run.metrics_addr.ip().is_loopback(),
            "{}",
            cli.run.metrics_addr
        );
        assert_eq!(cli.run.metrics_addr.port(), 8080);
    }

    #[test]
    fn addresses_and_durations_parse_as_documented() {
        assert_eq!(
            parse_addr(":8080").unwrap(),
            "0.0.0.0:8080".parse().unwrap()
        );
        assert_eq!(parse_addr("127.0.0.1:0").unwrap().port(), 0);
        assert!(parse_addr("8080").is_err());
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("45").unwrap(), Duration::from_secs(45));
        assert!(parse_duration("3 days").is_err());
    }

    #[test]
    fn manager_credentials_need_both_halves() {
        let mut c = ConnectArgs {
            server: None,
            username: Some("u".into()),
            password: None,
            ca_file: None,
            thumbprint: None,
            insecure: false,
            allow_remote_http: false,
        };
        assert!(manager_identity(&c).unwrap_err().contains("--password"));
        c.password = Some("p".into());
        c.server = Some("vc1.corp, https://vc2.corp:8443/sdk".into());
        let m = manager_identity(&c).unwrap().unwrap();
        assert_eq!(m.username, "u");
        assert!(m.servers.allows("vc1.corp") && m.servers.allows("vc2.corp:8443"));
        assert!(!m.servers.allows("tenant.example.com"));
        c.username = None;
        c.password = None;
        assert!(manager_identity(&c).unwrap().is_none());
    }

    #[test]
    fn manager_credentials_without_servers_are_refused_naming_the_flag() {
        let mut c = ConnectArgs {
            server: None,
            username: Some("u".into()),
            password: Some("p".into()),
            ca_file: None,
            thumbprint: None,
            insecure: false,
            allow_remote_http: false,
        };
        let err = manager_identity(&c).unwrap_err();
        assert!(err.contains("--server vc.example.com"), "{err}");
        c.server = Some("vc1.corp,ftp://x".into());
        let err = manager_identity(&c).unwrap_err();
        assert!(err.starts_with("--server (or VSPHERE_SERVER): "), "{err}");
    }
}
