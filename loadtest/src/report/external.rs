//! k6 and wrk, run when installed: k6 for many concurrent watch connections,
//! LIST at a fixed rate and passthrough GETs at a fixed rate (the scripts of
//! `loadtest/k6/`), wrk for passthrough throughput. Their summaries go into
//! the report; a missing tool is reported as "skipped: k6 not installed".

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use anyhow::{anyhow, Context, Result};
use serde_json::{json, Value};
use tokio::process::Command;

use super::{
    env::{Env, ProxyProcess, Scale, Upstream},
    model::{ExternalRow, Target},
};

/// The object the passthrough loads GET (ConfigMaps are not cached by the
/// proxy: they go through to the upstream).
const PASSTHROUGH: &str = "/api/v1/namespaces/default/configmaps/bench";

/// What the external tools run.
#[derive(Debug, Clone)]
pub struct ExternalConfig {
    /// The k6 scripts' folder.
    pub k6_dir: PathBuf,
    /// The cluster.
    pub scale: Scale,
    /// How long each run lasts.
    pub duration: Duration,
    /// Concurrent watches (k6 watch.js).
    pub watches: usize,
    /// LISTs a second (k6 list.js).
    pub list_rate: u32,
    /// Passthrough GETs a second (k6 passthrough.js).
    pub passthrough_rate: u32,
}

/// Runs what is installed against the upstream and a proxy; says what is skipped.
pub async fn run(env: &Env, cfg: &ExternalConfig) -> Result<Vec<ExternalRow>> {
    let k6 = installed("k6", "version").await;
    let wrk = installed("wrk", "--version").await;
    let mut rows = Vec::new();
    for (tool, there) in [("k6", k6), ("wrk", wrk)] {
        if !there {
            rows.push(ExternalRow {
                what: tool.into(),
                target: None,
                result: format!("skipped: {tool} not installed"),
            });
        }
    }
    if !k6 && !wrk {
        return Ok(rows);
    }
    let up = Upstream::start(&cfg.scale.size(env.nodes_per_site)).await?;
    up.api
        .try_apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "bench", "namespace": "default"},
            "data": {"k": "v"}
        }))
        .map_err(|s| anyhow!("creating the passthrough ConfigMap: {s}"))?;
    // The load tools send no credentials: let the proxy pass their GETs
    // through with its own identity, as the upstream answers them anonymously.
    let proxy = ProxyProcess::spawn_with(
        env,
        up.addr(),
        "k6 and wrk",
        &["--anonymous-passthrough=all"],
    )?;
    proxy.wait_served().await?;
    let secs = cfg.duration.as_secs().max(1);
    for (target, addr) in [(Target::Direct, up.addr()), (Target::Proxy, proxy.addr)] {
        let url = format!("http://{addr}");
        if k6 {
            let runs = [
                (
                    "watch.js",
                    format!("k6 watch.js: {} concurrent watches", cfg.watches),
                    vec![format!("VUS={}", cfg.watches)],
                ),
                (
                    "list.js",
                    format!("k6 list.js: {} LIST/s of EndpointSlices", cfg.list_rate),
                    vec![format!("RATE={}", cfg.list_rate)],
                ),
                (
                    "passthrough.js",
                    format!("k6 passthrough.js: {} GET/s", cfg.passthrough_rate),
                    vec![format!("RATE={}", cfg.passthrough_rate)],
                ),
            ];
            for (script, what, vars) in runs {
                env.progress
                    .show(&format!("{what}, {} ({secs} s)", target.name()));
                let result = k6_run(&cfg.k6_dir.join(script), &url, secs, &vars)
                    .await
                    .unwrap_or_else(|e| format!("failed: {e:#}"));
                rows.push(ExternalRow {
                    what,
                    target: Some(target),
                    result,
                });
            }
        }
        if wrk {
            env.progress
                .show(&format!("wrk passthrough, {} ({secs} s)", target.name()));
            let result = wrk_run(&format!("{url}{PASSTHROUGH}"), secs)
                .await
                .unwrap_or_else(|e| format!("failed: {e:#}"));
            rows.push(ExternalRow {
                what: "wrk: passthrough GET, 2 threads, 32 connections".into(),
                target: Some(target),
                result,
            });
        }
    }
    env.progress.done("k6 and wrk: done");
    Ok(rows)
}

