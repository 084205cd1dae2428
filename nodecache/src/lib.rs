//! sitegrid-nodecache: the node cache, what this node's kubelet read from
//! the API server, kept so that the kubelet can start its pods again while
//! the API server is unreachable — a reboot included.
//!
//! It sits beside the proxy's served-state cache (`sitegrid-cache`, which
//! serves Services, endpoints and the node's own Node to every client, the
//! kubelet included) and holds what only the kubelet reads: its pods, the
//! Secrets, ConfigMaps, claims and volumes they reference, its CSINode,
//! the CSIDrivers and RuntimeClasses, and its service-account tokens. It is
//! filled by *watching the kubelet's own traffic*, never by reads of its own:
//! every answer the API server gives the kubelet through the proxy is kept
//! as the API server sent it (protobuf, as the kubelet asks, or JSON), and
//! nothing is kept that the kubelet itself was not given.
//!
//! The data flow, one module a step:
//!
//! 1. [`wire`] reads an answer (a list, an object, a watch event) in its
//!    format, each object with its [`facts`] (name, version, labels, the
//!    fields selectors ask about, what a pod references).
//! 2. [`state`] keeps them per resource ([`resource`]) and [`scope`] — the
//!    rules of what a list, an event, a bookmark or a GET change, and of what
//!    is let go ([`state::State::retain`]).
//! 3. [`answer`] writes the answers given from what is kept, as
//!    kube-apiserver writes them; [`token`] keeps TokenRequest answers.
//! 4. [`persist`] keeps it all on disk, one file per resource; a token
//!    goes into the tokens' [`journal`] first, before the kubelet has it.
//!
//! [`NodeCache`] is the handle the proxy holds: observations go in while
//! the API server answers, answers come out while it does not. It does no
//! I/O but its files.
#![warn(missing_docs)]

pub mod answer;
pub mod facts;
pub mod journal;
pub mod local;
mod metrics;
pub mod persist;
pub mod resource;
pub mod scope;
pub mod state;
pub mod token;
pub mod wire;

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{SystemTime, UNIX_EPOCH},
};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use sitegrid_apimachinery::watch::EventType;
use tracing::{debug, info, warn};

pub use answer::Answer;
pub use local::LocalPod;
pub use persist::{SealingKey, Storage, StorageError};
pub use resource::KeptResource;
pub use scope::Scope;
pub use wire::Format;

use state::{Lookup, State};
use wire::{Event, Item};

/// The handle on the node cache (cheap to clone).
#[derive(Clone)]
pub struct NodeCache {
    inner: Arc<Inner>,
}

struct Inner {
    node: String,
    state: RwLock<State>,
    storage: Option<Storage>,
    /// Taken before `state` when both are: a token's record and the
    /// tokens' file's write of it are never interleaved.
    journal: Mutex<journal::Journal>,
    /// Held from a snapshot of the tokens to its write (never while
    /// `journal` is held): an older snapshot never replaces a newer file.
    tokens_file: Mutex<()>,
    /// Woken when something changed that is not on disk yet.
    dirty: tokio::sync::Notify,
    counters: metrics::Counters,
    /// The bytes on disk after the last write.
    size: AtomicU64,
    /// The kubelet's offline reports, as a whole, for the served-state cache.
    local: tokio::sync::watch::Sender<Vec<LocalPod>>,
    /// This boot, when the reports made at a reboot are not on disk yet: it
    /// is recorded once they are (see [`NodeCache::booted`]).
    unrecorded_boot: Mutex<Option<String>>,
}

/// Why a status the kubelet wrote offline is not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusRefusal {
    /// The pod is not kept (503: nothing known of it).
    NotKept(String),
    /// The pod is bound to another node (403, as NodeRestriction refuses it).
    OtherNode(String),
    /// The patch's uid is not the pod's (409, kube-apiserver's precondition).
    Uid {
        /// The patch's.
        wanted: String,
        /// The pod's.
        found: String,
    },
    /// The patch is not JSON (400).
    Unreadable(String),
}

/// Why a request cannot be answered from what is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Nothing kept answers it (never listed, or let go).
    NotKept(String),
    /// The resource's file was refused at start, and it has not been listed since.
    FileRefused(KeptResource, String),
    /// A field selector names a field the node cache does not read.
    Unselectable(String),
    /// The client accepts none of the formats the answer is kept in.
    NotAcceptable(Format),
}

