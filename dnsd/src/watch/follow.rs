//! One reflector whose watch follows a query that may change.
//!
//! The store is kube-runtime's: a relist (the first list, a `410 Gone`, or
//! a new query) is buffered and swapped in whole at its end, so readers see
//! the old list until the new one is complete, never a half-listed store.
//! [`Followed::synced`] says whether the store holds a complete list for
//! the query now wanted: only then is it a true picture of that query.

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Resource;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::metrics::Metrics;

/// What one watch lists: a label selector and a field selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    /// `labelSelector`, if any.
    pub labels: Option<String>,
    /// `fieldSelector`, if any.
    pub fields: Option<String>,
}

impl Query {
    /// Objects with these labels.
    pub fn labels(selector: String) -> Self {
        Query {
            labels: Some(selector),
            fields: None,
        }
    }

    fn config(&self) -> watcher::Config {
        // `any_semantic`: lists may come from the API server's watch cache
        // (resourceVersion=0), as client-go's informers ask, instead of a
        // quorum read of etcd: one per node adds up on a large cluster.
        let mut config = watcher::Config::default().any_semantic();
        if let Some(labels) = &self.labels {
            config = config.labels(labels);
        }
        if let Some(fields) = &self.fields {
            config = config.fields(fields);
        }
        config
    }
}

/// A reflector store fed by a watch of the current query; `None` watches
/// nothing and keeps the store empty.
pub struct Followed<K: Resource<DynamicType = ()> + 'static> {
    resource: &'static str,
    store: Store<K>,
    wanted: watch::Sender<Option<Query>>,
    /// The query the store holds a complete list for (set at each list's end).
    listed: Arc<Mutex<Option<Option<Query>>>>,
    metrics: Arc<Metrics>,
    task: JoinHandle<()>,
}

impl<K> Followed<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Starts watching `api` with `query`; every change to the store notifies `changed`.
    pub fn start(
        resource: &'static str,
        api: Api<K>,
        query: Option<Query>,
        changed: Arc<Notify>,
        metrics: Arc<Metrics>,
    ) -> Self {
        metrics.watching(resource);
        let (reader, writer) = reflector::store();
        let (wanted, wanted_rx) = watch::channel(query);
        let listed = Arc::new(Mutex::new(None));
        let task = tokio::spawn(run(
            resource,
            api,
            wanted_rx,
            writer,
            Arc::clone(&listed),
            changed,
            Arc::clone(&metrics),
        ));
        Followed {
            resource,
            store: reader,
            wanted,
            listed,
            metrics,
            task,
        }
    }

    /// The objects in the store.
    pub fn state(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// Watches `query` from now on (a relist), unless it is the current one.
    pub fn set_query(&self, query: Option<Query>) {
        let changed = self.wanted.send_if_modified(|current| {
            if *current == query {
                return false;
            }
            *current = query;
            true
        });
        if changed {
            tracing::debug!(resource = self.resource, query = ?*self.wanted.borrow(), "new selector");
            self.metrics.selector_changed(self.resource);
        }
    }

    /// Whether the store holds a complete list for the query now wanted.
    pub fn synced(&self) -> bool {
        self.listed.lock().as_ref() == Some(&*self.wanted.borrow())
    }
}

impl<K: Resource<DynamicType = ()> + 'static> Drop for Followed<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The watch loop: watch the wanted query, apply its events; on a new query,
/// drop the old watch and start over (the store keeps the old list until
/// the new one is complete).
async fn run<K>(
    resource: &'static str,
    api: Api<K>,
    mut wanted: watch::Receiver<Option<Query>>,
    mut writer: reflector::store::Writer<K>,
    listed: Arc<Mutex<Option<Option<Query>>>>,
    changed: Arc<Notify>,
    metrics: Arc<Metrics>,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    loop {
        let query = wanted.borrow_and_update().clone();
        let Some(q) = &query else {
            // Nothing to watch: an empty list, at once.
            writer.apply_watcher_event(&watcher::Event::Init);
            writer.apply_watcher_event(&watcher::Event::InitDone);
            *listed.lock() = Some(None);
            changed.notify_one();
            if wanted.changed().await.is_err() {
                return;
            }
            continue;
        };
        let mut events = std::pin::pin!(watcher(api.clone(), q.config()).default_backoff());
        loop {
            tokio::select! {
                next = wanted.changed() => match next {
                    Ok(()) => break,
                    Err(_) => return,
                },
                event = events.next() => match event {
                    Some(Ok(event)) => {
                        writer.apply_watcher_event(&event);
                        if matches!(event, watcher::Event::InitDone) {
                            *listed.lock() = Some(query.clone());
                        }
                        changed.notify_one();
                    }
                    Some(Err(err)) => {
                        // default_backoff retries; the store keeps what it has.
                        tracing::warn!(resource, error = %err, "watch failed; retrying");
                        metrics.watch_failed(resource);
                    }
                    None => return,
                },
            }
        }
    }
}
