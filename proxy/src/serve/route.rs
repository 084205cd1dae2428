//! Classifying a request once: which cached resource, scope and verb it
//! addresses, or that it is not ours (passthrough).

use http::Method;

use super::query::Query;
use crate::resource::{ApiVersion, ResourceKind, Served};

/// What the cache handlers are asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// A collection read.
    List,
    /// A collection stream.
    Watch,
    /// One object by name.
    Get,
}

/// A request the cache answers.
#[derive(Debug, Clone)]
pub struct CachedRequest {
    /// Resource and API version.
    pub served: Served,
    /// `Some(ns)` for the per-namespace and single-object paths of namespaced kinds.
    pub namespace: Option<String>,
    /// The object name of a single-object path.
    pub name: Option<String>,
    /// List, watch or get.
    pub verb: Verb,
    /// The parsed query string.
    pub query: Query,
}

impl CachedRequest {
    /// The store-key prefix that scopes this request (`ns/` or everything).
    pub fn key_prefix(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/"),
            None => String::new(),
        }
    }
}

/// Where a request goes.
#[derive(Debug)]
pub enum Route {
    /// Served from the cache.
    Cached(CachedRequest),
    /// A cached path with a malformed query: answered with this Status.
    Invalid(sitegrid_apimachinery::Status),
    /// Anything else: forwarded upstream.
    Passthrough,
}

/// Parses method, path and query into a route, exactly as kube-apiserver
/// spells the paths of the cached kinds.
pub fn classify(method: &Method, path: &str, query: Option<&str>) -> Route {
    if method != Method::GET {
        return Route::Passthrough;
    }
    let Some((group, version, rest)) = split_group_version(path) else {
        return Route::Passthrough;
    };
    let mut segs: Vec<&str> = rest.split('/').collect();
    let legacy_watch = segs.first() == Some(&"watch");
    if legacy_watch {
        segs.remove(0);
    }
    let (namespace, tail) = match segs.as_slice() {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some((*ns).to_owned()), tail),
        tail => (None, tail),
    };
    let (res, name) = match tail {
        [res] => (*res, None),
        [res, name] if !name.is_empty() => (*res, Some((*name).to_owned())),
        _ => return Route::Passthrough,
    };
    let Some(kind) = resource(res, group) else {
        return Route::Passthrough;
    };
    // Nodes are cluster-scoped; `/namespaces/x/nodes` does not exist.
    if namespace.is_some() && !kind.namespaced() {
        return Route::Passthrough;
    }
    // A namespaced single-object path needs the namespace.
    if name.is_some() && namespace.is_none() && kind.namespaced() {
        return Route::Passthrough;
    }
    let query = match Query::parse(query.unwrap_or("")) {
        Ok(q) => q,
        Err(status) => return Route::Invalid(status),
    };
    let verb = match (&name, legacy_watch || query.watch) {
        (_, true) => Verb::Watch,
        (Some(_), false) => Verb::Get,
        (None, false) => Verb::List,
    };
    let (query, name) = match (verb, name) {
        // A watch on a single-object path is a watch filtered to that name.
        (Verb::Watch, Some(n)) => (query.with_name_field(&n), None),
        (_, n) => (query, n),
    };
    Route::Cached(CachedRequest {
        served: Served { kind, version },
        namespace,
        name,
        verb,
        query,
    })
}

/// Which group/version prefix the path has: the core `/api/v1/` or
/// `/apis/discovery.k8s.io/{v1,v1beta1}/`; returns group, version and the rest.
fn split_group_version(path: &str) -> Option<(&'static str, ApiVersion, &str)> {
    if let Some(rest) = path.strip_prefix("/api/v1/") {
        return Some(("", ApiVersion::V1, rest));
    }
    let rest = path.strip_prefix("/apis/discovery.k8s.io/")?;
    if let Some(r) = rest.strip_prefix("v1/") {
        Some(("discovery.k8s.io", ApiVersion::V1, r))
    } else {
        rest.strip_prefix("v1beta1/")
            .map(|r| ("discovery.k8s.io", ApiVersion::V1beta1, r))
    }
}

/// The cached resource a path segment names in this group, if any.
fn resource(seg: &str, group: &str) -> Option<ResourceKind> {
    ResourceKind::ALL
        .into_iter()
        .find(|k| k.plural() == seg && k.group() == group)
}
