//! `sitegrid-bench`: the proxy against a direct connection to the same
//! in-memory upstream. Measures LIST latency (p50/p99) and size in JSON and
//! protobuf, event propagation upstream → client with many watchers
//! (p50/p99), the wire bytes and the proxy's CPU per 1,000 events in JSON and
//! protobuf, what decoding them costs a client, and the proxy process's RSS
//! idle, with the cache loaded, after the churn and with many idle watchers.
//! Prints a Markdown report.
//!
//! Benchmarks are not tests: nothing here asserts a time. Run a release build:
//! `cargo build --profile dist -p sitegrid-proxy -p sitegrid-loadtest &&
//!  target/dist/sitegrid-bench`.

use std::{
    net::SocketAddr,
    path::PathBuf,
    time::{Duration, Instant},
};

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Empty};
use k8s_openapi::api::core::v1::Endpoints;
use k8s_pb::api::core::v1 as pb_core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::{json, Value};
use sitegrid_cache::UpstreamObject;
use sitegrid_fakeapi::{sample, ApiServer, ApiServerConfig};
use sitegrid_loadtest::{client, cpu_ms, proxy_bin, rss_kib, spawn_proxy, wait_served, HttpClient};

/// Flags.
#[derive(Debug, Parser)]
#[command(
    name = "sitegrid-bench",
    about = "sitegrid-proxy vs direct: LIST latency, propagation latency, RSS"
)]
struct Args {
    /// The sitegrid-proxy binary (default: next to this one).
    #[arg(long)]
    proxy_bin: Option<PathBuf>,
    /// The synthetic cluster's size.
    #[command(flatten)]
    size: sample::SyntheticSize,
    /// Timed LIST requests per target and path.
    #[arg(long, default_value_t = 200)]
    list_iterations: usize,
    /// Concurrent watchers per target.
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// Upstream changes whose propagation is timed.
    #[arg(long, default_value_t = 100)]
    changes: usize,
    /// Pause between changes.
    #[arg(long, default_value_t = 20)]
    change_interval_ms: u64,
    /// Idle watches opened at the end, for the memory a watcher costs.
    #[arg(long, default_value_t = 1000)]
    idle_watchers: usize,
}

