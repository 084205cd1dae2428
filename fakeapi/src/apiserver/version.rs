//! Which kube-apiserver release the server plays, and the feature gates of
//! that release that change what a list/watch client sees.
//!
//! What differs per release (sources: `docs/research/kube-proxy-1.29-1.35.md`,
//! "the note", and the Kubernetes tags named there):
//!
//! | | 1.20 | 1.31 | 1.35 |
//! |---|---|---|---|
//! | `/version` | v1.20.2 | v1.31.0 | v1.35.0 (with the emulation fields, apimachinery v0.33+) |
//! | EndpointSlices | v1 or v1beta1 (configurable, as before) | v1 only (v1beta1 removed in 1.25) | v1 only |
//! | `servicecidrs` | 404 | v1beta1, only with gate MultiCIDRServiceAllocator (Beta, off) | v1 (GA, gate locked on) |
//! | WatchList (`sendInitialEvents`) | 400, as this server always answered | 422 unless gate WatchList (Alpha, off) | served (gate Beta, on) |
//! | Service field labels | `metadata.*` | + `spec.clusterIP`, `spec.type` | same |
//! | `creationTimestamp: null` in bookmarks | yes | yes | omitted (`omitzero`, apimachinery v0.34+) |

use std::fmt;
use std::str::FromStr;

use serde_json::{json, Value};

/// A Kubernetes release whose kube-apiserver the server plays.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KubernetesVersion {
    /// 1.20: what this server has always played (the reference captures).
    #[default]
    V1_20,
    /// 1.31: ServiceCIDRs and WatchList exist behind gates that are off.
    V1_31,
    /// 1.35: ServiceCIDRs (v1) and WatchList on.
    V1_35,
}

impl KubernetesVersion {
    /// Every release the server can play, oldest first.
    pub const ALL: [KubernetesVersion; 3] = [
        KubernetesVersion::V1_20,
        KubernetesVersion::V1_31,
        KubernetesVersion::V1_35,
    ];

    /// The minor version: 20, 31, 35.
    pub fn minor(self) -> u32 {
        match self {
            KubernetesVersion::V1_20 => 20,
            KubernetesVersion::V1_31 => 31,
            KubernetesVersion::V1_35 => 35,
        }
    }

    /// `/version` as that release's kube-apiserver answers it. The build
    /// facts are those of the published release binaries (1.20: the
    /// reference capture; 1.31.0 and 1.35.0: `/version` outputs quoted in
    /// public material).
    pub fn version_info(self) -> Value {
        match self {
            KubernetesVersion::V1_20 => json!({
                "major": "1", "minor": "20", "gitVersion": "v1.20.2",
                "gitCommit": "faecb196815e248d3ecfb03c680a4507229c2a56", "gitTreeState": "clean",
                "buildDate": "2021-01-13T13:20:00Z", "goVersion": "go1.15.5",
                "compiler": "gc", "platform": "linux/amd64"
            }),
            KubernetesVersion::V1_31 => json!({
                "major": "1", "minor": "31", "gitVersion": "v1.31.0",
                "gitCommit": "9edcffcde5595e8a5b1a35f88c421764e575afce", "gitTreeState": "clean",
                "buildDate": "2024-08-13T22:44:37Z", "goVersion": "go1.22.5",
                "compiler": "gc", "platform": "linux/amd64"
            }),
            // version.Info grew the emulation and compatibility fields in
            // apimachinery v0.33.
            KubernetesVersion::V1_35 => json!({
                "major": "1", "minor": "35",
                "emulationMajor": "1", "emulationMinor": "35",
                "minCompatibilityMajor": "1", "minCompatibilityMinor": "34",
                "gitVersion": "v1.35.0",
                "gitCommit": "66452049f3d692768c39c797b21b793dce80314e", "gitTreeState": "clean",
                "buildDate": "2025-12-17T12:32:07Z", "goVersion": "go1.25.5",
                "compiler": "gc", "platform": "linux/amd64"
            }),
        }
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor())
    }
}

impl FromStr for KubernetesVersion {
    type Err = ConfigError;

    /// `1.20`, `1.31`, `1.35` (a leading `v` is accepted).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bare = s.strip_prefix('v').unwrap_or(s);
        KubernetesVersion::ALL
            .into_iter()
            .find(|v| v.to_string() == bare)
            .ok_or_else(|| ConfigError::UnknownVersion(s.to_owned()))
    }
}

