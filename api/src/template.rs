//! A `templatePool` entry as the grid holds it: read, or kept as sent.
//!
//! The CRD's schema types every pool entry as a Deployment/StatefulSet spec,
//! but a grid stored under a looser CRD (SuperEdge's own, or before its
//! schema was installed) can hold anything there: a string of broken YAML,
//! `replicas: "three"`. Were the entry typed, one such grid would fail the
//! whole list the controller's watcher decodes, and no grid of its kind would
//! be reconciled. Read as a [`Template`], the grid decodes, the entry keeps
//! its bytes (so a multi-cluster copy carries it unchanged), and only the
//! sites that use it fail, saying why.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// One workload template: the spec, or the JSON that could not be read as one.
#[derive(Clone, Debug, PartialEq)]
pub enum Template<T> {
    /// Read as a spec.
    Parsed(T),
    /// Not a spec: what the API server holds, and the decoder's complaint.
    Unreadable {
        /// The entry as stored.
        raw: Value,
        /// Why it is not a spec, e.g. `invalid type: string "x", expected i32`.
        error: String,
    },
}

impl<T> Template<T> {
    /// The spec, or why there is none.
    pub fn spec(&self) -> Result<&T, &str> {
        match self {
            Self::Parsed(spec) => Ok(spec),
            Self::Unreadable { error, .. } => Err(error),
        }
    }
}

impl<T: Default> Default for Template<T> {
    fn default() -> Self {
        Self::Parsed(T::default())
    }
}

impl<T> From<T> for Template<T> {
    fn from(spec: T) -> Self {
        Self::Parsed(spec)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Template<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(deserializer)?;
        Ok(match T::deserialize(&raw) {
            Ok(spec) => Self::Parsed(spec),
            Err(err) => Self::Unreadable {
                error: err.to_string(),
                raw,
            },
        })
    }
}

impl<T: Serialize> Serialize for Template<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Parsed(spec) => spec.serialize(serializer),
            Self::Unreadable { raw, .. } => raw.serialize(serializer),
        }
    }
}

/// The schema is the spec's: the CRD still validates what `kubectl apply` sends.
impl<T: JsonSchema> JsonSchema for Template<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentSpec;
    use serde_json::json;

    #[test]
    fn garbage_is_kept_with_the_reason_and_written_back_unchanged() {
        for raw in [
            json!("replicas: [oops"),
            json!({"replicas": "three"}),
            json!(42),
            json!(null),
        ] {
            let template: Template<DeploymentSpec> = serde_json::from_value(raw.clone()).unwrap();
            let error = template.spec().unwrap_err();
            assert!(error.starts_with("invalid type") || error.starts_with("missing field"));
            assert_eq!(serde_json::to_value(&template).unwrap(), raw);
        }
    }

    #[test]
    fn a_spec_reads_as_one() {
        let raw = json!({"replicas": 2, "selector": {}, "template": {}});
        let template: Template<DeploymentSpec> = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(template.spec().unwrap().replicas, Some(2));
        assert_eq!(serde_json::to_value(&template).unwrap(), raw);
    }
}
