//! Listing and watching one resource of the API server.
//!
//! kube-runtime's watcher is the state machine: paginated LIST (30 per
//! page: a page is the largest transient buffer of a sync, read twice over
//! by kube-client, as bytes and as text; see `PAGE_SIZE`), WATCH with
//! bookmarks from the list's resourceVersion, resume from
//! the last seen version after a dropped connection, and a relist on 410 Gone
//! announced as `Init … InitApply … InitDone`, which the cache's writer
//! buffers and swaps in atomically. Errors are yielded (and retried with
//! backoff); the caller counts them.

use futures::{Stream, StreamExt};
use kube::{
    core::ApiResource,
    runtime::{watcher, WatchStreamExt},
    Api, Client,
};

use sitegrid_cache::UpstreamObject;

/// One item of a resource's list/watch stream.
pub type Item = Result<watcher::Event<UpstreamObject>, watcher::Error>;

/// The endless list/watch stream of `resource`, across all namespaces.
///
/// Each watch asks the API server to end it after `watch_timeout`
/// (`timeoutSeconds`, at least 1 s); one that stays silent past that is
/// taken for dead (the client's idle deadline, [`super::deadline`], then
/// kube-runtime's own 5 s later) and re-watched from the last version
/// seen, so no event is lost.
pub fn watch(
    client: Client,
    resource: &ApiResource,
    watch_timeout: std::time::Duration,
) -> impl Stream<Item = Item> + Send + 'static {
    let api: Api<UpstreamObject> = Api::all_with(client, resource);
    watcher(api, config(watch_timeout))
        .default_backoff()
        .boxed()
}

/// Objects per upstream list page: a page (and kube-client's copies of it)
/// stays under glibc's initial 128 KiB mmap threshold, whose rise after
/// freeing a larger block would keep the heap's free top resident for good
/// (docs/decisions/0004).
const PAGE_SIZE: u32 = 30;

/// The watcher settings of every upstream list/watch: pages of [`PAGE_SIZE`], and
/// watches the API server ends after `watch_timeout` (at least 1 s).
pub fn config(watch_timeout: std::time::Duration) -> watcher::Config {
    let secs = u32::try_from(watch_timeout.as_secs())
        .unwrap_or(u32::MAX)
        .max(1);
    watcher::Config::default()
        .page_size(PAGE_SIZE)
        .timeout(secs)
}

/// The versions the API server serves of `group` (discovery).
pub async fn group_versions(client: &Client, group: &str) -> Result<Vec<String>, kube::Error> {
    let groups = client.list_api_groups().await?;
    Ok(groups
        .groups
        .into_iter()
        .filter(|g| g.name == group)
        .flat_map(|g| g.versions.into_iter().map(|v| v.version))
        .collect())
}
