//! The explanation as text (a few lines, then a kubectl-style table) or JSON.

use std::fmt::Write as _;

use super::Explanation;
use crate::error::Error;
use crate::table::Table;

/// The lines saying what and where from, the keys tried, then one row per
/// endpoint: `ADDRESS NODE READY SERVED REASON` (wide: `ADDRESS NODE POD
/// SLICE READY SERVED REASON`).
pub fn text(e: &Explanation, wide: bool) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(
        out,
        "Service {} as sitegrid-proxy on node {} serves it.",
        e.service, e.node
    );
    let _ = writeln!(
        out,
        "Computed from the API server's Service, Nodes and EndpointSlices ({}) with sitegrid-proxy's own filter code.",
        e.endpoint_slice_version
    );
    let _ = writeln!(out, "Filter: {}.", e.filter.summary);
    for step in &e.filter.keys {
        let has = match &step.node_value {
            _ if step.key == sitegrid_cache::topology::ANY => "any endpoint".to_owned(),
            Some(v) => format!("{} has {}={v}", e.node, step.key),
            None => format!("{} has no label {}", e.node, step.key),
        };
        let mark = if step.matched { "  <- matched" } else { "" };
        let _ = writeln!(
            out,
            "  key {}: {has}; {} endpoint(s) there, {} ready{mark}",
            step.key, step.endpoints, step.ready
        );
    }
    let _ = writeln!(out, "Proxy: {}.", e.proxy.summary);
    for note in &e.notes {
        let _ = writeln!(out, "Note: {note}.");
    }
    out.push('\n');
    if e.endpoints.is_empty() {
        out.push_str("No endpoints: the Service has no EndpointSlice with an endpoint.\n");
        return out;
    }
    out.push_str(&table(e, wide));
    out
}

fn table(e: &Explanation, wide: bool) -> String {
    let mut headers = vec!["address", "node"];
    if wide {
        headers.extend(["pod", "slice"]);
    }
    headers.extend(["ready", "served", "reason"]);
    let mut table = Table::new(headers);
    for v in &e.endpoints {
        let mut row = vec![v.addresses.join(","), v.node.clone().unwrap_or_default()];
        if wide {
            row.push(v.pod.clone().unwrap_or_default());
            row.push(v.slice.clone());
        }
        row.push(v.ready.to_string());
        row.push(if v.served { "yes" } else { "no" }.to_owned());
        row.push(v.reason.clone());
        table.row(row);
    }
    table.render()
}

/// The explanation as one JSON document (with a trailing newline).
pub fn json(e: &Explanation) -> Result<String, Error> {
    serde_json::to_string_pretty(e)
        .map(|s| s + "\n")
        .map_err(|err| Error::Unreadable(err.to_string()))
}
