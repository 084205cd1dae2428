//! `--log-level` and `--log-format`, and the tracing subscriber they install.

use clap::Args;
use tracing_subscriber::EnvFilter;

/// `--log-level` and `--log-format`, flattened into each binary's flags.
#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// Log filter (tracing EnvFilter syntax, e.g. `info` or `sitegrid_proxy=debug`); RUST_LOG overrides.
    #[arg(long, default_value = "info", global = true)]
    pub log_level: String,
    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

impl LogArgs {
    /// Installs the global subscriber: RUST_LOG, else `--log-level`, else `info`;
    /// lines on stderr, coloured only on a terminal.
    pub fn init(&self) {
        let filter = EnvFilter::try_from_default_env()
            .or_else(|_| EnvFilter::try_new(&self.log_level))
            .unwrap_or_else(|_| EnvFilter::new("info"));
        let fmt = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        match self.log_format {
            LogFormat::Json => fmt.json().init(),
            // Log collectors get plain lines.
            LogFormat::Text => fmt
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .init(),
        }
    }
}
