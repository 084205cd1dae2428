//! LIST: one page of a consistent snapshot, encoded straight into one buffer.
//!
//! Pages after the first are read at the resourceVersion of the first page
//! (carried in the continue token), reconstructed from the event history; a
//! token older than the history gets kube-apiserver's `410 Expired` with a
//! fresh "inconsistent" token (`rv: -1`).
//!
//! A page is read once and then encoded as the list (straight into one
//! buffer) or, for `kubectl get`, as a Table (`super::table`).

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sitegrid_apimachinery::protobuf::{self, Kind};
use sitegrid_apimachinery::Status;

use super::filter::Filter;
use super::object::{push_json_str, Obj};
use super::query::{list_options_invalid, ListOptions, ReadAt};
use super::resource::ResourceType;
use super::store::Store;

/// The only continue token version.
const TOKEN_VERSION: &str = "meta.k8s.io/v1";
/// Prefix of every bad-token message.
const BAD_TOKEN: &str = "invalid continue token: continue key is not valid: ";

/// What a continue token holds (kube-apiserver's own layout).
#[derive(Debug, Serialize, Deserialize)]
struct Token {
    v: String,
    rv: i64,
    start: String,
}

/// Encode a token: base64url without padding of its JSON.
fn encode_token(rv: i64, start: &str) -> String {
    let token = Token {
        v: TOKEN_VERSION.into(),
        rv,
        start: start.into(),
    };
    // A struct of strings and an integer always serializes.
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).unwrap_or_default())
}

/// Decode and validate a token, with the apiserver's 400 messages.
fn decode_token(raw: &str) -> Result<Token, Status> {
    let bytes = URL_SAFE_NO_PAD
        .decode(raw.trim_end_matches('='))
        .map_err(|e| {
            let at = match e {
                base64::DecodeError::InvalidByte(i, _)
                | base64::DecodeError::InvalidLastSymbol(i, _) => i,
                base64::DecodeError::InvalidLength(n) => n.saturating_sub(1),
                base64::DecodeError::InvalidPadding => raw.len().saturating_sub(1),
            };
            Status::bad_request(format!("{BAD_TOKEN}illegal base64 data at input byte {at}"))
        })?;
    let token: Token = serde_json::from_slice(&bytes)
        .map_err(|e| Status::bad_request(format!("{BAD_TOKEN}{e}")))?;
    if token.v != TOKEN_VERSION {
        return Err(Status::bad_request(format!(
            "{BAD_TOKEN}server does not recognize this encoded version {:?}",
            token.v
        )));
    }
    if token.rv == 0 {
        return Err(Status::bad_request(format!(
            "{BAD_TOKEN}incorrect encoded start resourceVersion (version {TOKEN_VERSION})"
        )));
    }
    if token.start.starts_with('/') || token.start.contains("..") {
        return Err(Status::bad_request(format!("{BAD_TOKEN}{}", token.start)));
    }
    Ok(token)
}

