//! Names of the objects a grid generates.
//!
//! # The rule
//!
//! A child is named `{grid}-{unit}` (workloads) or `{grid}-svc` (the Service),
//! as in SuperEdge, when that name is valid for its kind:
//!
//! | kind        | must be                 | longest | why the limit                                     |
//! |-------------|-------------------------|---------|---------------------------------------------------|
//! | Deployment  | DNS-1123 subdomain      | 253     | object name                                       |
//! | StatefulSet | DNS-1123 label          | 52      | `controller-revision-hash` label `{name}-{hash}` ≤ 63 |
//! | Service     | DNS-1035 label          | 63      | Service names are DNS-1035 labels                 |
//! | NodeUnit (auto-found) | DNS-1123 label | 63     | also a node label key and value                   |
//!
//! Otherwise (a site value with upper case or `_`, or a name that is too long)
//! the name is made valid: lower-cased, every other character that is not
//! allowed becomes `-`, shortened so that `-` and 8 hex digits fit, stripped of
//! trailing `-`/`.`, and suffixed with `-{hash}`, where `hash` is the 32-bit
//! FNV-1a of the original `{grid}-{unit}` in lower-case hex. The hash depends
//! only on that string, so the name is stable across restarts and versions,
//! and two sites that clean up to the same text still get different names.

/// The naming rules of the kinds a grid generates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain, at most 253 characters (Deployments).
    Subdomain,
    /// DNS-1123 label, at most 52 characters (StatefulSets).
    StatefulSetLabel,
    /// DNS-1035 label, at most 63 characters (Services).
    ServiceLabel,
    /// DNS-1123 label, at most 63 characters: a NodeUnit found by a
    /// NodeGroup's `autoFindNodeKeys`, whose name is also a node label key
    /// (`{unit}: nodeunits.superedge.io`) and value (`{group}={unit}`).
    UnitLabel,
}

impl NameRule {
    fn max_len(self) -> usize {
        match self {
            Self::Subdomain => 253,
            Self::StatefulSetLabel => 52,
            Self::ServiceLabel | Self::UnitLabel => 63,
        }
    }

    fn allows_dots(self) -> bool {
        self == Self::Subdomain
    }

    fn is_valid(self, name: &str) -> bool {
        let lower_alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        let first_ok = match self {
            Self::ServiceLabel => name.starts_with(|c: char| c.is_ascii_lowercase()),
            _ => name.starts_with(lower_alnum),
        };
        let parts_ok = if self.allows_dots() {
            name.split('.').all(is_label_shaped)
        } else {
            is_label_shaped(name)
        };
        name.len() <= self.max_len() && first_ok && parts_ok
    }
}

/// Lower-case alphanumerics and `-`, starting and ending alphanumeric.
fn is_label_shaped(s: &str) -> bool {
    let lower_alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    s.starts_with(lower_alnum)
        && s.ends_with(lower_alnum)
        && s.chars().all(|c| lower_alnum(c) || c == '-')
}

/// The name of a grid's workload in one site: `{grid}-{site}` under `rule`
/// ([`NameRule::Subdomain`] for Deployments, [`NameRule::StatefulSetLabel`]
/// for StatefulSets).
pub fn site_child_name(grid: &str, site: &str, rule: NameRule) -> String {
    child_name(&format!("{grid}-{site}"), rule)
}

/// The name of a ServiceGrid's Service: `{grid}-svc` as a Service name.
pub fn service_name(grid: &str) -> String {
    child_name(&format!("{grid}-svc"), NameRule::ServiceLabel)
}

