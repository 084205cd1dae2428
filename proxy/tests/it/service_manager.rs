//! Run by systemd as a host service (`deploy/static/sitegrid-proxy.service`,
//! `Type=notify`, ordered before the kubelet): the proxy says `READY=1` on
//! `NOTIFY_SOCKET` once it serves, so the kubelet started after that message
//! finds the proxy's ports open, and never before.

use std::{
    os::unix::net::UnixDatagram,
    process::{Command, Stdio},
    time::Duration,
};

use crate::common::{healthz_status, world_for_binary};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_tells_the_service_manager_it_is_ready_once_its_ports_answer() {
    let (_upstream, dir, kubeconfig) = world_for_binary("notify").await;
    let free_port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let (addr, metrics) = (free_port(), free_port());
    // systemd's end of the socket.
    let socket = dir.join("notify.sock");
    let manager = UnixDatagram::bind(&socket).unwrap();
    manager
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut proxy = Command::new(env!("CARGO_BIN_EXE_sitegrid-proxy"))
        .env("NOTIFY_SOCKET", &socket)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--hostname=bj-1")
        .arg(format!("--bind-address={addr}"))
        .arg(format!("--metrics-bind-address={metrics}"))
        .arg(format!("--data-dir={}", dir.join("data").display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let message = tokio::task::spawn_blocking(move || {
        let mut buf = [0u8; 512];
        manager
            .recv(&mut buf)
            .map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    })
    .await
    .unwrap();
    // Asked at once, without a retry: the ports answer when the message comes.
    let (served, operated) = (healthz_status(addr).await, healthz_status(metrics).await);
    let _ = Command::new("kill").arg(proxy.id().to_string()).status();
    let _ = proxy.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        message.expect("no message from the proxy within 60 s"),
        "READY=1\n"
    );
    // (Its /healthz is the operator port's; here it is passed upstream.)
    assert!(
        served
            .as_deref()
            .is_some_and(|s| s.starts_with("HTTP/1.1 ")),
        "the proxy's port: {served:?}"
    );
    assert_eq!(
        operated.as_deref(),
        Some("HTTP/1.1 200 OK"),
        "the operator port"
    );
}
