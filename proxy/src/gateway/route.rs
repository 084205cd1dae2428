//! Classifying a request once, at the edge of the stack: which cached
//! resource, scope, verb and options it asks for (fully parsed and
//! validated, as a [`CachedRequest`]), or that it is an operator endpoint,
//! or that it goes upstream (with what the metrics and the limits need).

use http::{header, request::Parts, Method};
use sitegrid_apimachinery::{
    continue_token::ContinueToken,
    negotiate::{self, negotiate},
    selector::{LabelSelector, Operator},
    status::StatusCause,
    table::IncludeObject,
    Status,
};

use super::query::Query;
use crate::{
    handlers::request::{
        CachedRequest, Filter, Format, ListFrom, ListRequest, RvMatch, Start, Verb, Versioning,
        WatchRequest,
    },
    http::response::{pretty_user_agent, StatusEncoding},
    ops,
};
use sitegrid_apimachinery::path::ApiPath;
use sitegrid_cache::{ApiVersion, Cache, NodeScopes, ResourceKind, Served};

/// Where a request goes.
#[derive(Debug, Clone)]
pub enum Route {
    /// Served from the cache.
    Cached(Box<CachedRequest>),
    /// A cached path that cannot be answered as asked: this Status.
    Rejected(Box<Rejection>),
    /// An operator endpoint on the serving port.
    Ops(ops::Endpoint),
    /// A node's offline reports, sent to its site proxy (`crate::site_reports`).
    Report(String),
    /// Anything else: forwarded upstream.
    Passthrough(Passthrough),
}

/// A request refused before reaching a handler.
#[derive(Debug, Clone)]
pub struct Rejection {
    /// The answer.
    pub status: Status,
    /// How it is written, as negotiated from `Accept`.
    pub encoding: StatusEncoding,
}

/// A request for the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passthrough {
    /// The resource the path names (`configmaps`), for metrics; empty when the
    /// path names none (`/version`, discovery).
    pub resource: String,
    /// A watch or a log follow: long-lived, so not counted against the limit.
    pub streaming: bool,
}

/// What the serving port answers besides the API.
#[derive(Debug, Clone, Default)]
pub struct RouteConfig {
    /// `/healthz`, `/livez`, `/readyz`, `/metrics` are answered here (not on a port of their own).
    pub ops: bool,
    /// `/debug/*` too (`--debug`).
    pub debug: bool,
    /// Which Node requests the cache answers (see [`CachedNodes`]).
    pub nodes: CachedNodes,
    /// The nodes' offline reports are taken here (a site proxy).
    pub reports: bool,
}

/// Which Node requests the cache answers; the others go upstream.
#[derive(Debug, Clone, Default)]
pub enum CachedNodes {
    /// Every one (a cache filled by its user, holding whole Nodes).
    #[default]
    All,
    /// Those for this node alone — a GET of it, a list or watch pinned to it
    /// by `fieldSelector=metadata.name=` (what kube-proxy sends): the cache
    /// holds the local node whole, and of other nodes only their labels.
    Only(std::sync::Arc<str>),
    /// None whole: a site proxy keeps only the labels of its nodes and of
    /// the nodes sharing their values of a key in use. It answers, as
    /// metadata (`as=PartialObjectMetadata`), the lists and watches of
    /// nodes whose label selector stays within one of those scopes — what
    /// its node proxies' membership asks, `key in (value)` — so node status
    /// writes stop at the site proxy.
    Labels(Cache),
}

/// Parses method, path, query and the negotiation headers into a route.
pub fn classify(parts: &Parts, config: &RouteConfig) -> Route {
    let path = parts.uri.path();
    if config.ops {
        if let Some(endpoint) = ops::Endpoint::of(path, config.debug) {
            return Route::Ops(endpoint);
        }
    }
    if config.reports {
        if let Some(node) = crate::site_reports::node_of(path) {
            return Route::Report(node.to_owned());
        }
    }
    let query = parts.uri.query().unwrap_or("");
    let api = ApiPath::parse(path);
    if parts.method == Method::GET {
        if let Some(target) = api.as_ref().and_then(cached_target) {
            match cached(target, query, parts) {
                Ok(req) if !config.nodes.answers(&req) => {}
                Ok(req) => return Route::Cached(Box::new(req)),
                Err(rejection) => return Route::Rejected(Box::new(rejection)),
            }
        }
    }
    Route::Passthrough(Passthrough {
        resource: api.map(|a| a.resource.to_owned()).unwrap_or_default(),
        streaming: is_stream(query),
    })
}

