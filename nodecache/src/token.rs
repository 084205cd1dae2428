//! Kept service-account tokens: the API server's answers to the kubelet's
//! TokenRequests (`POST …/serviceaccounts/<sa>/token`), each kept with the
//! request it answered, and handed back for the same request while the
//! API server is unreachable, until the token expires. A token is real
//! (the API server issued it for that pod); none is ever made up.
//!
//! After a restart the kubelet asks again with the same request (same
//! service account, audiences, expiry and bound pod, whose uid survives a
//! reboot), so the request's bytes are the key.

use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_pb::api::authentication::v1 as pb;
use prost::Message;
use sitegrid_apimachinery::{duration::parse_rfc3339, protobuf::MAGIC};

use crate::wire::{Format, WireError};

/// One kept answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptToken {
    /// The service account's namespace.
    pub namespace: String,
    /// The service account.
    pub service_account: String,
    /// The request body, as the kubelet sent it.
    pub request: Bytes,
    /// The answer's format.
    pub format: Format,
    /// The answer (a TokenRequest with `status.token`), as the API server sent it.
    pub response: Bytes,
    /// `status.expirationTimestamp`, in seconds since the epoch.
    pub expires_unix: i64,
    /// The uid of the pod the token is bound to (`spec.boundObjectRef`).
    pub pod_uid: String,
}

/// What a kept answer is found by: the service account's namespace and
/// name, and the request's bytes.
pub type TokenKey = (String, String, Bytes);

/// The kept answers.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    by_request: BTreeMap<TokenKey, KeptToken>,
    /// Changed since last written.
    pub dirty: bool,
}

impl Tokens {
    /// Keeps the answer `response` to `request`; what it is found by.
    pub fn keep(
        &mut self,
        namespace: &str,
        service_account: &str,
        request: Bytes,
        format: Format,
        response: Bytes,
    ) -> Result<TokenKey, WireError> {
        let (expires_unix, pod_uid) = read_answer(format, &response)?;
        let token = KeptToken {
            namespace: namespace.to_owned(),
            service_account: service_account.to_owned(),
            request: request.clone(),
            format,
            response,
            expires_unix,
            pod_uid,
        };
        Ok(self.insert(token))
    }

    /// Keeps a token read back from disk; what it is found by.
    pub fn insert(&mut self, token: KeptToken) -> TokenKey {
        let key = (
            token.namespace.clone(),
            token.service_account.clone(),
            token.request.clone(),
        );
        self.by_request.insert(key.clone(), token);
        self.dirty = true;
        key
    }

    /// The token kept under `key`, expired or not.
    pub fn get(&self, key: &TokenKey) -> Option<&KeptToken> {
        self.by_request.get(key)
    }

    /// The kept answer to this request, if its token has not expired by `now_unix`.
    pub fn answer(
        &self,
        namespace: &str,
        service_account: &str,
        request: &[u8],
        now_unix: i64,
    ) -> Option<&KeptToken> {
        self.by_request
            .get(&(
                namespace.to_owned(),
                service_account.to_owned(),
                Bytes::copy_from_slice(request),
            ))
            .filter(|t| t.expires_unix > now_unix)
    }

    /// Drops the tokens `keep` refuses.
    pub fn retain(&mut self, keep: impl Fn(&KeptToken) -> bool) {
        let before = self.by_request.len();
        self.by_request.retain(|_, t| keep(t));
        self.dirty |= self.by_request.len() != before;
    }

    /// Every kept token.
    pub fn iter(&self) -> impl Iterator<Item = &KeptToken> {
        self.by_request.values()
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.by_request.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.by_request.is_empty()
    }
}

/// The expiry and bound pod of a TokenRequest answer.
fn read_answer(format: Format, response: &[u8]) -> Result<(i64, String), WireError> {
    match format {
        Format::Protobuf => {
            let bad = |e: String| WireError::Protobuf("TokenRequest", e);
            let inner = response
                .strip_prefix(MAGIC)
                .ok_or_else(|| bad("no magic".into()))?;
            let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(inner)
                .map_err(|e| bad(e.to_string()))?;
            let tr = pb::TokenRequest::decode(unknown.raw.unwrap_or_default().as_slice())
                .map_err(|e| bad(e.to_string()))?;
            let expires = tr
                .status
                .as_ref()
                .and_then(|s| s.expiration_timestamp.as_ref()?.seconds)
                .ok_or_else(|| bad("no status.expirationTimestamp".into()))?;
            let uid = tr
                .spec
                .and_then(|s| s.bound_object_ref?.u_id)
                .unwrap_or_default();
            Ok((expires, uid))
        }
        Format::Json => {
            let bad = |e: String| WireError::Json("TokenRequest", e);
            let v: serde_json::Value =
                serde_json::from_slice(response).map_err(|e| bad(e.to_string()))?;
            let expires = v["status"]["expirationTimestamp"]
                .as_str()
                .and_then(parse_rfc3339)
                .ok_or_else(|| bad("no status.expirationTimestamp".into()))?;
            let uid = v["spec"]["boundObjectRef"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            Ok((expires, uid))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::apis::meta::v1::Time;
    use sitegrid_apimachinery::protobuf::envelope;

    fn answer(expires: i64, uid: &str) -> Bytes {
        let tr = pb::TokenRequest {
            spec: Some(pb::TokenRequestSpec {
                bound_object_ref: Some(pb::BoundObjectReference {
                    kind: Some("Pod".into()),
                    u_id: Some(uid.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: Some(pb::TokenRequestStatus {
                token: Some("eyJhbGciOi".into()),
                expiration_timestamp: Some(Time {
                    seconds: Some(expires),
                    nanos: None,
                }),
            }),
            metadata: None,
        };
        envelope(
            "authentication.k8s.io/v1",
            "TokenRequest",
            &tr.encode_to_vec(),
        )
    }

    #[test]
    fn the_same_request_gets_the_kept_token_until_it_expires() {
        let mut tokens = Tokens::default();
        let request = Bytes::from_static(b"k8s\0 the request");
        tokens
            .keep(
                "shop",
                "default",
                request.clone(),
                Format::Protobuf,
                answer(1_000, "pod-uid"),
            )
            .unwrap();
        let kept = tokens.answer("shop", "default", &request, 999).unwrap();
        assert_eq!(kept.pod_uid, "pod-uid");
        assert_eq!(kept.response, answer(1_000, "pod-uid"));
        assert!(
            tokens.answer("shop", "default", &request, 1_000).is_none(),
            "expired"
        );
        assert!(tokens.answer("shop", "other", &request, 0).is_none());
        assert!(tokens
            .answer("shop", "default", b"another request", 0)
            .is_none());
        let json = br#"{"kind":"TokenRequest","spec":{"boundObjectRef":{"uid":"u2"}},"status":{"token":"t","expirationTimestamp":"2030-01-01T00:00:00Z"}}"#;
        tokens
            .keep(
                "shop",
                "default",
                Bytes::from_static(b"{}"),
                Format::Json,
                Bytes::from_static(json),
            )
            .unwrap();
        assert_eq!(tokens.len(), 2);
        assert!(
            tokens
                .keep(
                    "shop",
                    "x",
                    request,
                    Format::Json,
                    Bytes::from_static(b"{\"status\":{}}")
                )
                .is_err(),
            "an answer without expiry is not kept"
        );
    }
}
