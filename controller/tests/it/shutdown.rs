//! SIGTERM ends the controller whatever state it is in: against a scripted
//! API server on 127.0.0.1 whose Lease API fails (it serves no Leases at
//! all, every request `404`; or the Lease is created, then `404`, then
//! requests go unanswered: an API server going away), and, without
//! election, against the in-memory API server, which serves no
//! DeploymentGrids (that controller never lists). And a leader whose API
//! server stops answering stops by itself, as a standby may take the lease.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sitegrid_fakeapi::testing::command;

/// A failure bound only: how long a stopped controller may take to exit.
const EXIT_BOUND: Duration = Duration::from_secs(30);

/// How the scripted API server treats Lease requests.
#[derive(Clone, Copy)]
enum Leases {
    /// Every request `404` (an API server without the coordination API).
    Absent,
    /// A create succeeds; the next read is `404`, and later ones are never
    /// answered.
    VanishThenHang,
    /// Served (created, read and replaced) until the test sets
    /// [`Seen::hang`]; from then on no request is answered: a node cut off
    /// from the API server.
    ServedThenHang,
}

/// The server's view: requests seen, and whether the Lease was created.
#[derive(Default)]
struct Seen {
    lease_posts: AtomicUsize,
    lease_reads_after_create: AtomicUsize,
    created: AtomicBool,
    stop: AtomicBool,
    /// The Lease as [`Leases::ServedThenHang`] keeps it.
    lease: Mutex<Option<Value>>,
    /// Requests for anything but Leases: only a leader's controllers send them.
    others: AtomicUsize,
    /// Lease writes that clear the holder (releases), sent once it hangs.
    releases_unanswered: AtomicUsize,
    hang: AtomicBool,
}

/// Serves `leases` on 127.0.0.1; every other path is `404` (the controller
/// reaches no further than its election). Returns the port.
fn serve(leases: Leases, seen: Arc<Seen>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let seen = seen.clone();
            std::thread::spawn(move || connection(conn, leases, &seen));
        }
    });
    port
}

/// One keep-alive connection: request after request until it closes.
fn connection(conn: TcpStream, leases: Leases, seen: &Seen) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    while let Some((method, path, body)) = read_request(&mut reader) {
        let is_lease = path.contains("/leases");
        if !is_lease {
            seen.others.fetch_add(1, Ordering::SeqCst);
        }
        let answer = match (leases, is_lease, method.as_str()) {
            (Leases::ServedThenHang, _, _) if seen.hang.load(Ordering::SeqCst) => {
                let sent: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
                if is_lease && method == "PUT" && sent["spec"]["holderIdentity"].is_null() {
                    seen.releases_unanswered.fetch_add(1, Ordering::SeqCst);
                }
                None
            }
            (Leases::ServedThenHang, true, _) => Some(served_lease(&method, &body, seen)),
            (Leases::VanishThenHang, true, "POST") => {
                seen.lease_posts.fetch_add(1, Ordering::SeqCst);
                seen.created.store(true, Ordering::SeqCst);
                let mut lease: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
                lease["metadata"]["namespace"] = json!("kube-system");
                lease["metadata"]["resourceVersion"] = json!("1");
                Some((201, lease))
            }
            (Leases::VanishThenHang, true, _) if seen.created.load(Ordering::SeqCst) => {
                if seen.lease_reads_after_create.fetch_add(1, Ordering::SeqCst) == 0 {
                    Some((404, not_found()))
                } else {
                    None
                }
            }
            (_, true, "POST") => {
                seen.lease_posts.fetch_add(1, Ordering::SeqCst);
                Some((404, not_found()))
            }
            _ => Some((404, not_found())),
        };
        let Some((code, body)) = answer else {
            // Never answered: hold the connection until the test ends.
            while !seen.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
            return;
        };
        let body = body.to_string();
        let head = format!(
            "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(body.as_bytes()).is_err() {
            return;
        }
    }
}

/// Method, path and body of the next request (`None` once the connection closes).
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok().filter(|n| *n > 0)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((method, path, body))
}

/// A Lease request answered as the API server would, for one Lease:
/// created, read, replaced only with the `resourceVersion` it has (`409`
/// otherwise).
fn served_lease(method: &str, body: &[u8], seen: &Seen) -> (u16, Value) {
    let mut lease = seen.lease.lock().unwrap();
    let sent: Value = serde_json::from_slice(body).unwrap_or(json!({}));
    match (method, lease.as_mut()) {
        ("POST", None) => {
            let mut created = sent;
            created["metadata"]["namespace"] = json!("kube-system");
            created["metadata"]["resourceVersion"] = json!("1");
            *lease = Some(created.clone());
            (201, created)
        }
        ("GET", Some(kept)) => (200, kept.clone()),
        ("PUT", Some(kept))
            if sent["metadata"]["resourceVersion"] == kept["metadata"]["resourceVersion"] =>
        {
            let version: u64 = kept["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("1")
                .parse()
                .unwrap_or(1);
            *kept = sent;
            kept["metadata"]["resourceVersion"] = json!((version + 1).to_string());
            (200, kept.clone())
        }
        ("POST" | "PUT", Some(_)) => (
            409,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "reason": "Conflict", "code": 409}),
        ),
        _ => (404, not_found()),
    }
}

