//! Field selectors: a port of `k8s.io/apimachinery/pkg/fields/selector.go`
//! (Kubernetes 1.20), plus the per-resource check of which fields may be
//! selected on (the apiserver's field label conversion functions).

use std::fmt;

use super::{go_quote, SelectorError};

/// How a resource words its rejection of a field it does not support; the
/// apiserver has two, depending on the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownFieldWording {
    /// `"spec.clusterIP" is not a known field selector: only "metadata.name", "metadata.namespace"`
    /// (services, endpoints, endpointslices: the generic metadata-only conversion).
    KnownFieldSelector,
    /// `field label not supported: status.phase` (nodes).
    FieldLabelNotSupported,
}

/// `=`/`==` versus `!=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Go's `hasTerm`.
    Equals,
    /// Go's `notHasTerm`.
    NotEquals,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    field: String,
    op: Op,
    /// Unescaped.
    value: String,
}

/// A parsed `fieldSelector`: the AND of `field=value` / `field!=value` terms,
/// kept in Go's order (the raw terms sorted as strings).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<Term>,
}

impl FieldSelector {
    /// Parses like Go's `fields.ParseSelector`; the error's `Display` is the
    /// apiserver's `400` message.
    pub fn parse(s: &str) -> Result<FieldSelector, SelectorError> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::with_capacity(parts.len());
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((field, op, rhs)) = split_term(part) else {
                return Err(SelectorError(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            terms.push(Term {
                field: field.to_string(),
                op,
                value: unescape_value(rhs)?,
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Rejects a field the resource cannot select on, in the apiserver's words
    /// for that resource; the first offending term (in Go's order) is named.
    /// For [`UnknownFieldWording::KnownFieldSelector`] the "only ..." list is
    /// `allowed`, each quoted, joined by `", "`.
    pub fn check_fields(
        &self,
        allowed: &[&str],
        wording: UnknownFieldWording,
    ) -> Result<(), SelectorError> {
        let Some(term) = self
            .terms
            .iter()
            .find(|t| !allowed.contains(&t.field.as_str()))
        else {
            return Ok(());
        };
        Err(SelectorError(match wording {
            UnknownFieldWording::KnownFieldSelector => {
                let only: Vec<String> = allowed.iter().map(|f| go_quote(f)).collect();
                format!(
                    "{} is not a known field selector: only {}",
                    go_quote(&term.field),
                    only.join(", ")
                )
            }
            UnknownFieldWording::FieldLabelNotSupported => {
                format!("field label not supported: {}", term.field)
            }
        }))
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// True when every term holds; `field` looks a field's value up, and an
    /// absent field compares as `""` (as in Go's `fields.Set`).
    pub fn matches(&self, field: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let value = field(&t.field).unwrap_or_default();
            (value == t.value) == (t.op == Op::Equals)
        })
    }

    /// The fields its terms name, in order.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.field.as_str())
    }

    /// True when every term of `wider` is one of this selector's, so this
    /// selects a subset of what `wider` selects (terms compared as written,
    /// after parsing).
    pub fn narrows(&self, wider: &FieldSelector) -> bool {
        wider.terms.iter().all(|t| self.terms.contains(t))
    }

    /// If the selector pins `metadata.name=X` (or `==`), return X (lets the
    /// caller do a point lookup; it must still apply [`Self::matches`]).
    pub fn exact_name(&self) -> Option<&str> {
        self.requires_exact_match("metadata.name")
    }

    /// Same for `metadata.namespace`.
    pub fn exact_namespace(&self) -> Option<&str> {
        self.requires_exact_match("metadata.namespace")
    }

    /// Go's `RequiresExactMatch`: the first `=` term on `field`.
    fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.op == Op::Equals && t.field == field)
            .map(|t| t.value.as_str())
    }
}

impl std::str::FromStr for FieldSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Go's `Selector.String()`: terms joined by `,`, values re-escaped.
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = if t.op == Op::Equals { "=" } else { "!=" };
            write!(f, "{}{op}{}", t.field, escape_value(&t.value))?;
        }
        Ok(())
    }
}

/// Go's `EscapeValue`: `\`, `,` and `=` get a backslash.
fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Go's `splitTerms`: split on commas not escaped by a backslash (the
/// backslash stays in the term).
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Go's `splitTerm`: the first `!=`, `==` or `=` (tried in that order at each
/// position) splits the term; the field part has no escaping.
fn split_term(term: &str) -> Option<(&str, Op, &str)> {
    const OPS: [(&str, Op); 3] = [("!=", Op::NotEquals), ("==", Op::Equals), ("=", Op::Equals)];
    term.char_indices().find_map(|(i, _)| {
        let rest = &term[i..];
        OPS.iter()
            .find(|(op, _)| rest.starts_with(op))
            .map(|(op, kind)| (&term[..i], *kind, &rest[op.len()..]))
    })
}

