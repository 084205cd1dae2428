//! Kubernetes API paths, parsed once: `/api/v1/…` and `/apis/<group>/<version>/…`
//! into group, version, namespace, resource, name and whatever follows.

/// An API path's parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiPath<'a> {
    /// `""` for the core group.
    pub group: &'a str,
    /// `v1`, `v1beta1`, ...
    pub version: &'a str,
    /// The deprecated `/watch/` prefix (`/api/v1/watch/nodes`).
    pub legacy_watch: bool,
    /// `namespaces/<ns>/` before the resource.
    pub namespace: Option<&'a str>,
    /// The resource (`services`); for `/api/v1/namespaces/x` itself, `namespaces`.
    pub resource: &'a str,
    /// The object name, when the path has one.
    pub name: Option<&'a str>,
    /// Whether anything follows the name (a subresource such as `status`,
    /// an empty segment from a trailing `/`).
    pub more: bool,
}

impl<'a> ApiPath<'a> {
    /// Parses `path`; `None` when it is not a resource path (discovery,
    /// `/version`, `/healthz`, a group list, ...).
    pub fn parse(path: &'a str) -> Option<ApiPath<'a>> {
        let mut segs = path.strip_prefix('/')?.split('/');
        let (group, version) = match segs.next()? {
            "api" => ("", segs.next()?),
            "apis" => (segs.next()?, segs.next()?),
            _ => return None,
        };
        let mut rest: Vec<&str> = segs.collect();
        let legacy_watch = rest.first() == Some(&"watch");
        if legacy_watch {
            rest.remove(0);
        }
        let (namespace, tail) = match rest.as_slice() {
            ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(*ns), tail),
            tail => (None, tail),
        };
        let (resource, after) = tail.split_first()?;
        if resource.is_empty() {
            return None;
        }
        Some(ApiPath {
            group,
            version,
            legacy_watch,
            namespace,
            resource,
            name: after.first().copied(),
            more: after.len() > 1 || after.first() == Some(&""),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_of_core_and_group_paths() {
        let p = ApiPath::parse("/api/v1/namespaces/default/endpoints/web").unwrap();
        assert_eq!(
            (p.group, p.version, p.namespace, p.resource, p.name, p.more),
            ("", "v1", Some("default"), "endpoints", Some("web"), false)
        );
        let p = ApiPath::parse("/apis/discovery.k8s.io/v1beta1/endpointslices").unwrap();
        assert_eq!(
            (p.group, p.version, p.namespace, p.resource, p.name),
            ("discovery.k8s.io", "v1beta1", None, "endpointslices", None)
        );
        let p = ApiPath::parse("/api/v1/watch/namespaces/x/services").unwrap();
        assert!(p.legacy_watch);
        assert_eq!((p.namespace, p.resource), (Some("x"), "services"));
        let p = ApiPath::parse("/api/v1/nodes/bj-1/status").unwrap();
        assert_eq!((p.resource, p.name, p.more), ("nodes", Some("bj-1"), true));
        assert!(ApiPath::parse("/api/v1/nodes/").unwrap().more);
        let p = ApiPath::parse("/api/v1/namespaces/kube-system").unwrap();
        assert_eq!((p.resource, p.name), ("namespaces", Some("kube-system")));
    }

    #[test]
    fn other_paths_are_not_resources() {
        for path in [
            "/version",
            "/api",
            "/api/v1",
            "/apis/apps",
            "/apis/apps/v1",
            "/healthz",
            "",
        ] {
            assert_eq!(ApiPath::parse(path), None, "{path}");
        }
    }
}
