//! kube-apiserver's list `continue` token (etcd3 store, Kubernetes 1.20):
//! base64url without padding (Go `RawURLEncoding`) of the JSON
//! `{"v":"meta.k8s.io/v1","rv":419,"start":"bars-echo\u0000"}`.
//!
//! Encoding reproduces Go's `json.Marshal` byte for byte, so our tokens are
//! the apiserver's. Decoding mirrors `decodeContinue`: Go's base64 decoder
//! (same error offsets), Go's JSON syntax checker and struct decoder (same
//! error wording, case-insensitive keys), then the version, resourceVersion
//! and path-traversal checks.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

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
    /// Not JSON, or JSON of the wrong shape; Go's `encoding/json` message.
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
        check_valid_json(&data).map_err(ContinueError::Json)?;
        let fields = decode_fields(&data).map_err(ContinueError::Json)?;
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

/// Go's `json` nesting limit.
const MAX_DEPTH: usize = 10_000;

/// States of Go's JSON scanner (`encoding/json/scanner.go`).
#[derive(Debug, Clone, Copy)]
enum Scan {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    Zero,
    One,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    Literal(&'static str, usize),
}

/// What the innermost open container expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

struct Scanner {
    state: Scan,
    stack: Vec<Frame>,
    end_top: bool,
}

/// Go's `quoteChar`: how a byte is shown in a JSON syntax error.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_string(),
        b'"' => "'\"'".to_string(),
        c => {
            let q = go_quote(&char::from(c).to_string());
            format!("'{}'", &q[1..q.len() - 1])
        }
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn syntax_error(c: u8, context: &str) -> Result<(), String> {
    Err(format!("invalid character {} {context}", quote_char(c)))
}

impl Scanner {
    fn step(&mut self, c: u8) -> Result<(), String> {
        match self.state {
            Scan::BeginValueOrEmpty if c == b']' => self.end_value(c),
            Scan::BeginValue | Scan::BeginValueOrEmpty => self.begin_value(c),
            Scan::BeginStringOrEmpty if c == b'}' => {
                if let Some(top) = self.stack.last_mut() {
                    *top = Frame::ObjectValue;
                }
                self.end_value(c)
            }
            Scan::BeginString | Scan::BeginStringOrEmpty => match c {
                c if is_space(c) => Ok(()),
                b'"' => self.go(Scan::InString),
                _ => syntax_error(c, "looking for beginning of object key string"),
            },
            Scan::EndValue => self.end_value(c),
            Scan::EndTop if is_space(c) => Ok(()),
            Scan::EndTop => syntax_error(c, "after top-level value"),
            Scan::InString => match c {
                b'"' => self.go(Scan::EndValue),
                b'\\' => self.go(Scan::InStringEsc),
                c if c < 0x20 => syntax_error(c, "in string literal"),
                _ => Ok(()),
            },
            Scan::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => self.go(Scan::InString),
                b'u' => self.go(Scan::InStringEscU(0)),
                _ => syntax_error(c, "in string escape code"),
            },
            Scan::InStringEscU(n) if c.is_ascii_hexdigit() => self.go(if n == 3 {
                Scan::InString
            } else {
                Scan::InStringEscU(n + 1)
            }),
            Scan::InStringEscU(_) => syntax_error(c, "in \\u hexadecimal character escape"),
            Scan::Neg => match c {
                b'0' => self.go(Scan::Zero),
                b'1'..=b'9' => self.go(Scan::One),
                _ => syntax_error(c, "in numeric literal"),
            },
            Scan::One | Scan::Dot0 | Scan::E0 if c.is_ascii_digit() => Ok(()),
            Scan::One | Scan::Zero => match c {
                b'.' => self.go(Scan::Dot),
                b'e' | b'E' => self.go(Scan::E),
                _ => self.end_value(c),
            },
            Scan::Dot if c.is_ascii_digit() => self.go(Scan::Dot0),
            Scan::Dot => syntax_error(c, "after decimal point in numeric literal"),
            Scan::Dot0 if c == b'e' || c == b'E' => self.go(Scan::E),
            Scan::E if c == b'+' || c == b'-' => self.go(Scan::ESign),
            Scan::E | Scan::ESign if c.is_ascii_digit() => self.go(Scan::E0),
            Scan::E | Scan::ESign => syntax_error(c, "in exponent of numeric literal"),
            Scan::Dot0 | Scan::E0 => self.end_value(c),
            Scan::Literal(word, i) => {
                let expected = word.as_bytes().get(i).copied().unwrap_or(b' ');
                if c != expected {
                    let context = format!("in literal {word} (expecting {})", quote_char(expected));
                    return syntax_error(c, &context);
                }
                self.go(if i + 1 == word.len() {
                    Scan::EndValue
                } else {
                    Scan::Literal(word, i + 1)
                })
            }
        }
    }