/// The name for a child whose natural name is `wanted`, under `rule` (see the module docs).
pub fn child_name(wanted: &str, rule: NameRule) -> String {
    if rule.is_valid(wanted) {
        return wanted.to_owned();
    }
    let suffix = format!("{:08x}", fnv1a32(wanted.as_bytes()));
    let keep = rule.max_len() - suffix.len() - 1;
    let cleaned: String = wanted
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' => c,
            '.' if rule.allows_dots() => c,
            _ => '-',
        })
        .take(keep)
        .collect();
    let cleaned = cleaned.trim_end_matches(['-', '.']);
    // A leading character that the rule forbids is dropped rather than kept:
    // the hash already makes the name unique.
    let cleaned = match rule {
        NameRule::ServiceLabel => cleaned.trim_start_matches(|c: char| !c.is_ascii_lowercase()),
        _ => cleaned.trim_start_matches(['-', '.']),
    };
    if cleaned.is_empty() {
        // A DNS-1035 label must start with a letter; the hash may not.
        return format!("x-{suffix}");
    }
    let name = format!("{cleaned}-{suffix}");
    // Dots next to dashes (`a.-b`) are the one shape cleaning can leave
    // invalid in a subdomain; replace the dots then.
    if rule.is_valid(&name) {
        name
    } else {
        name.replace('.', "-")
    }
}

/// 32-bit FNV-1a: tiny, dependency-free and fixed forever, which is all a
/// name suffix needs (it is not a security boundary).
fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |hash, &b| {
        (hash ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names_are_kept() {
        assert_eq!(
            child_name("deploymentgrid-demo-beijing", NameRule::Subdomain),
            "deploymentgrid-demo-beijing"
        );
        assert_eq!(child_name("a.b-c", NameRule::Subdomain), "a.b-c");
        assert_eq!(
            child_name("servicegrid-demo-svc", NameRule::ServiceLabel),
            "servicegrid-demo-svc"
        );
    }

    #[test]
    fn fnv1a32_matches_reference_vectors() {
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn invalid_characters_get_cleaned_and_hashed() {
        let name = child_name("demo-Zone_1", NameRule::Subdomain);
        assert_eq!(name, format!("demo-zone-1-{:08x}", fnv1a32(b"demo-Zone_1")));
        assert!(NameRule::Subdomain.is_valid(&name));
    }

    #[test]
    fn sites_that_clean_up_alike_stay_distinct() {
        let a = child_name("demo-Zone_1", NameRule::Subdomain);
        let b = child_name("demo-zone.1", NameRule::StatefulSetLabel);
        let c = child_name("demo-zone_1", NameRule::Subdomain);
        assert_ne!(a, c);
        assert!(b.starts_with("demo-zone-1-"));
    }

    #[test]
    fn long_names_are_cut_to_the_kind_limit() {
        let wanted = format!("{}-beijing", "g".repeat(60));
        let sts = child_name(&wanted, NameRule::StatefulSetLabel);
        assert_eq!(sts.len(), 52);
        assert_eq!(
            sts,
            format!("{}-{:08x}", "g".repeat(43), fnv1a32(wanted.as_bytes()))
        );
        // The same name fits a Deployment unchanged.
        assert_eq!(child_name(&wanted, NameRule::Subdomain), wanted);
    }

    #[test]
    fn the_hash_is_stable() {
        // Pinned: changing the rule would rename every hashed child in every cluster.
        assert_eq!(
            child_name("Demo-SVC", NameRule::ServiceLabel),
            "demo-svc-44491499"
        );
    }

    #[test]
    fn service_names_start_with_a_letter() {
        let name = child_name("1demo-svc", NameRule::ServiceLabel);
        assert!(name.starts_with("demo-svc-"), "{name}");
        assert!(NameRule::ServiceLabel.is_valid(&name));
        assert!(NameRule::ServiceLabel.is_valid(&child_name("1-svc", NameRule::ServiceLabel)));
    }

    #[test]
    fn every_output_is_valid() {
        let inputs = ["a.-b-c", "-x-", "A..B", "…unicode…", "x", ".svc"];
        for rule in [
            NameRule::Subdomain,
            NameRule::StatefulSetLabel,
            NameRule::ServiceLabel,
        ] {
            for input in inputs {
                let name = child_name(input, rule);
                assert!(rule.is_valid(&name), "{rule:?} {input:?} -> {name:?}");
            }
        }
    }
}
