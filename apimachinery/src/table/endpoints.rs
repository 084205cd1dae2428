//! The Endpoints printer (`printEndpoints`).

use serde_json::Value;

use super::{array_at, str_at, Column, AGE_DOC, MAX_LISTED, NAME_DOC};

const ENDPOINTS_SUBSETS_DOC: &str = "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.";

/// Endpoints columns.
pub(super) const COLUMNS: &[Column] = &[
    ("Name", "name", NAME_DOC, 0),
    ("Endpoints", "", ENDPOINTS_SUBSETS_DOC, 0),
    ("Age", "", AGE_DOC, 0),
];

/// One Endpoints row.
pub(super) fn cells(endpoints: &Value, name: String, age: String) -> Vec<String> {
    vec![name, format_endpoints(endpoints), age]
}

/// `formatEndpoints(endpoints, nil)`: ready addresses only, `ip:port` for each
/// port × address, bare IPs for a subset without ports. `<none>` only when
/// there are no subsets at all; subsets without ready addresses print `""`.
fn format_endpoints(endpoints: &Value) -> String {
    let subsets = array_at(endpoints, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    let mut list = Vec::new();
    let mut count = 0;
    for subset in subsets {
        let ips: Vec<&str> = array_at(subset, &["addresses"])
            .iter()
            .map(|a| str_at(a, &["ip"]))
            .collect();
        let ports = array_at(subset, &["ports"]);
        if ports.is_empty() {
            for ip in &ips {
                if list.len() < MAX_LISTED {
                    list.push(ip.to_string());
                }
                count += 1;
            }
            continue;
        }
        for port in ports {
            let port = port.get("port").and_then(Value::as_i64).unwrap_or(0);
            for ip in &ips {
                if list.len() < MAX_LISTED {
                    list.push(join_host_port(ip, port));
                }
                count += 1;
            }
        }
    }
    let ret = list.join(",");
    if count > MAX_LISTED {
        return format!("{ret} + {} more...", count - MAX_LISTED);
    }
    ret
}

/// Go's `net.JoinHostPort`: brackets around a host containing a colon.
fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::table::fixtures::{meta, now};
    use crate::table::row_cells;

    #[test]
    fn endpoints_row_matches_the_reference() {
        let ep = json!({"metadata": meta("web", "2026-11-21T15:12:23Z"), "subsets": [{
            "addresses": [{"ip": "10.244.1.2"}, {"ip": "10.244.2.2"}, {"ip": "10.244.3.2"}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]});
        assert_eq!(
            row_cells("endpoints", &ep, now()),
            [
                "web",
                "10.244.1.2:8080,10.244.2.2:8080,10.244.3.2:8080",
                "2m43s"
            ]
        );
    }

    #[test]
    fn endpoints_truncate_after_three_and_count_every_address_port_pair() {
        let ep = json!({"metadata": meta("many", "2026-11-21T15:12:23Z"), "subsets": [
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
             "notReadyAddresses": [{"ip": "10.0.0.99"}],
             "ports": [{"port": 80}, {"port": 443}]},
            {"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 53}]}]});
        assert_eq!(
            row_cells("endpoints", &ep, now())[1],
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 2 more..."
        );
        let v6 = json!({"subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 53}]}]});
        assert_eq!(row_cells("endpoints", &v6, now())[1], "[fd00::1]:53");
    }

    #[test]
    fn endpoints_without_ports_subsets_or_ready_addresses() {
        let headless = json!({"subsets": [{"addresses": [
            {"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}, {"ip": "10.0.0.4"}]}]});
        assert_eq!(
            row_cells("endpoints", &headless, now())[1],
            "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more..."
        );
        assert_eq!(
            row_cells("endpoints", &json!({"metadata": {}}), now())[1],
            "<none>"
        );
        assert_eq!(
            row_cells("endpoints", &json!({"subsets": []}), now())[1],
            "<none>"
        );
        let not_ready = json!({"subsets": [{"notReadyAddresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]});
        assert_eq!(row_cells("endpoints", &not_ready, now())[1], "");
    }
}
