//! `vsphere-provider reconcile -f FILE|DIR ...`: local mode. Loads manifests (with the Secrets
//! identityRefs name), validates them as `validate` does, runs the zone and cluster reconcilers
//! to a fixed point against vCenter and prints the result.
//!
//! Exit codes: 0 every zone ready, 1 something is not ready (the table says why), 2 usage or
//! input errors (nothing is sent to vCenter then).
use std::path::PathBuf;
use std::process::ExitCode;

use secrecy::SecretString;

use super::connect::ConnectArgs;
use super::{EXIT_FAILED, EXIT_USAGE};
use crate::local::{driver, print, store::Store};
use crate::plan::credentials::ManagerIdentity;
use crate::vcenter::session::SessionCache;
use crate::vcenter::{ClientOptions, Stats};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Manifest files or directories (YAML or JSON, multi-document; directories are walked).
    #[arg(
        short = 'f',
        long = "filename",
        required = true,
        value_name = "FILE|DIR"
    )]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Change nothing in vCenter; list the changes that would be made.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
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
            eprintln!("error: the manifests are not valid; nothing was sent to vCenter:\n{e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let server = match args.connect.server.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(_) => match args.connect.server() {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        },
    };
    let tls = match args.connect.tls_policy() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let manager = match (&args.connect.username, &args.connect.password) {
        (Some(u), Some(p)) if !u.is_empty() && !p.is_empty() => Some(ManagerIdentity {
            username: u.clone(),
            password: SecretString::from(p.clone()),
            tls: tls.clone(),
        }),
        _ => None,
    };
    let opts = driver::Options {
        server,
        manager,
        tls: tls.clone(),
        dry_run: args.dry_run,
        now: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
    };
    let sessions = SessionCache::new(
        Stats::default(),
        ClientOptions {
            tls,
            ..ClientOptions::default()
        },
    );
    let mut progress = |line: &str| eprintln!("{line}");
    let report = driver::run(&mut store, &opts, &sessions, &mut progress).await;
    sessions.logout_all().await;

    let changes = print::changes(&report, args.dry_run);
    let summary = print::summary(&report, args.dry_run);
    match args.output {
        Output::Table => {
            print!("{}", print::tables(&store, &report));
            if !changes.is_empty() {
                println!();
                print!("{changes}");
            }
            println!();
            println!("{summary}");
        }
        Output::Yaml | Output::Json => {
            let body = if args.output == Output::Yaml {
                print::yaml(&store)
            } else {
                print::json(&store)
            };
            print!("{body}");
            eprint!("{changes}");
            eprintln!("{summary}");
        }
    }
    if report.converged() {
        ExitCode::SUCCESS
    } else {
        for (name, v) in &report.verdicts {
            if let Some((reason, message)) = v.first_problem() {
                eprintln!("zone {name} is not ready: {reason}: {message}");
            }
        }
        ExitCode::from(EXIT_FAILED)
    }
}
