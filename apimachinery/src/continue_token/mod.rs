//! kube-apiserver's list `continue` token (etcd3 store, Kubernetes 1.20):
//! base64url without padding (Go `RawURLEncoding`) of the JSON
//! `{"v":"meta.k8s.io/v1","rv":419,"start":"bars-echo\u0000"}`.
//!
//! Encoding reproduces Go's `json.Marshal` byte for byte, so our tokens are
//! the apiserver's. Decoding mirrors `decodeContinue`: Go's base64 decoder
//! (same error offsets), the JSON (serde_json: a malformed token is a 400
//! with the apiserver's prefix and serde's description of the fault), then
//! the version, resourceVersion and path-traversal checks, worded as the
//! apiserver words them.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use serde::Deserialize;

use crate::selector::go_quote;

/// The only token version kube-apiserver 1.20 writes or accepts.
const VERSION: &str = "meta.k8s.io/v1";

/// A decoded continue token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueToken {
    /// The snapshot revision later pages are read at; `-1` in the token
    /// handed out with a `410 Expired` (continue without a snapshot).
    pub rv: i64,
    /// The storage key to resume from, relative to the list's prefix, e.g.
    /// `bars-echo\u{0}` or, for an all-namespaces list, `default/bars-echo\u{0}`.
    pub start: String,
}

/// Why a continue token was rejected; `Display` is the full apiserver
/// message of the `400 BadRequest`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContinueError {
    /// Not base64url-without-padding; the offset of the first bad byte as Go reports it.
    #[error("invalid continue token: continue key is not valid: illegal base64 data at input byte {offset}")]
    Base64 {
        /// Byte offset into the token.
        offset: usize,
    },
    /// Not JSON, or JSON of the wrong shape; serde_json's description.
    #[error("invalid continue token: continue key is not valid: {0}")]
    Json(String),
    /// `v` is not `meta.k8s.io/v1`.
    #[error("invalid continue token: continue key is not valid: server does not recognize this encoded version {}", go_quote(.0))]
    UnknownVersion(String),
    /// `rv` is 0 (or missing).
    #[error("invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")]
    ZeroResourceVersion,
    /// `start` is empty (or missing).
    #[error("invalid continue token: continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")]
    EmptyStart,
    /// `start` is not a clean path (`../x`, `a//b`, ...): it could escape the list's prefix.
    #[error("invalid continue token: continue key is not valid: {0}")]
    UnsafeStart(String),
}

