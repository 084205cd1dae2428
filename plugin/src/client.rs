//! The cluster connection: the user's kubeconfig as kubectl reads it, the
//! namespace scope of `-n`/`-A`, and every read the commands make, each
//! mapped to an [`Error`] the user can act on.

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::{NamespaceResourceScope, PartialObjectMeta};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::cli::Global;
use crate::error::Error;

/// Which namespaces a command reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One namespace (`-n`, else the context's, else `default`).
    Namespace(String),
    /// Every namespace (`-A`).
    All,
}

impl Scope {
    /// The one namespace, if the scope is one.
    pub fn namespace(&self) -> Option<&str> {
        match self {
            Scope::Namespace(ns) => Some(ns),
            Scope::All => None,
        }
    }
}

/// A client for the cluster the kubeconfig names.
#[derive(Clone)]
pub struct Cluster {
    client: kube::Client,
    /// `host:port` of the API server, for connection errors.
    server: String,
    /// `-n`, the context's namespace, or `default`.
    namespace: String,
    all_namespaces: bool,
}

impl Cluster {
    /// Reads the kubeconfig as kubectl does (`--kubeconfig`, else
    /// `$KUBECONFIG`'s files merged, else `~/.kube/config`; `--context`).
    pub async fn connect(global: &Global) -> Result<Cluster, Error> {
        let config = sitegrid_runtime::kube_config_in_context(
            global.kubeconfig.as_deref(),
            global.context.as_deref(),
        )
        .await
        .map_err(Error::Config)?;
        let url = &config.cluster_url;
        let server = url
            .authority()
            .map_or_else(|| url.to_string(), |a| a.to_string());
        let namespace = global
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(config)
            .map_err(|e| Error::Config(anyhow::Error::new(e).context("kubeconfig")))?;
        Ok(Cluster {
            client,
            server,
            namespace,
            all_namespaces: global.all_namespaces,
        })
    }

    /// The namespaces a namespaced listing covers.
    pub fn scope(&self) -> Scope {
        if self.all_namespaces {
            Scope::All
        } else {
            Scope::Namespace(self.namespace.clone())
        }
    }

    /// The one namespace a named object is looked up in (`-n`, else the context's).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn error(&self, err: kube::Error) -> Error {
        Error::from_kube(err, &self.server)
    }

    /// Every `K` in `scope`; `None` when the API server does not serve `K`
    /// (404: the CRD is not installed).
    pub async fn list<K>(&self, scope: &Scope) -> Result<Option<Vec<K>>, Error>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = match scope {
            Scope::Namespace(ns) => Api::namespaced(self.client.clone(), ns),
            Scope::All => Api::all(self.client.clone()),
        };
        self.list_or_absent(api, &ListParams::default()).await
    }

    /// Every `K` of a cluster-scoped kind; `None` when it is not served.
    pub async fn list_cluster<K>(&self) -> Result<Option<Vec<K>>, Error>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    {
        let api: Api<K> = Api::all(self.client.clone());
        self.list_or_absent(api, &ListParams::default()).await
    }

    async fn list_or_absent<K>(&self, api: Api<K>, lp: &ListParams) -> Result<Option<Vec<K>>, Error>
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        match api.list(lp).await {
            Ok(list) => Ok(Some(list.items)),
            Err(e) => match self.error(e) {
                e if e.is_not_found() => Ok(None),
                e => Err(e),
            },
        }
    }

    /// Every Node.
    pub async fn nodes(&self) -> Result<Vec<Node>, Error> {
        let api: Api<Node> = Api::all(self.client.clone());
        let list = api.list(&ListParams::default()).await;
        Ok(list.map_err(|e| self.error(e))?.items)
    }

    /// Every Node's metadata (names and labels: all a site needs).
    pub async fn node_metadata(&self) -> Result<Vec<PartialObjectMeta<Node>>, Error> {
        let api: Api<Node> = Api::all(self.client.clone());
        let list = api.list_metadata(&ListParams::default()).await;
        Ok(list.map_err(|e| self.error(e))?.items)
    }

    /// The Node `name`.
    pub async fn node(&self, name: &str) -> Result<Node, Error> {
        let api: Api<Node> = Api::all(self.client.clone());
        api.get_opt(name)
            .await
            .map_err(|e| self.error(e))?
            .ok_or_else(|| Error::NotFound {
                kind: "node",
                name: name.to_owned(),
                namespace: None,
            })
    }

    /// The Service `namespace/name`.
    pub async fn service(&self, namespace: &str, name: &str) -> Result<Service, Error> {
        let api: Api<Service> = Api::namespaced(self.client.clone(), namespace);
        api.get_opt(name)
            .await
            .map_err(|e| self.error(e))?
            .ok_or_else(|| Error::NotFound {
                kind: "service",
                name: name.to_owned(),
                namespace: Some(namespace.to_owned()),
            })
    }

    /// The pods in `namespace` with labels `selector` on node `node`.
    pub async fn pods_on(
        &self,
        namespace: &str,
        selector: &str,
        node: &str,
    ) -> Result<Vec<Pod>, Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let lp = ListParams::default()
            .labels(selector)
            .fields(&format!("spec.nodeName={node}"));
        Ok(api.list(&lp).await.map_err(|e| self.error(e))?.items)
    }

    /// The EndpointSlice version the API server serves: `v1`, else
    /// `v1beta1` (Kubernetes 1.20), as sitegrid-proxy chooses it.
    pub async fn slice_version(&self) -> Result<&'static str, Error> {
        let groups = self
            .client
            .list_api_groups()
            .await
            .map_err(|e| self.error(e))?;
        let versions: Vec<&str> = groups
            .groups
            .iter()
            .filter(|g| g.name == SLICE_GROUP)
            .flat_map(|g| g.versions.iter().map(|v| v.version.as_str()))
            .collect();
        if versions.contains(&"v1") {
            Ok("v1")
        } else if versions.contains(&"v1beta1") {
            Ok("v1beta1")
        } else {
            Err(Error::Unreadable(format!(
                "the API server serves no EndpointSlices ({SLICE_GROUP} v1 or v1beta1)"
            )))
        }
    }

    /// The EndpointSlices of Service `namespace/service`, as JSON the way
    /// the API server sends them (what the proxy's filter reads).
    pub async fn slices_of(
        &self,
        version: &str,
        namespace: &str,
        service: &str,
    ) -> Result<Vec<Value>, Error> {
        let resource = slice_resource(version);
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource);
        let lp = ListParams::default().labels(&format!("{SERVICE_NAME_LABEL}={service}"));
        let list = api.list(&lp).await.map_err(|e| self.error(e))?;
        list.items
            .into_iter()
            .map(|mut o| {
                // A list's items carry no kind; the filter does not read it, the JSON output does.
                o.types = Some(kube::core::TypeMeta {
                    api_version: resource.api_version.clone(),
                    kind: resource.kind.clone(),
                });
                serde_json::to_value(o).map_err(|e| Error::Unreadable(e.to_string()))
            })
            .collect()
    }
}

/// `discovery.k8s.io`.
const SLICE_GROUP: &str = "discovery.k8s.io";
/// The label naming an EndpointSlice's Service (the proxy links slices by it).
const SERVICE_NAME_LABEL: &str = sitegrid_cache::topology::SERVICE_NAME_LABEL;

fn slice_resource(version: &str) -> ApiResource {
    ApiResource {
        group: SLICE_GROUP.into(),
        version: version.into(),
        api_version: format!("{SLICE_GROUP}/{version}"),
        kind: "EndpointSlice".into(),
        plural: "endpointslices".into(),
    }
}
