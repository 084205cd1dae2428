//! `sitegrid-proxy demo`: the proxy for one node of the two-site sample
//! cluster, served by the embedded in-memory API server.

use loadtest::{
    apiserver::{ApiServer, ApiServerConfig},
    sample,
};

use crate::{
    config::DemoArgs,
    run::{start, ProxyOptions, RunningProxy},
};

/// Starts the sample upstream and a proxy for `args.hostname`; returns both.
pub async fn start_demo(
    args: &DemoArgs,
) -> anyhow::Result<(loadtest::apiserver::ServerHandle, RunningProxy)> {
    let version: &'static str = if args.endpointslice_version == "v1beta1" {
        "v1beta1"
    } else {
        "v1"
    };
    let api = ApiServer::new(ApiServerConfig {
        endpointslice_version: version,
        ..ApiServerConfig::default()
    });
    api.load(sample::two_sites(version));
    let upstream = api.serve(args.upstream_address).await?;
    let config = kube::Config::new(upstream.url().parse()?);
    let proxy = start(
        config,
        ProxyOptions::new(args.hostname.clone(), args.bind_address),
    )
    .await?;
    Ok((upstream, proxy))
}

/// What the demo prints once it runs.
pub fn instructions(proxy: std::net::SocketAddr, upstream: &str, node: &str) -> String {
    let p = format!("http://{proxy}");
    format!(
        "sitegrid-proxy demo: proxy for node {node} on {p}, in-memory API server on {upstream}\n\
         \n\
         The sample cluster has nodes bj-1..3 (location=beijing) and gz-1..3 (location=guangzhou);\n\
         Service default/servicegrid-demo-svc has topologyKeys '[\"location\"]' and endpoints in both sites.\n\
         \n\
         What {node} sees (only its own site's endpoints):\n\
         \x20 kubectl --server {p} get endpointslices -A -o wide\n\
         \x20 kubectl --server {p} get endpoints -A\n\
         \x20 kubectl --server {p} get svc,nodes -A\n\
         What the API server holds (every endpoint):\n\
         \x20 kubectl --server {upstream} get endpointslices -A -o wide\n\
         Watch the filtered view (replays from a resourceVersion, ends after 30 s):\n\
         \x20 kubectl --server {p} get --raw '/api/v1/endpoints?watch=1&resourceVersion=0&timeoutSeconds=30'\n\
         \n\
         Ctrl-C stops.\n"
    )
}
