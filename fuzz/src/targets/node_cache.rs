//! What the node cache reads back from its directory, and what the kubelet
//! writes to it offline.

use sitegrid_nodecache::{local, KeptResource, NodeCache, Storage};

/// The node the fuzzed files are loaded for (the seeds were written for it).
const NODE: &str = "bj-1";

/// A node cache file (`--data-dir`'s `node-cache/`), read back as at start.
///
/// The first byte picks the file: its low two bits `0` the pods' file,
/// `1` the Secrets', `2` the tokens', `3` the kubelet's offline reports; bit
/// `0x40` instead the tokens' journal (read after the tokens' file); bit
/// `0x80` frames the rest with a valid header and checksum (so the records
/// themselves are fuzzed), else the rest is the whole file. What loads is
/// opened as a node cache and asked what the kubelet asks offline.
pub fn node_cache_file(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    // On tmpfs where there is one: opening a node cache makes its token
    // journal (zeros, synced), which a disk would make the slowest step.
    let shm = std::path::Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_owned()
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("sitegrid-fuzz-node-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let Ok(storage) = Storage::new(&dir, None) else {
        return;
    };
    let name = match mode & 3 {
        _ if mode & 0x40 != 0 => sitegrid_nodecache::journal::JOURNAL_FILE.to_owned(),
        0 => KeptResource::Pods.file_name(),
        1 => KeptResource::Secrets.file_name(),
        2 => sitegrid_nodecache::persist::TOKENS_FILE.to_owned(),
        _ => sitegrid_nodecache::persist::LOCAL_FILE.to_owned(),
    };
    let file = if mode & 0x80 != 0 {
        sitegrid_nodecache::persist::framed(rest)
    } else {
        rest.to_vec()
    };
    if std::fs::write(dir.join(&name), file).is_err() {
        return;
    }
    let cache = NodeCache::open(NODE, Some(storage));
    for resource in [KeptResource::Pods, KeptResource::Secrets] {
        let scope = sitegrid_nodecache::Scope::new(None, "", "spec.nodeName=bj-1");
        if let Ok(scope) = scope {
            let _ = cache.list(resource, &scope, &[sitegrid_nodecache::Format::Json]);
        }
    }
    let _ = cache.token("shop", "web", rest, &[sitegrid_nodecache::Format::Json]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pod status patch as the kubelet writes it (`PATCH …/pods/<p>/status`,
/// strategic merge JSON), applied to a pod as the node cache applies it
/// offline, and what the served endpoints then read of the pod; the first
/// line is the pod, the rest the patch.
pub fn pod_status(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (pod, patch) = text.split_once('\n').unwrap_or((&text, "{}"));
    let (Ok(mut pod), Ok(patch)) = (
        serde_json::from_str::<serde_json::Value>(pod),
        serde_json::from_str::<serde_json::Value>(patch),
    ) else {
        return;
    };
    local::strategic_merge(&mut pod, &patch);
    let summary = local::summary(&pod);
    // What is served comes from the pod as patched.
    if let Some(ip) = pod["status"]["podIP"].as_str().filter(|ip| !ip.is_empty()) {
        if pod["status"]["podIPs"].as_array().is_none_or(Vec::is_empty) {
            assert_eq!(summary.ips, [ip.to_owned()]);
        }
    }
}