impl CachedNodes {
    /// Whether the cache answers `req` (anything but Nodes, and the Nodes it holds whole).
    fn answers(&self, req: &CachedRequest) -> bool {
        match self {
            _ if req.served.kind != ResourceKind::Nodes => true,
            CachedNodes::Only(node) => req.single_name() == Some(node),
            CachedNodes::Labels(cache) => {
                let selector = match (&req.format, &req.verb) {
                    (Format::Metadata { .. }, Verb::List(l)) => l.filter.label_selector(),
                    (Format::Metadata { .. }, Verb::Watch(w)) => w.filter.label_selector(),
                    _ => return false,
                };
                within_scopes(selector, &cache.node_scopes())
            }
            _ => true,
        }
    }
}

/// Whether every node `selector` matches is in a scope: it requires
/// `key in (values)` (or `key=value`) with `key` scoped and every value in
/// that key's scope.
fn within_scopes(selector: &LabelSelector, scopes: &NodeScopes) -> bool {
    selector.requirements().iter().any(|r| {
        matches!(
            r.operator(),
            Operator::In | Operator::Equals | Operator::DoubleEquals
        ) && scopes
            .get(r.key())
            .is_some_and(|values| r.values().iter().all(|v| values.contains(v)))
    })
}

/// A path of a cached kind: what it addresses.
struct Target {
    served: Served,
    namespace: Option<String>,
    name: Option<String>,
    legacy_watch: bool,
}

/// The cached kind and scope `api` addresses, spelled exactly as kube-apiserver spells them.
fn cached_target(api: &ApiPath<'_>) -> Option<Target> {
    let version = match (api.group, api.version) {
        ("", "v1") | ("discovery.k8s.io" | "networking.k8s.io", "v1") => ApiVersion::V1,
        ("discovery.k8s.io" | "networking.k8s.io", "v1beta1") => ApiVersion::V1beta1,
        _ => return None,
    };
    let kind = ResourceKind::from_plural(api.resource).filter(|k| k.group() == api.group)?;
    // Nodes and ServiceCIDRs are cluster-scoped (`/namespaces/x/nodes` does not exist); a
    // namespaced single-object path needs the namespace; subresources go upstream.
    let misscoped = matches!(
        (kind.namespaced(), api.namespace, api.name),
        (false, Some(_), _) | (true, None, Some(_))
    );
    if misscoped || api.more {
        return None;
    }
    Some(Target {
        served: Served { kind, version },
        namespace: api.namespace.map(str::to_owned),
        name: api.name.map(str::to_owned),
        legacy_watch: api.legacy_watch,
    })
}

/// The fully parsed request, or the Status kube-apiserver would answer.
fn cached(target: Target, raw_query: &str, parts: &Parts) -> Result<CachedRequest, Rejection> {
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    // Errors are negotiated first: a protobuf client's 400 is protobuf too.
    let errors = match negotiate::negotiate_status(accept) {
        Some(Format::Protobuf) => StatusEncoding::Protobuf,
        Some(_) => StatusEncoding::Json,
        None => StatusEncoding::Fallback,
    };
    let rejected = |status| Rejection {
        status,
        encoding: errors,
    };
    let q = Query::parse(raw_query).map_err(rejected)?;
    let format =
        match negotiate(accept) {
            // `includeObject` is read (and refused when bad) for Tables only.
            Some(table @ Format::Table { .. }) => table.including(
                IncludeObject::parse(q.include_object.as_deref())
                    .map_err(|m| rejected(Status::bad_request(m)))?,
            ),
            Some(format) => format,
            None => return Err(Rejection {
                status: Status::not_acceptable(
                    "the server was unable to respond with a content type that the client supports",
                ),
                encoding: StatusEncoding::Fallback,
            }),
        };
    let ua = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let Target {
        served,
        namespace,
        name,
        legacy_watch,
    } = target;
    let verb = match (name, legacy_watch || q.watch) {
        // A watch on a single-object path is a watch filtered to that name.
        (name, true) => {
            Verb::Watch(watch(served.kind, namespace.clone(), name, &q).map_err(rejected)?)
        }
        (Some(name), false) => Verb::Get { name },
        (None, false) => Verb::List(list(served.kind, namespace.clone(), &q).map_err(rejected)?),
    };
    let instead_of_protobuf = match format {
        Format::Protobuf => negotiate::negotiate_except_protobuf(accept),
        _ => None,
    };
    Ok(CachedRequest {
        served,
        namespace,
        format,
        instead_of_protobuf,
        errors,
        pretty: q.pretty || pretty_user_agent(ua),
        verb,
    })
}