/// kube-proxy's Accept.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf, */*";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let proxy_bin = proxy_bin(args.proxy_bin.as_deref())?;
    let total = args.size.endpoints();
    println!("# sitegrid-bench\n");
    println!("{} services, {} endpoints ({} per service), {} sites x {} nodes; proxy for node site-0-node-0\n",
        args.size.services, total, args.size.endpoints_per_service, args.size.sites, args.size.nodes_per_site);

    // Idle: a cluster with just the local node.
    let idle_rss = {
        let api = ApiServer::new(ApiServerConfig::default());
        api.load(sample::synthetic(1, 1, 0, 0, "v1"));
        let up = api.serve("127.0.0.1:0".parse()?).await?;
        let (mut child, addr) = spawn_proxy(&proxy_bin, &up.url(), &[])?;
        wait_served(&client(), addr, "/api/v1/services").await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rss = rss_kib(child.id());
        let _ = child.kill();
        let _ = child.wait();
        rss
    };

    let api = ApiServer::new(ApiServerConfig::default());
    api.load(args.size.objects("v1"));
    let up = api.serve("127.0.0.1:0".parse()?).await?;
    let started = Instant::now();
    let (mut child, proxy) = spawn_proxy(&proxy_bin, &up.url(), &[])?;
    let http = client();
    // What kube-proxy (EndpointSlice mode) reads: Services, Nodes, EndpointSlices;
    // Endpoints are reflected on demand, from the first request for them.
    wait_served(&http, proxy, "/apis/discovery.k8s.io/v1/endpointslices").await?;
    wait_served(&http, proxy, "/api/v1/services").await?;
    let sync_time = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kube_proxy_rss = rss_kib(child.id());
    wait_served(&http, proxy, "/api/v1/endpoints").await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let loaded_rss = rss_kib(child.id());
    let direct = up.local_addr();

    println!(
        "## LIST ({} sequential requests each, keep-alive, full body read)\n",
        args.list_iterations
    );
    println!("| path | target | bytes | p50 | p99 |\n|---|---|---|---|---|");
    let mut list_bodies = Vec::new();
    for path in [
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1/endpointslices",
        "/api/v1/services",
    ] {
        for (name, addr, accept) in [
            ("direct", direct, None),
            ("proxy", proxy, None),
            ("proxy, protobuf", proxy, Some(PROTOBUF)),
        ] {
            let (body, mut times) =
                time_lists(&http, addr, path, accept, args.list_iterations).await?;
            println!(
                "| `{path}` | {name} | {} | {} | {} |",
                body.len(),
                ms(pct(&mut times, 50.0)),
                ms(pct(&mut times, 99.0))
            );
            if name != "direct" && path == "/api/v1/endpoints" {
                list_bodies.push(body);
            }
        }
    }
    upstream_decode(&http, direct).await?;
    if let [json, pb] = &list_bodies[..] {
        println!(
            "Decoding the proxy's Endpoints list in a client (typed, k8s-openapi / k8s-pb): JSON {:.2} ms, protobuf {:.2} ms\n",
            decode_ms(|| decode_json_list(json)),
            decode_ms(|| decode_pb_list(pb)),
        );
    }

    println!(
        "\n## Propagation upstream → client ({} watchers, {} changes every {} ms)\n",
        args.watchers, args.changes, args.change_interval_ms
    );
    println!("| target | samples | p50 | p99 | max |\n|---|---|---|---|---|");
    let target = api
        .list("endpoints")
        .into_iter()
        .find(|e| e["metadata"]["name"] == "svc-0")
        .ok_or("no svc-0 endpoints")?;
    let ns = target["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    let mut wire = Vec::new();
    // The proxy's RSS after each run: the upstream's changes reach the
    // proxy's resume log in every run, its watchers only in the last two.
    let mut run_rss = Vec::new();
    for (name, addr, accept) in [
        ("direct", direct, None),
        ("proxy", proxy, None),
        ("proxy, protobuf", proxy, Some(PROTOBUF)),
    ] {
        let cpu_before = cpu_ms(child.id());
        let mut run = propagation(&api, &target, &ns, addr, accept, &args).await?;
        let cpu = cpu_ms(child.id()) - cpu_before;
        let lat = &mut run.latencies;
        println!(
            "| {name} | {} | {} | {} | {} |",
            lat.len(),
            ms(pct(lat, 50.0)),
            ms(pct(lat, 99.0)),
            ms(pct(lat, 100.0))
        );
        run_rss.push((name, rss_kib(child.id())));
        if name != "direct" {
            wire.push((name, run, cpu));
        }
    }
    println!(
        "\n## Watch wire: JSON vs protobuf (the same {} changes to {} watchers)\n",
        args.changes, args.watchers
    );
    println!("| format | bytes per event | proxy CPU per 1,000 events sent | client decode per 1,000 events |\n|---|---|---|---|");
    for (name, run, cpu) in &wire {
        let events = run.latencies.len().max(1) as f64;
        let decode = if name.ends_with("protobuf") {
            decode_ms(|| decode_pb_frames(&run.first_stream))
        } else {
            decode_ms(|| decode_json_frames(&run.first_stream))
        };
        let first_events = run.first_events.max(1) as f64;
        println!(
            "| {name} | {:.0} | {:.1} ms | {:.2} ms |",
            run.bytes as f64 / events,
            cpu / events * 1000.0,
            decode / first_events * 1000.0
        );
    }
    let idle_watch_kib = idle_watchers(&proxy, child.id(), args.idle_watchers).await?;
    let _ = child.kill();
    let _ = child.wait();

    println!("\n## Proxy memory (VmRSS)\n");
    println!("| state | RSS |\n|---|---|");
    println!(
        "| idle (1 node, no services) | {:.1} MiB |",
        idle_rss as f64 / 1024.0
    );
    println!(
        "| kube-proxy's kinds loaded ({total} endpoints in EndpointSlices, {} services, synced in {:.0} ms) | {:.1} MiB |",
        args.size.services,
        sync_time.as_secs_f64() * 1000.0,
        kube_proxy_rss as f64 / 1024.0
    );
    println!(
        "| every kind loaded (Endpoints too) | {:.1} MiB |",
        loaded_rss as f64 / 1024.0
    );
    for (i, (name, rss)) in run_rss.iter().enumerate() {
        println!(
            "| after {} changes (run {}, {name}, {} watchers, closed) | {:.1} MiB |",
            (i + 1) * args.changes,
            i + 1,
            args.watchers,
            *rss as f64 / 1024.0
        );
    }
    println!(
        "| per idle watch ({} open) | {:.1} KiB |",
        args.idle_watchers, idle_watch_kib
    );
    Ok(())
}

