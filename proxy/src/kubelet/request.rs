//! A kubelet request, classified once for the node cache: a read of a kept
//! resource (its scope and verb), a TokenRequest, the node's registration,
//! or something else (a write the node cache never answers). The table of
//! every request a kubelet makes is in proxy/README.md.

use std::time::Duration;

use http::{header, request::Parts, Method};
use sitegrid_apimachinery::{negotiate, path::ApiPath, Status};
use sitegrid_nodecache::{Format, KeptResource, Scope};

use crate::http::response::StatusEncoding;

/// What the node cache makes of a kubelet request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeletRequest {
    /// A LIST of a kept resource.
    List {
        /// The resource.
        resource: KeptResource,
        /// What it selects.
        scope: Scope,
    },
    /// A WATCH of a kept resource.
    Watch {
        /// The resource.
        resource: KeptResource,
        /// What it selects.
        scope: Scope,
        /// Where it starts.
        start: WatchStart,
        /// `allowWatchBookmarks`.
        bookmarks: bool,
        /// `timeoutSeconds`.
        timeout: Option<Duration>,
    },
    /// A GET of one object of a kept resource.
    Get {
        /// The resource.
        resource: KeptResource,
        /// Its namespace (empty when cluster-scoped).
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A TokenRequest (`POST …/serviceaccounts/<sa>/token`).
    Token {
        /// The service account's namespace.
        namespace: String,
        /// The service account.
        service_account: String,
    },
    /// The node's registration (`POST /api/v1/nodes`).
    RegisterNode,
    /// A pod's status (`PATCH …/pods/<name>/status`, the kubelet's status
    /// manager): passed through online; offline applied to the kept pod and
    /// served in the site's endpoints (`nodecache::local`).
    PodStatus {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        name: String,
    },
    /// Anything else: passed through online, `503` offline.
    Other,
}

/// Where a watch starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchStart {
    /// After this resourceVersion (a reflector's watch after its list).
    After(String),
    /// A watch-list (`sendInitialEvents=true`): the objects, then the
    /// bookmark that ends them, then the changes.
    List,
    /// From "now" (`resourceVersion` unset or `0`): the objects as ADDED,
    /// with nothing marking their end.
    Now,
}

/// What the request accepts and how its errors are written.
#[derive(Debug, Clone)]
pub struct Negotiated {
    /// The formats it takes an answer in, preferred first.
    pub formats: Vec<Format>,
    /// How its errors are written.
    pub errors: StatusEncoding,
}

impl Negotiated {
    /// From the request's `Accept`.
    pub fn of(parts: &Parts) -> Negotiated {
        let accept = parts
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok());
        let mut formats = Vec::new();
        let best = negotiate::negotiate(accept);
        for (format, wire) in [
            (Format::Protobuf, negotiate::Wire::Protobuf),
            (Format::Json, negotiate::Wire::Json),
        ] {
            if negotiate::accepts(accept, wire) {
                formats.push(format);
            }
        }
        if best == Some(negotiate::Format::Json) {
            formats.reverse();
        }
        let errors = match negotiate::negotiate_status(accept) {
            Some(negotiate::Format::Protobuf) => StatusEncoding::Protobuf,
            Some(_) => StatusEncoding::Json,
            None => StatusEncoding::Fallback,
        };
        Negotiated { formats, errors }
    }

    /// The format a made-up watch frame is written in (the first accepted).
    pub fn preferred(&self) -> Format {
        self.formats.first().copied().unwrap_or(Format::Json)
    }
}

