//! Server-side `Table`s (`meta.k8s.io/v1` or `v1beta1`), what `kubectl get`
//! asks for with `Accept: application/json;as=Table;…`.
//!
//! Columns and cells reproduce kube-apiserver 1.20's printers
//! (`pkg/printers/internalversion/printers.go`) for the four resources sitegrid
//! serves. The apiserver always prints "wide" (priority-1 columns included) and
//! takes each column's description from the OpenAPI docs of the field it shows;
//! the strings below are the 1.20.2 ones, verbatim.
//!
//! This file dispatches per resource and builds rows and tables; each
//! resource's columns and cells live in its own file (`service.rs`,
//! `endpoints.rs`, `endpointslice.rs`, `node.rs`).

use serde_json::{json, Map, Value};

use crate::duration::{human_duration_signed, parse_rfc3339};
use crate::selector::go_quote;

mod endpoints;
mod endpointslice;
#[cfg(test)]
mod fixtures;
mod node;
mod service;
mod servicecidr;

/// What a row's `object` carries, from the `includeObject` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// A `PartialObjectMetadata` with the object's full metadata (the default).
    #[default]
    Metadata,
    /// The whole object, with its own kind and apiVersion.
    Object,
    /// `"object": null`.
    None,
}

impl IncludeObject {
    /// Parses `includeObject`; absent or empty means `Metadata`. The error is
    /// the message of the `400 BadRequest` Status the apiserver sends.
    pub fn parse(v: Option<&str>) -> Result<IncludeObject, String> {
        match v.unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "Object" => Ok(IncludeObject::Object),
            "None" => Ok(IncludeObject::None),
            other => Err(format!(
                "Unable to convert to Table as requested: includeObject: Invalid value: \
                 {}: must be 'Metadata', 'Object', 'None', or empty",
                go_quote(other)
            )),
        }
    }
}

/// `metav1.ObjectMeta{}.SwaggerDoc()["name"]`.
const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: http://kubernetes.io/docs/user-guide/identifiers#names";
/// `metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]`.
const AGE_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// One column: name, format, description, priority (every type is "string").
type Column = (&'static str, &'static str, &'static str, u8);

fn columns(resource: &str) -> Option<&'static [Column]> {
    match resource {
        "services" => Some(service::COLUMNS),
        "endpoints" => Some(endpoints::COLUMNS),
        "endpointslices" => Some(endpointslice::COLUMNS),
        "nodes" => Some(node::COLUMNS),
        "servicecidrs" => Some(servicecidr::COLUMNS),
        _ => None,
    }
}

/// The `columnDefinitions` array for `resource` (plural, lower case), each
/// `{"name","type","format","description","priority"}` in that key order;
/// `None` for a resource without a printer here.
pub fn column_definitions(resource: &str) -> Option<Value> {
    let cols = columns(resource)?;
    let defs = cols
        .iter()
        .map(|&(name, format, description, priority)| {
            json!({
                "name": name,
                "type": "string",
                "format": format,
                "description": description,
                "priority": priority,
            })
        })
        .collect();
    Some(Value::Array(defs))
}

/// The cells of one row, all strings, in column order; empty for a resource
/// without a printer here. `now_unix` is the request time, for `Age`.
pub fn row_cells(resource: &str, object: &Value, now_unix: i64) -> Vec<String> {
    let name = str_at(object, &["metadata", "name"]).to_string();
    let age = age(object, now_unix);
    match resource {
        "services" => service::cells(object, name, age),
        "endpoints" => endpoints::cells(object, name, age),
        "endpointslices" => endpointslice::cells(object, name, age),
        "nodes" => node::cells(object, name, age),
        "servicecidrs" => servicecidr::cells(object, name, age),
        _ => Vec::new(),
    }
}

/// One row `{"cells":[...],"object":...}`; `object` is a full object WITH kind/apiVersion.
/// Metadata → {"kind":"PartialObjectMetadata","apiVersion":<table_api_version>,"metadata":{...full metadata...}}; Object → the object as given; None → null.
pub fn row(
    resource: &str,
    object: &Value,
    include: IncludeObject,
    table_api_version: &str,
    now_unix: i64,
) -> Value {
    let cells = row_cells(resource, object, now_unix);
    let object = match include {
        IncludeObject::Metadata => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": table_api_version,
            "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
        }),
        IncludeObject::Object => object.clone(),
        IncludeObject::None => Value::Null,
    };
    json!({ "cells": cells, "object": object })
}

