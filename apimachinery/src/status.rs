//! The `Status` object: every error kube-apiserver (and so the proxy) makes up.
//!
//! Field order and omission rules follow kube-apiserver 1.20 exactly, e.g.
//! `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
//! "message":"services \"nope\" not found","reason":"NotFound",
//! "details":{"name":"nope","kind":"services"},"code":404}` followed by `\n`.

use serde::{Deserialize, Serialize};

/// A `meta.k8s.io/v1` Status with `status: Failure`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Always `"Status"`.
    pub kind: String,
    /// Always `"v1"`.
    pub api_version: String,
    /// List metadata; only `continue` is ever set (on an expired continue token).
    pub metadata: StatusMeta,
    /// `"Failure"` for every error.
    pub status: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Machine-readable reason (`NotFound`, `BadRequest`, `Expired`, ...); absent for some 500s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Extra detail about the object or the causes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code this Status travels with.
    pub code: u16,
}

/// `Status.metadata`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusMeta {
    /// A fresh continue token, sent with `410 Expired` for an expired one.
    #[serde(default, rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_: Option<String>,
}

/// `Status.details`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// Name of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// API group of the resource, e.g. `discovery.k8s.io`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Resource (plural, lower case) or kind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Individual causes (validation failures and the like).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds the client should wait before retrying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u32>,
}

/// One entry of `Status.details.causes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// Machine-readable cause, e.g. `FieldValueForbidden`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable description of the cause.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The field the cause refers to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl StatusCause {
    /// `FieldValueForbidden` on `field`, worded as Go's `field.Forbidden`.
    pub fn forbidden(field: &str, message: &str) -> Self {
        StatusCause {
            reason: "FieldValueForbidden".into(),
            message: format!("Forbidden: {message}"),
            field: field.into(),
        }
    }

    /// `FieldValueNotSupported` on `field`, worded as Go's `field.NotSupported`.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let supported: Vec<String> = supported.iter().map(|v| format!("\"{v}\"")).collect();
        StatusCause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: \"{value}\": supported values: {}",
                supported.join(", ")
            ),
            field: field.into(),
        }
    }
}

impl Status {
    /// A failure with the given code, reason and message and no details.
    pub fn failure(code: u16, reason: Option<&str>, message: impl Into<String>) -> Self {
        Status {
            kind: "Status".into(),
            api_version: "v1".into(),
            metadata: StatusMeta::default(),
            status: "Failure".into(),
            message: message.into(),
            reason: reason.map(str::to_owned),
            details: None,
            code,
        }
    }

    /// `404 NotFound` for a named object: `services "nope" not found`, or
    /// `endpointslices.discovery.k8s.io "nope" not found` for a grouped resource.
    pub fn not_found(resource: &str, group: &str, name: &str) -> Self {
        let qualified = if group.is_empty() {
            resource.to_owned()
        } else {
            format!("{resource}.{group}")
        };
        let mut s = Self::failure(
            404,
            Some("NotFound"),
            format!("{qualified} \"{name}\" not found"),
        );
        s.details = Some(StatusDetails {
            name: name.into(),
            group: group.into(),
            kind: resource.into(),
            ..Default::default()
        });
        s
    }

    /// `404 NotFound` for a path the server does not serve at all.
    pub fn not_found_resource() -> Self {
        let mut s = Self::failure(
            404,
            Some("NotFound"),
            "the server could not find the requested resource",
        );
        s.details = Some(StatusDetails::default());
        s
    }