/// `tool` can be started.
async fn installed(tool: &str, version_arg: &str) -> bool {
    Command::new(tool)
        .arg(version_arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok()
}

/// Runs a k6 script against `url` and summarises its `--summary-export`.
async fn k6_run(script: &Path, url: &str, secs: u64, vars: &[String]) -> Result<String> {
    let summary = std::env::temp_dir().join(format!(
        "sitegrid-report-k6-{}-{}.json",
        std::process::id(),
        script.file_stem().and_then(|s| s.to_str()).unwrap_or("k6")
    ));
    let mut cmd = Command::new("k6");
    cmd.args(["run", "--quiet", "--no-usage-report", "--summary-export"])
        .arg(&summary)
        .args(["-e", &format!("TARGET={url}")])
        .args(["-e", &format!("DURATION={secs}s")]);
    for v in vars {
        cmd.args(["-e", v]);
    }
    cmd.arg(script)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // The scripts end by themselves; this bounds a k6 that hangs.
    let limit = Duration::from_secs(secs + 60);
    let out = tokio::time::timeout(limit, cmd.output())
        .await
        .map_err(|_| anyhow!("k6 did not end within {limit:?}"))?
        .context("running k6")?;
    // k6 exits non-zero when a threshold fails; the summary still says what happened.
    let text = std::fs::read_to_string(&summary).with_context(|| {
        format!(
            "k6 wrote no summary ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )
    })?;
    // Best effort: a left-over summary in the temporary directory harms nothing.
    let _removed = std::fs::remove_file(&summary);
    summarise_k6(&serde_json::from_str(&text).context("k6 summary")?)
}

/// "N requests (R/s), p50 X ms, p99 Y ms, failed F %" from a k6 summary export.
pub fn summarise_k6(summary: &Value) -> Result<String> {
    let m = &summary["metrics"];
    let reqs = &m["http_reqs"];
    let dur = &m["http_req_duration"];
    let wait = &m["http_req_waiting"];
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    if reqs.is_null() {
        return Err(anyhow!("k6 summary without http_reqs: no request was made"));
    }
    Ok(format!(
        "{} requests ({:.0}/s); duration p50 {:.2} ms, p99 {:.2} ms; to headers p99 {:.2} ms; failed {:.2} %",
        f(&reqs["count"]),
        f(&reqs["rate"]),
        f(&dur["p(50)"]),
        f(&dur["p(99)"]),
        f(&wait["p(99)"]),
        f(&m["http_req_failed"]["value"]) * 100.0
    ))
}

/// Runs wrk on `url` and keeps its throughput and latency lines.
async fn wrk_run(url: &str, secs: u64) -> Result<String> {
    let mut cmd = Command::new("wrk");
    cmd.args(["-t2", "-c32", &format!("-d{secs}s"), "--latency", url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let limit = Duration::from_secs(secs + 30);
    let out = tokio::time::timeout(limit, cmd.output())
        .await
        .map_err(|_| anyhow!("wrk did not end within {limit:?}"))?
        .context("running wrk")?;
    if !out.status.success() {
        return Err(anyhow!(
            "wrk exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    summarise_wrk(&String::from_utf8_lossy(&out.stdout))
}

/// "R req/s; p50 X, p99 Y; non-2xx N" from wrk's `--latency` output.
pub fn summarise_wrk(text: &str) -> Result<String> {
    let find = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix).map(|v| v.trim().to_owned()))
    };
    let rps = find("Requests/sec:").ok_or_else(|| anyhow!("no Requests/sec in wrk's output"))?;
    let p50 = find("50%").unwrap_or_else(|| "?".into());
    let p99 = find("99%").unwrap_or_else(|| "?".into());
    let non2xx = find("Non-2xx or 3xx responses:").unwrap_or_else(|| "0".into());
    Ok(format!(
        "{rps} req/s; latency p50 {p50}, p99 {p99}; non-2xx {non2xx}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_of_k6_and_wrk() {
        let k6 = json!({"metrics": {
            "http_reqs": {"count": 100, "rate": 9.9},
            "http_req_duration": {"p(50)": 1.5, "p(99)": 3.25, "max": 4},
            "http_req_waiting": {"p(99)": 2.0},
            "http_req_failed": {"value": 0.01}
        }});
        assert_eq!(
            summarise_k6(&k6).unwrap(),
            "100 requests (10/s); duration p50 1.50 ms, p99 3.25 ms; to headers p99 2.00 ms; failed 1.00 %"
        );
        assert!(summarise_k6(&json!({"metrics": {}})).is_err());
        let wrk = "Running 1s test @ http://x\n  Latency Distribution\n     50%  120.00us\n     99%    1.20ms\n  1000 requests in 1.00s\nRequests/sec:   1000.00\n";
        assert_eq!(
            summarise_wrk(wrk).unwrap(),
            "1000.00 req/s; latency p50 120.00us, p99 1.20ms; non-2xx 0"
        );
        assert!(summarise_wrk("garbage").is_err());
    }
}