/// Where a page starts and which state it reads.
struct Plan {
    /// Read the state at this resourceVersion (`None`: the current one).
    at: Option<u64>,
    /// First key relative to the request's prefix, empty for the beginning.
    start: String,
    /// Maximum items, 0 = all.
    limit: usize,
    /// Why a snapshot might be too old, to word the 410.
    expired: Expiry,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Expiry {
    Never,
    Continue,
    Exact,
}

fn plan(opts: &ListOptions, current: u64) -> Result<Plan, Status> {
    if !opts.continue_token.is_empty() {
        match (
            opts.resource_version.is_empty(),
            opts.resource_version_match.is_empty(),
        ) {
            (true, true) => {}
            (false, true) => {
                return Err(Status::bad_request(
                    "specifying resource version is not allowed when using continue",
                ))
            }
            _ => {
                return Err(list_options_invalid(vec![
                    (
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ),
                    (
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    ),
                ]))
            }
        }
        let token = decode_token(&opts.continue_token)?;
        let at = u64::try_from(token.rv).ok();
        return Ok(Plan {
            at,
            start: token.start,
            limit: opts.limit,
            expired: Expiry::Continue,
        });
    }
    let (at, limit, expired) = match opts.read_at()? {
        ReadAt::Latest => (None, opts.limit, Expiry::Never),
        // Served by the watch cache in kube-apiserver, which ignores `limit`.
        ReadAt::Any => (None, 0, Expiry::Never),
        ReadAt::NotOlderThan(n) if n > current => {
            return Err(Status::too_large_resource_version(n, current));
        }
        ReadAt::NotOlderThan(_) => (None, opts.limit, Expiry::Never),
        ReadAt::Exact(n) if n > current => {
            return Err(Status::internal(
                "etcdserver: mvcc: required revision is a future revision",
            ));
        }
        ReadAt::Exact(n) => (Some(n), opts.limit, Expiry::Exact),
    };
    Ok(Plan {
        at,
        start: String::new(),
        limit,
        expired,
    })
}

/// Read one LIST page of `rt` through `filter`; the caller encodes it as a
/// list ([`Page::to_json`]) or a Table.
pub(crate) fn list(
    store: &Store,
    rt: &ResourceType,
    filter: &Filter,
    opts: &ListOptions,
) -> Result<Page, Status> {
    let prefix = filter.key_prefix();
    let (rv, snapshot) = store.read(|s| {
        let plan = plan(opts, s.rv)?;
        let at = plan.at.unwrap_or(s.rv);
        let start = if plan.start.is_empty() {
            String::new()
        } else {
            format!("{prefix}{}", plan.start)
        };
        match s.snapshot(rt, at, &prefix, &start) {
            Some(objs) => Ok((at, (objs, plan.limit))),
            None if plan.expired == Expiry::Continue => {
                let mut st = Status::expired(
                    "The provided continue parameter is too old to display a consistent list result. \
                     You can start a new list without the continue parameter, or use the continue token in \
                     this response to retrieve the remainder of the results. Continuing with the provided \
                     token results in an inconsistent list - objects that were created, modified, or deleted \
                     between the time the first chunk was returned and now may show up in the list.",
                );
                st.metadata.continue_ = Some(encode_token(-1, &plan.start));
                Err(st)
            }
            None => Err(Status::expired("The resourceVersion for the provided list is too old.")),
        }
    })?;
    let (objs, limit) = snapshot;
    Ok(Page::pick(filter, &prefix, rv, objs, limit))
}

/// One LIST page: the matching items and the list metadata that goes with them.
pub(crate) struct Page {
    /// The resourceVersion the page was read at (every page of a list has the first's).
    pub rv: u64,
    /// The token for the next page, when there is one.
    pub continue_token: Option<String>,
    /// How many objects follow this page; only without selectors, as the apiserver.
    pub remaining: Option<usize>,
    /// The page's objects, in key order.
    pub items: Vec<Arc<Obj>>,
}

impl Page {
    /// Pick the page out of the snapshot `objs`: the first `limit` (0 = all)
    /// objects `filter` matches, and the metadata that depends on them.
    fn pick(filter: &Filter, prefix: &str, rv: u64, objs: Vec<Arc<Obj>>, limit: usize) -> Page {
        let total = objs.len();
        let mut items = Vec::with_capacity(if limit > 0 { limit } else { total });
        let mut next: Option<usize> = None;
        for (i, obj) in objs.into_iter().enumerate() {
            if !filter.matches(&obj) {
                continue;
            }
            if limit > 0 && items.len() == limit {
                next = Some(i);
                break;
            }
            items.push(obj);
        }
        let mut page = Page {
            rv,
            continue_token: None,
            remaining: None,
            items,
        };
        if let (Some(i), Some(last)) = (next, page.items.last()) {
            // The token resumes just after the last item sent, like etcd's key + "\0".
            let start = format!(
                "{}\u{0}",
                last.key.strip_prefix(prefix).unwrap_or(&last.key)
            );
            page.continue_token = Some(encode_token(rv as i64, &start));
            if !filter.has_selectors() {
                page.remaining = Some(total - i);
            }
        }
        page
    }

