//! What the binaries read at start: kubeconfigs, certificates and keys.

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
};

use kube::config::{KubeConfigOptions, Kubeconfig};
use sitegrid_proxy::http::tls::{ReloadingTls, TlsFiles};

use crate::text;

/// A kubeconfig, as `--kubeconfig` is read by every binary
/// (`sitegrid_runtime::kube_config`: kube's parser, then the chosen
/// context, cluster URL, inline CA data, proxy URL).
///
/// Paths in the file are dropped first: following them would read whatever
/// file (or device) the input names, and an `exec` plugin would run a
/// command; neither is parsing.
pub fn kubeconfig(data: &[u8]) {
    let Some(yaml) = text(data) else { return };
    let Ok(mut config) = Kubeconfig::from_yaml(yaml) else {
        return;
    };
    for named in &mut config.clusters {
        if let Some(cluster) = &mut named.cluster {
            cluster.certificate_authority = None;
        }
    }
    for named in &mut config.auth_infos {
        if let Some(user) = &mut named.auth_info {
            user.client_certificate = None;
            user.client_key = None;
            user.token_file = None;
            user.exec = None;
            user.auth_provider = None;
        }
    }
    let _ = runtime().block_on(kube::Config::from_custom_kubeconfig(
        config,
        &KubeConfigOptions::default(),
    ));
}

/// Certificates and keys: the input is up to three PEM texts separated by
/// a line `%%`. The first two are read as `sitegrid-certs` reads a CA back
/// (certificate, key), and as the proxy's `--cert-file` and `--key-file`;
/// the third, when present, as its `--ca-file`. The proxy reads files, so
/// they are written to a scratch directory of this process first.
pub fn certs(data: &[u8]) {
    let texts: Vec<&[u8]> = split_sections(data);
    let cert = texts.first().copied().unwrap_or_default();
    let key = texts.get(1).copied().unwrap_or_default();
    if let (Some(cert), Some(key)) = (text(cert), text(key)) {
        let _ = sitegrid_certs::parse_cert(Path::new("fuzz.crt"), cert);
        let _ = sitegrid_certs::fuzzing::ca(cert, key);
    }
    let dir = scratch();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).ok().map(|()| path)
    };
    let (Some(cert), Some(key)) = (write("tls.crt", cert), write("tls.key", key)) else {
        return;
    };
    let client_ca = match texts.get(2) {
        Some(ca) => match write("ca.crt", ca) {
            Some(path) => Some(path),
            None => return,
        },
        None => None,
    };
    let _ = ReloadingTls::load(TlsFiles {
        cert,
        key,
        client_ca,
    });
}

/// The PEM texts of a `certs` input, split at lines `%%`.
fn split_sections(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 3 <= data.len() {
        if &data[i..i + 3] == b"%%\n" && (i == 0 || data[i - 1] == b'\n') {
            out.push(&data[start..i]);
            start = i + 3;
            i = start;
        } else {
            i += 1;
        }
    }
    out.push(&data[start..]);
    out
}

/// A directory of this process for the files the proxy reads.
fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("sitegrid-fuzz-certs-{}", std::process::id()));
        // A directory that cannot be made shows as a write error per input.
        let _ = std::fs::create_dir_all(&dir);
        dir
    })
}

/// One current-thread runtime for kube's async loader (it does no I/O here).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            // Building a runtime without I/O or timers only fails when the OS refuses a thread-local.
            .expect("a current-thread runtime")
    })
}
