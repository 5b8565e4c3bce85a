//! `vsphere-provider inventory`: every inventory object as `TYPE<TAB>PATH`, sorted by path.
//! Costs 4 round trips whatever the inventory size (service content, login, one bulk read,
//! logout), plus continuation pages on real vCenter.
use super::out::{self, errln, out};
use std::process::ExitCode;

use super::connect::ConnectArgs;
use super::{EXIT_FAILED, EXIT_USAGE};
use crate::vcenter::Stats;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// `TYPE<TAB>PATH` lines.
    Text,
    /// A JSON array of {type, path, name, moref}.
    Json,
}

pub async fn run(mut args: Args) -> ExitCode {
    args.connect = args.connect.normalized();
    let stats = Stats::default();
    let client = match args.connect.client(stats.clone()) {
        Ok(c) => c,
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let result = client.inventory().await;
    let logout = client.logout().await;
    let inventory = match result {
        Ok(i) => i,
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    if let Err(e) = logout {
        tracing::warn!(error = %e, "logout failed");
    }
    // The root folder first, as `/`, then everything below it sorted by path.
    let listed: Vec<(&crate::vcenter::model::inventory::Entity, &str)> = inventory
        .root()
        .map(|r| (r, "/"))
        .into_iter()
        .chain(inventory.iter().map(|e| (e, e.path.as_str())))
        .collect();
    let text = match args.output {
        Output::Text => listed
            .iter()
            .map(|(e, path)| format!("{}\t{path}\n", e.kind()))
            .collect::<String>(),
        Output::Json => {
            let rows: Vec<serde_json::Value> = listed
                .iter()
                .map(|(e, path)| {
                    serde_json::json!({
                        "type": e.kind(),
                        "path": path,
                        "name": e.name,
                        "moref": e.moref.value,
                    })
                })
                .collect();
            serde_json::to_string_pretty(&rows).unwrap_or_default() + "\n"
        }
    };
    out!("{text}");
    if out::stdout_closed() {
        // A reader that stopped reading (`| head`) wanted no more, the count included.
        return ExitCode::SUCCESS;
    }
    let s = stats.snapshot();
    errln!("{} objects, {} round trips", listed.len(), s.total());
    ExitCode::SUCCESS
}