/// kube-apiserver feature gates set away from the release's default
/// (`--feature-gates`); `None` keeps the default. Only the gates that
/// change what this server answers are here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// `WatchList`: serve `sendInitialEvents=true` watches. 1.31: Alpha,
    /// off; 1.35: Beta, on (the note §3.4). Does not exist in 1.20.
    pub watch_list: Option<bool>,
    /// `MultiCIDRServiceAllocator`: serve `servicecidrs` and create the
    /// default one. 1.31: Beta, off, and its `networking.k8s.io/v1beta1`
    /// must also be enabled, which this gate stands for here; 1.35: GA,
    /// locked on (the note §2.3). Does not exist in 1.20.
    pub multi_cidr_service_allocator: Option<bool>,
}

impl FeatureGates {
    /// Parse kube-apiserver's `--feature-gates` syntax:
    /// `WatchList=true,MultiCIDRServiceAllocator=false`.
    pub fn parse(s: &str) -> Result<FeatureGates, ConfigError> {
        let mut gates = FeatureGates::default();
        for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| ConfigError::BadGate(pair.to_owned()))?;
            let value = match value.trim() {
                "true" => true,
                "false" => false,
                _ => return Err(ConfigError::BadGate(pair.to_owned())),
            };
            match name.trim() {
                WATCH_LIST => gates.watch_list = Some(value),
                MULTI_CIDR => gates.multi_cidr_service_allocator = Some(value),
                other => return Err(ConfigError::UnknownGate(other.to_owned())),
            }
        }
        Ok(gates)
    }
}

const WATCH_LIST: &str = "WatchList";
const MULTI_CIDR: &str = "MultiCIDRServiceAllocator";

/// A configuration the played release would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not one of the releases this server plays.
    #[error("unknown Kubernetes version {0:?}: this server plays 1.20, 1.31 and 1.35")]
    UnknownVersion(String),
    /// A gate this server does not model.
    #[error("unrecognized feature gate: {0} (this server models WatchList and MultiCIDRServiceAllocator)")]
    UnknownGate(String),
    /// Not `Name=true|false`.
    #[error("invalid feature gate {0:?}: want Name=true or Name=false")]
    BadGate(String),
    /// The gate does not exist in that release.
    #[error("unrecognized feature gate: {gate} (it does not exist in Kubernetes {version})")]
    GateNotInVersion {
        /// The gate.
        gate: &'static str,
        /// The release played.
        version: KubernetesVersion,
    },
    /// The gate is locked to its default in that release.
    #[error("cannot set feature gate {gate} to {value}, feature is locked to {}", !value)]
    GateLocked {
        /// The gate.
        gate: &'static str,
        /// The value asked for.
        value: bool,
    },
    /// The EndpointSlice version is not served by that release.
    #[error("Kubernetes {version} serves EndpointSlices in discovery.k8s.io/v1 only (v1beta1 was removed in 1.25), not {asked:?}")]
    EndpointSliceVersion {
        /// The release played.
        version: KubernetesVersion,
        /// The version asked for.
        asked: String,
    },
}

/// What a configuration resolves to: the facts every part of the server
/// reads (routing, discovery, watch, the sample world).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Profile {
    /// The release played.
    pub version: KubernetesVersion,
    /// The served discovery.k8s.io version.
    pub endpointslice_version: &'static str,
    /// Whether `sendInitialEvents` watches are served.
    pub watch_list: bool,
    /// The networking.k8s.io version `servicecidrs` is served in, if any.
    pub service_cidrs: Option<&'static str>,
}

