//! Label and field selectors, parsed and matched the way kube-apiserver 1.20
//! does (`k8s.io/apimachinery/pkg/labels` and `pkg/fields`), with the same
//! error messages, so a `400 BadRequest` built from a [`SelectorError`] reads
//! exactly like the real one.

mod field;
mod label;
mod validation;

pub use field::{FieldSelector, UnknownFieldWording};
pub use label::{LabelSelector, Labels, Operator, Requirement};

/// A selector that kube-apiserver would reject; `Display` is the exact
/// `Status.message` it sends with the `400 BadRequest`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

/// Go's `%q` (`strconv.Quote`): the messages we reproduce quote user input
/// with it, so the escaping has to match for a client to see the same bytes.
///
/// Go's `unicode.IsPrint` is approximated: control characters, non-ASCII
/// spaces and the common invisible format characters are escaped.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if go_is_print(c) => out.push(c),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Approximation of Go's `strconv.IsPrint` (letters, marks, numbers,
/// punctuation, symbols and the ASCII space).
fn go_is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{e000}'..='\u{f8ff}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0000}'..='\u{e007f}'
            | '\u{f0000}'..='\u{10ffff}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_quote_escapes_like_strconv_quote() {
        assert_eq!(go_quote("spec.clusterIP"), "\"spec.clusterIP\"");
        assert_eq!(go_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(go_quote("\u{0}\n\u{7f}"), "\"\\x00\\n\\x7f\"");
        assert_eq!(go_quote("é\u{a0}\u{200b}"), "\"é\\u00a0\\u200b\"");
    }
}
