//! Which kubeconfig a binary uses, with errors that name the file.

use std::path::Path;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The API server configuration: `--kubeconfig` if given, else `$KUBECONFIG`,
/// `~/.kube/config`, then the in-cluster service account. Errors name the file.
pub async fn kube_config(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Config> {
    kube_config_in_context(kubeconfig, None).await
}

/// [`kube_config`] with kubectl's `--context`: that context of the kubeconfig
/// instead of its current one. A context names a kubeconfig entry, so with a
/// context there is no in-cluster fallback (kubectl has none either).
pub async fn kube_config_in_context(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> anyhow::Result<kube::Config> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let in_context = || match context {
        Some(c) => format!(" (--context {c})"),
        None => String::new(),
    };
    match (kubeconfig, context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path).with_context(|| {
                format!("--kubeconfig {}: cannot read kubeconfig", path.display())
            })?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .with_context(|| {
                    format!(
                        "--kubeconfig {}: invalid kubeconfig{}",
                        path.display(),
                        in_context()
                    )
                })
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options)
            .await
            .with_context(|| format!("$KUBECONFIG or ~/.kube/config{}", in_context())),
        (None, None) => kube::Config::infer()
            .await
            .context("no kubeconfig: pass --kubeconfig, set $KUBECONFIG, or run in a cluster"),
    }
}