/// Go's `UnescapeValue`: `\\`, `\,` and `\=` are the only escapes; a bare
/// `,` or `=` is an error (Go prints the rune as a number).
fn unescape_value(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(SelectorError(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                )));
            }
            out.push(c);
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' || c == '=' {
            return Err(SelectorError(format!(
                "invalid field selector: unescaped character in value: {}",
                c as u32
            )));
        } else {
            out.push(c);
        }
    }
    if in_slash {
        return Err(SelectorError(
            "invalid field selector: invalid escape sequence: \\".to_string(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const META: &[&str] = &["metadata.name", "metadata.namespace"];

    fn sel(s: &str) -> FieldSelector {
        FieldSelector::parse(s).unwrap()
    }

    fn object(name: &str, namespace: &str) -> impl Fn(&str) -> Option<String> {
        let fields: BTreeMap<String, String> = [
            ("metadata.name".to_string(), name.to_string()),
            ("metadata.namespace".to_string(), namespace.to_string()),
        ]
        .into();
        move |f| fields.get(f).cloned()
    }

    #[test]
    fn apiserver_error_messages() {
        assert_eq!(
            FieldSelector::parse("metadata.name in (web)")
                .unwrap_err()
                .to_string(),
            "invalid selector: 'metadata.name in (web)'; can't understand 'metadata.name in (web)'"
        );
        assert_eq!(
            sel("spec.clusterIP=x")
                .check_fields(META, UnknownFieldWording::KnownFieldSelector)
                .unwrap_err()
                .to_string(),
            "\"spec.clusterIP\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert_eq!(
            sel("addressType=IPv4")
                .check_fields(META, UnknownFieldWording::KnownFieldSelector)
                .unwrap_err()
                .to_string(),
            "\"addressType\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        let nodes = ["metadata.name", "spec.unschedulable"];
        assert_eq!(
            sel("status.phase=Running")
                .check_fields(&nodes, UnknownFieldWording::FieldLabelNotSupported)
                .unwrap_err()
                .to_string(),
            "field label not supported: status.phase"
        );
        assert!(sel("spec.unschedulable=false")
            .check_fields(&nodes, UnknownFieldWording::FieldLabelNotSupported)
            .is_ok());
    }

    #[test]
    fn the_whole_selector_is_quoted_but_only_the_bad_term_blamed() {
        assert_eq!(
            FieldSelector::parse("metadata.name=a,bogus")
                .unwrap_err()
                .to_string(),
            "invalid selector: 'metadata.name=a,bogus'; can't understand 'bogus'"
        );
    }

    #[test]
    fn first_unknown_field_in_sorted_order_is_named() {
        let e = sel("z.field=1,metadata.name=a,b.field=2")
            .check_fields(META, UnknownFieldWording::FieldLabelNotSupported)
            .unwrap_err();
        assert_eq!(e.to_string(), "field label not supported: b.field");
    }

    #[test]
    fn equality_and_inequality() {
        let web = object("web", "default");
        let db = object("db", "default");
        assert!(sel("metadata.name=web").matches(&web));
        assert!(sel("metadata.name==web").matches(&web));
        assert!(!sel("metadata.name=web").matches(&db));
        let s = sel("metadata.namespace=default,metadata.name!=web");
        assert!(!s.matches(&web));
        assert!(s.matches(&db));
        assert!(!s.matches(object("db", "other")));
    }

    #[test]
    fn absent_field_compares_as_empty() {
        let nothing = |_: &str| None;
        assert!(sel("spec.x=").matches(nothing));
        assert!(!sel("spec.x=1").matches(nothing));
        assert!(sel("spec.x!=1").matches(nothing));
    }

    #[test]
    fn empty_selects_everything() {
        for s in ["", ",", ",,"] {
            assert!(sel(s).is_empty(), "{s:?}");
            assert!(sel(s).matches(|_: &str| None));
        }
        assert!(!sel("a=b").is_empty());
    }

    #[test]
    fn escaping() {
        let s = sel(r"metadata.name=a\,b\=c\\d");
        assert!(s.matches(object(r"a,b=c\d", "")));
        assert_eq!(s.exact_name(), Some(r"a,b=c\d"));
        assert_eq!(s.to_string(), r"metadata.name=a\,b\=c\\d");
        // An escaped comma does not split terms.
        assert_eq!(sel(r"a=x\,y,b=z").terms.len(), 2);
        let e = |s: &str| FieldSelector::parse(s).unwrap_err().to_string();
        assert_eq!(
            e(r"a=b\!"),
            r"invalid field selector: invalid escape sequence: \!"
        );
        assert_eq!(
            e(r"a=b\"),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert_eq!(
            e("a=b=c"),
            "invalid field selector: unescaped character in value: 61"
        );
    }

    #[test]
    fn operator_split_is_first_match() {
        // `a!==b` is field `a`, `!=`, value `=b` -> unescaped '='.
        assert!(FieldSelector::parse("a!==b").is_err());
        let s = sel("a==b");
        assert!(s.matches(|_: &str| Some("b".to_string())));
        // Whitespace is not trimmed: the field is "metadata.name ".
        let s = sel("metadata.name =x");
        assert!(s
            .check_fields(META, UnknownFieldWording::KnownFieldSelector)
            .is_err());
    }

    #[test]
    fn exact_lookups() {
        let s = sel("metadata.namespace=default,metadata.name=web");
        assert_eq!(s.exact_name(), Some("web"));
        assert_eq!(s.exact_namespace(), Some("default"));
        assert_eq!(sel("metadata.name!=web").exact_name(), None);
        assert_eq!(sel("").exact_namespace(), None);
        assert_eq!(
            "metadata.name=n1"
                .parse::<FieldSelector>()
                .unwrap()
                .exact_name(),
            Some("n1")
        );
    }
}