    fn go(&mut self, state: Scan) -> Result<(), String> {
        self.state = state;
        Ok(())
    }

    fn push(&mut self, c: u8, frame: Frame, state: Scan) -> Result<(), String> {
        self.stack.push(frame);
        if self.stack.len() > MAX_DEPTH {
            return syntax_error(c, "exceeded max depth");
        }
        self.go(state)
    }

    fn begin_value(&mut self, c: u8) -> Result<(), String> {
        match c {
            c if is_space(c) => Ok(()),
            b'{' => self.push(c, Frame::ObjectKey, Scan::BeginStringOrEmpty),
            b'[' => self.push(c, Frame::ArrayValue, Scan::BeginValueOrEmpty),
            b'"' => self.go(Scan::InString),
            b'-' => self.go(Scan::Neg),
            b'0' => self.go(Scan::Zero),
            b'1'..=b'9' => self.go(Scan::One),
            b't' => self.go(Scan::Literal("true", 1)),
            b'f' => self.go(Scan::Literal("false", 1)),
            b'n' => self.go(Scan::Literal("null", 1)),
            _ => syntax_error(c, "looking for beginning of value"),
        }
    }

    fn end_value(&mut self, c: u8) -> Result<(), String> {
        let Some(top) = self.stack.last_mut() else {
            self.end_top = true;
            self.state = Scan::EndTop;
            return self.step(c);
        };
        if is_space(c) {
            return self.go(Scan::EndValue);
        }
        match (*top, c) {
            (Frame::ObjectKey, b':') => {
                *top = Frame::ObjectValue;
                self.go(Scan::BeginValue)
            }
            (Frame::ObjectKey, _) => syntax_error(c, "after object key"),
            (Frame::ObjectValue, b',') => {
                *top = Frame::ObjectKey;
                self.go(Scan::BeginString)
            }
            (Frame::ArrayValue, b',') => self.go(Scan::BeginValue),
            (Frame::ObjectValue, b'}') | (Frame::ArrayValue, b']') => {
                self.stack.pop();
                if self.stack.is_empty() {
                    self.end_top = true;
                    self.go(Scan::EndTop)
                } else {
                    self.go(Scan::EndValue)
                }
            }
            (Frame::ObjectValue, _) => syntax_error(c, "after object key:value pair"),
            (Frame::ArrayValue, _) => syntax_error(c, "after array element"),
        }
    }
}

/// Go's `checkValid`: the syntax pass `json.Unmarshal` makes before decoding.
fn check_valid_json(data: &[u8]) -> Result<(), String> {
    let mut scanner = Scanner {
        state: Scan::BeginValue,
        stack: Vec::new(),
        end_top: false,
    };
    for &c in data {
        scanner.step(c)?;
    }
    // At the end Go feeds a space, which completes a trailing number.
    if !scanner.end_top {
        scanner.step(b' ')?;
    }
    if scanner.end_top {
        Ok(())
    } else {
        Err("unexpected end of JSON input".to_string())
    }
}

/// Go's `continueToken` struct after `json.Unmarshal`.
#[derive(Default)]
struct Fields {
    v: String,
    rv: i64,
    start: String,
}

/// One JSON value, as much of it as the struct decoder needs.
enum Value {
    String(String),
    /// The literal text, for Go's `number 1.5` wording.
    Number(String),
    Bool,
    Null,
    Array,
    Object,
}

impl Value {
    /// How Go's `UnmarshalTypeError` names the JSON side.
    fn go_kind(&self) -> String {
        match self {
            Value::String(_) => "string".into(),
            Value::Number(_) => "number".into(),
            Value::Bool => "bool".into(),
            Value::Null => "null".into(),
            Value::Array => "array".into(),
            Value::Object => "object".into(),
        }
    }
}

