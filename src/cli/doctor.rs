//! `vsphere-provider doctor`.
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub async fn run(_args: Args) -> ExitCode {
    eprintln!("error: `doctor` is not implemented yet");
    ExitCode::from(super::EXIT_FAILED)
}