/// The identity holding the Lease [`Leases::ServedThenHang`] keeps, if any.
fn holder(seen: &Seen) -> Option<String> {
    let lease = seen.lease.lock().unwrap();
    lease.as_ref()?["spec"]["holderIdentity"]
        .as_str()
        .map(str::to_owned)
}

fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server could not find the requested resource", "reason": "NotFound", "code": 404})
}

/// The controller with leader election on, against 127.0.0.1:`port`.
fn start_controller(port: u16, name: &str) -> Child {
    start_controller_with(&format!("http://127.0.0.1:{port}"), name, &[])
}

/// The controller against the API server at `url`, with `extra` flags.
fn start_controller_with(url: &str, name: &str, extra: &[&str]) -> Child {
    let dir = std::env::temp_dir().join(format!(
        "sitegrid-controller-shutdown-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: '{url}'}}\n\
             users:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let ops = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("127.0.0.1:{}", ops.local_addr().unwrap().port());
    drop(ops);
    command(env!("CARGO_BIN_EXE_sitegrid-controller"), &["POD_NAME"])
        .args(["--kubeconfig", kubeconfig.to_str().unwrap()])
        .args(["--bind-address", &address])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (within [`EXIT_BOUND`]) until `done` holds.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + EXIT_BOUND;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {EXIT_BOUND:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM, then its exit code (killed and failed past [`EXIT_BOUND`]).
fn terminate(mut child: Child) -> Option<i32> {
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + EXIT_BOUND;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("still running {EXIT_BOUND:?} after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_ends_it_while_the_api_server_serves_no_leases() {
    let seen = Arc::new(Seen::default());
    let port = serve(Leases::Absent, seen.clone());
    let controller = start_controller(port, "absent");
    // Two refused creates: it is waiting to try the lease again.
    wait_until("two lease creates", || {
        seen.lease_posts.load(Ordering::SeqCst) >= 2
    });
    assert_eq!(terminate(controller), Some(0));
}

#[test]
fn sigterm_ends_it_when_the_lease_vanishes_and_the_api_server_stops_answering() {
    let seen = Arc::new(Seen::default());
    let port = serve(Leases::VanishThenHang, seen.clone());
    let controller = start_controller(port, "vanish");
    // The lease was created, read back as 404, and the next read hangs:
    // the election is stuck on an API server that does not answer.
    wait_until("a lease read left unanswered", || {
        seen.lease_reads_after_create.load(Ordering::SeqCst) >= 2
    });
    let code = terminate(controller);
    seen.stop.store(true, Ordering::SeqCst);
    assert_eq!(code, Some(0));
}

#[test]
fn sigterm_ends_it_while_a_grid_kind_is_not_served() {
    let (_runtime, server, handle) = sitegrid_fakeapi::testing::serve_two_sites_on_own_runtime();
    let controller = start_controller_with(&handle.url(), "unserved", &["--leader-elect=false"]);
    // The controllers run: the DeploymentGrid one has asked for its grids
    // (404) and waits for a first list that never comes.
    wait_until("a DeploymentGrid list", || {
        server
            .requests()
            .iter()
            .any(|r| r.path == "/apis/superedge.io/v1/deploymentgrids")
    });
    assert_eq!(terminate(controller), Some(0));
}

#[test]
fn a_leader_whose_api_server_stops_answering_stops_by_itself() {
    let seen = Arc::new(Seen::default());
    let port = serve(Leases::ServedThenHang, seen.clone());
    let mut controller = start_controller_with(
        &format!("http://127.0.0.1:{port}"),
        "cut-off",
        &[
            "--leader-elect-identity=cut-off",
            "--leader-elect-lease-duration=6s",
            "--leader-elect-renew-margin=2s",
        ],
    );
    wait_until("it leads: holds the lease, and its controllers ask", || {
        holder(&seen).as_deref() == Some("cut-off") && seen.others.load(Ordering::SeqCst) > 0
    });
    // Cut off: its renewals go unanswered, and a standby may take the
    // lease once it expires. It must not go on as the leader.
    seen.hang.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + EXIT_BOUND;
    let status = loop {
        if let Some(status) = controller.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            seen.stop.store(true, Ordering::SeqCst);
            controller.kill().unwrap();
            controller.wait().unwrap();
            panic!(
                "still running as the leader {EXIT_BOUND:?} after its API server stopped answering"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    seen.stop.store(true, Ordering::SeqCst);
    assert!(
        !status.success(),
        "it stopped leading but exited with {status}"
    );
    // A release it cannot know the fate of: delivered late, it would clear
    // the lease of the standby that took it meanwhile.
    assert_eq!(
        seen.releases_unanswered.load(Ordering::SeqCst),
        0,
        "it sent a release of a lease it could no longer show it held"
    );
}
