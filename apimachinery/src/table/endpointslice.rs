//! The EndpointSlice printer (`printEndpointSlice`).

use serde_json::Value;

use super::{array_at, str_at, Column, AGE_DOC, MAX_LISTED, NAME_DOC};

const SLICE_ADDRESS_TYPE_DOC: &str = "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.";
const SLICE_PORTS_DOC: &str = "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports.";
const SLICE_ENDPOINTS_DOC: &str = "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.";

/// EndpointSlice columns.
pub(super) const COLUMNS: &[Column] = &[
    ("Name", "name", NAME_DOC, 0),
    ("AddressType", "", SLICE_ADDRESS_TYPE_DOC, 0),
    ("Ports", "", SLICE_PORTS_DOC, 0),
    ("Endpoints", "", SLICE_ENDPOINTS_DOC, 0),
    ("Age", "", AGE_DOC, 0),
];

/// One EndpointSlice row.
pub(super) fn cells(slice: &Value, name: String, age: String) -> Vec<String> {
    vec![
        name,
        str_at(slice, &["addressType"]).to_string(),
        format_discovery_ports(slice),
        format_discovery_endpoints(slice),
        age,
    ]
}

/// `listWithMoreString`: at most 3 entries, then ` + N more...`; `<unset>` if empty.
fn list_with_more(list: Vec<String>, count: usize) -> String {
    let ret = list.join(",");
    if count > MAX_LISTED {
        return format!("{ret} + {} more...", count - MAX_LISTED);
    }
    if ret.is_empty() {
        return "<unset>".to_string();
    }
    ret
}

/// `formatDiscoveryPorts`: port numbers, the name for a nil port, else `*`.
fn format_discovery_ports(slice: &Value) -> String {
    let ports = array_at(slice, &["ports"]);
    let list = ports
        .iter()
        .take(MAX_LISTED)
        .map(|p| match (p.get("port"), p.get("name")) {
            (Some(Value::Number(n)), _) => n.to_string(),
            (_, Some(Value::String(name))) => name.clone(),
            _ => "*".to_string(),
        })
        .collect();
    list_with_more(list, ports.len())
}

/// `formatDiscoveryEndpoints`: every address of every endpoint, in slice order.
fn format_discovery_endpoints(slice: &Value) -> String {
    let addresses = array_at(slice, &["endpoints"])
        .iter()
        .flat_map(|ep| array_at(ep, &["addresses"]))
        .map(|a| a.as_str().unwrap_or(""));
    let count = addresses.clone().count();
    let list = addresses.take(MAX_LISTED).map(str::to_string).collect();
    list_with_more(list, count)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::table::fixtures::{now, web_slice};
    use crate::table::row_cells;

    #[test]
    fn endpointslice_row_matches_the_reference() {
        assert_eq!(
            row_cells("endpointslices", &web_slice(), now()),
            [
                "web-6hr22",
                "IPv4",
                "8080",
                "10.244.1.2,10.244.2.2,10.244.3.2",
                "2m43s"
            ]
        );
    }

    #[test]
    fn endpointslice_truncation_and_unset_values() {
        let slice = json!({"addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1", "10.0.0.2"]}, {"addresses": ["10.0.0.3"]},
                          {"addresses": ["10.0.0.4", "10.0.0.5"]}],
            "ports": [{"port": 1}, {"name": "named", "port": null}, {}, {"port": 4}]});
        let cells = row_cells("endpointslices", &slice, now());
        assert_eq!(cells[2], "1,named,* + 1 more...");
        assert_eq!(cells[3], "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...");
        assert_eq!(cells[4], "<unknown>");

        let empty = json!({"addressType": "IPv4", "endpoints": [], "ports": []});
        let cells = row_cells("endpointslices", &empty, now());
        assert_eq!(
            (cells[2].as_str(), cells[3].as_str()),
            ("<unset>", "<unset>")
        );
    }
}