impl Refusal {
    /// A sentence for the `Status` message.
    pub fn message(&self) -> String {
        match self {
            Refusal::NotKept(what) => {
                format!("the node cache holds no answer for {what}")
            }
            Refusal::FileRefused(resource, why) => format!(
                "the node cache's file of {resource} was refused at start ({why}); it is kept again once the kubelet lists it through the API server"
            ),
            Refusal::Unselectable(field) => {
                format!("the node cache cannot select on field {field:?}")
            }
            Refusal::NotAcceptable(format) => format!(
                "the node cache holds this answer as {}, which the request does not accept",
                format.content_type()
            ),
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            Refusal::NotKept(_) => "not_kept",
            Refusal::FileRefused(..) => "file_refused",
            Refusal::Unselectable(_) => "unselectable",
            Refusal::NotAcceptable(_) => "not_acceptable",
        }
    }
}

/// Where an offline watch starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchFrom {
    /// After this resourceVersion.
    Version(String),
    /// With the current objects as ADDED events first (`resourceVersion` 0
    /// or unset, or a watch-list); then, if `end_bookmark`, the bookmark
    /// that ends them.
    Initial {
        /// Send the `k8s.io/initial-events-end` bookmark after them.
        end_bookmark: bool,
    },
}

/// An offline watch, as far as the node cache can tell it.
#[derive(Debug, Clone)]
pub struct OfflineWatch {
    /// The frames' format.
    pub format: Format,
    /// The version the watch is at after `frames`; bookmarks carry it.
    pub resource_version: String,
    /// What to send first: initial events and their end, or a `410` after
    /// which the stream ends.
    pub frames: Vec<Bytes>,
    /// The stream ends after `frames` (the client relists).
    pub ends: bool,
}

/// What a flush did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flushed {
    /// Files written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Files that could not be written (kept dirty: tried again next time).
    pub errors: u64,
}

impl NodeCache {
    /// The node cache of `node`, read back from `storage` (kept in memory
    /// only without one). A file that cannot be read back is refused whole
    /// and logged once; the rest is served.
    pub fn open(node: &str, storage: Option<Storage>) -> NodeCache {
        let mut state = State::new();
        let mut journal = journal::Journal::default();
        if let Some(storage) = &storage {
            match storage.load_local(node) {
                Ok(Some(pods)) => {
                    state.local.pods = pods.into_iter().map(|p| (p.uid.clone(), p)).collect()
                }
                Ok(None) => {}
                Err(why) => warn!(reason = %why, "the kubelet's offline pod reports refused"),
            }
            for resource in KeptResource::ALL {
                match storage.load_resource(node, resource) {
                    Ok(Some(loaded)) => *state.resource_mut(resource) = loaded,
                    Ok(None) => {}
                    Err(why) => {
                        warn!(%resource, dir = %storage.dir().display(), reason = %why, "node cache file refused; nothing of it is answered until the kubelet lists it again");
                        state.resource_mut(resource).refused = Some(why);
                    }
                }
            }
            let after = match storage.load_tokens(node) {
                Ok(Some((tokens, seq))) => {
                    state.tokens = tokens;
                    seq
                }
                Ok(None) => 0,
                Err(why) => {
                    warn!(dir = %storage.dir().display(), reason = %why, "node cache tokens refused");
                    0
                }
            };
            let (opened, tokens) = journal::Journal::open(storage, node, after);
            journal = opened;
            for token in tokens {
                // Marked changed: the tokens' file takes them at the first write.
                state.tokens.insert(token);
            }
        }
        let size = storage.as_ref().map_or(0, Storage::size);
        let local = tokio::sync::watch::Sender::new(state.local.pods.values().cloned().collect());
        NodeCache {
            inner: Arc::new(Inner {
                node: node.to_owned(),
                state: RwLock::new(state),
                storage,
                journal: Mutex::new(journal),
                tokens_file: Mutex::new(()),
                dirty: tokio::sync::Notify::new(),
                counters: metrics::Counters::default(),
                size: AtomicU64::new(size),
                local,
                unrecorded_boot: Mutex::new(None),
            }),
        }
    }

    /// The node whose kubelet this is.
    pub fn node(&self) -> &str {
        &self.inner.node
    }

    // === while the API server answers ===

