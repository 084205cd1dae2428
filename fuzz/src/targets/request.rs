//! What a client sends the proxy: the request target, its query and `Accept`.

use http::{header, Method, Request};
use sitegrid_apimachinery::{
    continue_token::{ContinueError, ContinueToken},
    negotiate::{negotiate, negotiate_status, Format},
    path::ApiPath,
    selector::{FieldSelector, LabelSelector},
};
use sitegrid_proxy::gateway::{classify, CachedNodes, Route, RouteConfig};

use crate::text;

/// `labelSelector`: a selector that parses prints a form that parses back
/// to the same selector (Go's `Selector.String()` is re-parsable).
pub fn label_selector(data: &[u8]) {
    let Some(s) = text(data) else { return };
    if let Ok(sel) = LabelSelector::parse(s) {
        let printed = sel.to_string();
        assert_eq!(
            LabelSelector::parse(&printed).as_ref(),
            Ok(&sel),
            "{s:?} printed as {printed:?}"
        );
    }
}

/// `fieldSelector`: the printed form parses, and printing is stable from
/// the second time on. Not equal at once: Go keeps the terms in the order
/// of the raw terms sorted as strings, and an escaped value (`c\=d`) sorts
/// elsewhere than its printed form, so the first re-parse may reorder the
/// same terms (Go's selectors do the same).
pub fn field_selector(data: &[u8]) {
    let Some(s) = text(data) else { return };
    if let Ok(sel) = FieldSelector::parse(s) {
        let _ = (sel.exact_name(), sel.exact_namespace());
        let once = sel.to_string();
        let reparsed = FieldSelector::parse(&once);
        assert!(reparsed.is_ok(), "{s:?} printed as {once:?}: {reparsed:?}");
        let twice = reparsed.map(|r| r.to_string()).unwrap_or_default();
        let thrice = FieldSelector::parse(&twice).map(|r| r.to_string());
        assert_eq!(thrice.as_ref(), Ok(&twice), "{s:?} printed as {once:?}");
    }
}

/// `continue`: a token that decodes encodes to one that decodes to the same
/// position. But the list's beginning (`"start":"/"`, an empty key): as in
/// kube-apiserver, the token written for it is one the decoder refuses.
pub fn continue_token(data: &[u8]) {
    let Some(s) = text(data) else { return };
    if let Ok(token) = ContinueToken::decode(s) {
        let again = ContinueToken::decode(&token.encode());
        if token.start.is_empty() {
            assert_eq!(again, Err(ContinueError::EmptyStart), "{s:?}");
        } else {
            assert_eq!(again, Ok(token), "{s:?}");
        }
    }
}

/// A request path: a resource path without a subresource is rebuilt from
/// its parts into a path that parses to the same parts.
pub fn api_path(data: &[u8]) {
    let Some(path) = text(data) else { return };
    let Some(p) = ApiPath::parse(path) else {
        return;
    };
    if p.more {
        return;
    }
    let mut rebuilt = match p.group {
        "" => format!("/api/{}", p.version),
        group => format!("/apis/{group}/{}", p.version),
    };
    if p.legacy_watch {
        rebuilt.push_str("/watch");
    }
    if let Some(ns) = p.namespace {
        rebuilt.push_str(&format!("/namespaces/{ns}"));
    }
    rebuilt.push('/');
    rebuilt.push_str(p.resource);
    if let Some(name) = p.name {
        rebuilt.push('/');
        rebuilt.push_str(name);
    }
    assert_eq!(
        ApiPath::parse(&rebuilt),
        Some(p),
        "{path:?} rebuilt as {rebuilt:?}"
    );
}

/// `Accept`: negotiation answers; an error `Status` is never a Table.
pub fn accept(data: &[u8]) {
    let Some(accept) = text(data) else { return };
    let _ = negotiate(Some(accept));
    assert!(
        !matches!(negotiate_status(Some(accept)), Some(Format::Table { .. })),
        "{accept:?}"
    );
}

/// A whole GET as the gateway classifies it: the first line is the
/// `Accept` header (empty: none), the rest the request target
/// (`/api/v1/services?labelSelector=…&watch=1`). This reaches the query
/// parameters, their validation (resourceVersion, resourceVersionMatch,
/// sendInitialEvents, continue, limit, timeoutSeconds, …), the selectors
/// checked against the kind's fields, and negotiation, in the order the
/// proxy runs them.
pub fn query(data: &[u8]) {
    let Some(s) = text(data) else { return };
    let (accept, target) = s.split_once('\n').unwrap_or(("", s));
    let mut req = Request::builder().method(Method::GET).uri(target);
    if !accept.is_empty() {
        req = req.header(header::ACCEPT, accept);
    }
    // What hyper would refuse before the proxy sees it.
    let Ok(req) = req.body(()) else { return };
    let (parts, ()) = req.into_parts();
    let config = RouteConfig {
        ops: true,
        debug: true,
        nodes: CachedNodes::Only("bj-1".into()),
        reports: true,
    };
    match classify(&parts, &config) {
        Route::Cached(req) => {
            let _ = (req.key_prefix(), req.verb_name());
            let _ = req.format.content_type(req.verb_name() == "watch");
        }
        Route::Rejected(rejection) => {
            assert!(
                rejection.status.code >= 400,
                "{target:?}: {:?}",
                rejection.status
            );
        }
        Route::Report(node) => {
            assert!(
                !node.is_empty() && !node.contains('/'),
                "{target:?}: {node:?}"
            );
        }
        Route::Ops(_) | Route::Passthrough(_) => {}
    }
}