async fn time_lists(
    http: &HttpClient,
    addr: SocketAddr,
    path: &str,
    accept: Option<&str>,
    n: usize,
) -> Result<(Bytes, Vec<Duration>), Box<dyn std::error::Error>> {
    let mut body = Bytes::new();
    let mut times = Vec::with_capacity(n);
    for i in 0..n + 10 {
        let t = Instant::now();
        let resp = http.request(get(addr, path, accept)?).await?;
        body = resp.into_body().collect().await?.to_bytes();
        if i >= 10 {
            times.push(t.elapsed());
        }
    }
    Ok((body, times))
}

/// A GET of `path` on `addr`, with `accept` if given.
fn get(
    addr: SocketAddr,
    path: &str,
    accept: Option<&str>,
) -> Result<hyper::Request<Empty<Bytes>>, Box<dyn std::error::Error>> {
    let mut req = hyper::Request::get(format!("http://{addr}{path}"));
    if let Some(accept) = accept {
        req = req.header(hyper::header::ACCEPT, accept);
    }
    Ok(req.body(Empty::new())?)
}

/// What one propagation run measured.
struct Run {
    /// Upstream write → frame arrival, for every watcher and change.
    latencies: Vec<Duration>,
    /// Bytes all watchers received.
    bytes: usize,
    /// The first watcher's whole stream, and how many events it held.
    first_stream: Vec<u8>,
    first_events: usize,
}