/// A whole Table: {"kind":"Table","apiVersion":table_api_version,"metadata":list_meta,"columnDefinitions":cols_or_null,"rows":rows}
/// with_columns=false writes "columnDefinitions":null (used by every Table watch event after the first).
pub fn table(
    resource: &str,
    table_api_version: &str,
    list_meta: Value,
    rows: Vec<Value>,
    with_columns: bool,
) -> Value {
    let columns = if with_columns {
        column_definitions(resource).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let mut t = Map::new();
    t.insert("kind".into(), "Table".into());
    t.insert("apiVersion".into(), table_api_version.into());
    t.insert("metadata".into(), list_meta);
    t.insert("columnDefinitions".into(), columns);
    t.insert("rows".into(), Value::Array(rows));
    Value::Object(t)
}

/// The string at `path`, or `""` when absent or not a string (Go's zero value).
fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or("")
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, key| v.get(key))
}

/// The array at `path`, empty when absent or null.
fn array_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// `translateTimestampSince(creationTimestamp)`.
fn age(object: &Value, now_unix: i64) -> String {
    match parse_rfc3339(str_at(object, &["metadata", "creationTimestamp"])) {
        Some(created) => human_duration_signed(now_unix - created),
        None => "<unknown>".to_string(),
    }
}

/// How many entries the Endpoints cells show before ` + N more...`.
const MAX_LISTED: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixtures::{n1, now, service};

    #[test]
    fn age_handles_missing_and_future_timestamps() {
        let mut node = n1();
        node["metadata"]["creationTimestamp"] = Value::Null;
        assert_eq!(row_cells("nodes", &node, now())[3], "<unknown>");
        node["metadata"]["creationTimestamp"] = "2026-11-21T15:15:07Z".into();
        assert_eq!(row_cells("nodes", &node, now())[3], "0s");
        node["metadata"]["creationTimestamp"] = "2026-11-21T15:15:09Z".into();
        assert_eq!(row_cells("nodes", &node, now())[3], "<invalid>");
    }

    #[test]
    fn column_definitions_match_the_reference_table() {
        type Expected<'a> = &'a [(&'a str, &'a str, u64)];
        let expect: &[(&str, Expected)] = &[
            (
                "services",
                &[
                    ("Name", "name", 0),
                    ("Type", "", 0),
                    ("Cluster-IP", "", 0),
                    ("External-IP", "", 0),
                    ("Port(s)", "", 0),
                    ("Age", "", 0),
                    ("Selector", "", 1),
                ],
            ),
            (
                "endpoints",
                &[("Name", "name", 0), ("Endpoints", "", 0), ("Age", "", 0)],
            ),
            (
                "endpointslices",
                &[
                    ("Name", "name", 0),
                    ("AddressType", "", 0),
                    ("Ports", "", 0),
                    ("Endpoints", "", 0),
                    ("Age", "", 0),
                ],
            ),
            (
                "nodes",
                &[
                    ("Name", "name", 0),
                    ("Status", "", 0),
                    ("Roles", "", 0),
                    ("Age", "", 0),
                    ("Version", "", 0),
                    ("Internal-IP", "", 1),
                    ("External-IP", "", 1),
                    ("OS-Image", "", 1),
                    ("Kernel-Version", "", 1),
                    ("Container-Runtime", "", 1),
                ],
            ),
        ];
        for (resource, cols) in expect {
            let defs = column_definitions(resource).unwrap();
            let got: Vec<(&str, &str, u64)> = defs
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    assert_eq!(d["type"], "string");
                    assert!(!d["description"].as_str().unwrap().is_empty());
                    (
                        d["name"].as_str().unwrap(),
                        d["format"].as_str().unwrap(),
                        d["priority"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(&got, cols, "{resource}");
            // Every printer's row has one cell per column.
            assert_eq!(
                row_cells(resource, &json!({}), now()).len(),
                cols.len(),
                "{resource}"
            );
        }
        assert_eq!(column_definitions("pods"), None);
        assert!(row_cells("pods", &json!({}), now()).is_empty());
    }

    #[test]
    fn column_definition_keys_and_descriptions_are_verbatim() {
        let defs = column_definitions("endpoints").unwrap();
        assert_eq!(
            defs[0].to_string(),
            format!(
                r#"{{"name":"Name","type":"string","format":"name","description":"{NAME_DOC}","priority":0}}"#
            )
        );
        assert!(defs[2].to_string().contains(r#""description":"CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system."#));
    }

    #[test]
    fn include_object_parsing() {
        assert_eq!(IncludeObject::parse(None), Ok(IncludeObject::Metadata));
        assert_eq!(IncludeObject::parse(Some("")), Ok(IncludeObject::Metadata));
        assert_eq!(
            IncludeObject::parse(Some("Metadata")),
            Ok(IncludeObject::Metadata)
        );
        assert_eq!(
            IncludeObject::parse(Some("Object")),
            Ok(IncludeObject::Object)
        );
        assert_eq!(IncludeObject::parse(Some("None")), Ok(IncludeObject::None));
        assert_eq!(
            IncludeObject::parse(Some("Bogus")),
            Err("Unable to convert to Table as requested: includeObject: Invalid value: \"Bogus\": \
                 must be 'Metadata', 'Object', 'None', or empty"
                .to_string())
        );
        assert_eq!(
            IncludeObject::parse(Some("object")).unwrap_err(),
            "Unable to convert to Table as requested: includeObject: Invalid value: \"object\": \
             must be 'Metadata', 'Object', 'None', or empty"
        );
        assert!(IncludeObject::parse(Some("a\"b\n"))
            .unwrap_err()
            .contains(r#"Invalid value: "a\"b\n": must"#));
    }

    #[test]
    fn row_object_per_include_policy() {
        let svc = service(
            "web",
            json!({"type": "ClusterIP", "clusterIPs": ["10.96.130.97"]}),
        );
        let with_meta = row(
            "services",
            &svc,
            IncludeObject::Metadata,
            "meta.k8s.io/v1",
            now(),
        );
        assert_eq!(
            with_meta["object"].to_string(),
            r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"web","namespace":"default","uid":"4a38af75","resourceVersion":"413","creationTimestamp":"2026-11-21T15:12:23Z"}}"#
        );
        let keys: Vec<&String> = with_meta.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["cells", "object"]);
        let beta = row(
            "services",
            &svc,
            IncludeObject::Metadata,
            "meta.k8s.io/v1beta1",
            now(),
        );
        assert_eq!(beta["object"]["apiVersion"], "meta.k8s.io/v1beta1");

        let whole = row(
            "services",
            &svc,
            IncludeObject::Object,
            "meta.k8s.io/v1",
            now(),
        );
        assert_eq!(whole["object"], svc);
        let none = row(
            "services",
            &svc,
            IncludeObject::None,
            "meta.k8s.io/v1",
            now(),
        );
        assert_eq!(
            none.to_string(),
            r#"{"cells":["web","ClusterIP","10.96.130.97","<none>","<none>","2m43s","<none>"],"object":null}"#
        );
    }

    #[test]
    fn table_shape_with_and_without_columns() {
        let r = row("nodes", &n1(), IncludeObject::None, "meta.k8s.io/v1", now());
        let t = table(
            "nodes",
            "meta.k8s.io/v1",
            json!({"resourceVersion": "569"}),
            vec![r.clone()],
            true,
        );
        let keys: Vec<&String> = t.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "kind",
                "apiVersion",
                "metadata",
                "columnDefinitions",
                "rows"
            ]
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["columnDefinitions"], column_definitions("nodes").unwrap());
        assert_eq!(t["rows"], json!([r]));

        let later = table(
            "nodes",
            "meta.k8s.io/v1",
            json!({"resourceVersion": "570"}),
            vec![],
            false,
        );
        assert_eq!(
            later.to_string(),
            r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"570"},"columnDefinitions":null,"rows":[]}"#
        );
    }
}
