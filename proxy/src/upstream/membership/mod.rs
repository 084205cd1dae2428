//! Node membership: the nodes whose labels the topology filter reads,
//! without a cluster-wide Node stream.
//!
//! The filter compares, for each label key a Service's `topologyKeys` names,
//! the value on an endpoint's node with the value on the local node. So for
//! each key `k` in use the proxy needs exactly the nodes whose `k` is the
//! local value — `k in (v)`, a label-selector watch the API server filters
//! (a proxy serving a whole site: `k in (v1,v2,…)`, the values of its
//! nodes). Those *scope* watches are metadata-only (`as=PartialObjectMetadata`):
//! labels are all the filter reads. The local node itself is watched in
//! full, by name: kube-proxy reads its own Node.
//!
//! So a node's status write (kubelet: every 5 minutes, and on change)
//! reaches only the proxies of the node's own site — as metadata — and goes
//! no further than here unless a label changed: the writer, and every
//! client, see a node other than the local one only when its labels do.
//!
//! The scope watches follow their inputs: a Service naming a new key starts
//! one, the last Service naming a key stops it, and a local value that
//! changes (the node moved to another site) restarts the key's watch with
//! the new value. The writer sees one Nodes stream: `Init … InitDone` once
//! the local node(s), the Services' keys and every scope are listed; then
//! `Apply` and `Delete` of what changed, held while a scope (re)lists and
//! ordered so that no intermediate state filters differently from the final
//! one: nodes entering the scope first, then the local nodes, then the
//! nodes leaving.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::value::RawValue;

use futures::{Stream, StreamExt};
use kube::{
    core::PartialObjectMeta,
    runtime::{watcher, WatchStreamExt},
    Api,
};
use serde_json::json;
use sitegrid_apimachinery::selector::Operator;
use tokio::{
    sync::{mpsc, watch},
    task::{AbortHandle, JoinSet},
};
use tracing::{debug, info};

use sitegrid_cache::{
    ApiVersion, Cache, Locality, NodeScopes, ResourceKind, UpstreamBody, UpstreamObject,
    WriterInput,
};

use super::{errors::ErrorStreak, reflector};

/// Which watch a node came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// The local node(s).
    Local,
    /// The nodes sharing a local value of this label key.
    Scope(String),
}

/// A watch to start (replacing any of the same source) or stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Start watching.
    Watch {
        /// Which part of the membership it feeds.
        source: Source,
        /// Tags its events; events of an older generation are dropped.
        generation: u64,
        /// `labelSelector`.
        labels: Option<String>,
        /// `fieldSelector`.
        fields: Option<String>,
        /// Metadata only (`as=PartialObjectMetadata`), or the full object.
        metadata_only: bool,
    },
    /// Stop watching.
    Stop(Source),
}

/// What one input changed: watches to start or stop, and events for the writer.
#[derive(Debug, Default)]
pub struct Step {
    /// Watches to start or stop, in order.
    pub commands: Vec<Command>,
    /// Nodes events for the writer, in order.
    pub out: Vec<watcher::Event<UpstreamObject>>,
}

/// The nodes one watch shows.
#[derive(Debug, Default)]
struct Part {
    generation: u64,
    members: BTreeMap<String, UpstreamObject>,
    relist: Option<BTreeMap<String, UpstreamObject>>,
    synced: bool,
}

impl Part {
    fn apply(&mut self, event: watcher::Event<UpstreamObject>) {
        match event {
            watcher::Event::Init => self.relist = Some(BTreeMap::new()),
            watcher::Event::InitApply(o) => {
                self.relist
                    .get_or_insert_with(BTreeMap::new)
                    .insert(o.key(), o);
            }
            watcher::Event::InitDone => {
                self.members = self.relist.take().unwrap_or_default();
                self.synced = true;
            }
            watcher::Event::Apply(o) => {
                self.members.insert(o.key(), o);
            }
            watcher::Event::Delete(o) => {
                self.members.remove(&o.key());
            }
        }
    }
}

/// One scope: the nodes whose `key` has one of `values`.
#[derive(Debug)]
struct Scope {
    values: BTreeSet<String>,
    part: Part,
}

/// What the writer was last sent about a node: a full object changes with
/// its version, a metadata one only with its labels.
#[derive(Debug, Clone, PartialEq)]
enum Sent {
    Full(String),
    Labels(BTreeMap<String, String>),
}

