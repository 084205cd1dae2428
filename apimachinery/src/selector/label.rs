//! Label selectors: a port of `k8s.io/apimachinery/pkg/labels/selector.go`
//! (Kubernetes 1.20): the same byte lexer, the same recursive-descent parser,
//! the same validation and the same error text, so what the proxy rejects and
//! how it words the rejection match kube-apiserver.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::hash::BuildHasher;
use std::str::FromStr;

use super::{go_quote, SelectorError};

/// A set of labels a selector can be matched against.
pub trait Labels {
    /// The value of label `key`, or `None` when the label is absent.
    fn get(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key).map(String::as_str)
    }
}

impl<S: BuildHasher> Labels for HashMap<String, String, S> {
    fn get(&self, key: &str) -> Option<&str> {
        HashMap::get(self, key).map(String::as_str)
    }
}

/// `metadata.labels` straight from a JSON object; a non-string value (which
/// kube-apiserver would never have accepted) counts as absent.
impl Labels for serde_json::Map<String, serde_json::Value> {
    fn get(&self, key: &str) -> Option<&str> {
        serde_json::Map::get(self, key).and_then(serde_json::Value::as_str)
    }
}

/// `None` is an object without labels.
impl<T: Labels + ?Sized> Labels for Option<&T> {
    fn get(&self, key: &str) -> Option<&str> {
        (*self)?.get(key)
    }
}

/// The operator of one [`Requirement`] (Go's `selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `key`: the label is present.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key=value`.
    Equals,
    /// `key==value`, same meaning as `=`.
    DoubleEquals,
    /// `key!=value`: also matches when the label is absent.
    NotEquals,
    /// `key in (a,b)`.
    In,
    /// `key notin (a,b)`: also matches when the label is absent.
    NotIn,
    /// `key>n`: the label is present and an integer greater than `n`.
    GreaterThan,
    /// `key<n`: the label is present and an integer less than `n`.
    LessThan,
}

/// One comma-separated term of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    /// Sorted and de-duplicated, as Go's `sets.String.List()` leaves them.
    values: Vec<String>,
}

impl Requirement {
    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted; empty for `Exists` / `DoesNotExist`.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Go's `Requirement.Matches`.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let has = |v: &str| self.values.iter().any(|x| x == v);
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => value.is_some_and(has),
            Operator::NotIn | Operator::NotEquals => value.is_none_or(|v| !has(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                // Both sides are parsed like Go's strconv.ParseInt(s, 10, 64);
                // an unparsable label value simply does not match.
                let (Some(label), [bound]) = (value, self.values.as_slice()) else {
                    return false;
                };
                let (Ok(label), Ok(bound)) = (label.parse::<i64>(), bound.parse::<i64>()) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    label > bound
                } else {
                    label < bound
                }
            }
        }
    }

    /// Go's `NewRequirement`: validates the key, the value count for the
    /// operator, integers for `gt`/`lt`, then every value.
    fn new(key: String, operator: Operator, values: Vec<String>) -> Result<Self, String> {
        validate_label_key(&key)?;
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                return Err("for 'in', 'notin' operators, values set can't be empty".into());
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals
                if values.len() != 1 =>
            {
                return Err("exact-match compatibility requires one single value".into());
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                return Err("values set must be empty for exists and does not exist".into());
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    return Err("for 'Gt', 'Lt' operators, exactly one value is required".into());
                }
                if values.iter().any(|v| v.parse::<i64>().is_err()) {
                    return Err("for 'Gt', 'Lt' operators, the value must be an integer".into());
                }
            }
            _ => {}
        }
        for value in &values {
            validate_label_value(&key, value)?;
        }
        Ok(Requirement {
            key,
            operator,
            values,
        })
    }
}

/// Go's `Requirement.String()`.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.operator {
            Operator::Exists => return f.write_str(&self.key),
            Operator::DoesNotExist => return write!(f, "!{}", self.key),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
        };
        let values = self.values.join(",");
        if matches!(self.operator, Operator::In | Operator::NotIn) {
            write!(f, "{}{op}({values})", self.key)
        } else {
            write!(f, "{}{op}{values}", self.key)
        }
    }
}

