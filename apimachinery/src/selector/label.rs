//! Label selectors: a port of `k8s.io/apimachinery/pkg/labels/selector.go`
//! (Kubernetes 1.20): the same byte lexer, the same recursive-descent parser,
//! the same validation and the same error text, so what the proxy rejects and
//! how it words the rejection match kube-apiserver.
//!
//! This file holds the parsed form and its matching; the lexer and parser are
//! in `label/parser.rs`, key and value validation in `selector/validation.rs`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::BuildHasher;
use std::str::FromStr;

use super::validation::{validate_label_key, validate_label_value};
use super::SelectorError;

mod parser;

use parser::Parser;

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

    /// True when every requirement of `wider` is one of this selector's,
    /// so this selects a subset of what `wider` selects.
    pub fn narrows(&self, wider: &LabelSelector) -> bool {
        wider
            .requirements
            .iter()
            .all(|r| self.requirements.contains(r))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap()
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
}
