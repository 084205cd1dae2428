//! TokenRequests (`POST …/serviceaccounts/<sa>/token`), answered as
//! kube-apiserver answers them: the request's spec back, expiry defaulted
//! to an hour, and a token in the status — here a made-up string, since
//! nothing checks it (this server authorizes nothing).

use serde_json::{json, Value};
use sitegrid_apimachinery::{duration::format_rfc3339, Status};

use super::Shared;

/// The answer to a TokenRequest for `namespace/service_account`; 404 when
/// that service account does not exist.
pub(crate) fn issue(
    shared: &Shared,
    namespace: &str,
    service_account: &str,
    request: Value,
) -> Result<Value, Status> {
    let rt = shared
        .store
        .resources
        .by_id("serviceaccounts")
        .ok_or_else(Status::not_found_resource)?;
    if shared
        .store
        .get(rt, &format!("{namespace}/{service_account}"))
        .is_none()
    {
        return Err(Status::not_found("serviceaccounts", "", service_account));
    }
    let spec = &request["spec"];
    let expiration = spec["expirationSeconds"].as_i64().unwrap_or(3600);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    // Distinct per request, as real tokens are.
    let serial = shared.requests.lock().len();
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": service_account, "namespace": namespace, "creationTimestamp": null},
        "spec": {
            "audiences": spec["audiences"].as_array().cloned().unwrap_or_default(),
            "expirationSeconds": expiration,
            "boundObjectRef": spec["boundObjectRef"].clone(),
        },
        "status": {
            "token": format!("fakeapi.{namespace}.{service_account}.{serial}"),
            "expirationTimestamp": format_rfc3339(now + expiration),
        }
    }))
}
