//! `vsphere-provider`: the controller manager, local mode and admin tools in one binary.
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use vsphere_provider::cli;

#[derive(Parser)]
#[command(
    name = "vsphere-provider",
    version,
    about = "Kubernetes infrastructure provider for VMware vSphere",
    long_about = "Verifies and configures vSphere failure domains (VSphereFailureDomain, \
                  VSphereDeploymentZone), publishes them to VSphereClusters, and places, replaces \
                  and repairs control plane machines across them.\n\n\
                  vCenter credentials come from --server/--username/--password or the \
                  VSPHERE_SERVER, VSPHERE_USERNAME and VSPHERE_PASSWORD environment variables."
)]
struct Cli {
    #[command(flatten)]
    log: cli::logging::LogArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controller manager inside a Kubernetes cluster.
    ///
    /// The cluster is the one kubectl would use: the current context of $KUBECONFIG, else of
    /// ~/.kube/config, else the pod's own service account (in-cluster: the token and CA under
    /// /var/run/secrets/kubernetes.io/serviceaccount and KUBERNETES_SERVICE_HOST/PORT).
    ///
    /// Exit codes: 0 after a clean shutdown (SIGTERM, SIGINT); 1 it cannot start (no Kubernetes
    /// configuration, a port taken); 2 bad flags. An API server that does not answer or a CRD not
    /// installed yet is waited for, not an exit.
    Run(cli::run::Args),
    /// Reconcile manifests against a vCenter without a cluster (local mode).
    ///
    /// Zones and clusters, then Machines (clone, VM group, power on, node link, deletion
    /// lifecycle), ControlPlaneMachineSets and MachineHealthChecks, run to a fixed point. The
    /// object store is kept in a state file between runs (--state), so a re-run continues where
    /// the last one stopped and never makes a second VM.
    ///
    /// Exit codes: 0 everything ready and nothing pending; 1 something is not (each reason on
    /// stderr); 2 usage or input errors (nothing is sent to vCenter then).
    Reconcile(cli::reconcile::Args),
    /// Default and validate manifests offline, as the admission webhooks would.
    ///
    /// Each object of a kind vsphere-provider serves is defaulted and validated as the API
    /// server and this provider's webhooks would on create (schema, CEL rules, webhook rules),
    /// one line per object: `FILE:LINE: KIND NAME: ok | rejected: FIELD: why`. Kinds other
    /// controllers serve (KubeadmControlPlane, ConfigMap, ClusterResourceSet, ...) are listed
    /// as `skipped` and do not fail the run, so a whole cluster template can gate CI. Rejected,
    /// because a cluster running this provider would refuse them: a missing apiVersion or kind,
    /// a kind of ours at a version it is not served at, a CAPV kind it does not serve.
    ///
    /// Exit codes: 0 every object admitted or skipped; 1 some object rejected; 2 a file could
    /// not be read or parsed (the error names file and line).
    Validate(cli::validate::Args),
    /// Print the CustomResourceDefinitions of every kind this provider serves.
    Crds(cli::crds::Args),
    /// List every object in a vCenter inventory with its type and inventory path.
    Inventory(cli::inventory::Args),
    /// Check connectivity, TLS, login, API version and tagging of a vCenter.
    ///
    /// The checks, in order, one line each (`ok` or `FAIL`, with what to do): address (the SDK
    /// URL), connect (TCP and TLS: the trust used, or the certificate's thumbprint to pin, or a
    /// hint that the server speaks plain http), vcenter (service content: product and API
    /// version), login, session (the server's clock), tagging (the REST tagging API failure
    /// domains need). A failed check ends the run; the last line counts the round trips.
    ///
    /// Exit codes: 0 every check passed; 1 a check failed; 2 usage (no server or credentials).
    Doctor(cli::doctor::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // One process-wide rustls provider (ring): reqwest and kube both need one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let default_level = match cli.command {
        Command::Run(_) => "info",
        _ => "warn",
    };
    cli::logging::init(&cli.log, default_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            cli::out::write_err(format_args!("error: cannot start the async runtime: {e}\n"));
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => cli::run::run(args).await,
            Command::Reconcile(args) => cli::reconcile::run(args).await,
            Command::Validate(args) => cli::validate::run(args).await,
            Command::Crds(args) => cli::crds::run(args).await,
            Command::Inventory(args) => cli::inventory::run(args).await,
            Command::Doctor(args) => cli::doctor::run(args).await,
        }
    });
    cli::out::exit_code(code)
}
