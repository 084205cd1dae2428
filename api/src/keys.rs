//! Newtypes for the strings a grid is made of, so a site is never passed
//! where a label key or a template name is expected.
//!
//! All three serialize as plain strings: the YAML users write is unchanged.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The node label key that groups nodes into sites (SuperEdge `gridUniqKey`),
/// e.g. `location`.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct GridUniqKey(pub String);

/// The name of one of a grid's sites: a distinct value of the [`GridUniqKey`]
/// node label, e.g. `beijing` (SuperEdge calls it a NodeUnit, as it does the
/// site-manager resource; this is only its name).
#[derive(
    Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct SiteName(pub String);

/// The name of a workload template in a grid's `templatePool`; `default`
/// means the grid's own `spec.template`.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct TemplateName(pub String);

impl TemplateName {
    /// The reserved name that means "the grid's `spec.template`", and the
    /// value of an absent `defaultTemplateName` (as in SuperEdge).
    pub const DEFAULT: &'static str = "default";

    /// Whether this name selects `spec.template` rather than a pool entry.
    pub fn is_default(&self) -> bool {
        self.0 == Self::DEFAULT
    }
}

macro_rules! string_newtype {
    ($($t:ident),*) => {$(
        impl $t {
            /// The wrapped string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $t {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }
    )*};
}

string_newtype!(GridUniqKey, SiteName, TemplateName);