fn list(kind: ResourceKind, namespace: Option<String>, q: &Query) -> Result<ListRequest, Status> {
    let filter = Filter::parse(kind, namespace, &q.label_selector, &q.field_selector)?;
    let versioning = Versioning::parse(
        &q.resource_version,
        &q.resource_version_match,
        q.continue_token.is_some(),
        q.send_initial_events.is_some(),
    )?;
    let from = match (&q.continue_token, versioning.rv, versioning.rv_match) {
        (Some(_), Some(_), _) => {
            return Err(Status::bad_request(
                "specifying resource version is not allowed when using continue",
            ))
        }
        (Some(token), None, _) => ListFrom::Continue(
            ContinueToken::decode(token).map_err(|e| Status::bad_request(e.to_string()))?,
        ),
        (None, None, _) => ListFrom::Latest,
        (None, Some(rv), RvMatch::NotOlderThan) => ListFrom::NotOlderThan(rv),
        (None, Some(rv), RvMatch::Exact) => ListFrom::Exact(rv),
    };
    Ok(ListRequest {
        filter,
        from,
        // `limit` is ignored for resourceVersion=0, as the apiserver's watch cache does.
        limit: if versioning.zero { 0 } else { q.limit as usize },
    })
}

fn watch(
    kind: ResourceKind,
    namespace: Option<String>,
    name: Option<String>,
    q: &Query,
) -> Result<WatchRequest, Status> {
    let field = match &name {
        Some(n) if q.field_selector.is_empty() => format!("metadata.name={n}"),
        Some(n) => format!("{},metadata.name={n}", q.field_selector),
        None => q.field_selector.clone(),
    };
    let filter = Filter::parse(kind, namespace, &q.label_selector, &field)?;
    Ok(WatchRequest {
        filter,
        start: start_of(q)?,
        bookmarks: q.allow_watch_bookmarks,
        timeout: q.timeout_seconds.map(std::time::Duration::from_secs),
    })
}

/// Where a watch starts, defaulted and validated as kube-apiserver 1.34+
/// does with WatchList on (`SetListOptionsDefaults`, `validateWatchOptions`).
fn start_of(q: &Query) -> Result<Start, Status> {
    let rv = Versioning::parse(&q.resource_version, "", false, false)?.rv;
    let legacy = matches!(q.resource_version.as_str(), "" | "0");
    // A watch from "any" version without sendInitialEvents is a WatchList.
    let (send_initial, rv_match) = match (q.send_initial_events, q.resource_version_match.as_str())
    {
        (None, "") if legacy => (Some(true), "NotOlderThan"),
        other => other,
    };
    let field = "resourceVersionMatch";
    let forbidden = |msg: &str| StatusCause::forbidden(field, msg);
    let mut causes = Vec::new();
    if send_initial.is_some() && rv_match != "NotOlderThan" {
        causes.push(forbidden(
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !rv_match.is_empty() {
        if send_initial.is_none() {
            causes.push(forbidden(
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if rv_match != "NotOlderThan" {
            causes.push(StatusCause::not_supported(
                field,
                rv_match,
                &["NotOlderThan"],
            ));
        }
        if q.continue_token.is_some() {
            causes.push(forbidden(
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    if !causes.is_empty() {
        return Err(Status::invalid("ListOptions", "meta.k8s.io", "", causes));
    }
    Ok(match (send_initial, rv) {
        (Some(true), not_older_than) => Start::Initial {
            not_older_than,
            // The end of the initial events is a bookmark: only for clients that take bookmarks.
            end_bookmark: q.allow_watch_bookmarks,
        },
        (_, Some(rv)) => Start::After(rv),
        (_, None) => Start::Now,
    })
}

/// Long-lived passthrough requests (watches, log follows) are not limited.
fn is_stream(query: &str) -> bool {
    form_urlencoded::parse(query.as_bytes()).any(|(k, v)| {
        (k == "watch" || k == "follow") && matches!(&*v, "1" | "true" | "True" | "TRUE" | "t")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A site proxy answers a node scope only when every node the selector
    /// can match is one it holds.
    #[test]
    fn a_node_selector_is_answered_from_the_cache_only_within_a_held_scope() {
        let scopes: NodeScopes = [
            ("location".to_owned(), ["beijing".to_owned()].into()),
            (
                "kubernetes.io/hostname".to_owned(),
                ["bj-1".to_owned(), "bj-2".to_owned()].into(),
            ),
        ]
        .into();
        let within = |s: &str| within_scopes(&LabelSelector::parse(s).unwrap(), &scopes);
        assert!(within("location in (beijing)"));
        assert!(within("location=beijing"));
        assert!(within("kubernetes.io/hostname in (bj-2)"));
        assert!(within("location in (beijing),rack=r1"), "narrower still");
        assert!(
            !within("location in (beijing,guangzhou)"),
            "guangzhou is not held"
        );
        assert!(!within("location notin (guangzhou)"));
        assert!(!within("zone in (z1)"), "no scope for zone");
        assert!(!within("location"));
        assert!(!within(""), "every node");
    }
}
