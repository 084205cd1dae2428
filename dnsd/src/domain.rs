//! The cluster domain (`--cluster-domain`) and what a DNS name may look like.
//!
//! SuperEdge's daemon hard-coded `cluster.local`; here it is a flag, checked
//! once at start. Names built from Kubernetes object names are made of valid
//! characters already, but can still be too long for DNS (a label of at most
//! 63 octets, a name of at most 253): such names are left out of the file
//! rather than written where a DNS server would refuse or mangle them.

use std::fmt;
use std::str::FromStr;

/// Longest DNS label, in octets (RFC 1035).
const MAX_LABEL: usize = 63;
/// Longest DNS name in text form, without the trailing dot.
const MAX_NAME: usize = 253;

/// The cluster's DNS domain, e.g. `cluster.local`: lower case, no trailing dot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterDomain(String);

/// Why a `--cluster-domain` value is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// Empty, or only a dot.
    #[error("the cluster domain is empty")]
    Empty,
    /// A label is empty, too long, or has a character DNS-1123 does not allow.
    #[error("{label:?} is not a DNS label (lower-case letters, digits and '-', 1 to 63 characters, not starting or ending with '-')")]
    BadLabel {
        /// The offending label.
        label: String,
    },
    /// Longer than 253 characters.
    #[error("the cluster domain is longer than 253 characters")]
    TooLong,
}

impl FromStr for ClusterDomain {
    type Err = DomainError;

    fn from_str(s: &str) -> Result<Self, DomainError> {
        let domain = s.strip_suffix('.').unwrap_or(s).to_ascii_lowercase();
        if domain.is_empty() {
            return Err(DomainError::Empty);
        }
        if domain.len() > MAX_NAME {
            return Err(DomainError::TooLong);
        }
        if let Some(label) = domain.split('.').find(|l| !is_dns1123_label(l)) {
            return Err(DomainError::BadLabel {
                label: label.to_owned(),
            });
        }
        Ok(ClusterDomain(domain))
    }
}

impl ClusterDomain {
    /// The domain as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Lower-case letters, digits and `-`, 1 to 63 characters, alphanumeric at both ends.
fn is_dns1123_label(label: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=MAX_LABEL).contains(&label.len())
        && label.starts_with(alnum)
        && label.ends_with(alnum)
        && label.chars().all(|c| alnum(c) || c == '-')
}

/// Whether `name` fits DNS: every label 1 to 63 octets, at most 253 in all.
pub fn fits_dns(name: &str) -> bool {
    name.len() <= MAX_NAME && name.split('.').all(|l| (1..=MAX_LABEL).contains(&l.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_normalized_or_refused() {
        let d: ClusterDomain = "Edge.Example.".parse().unwrap();
        assert_eq!(d.as_str(), "edge.example");
        assert_eq!("".parse::<ClusterDomain>(), Err(DomainError::Empty));
        assert_eq!(".".parse::<ClusterDomain>(), Err(DomainError::Empty));
        assert_eq!(
            "cluster..local".parse::<ClusterDomain>(),
            Err(DomainError::BadLabel {
                label: String::new()
            })
        );
        assert!(matches!(
            "my_cluster.local".parse::<ClusterDomain>(),
            Err(DomainError::BadLabel { .. })
        ));
        assert!(matches!(
            "-x.local".parse::<ClusterDomain>(),
            Err(DomainError::BadLabel { .. })
        ));
        let long = vec!["a".repeat(60); 5].join(".");
        assert_eq!(long.parse::<ClusterDomain>(), Err(DomainError::TooLong));
    }

    #[test]
    fn names_must_fit_dns() {
        assert!(fits_dns("web-0.web.default.svc.cluster.local"));
        assert!(!fits_dns(&format!(
            "{}-0.web.default.svc.cluster.local",
            "g".repeat(63)
        )));
        assert!(fits_dns(&format!(
            "{}-0.web.default.svc.cluster.local",
            "g".repeat(61)
        )));
        let long = format!(
            "w-0.{}.svc.cluster.local",
            vec!["n".repeat(60); 4].join(".")
        );
        assert!(!fits_dns(&long));
    }
}