    /// `400 BadRequest` with a message.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::failure(400, Some("BadRequest"), message)
    }

    /// `410 Expired`, e.g. `too old resource version: 1 (446)`.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::failure(410, Some("Expired"), message)
    }

    /// `410 Expired` for a watch that started from, or fell behind to, a version the
    /// event log no longer holds: `too old resource version: <requested> (<oldest - 1>)`.
    pub fn too_old_resource_version(requested: u64, oldest_available_minus_one: u64) -> Self {
        Self::expired(format!(
            "too old resource version: {requested} ({oldest_available_minus_one})"
        ))
    }

    /// `500` with no reason, as kube-apiserver sends for unparsable resourceVersions.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::failure(500, None, message)
    }

    /// `500 InternalError` with a reason, for unexpected server-side failures.
    pub fn internal_error(message: impl Into<String>) -> Self {
        Self::failure(500, Some("InternalError"), message)
    }

    /// `504 Timeout` for a resourceVersion the cache has not reached within the wait.
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut s = Self::failure(
            504,
            Some("Timeout"),
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        );
        s.details = Some(StatusDetails {
            causes: vec![StatusCause {
                reason: "ResourceVersionTooLarge".into(),
                message: "Too large resource version".into(),
                field: String::new(),
            }],
            retry_after_seconds: Some(1),
            ..Default::default()
        });
        s
    }

    /// `422 Invalid` for an object of `kind` in `group`, with field causes.
    /// The message is `<Kind>.<group> "<name>" is invalid: <cause>[, <cause>]` as
    /// kube-apiserver words it, a single cause being `field: message`.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<StatusCause>) -> Self {
        let what: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let list = if what.len() == 1 {
            what[0].clone()
        } else {
            format!("[{}]", what.join(", "))
        };
        let mut s = Self::failure(
            422,
            Some("Invalid"),
            format!("{kind}.{group} \"{name}\" is invalid: {list}"),
        );
        s.details = Some(StatusDetails {
            name: name.into(),
            group: group.into(),
            kind: kind.into(),
            causes,
            ..Default::default()
        });
        s
    }

    /// `405 MethodNotAllowed` for a verb the resource does not support.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::failure(405, Some("MethodNotAllowed"), message)
    }

    /// `406 NotAcceptable` when no offered media type can be produced.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::failure(406, Some("NotAcceptable"), message)
    }

    /// `413 RequestEntityTooLarge` for an oversized request body.
    pub fn request_entity_too_large(message: impl Into<String>) -> Self {
        Self::failure(413, Some("RequestEntityTooLarge"), message)
    }

    /// `429 TooManyRequests`, with a retry hint.
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u32) -> Self {
        let mut s = Self::failure(429, Some("TooManyRequests"), message);
        s.details = Some(StatusDetails {
            retry_after_seconds: Some(retry_after_seconds),
            ..Default::default()
        });
        s
    }

    /// `503 ServiceUnavailable`, with a retry hint.
    pub fn service_unavailable(message: impl Into<String>, retry_after_seconds: u32) -> Self {
        let mut s = Self::failure(503, Some("ServiceUnavailable"), message);
        s.details = Some(StatusDetails {
            retry_after_seconds: Some(retry_after_seconds),
            ..Default::default()
        });
        s
    }

    /// 503 `ServiceUnavailable` without `Retry-After`: the client is not
    /// asked to come back (client-go retries a 5xx that carries one up to ten
    /// times inside the request, holding its caller), it gets its error at
    /// once and decides itself.
    pub fn unavailable_now(message: impl Into<String>) -> Self {
        Self::failure(503, Some("ServiceUnavailable"), message)
    }

    /// The compact JSON body followed by `\n`, as kube-apiserver writes it.
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing a struct of strings, integers and vectors cannot fail.
        let mut out = serde_json::to_vec(self).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// The 2-space indented form kube-apiserver falls back to when content
    /// negotiation itself failed (see the reference, §0 and §9).
    pub fn to_json_fallback(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// This Status as a JSON value (for embedding in a watch ERROR event).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for Status {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_matches_apiserver_bytes() {
        let body = Status::not_found("services", "", "nope").to_json();
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"services \\\"nope\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"nope\",\"kind\":\"services\"},\"code\":404}\n"
        );
        // The reference capture reports content-length 184 for this body.
        assert_eq!(body.len(), 184);
    }

    #[test]
    fn grouped_not_found_names_the_group() {
        let body = String::from_utf8(
            Status::not_found("endpointslices", "discovery.k8s.io", "nope").to_json(),
        )
        .unwrap();
        assert!(
            body.contains("\"message\":\"endpointslices.discovery.k8s.io \\\"nope\\\" not found\"")
        );
        assert!(body.contains("\"details\":{\"name\":\"nope\",\"group\":\"discovery.k8s.io\",\"kind\":\"endpointslices\"}"));
    }

    #[test]
    fn too_large_rv_matches_apiserver_bytes() {
        let body = Status::too_large_resource_version(999999999, 434).to_json();
        assert_eq!(
            std::str::from_utf8(&body).unwrap().trim_end(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 999999999, current: 434","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}"#
        );
    }

    #[test]
    fn internal_has_no_reason() {
        let body = String::from_utf8(Status::internal("boom").to_json()).unwrap();
        assert_eq!(
            body.trim_end(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"boom","code":500}"#
        );
    }

    #[test]
    fn expired_continue_carries_token() {
        let mut s = Status::expired("too old");
        s.metadata.continue_ = Some("abc".into());
        let body = String::from_utf8(s.to_json()).unwrap();
        assert!(body.starts_with(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{"continue":"abc"},"status":"Failure""#
        ));
    }
}