    /// The list as kube-apiserver sends it, written straight into one buffer.
    pub fn to_json(&self, rt: &ResourceType) -> Bytes {
        let size: usize = self.items.iter().map(|o| o.json.len() + 1).sum();
        let mut out = Vec::with_capacity(size + 512);
        out.extend_from_slice(b"{\"kind\":");
        push_json_str(&rt.list_kind(), &mut out);
        out.extend_from_slice(b",\"apiVersion\":");
        push_json_str(&rt.api_version, &mut out);
        out.extend_from_slice(b",\"metadata\":{\"resourceVersion\":\"");
        out.extend_from_slice(self.rv.to_string().as_bytes());
        out.push(b'"');
        if let Some(token) = &self.continue_token {
            out.extend_from_slice(b",\"continue\":");
            push_json_str(token, &mut out);
        }
        if let Some(remaining) = self.remaining {
            out.extend_from_slice(b",\"remainingItemCount\":");
            out.extend_from_slice(remaining.to_string().as_bytes());
        }
        out.extend_from_slice(b"},\"items\":[");
        for (n, obj) in self.items.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&obj.json);
        }
        out.extend_from_slice(b"]}\n");
        Bytes::from(out)
    }

    /// The list on the protobuf wire, its items `kind`'s messages (each
    /// encoded once per object version and shared, as `json` is).
    pub fn to_protobuf(&self, rt: &ResourceType, kind: Kind) -> Result<Bytes, Status> {
        let items = self
            .items
            .iter()
            .map(|o| o.message(kind))
            .collect::<Result<Vec<_>, _>>()?;
        let meta = protobuf::list_meta(
            &self.rv.to_string(),
            self.continue_token.as_deref().unwrap_or(""),
            self.remaining.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
        );
        Ok(protobuf::list(
            &rt.api_version,
            &rt.list_kind(),
            &meta,
            items.iter().map(|m| &m[..]),
        ))
    }

    /// The `ListMeta` as a value, keys in the apiserver's order (what a Table's
    /// `metadata` is).
    pub fn list_meta(&self) -> Value {
        let mut meta = Map::new();
        meta.insert("resourceVersion".into(), self.rv.to_string().into());
        if let Some(token) = &self.continue_token {
            meta.insert("continue".into(), token.clone().into());
        }
        if let Some(remaining) = self.remaining {
            meta.insert("remainingItemCount".into(), remaining.into());
        }
        Value::Object(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_round_trip_and_errors() {
        let t = encode_token(419, "bars-echo\u{0}");
        assert_eq!(
            t,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NDE5LCJzdGFydCI6ImJhcnMtZWNob1x1MDAwMCJ9"
        );
        let d = decode_token(&t).unwrap();
        assert_eq!((d.rv, d.start.as_str()), (419, "bars-echo\u{0}"));
        assert_eq!(
            decode_token("bogus").unwrap_err().message,
            "invalid continue token: continue key is not valid: illegal base64 data at input byte 4"
        );
        let v2 = URL_SAFE_NO_PAD.encode(br#"{"v":"meta.k8s.io/v2","rv":1,"start":"a"}"#);
        assert!(decode_token(&v2)
            .unwrap_err()
            .message
            .ends_with("server does not recognize this encoded version \"meta.k8s.io/v2\""));
        let rv0 = URL_SAFE_NO_PAD.encode(br#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#);
        assert!(decode_token(&rv0)
            .unwrap_err()
            .message
            .ends_with("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"));
        let up = URL_SAFE_NO_PAD.encode(br#"{"v":"meta.k8s.io/v1","rv":3,"start":"../x"}"#);
        assert!(decode_token(&up).unwrap_err().message.ends_with("../x"));
    }
}
