//! Content negotiation: which representation the client accepts.

/// The representation of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain JSON objects and lists.
    Json,
    /// A server-side `Table` (`meta.k8s.io/<version>`), as `kubectl get` asks.
    Table {
        /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`.
        api_version: &'static str,
    },
}

/// Picks the first media range in `Accept` the proxy can produce: JSON (also
/// for `*/*` and `application/*`) or a Table. Protobuf is not produced yet, so
/// a client offering protobuf and JSON (kube-proxy's default) gets JSON.
/// `None` when nothing offered is producible (406).
pub fn negotiate(accept: Option<&str>) -> Option<Format> {
    let accept = accept.map(str::trim).filter(|a| !a.is_empty());
    let Some(accept) = accept else {
        return Some(Format::Json);
    };
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut as_ = None;
        let mut group = None;
        let mut version = None;
        let mut q_zero = false;
        for p in parts {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            match k.trim() {
                "as" => as_ = Some(v.trim()),
                "g" => group = Some(v.trim()),
                "v" => version = Some(v.trim()),
                "q" => q_zero = v.trim().parse::<f32>().is_ok_and(|q| q <= 0.0),
                _ => {}
            }
        }
        if q_zero {
            continue;
        }
        let json_like = matches!(media.as_str(), "application/json" | "*/*" | "application/*");
        if !json_like {
            continue;
        }
        match (as_, group, version) {
            (None, _, _) => return Some(Format::Json),
            (Some("Table"), Some("meta.k8s.io"), Some("v1")) => {
                return Some(Format::Table {
                    api_version: "meta.k8s.io/v1",
                })
            }
            (Some("Table"), Some("meta.k8s.io"), Some("v1beta1")) => {
                return Some(Format::Table {
                    api_version: "meta.k8s.io/v1beta1",
                })
            }
            _ => continue,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_gets_a_table() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(Some(a)),
            Some(Format::Table {
                api_version: "meta.k8s.io/v1"
            })
        );
    }

    #[test]
    fn kube_proxy_protobuf_preference_gets_json() {
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf, */*")),
            Some(Format::Json)
        );
        assert_eq!(negotiate(None), Some(Format::Json));
    }

    #[test]
    fn protobuf_only_or_unknown_as_is_not_acceptable() {
        assert_eq!(negotiate(Some("application/vnd.kubernetes.protobuf")), None);
        assert_eq!(
            negotiate(Some("application/json;as=Bogus;g=meta.k8s.io;v=v1")),
            None
        );
        assert_eq!(
            negotiate(Some("application/json;as=Table;v=v1beta1;g=meta.k8s.io")),
            Some(Format::Table {
                api_version: "meta.k8s.io/v1beta1"
            })
        );
    }
}