/// Opens `watchers` watches on the namespace's endpoints (in `accept`'s
/// format), changes the target object `changes` times (stamping a sequence
/// number into an annotation) and returns, for every watcher and change, the
/// time from the upstream write to the frame's arrival, and the bytes.
async fn propagation(
    api: &ApiServer,
    target: &Value,
    ns: &str,
    addr: SocketAddr,
    accept: Option<&str>,
    args: &Args,
) -> Result<Run, Box<dyn std::error::Error>> {
    let http = client();
    let list = http
        .get(format!("http://{addr}/api/v1/namespaces/{ns}/endpoints?limit=1").parse()?)
        .await?;
    let list: Value = serde_json::from_slice(&list.into_body().collect().await?.to_bytes())?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_owned();
    // The watches end when their last change arrives; the timeout is only a
    // bound (a loaded machine stretches the sending loop well past its
    // nominal length, and a watch that timed out early lost changes).
    let run_secs = 3 * (args.changes as u64 * args.change_interval_ms) / 1000 + 60;
    let path = format!(
        "/api/v1/namespaces/{ns}/endpoints?watch=1&resourceVersion={rv}&timeoutSeconds={run_secs}"
    );
    let protobuf = accept.is_some();
    let mut tasks = Vec::new();
    for _ in 0..args.watchers {
        let resp = http.request(get(addr, &path, accept)?).await?;
        tasks.push(tokio::spawn(read_seqs(
            resp.into_body(),
            protobuf,
            args.changes.saturating_sub(1),
        )));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut sent = Vec::with_capacity(args.changes);
    let mut obj = api
        .list("endpoints")
        .into_iter()
        .find(|e| e["metadata"]["name"] == target["metadata"]["name"])
        .unwrap_or_else(|| target.clone());
    for i in 0..args.changes {
        obj["metadata"]["annotations"]["bench/seq"] = json!(i.to_string());
        sent.push(Instant::now());
        obj = api.apply(obj);
        tokio::time::sleep(Duration::from_millis(args.change_interval_ms)).await;
    }
    let mut run = Run {
        latencies: Vec::new(),
        bytes: 0,
        first_stream: Vec::new(),
        first_events: 0,
    };
    for (i, t) in tasks.into_iter().enumerate() {
        let (seqs, stream) = t.await?;
        run.bytes += stream.len();
        if i == 0 {
            run.first_events = seqs.len();
            run.first_stream = stream;
        }
        for (seq, at) in seqs {
            if let Some(s) = sent.get(seq) {
                run.latencies.push(at.saturating_duration_since(*s));
            }
        }
    }
    Ok(run)
}

/// The sequence numbers of the events in a watch stream with their arrival
/// times, and the whole stream, until the event of sequence `last`.
async fn read_seqs(
    mut body: hyper::body::Incoming,
    protobuf: bool,
    last: usize,
) -> (Vec<(usize, Instant)>, Vec<u8>) {
    let mut out = Vec::new();
    let mut stream = Vec::new();
    let mut at = 0;
    while out.last().is_none_or(|&(seq, _)| seq != last) {
        let Some(Ok(frame)) = body.frame().await else {
            break;
        };
        let now = Instant::now();
        let Ok(data) = frame.into_data() else {
            continue;
        };
        stream.extend_from_slice(&data);
        while let Some(end) = frame_end(&stream[at..], protobuf) {
            if let Some(seq) = find_seq(&stream[at..at + end], protobuf) {
                out.push((seq, now));
            }
            at += end;
        }
    }
    (out, stream)
}

/// Where the first whole frame of `buf` ends: after its newline (JSON) or its
/// 4-byte length and that many bytes (protobuf).
fn frame_end(buf: &[u8], protobuf: bool) -> Option<usize> {
    if !protobuf {
        return buf.iter().position(|b| *b == b'\n').map(|p| p + 1);
    }
    let len = u32::from_be_bytes(buf.get(..4)?.try_into().ok()?) as usize;
    (buf.len() >= 4 + len).then_some(4 + len)
}

/// The `bench/seq` annotation's value in a frame: `"bench/seq":"N"` in JSON;
/// in protobuf the map entry `0a 09 "bench/seq" 12 <len> "N"`.
fn find_seq(frame: &[u8], protobuf: bool) -> Option<usize> {
    let needle: &[u8] = if protobuf {
        b"bench/seq"
    } else {
        b"\"bench/seq\":\""
    };
    let at = frame.windows(needle.len()).position(|w| w == needle)? + needle.len();
    let digits = if protobuf {
        let len = *frame.get(at + 1)? as usize;
        frame.get(at + 2..at + 2 + len)?
    } else {
        let end = frame[at..].iter().position(|b| *b == b'"')? + at;
        &frame[at..end]
    };
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Milliseconds one run of `decode` takes (the best of five).
fn decode_ms(mut decode: impl FnMut() -> usize) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(decode());
            t.elapsed().as_secs_f64() * 1000.0
        })
        .fold(f64::MAX, f64::min)
}

/// A JSON watch stream decoded as client-go's typed clients do; returns the events.
fn decode_json_frames(stream: &[u8]) -> usize {
    stream
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| {
            serde_json::from_slice::<
                k8s_openapi::apimachinery::pkg::apis::meta::v1::WatchEvent<Endpoints>,
            >(l)
            .ok()
        })
        .count()
}

/// A protobuf watch stream decoded: frame, WatchEvent, envelope, Endpoints.
fn decode_pb_frames(mut stream: &[u8]) -> usize {
    let mut n = 0;
    while let Some(end) = frame_end(stream, true) {
        let event = pb_meta::WatchEvent::decode(&stream[4..end]).unwrap_or_default();
        let raw = event.object.and_then(|o| o.raw).unwrap_or_default();
        if let Some(obj) = raw.get(4..).and_then(|r| Unknown::decode(r).ok()) {
            let e = pb_core::Endpoints::decode(obj.raw.as_deref().unwrap_or_default());
            n += usize::from(e.is_ok());
        }
        stream = &stream[end..];
    }
    n
}