    /// The API server answered a LIST of `scope` with `body`.
    ///
    /// True when the scope was not kept before: write it with
    /// [`NodeCache::flush_resource`] before the kubelet has the answer. The
    /// kubelet then watches it from the answer's version; were the proxy to
    /// crash before writing it, the restarted proxy would answer that watch
    /// `410` and the kubelet list again only after its backoff — a power cut
    /// meanwhile would find it missing.
    pub fn listed(
        &self,
        resource: KeptResource,
        scope: &Scope,
        format: Format,
        body: &[u8],
    ) -> bool {
        match wire::list(resource, format, body) {
            Ok(list) if !list.continued => {
                let new = !self
                    .inner
                    .state
                    .read()
                    .resource(resource)
                    .scopes
                    .contains_key(scope);
                self.change_if(|s| {
                    s.resource_mut(resource).replace(
                        scope,
                        format,
                        &list.resource_version,
                        list.items,
                    )
                });
                return new;
            }
            // One page of several: the scope is whole only with all of them.
            Ok(_) => self.change(|s| s.resource_mut(resource).forget(scope)),
            Err(e) => {
                debug!(%resource, %scope, error = %e, "a list answer not kept");
                self.change(|s| s.resource_mut(resource).forget(scope));
            }
        }
        false
    }

    /// Whether a watch of `scope` from `resource_version` continues what is
    /// kept; if not, the proxy answers it `410 Gone` (counted here) so the
    /// kubelet lists again through it.
    pub fn continues(&self, resource: KeptResource, scope: &Scope, resource_version: &str) -> bool {
        let continues = self
            .inner
            .state
            .read()
            .resource(resource)
            .continues(scope, resource_version);
        if !continues {
            self.inner.counters.gaps.fetch_add(1, Ordering::Relaxed);
        }
        continues
    }

    /// A tee for a watch of `scope` the API server answers in `format`:
    /// resuming the kept scope, or (`initial`) a watch-list whose initial
    /// events replace it once their end bookmark comes.
    pub fn watch_tee(
        &self,
        resource: KeptResource,
        scope: Scope,
        format: Format,
        initial: bool,
    ) -> WatchTee {
        WatchTee {
            cache: self.clone(),
            resource,
            scope,
            format,
            initial: initial.then(Vec::new),
            buffer: Vec::new(),
            done: false,
        }
    }

    /// The API server answered a GET of one object with `body`.
    pub fn got(&self, resource: KeptResource, format: Format, body: &[u8]) {
        match wire::object(resource, format, body) {
            Ok(item) => self.change(|s| s.resource_mut(resource).got(item)),
            Err(e) => debug!(%resource, error = %e, "an object answer not kept"),
        }
    }

    /// The API server answered the TokenRequest `request` for
    /// `namespace/service_account` with `response`: kept, and what it is
    /// found by (for [`NodeCache::write_token`]).
    pub fn token_issued(
        &self,
        namespace: &str,
        service_account: &str,
        request: Bytes,
        format: Format,
        response: Bytes,
    ) -> Option<token::TokenKey> {
        let mut state = self.inner.state.write();
        match state
            .tokens
            .keep(namespace, service_account, request, format, response)
        {
            Ok(key) => {
                drop(state);
                self.inner.dirty.notify_one();
                Some(key)
            }
            Err(e) => {
                debug!(error = %e, "a TokenRequest answer not kept");
                None
            }
        }
    }

    // === while it does not ===

    /// The answer to a LIST of `request`.
    pub fn list(
        &self,
        resource: KeptResource,
        request: &Scope,
        accept: &[Format],
    ) -> Result<Answer, Refusal> {
        let result = self
            .read_scope(resource, request, accept)
            .map(|(format, rv, items)| {
                let items: Vec<&Item> = items.iter().collect();
                answer::list(resource, format, &rv, &items)
            });
        self.count(resource, "list", &result);
        result
    }

    /// The answer to a GET of `namespace/name` (404 when a kept scope says
    /// it does not exist: `Ok(None)`).
    pub fn get(
        &self,
        resource: KeptResource,
        namespace: &str,
        name: &str,
        accept: &[Format],
    ) -> Result<Option<Answer>, Refusal> {
        let result = {
            let state = self.inner.state.read();
            let kept = state.resource(resource);
            match kept.lookup(&(namespace.to_owned(), name.to_owned())) {
                Lookup::Found(item) if accept.contains(&item.format) => {
                    Ok(Some(answer::object(resource, item)))
                }
                Lookup::Found(item) => Err(Refusal::NotAcceptable(item.format)),
                Lookup::Absent => Ok(None),
                Lookup::Unknown => Err(match &kept.refused {
                    Some(why) => Refusal::FileRefused(resource, why.clone()),
                    None => Refusal::NotKept(format!("{resource} {namespace}/{name}")),
                }),
            }
        };
        self.count(resource, "get", &result);
        result
    }

