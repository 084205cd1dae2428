//! `networking.k8s.io` ServiceCIDRs, `v1` and `v1beta1` (the same fields),
//! from their JSON, writing fields as Go does (see [`super::meta`]).

use k8s_openapi::api::networking::v1 as json;
use k8s_pb::api::networking::{v1, v1beta1};

use super::meta::{condition, object_meta};

/// `networking.k8s.io/v1.ServiceCIDR`.
pub(super) fn service_cidr_v1(c: json::ServiceCIDR) -> v1::ServiceCIDR {
    v1::ServiceCIDR {
        metadata: Some(object_meta(c.metadata)),
        spec: Some(v1::ServiceCIDRSpec {
            cidrs: c.spec.and_then(|s| s.cidrs).unwrap_or_default(),
        }),
        status: Some(v1::ServiceCIDRStatus {
            conditions: c
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .map(condition)
                .collect(),
        }),
    }
}

/// `networking.k8s.io/v1beta1.ServiceCIDR`: the `v1` message under another
/// name (the field numbers are the same).
pub(super) fn service_cidr_v1beta1(c: json::ServiceCIDR) -> v1beta1::ServiceCIDR {
    let v1::ServiceCIDR {
        metadata,
        spec,
        status,
    } = service_cidr_v1(c);
    v1beta1::ServiceCIDR {
        metadata,
        spec: spec.map(|s| v1beta1::ServiceCIDRSpec { cidrs: s.cidrs }),
        status: status.map(|s| v1beta1::ServiceCIDRStatus {
            conditions: s.conditions,
        }),
    }
}
