//! SIGTERM ends the controller whatever state it is in: against a scripted
//! API server on 127.0.0.1 whose Lease API fails (it serves no Leases at
//! all, every request `404`; or the Lease is created, then `404`, then
//! requests go unanswered: an API server going away), and, without
//! election, against the in-memory API server, which serves no
//! DeploymentGrids (that controller never lists).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
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
}

/// The server's view: requests seen, and whether the Lease was created.
#[derive(Default)]
struct Seen {
    lease_posts: AtomicUsize,
    lease_reads_after_create: AtomicUsize,
    created: AtomicBool,
    stop: AtomicBool,
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
        let answer = match (leases, is_lease, method.as_str()) {
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