/// Classifies a kubelet request; a selector that does not parse is the
/// `400` kube-apiserver would answer.
pub fn classify(parts: &Parts) -> Result<KubeletRequest, Status> {
    let Some(api) = ApiPath::parse(parts.uri.path()) else {
        return Ok(KubeletRequest::Other);
    };
    let q = Query::of(parts.uri.query().unwrap_or(""));
    let ends_with = |tail: String| parts.uri.path().ends_with(&tail);
    let write = match (
        &parts.method,
        api.group,
        api.version,
        api.namespace,
        api.resource,
        api.name,
    ) {
        (&Method::POST, "", "v1", None, "nodes", None) if !api.more => {
            Some(KubeletRequest::RegisterNode)
        }
        (&Method::POST, "", "v1", Some(ns), "serviceaccounts", Some(sa))
            if ends_with(format!("/serviceaccounts/{sa}/token")) =>
        {
            Some(KubeletRequest::Token {
                namespace: ns.to_owned(),
                service_account: sa.to_owned(),
            })
        }
        (&Method::PATCH, "", "v1", Some(ns), "pods", Some(name))
            if ends_with(format!("/pods/{name}/status")) =>
        {
            Some(KubeletRequest::PodStatus {
                namespace: ns.to_owned(),
                name: name.to_owned(),
            })
        }
        _ => None,
    };
    if let Some(write) = write {
        return Ok(write);
    }
    if parts.method != Method::GET || api.more {
        return Ok(KubeletRequest::Other);
    }
    let Some(resource) = KeptResource::from_path(api.group, api.version, api.resource) else {
        return Ok(KubeletRequest::Other);
    };
    // A namespaced path of a cluster-scoped resource or the reverse is not one the kubelet sends.
    if resource.namespaced() != api.namespace.is_some()
        && (api.name.is_some() || !resource.namespaced())
    {
        return Ok(KubeletRequest::Other);
    }
    let bad =
        |e: sitegrid_apimachinery::selector::SelectorError| Status::bad_request(e.to_string());
    let watch = q.watch || api.legacy_watch;
    match (api.name, watch) {
        (Some(name), false) => Ok(KubeletRequest::Get {
            resource,
            namespace: api.namespace.unwrap_or_default().to_owned(),
            name: name.to_owned(),
        }),
        (name, true) => {
            let field = match name {
                Some(n) if q.field_selector.is_empty() => format!("metadata.name={n}"),
                Some(n) => format!("{},metadata.name={n}", q.field_selector),
                None => q.field_selector.clone(),
            };
            let scope = Scope::new(api.namespace, &q.label_selector, &field).map_err(bad)?;
            let start = match (q.send_initial_events, q.resource_version.as_str()) {
                (true, _) => WatchStart::List,
                (false, "" | "0") => WatchStart::Now,
                (false, rv) => WatchStart::After(rv.to_owned()),
            };
            Ok(KubeletRequest::Watch {
                resource,
                scope,
                start,
                bookmarks: q.allow_watch_bookmarks,
                timeout: q.timeout_seconds.map(Duration::from_secs),
            })
        }
        (None, false) => Ok(KubeletRequest::List {
            resource,
            scope: Scope::new(api.namespace, &q.label_selector, &q.field_selector).map_err(bad)?,
        }),
    }
}

/// The query parameters the node cache reads.
#[derive(Debug, Default)]
struct Query {
    watch: bool,
    resource_version: String,
    label_selector: String,
    field_selector: String,
    send_initial_events: bool,
    allow_watch_bookmarks: bool,
    timeout_seconds: Option<u64>,
}

