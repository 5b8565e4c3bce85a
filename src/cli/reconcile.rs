//! `vsphere-provider reconcile -f FILE|DIR ...`: local mode. Loads manifests (with the Secrets
//! identityRefs name), validates them as `validate` does, runs the zone and cluster reconcilers
//! to a fixed point against vCenter and prints the result.
//!
//! Machines are reconciled too (clone, group, power, node link, deletion lifecycle), with the
//! object store kept in a state file between runs (`--state`).
//!
//! Exit codes: 0 everything ready and nothing pending, 1 something is not (it says what), 2
//! usage or input errors (nothing is sent to vCenter then).
use super::out::{err, errln, out, outln};
use std::path::PathBuf;
use std::process::ExitCode;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use secrecy::SecretString;

use super::connect::ConnectArgs;
use super::{EXIT_FAILED, EXIT_USAGE};
use crate::local::run;
use crate::local::{deletes, driver, print, store::Store};
use crate::plan::credentials::{ManagerIdentity, ServerScope};
use crate::vcenter::session::SessionCache;
use crate::vcenter::{ClientOptions, Endpoint, Stats};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Manifest files or directories (YAML or JSON, multi-document; directories are walked).
    /// Repeatable: `-f zones.yaml -f machines/`.
    #[arg(
        short = 'f',
        long = "filename",
        required = true,
        value_name = "FILE|DIR"
    )]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Change nothing (vCenter, state file); list what would be done: zone changes, each
    /// machine's VM step, machines a set would create or delete, remediations.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// The object store, kept between runs (written atomically after every change), so a run
    /// continues where the last one stopped and never creates a second VM for a machine.
    /// Default: $XDG_STATE_HOME (or ~/.local/state)/vsphere-provider/<hash of the -f paths>.json.
    #[arg(long, value_name = "FILE", conflicts_with = "no_state")]
    pub state: Option<PathBuf>,
    /// Keep no state: each run starts from the manifests alone (no statuses, events or Nodes
    /// of earlier runs are kept). VMs are not made again: each VM carries its Machine's identity
    /// (namespace and name), so a run finds and adopts the VMs earlier runs cloned, and a
    /// control plane machine set's Machines are recreated from theirs. For one-off checks.
    #[arg(long)]
    pub no_state: bool,
    /// Mark an object for deletion in this run, as `kubectl delete` would (finalizers are
    /// respected): `machine/NAME`, `node/NAME`, `vspheredeploymentzone/NAME`, … Repeatable.
    #[arg(long = "delete", value_name = "KIND/NAME")]
    pub delete: Vec<String>,
    /// Remove a lifecycle hook from a Machine in this run, as the hook's owner would:
    /// `machine/NAME:HOOK` (e.g. `machine/master-0:EtcdQuorumOperator`; `machine/NS/NAME:HOOK`
    /// picks a namespace). Local mode plays no hook owner (no etcd operator), so a deletion held
    /// by a hook goes on only when the hook is removed: from the manifest for a Machine in the
    /// manifests, with this for one they do not hold (a control plane machine set's). Repeatable.
    #[arg(long = "remove-hook", value_name = "machine/NAME:HOOK")]
    pub remove_hook: Vec<String>,
    /// Register a Ready Node for each powered-on machine VM, as a kubelet would (a Node given
    /// in the manifests with the same name wins).
    #[arg(long)]
    pub simulate_nodes: bool,
    /// The zones a VSphereCluster that sets no `spec.failureDomainSelector` publishes, as a
    /// label selector (`kubectl -l` syntax; `''` selects every zone on the cluster's server).
    /// Unset, such a cluster publishes none, as CAPV; see `run --help`.
    #[arg(long, value_name = "SELECTOR", value_parser = crate::plan::selector::parse)]
    pub default_failure_domain_selector: Option<LabelSelector>,
    /// The time the controllers see (RFC 3339, e.g. 2026-11-23T10:00:00Z); default: now.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Connect to URL wherever the manifests name the vCenter NAME (a zone's `spec.server`, a
    /// machine's `workspace.server`, an Infrastructure failure domain's `server`), as curl's
    /// `--connect-to`: for a preflight through a tunnel, or a simulator standing in for a real
    /// estate. The manifests keep saying NAME. Repeatable.
    #[arg(long = "connect-to", value_name = "NAME=URL")]
    pub connect_to: Vec<String>,
}

/// `NAME=URL` pairs: the host a manifest names → where to connect instead.
fn parse_aliases(pairs: &[String]) -> Result<Vec<(String, Endpoint)>, String> {
    pairs
        .iter()
        .map(|p| {
            let (name, url) = p
                .split_once('=')
                .ok_or_else(|| format!("{p:?}: expected NAME=URL"))?;
            let name = Endpoint::parse(name.trim())
                .map_err(|e| format!("{p:?}: NAME: {e}"))?
                .host();
            let url = Endpoint::parse(url.trim()).map_err(|e| format!("{p:?}: URL: {e}"))?;
            Ok((name, url))
        })
        .collect()
}

