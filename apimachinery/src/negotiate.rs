//! Content negotiation: which representation of a cached resource a client's
//! `Accept` header asks for, as kube-apiserver's negotiation picks it for the
//! JSON serializer (the first usable media range wins; `q=0` ranges, media
//! types it cannot produce and unknown `as=` conversions are passed over).

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

/// Picks the first media range in `Accept` that can be produced: JSON (also
/// for `*/*` and `application/*`) or a Table. Protobuf is not produced, so a
/// client offering protobuf and JSON (kube-proxy's default) gets JSON.
/// `None` when nothing offered is producible (kube-apiserver's 406).
pub fn negotiate(accept: Option<&str>) -> Option<Format> {
    let accept = accept.map(str::trim).filter(|a| !a.is_empty());
    let Some(accept) = accept else {
        return Some(Format::Json);
    };
    accept.split(',').find_map(media_range)
}

/// What one media range (`application/json;as=Table;v=v1;g=meta.k8s.io`) asks
/// for, if it can be produced.
fn media_range(range: &str) -> Option<Format> {
    let mut parts = range.split(';').map(str::trim);
    let media = parts.next().unwrap_or("").to_ascii_lowercase();
    if !matches!(media.as_str(), "application/json" | "*/*" | "application/*") {
        return None;
    }
    let (mut as_, mut group, mut version) = (None, None, None);
    for p in parts {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        let v = v.trim();
        match k.trim() {
            "as" => as_ = Some(v),
            "g" => group = Some(v),
            "v" => version = Some(v),
            "q" if v.parse::<f32>().is_ok_and(|q| q <= 0.0) => return None,
            _ => {}
        }
    }
    match (as_, group, version) {
        (None, _, _) => Some(Format::Json),
        (Some("Table"), Some("meta.k8s.io"), Some("v1")) => Some(Format::Table {
            api_version: "meta.k8s.io/v1",
        }),
        (Some("Table"), Some("meta.k8s.io"), Some("v1beta1")) => Some(Format::Table {
            api_version: "meta.k8s.io/v1beta1",
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,\
                           application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    const V1: Option<Format> = Some(Format::Table {
        api_version: "meta.k8s.io/v1",
    });
    const V1BETA1: Option<Format> = Some(Format::Table {
        api_version: "meta.k8s.io/v1beta1",
    });

    #[test]
    fn kubectl_gets_a_table() {
        assert_eq!(negotiate(Some(KUBECTL)), V1);
        assert_eq!(
            negotiate(Some("application/json;as=Table;v=v1beta1;g=meta.k8s.io")),
            V1BETA1
        );
        assert_eq!(
            negotiate(Some(
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,\
                 application/json;as=Table;v=v1;g=meta.k8s.io"
            )),
            V1
        );
    }

    #[test]
    fn the_first_usable_range_wins() {
        assert_eq!(
            negotiate(Some(
                "application/json, application/json;as=Table;v=v1;g=meta.k8s.io"
            )),
            Some(Format::Json)
        );
        assert_eq!(
            negotiate(Some(
                "application/json;as=Table;v=v1;g=meta.k8s.io;q=0,application/json"
            )),
            Some(Format::Json)
        );
    }

    #[test]
    fn kube_proxy_protobuf_preference_gets_json() {
        for accept in [
            "application/vnd.kubernetes.protobuf, */*",
            "application/vnd.kubernetes.protobuf,application/json",
        ] {
            assert_eq!(negotiate(Some(accept)), Some(Format::Json), "{accept}");
        }
        assert_eq!(negotiate(None), Some(Format::Json));
        assert_eq!(negotiate(Some("")), Some(Format::Json));
    }

    #[test]
    fn protobuf_only_or_unknown_as_is_not_acceptable() {
        assert_eq!(negotiate(Some("application/vnd.kubernetes.protobuf")), None);
        assert_eq!(
            negotiate(Some("application/json;as=Bogus;g=meta.k8s.io;v=v1")),
            None
        );
        assert_eq!(
            negotiate(Some("application/json;as=Table;v=v2;g=meta.k8s.io")),
            None
        );
    }
}
