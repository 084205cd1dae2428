//! Content negotiation: which representation of a cached resource a client's
//! `Accept` header asks for, as kube-apiserver's negotiation picks it: the
//! media ranges ordered by quality, then specific types before wildcards
//! (goautoneg), and the first one that can be produced wins; `q=0` ranges,
//! media types that cannot be produced (YAML, CBOR) and unknown `as=`
//! conversions are passed over. `*/*` means JSON, the server's first type.

use crate::{protobuf, table::IncludeObject};

/// The representation of a response: what the `Accept` header (and, for a
/// Table, the `includeObject` parameter) asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain JSON objects and lists.
    Json,
    /// Kubernetes protobuf (`application/vnd.kubernetes.protobuf`).
    Protobuf,
    /// A server-side `Table` (`meta.k8s.io/<version>`), as `kubectl get` asks.
    Table {
        /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`.
        api_version: &'static str,
        /// What each row carries as its `object`: the request's
        /// `includeObject` ([`Format::including`]); negotiation alone gives
        /// kube-apiserver's default, `Metadata`.
        include: IncludeObject,
    },
    /// Metadata only (`as=PartialObjectMetadata` or, for a list,
    /// `as=PartialObjectMetadataList`, `meta.k8s.io/v1`), as metadata
    /// informers ask; JSON only.
    Metadata {
        /// `PartialObjectMetadataList` was asked for.
        list: bool,
    },
}

/// The encoding objects travel in: what a cache encodes once and shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// `application/json`.
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

impl Format {
    /// A Table whose rows carry `include` (other formats are unchanged).
    pub fn including(self, include: IncludeObject) -> Format {
        match self {
            Format::Table { api_version, .. } => Format::Table {
                api_version,
                include,
            },
            other => other,
        }
    }

    /// The encoding objects travel in (Tables and metadata are JSON).
    pub fn wire(self) -> Wire {
        match self {
            Format::Protobuf => Wire::Protobuf,
            Format::Json | Format::Table { .. } | Format::Metadata { .. } => Wire::Json,
        }
    }

    /// The `Content-Type` of a response (`watch`: of a watch stream).
    pub fn content_type(self, watch: bool) -> &'static str {
        match (self.wire(), watch) {
            (Wire::Json, _) => "application/json",
            (Wire::Protobuf, false) => protobuf::MEDIA_TYPE,
            (Wire::Protobuf, true) => protobuf::WATCH_MEDIA_TYPE,
        }
    }
}

/// Picks the best media range in `Accept` that can be produced: JSON (also
/// for `*/*` and `application/*`), protobuf, or a Table (JSON only).
/// `None` when nothing offered is producible (kube-apiserver's 406).
pub fn negotiate(accept: Option<&str>) -> Option<Format> {
    best(accept, |r| r.format())
}

/// The best representation in `Accept` other than protobuf, for an answer
/// that cannot be written in protobuf; `None` when protobuf is all the
/// client takes.
pub fn negotiate_except_protobuf(accept: Option<&str>) -> Option<Format> {
    best(accept, |r| r.format().filter(|f| *f != Format::Protobuf))
}

/// The representation of an error `Status` for this `Accept`: JSON or
/// protobuf, passing over `as=` ranges (a Status is not a Table). `None` when
/// no range fits: kube-apiserver then writes indented JSON.
pub fn negotiate_status(accept: Option<&str>) -> Option<Format> {
    best(accept, |r| r.as_.is_none().then(|| r.format()).flatten())
}

/// Whether `accept` takes a plain (not `as=`) answer in `wire` at all, not
/// only as its first choice: a range naming it, or a wildcard (which takes
/// any type). No `Accept` takes JSON. For an answer kept in one encoding.
pub fn accepts(accept: Option<&str>, wire: Wire) -> bool {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return wire == Wire::Json;
    };
    accept.split(',').filter_map(Range::parse).any(|r| {
        r.as_.is_none()
            && match r.media.as_str() {
                "*/*" | "application/*" => true,
                "application/json" => wire == Wire::Json,
                "application/vnd.kubernetes.protobuf" => wire == Wire::Protobuf,
                _ => false,
            }
    })
}

/// The first range, in goautoneg's order, for which `pick` gives a format.
fn best(accept: Option<&str>, pick: impl Fn(&Range<'_>) -> Option<Format>) -> Option<Format> {
    let accept = accept.map(str::trim).filter(|a| !a.is_empty());
    let Some(accept) = accept else {
        return Some(Format::Json);
    };
    let mut ranges: Vec<Range<'_>> = accept.split(',').filter_map(Range::parse).collect();
    // goautoneg's order: quality first, then specific types before wildcards
    // (a stable sort keeps the client's order among equals).
    ranges.sort_by(|a, b| {
        b.q.total_cmp(&a.q)
            .then_with(|| a.wildcard_type().cmp(&b.wildcard_type()))
            .then_with(|| a.wildcard_subtype().cmp(&b.wildcard_subtype()))
    });
    ranges.iter().find_map(pick)
}

/// One media range of an `Accept` header.
struct Range<'a> {
    media: String,
    q: f32,
    as_: Option<&'a str>,
    group: Option<&'a str>,
    version: Option<&'a str>,
}

impl<'a> Range<'a> {
    /// Parses `type/subtype;param=value...`; `None` when refused (`q=0`) or malformed.
    fn parse(range: &'a str) -> Option<Range<'a>> {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        if !media.contains('/') {
            return None;
        }
        let mut r = Range {
            media,
            q: 1.0,
            as_: None,
            group: None,
            version: None,
        };
        for p in parts {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let v = v.trim();
            match k.trim() {
                "as" => r.as_ = Some(v),
                "g" => r.group = Some(v),
                "v" => r.version = Some(v),
                "q" => r.q = v.parse::<f32>().unwrap_or(1.0),
                _ => {}
            }
        }
        (r.q > 0.0).then_some(r)
    }

    fn wildcard_type(&self) -> bool {
        self.media.starts_with("*/")
    }

    fn wildcard_subtype(&self) -> bool {
        self.media.ends_with("/*")
    }

    /// What this range asks for, if it can be produced.
    fn format(&self) -> Option<Format> {
        let protobuf = match self.media.as_str() {
            "application/json" | "*/*" | "application/*" => false,
            "application/vnd.kubernetes.protobuf" => true,
            _ => return None,
        };
        match (self.as_, self.group, self.version) {
            (None, _, _) if protobuf => Some(Format::Protobuf),
            (None, _, _) => Some(Format::Json),
            // Tables are served as JSON only.
            (Some("Table"), Some("meta.k8s.io"), Some("v1")) if !protobuf => Some(Format::Table {
                api_version: "meta.k8s.io/v1",
                include: IncludeObject::default(),
            }),
            (Some("Table"), Some("meta.k8s.io"), Some("v1beta1")) if !protobuf => {
                Some(Format::Table {
                    api_version: "meta.k8s.io/v1beta1",
                    include: IncludeObject::default(),
                })
            }
            (Some("PartialObjectMetadata"), Some("meta.k8s.io"), Some("v1")) if !protobuf => {
                Some(Format::Metadata { list: false })
            }
            (Some("PartialObjectMetadataList"), Some("meta.k8s.io"), Some("v1")) if !protobuf => {
                Some(Format::Metadata { list: true })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,\
                           application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    const V1: Option<Format> = Some(Format::Table {
        api_version: "meta.k8s.io/v1",
        include: IncludeObject::Metadata,
    });
    const V1BETA1: Option<Format> = Some(Format::Table {
        api_version: "meta.k8s.io/v1beta1",
        include: IncludeObject::Metadata,
    });

    #[test]
    fn what_an_accept_header_takes_at_all() {
        let kubelet = Some("application/vnd.kubernetes.protobuf,application/json");
        assert!(accepts(kubelet, Wire::Protobuf) && accepts(kubelet, Wire::Json));
        assert!(!accepts(Some("application/json"), Wire::Protobuf));
        assert!(!accepts(Some(KUBECTL), Wire::Protobuf));
        assert!(accepts(Some(KUBECTL), Wire::Json), "its plain JSON range");
        assert!(!accepts(
            Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
            Wire::Json
        ));
        assert!(!accepts(Some("application/json;q=0"), Wire::Json));
        assert!(accepts(Some("*/*"), Wire::Protobuf));
        assert!(accepts(None, Wire::Json) && !accepts(None, Wire::Protobuf));
    }

    #[test]
    fn kubectl_gets_a_table() {
        assert_eq!(negotiate(Some(KUBECTL)), V1);
        assert_eq!(
            negotiate(Some("application/json;as=Table;v=v1beta1;g=meta.k8s.io")),
            V1BETA1
        );
        assert_eq!(
            negotiate(Some(
                "application/json;as=PartialObjectMetadataList;v=v2;g=meta.k8s.io,\
                 application/json;as=Table;v=v1;g=meta.k8s.io"
            )),
            V1,
            "a conversion that cannot be produced is passed over"
        );
    }

    #[test]
    fn metadata_informers_get_partial_object_metadata() {
        // What kube-rs (and client-go's metadata client) send.
        assert_eq!(
            negotiate(Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            )),
            Some(Format::Metadata { list: true })
        );
        assert_eq!(
            negotiate(Some(
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
            )),
            Some(Format::Metadata { list: false })
        );
        // In protobuf, or another version: not produced; a JSON fallback is.
        assert_eq!(
            negotiate(Some(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
            )),
            Some(Format::Json)
        );
        assert_eq!(
            negotiate(Some(
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"
            )),
            None
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
    fn kube_proxy_gets_protobuf_and_json_clients_json() {
        for accept in [
            "application/vnd.kubernetes.protobuf, */*",
            "application/vnd.kubernetes.protobuf,application/json",
            "application/vnd.kubernetes.protobuf",
            "application/json;q=0.5, application/vnd.kubernetes.protobuf",
        ] {
            assert_eq!(negotiate(Some(accept)), Some(Format::Protobuf), "{accept}");
        }
        for accept in [
            "application/json, */*",
            "*/*",
            "application/json,application/vnd.kubernetes.protobuf",
            "application/vnd.kubernetes.protobuf;q=0.5, application/json",
            "*/*, application/vnd.kubernetes.protobuf;q=0.9",
        ] {
            assert_eq!(negotiate(Some(accept)), Some(Format::Json), "{accept}");
        }
        assert_eq!(negotiate(None), Some(Format::Json));
        assert_eq!(negotiate(Some("")), Some(Format::Json));
    }

    #[test]
    fn specific_types_come_before_wildcards_of_the_same_quality() {
        assert_eq!(
            negotiate(Some("*/*, application/vnd.kubernetes.protobuf")),
            Some(Format::Protobuf)
        );
        assert_eq!(
            negotiate(Some("application/*;q=0.8, text/html")),
            Some(Format::Json)
        );
    }

    #[test]
    fn unproducible_types_and_unknown_as_are_not_acceptable() {
        assert_eq!(negotiate(Some("application/yaml")), None);
        assert_eq!(
            negotiate(Some(
                "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io"
            )),
            None,
            "Tables are JSON only"
        );
        assert_eq!(
            negotiate(Some("application/json;as=Bogus;g=meta.k8s.io;v=v1")),
            None
        );
        assert_eq!(
            negotiate(Some("application/json;as=Table;v=v2;g=meta.k8s.io")),
            None
        );
    }

    #[test]
    fn errors_take_the_best_plain_range() {
        assert_eq!(negotiate_status(Some(KUBECTL)), Some(Format::Json));
        assert_eq!(
            negotiate_status(Some("application/vnd.kubernetes.protobuf, */*")),
            Some(Format::Protobuf)
        );
        assert_eq!(
            negotiate_status(Some("application/json;as=Table;v=v1;g=meta.k8s.io")),
            None,
            "a Table-only client gets the indented fallback"
        );
        assert_eq!(negotiate_status(None), Some(Format::Json));
    }
}
