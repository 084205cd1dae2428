//! Out of file descriptors: a proxy whose open-files limit is reached keeps
//! the connections it has, says so once (not once per failed accept, in a
//! loop that would also burn a core), and accepts again as soon as
//! connections close.

use std::{
    io::Read,
    process::{Command, Stdio},
    time::Duration,
};

use crate::common::{healthz_status, world_for_binary};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_the_proxy_backs_off_and_recovers() {
    let (_upstream, dir, kubeconfig) = world_for_binary("fd-limit").await;
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // `ulimit -n` sets the hard limit too, so the proxy cannot raise it.
    let mut proxy = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 48 && exec "$@""#)
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_sitegrid-proxy"))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--hostname=bj-1")
        .arg(format!("--bind-address={addr}"))
        .arg("--data-dir=")
        .arg("--log-level=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let healthy = || async {
        for _ in 0..600 {
            if healthz_status(addr)
                .await
                .is_some_and(|s| s.starts_with("HTTP/1.1 200"))
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    };
    assert!(healthy().await, "the proxy never answered");
    // Twice as many connections as it has descriptors: the kernel queues
    // them, the proxy accepts until the limit and then gets EMFILE.
    let mut held = Vec::new();
    for _ in 0..96 {
        held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(held);
    assert!(healthy().await, "the proxy did not accept again");
    let _ = Command::new("kill").arg(proxy.id().to_string()).status();
    let _ = proxy.wait();
    let mut log = String::new();
    proxy
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let failed = log.lines().filter(|l| l.contains("accept failed")).count();
    assert!(failed >= 1, "the limit was never reached:\n{log}");
    // Once per run of failures (a run ends when a connection closes and one
    // is accepted): a handful here; without the backoff, one per retry.
    assert!(failed <= 10, "{failed} 'accept failed' lines: a log flood");
    assert!(log.contains("accepting connections again"), "{log}");
}
