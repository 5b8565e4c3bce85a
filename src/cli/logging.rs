//! Logging setup shared by every subcommand. Logs go to stderr so stdout stays machine-readable.
use super::out::errln;
use tracing_subscriber::EnvFilter;

#[derive(clap::Args, Debug)]
pub struct LogArgs {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `vsphere_provider=debug`.
    /// Default: `info` for `run` (a controller should say what it does), `warn` for the tools.
    #[arg(long, global = true, env = "VSPHERE_PROVIDER_LOG")]
    pub log_level: Option<String>,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Install the subscriber; `default_level` applies when no level was given.
pub fn init(args: &LogArgs, default_level: &str) {
    let level = args.log_level.as_deref().unwrap_or(default_level);
    let filter = EnvFilter::try_new(level).unwrap_or_else(|e| {
        errln!("warning: invalid --log-level {level:?} ({e}); using {default_level}");
        EnvFilter::new(default_level)
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
