//! Command-line interface: one module per subcommand, wired together in `main.rs`.
//!
//! Every subcommand exposes `Args` (clap) and `async fn run(Args) -> ExitCode`.
//! Exit codes: 0 success, 1 the work failed or something is not ready, 2 usage or input error.

pub mod connect;
pub mod crds;
pub mod doctor;
pub mod inventory;
pub mod logging;
pub mod out;
pub mod reconcile;
pub mod run;
pub mod validate;

/// Exit code for usage or input errors (bad flags, unreadable or invalid manifests).
pub const EXIT_USAGE: u8 = 2;
/// Exit code when the work ran but failed or did not converge.
pub const EXIT_FAILED: u8 = 1;
