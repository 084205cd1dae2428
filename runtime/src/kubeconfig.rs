//! Which kubeconfig a binary uses, with errors that name the file.

use std::path::Path;

use anyhow::Context as _;

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
