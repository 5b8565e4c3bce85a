//! `vsphere-provider crds`: print the CustomResourceDefinitions of every kind, or write one file per
//! kind into a directory (`--out crds/` regenerates the checked-in files).
use super::out::{errln, out};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::api::{self, Kind};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write one file per kind into this directory instead of printing a multi-document stream.
    /// Repeatable (`--out crds --out config/crd/bases` regenerates both checked-in copies).
    #[arg(long, value_name = "DIR")]
    pub out: Vec<PathBuf>,
    /// Only these kinds (e.g. `--kind VSphereFailureDomain`); default all.
    #[arg(long = "kind", value_name = "KIND")]
    pub kinds: Vec<String>,
}

pub async fn run(args: Args) -> ExitCode {
    let mut kinds = Vec::new();
    for name in &args.kinds {
        match Kind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name) || k.plural() == name)
        {
            Some(k) => kinds.push(k),
            None => {
                let known: Vec<_> = Kind::ALL.iter().map(|k| k.name()).collect();
                errln!(
                    "error: unknown kind {name:?}; known kinds: {}",
                    known.join(", ")
                );
                return ExitCode::from(super::EXIT_USAGE);
            }
        }
    }
    if kinds.is_empty() {
        kinds = Kind::ALL.to_vec();
    }
    if args.out.is_empty() {
        let mut out = String::new();
        for k in &kinds {
            out.push_str(&api::crd_yaml(&k.crd()));
        }
        out!("{out}");
        return ExitCode::SUCCESS;
    }
    for dir in &args.out {
        if let Err(e) = std::fs::create_dir_all(dir) {
            errln!("error: cannot create {}: {e}", dir.display());
            return ExitCode::from(super::EXIT_FAILED);
        }
        for k in &kinds {
            let path = dir.join(k.crd_file_name());
            if let Err(e) = std::fs::write(&path, api::crd_yaml(&k.crd())) {
                errln!("error: cannot write {}: {e}", path.display());
                return ExitCode::from(super::EXIT_FAILED);
            }
            errln!("wrote {}", path.display());
        }
    }
    ExitCode::SUCCESS
}
