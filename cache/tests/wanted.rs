//! `cache_wanted`: which kinds the proxy lists and watches upstream, as
//! `/metrics` shows it; with `cache_synced`, which wanted kinds are not
//! served yet (what `/readyz` waits for).

use prometheus_client::registry::Registry;
use sitegrid_cache::{CacheConfig, ResourceKind};

fn wanted_lines(cache: &sitegrid_cache::Cache) -> Vec<String> {
    let mut registry = Registry::with_prefix("sitegrid_proxy");
    cache.register_metrics(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    text.lines()
        .filter(|l| l.starts_with("sitegrid_proxy_cache_wanted{"))
        .map(str::to_owned)
        .collect()
}

fn line(kind: ResourceKind, wanted: u8) -> String {
    format!(
        "sitegrid_proxy_cache_wanted{{resource=\"{}\"}} {wanted}",
        kind.plural()
    )
}

#[test]
fn on_demand_kinds_are_wanted_from_the_first_request_for_them() {
    let (cache, _slot) = sitegrid_cache::new(CacheConfig {
        on_demand: true,
        ..CacheConfig::default()
    });
    let lines = wanted_lines(&cache);
    // One series per kind, whatever kinds there are.
    assert_eq!(lines.len(), ResourceKind::ALL.len(), "{lines:?}");
    // The topology inputs always; nothing else until asked for.
    for kind in [ResourceKind::Services, ResourceKind::Nodes] {
        assert!(lines.contains(&line(kind, 1)), "{lines:?}");
    }
    for kind in [ResourceKind::Endpoints, ResourceKind::EndpointSlices] {
        assert!(lines.contains(&line(kind, 0)), "{lines:?}");
    }
    // kube-proxy asks for EndpointSlices.
    cache.readiness().want(ResourceKind::EndpointSlices);
    let lines = wanted_lines(&cache);
    assert!(
        lines.contains(&line(ResourceKind::EndpointSlices, 1)),
        "{lines:?}"
    );
    assert!(
        lines.contains(&line(ResourceKind::Endpoints, 0)),
        "{lines:?}"
    );
}

#[test]
fn without_on_demand_every_kind_but_the_optional_ones_is_wanted_from_the_start() {
    let (cache, _slot) = sitegrid_cache::new(CacheConfig {
        on_demand: false,
        ..CacheConfig::default()
    });
    let lines = wanted_lines(&cache);
    for kind in ResourceKind::ALL {
        // ServiceCIDRs, which not every API server serves, wait for a
        // request for them in any case.
        let wanted = u8::from(kind != ResourceKind::ServiceCidrs);
        assert!(lines.contains(&line(kind, wanted)), "{lines:?}");
    }
}