/// Reads JSON that [`check_valid_json`] has accepted.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn peek(&self) -> u8 {
        self.data.get(self.pos).copied().unwrap_or(0)
    }

    fn skip_space(&mut self) {
        while is_space(self.peek()) {
            self.pos += 1;
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.data.get(at..at + 4)?;
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    }

    /// A `\uXXXX` escape starting at `at` (the backslash).
    fn escape_u(&self, at: usize) -> Option<u32> {
        match self.data.get(at..at + 2) {
            Some(b"\\u") => self.hex4(at + 2),
            _ => None,
        }
    }

    /// Go's `unquote`: invalid UTF-8 bytes and lone surrogates become U+FFFD.
    fn string(&mut self) -> String {
        self.pos += 1; // opening quote
        let mut buf = Vec::new();
        loop {
            let c = self.peek();
            self.pos += 1;
            match c {
                // 0 is the end of input: a raw NUL cannot be in a valid string.
                b'"' | 0 => break,
                b'\\' => {
                    let e = self.peek();
                    self.pos += 1;
                    let decoded = match e {
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape(),
                        other => char::from(other),
                    };
                    let mut tmp = [0u8; 4];
                    buf.extend_from_slice(decoded.encode_utf8(&mut tmp).as_bytes());
                }
                c => buf.push(c),
            }
        }
        let mut out = String::with_capacity(buf.len());
        for chunk in buf.utf8_chunks() {
            out.push_str(chunk.valid());
            for _ in chunk.invalid() {
                out.push('\u{fffd}');
            }
        }
        out
    }

    /// After `\u`: the code point, pairing surrogates like Go.
    fn unicode_escape(&mut self) -> char {
        let first = self.hex4(self.pos).unwrap_or(0xfffd);
        self.pos += 4;
        if !(0xd800..0xe000).contains(&first) {
            return char::from_u32(first).unwrap_or('\u{fffd}');
        }
        if let Some(second) = self.escape_u(self.pos) {
            if (0xd800..0xdc00).contains(&first) && (0xdc00..0xe000).contains(&second) {
                self.pos += 6;
                let c = 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
                return char::from_u32(c).unwrap_or('\u{fffd}');
            }
        }
        '\u{fffd}'
    }

    fn value(&mut self) -> Value {
        match self.peek() {
            b'"' => Value::String(self.string()),
            b'{' | b'[' => {
                let kind = if self.peek() == b'{' {
                    Value::Object
                } else {
                    Value::Array
                };
                self.skip_container();
                kind
            }
            b't' => self.literal(4, Value::Bool),
            b'f' => self.literal(5, Value::Bool),
            b'n' => self.literal(4, Value::Null),
            _ => {
                let start = self.pos;
                while matches!(self.peek(), b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                    self.pos += 1;
                }
                Value::Number(String::from_utf8_lossy(&self.data[start..self.pos]).into_owned())
            }
        }
    }

    fn literal(&mut self, len: usize, value: Value) -> Value {
        self.pos += len;
        value
    }

    /// Skips a (valid) object or array without recursion.
    fn skip_container(&mut self) {
        let mut depth = 0usize;
        while self.pos < self.data.len() {
            match self.peek() {
                b'"' => {
                    self.string();
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        self.pos += 1;
                        return;
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
    }
}

/// Go's case-insensitive struct field match (`ſ` folds to `s`).
fn field_name_matches(key: &str, name: &str) -> bool {
    let mut chars = key.chars();
    name.bytes().all(|n| {
        chars
            .next()
            .is_some_and(|c| c.to_ascii_lowercase() == char::from(n) || (n == b's' && c == 'ſ'))
    }) && chars.next().is_none()
}

/// Go's `json.Unmarshal(data, &continueToken{})` on syntactically valid JSON:
/// the first type error is reported, unknown keys are ignored, `null` leaves
/// a field alone, a repeated key overwrites.
fn decode_fields(data: &[u8]) -> Result<Fields, String> {
    let mut r = Reader { data, pos: 0 };
    let mut fields = Fields::default();
    r.skip_space();
    match r.value() {
        Value::Object => {}
        Value::Null => return Ok(fields),
        other => {
            return Err(format!(
                "json: cannot unmarshal {} into Go value of type etcd3.continueToken",
                other.go_kind()
            ))
        }
    }
    // Second pass over the top-level object's members.
    r.pos = 0;
    r.skip_space();
    r.pos += 1; // `{`
    let mut first_error = None;
    loop {
        r.skip_space();
        if r.peek() != b'"' {
            break; // `}`
        }
        let key = r.string();
        r.skip_space();
        r.pos += 1; // `:`
        r.skip_space();
        let value = r.value();
        r.skip_space();
        if r.peek() == b',' {
            r.pos += 1;
        }
        let error = if field_name_matches(&key, "v") {
            assign_string(&mut fields.v, value, "v")
        } else if field_name_matches(&key, "start") {
            assign_string(&mut fields.start, value, "start")
        } else if field_name_matches(&key, "rv") {
            assign_int(&mut fields.rv, value)
        } else {
            None
        };
        first_error = first_error.or(error);
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(fields),
    }
}

fn type_error(value: &str, field: &str, ty: &str) -> String {
    format!(
        "json: cannot unmarshal {value} into Go struct field continueToken.{field} of type {ty}"
    )
}

fn assign_string(slot: &mut String, value: Value, field: &str) -> Option<String> {
    match value {
        Value::String(s) => *slot = s,
        Value::Null => {}
        other => return Some(type_error(&other.go_kind(), field, "string")),
    }
    None
}

fn assign_int(slot: &mut i64, value: Value) -> Option<String> {
    match value {
        Value::Number(n) => match n.parse() {
            Ok(n) => *slot = n,
            Err(_) => return Some(type_error(&format!("number {n}"), "rv", "int64")),
        },
        Value::Null => {}
        other => return Some(type_error(&other.go_kind(), "rv", "int64")),
    }
    None
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
    fn json_errors_follow_go() {
        let cases = [
            ("", "unexpected end of JSON input"),
            ("{", "unexpected end of JSON input"),
            ("x", "invalid character 'x' looking for beginning of value"),
            (r#"{"v" 1}"#, "invalid character '1' after object key"),
            (r#"{"v":1 "#, "unexpected end of JSON input"),
            (r#"{"v":1 2}"#, "invalid character '2' after object key:value pair"),
            ("{1}", "invalid character '1' looking for beginning of object key string"),
            ("[1 2]", "invalid character '2' after array element"),
            ("nul", "invalid character ' ' in literal null (expecting 'l')"),
            ("-", "invalid character ' ' in numeric literal"),
            ("1.x", "invalid character 'x' after decimal point in numeric literal"),
            ("{} {}", "invalid character '{' after top-level value"),
            ("\"\u{1}\"", "invalid character '\\x01' in string literal"),
            (r#""\x""#, "invalid character 'x' in string escape code"),
            ("[]", "json: cannot unmarshal array into Go value of type etcd3.continueToken"),
            ("1", "json: cannot unmarshal number into Go value of type etcd3.continueToken"),
            (
                r#"{"v":1,"rv":"x"}"#,
                "json: cannot unmarshal number into Go struct field continueToken.v of type string",
            ),
            (
                r#"{"rv":"1"}"#,
                "json: cannot unmarshal string into Go struct field continueToken.rv of type int64",
            ),
            (
                r#"{"rv":1.5}"#,
                "json: cannot unmarshal number 1.5 into Go struct field continueToken.rv of type int64",
            ),
            (
                r#"{"start":{"a":[1]}}"#,
                "json: cannot unmarshal object into Go struct field continueToken.start of type string",
            ),
        ];
        for (json, message) in cases {
            assert_eq!(err(&raw(json)), format!("{P}{message}"), "{json:?}");
        }
    }

    #[test]
    fn struct_decoding_follows_go() {
        // Keys match case-insensitively, unknown keys and nulls are ignored,
        // the last duplicate wins, escapes are decoded.
        let json = r#" {"V":"meta.k8s.io/v1","x":[{"y":"}"}],"Rv":7,"rv":8,"ſtart":"a\u0062\ud83d\ude00","v":null} "#;
        assert_eq!(ContinueToken::decode(&raw(json)), Ok(token(8, "ab😀")));
        // A lone surrogate becomes U+FFFD.
        let json = r#"{"v":"meta.k8s.io/v1","rv":1,"start":"\ud800x"}"#;
        assert_eq!(ContinueToken::decode(&raw(json)), Ok(token(1, "\u{fffd}x")));
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
