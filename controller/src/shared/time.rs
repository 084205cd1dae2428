//! Times as the API server writes them.
//!
//! The one place the controller spells a time itself: a `metav1.Time` in a
//! condition or a status it builds as JSON. Typed fields (`Time`,
//! `MicroTime`) are written by k8s-openapi.

use k8s_openapi::jiff::Timestamp;

/// `time` as a `metav1.Time` is written: UTC, whole seconds, e.g.
/// `2026-11-21T15:12:23Z`.
pub fn k8s_time(time: Timestamp) -> String {
    sitegrid_apimachinery::duration::format_timestamp(time)
}

/// The current time as a `metav1.Time` (see [`k8s_time`]).
pub fn now() -> String {
    k8s_time(Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_whole_seconds_as_kubernetes_writes_them() {
        let t = Timestamp::new(1_795_273_943, 999_999_999).unwrap();
        assert_eq!(k8s_time(t), "2026-11-21T15:12:23Z");
        let typed = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t));
        assert_eq!(typed.unwrap(), k8s_time(t));
    }
}
