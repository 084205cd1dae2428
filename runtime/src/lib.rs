//! What every sitegrid binary does the same way, so operators meet one set of
//! rules: which kubeconfig is used, how logs look, how a start-up error is
//! printed, and which signals stop the process.
#![warn(missing_docs)]

use std::path::Path;

use anyhow::Context as _;
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

/// The API server configuration: `--kubeconfig` if given, else `$KUBECONFIG`,
/// `~/.kube/config`, then the in-cluster service account. Errors name the file.
pub async fn kube_config(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Config> {
    match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).with_context(|| {
                format!("--kubeconfig {}: cannot read kubeconfig", path.display())
            })?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("--kubeconfig {}: invalid kubeconfig", path.display()))
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig: pass --kubeconfig, set $KUBECONFIG, or run in a cluster"),
    }
}

/// `err` and its causes as one line (YAML errors come with a multi-line
/// snippet), prefixed with the program's name: what a start-up failure prints.
pub fn error_line(program: &str, err: &anyhow::Error) -> String {
    let text = format!("{err:#}");
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    format!("{program}: {}", parts.join(" "))
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        let _ = ctrl_c.await;
        return;
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_line_joins_causes_and_snippets() {
        let err = anyhow::anyhow!("line one\n\n  line two")
            .context("--kubeconfig /x: invalid kubeconfig");
        assert_eq!(
            error_line("prog", &err),
            "prog: --kubeconfig /x: invalid kubeconfig: line one line two"
        );
    }
}