impl Query {
    fn of(raw: &str) -> Query {
        let mut q = Query::default();
        let yes = |v: &str| matches!(v, "1" | "true" | "True" | "TRUE" | "t");
        for (k, v) in form_urlencoded::parse(raw.as_bytes()) {
            match &*k {
                "watch" => q.watch = yes(&v),
                "resourceVersion" => q.resource_version = v.into_owned(),
                "labelSelector" => q.label_selector = v.into_owned(),
                "fieldSelector" => q.field_selector = v.into_owned(),
                "sendInitialEvents" => q.send_initial_events = yes(&v),
                "allowWatchBookmarks" => q.allow_watch_bookmarks = yes(&v),
                "timeoutSeconds" => q.timeout_seconds = v.parse().ok(),
                _ => {}
            }
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify_of(method: Method, uri: &str) -> KubeletRequest {
        let req = http::Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .unwrap();
        classify(&req.into_parts().0).unwrap()
    }

    #[test]
    fn the_kubelets_requests_classify_as_the_table_says() {
        match classify_of(
            Method::GET,
            "/api/v1/pods?fieldSelector=spec.nodeName%3Dbj-1&limit=500&resourceVersion=0",
        ) {
            KubeletRequest::List { resource, scope } => {
                assert_eq!(resource, KeptResource::Pods);
                assert_eq!(scope, Scope::new(None, "", "spec.nodeName=bj-1").unwrap());
            }
            other => panic!("{other:?}"),
        }
        match classify_of(
            Method::GET,
            "/api/v1/namespaces/shop/secrets?allowWatchBookmarks=true&fieldSelector=metadata.name%3Ddb&resourceVersion=42&timeout=7m48s&timeoutSeconds=468&watch=true",
        ) {
            KubeletRequest::Watch { resource, scope, start, bookmarks, timeout } => {
                assert_eq!(resource, KeptResource::Secrets);
                assert_eq!(scope.name(), Some("db"));
                assert_eq!(start, WatchStart::After("42".into()));
                assert!(bookmarks);
                assert_eq!(timeout, Some(Duration::from_secs(468)));
            }
            other => panic!("{other:?}"),
        }
        match classify_of(
            Method::GET,
            "/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dbj-1&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true",
        ) {
            KubeletRequest::Watch { start, .. } => assert_eq!(start, WatchStart::List),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            classify_of(Method::GET, "/apis/storage.k8s.io/v1/csinodes/bj-1"),
            KubeletRequest::Get {
                resource: KeptResource::CsiNodes,
                namespace: String::new(),
                name: "bj-1".into()
            }
        );
        assert_eq!(
            classify_of(
                Method::POST,
                "/api/v1/namespaces/shop/serviceaccounts/default/token"
            ),
            KubeletRequest::Token {
                namespace: "shop".into(),
                service_account: "default".into()
            }
        );
        assert_eq!(
            classify_of(Method::POST, "/api/v1/nodes"),
            KubeletRequest::RegisterNode
        );
        assert_eq!(
            classify_of(Method::PATCH, "/api/v1/namespaces/shop/pods/web/status"),
            KubeletRequest::PodStatus {
                namespace: "shop".into(),
                name: "web".into()
            }
        );
        for (method, other) in [
            (Method::PUT, "/api/v1/namespaces/shop/pods/web/status"),
            (Method::PATCH, "/api/v1/namespaces/shop/pods/web"),
            (Method::PATCH, "/api/v1/nodes/bj-1/status"),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/bj-1",
            ),
            (
                Method::GET,
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/bj-1",
            ),
            (Method::POST, "/api/v1/namespaces/default/events"),
            (Method::GET, "/api/v1/namespaces/shop/pods/web/log"),
            (Method::DELETE, "/api/v1/namespaces/shop/pods/web"),
            (Method::GET, "/api/v1/namespaces/shop/csinodes/x"),
        ] {
            assert_eq!(
                classify_of(method.clone(), other),
                KubeletRequest::Other,
                "{method} {other}"
            );
        }
        let bad = http::Request::get("/api/v1/pods?labelSelector=a%20in%20(")
            .body(())
            .unwrap();
        assert_eq!(classify(&bad.into_parts().0).unwrap_err().code, 400);
    }

    #[test]
    fn the_kubelets_accept_takes_protobuf_first_then_json() {
        let req = http::Request::get("/")
            .header(
                header::ACCEPT,
                "application/vnd.kubernetes.protobuf,application/json",
            )
            .body(())
            .unwrap();
        let n = Negotiated::of(&req.into_parts().0);
        assert_eq!(n.formats, [Format::Protobuf, Format::Json]);
        assert_eq!(n.errors, StatusEncoding::Protobuf);
        let json = http::Request::get("/")
            .header(header::ACCEPT, "application/json")
            .body(())
            .unwrap();
        assert_eq!(Negotiated::of(&json.into_parts().0).formats, [Format::Json]);
    }
}
