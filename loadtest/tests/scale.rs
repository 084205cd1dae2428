//! sitegrid-scale at a tiny size, with real sitegrid-proxy processes (the
//! binary `cargo test --workspace` builds beside this test): each topology
//! syncs, and what the API server sends is what issue 16 promises — no
//! cluster-wide Node stream, a node's status write reaching no other node's
//! proxy, each EndpointSlice change sent once per site behind site proxies,
//! and each kube-proxy behind a proxy hearing only the changes its site's
//! view shows (issue 36). Counts of events, not bytes or times, are asserted.

use std::{path::PathBuf, time::Duration};

use sitegrid_fakeapi::sample::SyntheticSize;
use sitegrid_loadtest::{
    report::{charts, env::Progress},
    scale::{self, output, ScaleConfig, Topology},
};

/// The sitegrid-proxy binary cargo built for this workspace's tests.
fn proxy_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/scale-<hash> → target/<profile>/sitegrid-proxy
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("sitegrid-proxy");
    assert!(
        bin.exists(),
        "{} not found: run the tests with `cargo test --workspace`, or `cargo build -p sitegrid-proxy` first",
        bin.display()
    );
    bin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn site_proxies_stream_each_change_once_per_site_and_no_heartbeat_reaches_other_nodes() {
    let config = ScaleConfig {
        size: SyntheticSize {
            sites: 3,
            nodes_per_site: 3,
            services: 24,
            endpoints_per_service: 4,
        },
        direct_clients: 2,
        window: Duration::from_secs(2),
        kubelet_period: Duration::from_secs(20),
        churn_rate: 12.0,
        proxy_bin: proxy_bin(),
        sync_limit: Duration::from_secs(120),
        topologies: Topology::ALL.to_vec(),
    };
    let runs = scale::run(&config, &Progress::new(true)).await.unwrap();
    let [direct, node, site] = &runs[..] else {
        panic!("three topologies, got {}", runs.len());
    };
    let changes = 24;
    for r in &runs {
        assert_eq!(
            r.heartbeats,
            9,
            "{}: every node wrote its status once",
            r.topology.name()
        );
        assert_eq!(r.slice_changes, changes, "{}", r.topology.name());
        assert_eq!(r.kube_proxies.relists, 0, "{}: no 410", r.topology.name());
    }
    let nodes =
        |r: &scale::TopologyRun, form: &str| r.window.of(|id, f| id == "nodes" && f == form).events;

    // kube-proxy direct: each kube-proxy gets every change from the API server.
    assert_eq!(direct.window.endpoints().events, 2 * changes);
    assert_eq!(direct.kube_proxies.events, 2 * changes);
    assert_eq!(nodes(direct, "full") + nodes(direct, "metadata"), 0);

    // Node proxies (site-0-node-0 and -1): the API server sends each its own
    // Node's status write whole, and its site's three as metadata — none of
    // the other six nodes'.
    assert_eq!(node.window.endpoints().events, 2 * changes);
    assert_eq!(nodes(node, "full"), 2, "each node proxy's own Node");
    assert_eq!(
        nodes(node, "metadata"),
        2 * 3,
        "each node proxy's site, as metadata"
    );

    // Site proxies (site 0 whole): every change reaches the API server's one
    // stream per site once; node status writes: each node's own (passed
    // through) and the site's three as metadata, once.
    assert_eq!(site.window.endpoints().events, changes);
    assert_eq!(nodes(site, "full"), 3, "each node proxy's own Node");
    assert_eq!(
        nodes(site, "metadata"),
        3,
        "the site's nodes, once for the site"
    );
    assert_eq!(
        site.site_proxy_node_events,
        Some(0),
        "no node's status write reaches a node proxy from the site proxy's cache"
    );
    // Behind a node proxy a kube-proxy hears only the changes its site's
    // view shows: the churn spreads them over all three sites.
    // Behind the chain the same: only the site's share. (Each topology's
    // window has other changes, so their counts are not compared.)
    let per_node = |r: &scale::TopologyRun| r.kube_proxies.events / r.nodes as u64;
    assert_eq!(per_node(direct), changes);
    for r in [node, site] {
        assert!(
            per_node(r) < changes,
            "{}: each kube-proxy heard {} of {changes} changes",
            r.topology.name(),
            per_node(r)
        );
    }
    assert_eq!(site.node_proxies.len(), 3);
    assert!(site.site_proxy.is_some());

    // The report names every topology and judges the goals; the chart is a PNG.
    charts::load_font(None).unwrap();
    let dir = std::env::temp_dir().join(format!("sitegrid-scale-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join("egress.png");
    output::chart(&png, &config, &runs).unwrap();
    assert_eq!(&std::fs::read(&png).unwrap()[..4], b"\x89PNG");
    let md = output::markdown(&config, &runs, "sitegrid-scale", "today", "egress.png");
    for t in Topology::ALL {
        assert!(md.contains(t.name()), "{} in the report", t.name());
    }
    let goals = output::goals(&config, &runs);
    assert!(
        goals
            .iter()
            .any(|g| g.contains("Endpoint egress divided") && g.contains("**met**")),
        "{goals:#?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
