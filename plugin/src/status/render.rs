//! The matrix as a kubectl-style table, or as JSON.
//!
//! A cell reads `ready/desired`; `*` marks a site that is not ready, `?`
//! a figure nothing reports, `-` a site the grid has no part in (another
//! grid's `gridUniqKey` value).

use super::{Cell, Report};
use crate::error::Error;
use crate::table::Table;

/// The mark of a cell that is not ready.
pub const NOT_READY: char = '*';

/// The table: `[NAMESPACE] GRID [KEY] READY <site>... [AGE MESSAGE]`.
///
/// `all_namespaces` adds NAMESPACE; `wide` adds the `gridUniqKey`, the age
/// and the grid's problems (one `; `-separated line).
pub fn table(report: &Report, all_namespaces: bool, wide: bool, now: i64) -> String {
    let mut headers: Vec<String> = Vec::new();
    if all_namespaces {
        headers.push("namespace".into());
    }
    headers.push("grid".into());
    if wide {
        headers.push("key".into());
    }
    headers.push("ready".into());
    headers.extend(report.sites.iter().cloned());
    if wide {
        headers.extend(["age".into(), "message".into()]);
    }
    let mut table = Table::new(headers);
    for grid in &report.grids {
        let mut row: Vec<String> = Vec::new();
        if all_namespaces {
            row.push(grid.namespace.clone());
        }
        row.push(format!("{}/{}", grid.kind.short_name(), grid.name));
        if wide {
            row.push(grid.grid_uniq_key.clone());
        }
        row.push(format!("{}/{}", grid.ready_sites, grid.site_count));
        row.extend(
            report
                .sites
                .iter()
                .map(|site| grid.cells.get(site).map_or_else(|| "-".into(), cell_text)),
        );
        if wide {
            row.push(crate::age(grid.created.as_deref(), now));
            row.push(grid.messages.join("; "));
        }
        table.row(row);
    }
    table.render()
}

/// `2/2`, `1/2*`, `?/2*`, `0/?*`.
pub fn cell_text(cell: &Cell) -> String {
    let figure = |n: Option<i64>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
    let mark = if cell.is_ready {
        String::new()
    } else {
        NOT_READY.to_string()
    };
    format!("{}/{}{mark}", figure(cell.ready), figure(cell.desired))
}

/// The report as one JSON document (with a trailing newline).
pub fn json(report: &Report) -> Result<String, Error> {
    serde_json::to_string_pretty(report)
        .map(|s| s + "\n")
        .map_err(|e| Error::Unreadable(e.to_string()))
}
