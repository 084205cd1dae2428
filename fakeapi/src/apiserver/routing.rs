//! URL paths, exactly as kube-apiserver lays them out.

use super::resource::{ResourceType, Resources};

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// `/`: the list of served paths.
    Root,
    /// `/version`.
    Version,
    /// `/healthz`, `/livez`, `/readyz`.
    Health,
    /// `/debug/egress`: what the server has sent (`super::egress`), a path
    /// no Kubernetes client uses.
    DebugEgress,
    /// `/api`: APIVersions.
    CoreVersions,
    /// `/apis`: APIGroupList.
    Groups,
    /// `/apis/<group>`: APIGroup.
    Group(String),
    /// `/api/<v>` or `/apis/<group>/<v>`: APIResourceList.
    Resources { group: String, version: String },
    /// A collection: `.../<plural>` or `.../namespaces/<ns>/<plural>`.
    Collection {
        /// Resource index.
        rt: usize,
        /// The namespace of a namespaced request.
        namespace: Option<String>,
        /// Reached through the legacy `/watch/` prefix.
        watch: bool,
    },
    /// One object: `.../<plural>/<name>[/status]`.
    Object {
        /// Resource index.
        rt: usize,
        /// The namespace of a namespaced type.
        namespace: Option<String>,
        /// `metadata.name`.
        name: String,
        /// The `/status` subresource.
        status: bool,
        /// Reached through the legacy `/watch/` prefix.
        watch: bool,
    },
    /// A TokenRequest: `POST .../serviceaccounts/<name>/token`.
    Token {
        /// The service account's namespace.
        namespace: String,
        /// The service account.
        name: String,
    },
    /// Nothing is served here.
    NotFound,
}

/// Route `path` (without query) against the served resources.
pub(crate) fn route(resources: &Resources, path: &str) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        [] => Route::Root,
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["debug", "egress"] => Route::DebugEgress,
        ["api"] => Route::CoreVersions,
        ["api", version, rest @ ..] => within(resources, "", version, rest),
        ["apis"] => Route::Groups,
        ["apis", group] if !resources.versions_of(group).is_empty() => {
            Route::Group((*group).to_owned())
        }
        ["apis", group, version, rest @ ..] => within(resources, group, version, rest),
        _ => Route::NotFound,
    }
}

/// Route the part after `/api/<v>` or `/apis/<g>/<v>`.
fn within(resources: &Resources, group: &str, version: &str, rest: &[&str]) -> Route {
    if !resources.versions_of(group).contains(&version) {
        return Route::NotFound;
    }
    let (watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let find = |plural: &str| resources.by_path(group, version, plural);
    match rest {
        [] if !watch => Route::Resources {
            group: group.to_owned(),
            version: version.to_owned(),
        },
        ["namespaces", ns, plural, tail @ ..] if find(plural).is_some_and(|rt| rt.namespaced) => {
            let Some(rt) = find(plural) else {
                return Route::NotFound;
            };
            object_or_collection(rt, Some(ns), tail, watch)
        }
        [plural, tail @ ..] => match find(plural) {
            Some(rt) if rt.namespaced && tail.is_empty() => Route::Collection {
                rt: rt.idx,
                namespace: None,
                watch,
            },
            Some(rt) if !rt.namespaced => object_or_collection(rt, None, tail, watch),
            _ => Route::NotFound,
        },
        _ => Route::NotFound,
    }
}

fn object_or_collection(
    rt: &ResourceType,
    namespace: Option<&str>,
    tail: &[&str],
    watch: bool,
) -> Route {
    let namespace = namespace.map(str::to_owned);
    match tail {
        [] => Route::Collection {
            rt: rt.idx,
            namespace,
            watch,
        },
        [name] => Route::Object {
            rt: rt.idx,
            namespace,
            name: (*name).to_owned(),
            status: false,
            watch,
        },
        [name, "token"] if rt.plural == "serviceaccounts" && !watch => Route::Token {
            namespace: namespace.unwrap_or_default(),
            name: (*name).to_owned(),
        },
        [name, "status"] if rt.has_status && !watch => Route::Object {
            rt: rt.idx,
            namespace,
            name: (*name).to_owned(),
            status: true,
            watch,
        },
        _ => Route::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::super::version::Profile;
    use super::*;

    #[test]
    fn paths() {
        let r = Resources::new(&Profile::v1_20("v1"));
        let idx = |id: &str| r.by_id(id).unwrap().idx;
        assert_eq!(route(&r, "/api"), Route::CoreVersions);
        assert_eq!(route(&r, "/debug/egress"), Route::DebugEgress);
        assert_eq!(
            route(&r, "/api/v1"),
            Route::Resources {
                group: String::new(),
                version: "v1".into()
            }
        );
        assert_eq!(route(&r, "/api/v2"), Route::NotFound);
        assert_eq!(
            route(&r, "/api/v1/services"),
            Route::Collection {
                rt: idx("services"),
                namespace: None,
                watch: false
            }
        );
        assert_eq!(
            route(&r, "/api/v1/watch/namespaces/default/endpoints"),
            Route::Collection {
                rt: idx("endpoints"),
                namespace: Some("default".into()),
                watch: true
            }
        );
        assert_eq!(
            route(&r, "/api/v1/namespaces/default/services/web/status"),
            Route::Object {
                rt: idx("services"),
                namespace: Some("default".into()),
                name: "web".into(),
                status: true,
                watch: false
            }
        );
        assert_eq!(
            route(&r, "/api/v1/namespaces/default"),
            Route::Object {
                rt: idx("namespaces"),
                namespace: None,
                name: "default".into(),
                status: false,
                watch: false
            }
        );
        assert_eq!(
            route(&r, "/api/v1/namespaces/kube-system/status"),
            Route::Object {
                rt: idx("namespaces"),
                namespace: None,
                name: "kube-system".into(),
                status: true,
                watch: false
            }
        );
        assert_eq!(
            route(&r, "/api/v1/nodes/bj-1"),
            Route::Object {
                rt: idx("nodes"),
                namespace: None,
                name: "bj-1".into(),
                status: false,
                watch: false
            }
        );
        assert_eq!(route(&r, "/api/v1/services/web"), Route::NotFound);
        assert_eq!(
            route(&r, "/api/v1/namespaces/default/nodes"),
            Route::NotFound
        );
        assert_eq!(
            route(&r, "/api/v1/namespaces/default/configmaps/x/status"),
            Route::NotFound
        );
        assert_eq!(
            route(&r, "/apis/discovery.k8s.io/v1beta1/endpointslices"),
            Route::NotFound
        );
        assert_eq!(
            route(
                &r,
                "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
            ),
            Route::Collection {
                rt: idx("endpointslices"),
                namespace: Some("default".into()),
                watch: false
            }
        );
        assert_eq!(
            route(&r, "/apis/discovery.k8s.io"),
            Route::Group("discovery.k8s.io".into())
        );
        assert_eq!(route(&r, "/apis/apps"), Route::Group("apps".into()));
        assert_eq!(route(&r, "/apis/batch"), Route::NotFound);
    }
}