    /// An offline WATCH of `request` from `from`: what to send first, and
    /// the version its bookmarks carry.
    pub fn watch(
        &self,
        resource: KeptResource,
        request: &Scope,
        from: &WatchFrom,
        accept: &[Format],
    ) -> Result<OfflineWatch, Refusal> {
        let result = self
            .read_scope(resource, request, accept)
            .map(|(format, rv, items)| {
                let mut frames = Vec::new();
                let mut ends = false;
                match from {
                    WatchFrom::Version(v) if *v == rv => {}
                    WatchFrom::Version(v) => {
                        frames.push(answer::expired(
                            format,
                            &format!("too old resource version: {v} ({rv})"),
                        ));
                        ends = true;
                    }
                    WatchFrom::Initial { end_bookmark } => {
                        frames.extend(
                            items
                                .iter()
                                .map(|i| answer::event(resource, EventType::Added, i)),
                        );
                        if *end_bookmark {
                            frames.push(answer::bookmark(resource, format, &rv, true));
                        }
                    }
                }
                OfflineWatch {
                    format,
                    resource_version: rv,
                    frames,
                    ends,
                }
            });
        self.count(resource, "watch", &result);
        result
    }

    /// The kept answer to the TokenRequest `request` for
    /// `namespace/service_account`, while its token is valid.
    pub fn token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &[u8],
        accept: &[Format],
    ) -> Result<Answer, Refusal> {
        let state = self.inner.state.read();
        let result = match state
            .tokens
            .answer(namespace, service_account, request, now_unix())
        {
            Some(t) if accept.contains(&t.format) => Ok(Answer {
                status: 201,
                content_type: t.format.content_type(),
                body: t.response.clone(),
            }),
            Some(t) => Err(Refusal::NotAcceptable(t.format)),
            None => {
                let same_sa: Vec<String> = state
                    .tokens
                    .iter()
                    .filter(|t| t.namespace == namespace && t.service_account == service_account)
                    .map(|t| {
                        format!(
                            "{} request bytes, expiring at {}",
                            t.request.len(),
                            t.expires_unix
                        )
                    })
                    .collect();
                debug!(%namespace, %service_account, request_bytes = request.len(), kept = ?same_sa, "no kept token for this request");
                Err(Refusal::NotKept(format!(
                    "a valid token of serviceaccount {namespace}/{service_account} for this request ({} kept for it)",
                    same_sa.len()
                )))
            }
        };
        drop(state);
        self.count_token(&result);
        result
    }

    /// The kept objects a request selects, with the scope's format and version.
    fn read_scope(
        &self,
        resource: KeptResource,
        request: &Scope,
        accept: &[Format],
    ) -> Result<(Format, String, Vec<Item>), Refusal> {
        let state = self.inner.state.read();
        let kept = state.resource(resource);
        let Some((scope, scope_state)) = kept.answering(request) else {
            return Err(match &kept.refused {
                Some(why) => Refusal::FileRefused(resource, why.clone()),
                None => Refusal::NotKept(format!("{resource} {request}")),
            });
        };
        if !accept.contains(&scope_state.format) {
            return Err(Refusal::NotAcceptable(scope_state.format));
        }
        let exact = scope == request;
        let mut items = Vec::with_capacity(scope_state.members.len());
        for key in &scope_state.members {
            let Some(item) = kept.objects.get(key) else {
                continue;
            };
            if !exact {
                match request.selects(resource, &item.facts) {
                    Some(true) => {}
                    Some(false) => continue,
                    None => return Err(Refusal::Unselectable(request.field().to_owned())),
                }
            }
            items.push(item.clone());
        }
        Ok((
            scope_state.format,
            scope_state.resource_version.clone(),
            items,
        ))
    }

    /// The kubelet wrote `namespace/name`'s status (a strategic merge
    /// patch, `body`) while the API server is unreachable: applied to the
    /// kept pod — which lists and gets then answer — and answered with the
    /// patched pod, as kube-apiserver answers; its addresses and readiness
    /// go to [`NodeCache::local_pods`]. Only pods bound to this node.
    pub fn status_written(
        &self,
        namespace: &str,
        name: &str,
        body: &[u8],
    ) -> Result<Answer, StatusRefusal> {
        let patch: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| StatusRefusal::Unreadable(e.to_string()))?;
        let key = (namespace.to_owned(), name.to_owned());
        let mut state = self.inner.state.write();
        let pods = state.resource_mut(KeptResource::Pods);
        let Some(kept) = pods.objects.get(&key) else {
            return Err(StatusRefusal::NotKept(format!("pods {namespace}/{name}")));
        };
        if kept.facts.field("spec.nodeName").as_deref() != Some(self.node()) {
            return Err(StatusRefusal::OtherNode(format!(
                "pod {namespace}/{name} is not bound to node {}",
                self.node()
            )));
        }
        if let Some(wanted) = patch["metadata"]["uid"].as_str() {
            if wanted != kept.facts.uid {
                return Err(StatusRefusal::Uid {
                    wanted: wanted.to_owned(),
                    found: kept.facts.uid.clone(),
                });
            }
        }
        let Format::Json = kept.format else {
            // The proxy reads the kubelet's pods in JSON; protobuf ones came
            // from before it did.
            return Err(StatusRefusal::NotKept(format!(
                "pods {namespace}/{name} in JSON"
            )));
        };
        let mut pod: serde_json::Value = serde_json::from_slice(&kept.bytes)
            .map_err(|e| StatusRefusal::Unreadable(e.to_string()))?;
        // Only the status subresource: whatever else the patch carries is
        // not applied (kube-apiserver's status strategy ignores it too).
        if let Some(status) = patch.get("status") {
            local::strategic_merge(&mut pod, &serde_json::json!({ "status": status }));
        }
        let bytes = Bytes::from(serde_json::to_vec(&pod).unwrap_or_default());
        let item = Item {
            facts: facts::from_json(KeptResource::Pods, &pod),
            bytes,
            format: Format::Json,
        };
        let answer = answer::object(KeptResource::Pods, &item);
        pods.objects.insert(key, item);
        pods.dirty = true;
        let summary = local::summary(&pod);
        // What the site is served changes with this: an operator offline reads
        // from here which address and readiness the site's traffic follows.
        if state.local.pods.get(&summary.uid) != Some(&summary) {
            info!(
                pod = %format_args!("{namespace}/{name}"),
                ips = %summary.ips.join(","),
                ready = summary.ready,
                running = summary.running,
                "a pod's status taken from the kubelet offline"
            );
        }
        state.local.pods.insert(summary.uid.clone(), summary);
        self.local_changed(state);
        Ok(answer)
    }

    /// Takes this boot of the node, at start (`boot`: the kernel's boot id,
    /// what the kubelet reports as the node's `bootID`). When the node cache
    /// last ran in another boot, the node rebooted since, and none of its
    /// pods runs where it ran: the kubelet starts each again, at a new
    /// address, and reports it only when its turn comes (its status writes
    /// are paced by its client's rate limit, a few a second). Until then
    /// every kept pod bound to the node is reported not ready — its
    /// endpoints served not ready, where they were — and reports from before
    /// the reboot are let go: traffic goes to the pods the kubelet has
    /// reported ready since, not to an address where nothing listens.
    /// Returns how many pods are reported so. The boot is recorded once
    /// those reports are on disk (if they cannot be written now, after the
    /// next flush that writes them). Kept in memory only, or with no boot on
    /// record (the first start, or a record refused), nothing is reported:
    /// nothing tells whether the node rebooted. Blocking file I/O, as
    /// [`NodeCache::open`].
    pub fn booted(&self, boot: &str) -> usize {
        let Some(storage) = &self.inner.storage else {
            return 0;
        };
        let node = self.node();
        let last = storage.load_boot(node).unwrap_or_else(|why| {
            warn!(reason = %why, "the node's last boot on record refused: whether it rebooted is not told");
            None
        });
        if last.as_deref() == Some(boot) {
            return 0;
        }
        if last.is_none() {
            self.record_boot(storage, boot);
            return 0;
        }
        let marked = self.mark_rebooted();
        // The boot is recorded by the flush that writes these reports, after
        // them: a start in this boot must not mark again what the kubelet
        // reported since (it writes a status only when it changes, so a pod
        // marked again would stay not ready). If they cannot be written now,
        // the write-behind tries again.
        *self.inner.unrecorded_boot.lock() = Some(boot.to_owned());
        self.flush();
        marked
    }

    fn record_boot(&self, storage: &Storage, boot: &str) {
        if let Err(why) = storage.write_boot(self.node(), boot) {
            warn!(dir = %storage.dir().display(), reason = %why, "this boot of the node could not be recorded: a restart of the proxy in it takes it for a reboot");
        }
    }

    /// [`NodeCache::booted`]'s reports after a reboot; how many.
    fn mark_rebooted(&self) -> usize {
        let node = self.node();
        let mut state = self.inner.state.write();
        let pods: BTreeMap<String, LocalPod> = state
            .resource(KeptResource::Pods)
            .objects
            .values()
            .filter(|item| item.facts.field("spec.nodeName").as_deref() == Some(node))
            .map(|item| {
                let phase = item.facts.field("status.phase");
                let pod = LocalPod {
                    namespace: item.facts.namespace.clone(),
                    name: item.facts.name.clone(),
                    uid: item.facts.uid.clone(),
                    node: node.to_owned(),
                    ips: Vec::new(),
                    ready: false,
                    running: !matches!(phase.as_deref(), Some("Succeeded" | "Failed")),
                };
                (pod.uid.clone(), pod)
            })
            .collect();
        let n = pods.len();
        state.local.pods = pods;
        self.local_changed(state);
        info!(
            pods = n,
            "the node rebooted since the node cache last ran: its pods are served not ready until the kubelet reports them"
        );
        n
    }

    /// The kubelet's offline reports, as they change.
    pub fn local_pods(&self) -> tokio::sync::watch::Receiver<Vec<LocalPod>> {
        self.inner.local.subscribe()
    }

    /// The API server answers again: its view of the pods wins, the
    /// kubelet's offline reports are let go.
    pub fn clear_local(&self) {
        let mut state = self.inner.state.write();
        if state.local.pods.is_empty() {
            return;
        }
        state.local.pods.clear();
        self.local_changed(state);
    }

    /// The reports in `state` changed: to be written, and sent to the
    /// served-state cache.
    fn local_changed(&self, mut state: parking_lot::RwLockWriteGuard<'_, State>) {
        state.local.dirty = true;
        let all: Vec<LocalPod> = state.local.pods.values().cloned().collect();
        drop(state);
        self.inner.local.send_replace(all);
        self.inner.dirty.notify_one();
    }

    // === on disk ===

    /// Resolves once something changed that is not on disk yet.
    pub async fn changed(&self) {
        self.inner.dirty.notified().await;
    }

    /// Writes `resource`'s file now if it changed (blocking file I/O: call
    /// it off the async threads); see [`NodeCache::listed`].
    pub fn flush_resource(&self, resource: KeptResource) -> Result<(), String> {
        let Some(storage) = &self.inner.storage else {
            return Ok(());
        };
        let kept = {
            let mut state = self.inner.state.write();
            let r = state.resource_mut(resource);
            if !r.dirty {
                return Ok(());
            }
            r.dirty = false;
            r.clone()
        };
        let mut out = Flushed::default();
        let written = self.note(
            &mut out,
            &resource.file_name(),
            write_kept(storage, &self.inner.node, resource, &kept),
            |s| s.resource_mut(resource).dirty = true,
        );
        self.noted(storage, &out);
        written
    }

    /// Puts the token kept under `key` on disk now, before the kubelet
    /// gets it (blocking file I/O: call it off the async threads): the
    /// kubelet keeps a token in memory and asks again only when it
    /// restarts or the token nears its expiry, so a token the proxy lost
    /// in a crash right after handing it out would be missing at the next
    /// offline reboot. One record in the tokens' journal, or the whole
    /// tokens' file when the journal is full.
    pub fn write_token(&self, key: &token::TokenKey) -> Result<(), String> {
        let Some(storage) = &self.inner.storage else {
            return Ok(());
        };
        let appended = {
            let mut journal = self.inner.journal.lock();
            let Some(token) = self.inner.state.read().tokens.get(key).cloned() else {
                return Ok(());
            };
            journal.append(storage, &self.inner.node, &token)
        };
        let mut out = Flushed::default();
        let written = match appended {
            Ok(Some(bytes)) => {
                out.files += 1;
                out.bytes += bytes;
                Ok(())
            }
            Ok(None) => self.write_tokens_behind(storage, &mut out),
            Err(e) => {
                warn!(error = %e, "token journal not written; writing the tokens' file");
                out.errors += 1;
                self.write_tokens_behind(storage, &mut out)
            }
        };
        self.noted(storage, &out);
        written
    }

    /// Writes the tokens' file if a token changed, without holding up the
    /// tokens written meanwhile (a whole write takes two syncs): then the
    /// journal starts again at its front if nothing was added to it since.
    fn write_tokens_behind(&self, storage: &Storage, out: &mut Flushed) -> Result<(), String> {
        let _file = self.inner.tokens_file.lock();
        let (tokens, seq) = {
            let journal = self.inner.journal.lock();
            let mut state = self.inner.state.write();
            if !state.tokens.dirty {
                return Ok(());
            }
            state.tokens.dirty = false;
            (state.tokens.clone(), journal.seq)
        };
        self.note(
            out,
            persist::TOKENS_FILE,
            storage.write_tokens(&self.inner.node, &tokens, seq),
            |s| s.tokens.dirty = true,
        )?;
        let mut journal = self.inner.journal.lock();
        if journal.seq == seq {
            journal.restart();
        }
        Ok(())
    }

    /// Writes every resource that changed since its last write (blocking
    /// file I/O: call it off the async threads).
    pub fn flush(&self) -> Flushed {
        let Some(storage) = &self.inner.storage else {
            return Flushed::default();
        };
        let mut out = Flushed::default();
        let _ = self.write_tokens_behind(storage, &mut out);
        // Copy out under the lock, write without it.
        let (resources, local) = {
            let mut state = self.inner.state.write();
            let resources: Vec<(KeptResource, state::ResourceState)> = state
                .resources
                .iter_mut()
                .filter(|(_, r)| r.dirty)
                .map(|(k, r)| {
                    r.dirty = false;
                    (*k, r.clone())
                })
                .collect();
            let local = state.local.dirty.then(|| {
                state.local.dirty = false;
                state.local.pods.values().cloned().collect::<Vec<_>>()
            });
            (resources, local)
        };
        let node = &self.inner.node;
        // The reports before the pods: a crash between the two leaves a kept
        // pod older than its report, which the kubelet, reading it, writes
        // again; the other way round the pod would say what the kubelet
        // wrote and the report not, and the kubelet would not write it again.
        if let Some(local) = local {
            let written = self.note(
                &mut out,
                persist::LOCAL_FILE,
                storage.write_local(node, local),
                |s| s.local.dirty = true,
            );
            if written.is_ok() {
                if let Some(boot) = self.inner.unrecorded_boot.lock().take() {
                    self.record_boot(storage, &boot);
                }
            }
        }
        for (resource, kept) in resources {
            let _ = self.note(
                &mut out,
                &resource.file_name(),
                write_kept(storage, node, resource, &kept),
                |s| s.resource_mut(resource).dirty = true,
            );
        }
        self.inner.size.store(storage.size(), Ordering::Relaxed);
        self.inner.counters.written(&out);
        out
    }

    /// Counts one file's write in `out`; on an error logs it and has `redo`
    /// mark what it held to be written again at the next change.
    fn note(
        &self,
        out: &mut Flushed,
        file: &str,
        written: Result<u64, String>,
        redo: impl FnOnce(&mut State),
    ) -> Result<(), String> {
        match written {
            Ok(bytes) => {
                out.files += 1;
                out.bytes += bytes;
                Ok(())
            }
            Err(e) => {
                warn!(%file, error = %e, "node cache file not written; trying again at the next change");
                redo(&mut self.inner.state.write());
                out.errors += 1;
                Err(e)
            }
        }
    }

    /// Ends a write of one file now: the size on disk and the counters.
    fn noted(&self, storage: &Storage, out: &Flushed) {
        self.inner.size.store(storage.size(), Ordering::Relaxed);
        self.inner.counters.written(out);
    }

    /// Applies `f` to the state, lets go of what is no longer needed, and
    /// wakes the writer.
    fn change(&self, f: impl FnOnce(&mut State)) {
        self.change_if(|s| {
            f(s);
            true
        });
    }

    /// [`NodeCache::change`] when `f` says it changed something.
    fn change_if(&self, f: impl FnOnce(&mut State) -> bool) {
        {
            let mut state = self.inner.state.write();
            if !f(&mut state) {
                return;
            }
            state.retain(now_unix());
        }
        self.inner.dirty.notify_one();
    }

    fn count<T>(&self, resource: KeptResource, verb: &'static str, result: &Result<T, Refusal>) {
        match result {
            Ok(_) => self.inner.counters.answered(resource.plural(), verb),
            Err(r) => self.inner.counters.refused(resource.plural(), r.reason()),
        }
    }

    fn count_token<T>(&self, result: &Result<T, Refusal>) {
        match result {
            Ok(_) => self
                .inner
                .counters
                .answered("serviceaccounts/token", "create"),
            Err(r) => self
                .inner
                .counters
                .refused("serviceaccounts/token", r.reason()),
        }
    }
}

