//! A request answered end to end: the gateway's stack over a cache holding
//! the two-site world, as node bj-1 sees it.

use std::{sync::OnceLock, time::Duration};

use bytes::Bytes;
use http::{header, Method, Request};
use http_body_util::{BodyExt as _, Empty};
use kube::runtime::watcher::Event;
use serde_json::json;
use sitegrid_cache::{
    self as cache, ApiVersion, Cache, CacheConfig, ResourceKind, UpstreamObject, Writer,
};
use sitegrid_proxy::gateway::{self, stack::boxed_request, GatewayConfig};
use tower::ServiceExt as _;

use crate::text;

/// Frames read from a response body before it is dropped (a watch has no end of its own).
const FRAMES: usize = 8;

/// The `query` input (line 1 `Accept`, then the request target) sent as a
/// GET through the whole stack: the handlers answer it (list pages, gets,
/// Tables, protobuf, watches with their initial events) in a runtime whose
/// clock is paused, so waits (resourceVersion not yet reached, bookmarks,
/// `timeoutSeconds`) pass at once. Every answer is a response; a `Status`
/// body is JSON or protobuf as negotiated.
pub fn serve(data: &[u8]) {
    let Some(s) = text(data) else { return };
    let (accept, target) = s.split_once('\n').unwrap_or(("", s));
    let mut req = Request::builder().method(Method::GET).uri(target);
    if !accept.is_empty() {
        req = req.header(header::ACCEPT, accept);
    }
    let Ok(req) = req.body(Empty::<Bytes>::new()) else {
        return;
    };
    // A runtime per input: whatever the stack spawned (a watch's stream) ends with it.
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    else {
        return;
    };
    rt.block_on(async {
        let gw = gateway::build(GatewayConfig::new(world().clone()));
        let Ok(resp) = gw.oneshot(boxed_request(req)).await;
        let mut body = resp.into_body();
        for _ in 0..FRAMES {
            match tokio::time::timeout(Duration::from_secs(5), body.frame()).await {
                Ok(Some(Ok(_))) => continue,
                _ => break,
            }
        }
    });
}

/// The two-site world synced into a cache once per process (and its writer,
/// kept so the cache stays written by someone).
fn world() -> &'static Cache {
    static WORLD: OnceLock<(Cache, Writer)> = OnceLock::new();
    &WORLD
        .get_or_init(|| {
            let (cache, slot) = cache::with_start_rv(CacheConfig::default(), 1000);
            let mut writer = slot.start("bj-1", ApiVersion::V1);
            let world = sitegrid_fakeapi::sample::two_sites("v1");
            for (i, kind) in ResourceKind::ALL.into_iter().enumerate() {
                writer.handle(kind, Event::Init);
                for mut o in world.iter().filter(|o| o["kind"] == kind.kind()).cloned() {
                    o["metadata"]["resourceVersion"] = json!((i + 1).to_string());
                    if let Ok(obj) = UpstreamObject::from_json(&o.to_string()) {
                        writer.handle(kind, Event::InitApply(obj));
                    }
                }
                writer.handle(kind, Event::InitDone);
            }
            (cache, writer)
        })
        .0
}
