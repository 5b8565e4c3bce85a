//! Logging setup shared by every subcommand. Logs go to stderr so stdout stays machine-readable.
use tracing_subscriber::EnvFilter;

#[derive(clap::Args, Debug)]
pub struct LogArgs {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `vsphere_provider=debug`.
    #[arg(
        long,
        global = true,
        env = "VSPHERE_PROVIDER_LOG",
        default_value = "warn"
    )]
    pub log_level: String,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

pub fn init(args: &LogArgs) {
    let filter = EnvFilter::try_new(&args.log_level).unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
