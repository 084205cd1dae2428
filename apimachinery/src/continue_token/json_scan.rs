//! Go's JSON syntax checker (`encoding/json/scanner.go`): a byte-at-a-time
//! state machine whose errors are Go's, word for word, because a bad
//! continue token's `400` message quotes them.

use crate::selector::go_quote;

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

/// JSON whitespace.
pub(super) fn is_space(c: u8) -> bool {
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
pub(super) fn check_valid_json(data: &[u8]) -> Result<(), String> {
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