/// The membership state machine: fed watch events and the Services' label
/// keys, it says which watches to run and what the writer must hear.
#[derive(Debug)]
pub struct Membership {
    locality: Locality,
    local: Part,
    scopes: BTreeMap<String, Scope>,
    /// The label keys the Services' `topologyKeys` name (None: not known yet).
    keys: Option<BTreeSet<String>>,
    /// What the writer has, per node.
    sent: BTreeMap<String, (Sent, UpstreamObject)>,
    /// Whether the first `Init … InitDone` went out.
    started: bool,
    next_generation: u64,
}

impl Membership {
    /// The machine for `locality`, and the watch of its local node(s).
    pub fn new(locality: Locality) -> (Membership, Step) {
        let watch = match &locality {
            Locality::Node(name) => Command::Watch {
                source: Source::Local,
                generation: 0,
                labels: None,
                fields: Some(format!("metadata.name={name}")),
                metadata_only: false,
            },
            Locality::Site(selector) => Command::Watch {
                source: Source::Local,
                generation: 0,
                labels: Some(selector.to_string()),
                fields: None,
                metadata_only: true,
            },
        };
        let m = Membership {
            locality,
            local: Part::default(),
            scopes: BTreeMap::new(),
            keys: None,
            sent: BTreeMap::new(),
            started: false,
            next_generation: 1,
        };
        let step = Step {
            commands: vec![watch],
            out: Vec::new(),
        };
        (m, step)
    }

    /// The Services' label keys are now `keys`.
    pub fn keys_changed(&mut self, keys: BTreeSet<String>) -> Step {
        self.keys = Some(keys);
        self.settle()
    }

    /// An event of the watch `source`, generation `generation`.
    pub fn event(
        &mut self,
        source: &Source,
        generation: u64,
        event: watcher::Event<UpstreamObject>,
    ) -> Step {
        let part = match source {
            Source::Local => &mut self.local,
            Source::Scope(key) => match self.scopes.get_mut(key) {
                Some(scope) => &mut scope.part,
                None => return Step::default(),
            },
        };
        if part.generation != generation {
            return Step::default();
        }
        part.apply(event);
        self.settle()
    }

    /// Whether the writer has been given a complete membership.
    pub fn started(&self) -> bool {
        self.started
    }

    /// The scopes whose nodes the writer has been given in full.
    pub fn scopes(&self) -> NodeScopes {
        if !self.started {
            return NodeScopes::new();
        }
        self.scopes
            .iter()
            .filter(|(_, s)| s.part.synced)
            .map(|(k, s)| (k.clone(), s.values.clone()))
            .collect()
    }

    /// Brings the scope watches in line with the inputs, then tells the
    /// writer what changed once every watch is listed.
    fn settle(&mut self) -> Step {
        let mut step = Step {
            commands: self.reconcile(),
            out: Vec::new(),
        };
        self.flush(&mut step.out);
        step
    }

    /// For each key in use that a local node has: its local values.
    fn wanted(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut wanted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let (Some(keys), true) = (&self.keys, self.local.synced) else {
            return wanted;
        };
        for node in self.local.members.values() {
            let Some(labels) = node.metadata.labels.as_ref() else {
                continue;
            };
            for key in keys {
                if let Some(v) = labels.get(key) {
                    wanted.entry(key.clone()).or_default().insert(v.clone());
                }
            }
        }
        wanted
    }

    fn reconcile(&mut self) -> Vec<Command> {
        let wanted = self.wanted();
        let mut commands = Vec::new();
        let stale: Vec<String> = self
            .scopes
            .keys()
            .filter(|k| !wanted.contains_key(*k))
            .cloned()
            .collect();
        for key in stale {
            self.scopes.remove(&key);
            debug!(%key, "node scope no longer needed; its watch stops");
            commands.push(Command::Stop(Source::Scope(key)));
        }
        for (key, values) in wanted {
            if self.scopes.get(&key).is_some_and(|s| s.values == values) {
                continue;
            }
            let generation = self.next_generation;
            self.next_generation += 1;
            if self.site_holds(&key, &values) {
                // Every node of the scope matches the site's selector: the
                // local watch already has them all (and would see one leave).
                debug!(%key, "node scope held by the site's own watch");
                if self.scopes.contains_key(&key) {
                    commands.push(Command::Stop(Source::Scope(key.clone())));
                }
                let part = Part {
                    generation,
                    synced: true,
                    ..Part::default()
                };
                self.scopes.insert(key, Scope { values, part });
                continue;
            }
            let selector = selector_in(&key, &values);
            debug!(%selector, "watching the nodes of a local value");
            commands.push(Command::Watch {
                source: Source::Scope(key.clone()),
                generation,
                labels: Some(selector),
                fields: None,
                metadata_only: true,
            });
            let part = Part {
                generation,
                ..Part::default()
            };
            self.scopes.insert(key, Scope { values, part });
        }
        commands
    }