impl Profile {
    /// Resolve a release, its gates and the EndpointSlice version asked for.
    pub fn new(
        version: KubernetesVersion,
        gates: FeatureGates,
        endpointslice_version: &'static str,
    ) -> Result<Profile, ConfigError> {
        use KubernetesVersion::{V1_20, V1_31, V1_35};
        let (watch_list, multi_cidr) = match version {
            V1_20 => {
                for (gate, set) in [
                    (WATCH_LIST, gates.watch_list),
                    (MULTI_CIDR, gates.multi_cidr_service_allocator),
                ] {
                    if set.is_some() {
                        return Err(ConfigError::GateNotInVersion { gate, version });
                    }
                }
                (false, false)
            }
            V1_31 => (
                gates.watch_list.unwrap_or(false),
                gates.multi_cidr_service_allocator.unwrap_or(false),
            ),
            V1_35 => {
                if gates.multi_cidr_service_allocator == Some(false) {
                    return Err(ConfigError::GateLocked {
                        gate: MULTI_CIDR,
                        value: false,
                    });
                }
                (gates.watch_list.unwrap_or(true), true)
            }
        };
        let endpointslice_version = match (version, endpointslice_version) {
            (_, "v1") => "v1",
            (V1_20, "v1beta1") => "v1beta1",
            (_, other) => {
                return Err(ConfigError::EndpointSliceVersion {
                    version,
                    asked: other.to_owned(),
                })
            }
        };
        let service_cidrs = match (version, multi_cidr) {
            (V1_31, true) => Some("v1beta1"),
            (V1_35, _) => Some("v1"),
            _ => None,
        };
        Ok(Profile {
            version,
            endpointslice_version,
            watch_list,
            service_cidrs,
        })
    }

    /// Kubernetes 1.20 serving EndpointSlices at `endpointslice_version`
    /// ("v1" or "v1beta1"; anything else is taken as "v1").
    #[cfg(test)]
    pub fn v1_20(endpointslice_version: &'static str) -> Profile {
        Profile {
            version: KubernetesVersion::V1_20,
            endpointslice_version: if endpointslice_version == "v1beta1" {
                "v1beta1"
            } else {
                "v1"
            },
            watch_list: false,
            service_cidrs: None,
        }
    }

    /// Whether this release validates watch options as apimachinery v0.27+
    /// does (`sendInitialEvents`, `resourceVersionMatch` on a watch) rather
    /// than as this server answered for 1.20.
    pub fn validates_watch_list_options(self) -> bool {
        self.version >= KubernetesVersion::V1_31
    }

    /// Whether an unset `creationTimestamp` is written as `null` (bookmark
    /// objects): until apimachinery v0.34 tagged it `omitzero`.
    pub fn null_creation_timestamp(self) -> bool {
        self.version < KubernetesVersion::V1_35
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_print() {
        for v in KubernetesVersion::ALL {
            assert_eq!(v.to_string().parse::<KubernetesVersion>(), Ok(v));
        }
        assert_eq!("v1.35".parse(), Ok(KubernetesVersion::V1_35));
        assert!("1.33".parse::<KubernetesVersion>().is_err());
    }

    #[test]
    fn gates_resolve_per_release() {
        let none = FeatureGates::default();
        let p = Profile::new(KubernetesVersion::V1_31, none, "v1").unwrap();
        assert_eq!((p.watch_list, p.service_cidrs), (false, None));
        let on = FeatureGates::parse("WatchList=true, MultiCIDRServiceAllocator=true").unwrap();
        let p = Profile::new(KubernetesVersion::V1_31, on, "v1").unwrap();
        assert_eq!((p.watch_list, p.service_cidrs), (true, Some("v1beta1")));
        let p = Profile::new(KubernetesVersion::V1_35, none, "v1").unwrap();
        assert_eq!((p.watch_list, p.service_cidrs), (true, Some("v1")));
        let off = FeatureGates::parse("WatchList=false").unwrap();
        assert!(
            !Profile::new(KubernetesVersion::V1_35, off, "v1")
                .unwrap()
                .watch_list
        );
        let locked = FeatureGates::parse("MultiCIDRServiceAllocator=false").unwrap();
        assert_eq!(
            Profile::new(KubernetesVersion::V1_35, locked, "v1")
                .unwrap_err()
                .to_string(),
            "cannot set feature gate MultiCIDRServiceAllocator to false, feature is locked to true"
        );
        assert!(Profile::new(KubernetesVersion::V1_20, on, "v1").is_err());
        assert!(Profile::new(KubernetesVersion::V1_35, none, "v1beta1").is_err());
        assert_eq!(
            Profile::new(KubernetesVersion::V1_20, none, "v1beta1").unwrap(),
            Profile::v1_20("v1beta1")
        );
        assert!(FeatureGates::parse("Foo=true").is_err());
        assert!(FeatureGates::parse("WatchList").is_err());
    }
}