/// A parsed `labelSelector`: the AND of its requirements, sorted by key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses a selector like kube-apiserver's `labels.Parse`; the error's
    /// `Display` is the exact message of its `400 BadRequest`.
    pub fn parse(s: &str) -> Result<LabelSelector, SelectorError> {
        let mut parser = Parser::new(s);
        let mut requirements = parser.parse().map_err(SelectorError)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// The selector that matches everything (what an empty string parses to).
    pub fn everything() -> Self {
        Self::default()
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// True when every requirement matches `labels`.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Go's `Selector.String()`: the canonical form, requirements sorted by key.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// Lexer tokens, as in Go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// Go's `string2token`.
fn keyword(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Go's byte lexer. Like Go, `read` returns 0 both at the end and for a NUL
/// byte, so a NUL ends the selector when it starts a token and separates
/// identifiers inside one.
struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn scan_id_or_keyword(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        loop {
            match self.read() {
                0 => break,
                c if is_special_symbol(c) || is_whitespace(c) => {
                    self.unread();
                    break;
                }
                c => buffer.push(c),
            }
        }
        let tok = keyword(&buffer).unwrap_or(Token::Identifier);
        // Splits only happen at ASCII bytes, so the bytes are valid UTF-8.
        (tok, String::from_utf8_lossy(&buffer).into_owned())
    }

    fn scan_special_symbol(&mut self) -> (Token, String) {
        let mut last: Option<(Token, usize)> = None;
        let mut buffer = Vec::new();
        loop {
            match self.read() {
                0 => break,
                c if is_special_symbol(c) => {
                    buffer.push(c);
                    if let Some(tok) = keyword(&buffer) {
                        last = Some((tok, buffer.len()));
                    } else if last.is_some() {
                        self.unread();
                        break;
                    }
                }
                _ => {
                    self.unread();
                    break;
                }
            }
        }
        match last {
            Some((tok, len)) => (tok, String::from_utf8_lossy(&buffer[..len]).into_owned()),
            None => (
                Token::Error,
                format!(
                    "error expected: keyword found '{}'",
                    String::from_utf8_lossy(&buffer)
                ),
            ),
        }
    }

    fn lex(&mut self) -> (Token, String) {
        let mut c = self.read();
        while is_whitespace(c) {
            c = self.read();
        }
        match c {
            0 => (Token::EndOfString, String::new()),
            c if is_special_symbol(c) => {
                self.unread();
                self.scan_special_symbol()
            }
            _ => {
                self.unread();
                self.scan_id_or_keyword()
            }
        }
    }
}

/// Whether `in`/`notin` are operators (`KeyAndOperator`) or plain
/// identifiers (`Values`), as in Go's `ParserContext`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

impl Parser {
    fn new(s: &str) -> Self {
        let mut lexer = Lexer {
            s: s.as_bytes(),
            pos: 0,
        };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            let end = item.0 == Token::EndOfString;
            items.push(item);
            if end {
                break;
            }
        }
        Parser { items, position: 0 }
    }

    fn lookahead(&self, ctx: Context) -> (Token, String) {
        let (tok, lit) = self
            .items
            .get(self.position)
            .cloned()
            .unwrap_or((Token::EndOfString, String::new()));
        match tok {
            Token::In | Token::NotIn if ctx == Context::Values => (Token::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn consume(&mut self, ctx: Context) -> (Token, String) {
        let item = self.lookahead(ctx);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ))
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, inferred) = self.parse_key_and_infer_operator()?;
        if let Some(op) = inferred {
            return Requirement::new(key, op, Vec::new());
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(key, operator, values.into_iter().collect())
    }

    /// Returns the key and, for `key` / `!key`, the operator already known.
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut operator = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        validate_label_key(&lit)?;
        let (next, _) = self.lookahead(Context::Values);
        if (next == Token::EndOfString || next == Token::Comma) && operator.is_none() {
            operator = Some(Operator::Exists);
        }
        Ok((lit, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: '=', '!=', '==', 'in', notin'"
                ))
            }
        })
    }

    fn parse_values(&mut self) -> Result<BTreeSet<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let set = self.parse_identifiers_list()?;
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    /// A comma-separated, possibly empty, list of possibly empty identifiers.
    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut set = BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    set.insert(lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    // "(," / ",," / ",)" each stand for an empty value.
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Token::ClosedPar {
                        set.insert(String::new());
                        return Ok(set);
                    }
                    if tok2 == Token::Comma {
                        self.consume(Context::Values);
                        set.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(BTreeSet::from([String::new()]));
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier {
            return Ok(BTreeSet::from([lit]));
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}

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

fn validate_label_key(key: &str) -> Result<(), String> {
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

fn validate_label_value(key: &str, value: &str) -> Result<(), String> {
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
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn err(s: &str) -> String {
        LabelSelector::parse(s).unwrap_err().to_string()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap()
    }

    #[test]
    fn apiserver_error_messages() {
        assert_eq!(
            err("a in (b"),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        assert_eq!(
            err("!!a"),
            "unable to parse requirement: found '!', expected: identifier"
        );
        assert_eq!(err("a=b=c"), "found '=', expected: ',' or 'end of string'");
    }

    #[test]
    fn other_go_parser_errors() {
        assert_eq!(err("a,"), "found '', expected: identifier after ','");
        assert_eq!(
            err("=a"),
            "found '=', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            err("a b"),
            "unable to parse requirement: found 'b', expected: '=', '!=', '==', 'in', notin'"
        );
        assert_eq!(
            err("a in b"),
            "unable to parse requirement: found 'b' expected: '('"
        );
        assert_eq!(
            err("a in (=)"),
            "unable to parse requirement: found '=', expected: ',', ')' or identifier"
        );
        assert_eq!(
            err("a=("),
            "unable to parse requirement: found '(', expected: identifier"
        );
        assert_eq!(
            err("a>x"),
            "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert_eq!(
            err("a<"),
            "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer"
        );
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

    #[test]
    fn empty_and_whitespace_select_everything() {
        for s in ["", "  ", "\t\n"] {
            let s = sel(s);
            assert!(s.is_empty());
            assert!(s.matches(&labels(&[])));
        }
        assert_eq!(LabelSelector::everything(), sel(""));
    }

    #[test]
    fn equality_operators() {
        let app_web = labels(&[("app", "web")]);
        let app_db = labels(&[("app", "db")]);
        let none = labels(&[]);
        for s in ["app=web", "app==web", " app = web "] {
            assert!(sel(s).matches(&app_web), "{s}");
            assert!(!sel(s).matches(&app_db), "{s}");
            assert!(!sel(s).matches(&none), "{s}");
        }
        assert!(!sel("app!=web").matches(&app_web));
        assert!(sel("app!=web").matches(&app_db));
        assert!(sel("app!=web").matches(&none), "!= matches an absent key");
        // `a=` means the empty value, which requires presence.
        assert!(sel("app=").matches(&labels(&[("app", "")])));
        assert!(!sel("app=").matches(&none));
    }

    #[test]
    fn set_operators() {
        let s = sel("env in (prod, staging)");
        assert!(s.matches(&labels(&[("env", "prod")])));
        assert!(s.matches(&labels(&[("env", "staging")])));
        assert!(!s.matches(&labels(&[("env", "dev")])));
        assert!(!s.matches(&labels(&[])));
        let s = sel("env notin (prod,staging)");
        assert!(!s.matches(&labels(&[("env", "prod")])));
        assert!(s.matches(&labels(&[("env", "dev")])));
        assert!(s.matches(&labels(&[])), "notin matches an absent key");
        // `()` and `(,x)` contain the empty value; `in`/`notin` may be values.
        assert_eq!(sel("a in ()").requirements()[0].values(), [""]);
        assert_eq!(sel("a in (,x)").requirements()[0].values(), ["", "x"]);
        // The example from Go's `labels.Parse` documentation.
        let s = sel("x in (foo,,baz),y,z notin ()");
        assert_eq!(s.to_string(), "x in (,baz,foo),y,z notin ()");
        assert!(s.matches(&labels(&[("x", ""), ("y", "1")])));
        assert!(!s.matches(&labels(&[("x", "foo"), ("y", "1"), ("z", "")])));
        assert_eq!(
            sel("a in (in,notin)").requirements()[0].values(),
            ["in", "notin"]
        );
    }

    #[test]
    fn existence_operators() {
        let with = labels(&[("tier", "")]);
        let without = labels(&[("app", "x")]);
        assert!(sel("tier").matches(&with));
        assert!(!sel("tier").matches(&without));
        assert!(!sel("!tier").matches(&with));
        assert!(sel("!tier").matches(&without));
        assert!(sel("! tier").matches(&without));
    }

    #[test]
    fn greater_and_less_than() {
        let five = labels(&[("n", "5")]);
        assert!(sel("n>4").matches(&five));
        assert!(!sel("n>5").matches(&five));
        assert!(sel("n<6").matches(&five));
        assert!(!sel("n<5").matches(&five));
        assert!(!sel("n>1").matches(&labels(&[])), "gt requires the key");
        assert!(
            !sel("n>1").matches(&labels(&[("n", "x")])),
            "non-integer never matches"
        );
    }

    #[test]
    fn kube_proxy_selector() {
        let s = sel("!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name");
        assert_eq!(s.requirements().len(), 2);
        assert!(s.matches(&labels(&[("component", "apiserver")])));
        assert!(s.matches(&None::<&BTreeMap<String, String>>));
        assert!(!s.matches(&labels(&[("service.kubernetes.io/headless", "")])));
        assert!(!s.matches(&labels(&[(
            "service.kubernetes.io/service-proxy-name",
            "x"
        )])));
    }

    #[test]
    fn comma_is_and_and_requirements_sort_by_key() {
        let s = sel("b=1,a");
        assert_eq!(s.to_string(), "a,b=1");
        assert!(s.matches(&labels(&[("a", "x"), ("b", "1")])));
        assert!(!s.matches(&labels(&[("b", "1")])));
        assert_eq!(
            sel("x notin (b,a),!y,z>3").to_string(),
            "x notin (a,b),!y,z>3"
        );
    }

    #[test]
    fn other_label_sources() {
        let s = sel("app=web");
        let mut hm = HashMap::new();
        hm.insert("app".to_string(), "web".to_string());
        assert!(s.matches(&hm));
        let json: serde_json::Value = serde_json::json!({"app": "web", "n": 5});
        let map = json.as_object().unwrap();
        assert!(s.matches(map));
        assert!(!sel("n").matches(map), "non-string values count as absent");
        assert!(s.matches(&Some(map)));
        assert!("app=web".parse::<LabelSelector>().unwrap().matches(&hm));
    }

    #[test]
    fn nul_byte_ends_the_selector_like_go() {
        // Go's lexer reads NUL as end of input at the start of a token.
        assert!(sel("\u{0}a=b").is_empty());
        assert_eq!(sel("a\u{0}").to_string(), "a");
    }
}
