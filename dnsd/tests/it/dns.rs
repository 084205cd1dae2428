//! What a client on a node resolves, through a real DNS server reading
//! dnsd's file, as the API server changes.

use crate::common::{ordinal_name, wait_for, Cluster, HEADLESS_NAME};
use crate::node::{Dnsd, Dnsmasq};

fn ips(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn each_site_resolves_the_same_names_to_its_own_pods_and_follows_them() {
    let cluster = Cluster::start();
    let bj = Dnsd::start(&cluster, "bj-1");
    let gz = Dnsd::start(&cluster, "gz-2");
    let (bj_dns, gz_dns) = (Dnsmasq::start(&bj.dir), Dnsmasq::start(&gz.dir));
    let resolve = |dns: &Dnsmasq, name: &str, want: &[&str]| {
        wait_for(
            &format!("{name} on :{}", dns.port),
            || dns.lookup(name),
            |got| *got == ips(want),
        );
    };

    for i in 0..3 {
        resolve(&bj_dns, &ordinal_name(i), &[&format!("10.0.0.{}", 10 + i)]);
        resolve(&gz_dns, &ordinal_name(i), &[&format!("10.0.1.{}", 10 + i)]);
    }
    // The headless Service answers with the site's ready pods only.
    resolve(
        &bj_dns,
        HEADLESS_NAME,
        &["10.0.0.10", "10.0.0.11", "10.0.0.12"],
    );
    resolve(
        &gz_dns,
        HEADLESS_NAME,
        &["10.0.1.10", "10.0.1.11", "10.0.1.12"],
    );

    let bj_sts = cluster.statefulset("beijing");
    // A pod comes back at another address.
    cluster.set_pod(&bj_sts, 0, Some("10.0.0.40"), true);
    resolve(&bj_dns, &ordinal_name(0), &["10.0.0.40"]);
    resolve(&gz_dns, &ordinal_name(0), &["10.0.1.10"]);
    // A pod turns unready: gone from the Service's name, still under its own.
    cluster.set_pod(&bj_sts, 1, Some("10.0.0.11"), false);
    resolve(&bj_dns, HEADLESS_NAME, &["10.0.0.12", "10.0.0.40"]);
    resolve(&bj_dns, &ordinal_name(1), &["10.0.0.11"]);
    // A pod is deleted.
    cluster
        .server
        .delete("pods", Some("default"), "statefulsetgrid-demo-beijing-2");
    resolve(&bj_dns, &ordinal_name(2), &[]);
    resolve(&bj_dns, HEADLESS_NAME, &["10.0.0.40"]);
    // Scaled up: the new pod's name appears once it has an address.
    cluster.scale(&bj_sts, 4);
    let bj_sts = cluster.statefulset("beijing");
    cluster.set_pod(&bj_sts, 3, None, false);
    cluster.set_pod(&bj_sts, 2, Some("10.0.0.52"), true);
    resolve(&bj_dns, &ordinal_name(2), &["10.0.0.52"]);
    cluster.set_pod(&bj_sts, 3, Some("10.0.0.53"), true);
    resolve(&bj_dns, &ordinal_name(3), &["10.0.0.53"]);
    // Scaled down: the pods beyond the replicas are no longer named.
    cluster.scale(&bj_sts, 1);
    resolve(&bj_dns, &ordinal_name(3), &[]);
    resolve(&bj_dns, &ordinal_name(0), &["10.0.0.40"]);
    assert_eq!(gz_dns.lookup(&ordinal_name(3)), ips(&[]));

    // bj-1 moves to guangzhou: it answers as guangzhou does.
    cluster.relabel("bj-1", "guangzhou");
    for i in 0..3 {
        resolve(&bj_dns, &ordinal_name(i), &[&format!("10.0.1.{}", 10 + i)]);
    }
    // The grid goes: no names on either node (the StatefulSets are still being collected).
    cluster
        .server
        .delete("statefulsetgrids", Some("default"), "statefulsetgrid-demo");
    for dnsd in [&bj, &gz] {
        wait_for("an empty hosts file", || dnsd.records(), Vec::is_empty);
    }
    resolve(&gz_dns, &ordinal_name(0), &[]);
    assert!(bj.metric("sitegrid_dnsd_writes_total") >= 8.0);
    assert_eq!(gz.metric("sitegrid_dnsd_names"), 0.0);
}

#[test]
fn watch_errors_are_exported_at_zero_before_any_error() {
    let cluster = Cluster::start();
    let bj = Dnsd::start(&cluster, "bj-1");
    let (_, metrics) = bj.get("/metrics");
    // A series that only appears with its first error would never show a
    // rate() above 0 for that error: every watched resource has one from
    // the start.
    for resource in [
        "nodes",
        "statefulsetgrids",
        "servicegrids",
        "statefulsets",
        "pods",
    ] {
        let series = format!("sitegrid_dnsd_watch_errors_total{{resource=\"{resource}\"}} 0\n");
        assert!(metrics.contains(&series), "{series} missing:\n{metrics}");
    }
}

#[test]
fn dnsd_reads_only_its_own_node_and_sites_objects() {
    let cluster = Cluster::start();
    let bj = Dnsd::start(&cluster, "bj-1");
    assert_eq!(bj.records().len(), 6, "{}", bj.hosts());
    let reads: Vec<String> = cluster
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .map(|r| format!("{}?{}", r.path, r.query))
        .collect();
    let decoded: Vec<String> = reads
        .iter()
        .map(|r| {
            r.replace("%2C", ",")
                .replace("%3D", "=")
                .replace("%2F", "/")
                .replace("%28", "(")
                .replace("%29", ")")
                .replace('+', " ")
        })
        .collect();
    let of = |path: &str| {
        decoded
            .iter()
            .filter(|r| r.starts_with(&format!("{path}?")))
            .cloned()
            .collect::<Vec<_>>()
    };
    let nodes = of("/api/v1/nodes");
    assert!(
        !nodes.is_empty()
            && nodes
                .iter()
                .all(|r| r.contains("fieldSelector=metadata.name=bj-1")),
        "{nodes:?}"
    );
    let sts = of("/apis/apps/v1/statefulsets");
    assert!(
        !sts.is_empty()
            && sts.iter().all(|r| r.contains(
                "labelSelector=superedge.io/grid-selector,sitegrid.io/node-unit in (beijing)"
            )),
        "{sts:?}"
    );
    let pods = of("/api/v1/pods");
    let want = "labelSelector=statefulset.kubernetes.io/pod-name in (statefulsetgrid-demo-beijing-0,statefulsetgrid-demo-beijing-1,statefulsetgrid-demo-beijing-2)";
    assert!(
        !pods.is_empty() && pods.iter().all(|r| r.contains(want)),
        "{pods:?}"
    );
    // Nothing else: no other site's objects, no Endpoints, no Services.
    for r in &decoded {
        let path = r.split('?').next().unwrap_or_default();
        assert!(
            [
                "/api/v1/nodes",
                "/apis/apps/v1/statefulsets",
                "/api/v1/pods",
                "/apis/superedge.io/v1/statefulsetgrids",
                "/apis/superedge.io/v1/servicegrids"
            ]
            .contains(&path),
            "unexpected read {r}"
        );
    }
}

#[test]
fn a_failed_write_keeps_the_old_file_and_is_retried() {
    let cluster = Cluster::start();
    let bj = Dnsd::start(&cluster, "bj-1");
    let dns = Dnsmasq::start(&bj.dir);
    wait_for(
        "pod 0",
        || dns.lookup(&ordinal_name(0)),
        |got| *got == ips(&["10.0.0.10"]),
    );
    // A directory where dnsd's temporary file goes: no write can succeed, even as root.
    let blocker = bj.dir.join(".hosts.tmp");
    std::fs::create_dir_all(blocker.join("x")).unwrap();
    let sts = cluster.statefulset("beijing");
    cluster.set_pod(&sts, 0, Some("10.0.0.99"), true);
    wait_for(
        "a write error",
        || bj.metric("sitegrid_dnsd_write_errors_total"),
        |n| *n >= 2.0,
    );
    assert_eq!(
        dns.lookup(&ordinal_name(0)),
        ips(&["10.0.0.10"]),
        "the old file must keep answering"
    );
    assert_eq!(bj.get("/readyz").0, 200);
    std::fs::remove_dir_all(&blocker).unwrap();
    // Retried without any further change in the API server.
    wait_for(
        "the retried write",
        || dns.lookup(&ordinal_name(0)),
        |got| *got == ips(&["10.0.0.99"]),
    );
}
