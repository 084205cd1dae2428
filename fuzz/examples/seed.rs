//! Writes the generated part of the seed corpus (`corpus/<target>/gen-*`):
//! the two-site world's objects as upstream scripts, watch frames and
//! protobuf inputs, a snapshot of it, and certificates and kubeconfigs from
//! `sitegrid-certs`. The hand-written seeds (selectors, paths, queries,
//! tokens, `Accept` headers from `shared/reference/`) sit beside them.
//!
//! `cargo run -p sitegrid-fuzz --example seed` (from the workspace root).

use std::{fs, path::Path};

use serde_json::{json, Value};
use sitegrid_cache::persist::{KindSnapshot, LoggedEvent, Snapshot, Text};
use sitegrid_certs::{KeyMaterial, Pki};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let put = |target: &str, name: &str, bytes: &[u8]| -> std::io::Result<()> {
        let dir = corpus.join(target);
        fs::create_dir_all(&dir)?;
        fs::write(dir.join(format!("gen-{name}")), bytes)
    };
    let world = |version: &str| -> Vec<Value> {
        sitegrid_fakeapi::sample::two_sites(version)
            .into_iter()
            .enumerate()
            .map(|(i, mut o)| {
                o["metadata"]["resourceVersion"] = json!((i + 1).to_string());
                o
            })
            .collect()
    };
    let letter = |o: &Value| match o["kind"].as_str() {
        Some("Service") => 's',
        Some("Endpoints") => 'e',
        Some("EndpointSlice") => 'l',
        _ => 'n',
    };

    // projector: the world listed kind by kind, then a change and a delete.
    for version in ["v1", "v1beta1"] {
        let objects = world(version);
        let mut script = if version == "v1beta1" {
            "v1beta1\n".to_owned()
        } else {
            String::new()
        };
        for kind in ['n', 's', 'e', 'l'] {
            script.push_str(&format!("[{kind}\n"));
            for o in objects.iter().filter(|o| letter(o) == kind) {
                script.push_str(&format!("={kind} {o}\n"));
            }
            script.push_str(&format!("]{kind}\n"));
        }
        if let Some(slice) = objects.iter().find(|o| letter(o) == 'l') {
            script.push_str(&format!("-l {slice}\n"));
        }
        if let Some(node) = objects.iter().find(|o| letter(o) == 'n') {
            let mut moved = node.clone();
            moved["metadata"]["labels"]["location"] = json!("guangzhou");
            moved["metadata"]["resourceVersion"] = json!("999");
            script.push_str(&format!("+n {moved}\n"));
        }
        put("projector", &format!("world-{version}"), script.as_bytes())?;
    }

    // watch_frames and protobuf: each object once, as a frame and as JSON.
    for (i, o) in world("v1")
        .iter()
        .chain(world("v1beta1").iter().filter(|o| letter(o) == 'l'))
        .enumerate()
    {
        let frame = json!({"type": if i % 2 == 0 { "ADDED" } else { "MODIFIED" }, "object": o});
        let bookmark = json!({"type":"BOOKMARK","object":{"kind":o["kind"],"apiVersion":o["apiVersion"],"metadata":{"resourceVersion":"434","creationTimestamp":null}}});
        put(
            "watch_frames",
            &format!("{i:02}"),
            format!("{frame}\n{bookmark}\n").as_bytes(),
        )?;
        let pick: u8 = match (letter(o), o["apiVersion"].as_str()) {
            ('s', _) => 0,
            ('e', _) => 1,
            ('n', _) => 2,
            (_, Some("discovery.k8s.io/v1")) => 3,
            _ => 4,
        };
        let mut bytes = vec![pick];
        bytes.extend_from_slice(o.to_string().as_bytes());
        put("protobuf", &format!("{i:02}"), &bytes)?;
    }

    // snapshot: the world's Services and Nodes as served, with a logged change.
    let objects = world("v1");
    let bodies = |kind: char| -> Vec<String> {
        objects
            .iter()
            .filter(|o| letter(o) == kind)
            .map(Value::to_string)
            .collect()
    };
    let services: Vec<String> = bodies('s');
    let snapshot = Snapshot {
        node: "bj-1".into(),
        written_ms: 1_795_000_000_000,
        clock: 100,
        slice_version: "v1".into(),
        kinds: vec![
            KindSnapshot {
                resource: "services".into(),
                compacted_rv: 0,
                last_rv: 100,
                log: vec![LoggedEvent {
                    rv: 50,
                    event_type: "ADDED".into(),
                    object: services[0].clone().into(),
                    prev: None,
                }],
                objects: services.into_iter().map(Text::from).collect(),
            },
            KindSnapshot {
                resource: "nodes".into(),
                compacted_rv: 0,
                last_rv: 100,
                objects: bodies('n').into_iter().map(Text::from).collect(),
                log: Vec::new(),
            },
        ],
    };
    let file = snapshot.encode()?;
    put("snapshot", "file", &[[0u8].as_slice(), &file].concat())?;
    put("snapshot", "lz4", &[[3u8].as_slice(), &file[24..]].concat())?;
    let mut plain = Vec::new();
    std::io::Read::read_to_end(
        &mut lz4_flex::frame::FrameDecoder::new(&file[24..]),
        &mut plain,
    )?;
    put("snapshot", "postcard", &[[4u8].as_slice(), &plain].concat())?;
    let block = lz4_flex::compress_prepend_size(&plain);
    put("snapshot", "lz4-v1", &[[1u8].as_slice(), &block].concat())?;
    put(
        "snapshot",
        "postcard-v1",
        &[[2u8].as_slice(), &plain].concat(),
    )?;

    // certs and kubeconfig: what sitegrid-certs writes.
    let dir = std::env::temp_dir().join(format!("sitegrid-fuzz-seed-{}", std::process::id()));
    let pki = Pki::new(&dir, true);
    pki.init("sitegrid-ca", 365)?;
    pki.server("sitegrid-proxy", &["proxy.local".into()], &[], 365)?;
    pki.client("kube-proxy", Some("system:kube-proxy"), &[], 365)?;
    pki.kubeconfig(
        "kube-proxy",
        "https://127.0.0.1:6443",
        &KeyMaterial::Embedded,
    )?;
    let read = |name: &str| fs::read(dir.join(name));
    let sep = b"%%\n".as_slice();
    put(
        "certs",
        "ca",
        &[read("ca.crt")?, read("ca.key")?].concat_with(sep),
    )?;
    put(
        "certs",
        "server-with-client-ca",
        &[read("server.crt")?, read("server.key")?, read("ca.crt")?].concat_with(sep),
    )?;
    put(
        "certs",
        "client",
        &[read("kube-proxy.crt")?, read("kube-proxy.key")?].concat_with(sep),
    )?;
    put("kubeconfig", "embedded", &read("kube-proxy.kubeconfig")?)?;
    fs::remove_dir_all(&dir)?;

    // node_cache_file: what a node cache of bj-1 writes after the kubelet
    // read a pod, its Secret and its token, and reported the pod offline;
    // each file whole (mode 0-3) and its records alone (mode 0x80-0x83).
    let dir = std::env::temp_dir().join(format!("sitegrid-fuzz-seed-nc-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    {
        use sitegrid_nodecache::{Format, KeptResource, NodeCache, Scope, Storage};
        let cache = NodeCache::open("bj-1", Some(Storage::new(&dir, None)?));
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web", "resourceVersion": "7"},
            "spec": {"nodeName": "bj-1", "volumes": [{"name": "db", "secret": {"secretName": "db"}}],
                     "containers": [{"name": "web", "image": "web:1"}]},
            "status": {"phase": "Running", "podIP": "10.0.1.5", "podIPs": [{"ip": "10.0.1.5"}],
                       "conditions": [{"type": "Ready", "status": "True"}]}});
        let list = |kind: &str, items: Vec<Value>| {
            serde_json::to_vec(
                &json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "9"}, "items": items}),
            )
        };
        cache.listed(
            KeptResource::Pods,
            &Scope::new(None, "", "spec.nodeName=bj-1")?,
            Format::Json,
            &list("PodList", vec![pod])?,
        );
        cache.listed(
            KeptResource::Secrets,
            &Scope::new(Some("shop"), "", "metadata.name=db")?,
            Format::Json,
            &list(
                "SecretList",
                vec![
                    json!({"metadata": {"name": "db", "namespace": "shop", "resourceVersion": "3"},
                "type": "Opaque", "data": {"password": "aHVudGVyMg=="}}),
                ],
            )?,
        );
        let token = cache.token_issued(
            "shop",
            "web",
            bytes::Bytes::from_static(b"{\"spec\":{}}"),
            Format::Json,
            bytes::Bytes::from(serde_json::to_vec(&json!({"kind": "TokenRequest",
                "spec": {"boundObjectRef": {"kind": "Pod", "name": "web", "uid": "uid-web"}},
                "status": {"token": "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", "expirationTimestamp": "2030-01-01T00:00:00Z"}}))?),
        );
        if let Some(key) = token {
            cache.write_token(&key)?;
        }
        let patch = br#"{"status":{"podIP":"10.0.1.50","podIPs":[{"ip":"10.0.1.50"}]}}"#;
        let _ = cache.status_written("shop", "web", patch);
        cache.flush();
    }
    for (mode, name) in [
        (0u8, "pods"),
        (1, "secrets"),
        (2, sitegrid_nodecache::persist::TOKENS_FILE),
        (3, sitegrid_nodecache::persist::LOCAL_FILE),
        (0x40, sitegrid_nodecache::journal::JOURNAL_FILE),
    ] {
        let mut file = fs::read(dir.join(name))?;
        if mode == 0x40 {
            // The journal's one record, not the zeros after it.
            let len = u64::from_le_bytes(file[20..28].try_into()?);
            file.truncate(28 + usize::try_from(len)?);
        }
        put(
            "node_cache_file",
            name,
            &[[mode].as_slice(), &file].concat(),
        )?;
        put(
            "node_cache_file",
            &format!("{name}-records"),
            &[[mode | 0x80].as_slice(), &file[28..]].concat(),
        )?;
    }
    fs::remove_dir_all(&dir)?;
    Ok(())
}

/// Joins byte strings with a separator.
trait ConcatWith {
    fn concat_with(&self, sep: &[u8]) -> Vec<u8>;
}

impl ConcatWith for [Vec<u8>] {
    fn concat_with(&self, sep: &[u8]) -> Vec<u8> {
        self.join(sep)
    }
}