impl ContinueToken {
    /// The token kube-apiserver would hand out for this position.
    pub fn encode(&self) -> String {
        let mut json = format!(r#"{{"v":"{VERSION}","rv":{},"start":"#, self.rv);
        push_go_json_string(&mut json, &self.start);
        json.push('}');
        URL_SAFE_NO_PAD.encode(json)
    }

    /// Decodes and checks a token like kube-apiserver's `decodeContinue`.
    ///
    /// `start` comes back as the apiserver would use it: a leading `/` is
    /// dropped (Go re-roots the key, cleans it, then strips the root).
    pub fn decode(token: &str) -> Result<ContinueToken, ContinueError> {
        let data = go_raw_url_decode(token.as_bytes())
            .map_err(|offset| ContinueError::Base64 { offset })?;
        let fields = decode_fields(&data)?;
        if fields.v != VERSION {
            return Err(ContinueError::UnknownVersion(fields.v));
        }
        if fields.rv == 0 {
            return Err(ContinueError::ZeroResourceVersion);
        }
        if fields.start.is_empty() {
            return Err(ContinueError::EmptyStart);
        }
        // Defend against path traversal like Go: `path.Clean("/" + start)`
        // must leave the key unchanged.
        let key = if fields.start.starts_with('/') {
            fields.start.clone()
        } else {
            format!("/{}", fields.start)
        };
        let cleaned = clean_rooted_path(&key);
        if cleaned != key {
            return Err(ContinueError::UnsafeStart(fields.start));
        }
        Ok(ContinueToken {
            rv: fields.rv,
            start: cleaned[1..].to_string(),
        })
    }
}

/// The apiserver's `continueToken` struct; absent (or `null`) fields are
/// zero, unknown ones ignored, as `json.Unmarshal` leaves them.
#[derive(Debug, Default, Deserialize)]
struct Fields {
    #[serde(default, deserialize_with = "or_zero")]
    v: String,
    #[serde(default, deserialize_with = "or_zero")]
    rv: i64,
    #[serde(default, deserialize_with = "or_zero")]
    start: String,
}

/// The token's JSON: an object, or `null` for the empty struct (as in Go).
fn decode_fields(data: &[u8]) -> Result<Fields, ContinueError> {
    let json = |e: serde_json::Error| ContinueError::Json(e.to_string());
    match serde_json::from_slice::<serde_json::Value>(data).map_err(json)? {
        serde_json::Value::Null => Ok(Fields::default()),
        object @ serde_json::Value::Object(_) => Fields::deserialize(object).map_err(json),
        other => Err(ContinueError::Json(format!(
            "a continue token is a JSON object, not {other}"
        ))),
    }
}

/// A field that may be `null`: Go leaves the zero value.
fn or_zero<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The `start` for the page after `last_key`: `last_key + "\u{0}"`, the
/// smallest key strictly greater than it.
pub fn next_start(last_key: &str) -> String {
    format!("{last_key}\u{0}")
}

/// Go's `encoding/json` string encoding with HTML escaping (what
/// `json.Marshal` does): `<`, `>`, `&`, U+2028, U+2029 and control
/// characters become `\u00XX` (lower-case hex), except `\n`, `\r`, `\t`.
fn push_go_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{0}'..='\u{1f}' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Go's `path.Clean` for a path that starts with `/`.
fn clean_rooted_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Go's `base64.RawURLEncoding.DecodeString` (non-strict: stray trailing
/// bits are ignored, `\r` and `\n` are skipped). The error is the offset Go's
/// `CorruptInputError` reports.
fn go_raw_url_decode(src: &[u8]) -> Result<Vec<u8>, usize> {
    fn value(c: u8) -> Option<u8> {
        match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'-' => Some(62),
            b'_' => Some(63),
            _ => None,
        }
    }
    let mut out = Vec::with_capacity(src.len() * 3 / 4);
    let mut si = 0;
    while si < src.len() {
        // One quantum: up to four sextets.
        let mut sextets = [0u8; 4];
        let mut len = 4;
        let mut j = 0;
        while j < 4 {
            let Some(&c) = src.get(si) else {
                match j {
                    0 => return Ok(out),
                    1 => return Err(si - 1),
                    _ => {}
                }
                len = j;
                break;
            };
            si += 1;
            if let Some(v) = value(c) {
                sextets[j] = v;
                j += 1;
            } else if c != b'\n' && c != b'\r' {
                // Padding included: RawURLEncoding has no pad character.
                return Err(si - 1);
            }
        }
        let v = u32::from(sextets[0]) << 18
            | u32::from(sextets[1]) << 12
            | u32::from(sextets[2]) << 6
            | u32::from(sextets[3]);
        let bytes = [(v >> 16) as u8, (v >> 8) as u8, v as u8];
        out.extend_from_slice(&bytes[..len - 1]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tokens captured from a real kube-apiserver 1.20.
    const FIRST_PAGE: &str =
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NDE5LCJzdGFydCI6ImJhcnMtZWNob1x1MDAwMCJ9";
    const SECOND_PAGE: &str =
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NDE5LCJzdGFydCI6Imt1YmVybmV0ZXNcdTAwMDAifQ";
    const EXPIRED: &str =
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0Ijoia3ViZXJuZXRlc1x1MDAwMCJ9";
    const P: &str = "invalid continue token: continue key is not valid: ";

    fn token(rv: i64, start: &str) -> ContinueToken {
        ContinueToken {
            rv,
            start: start.to_string(),
        }
    }

    /// A token made by hand from raw JSON.
    fn raw(json: &str) -> String {
        URL_SAFE_NO_PAD.encode(json)
    }

    fn err(token: &str) -> String {
        ContinueToken::decode(token).unwrap_err().to_string()
    }

    #[test]
    fn encodes_exactly_like_the_apiserver() {
        assert_eq!(token(419, &next_start("bars-echo")).encode(), FIRST_PAGE);
        assert_eq!(token(419, &next_start("kubernetes")).encode(), SECOND_PAGE);
        assert_eq!(token(-1, "kubernetes\u{0}").encode(), EXPIRED);
    }

    #[test]
    fn decodes_real_tokens() {
        assert_eq!(
            ContinueToken::decode(FIRST_PAGE),
            Ok(token(419, "bars-echo\u{0}"))
        );
        assert_eq!(
            ContinueToken::decode(SECOND_PAGE),
            Ok(token(419, "kubernetes\u{0}"))
        );
        assert_eq!(
            ContinueToken::decode(EXPIRED),
            Ok(token(-1, "kubernetes\u{0}"))
        );
    }

    #[test]
    fn round_trips() {
        for start in [
            "default/bars-echo\u{0}",
            "a<b>&c\"d\\e\u{1}\u{7f}é\u{2028}😀\u{0}",
            "x\n\t\r",
        ] {
            let t = token(i64::MAX, start);
            assert_eq!(ContinueToken::decode(&t.encode()), Ok(t));
        }
        let json = String::from_utf8(URL_SAFE_NO_PAD.decode(token(5, "<&>").encode()).unwrap());
        assert_eq!(
            json.unwrap(),
            r#"{"v":"meta.k8s.io/v1","rv":5,"start":"\u003c\u0026\u003e"}"#
        );
    }

    /// `"start":"/"` is the list's beginning: Go re-roots, cleans and strips
    /// it to an empty key. The token kube-apiserver writes for an empty key
    /// is one its decoder refuses ("encoded start key empty"); so is ours.
    #[test]
    fn a_start_of_slash_is_the_beginning_and_its_own_token_is_refused() {
        let t = ContinueToken::decode(&raw(r#"{"v":"meta.k8s.io/v1","rv":7,"start":"/"}"#));
        assert_eq!(t, Ok(token(7, "")));
        assert_eq!(
            ContinueToken::decode(&t.unwrap().encode()),
            Err(ContinueError::EmptyStart)
        );
    }

    #[test]
    fn apiserver_error_messages() {
        assert_eq!(
            err("bogus"),
            format!("{P}illegal base64 data at input byte 4")
        );
        assert_eq!(
            err(&raw(r#"{"v":"meta.k8s.io/v2","rv":419,"start":"a"}"#)),
            format!("{P}server does not recognize this encoded version \"meta.k8s.io/v2\"")
        );
        assert_eq!(
            err(&raw(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#)),
            format!("{P}incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        );
        assert_eq!(
            err(&raw(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"../x"}"#)),
            format!("{P}../x")
        );
    }

    #[test]
    fn base64_error_offsets_follow_go() {
        let padded = format!("{FIRST_PAGE}==");
        assert_eq!(
            err(&padded),
            format!("{P}illegal base64 data at input byte 76")
        );
        assert_eq!(
            err("ab=c"),
            format!("{P}illegal base64 data at input byte 2")
        );
        assert_eq!(
            err("abc+"),
            format!("{P}illegal base64 data at input byte 3")
        );
        assert_eq!(err("a"), format!("{P}illegal base64 data at input byte 0"));
        // Go skips newlines, then blames the position after them.
        assert_eq!(
            err("abcde\n"),
            format!("{P}illegal base64 data at input byte 5")
        );
        let wrapped = format!("{}\n{}", &FIRST_PAGE[..10], &FIRST_PAGE[10..]);
        assert_eq!(
            ContinueToken::decode(&wrapped),
            Ok(token(419, "bars-echo\u{0}"))
        );
    }

    #[test]
    fn malformed_json_is_a_400_with_the_apiserver_prefix() {
        for json in [
            "",
            "{",
            "x",
            r#"{"v" 1}"#,
            "{} {}",
            "[]",
            "1",
            r#"{"v":1,"rv":"x"}"#,
            r#"{"rv":"1"}"#,
            r#"{"rv":1.5}"#,
            r#"{"start":{"a":[1]}}"#,
        ] {
            let e = ContinueToken::decode(&raw(json)).unwrap_err();
            assert!(matches!(e, ContinueError::Json(_)), "{json:?}: {e:?}");
            assert!(e.to_string().starts_with(P), "{json:?}: {e}");
        }
    }

    #[test]
    fn unknown_keys_and_nulls_are_ignored_and_escapes_decoded() {
        let json = r#" {"v":"meta.k8s.io/v1","x":[{"y":"}"}],"rv":8,"start":"a\u0062\ud83d\ude00","other":null} "#;
        assert_eq!(ContinueToken::decode(&raw(json)), Ok(token(8, "ab😀")));
    }

    #[test]
    fn version_rv_and_start_checks() {
        assert_eq!(
            err(&raw("null")),
            format!("{P}server does not recognize this encoded version \"\"")
        );
        assert_eq!(
            err(&raw(r#"{"v":"meta.k8s.io/v1","rv":5}"#)),
            format!("{P}encoded start key empty (version meta.k8s.io/v1)")
        );
        assert_eq!(
            err(&raw(r#"{"v":"meta.k8s.io/v1","start":"a"}"#)),
            format!("{P}incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        );
        for bad in ["a//b", "a/./b", "a/", "a/../b", "/.."] {
            assert_eq!(err(&token(1, bad).encode()), format!("{P}{bad}"), "{bad:?}");
        }
        // A leading slash is allowed and dropped, as the apiserver uses it.
        assert_eq!(
            ContinueToken::decode(&token(3, "/x").encode()),
            Ok(token(3, "x"))
        );
        // Negative revisions other than 0 are accepted (the 410 token uses -1).
        assert_eq!(
            ContinueToken::decode(&token(-7, "a").encode()),
            Ok(token(-7, "a"))
        );
    }

    #[test]
    fn next_start_is_just_after_the_key() {
        assert_eq!(next_start("default/web"), "default/web\u{0}");
        assert!(next_start("a").as_str() > "a" && next_start("a").as_str() < "a\u{1}");
    }
}
