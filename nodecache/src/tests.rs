//! The node cache as the proxy drives it: answers kept while the API server
//! answers, given back while it does not, across a restart from disk.

use std::path::PathBuf;

use bytes::Bytes;
use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use prost::Message;
use sitegrid_apimachinery::protobuf::{envelope, list, list_meta, watch_event};

use super::*;

/// A fresh directory of this test's own.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sitegrid-nodecache-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn pod(name: &str, rv: &str, secret: &str) -> Vec<u8> {
    pb::Pod {
        metadata: Some(ObjectMeta {
            name: Some(name.into()),
            namespace: Some("shop".into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some(rv.into()),
            ..Default::default()
        }),
        spec: Some(pb::PodSpec {
            node_name: Some("bj-1".into()),
            volumes: vec![pb::Volume {
                name: Some("s".into()),
                volume_source: Some(pb::VolumeSource {
                    secret: Some(pb::SecretVolumeSource {
                        secret_name: Some(secret.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            }],
            ..Default::default()
        }),
        status: None,
    }
    .encode_to_vec()
}

fn secret(name: &str, rv: &str) -> Vec<u8> {
    pb::Secret {
        metadata: Some(ObjectMeta {
            name: Some(name.into()),
            namespace: Some("shop".into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        }),
        data: [("password".to_owned(), b"hunter2".to_vec())].into(),
        ..Default::default()
    }
    .encode_to_vec()
}

fn pod_list(rv: &str, pods: &[Vec<u8>]) -> Bytes {
    list(
        "v1",
        "PodList",
        &list_meta(rv, "", None),
        pods.iter().map(Vec::as_slice),
    )
}

fn node_pods() -> Scope {
    Scope::new(None, "", "spec.nodeName=bj-1").unwrap()
}

fn by_name(name: &str) -> Scope {
    Scope::new(Some("shop"), "", &format!("metadata.name={name}")).unwrap()
}

const PB: &[Format] = &[Format::Protobuf, Format::Json];

/// What the kubelet reads at start: its pods, then each one's Secret.
fn kubelet_reads(cache: &NodeCache) {
    cache.listed(
        KeptResource::Pods,
        &node_pods(),
        Format::Protobuf,
        &pod_list("100", &[pod("web", "90", "db"), pod("api", "95", "db")]),
    );
    let secrets = list(
        "v1",
        "SecretList",
        &list_meta("101", "", None),
        [secret("db", "80")].iter().map(Vec::as_slice),
    );
    cache.listed(
        KeptResource::Secrets,
        &by_name("db"),
        Format::Protobuf,
        &secrets,
    );
}

fn names(answer: &Answer) -> Vec<String> {
    wire::list(KeptResource::Pods, Format::Protobuf, &answer.body)
        .unwrap()
        .items
        .into_iter()
        .map(|i| i.facts.name)
        .collect()
}

#[test]
fn what_the_kubelet_listed_is_answered_with_the_api_servers_version() {
    let cache = NodeCache::open("bj-1", None);
    kubelet_reads(&cache);
    let pods = cache.list(KeptResource::Pods, &node_pods(), PB).unwrap();
    assert_eq!(pods.content_type, "application/vnd.kubernetes.protobuf");
    let back = wire::list(KeptResource::Pods, Format::Protobuf, &pods.body).unwrap();
    assert_eq!(
        back.resource_version, "100",
        "the API server's, never one made up"
    );
    assert_eq!(names(&pods), ["api", "web"]);
    // A narrower request is answered from the scope that holds it.
    let narrower = Scope::new(Some("shop"), "", "spec.nodeName=bj-1,metadata.name=web").unwrap();
    assert_eq!(
        names(&cache.list(KeptResource::Pods, &narrower, PB).unwrap()),
        ["web"]
    );
    // Another node's pods, or every pod, were never listed.
    let other = Scope::new(None, "", "spec.nodeName=bj-2").unwrap();
    assert!(matches!(
        cache.list(KeptResource::Pods, &other, PB),
        Err(Refusal::NotKept(_))
    ));
    assert!(matches!(
        cache.list(KeptResource::Pods, &node_pods(), &[Format::Json]),
        Err(Refusal::NotAcceptable(Format::Protobuf))
    ));
    // One object: kept, gone (the kept scope by name says so), or unknown.
    assert!(cache
        .get(KeptResource::Pods, "shop", "web", PB)
        .unwrap()
        .is_some());
    assert!(cache
        .get(KeptResource::Secrets, "shop", "db", PB)
        .unwrap()
        .is_some());
    assert!(matches!(
        cache.get(KeptResource::Pods, "shop", "nope", PB),
        Err(Refusal::NotKept(_))
    ));
}

#[test]
fn watch_events_the_kubelet_saw_change_what_is_kept() {
    let cache = NodeCache::open("bj-1", None);
    kubelet_reads(&cache);
    assert!(cache.continues(KeptResource::Pods, &node_pods(), "100"));
    assert!(
        !cache.continues(KeptResource::Pods, &node_pods(), "99"),
        "a gap: 410 and a relist"
    );
    let mut tee = cache.watch_tee(KeptResource::Pods, node_pods(), Format::Protobuf, false);
    let added = watch_event("ADDED", &envelope("v1", "Pod", &pod("new", "103", "other")));
    let deleted = watch_event("DELETED", &envelope("v1", "Pod", &pod("api", "104", "db")));
    let mut stream = added.to_vec();
    stream.extend_from_slice(&deleted);
    // Any chunking.
    for chunk in stream.chunks(7) {
        tee.feed(chunk);
    }
    let pods = cache.list(KeptResource::Pods, &node_pods(), PB).unwrap();
    assert_eq!(names(&pods), ["new", "web"]);
    assert_eq!(
        wire::list(KeptResource::Pods, Format::Protobuf, &pods.body)
            .unwrap()
            .resource_version,
        "104"
    );
    // An offline watch from there holds (nothing to send); from elsewhere it is told to relist.
    let held = cache
        .watch(
            KeptResource::Pods,
            &node_pods(),
            &WatchFrom::Version("104".into()),
            PB,
        )
        .unwrap();
    assert!(held.frames.is_empty() && !held.ends);
    let old = cache
        .watch(
            KeptResource::Pods,
            &node_pods(),
            &WatchFrom::Version("100".into()),
            PB,
        )
        .unwrap();
    assert!(old.ends);
    let list = cache
        .watch(
            KeptResource::Pods,
            &node_pods(),
            &WatchFrom::Initial { end_bookmark: true },
            PB,
        )
        .unwrap();
    assert_eq!(list.frames.len(), 3, "two ADDED and the end bookmark");
}

#[test]
fn a_watch_list_replaces_its_scope_at_the_end_bookmark_only() {
    let cache = NodeCache::open("bj-1", None);
    let mut tee = cache.watch_tee(KeptResource::Pods, node_pods(), Format::Protobuf, true);
    tee.feed(&watch_event(
        "ADDED",
        &envelope("v1", "Pod", &pod("web", "5", "db")),
    ));
    assert!(
        cache.list(KeptResource::Pods, &node_pods(), PB).is_err(),
        "half a list is not a list"
    );
    tee.feed(&answer::bookmark(
        KeptResource::Pods,
        Format::Protobuf,
        "9",
        true,
    ));
    assert_eq!(
        names(&cache.list(KeptResource::Pods, &node_pods(), PB).unwrap()),
        ["web"]
    );
}

#[test]
fn a_secret_no_pod_references_leaves_memory_and_disk() {
    let d = dir("retain");
    let cache = NodeCache::open("bj-1", Some(Storage::new(&d, None).unwrap()));
    kubelet_reads(&cache);
    cache.flush();
    assert!(d.join("secrets").exists());
    let mut tee = cache.watch_tee(KeptResource::Pods, node_pods(), Format::Protobuf, false);
    tee.feed(&watch_event(
        "DELETED",
        &envelope("v1", "Pod", &pod("web", "101", "db")),
    ));
    assert!(
        cache
            .get(KeptResource::Secrets, "shop", "db", PB)
            .unwrap()
            .is_some(),
        "api still uses it"
    );
    tee.feed(&watch_event(
        "DELETED",
        &envelope("v1", "Pod", &pod("api", "102", "db")),
    ));
    assert!(cache.get(KeptResource::Secrets, "shop", "db", PB).is_err());
    cache.flush();
    assert!(!d.join("secrets").exists(), "its file is gone");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_restart_answers_what_was_kept_and_a_damaged_file_is_refused_whole() {
    let d = dir("restart");
    let storage = || Storage::new(&d, None).unwrap();
    let cache = NodeCache::open("bj-1", Some(storage()));
    kubelet_reads(&cache);
    let flushed = cache.flush();
    assert_eq!((flushed.files, flushed.errors), (2, 0));
    let mode = |p: PathBuf| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions())
            & 0o777
    };
    assert_eq!(mode(d.clone()), 0o700);
    assert_eq!(mode(d.join("pods")), 0o600);
    assert_eq!(mode(d.join("secrets")), 0o600);

    let restarted = NodeCache::open("bj-1", Some(storage()));
    assert_eq!(
        restarted
            .list(KeptResource::Pods, &node_pods(), PB)
            .unwrap(),
        cache.list(KeptResource::Pods, &node_pods(), PB).unwrap()
    );
    assert!(restarted.continues(KeptResource::Pods, &node_pods(), "100"));

    // Another node's files are not this node's answers.
    assert!(matches!(
        NodeCache::open("bj-2", Some(storage())).list(KeptResource::Pods, &node_pods(), PB),
        Err(Refusal::FileRefused(..))
    ));
    // A flipped byte, a torn write: the pod list is refused, never empty.
    let path = d.join("pods");
    let good = std::fs::read(&path).unwrap();
    let mut flipped = good.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    for damaged in [
        flipped,
        good[..good.len() / 2].to_vec(),
        b"garbage".to_vec(),
    ] {
        std::fs::write(&path, damaged).unwrap();
        let reopened = NodeCache::open("bj-1", Some(storage()));
        match reopened.list(KeptResource::Pods, &node_pods(), PB) {
            Err(Refusal::FileRefused(KeptResource::Pods, why)) => assert!(!why.is_empty()),
            other => panic!("{other:?}"),
        }
        // The other files still answer.
        assert!(reopened
            .get(KeptResource::Secrets, "shop", "db", PB)
            .unwrap()
            .is_some());
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_sealed_cache_opens_only_with_its_key() {
    let d = dir("sealed");
    let key = SealingKey::from_bytes(&[7; 32]).unwrap();
    let cache = NodeCache::open("bj-1", Some(Storage::new(&d, Some(key.clone())).unwrap()));
    kubelet_reads(&cache);
    cache.flush();
    let on_disk = std::fs::read(d.join("secrets")).unwrap();
    assert!(
        !on_disk.windows(7).any(|w| w == b"hunter2"),
        "the Secret's data is not readable on disk"
    );
    let with_key = NodeCache::open("bj-1", Some(Storage::new(&d, Some(key)).unwrap()));
    assert!(with_key
        .get(KeptResource::Secrets, "shop", "db", PB)
        .unwrap()
        .is_some());
    let other_key = SealingKey::from_bytes(&[8; 32]).unwrap();
    for storage in [
        Storage::new(&d, Some(other_key)).unwrap(),
        Storage::new(&d, None).unwrap(),
    ] {
        let refused = NodeCache::open("bj-1", Some(storage));
        assert!(matches!(
            refused.list(KeptResource::Pods, &node_pods(), PB),
            Err(Refusal::FileRefused(..))
        ));
    }
    // A file of the plain format is not taken for a sealed one, nor one file for another.
    std::fs::copy(d.join("secrets"), d.join("pods")).unwrap();
    let swapped = NodeCache::open(
        "bj-1",
        Some(Storage::new(&d, Some(SealingKey::from_bytes(&[7; 32]).unwrap())).unwrap()),
    );
    assert!(swapped.list(KeptResource::Pods, &node_pods(), PB).is_err());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_key_file_is_32_bytes_or_64_hex_digits() {
    let d = dir("keyfile");
    std::fs::create_dir_all(&d).unwrap();
    let path = d.join("key");
    std::fs::write(&path, "ab".repeat(32) + "\n").unwrap();
    assert!(SealingKey::read(&path).is_ok());
    std::fs::write(&path, [1u8; 32]).unwrap();
    assert!(SealingKey::read(&path).is_ok());
    std::fs::write(&path, "short").unwrap();
    let err = SealingKey::read(&path).unwrap_err().to_string();
    assert!(err.contains("32 bytes"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// The API server's answer to a TokenRequest for the pod of `uid`: a
/// token good for an hour, of `padding` more bytes (a real one is about a
/// kilobyte).
fn token_answer(uid: &str, token: &str, padding: usize) -> Bytes {
    use k8s_pb::api::authentication::v1 as auth;
    envelope(
        "authentication.k8s.io/v1",
        "TokenRequest",
        &auth::TokenRequest {
            metadata: None,
            spec: Some(auth::TokenRequestSpec {
                bound_object_ref: Some(auth::BoundObjectReference {
                    u_id: Some(uid.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: Some(auth::TokenRequestStatus {
                token: Some(format!("{token}{}", "x".repeat(padding))),
                expiration_timestamp: Some(k8s_pb::apimachinery::pkg::apis::meta::v1::Time {
                    seconds: Some(now_unix() + 3600),
                    nanos: None,
                }),
            }),
        }
        .encode_to_vec(),
    )
}

/// The kubelet's TokenRequest `request` for the pod of `uid` answered, and
/// written as the proxy writes it before handing it on (no background
/// write of the tokens' file): the answer.
fn token_handed_out(cache: &NodeCache, uid: &str, request: &'static [u8], padding: usize) -> Bytes {
    let response = token_answer(uid, std::str::from_utf8(request).unwrap(), padding);
    let key = cache
        .token_issued(
            "shop",
            "default",
            Bytes::from_static(request),
            Format::Protobuf,
            response.clone(),
        )
        .expect("kept");
    cache.write_token(&key).unwrap();
    response
}

/// The token a restarted proxy answers offline to `request`, if any.
fn token_after_restart(d: &std::path::Path, request: &[u8]) -> Option<Bytes> {
    let restarted = NodeCache::open("bj-1", Some(Storage::new(d, None).unwrap()));
    let answer = restarted.token("shop", "default", request, PB).ok()?;
    assert_eq!(answer.status, 201);
    Some(answer.body)
}

#[test]
fn tokens_are_kept_for_their_pod_and_survive_a_restart() {
    let d = dir("tokens");
    let cache = NodeCache::open("bj-1", Some(Storage::new(&d, None).unwrap()));
    kubelet_reads(&cache);
    let response = token_answer("uid-web", "real.token", 0);
    let request = Bytes::from_static(b"the kubelet's request");
    cache.token_issued(
        "shop",
        "default",
        request.clone(),
        Format::Protobuf,
        response.clone(),
    );
    cache.flush();
    let restarted = NodeCache::open("bj-1", Some(Storage::new(&d, None).unwrap()));
    // Something changes (the kubelet lists again): the token stays, its pod is kept.
    kubelet_reads(&restarted);
    let answer = restarted.token("shop", "default", &request, PB).unwrap();
    assert_eq!((answer.status, answer.body), (201, response));
    assert!(restarted.token("shop", "default", b"another", PB).is_err());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_token_handed_out_survives_a_crash_before_the_tokens_file_is_written() {
    let d = dir("token-crash");
    let cache = NodeCache::open("bj-1", Some(Storage::new(&d, None).unwrap()));
    kubelet_reads(&cache);
    let web = token_handed_out(&cache, "uid-web", b"web's request", 1000);
    // The proxy dies here: no background write ever ran.
    assert_eq!(token_after_restart(&d, b"web's request"), Some(web.clone()));

    // The background write, then the next token: both survive the next crash.
    cache.flush();
    let api = token_handed_out(&cache, "uid-api", b"api's request", 1000);
    assert_eq!(token_after_restart(&d, b"web's request"), Some(web.clone()));
    assert_eq!(token_after_restart(&d, b"api's request"), Some(api.clone()));

    // A restarted proxy goes on where the last one stopped.
    let restarted = NodeCache::open("bj-1", Some(Storage::new(&d, None).unwrap()));
    kubelet_reads(&restarted);
    let again = token_handed_out(&restarted, "uid-web", b"web's next request", 1000);
    for (request, answer) in [
        (&b"web's request"[..], &web),
        (b"api's request", &api),
        (b"web's next request", &again),
    ] {
        assert_eq!(token_after_restart(&d, request).as_ref(), Some(answer));
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_token_torn_by_a_crash_while_it_was_written_is_the_only_one_lost() {
    let d = dir("token-torn");
    let cache = NodeCache::open("bj-1", Some(Storage::new(&d, None).unwrap()));
    kubelet_reads(&cache);
    let web = token_handed_out(&cache, "uid-web", b"web's request", 1000);
    token_handed_out(&cache, "uid-api", b"api's request", 1000);
    // The machine died while the second token was being written: its
    // record is half there (it was never handed out).
    let path = d.join("serviceaccount-tokens.journal");
    let mut journal = std::fs::read(&path).unwrap();
    let second = journal
        .windows(8)
        .enumerate()
        .filter(|(_, w)| w == b"SGPXNODE")
        .nth(1)
        .map(|(at, _)| at)
        .expect("two records");
    journal[second + 600..].fill(0);
    std::fs::write(&path, &journal).unwrap();
    assert_eq!(token_after_restart(&d, b"web's request"), Some(web));
    assert_eq!(token_after_restart(&d, b"api's request"), None);
    // Another node's proxy on this directory reads none of them.
    let other = NodeCache::open("bj-2", Some(Storage::new(&d, None).unwrap()));
    assert!(other
        .token("shop", "default", b"web's request", PB)
        .is_err());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn more_tokens_at_once_than_the_journal_holds_all_survive_a_crash() {
    let d = dir("token-burst");
    let cache = NodeCache::open("bj-1", Some(Storage::new(&d, None).unwrap()));
    kubelet_reads(&cache);
    // 120 tokens of 3 KiB in a row, no background write between them: more
    // than the journal holds.
    let requests: Vec<&'static [u8]> = (0..120)
        .map(|i| &*Box::leak(format!("request {i}").into_bytes().into_boxed_slice()))
        .collect();
    let answers: Vec<Bytes> = requests
        .iter()
        .enumerate()
        .map(|(i, r)| token_handed_out(&cache, ["uid-web", "uid-api"][i % 2], r, 3000))
        .collect();
    let restarted = NodeCache::open("bj-1", Some(Storage::new(&d, None).unwrap()));
    for (request, answer) in requests.iter().zip(&answers) {
        let got = restarted.token("shop", "default", request, PB).unwrap();
        assert_eq!(&got.body, answer);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_reboot_reports_the_nodes_pods_not_ready_once_and_a_first_start_nothing() {
    let d = dir("boot");
    let storage = || Storage::new(&d, None).unwrap();
    let mut done = pb::Pod::decode(pod("done", "96", "db").as_slice()).unwrap();
    done.status = Some(pb::PodStatus {
        phase: Some("Succeeded".into()),
        ..Default::default()
    });
    let cache = NodeCache::open("bj-1", Some(storage()));
    cache.listed(
        KeptResource::Pods,
        &node_pods(),
        Format::Protobuf,
        &pod_list("100", &[pod("web", "90", "db"), done.encode_to_vec()]),
    );
    // No boot on record: whether the node rebooted is not told.
    assert_eq!(cache.booted("boot-a"), 0);
    assert!(cache.local_pods().borrow().is_empty());
    cache.flush();
    // Started again in the same boot: its pods run where they ran.
    let restarted = NodeCache::open("bj-1", Some(storage()));
    assert_eq!(restarted.booted("boot-a"), 0);
    assert!(restarted.local_pods().borrow().is_empty());

    let rebooted = NodeCache::open("bj-1", Some(storage()));
    assert_eq!(rebooted.booted("boot-b"), 2);
    let reports = rebooted.local_pods().borrow().clone();
    let said: Vec<(&str, bool, bool, usize)> = reports
        .iter()
        .map(|p| (p.uid.as_str(), p.ready, p.running, p.ips.len()))
        .collect();
    assert_eq!(
        said,
        [("uid-done", false, false, 0), ("uid-web", false, true, 0)],
        "every pod of the node not ready, the finished one gone, no address known"
    );
    // On disk at once: a restart in this boot keeps them and marks nothing.
    let again = NodeCache::open("bj-1", Some(storage()));
    assert_eq!(again.booted("boot-b"), 0);
    assert_eq!(*again.local_pods().borrow(), reports);

    // The reports cannot be written (a directory where their file goes):
    // the boot is not recorded, so a restart in it marks the pods again,
    // until a flush writes the reports and records it.
    std::fs::remove_file(d.join(persist::LOCAL_FILE)).unwrap();
    std::fs::create_dir(d.join(persist::LOCAL_FILE)).unwrap();
    let unwritten = NodeCache::open("bj-1", Some(storage()));
    assert_eq!(unwritten.booted("boot-c"), 2);
    assert_eq!(NodeCache::open("bj-1", Some(storage())).booted("boot-c"), 2);
    std::fs::remove_dir(d.join(persist::LOCAL_FILE)).unwrap();
    assert_eq!(unwritten.flush().errors, 0);
    let after = NodeCache::open("bj-1", Some(storage()));
    assert_eq!(after.booted("boot-c"), 0);
    assert_eq!(*after.local_pods().borrow(), reports);
    let _ = std::fs::remove_dir_all(&d);
}