/// Follows one watch stream the API server sends the kubelet, frame by
/// frame, into the node cache. Bytes go in as they pass (any chunking).
pub struct WatchTee {
    cache: NodeCache,
    resource: KeptResource,
    scope: Scope,
    format: Format,
    /// The initial events of a watch-list, until their end bookmark.
    initial: Option<Vec<Item>>,
    buffer: Vec<u8>,
    done: bool,
}

/// The largest watch frame followed (kube-apiserver's objects are at most
/// about 1.5 MiB); a larger one stops the tee and drops the scope.
const MAX_FRAME: usize = 16 << 20;

impl WatchTee {
    /// Takes the next bytes of the stream.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.done {
            return;
        }
        self.buffer.extend_from_slice(chunk);
        loop {
            let frame = match self.format {
                Format::Json => match self.buffer.iter().position(|&b| b == b'\n') {
                    Some(end) => {
                        let line: Vec<u8> = self.buffer.drain(..=end).collect();
                        line
                    }
                    None => break,
                },
                Format::Protobuf => {
                    let Some(len) = self.buffer.get(..4) else {
                        break;
                    };
                    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
                    if len > MAX_FRAME {
                        self.give_up("a frame past the limit");
                        return;
                    }
                    if self.buffer.len() < 4 + len {
                        break;
                    }
                    let frame: Vec<u8> = self.buffer.drain(..4 + len).skip(4).collect();
                    frame
                }
            };
            if frame.iter().all(u8::is_ascii_whitespace) && self.format == Format::Json {
                continue;
            }
            self.frame(&frame);
            if self.done {
                return;
            }
        }
        if self.buffer.len() > MAX_FRAME {
            self.give_up("a frame past the limit");
        }
    }

    fn frame(&mut self, frame: &[u8]) {
        let (resource, scope) = (self.resource, &self.scope);
        match wire::event(resource, self.format, frame) {
            Ok(Event::Object(event, item)) => match &mut self.initial {
                Some(items) if event == EventType::Added => items.push(*item),
                Some(_) => self.give_up("a change before the end of the initial events"),
                None => self.cache.change(|s| {
                    s.resource_mut(resource)
                        .apply(resource, scope, event, *item);
                }),
            },
            Ok(Event::Bookmark {
                resource_version,
                initial_end,
            }) => match self.initial.take() {
                Some(items) if initial_end => {
                    let format = self.format;
                    self.cache.change_if(|s| {
                        s.resource_mut(resource)
                            .replace(scope, format, &resource_version, items)
                    });
                }
                Some(items) => self.initial = Some(items),
                None => self
                    .cache
                    .inner
                    .state
                    .write()
                    .resource_mut(resource)
                    .bookmark(scope, &resource_version),
            },
            // The stream ends; the client lists or watches again.
            Ok(Event::Error) => self.done = true,
            Err(e) => self.give_up(&e.to_string()),
        }
    }

    /// Stops following and drops the scope: nothing half-followed is served.
    fn give_up(&mut self, why: &str) {
        debug!(resource = %self.resource, scope = %self.scope, reason = why, "a watch no longer kept");
        let (resource, scope) = (self.resource, self.scope.clone());
        self.cache
            .change(|s| s.resource_mut(resource).forget(&scope));
        self.done = true;
        self.buffer = Vec::new();
    }
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;

/// Writes `kept` as `resource`'s file, or removes the file when nothing of
/// it is kept.
fn write_kept(
    storage: &Storage,
    node: &str,
    resource: KeptResource,
    kept: &state::ResourceState,
) -> Result<u64, String> {
    if kept.scopes.is_empty() && kept.gotten.is_empty() {
        storage.remove(&resource.file_name()).map(|()| 0)
    } else {
        storage.write_resource(node, resource, kept)
    }
}