fn decode_json_list(body: &[u8]) -> usize {
    serde_json::from_slice::<k8s_openapi::List<Endpoints>>(body).map_or(0, |l| l.items.len())
}

fn decode_pb_list(body: &[u8]) -> usize {
    body.get(4..)
        .and_then(|r| Unknown::decode(r).ok())
        .and_then(|u| pb_core::EndpointsList::decode(u.raw.as_deref().unwrap_or_default()).ok())
        .map_or(0, |l| l.items.len())
}

/// What the proxy's sync costs to decode: the upstream's JSON lists as the
/// proxy's reflectors decode them (objects kept raw, metadata parsed), and the
/// same lists in protobuf (encoded here from the JSON, as kube-apiserver would
/// send them) decoded with k8s-pb only, a lower bound for a protobuf upstream
/// (which would still have to become JSON for the proxy's views).
async fn upstream_decode(
    http: &HttpClient,
    direct: SocketAddr,
) -> Result<(), Box<dyn std::error::Error>> {
    use sitegrid_apimachinery::protobuf;
    println!("\nDecoding the upstream's full lists (the proxy's sync), best of 5:\n");
    println!("| list | JSON bytes | JSON decode (proxy) | protobuf bytes | protobuf decode (k8s-pb only) |\n|---|---|---|---|---|");
    for (path, kind) in [
        ("/api/v1/endpoints", protobuf::Kind::Endpoints),
        (
            "/apis/discovery.k8s.io/v1/endpointslices",
            protobuf::Kind::EndpointSliceV1,
        ),
    ] {
        let (json, _) = time_lists(http, direct, path, None, 0).await?;
        let list: Value = serde_json::from_slice(&json)?;
        let items: Vec<Vec<u8>> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| protobuf::message(kind, i.to_string().as_bytes()))
            .collect::<Result<_, _>>()?;
        let meta = protobuf::list_meta("1", "", None);
        let api_version = list["apiVersion"].as_str().unwrap_or("v1");
        let list_kind = list["kind"].as_str().unwrap_or("List");
        let pb = protobuf::list(
            api_version,
            list_kind,
            &meta,
            items.iter().map(Vec::as_slice),
        );
        let json_ms = decode_ms(|| {
            serde_json::from_slice::<kube::core::ObjectList<UpstreamObject>>(&json)
                .map_or(0, |l| l.items.len())
        });
        let pb_ms = decode_ms(|| {
            let raw = pb.get(4..).and_then(|r| Unknown::decode(r).ok());
            let raw = raw.and_then(|u| u.raw).unwrap_or_default();
            match kind {
                protobuf::Kind::Endpoints => {
                    pb_core::EndpointsList::decode(raw.as_slice()).map_or(0, |l| l.items.len())
                }
                _ => k8s_pb::api::discovery::v1::EndpointSliceList::decode(raw.as_slice())
                    .map_or(0, |l| l.items.len()),
            }
        });
        println!(
            "| `{path}` | {} | {json_ms:.2} ms | {} | {pb_ms:.2} ms |",
            json.len(),
            pb.len()
        );
    }
    println!();
    Ok(())
}

/// Opens `n` watches that nothing matches and returns what each adds to the
/// proxy's RSS, in KiB.
async fn idle_watchers(
    proxy: &SocketAddr,
    pid: u32,
    n: usize,
) -> Result<f64, Box<dyn std::error::Error>> {
    if n == 0 {
        return Ok(0.0);
    }
    let http = client();
    let before = rss_kib(pid);
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        let path = "/api/v1/services?watch=1&labelSelector=bench%3Didle&allowWatchBookmarks=true";
        open.push(http.request(get(*proxy, path, Some(PROTOBUF))?).await?);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib(pid);
    drop(open);
    Ok(after.saturating_sub(before) as f64 / n as f64)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    let idx = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[idx.min(v.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
