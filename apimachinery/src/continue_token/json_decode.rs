//! Go's `json.Unmarshal` into the apiserver's `continueToken` struct
//! (`encoding/json/decode.go`), for JSON the scanner has already accepted:
//! case-insensitive keys, Go's type-error wording, Go's string unquoting.

use super::json_scan::is_space;

/// Go's `continueToken` struct after `json.Unmarshal`.
#[derive(Default)]
pub(super) struct Fields {
    /// The token version, `meta.k8s.io/v1`.
    pub(super) v: String,
    /// The snapshot revision.
    pub(super) rv: i64,
    /// The key to resume from.
    pub(super) start: String,
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

/// Reads JSON that `check_valid_json` has accepted.
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
pub(super) fn decode_fields(data: &[u8]) -> Result<Fields, String> {
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
