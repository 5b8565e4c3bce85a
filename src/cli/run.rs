//! `vsphere-provider run` (not implemented yet).
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub async fn run(_args: Args) -> ExitCode {
    eprintln!("error: `run` is not implemented yet");
    ExitCode::from(super::EXIT_FAILED)
}