    /// Whether every node with `key in (values)` matches the site's
    /// selector: it is that one requirement, `key=v` or `key in (…)`, and
    /// holds every value.
    fn site_holds(&self, key: &str, values: &BTreeSet<String>) -> bool {
        let Locality::Site(selector) = &self.locality else {
            return false;
        };
        let [req] = selector.requirements() else {
            return false;
        };
        matches!(
            req.operator(),
            Operator::Equals | Operator::DoubleEquals | Operator::In
        ) && req.key() == key
            && values.iter().all(|v| req.values().contains(v))
    }

    /// Every node the writer should have now, with what marks its changes.
    fn desired(&self) -> BTreeMap<String, (Sent, &UpstreamObject)> {
        let mut out = BTreeMap::new();
        for (name, obj) in &self.local.members {
            let sent = match self.locality {
                Locality::Node(_) => Sent::Full(obj.upstream_rv().to_owned()),
                Locality::Site(_) => Sent::Labels(labels_of(obj)),
            };
            out.insert(name.clone(), (sent, obj));
        }
        for scope in self.scopes.values() {
            for (name, obj) in &scope.part.members {
                out.entry(name.clone())
                    .or_insert_with(|| (Sent::Labels(labels_of(obj)), obj));
            }
        }
        out
    }

    fn flush(&mut self, out: &mut Vec<watcher::Event<UpstreamObject>>) {
        let complete =
            self.local.synced && self.keys.is_some() && self.scopes.values().all(|s| s.part.synced);
        if !complete {
            return;
        }
        let desired = self.desired();
        if !self.started {
            out.push(watcher::Event::Init);
            out.extend(
                desired
                    .values()
                    .map(|(_, o)| watcher::Event::InitApply((*o).clone())),
            );
            out.push(watcher::Event::InitDone);
            info!(locality = %self.locality, nodes = desired.len(), scopes = self.scopes.len(), "node membership listed");
        } else {
            let (mut entering, mut local) = (Vec::new(), Vec::new());
            for (name, (sent, obj)) in &desired {
                if self.sent.get(name).is_some_and(|(s, _)| s == sent) {
                    continue;
                }
                let event = watcher::Event::Apply((*obj).clone());
                if self.local.members.contains_key(name) {
                    local.push(event);
                } else {
                    entering.push(event);
                }
            }
            let leaving = self
                .sent
                .iter()
                .filter(|(name, _)| !desired.contains_key(*name))
                .map(|(_, (_, obj))| watcher::Event::Delete(obj.clone()));
            out.extend(entering);
            out.extend(local);
            out.extend(leaving);
        }
        self.sent = desired
            .into_iter()
            .map(|(name, (sent, obj))| (name, (sent, obj.clone())))
            .collect();
        self.started = true;
    }
}

/// `key in (v1,v2)`: the nodes sharing one of the local values.
fn selector_in(key: &str, values: &BTreeSet<String>) -> String {
    let list: Vec<&str> = values.iter().map(String::as_str).collect();
    format!("{key} in ({})", list.join(","))
}

fn labels_of(obj: &UpstreamObject) -> BTreeMap<String, String> {
    obj.metadata.labels.clone().unwrap_or_default()
}

/// A node as the writer keeps one it only needs the labels of: name, uid,
/// resourceVersion and labels (the API server's metadata also carries
/// managedFields, annotations, … which change with every status write).
fn slim(meta: PartialObjectMeta<UpstreamObject>) -> UpstreamObject {
    let m = meta.metadata;
    let metadata = ObjectMeta {
        name: m.name,
        uid: m.uid,
        resource_version: m.resource_version,
        labels: m.labels,
        ..ObjectMeta::default()
    };
    let value = json!({"kind": "Node", "apiVersion": "v1", "metadata": metadata});
    UpstreamObject {
        // A JSON value always has a text form.
        body: UpstreamBody::Json(
            serde_json::value::to_raw_value(&value)
                .map(Arc::from)
                .unwrap_or_else(|_| Arc::from(RawValue::NULL.to_owned())),
        ),
        metadata,
        invalid: None,
    }
}