/// Where the state lives when `--state` is not given: one file per set of manifest paths, under
/// the user's own state directory. Never a shared directory such as /tmp: there another user
/// could plant a state (a Machine marked for deletion naming the UUID of a VM to destroy).
pub fn default_state_path(files: &[PathBuf]) -> Result<PathBuf, String> {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    let mut paths: Vec<String> = files
        .iter()
        .map(|p| {
            std::fs::canonicalize(p)
                .unwrap_or_else(|_| p.clone())
                .display()
                .to_string()
        })
        .collect();
    paths.sort();
    for p in paths {
        h.update(p.as_bytes());
        h.update([0]);
    }
    let digest = hex::encode(h.finalize());
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        })
        .ok_or("no --state given and neither XDG_STATE_HOME nor HOME is set: pass --state FILE (or --no-state)")?;
    Ok(base
        .join("vsphere-provider")
        .join(format!("{}.json", &digest[..16])))
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Table,
    Yaml,
    Json,
}

pub async fn run(mut args: Args) -> ExitCode {
    args.connect = args.connect.normalized();
    let mut store = match Store::load(&args.files) {
        Ok(s) => s,
        Err(e) => {
            errln!("error: the manifests are not valid; nothing was sent to vCenter:\n{e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    for line in std::mem::take(&mut store.skipped) {
        errln!("skipped: {line}");
    }
    let server = match args.connect.server.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(_) => match args.connect.server() {
            Ok(s) => Some(s),
            Err(e) => {
                errln!("error: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        },
    };
    let aliases = match parse_aliases(&args.connect_to) {
        Ok(a) => a,
        Err(e) => {
            errln!("error: --connect-to: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let tls = match args.connect.tls_policy() {
        Ok(t) => t,
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let manager = match (&args.connect.username, &args.connect.password) {
        (Some(u), Some(p)) if !u.is_empty() && !p.is_empty() => Some(ManagerIdentity {
            username: u.clone(),
            password: SecretString::from(p.clone()),
            // The operator's own credentials, for the manifests they chose to run: local mode
            // says which servers it connects to (`--dry-run`), and `run` binds them instead.
            servers: ServerScope::Any,
        }),
        _ => None,
    };
    let now = match args.now.as_deref().map(str::parse::<jiff::Timestamp>) {
        None => jiff::Timestamp::now(),
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            errln!("error: --now: not an RFC 3339 time ({e})");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now);
    let state_path = if args.no_state {
        None
    } else {
        match args
            .state
            .clone()
            .map_or_else(|| default_state_path(&args.files), Ok)
        {
            Ok(p) => Some(p),
            Err(e) => {
                errln!("error: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        }
    };
    let stored = match state_path.as_deref().map(Store::load_state).transpose() {
        Ok(s) => s.flatten(),
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    store = match store.with_state(stored.as_ref(), &now) {
        Ok(s) => s,
        Err(e) => {
            errln!("error: the manifests cannot be applied over the state file:\n{e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Err(e) = deletes::apply(&mut store, &args.delete, &now)
        .and_then(|()| deletes::remove_hooks(&mut store, &args.remove_hook))
    {
        errln!("error: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    match &state_path {
        Some(p) if !args.dry_run => errln!("state: {}", p.display()),
        // A dry run reads the state file but writes nothing, not even a new one.
        Some(p) if stored.is_some() => errln!("state: {} (read only: dry run)", p.display()),
        _ => {}
    }
    let opts = driver::Options {
        server,
        aliases,
        manager,
        tls: tls.clone(),
        dry_run: args.dry_run,
        now: now.clone(),
        simulate_nodes: args.simulate_nodes,
        default_zone_selector: args.default_failure_domain_selector.clone(),
    };
    if let Some(why) = driver::unused_server(&store, &opts) {
        errln!("warning: {why}");
    }
    let sessions = SessionCache::new(
        Stats::default(),
        ClientOptions {
            tls,
            allow_remote_http: args.connect.allow_remote_http,
            ..ClientOptions::default()
        },
    );
    let mut progress = |line: &str| errln!("{line}");
    let (store, outcome) =
        run::run(store, state_path.clone(), &opts, &sessions, &mut progress).await;
    sessions.logout_all().await;
    let (report, machines) = (&outcome.zones, &outcome.machines);

    let changes = print::changes(report, args.dry_run) + &print::machine_changes(machines);
    let summary = print::summary(&store, report, machines, args.dry_run);
    match args.output {
        Output::Table => {
            out!("{}", print::tables(&store, report));
            out!(
                "{}",
                print::machine_tables(&store, machines, &now, args.dry_run)
            );
            if !changes.is_empty() {
                outln!();
                out!("{changes}");
            }
            outln!();
            outln!("{summary}");
        }
        Output::Yaml | Output::Json => {
            let body = if args.output == Output::Yaml {
                print::yaml(&store)
            } else {
                print::json(&store)
            };
            out!("{body}");
            err!("{changes}");
            errln!("{summary}");
        }
    }
    let problems = outcome.problems(&store, args.simulate_nodes);
    for line in &problems {
        errln!("{line}");
    }
    if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--connect-to` names the host a manifest says; a pair without `=` or with a bad URL is
    /// refused naming the pair.
    #[test]
    fn connect_to_pairs() {
        let a = parse_aliases(&["VC.example.com=http://127.0.0.1:8989/sdk".into()]).unwrap();
        assert_eq!(a[0].0, "vc.example.com");
        assert_eq!(a[0].1.to_string(), "http://127.0.0.1:8989");
        let e = parse_aliases(&["vc.example.com".into()]).unwrap_err();
        assert!(e.contains("expected NAME=URL"), "{e}");
        let e = parse_aliases(&["vc=ftp://x".into()]).unwrap_err();
        assert!(e.contains("URL"), "{e}");
    }
}
