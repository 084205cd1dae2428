//! The ServiceCIDR printer (`printServiceCIDR`).

use serde_json::Value;

use super::{array_at, Column, AGE_DOC, NAME_DOC};

/// `ServiceCIDRSpec{}.SwaggerDoc()["cidrs"]`.
const CIDRS_DOC: &str = "CIDRs defines the IP blocks in CIDR notation (e.g. \"192.168.0.0/24\" or \"2001:db8::/64\") from which to assign service cluster IPs. Max of two CIDRs is allowed, one of each IP family. This field is immutable.";

/// ServiceCIDR columns.
pub(super) const COLUMNS: &[Column] = &[
    ("Name", "name", NAME_DOC, 0),
    ("CIDRs", "", CIDRS_DOC, 0),
    ("Age", "", AGE_DOC, 0),
];

/// One ServiceCIDR row: its CIDRs joined by commas.
pub(super) fn cells(cidr: &Value, name: String, age: String) -> Vec<String> {
    let cidrs: Vec<&str> = array_at(cidr, &["spec", "cidrs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    vec![name, cidrs.join(","), age]
}