fn map_event<A, B>(event: watcher::Event<A>, f: impl Fn(A) -> B) -> watcher::Event<B> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(f(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(f(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(f(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// The list/watch stream a command asks for.
fn stream_of(
    client: kube::Client,
    command: &Command,
    watch_timeout: Duration,
) -> Option<impl Stream<Item = reflector::Item> + Send + 'static> {
    let Command::Watch {
        labels,
        fields,
        metadata_only,
        ..
    } = command
    else {
        return None;
    };
    let resource = ResourceKind::Nodes.api_resource(ApiVersion::V1);
    let mut config = reflector::config(watch_timeout);
    if let Some(l) = labels {
        config = config.labels(l);
    }
    if let Some(f) = fields {
        config = config.fields(f);
    }
    Some(if *metadata_only {
        // `Api<PartialObjectMeta<_>>` asks for `as=PartialObjectMetadata`.
        let api: Api<PartialObjectMeta<UpstreamObject>> = Api::all_with(client, &resource);
        watcher(api, config)
            .default_backoff()
            .map(|item| item.map(|ev| map_event(ev, slim)))
            .boxed()
    } else {
        let api: Api<UpstreamObject> = Api::all_with(client, &resource);
        watcher(api, config).default_backoff().boxed()
    })
}

/// The Nodes "reflector": runs the membership's watches and feeds the
/// writer its events, until the writer is gone. `keys` carries the label
/// keys the Services name, once the Services are listed.
pub async fn reflect_nodes(
    client: kube::Client,
    locality: Locality,
    mut keys: watch::Receiver<Option<BTreeSet<String>>>,
    tx: mpsc::Sender<WriterInput>,
    cache: Cache,
) {
    let watch_timeout = cache.config().watch_timeout;
    let (feed_tx, mut feed) = mpsc::channel::<(Source, u64, reflector::Item)>(256);
    let mut tasks = JoinSet::new();
    let mut running: HashMap<Source, AbortHandle> = HashMap::new();
    let mut errors = ErrorStreak::new(ResourceKind::Nodes);
    let (mut machine, mut step) = Membership::new(locality);
    let mut told = NodeScopes::new();
    let initial = keys.borrow_and_update().clone();
    if let Some(k) = initial {
        let more = machine.keys_changed(k);
        step.commands.extend(more.commands);
        step.out.extend(more.out);
    }
    loop {
        for command in std::mem::take(&mut step.commands) {
            let source = match &command {
                Command::Watch { source, .. } | Command::Stop(source) => source.clone(),
            };
            if let Some(old) = running.remove(&source) {
                old.abort();
            }
            let Command::Watch { generation, .. } = command else {
                continue;
            };
            let Some(mut stream) = stream_of(client.clone(), &command, watch_timeout) else {
                continue;
            };
            let feed_tx = feed_tx.clone();
            let tag = source.clone();
            let handle = tasks.spawn(async move {
                while let Some(item) = stream.next().await {
                    if feed_tx.send((tag.clone(), generation, item)).await.is_err() {
                        return;
                    }
                }
            });
            running.insert(source, handle);
        }
        for event in std::mem::take(&mut step.out) {
            if tx.send((ResourceKind::Nodes, event).into()).await.is_err() {
                debug!("writer gone; node membership stops");
                return;
            }
        }
        // After the nodes they hold, in the same stream: the writer projects
        // Services held back for a scope once it is complete.
        let scopes = machine.scopes();
        if scopes != told && machine.started() {
            if tx
                .send(WriterInput::NodeScopes(scopes.clone()))
                .await
                .is_err()
            {
                return;
            }
            told = scopes.clone();
        }
        cache.set_node_scopes(scopes);
        step = tokio::select! {
            changed = keys.changed() => {
                if changed.is_err() {
                    return;
                }
                let now = keys.borrow_and_update().clone();
                match now {
                    Some(k) => machine.keys_changed(k),
                    None => Step::default(),
                }
            }
            Some((source, generation, item)) = feed.recv() => match item {
                Ok(event) => {
                    errors.over(&cache);
                    machine.event(&source, generation, event)
                }
                Err(err) => {
                    errors.failed(&cache, &err);
                    Step::default()
                }
            },
            Some(_) = tasks.join_next() => Step::default(),
        };
    }
}

#[cfg(test)]
mod tests;
