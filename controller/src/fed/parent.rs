//! The control ("parent") cluster, as clusternet's agent leaves it in a
//! managed cluster: Secret `clusternet-system/parent-cluster` with the
//! parent's URL, CA, a token for the cluster's dedicated namespace there, and
//! that namespace.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

/// Where the Secret is by default (clusternet's agent namespace and name).
pub const DEFAULT_SECRET: &str = "clusternet-system/parent-cluster";
/// The URL key clusternet writes since v0.2.0.
pub const URL_KEY: &str = "apiserver-advertise-url";
/// The URL key clusternet v0.1 wrote (and SuperEdge reads).
pub const LEGACY_URL_KEY: &str = "parent-url";

/// What the Secret says.
#[derive(Clone, PartialEq, Eq)]
pub struct Parent {
    /// The control cluster's API server.
    pub url: String,
    /// The dedicated namespace's token.
    pub token: String,
    /// The control cluster's CA (PEM), if given.
    pub ca_pem: Option<Vec<u8>>,
    /// This cluster's dedicated namespace in the control cluster.
    pub namespace: String,
}

impl std::fmt::Debug for Parent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("Parent")
            .field("url", &self.url)
            .field("namespace", &self.namespace)
            .field("ca", &self.ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// Why the Secret cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParentError {
    /// A required key is missing or empty.
    #[error("Secret {secret} has no {key:?} (clusternet's agent writes it once the cluster is approved)")]
    Missing {
        /// namespace/name.
        secret: String,
        /// The key.
        key: &'static str,
    },
    /// A value is not UTF-8 or the URL does not parse.
    #[error("Secret {secret}: {what}")]
    Invalid {
        /// namespace/name.
        secret: String,
        /// What is wrong.
        what: String,
    },
}

impl Parent {
    /// Reads the Secret (keys as clusternet writes them; the URL under
    /// `apiserver-advertise-url`, else the older `parent-url`).
    pub fn from_secret(secret: &Secret) -> Result<Self, ParentError> {
        let id = format!(
            "{}/{}",
            secret.metadata.namespace.as_deref().unwrap_or_default(),
            secret.metadata.name.as_deref().unwrap_or_default()
        );
        let empty = BTreeMap::new();
        let data = secret.data.as_ref().unwrap_or(&empty);
        let text = |key: &'static str| -> Result<Option<String>, ParentError> {
            match data.get(key) {
                None => Ok(None),
                Some(bytes) if bytes.0.iter().all(u8::is_ascii_whitespace) => Ok(None),
                Some(bytes) => String::from_utf8(bytes.0.clone())
                    .map(|s| Some(s.trim().to_owned()))
                    .map_err(|_| ParentError::Invalid {
                        secret: id.clone(),
                        what: format!("{key:?} is not UTF-8"),
                    }),
            }
        };
        let missing = |key| ParentError::Missing {
            secret: id.clone(),
            key,
        };
        let url = match text(URL_KEY)? {
            Some(url) => url,
            None => text(LEGACY_URL_KEY)?.ok_or_else(|| missing(URL_KEY))?,
        };
        if url
            .parse::<http::Uri>()
            .map_or(true, |u| u.host().is_none())
        {
            return Err(ParentError::Invalid {
                secret: id,
                what: format!("{URL_KEY:?} is not a URL: {url:?}"),
            });
        }
        Ok(Self {
            url,
            token: text("token")?.ok_or_else(|| missing("token"))?,
            ca_pem: data
                .get("ca.crt")
                .filter(|b| !b.0.is_empty())
                .map(|b| b.0.clone()),
            namespace: text("namespace")?.ok_or_else(|| missing("namespace"))?,
        })
    }

    /// A kubeconfig for the parent (as SuperEdge builds one); without a CA
    /// the server's certificate is not verified (SuperEdge's behaviour too).
    pub fn kubeconfig(&self) -> Kubeconfig {
        let engine = base64::engine::general_purpose::STANDARD;
        let mut cluster = json!({"server": self.url});
        match &self.ca_pem {
            Some(pem) => cluster["certificate-authority-data"] = json!(engine.encode(pem)),
            None => cluster["insecure-skip-tls-verify"] = json!(true),
        }
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "clusternet-cluster", "cluster": cluster}],
            "users": [{"name": "clusternet", "user": {"token": self.token}}],
            "contexts": [{"name": "clusternet@clusternet-cluster", "context": {
                "cluster": "clusternet-cluster", "user": "clusternet", "namespace": self.namespace,
            }}],
            "current-context": "clusternet@clusternet-cluster",
        });
        // Every field above is a string the schema takes: this cannot fail.
        serde_json::from_value(config).unwrap_or_default()
    }

    /// A client for the parent.
    pub async fn client(&self) -> Result<kube::Client, String> {
        let config =
            kube::Config::from_custom_kubeconfig(self.kubeconfig(), &KubeConfigOptions::default())
                .await
                .map_err(|e| e.to_string())?;
        kube::Client::try_from(config).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                namespace: Some("clusternet-system".into()),
                name: Some("parent-cluster".into()),
                ..Default::default()
            },
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn reads_clusternets_keys_and_falls_back_to_the_old_url_key() {
        let new = secret(&[
            (URL_KEY, "https://10.0.0.1:6443"),
            ("token", "abc\n"),
            ("ca.crt", "-----BEGIN CERTIFICATE-----"),
            ("namespace", "clusternet-x7k2p"),
        ]);
        let parent = Parent::from_secret(&new).unwrap();
        assert_eq!(parent.url, "https://10.0.0.1:6443");
        assert_eq!(parent.token, "abc");
        assert_eq!(parent.namespace, "clusternet-x7k2p");
        assert!(parent.ca_pem.is_some());
        assert!(
            !format!("{parent:?}").contains("abc"),
            "the token is never logged"
        );

        let old = secret(&[
            (LEGACY_URL_KEY, "https://parent.example:6443"),
            ("token", "t"),
            ("namespace", "clusternet-a"),
        ]);
        let parent = Parent::from_secret(&old).unwrap();
        assert_eq!(parent.url, "https://parent.example:6443");
        let cluster = parent.kubeconfig().clusters[0].cluster.clone().unwrap();
        assert_eq!(cluster.insecure_skip_tls_verify, Some(true));
    }

    #[test]
    fn a_secret_missing_a_key_or_with_a_bad_url_says_which() {
        let err = Parent::from_secret(&secret(&[("token", "t"), ("namespace", "n")])).unwrap_err();
        assert!(err.to_string().contains("apiserver-advertise-url"), "{err}");
        let err = Parent::from_secret(&secret(&[(URL_KEY, "https://p:6443"), ("namespace", "n")]))
            .unwrap_err();
        assert!(err.to_string().contains("\"token\""), "{err}");
        let err = Parent::from_secret(&secret(&[
            (URL_KEY, "not a url"),
            ("token", "t"),
            ("namespace", "n"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("not a URL"), "{err}");
    }

    #[tokio::test]
    async fn the_kubeconfig_makes_a_client_for_the_parent_namespace() {
        let parent = Parent::from_secret(&secret(&[
            (URL_KEY, "https://127.0.0.1:1"),
            ("token", "t"),
            ("namespace", "clusternet-q"),
        ]))
        .unwrap();
        let client = parent.client().await.unwrap();
        assert_eq!(client.default_namespace(), "clusternet-q");
    }
}
