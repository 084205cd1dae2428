//! Label key and value validation (`k8s.io/apimachinery/pkg/util/validation`,
//! Kubernetes 1.20) with Go's error text, regexes spelled out as in the
//! messages. Only label selectors validate keys and values; field selectors
//! accept any field name and value and check fields per resource instead.

use super::go_quote;

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
     and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric \
     characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// Go's `validation.RegexError` (the double space after each example is Go's).
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let examples: String = examples
        .iter()
        .enumerate()
        .map(|(i, e)| format!("{}'{e}', ", if i > 0 { " or " } else { "" }))
        .collect();
    format!("{msg} (e.g. {examples}regex used for validation is '{fmt}')")
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`.
fn is_qualified_name_chars(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`.
fn is_dns1123_subdomain_chars(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
            }
            _ => false,
        }
    })
}

/// Go's `validation.IsQualifiedName`.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let examples = ["MyName", "my.name", "123-abc"];
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push(format!("prefix part {}", max_len_error(253)));
                }
                if !is_dns1123_subdomain_chars(prefix) {
                    let e = regex_error(
                        DNS1123_SUBDOMAIN_ERR,
                        DNS1123_SUBDOMAIN_FMT,
                        &["example.com"],
                    );
                    errs.push(format!("prefix part {e}"));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' \
                 (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &examples)
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !is_qualified_name_chars(name) {
        let e = regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &examples);
        errs.push(format!("name part {e}"));
    }
    errs
}

/// Go's `validation.IsValidLabelValue`.
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !value.is_empty() && !is_qualified_name_chars(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Go's `validation.IsQualifiedName` applied to a selector key, worded as
/// `labels.Parse` reports it.
pub(super) fn validate_label_key(key: &str) -> Result<(), String> {
    let errs = qualified_name_errors(key);
    if errs.is_empty() {
        return Ok(());
    }
    Err(format!(
        "invalid label key {}: {}",
        go_quote(key),
        errs.join("; ")
    ))
}

/// Go's `validation.IsValidLabelValue` applied to a selector value, worded as
/// `labels.Parse` reports it.
pub(super) fn validate_label_value(key: &str, value: &str) -> Result<(), String> {
    let errs = label_value_errors(value);
    if errs.is_empty() {
        return Ok(());
    }
    Err(format!(
        "invalid label value: {}: at key: {}: {}",
        go_quote(value),
        go_quote(key),
        errs.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use crate::selector::LabelSelector;

    fn err(s: &str) -> String {
        LabelSelector::parse(s).unwrap_err().to_string()
    }

    #[test]
    fn key_and_value_validation_messages() {
        assert_eq!(
            err("-a=b"),
            "unable to parse requirement: invalid label key \"-a\": name part must consist of \
             alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
             character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
             '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
        assert_eq!(
            err("a=-b"),
            "unable to parse requirement: invalid label value: \"-b\": at key: \"a\": a valid label \
             must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and \
             must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  \
             or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        assert!(err("Example.com/a").contains(
            "invalid label key \"Example.com/a\": prefix part a lowercase RFC 1123 subdomain"
        ));
        assert!(err("/a").ends_with("invalid label key \"/a\": prefix part must be non-empty"));
        assert!(err("a/b/c").contains("invalid label key \"a/b/c\": a qualified name must consist"));
        let long = "a".repeat(64);
        assert!(err(&long).ends_with(": name part must be no more than 63 characters"));
        assert!(err(&format!("a={long}")).contains(": must be no more than 63 characters"));
        // Lengths at the limit are fine.
        assert!(LabelSelector::parse(&format!("{}/{}", "a".repeat(253), "b".repeat(63))).is_ok());
        assert!(LabelSelector::parse(&format!("{}/b", "a".repeat(254))).is_err());
    }
}
