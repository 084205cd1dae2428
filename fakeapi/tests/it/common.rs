//! A tiny HTTP client over real loopback sockets for the API server tests.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use sitegrid_apimachinery::protobuf::{self, to_json};
use sitegrid_fakeapi::{ApiServer, ApiServerConfig, ServerHandle};

/// Generous bound on anything a test waits for, so a bug fails instead of hanging.
pub const WAIT: Duration = Duration::from_secs(10);

/// A server on 127.0.0.1:0 plus a client for it.
pub struct Harness {
    pub server: ApiServer,
    pub handle: ServerHandle,
    pub client: Http,
}

pub async fn start(config: ApiServerConfig) -> Harness {
    let server = ApiServer::new(config);
    let handle = server.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let client = Http::new(handle.url(), false);
    Harness {
        server,
        handle,
        client,
    }
}

pub async fn start_default() -> Harness {
    start(ApiServerConfig::default()).await
}

/// A response read in full.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
    pub fn code(&self) -> u16 {
        self.status.as_u16()
    }
}

#[derive(Clone)]
pub struct Http {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Http {
    pub fn new(base: String, http2: bool) -> Self {
        let client = Client::builder(TokioExecutor::new())
            .http2_only(http2)
            .build_http();
        Http { base, client }
    }

    /// Send a request, with an `Accept` header if given.
    pub async fn send_accepting(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body: Vec<u8>,
    ) -> hyper::Response<Incoming> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        if let Some(accept) = accept {
            req = req.header("accept", accept);
        }
        let req = req.body(Full::new(Bytes::from(body))).unwrap();
        tokio::time::timeout(WAIT, self.client.request(req))
            .await
            .expect("response in time")
            .unwrap()
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Reply {
        self.call_accepting(method, path, content_type, None, body)
            .await
    }

    /// [`Http::call`] with an `Accept` header.
    pub async fn call_accepting(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body: Vec<u8>,
    ) -> Reply {
        let resp = self
            .send_accepting(method, path, content_type, accept, body)
            .await;
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = tokio::time::timeout(WAIT, resp.into_body().collect())
            .await
            .expect("body in time")
            .unwrap()
            .to_bytes();
        Reply {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.call(Method::GET, path, None, Vec::new()).await
    }

    /// A GET with an `Accept` header.
    pub async fn get_as(&self, path: &str, accept: &str) -> Reply {
        self.call_accepting(Method::GET, path, None, Some(accept), Vec::new())
            .await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.call(
            Method::POST,
            path,
            Some("application/json"),
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Reply {
        self.call(
            Method::PUT,
            path,
            Some("application/json"),
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }

    pub async fn patch(&self, path: &str, content_type: &str, body: &Value) -> Reply {
        self.call(
            Method::PATCH,
            path,
            Some(content_type),
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.call(Method::DELETE, path, None, Vec::new()).await
    }

    /// Open a watch; the response head must be 200 application/json.
    pub async fn watch(&self, path: &str) -> Watch {
        self.watch_as(path, None).await
    }

    /// [`Http::watch`] with an `Accept` header.
    pub async fn watch_as(&self, path: &str, accept: Option<&str>) -> Watch {
        self.watch_in(path, accept, "application/json").await
    }

    /// A watch in protobuf, as a reflector offers it (protobuf, then JSON);
    /// the response head must be 200 in protobuf's watch media type.
    pub async fn watch_protobuf(&self, path: &str) -> Watch {
        let accept = "application/vnd.kubernetes.protobuf, application/json";
        self.watch_in(path, Some(accept), protobuf::WATCH_MEDIA_TYPE)
            .await
    }

    async fn watch_in(&self, path: &str, accept: Option<&str>, content_type: &str) -> Watch {
        let resp = self
            .send_accepting(Method::GET, path, None, accept, Vec::new())
            .await;
        assert_eq!(resp.status(), StatusCode::OK, "watch {path}");
        assert_eq!(resp.headers()["content-type"], content_type);
        Watch {
            body: resp.into_body(),
            buf: Vec::new(),
            received: 0,
        }
    }
}

/// A watch stream read line by line.
pub struct Watch {
    body: Incoming,
    buf: Vec<u8>,
    /// Body bytes received so far.
    pub received: u64,
}

impl Watch {
    /// The next event as raw text, or `None` at the end of the stream.
    pub async fn next_line(&mut self) -> Option<String> {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return Some(String::from_utf8(line).unwrap().trim_end().to_owned());
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    /// The next event of a protobuf watch (a 4-byte length, then the event),
    /// as JSON through the decoder the proxy reads its upstream with, or
    /// `None` at the end of the stream.
    pub async fn next_protobuf(&mut self) -> Option<Value> {
        loop {
            if let Some(len) = self.buf.get(..4) {
                let len = u32::from_be_bytes(len.try_into().unwrap()) as usize;
                if self.buf.len() >= 4 + len {
                    let event: Vec<u8> = self.buf.drain(..4 + len).skip(4).collect();
                    let json = to_json::watch_event(&event).expect("an event that decodes");
                    return Some(serde_json::from_slice(&json).unwrap());
                }
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    /// The body's next bytes into `buf`; false at the end of the stream.
    async fn fill(&mut self) -> bool {
        let frame = tokio::time::timeout(WAIT, self.body.frame())
            .await
            .expect("watch frame in time");
        match frame {
            Some(Ok(f)) => {
                if let Ok(data) = f.into_data() {
                    self.received += data.len() as u64;
                    self.buf.extend_from_slice(&data);
                }
                true
            }
            Some(Err(_)) | None => {
                assert!(self.buf.is_empty(), "partial frame at end of stream");
                false
            }
        }
    }

    /// The next event, or `None` at the end of the stream.
    pub async fn next(&mut self) -> Option<Value> {
        let line = self.next_line().await?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad frame {line}: {e}")))
    }

    /// The next event, which must exist.
    pub async fn event(&mut self) -> Value {
        self.next()
            .await
            .expect("an event, not the end of the stream")
    }

    /// Whether an event arrives within `d` (for asserting silence).
    pub async fn quiet_for(&mut self, d: Duration) -> bool {
        if self.buf.contains(&b'\n') {
            return false;
        }
        match tokio::time::timeout(d, self.body.frame()).await {
            Err(_) => true,
            Ok(Some(Ok(f))) => {
                if let Ok(data) = f.into_data() {
                    self.received += data.len() as u64;
                    self.buf.extend_from_slice(&data);
                }
                !self.buf.contains(&b'\n')
            }
            Ok(_) => false,
        }
    }
}

/// `(type, name, resourceVersion)` of a watch event.
pub fn summary(ev: &Value) -> (String, String, String) {
    (
        ev["type"].as_str().unwrap_or("").to_owned(),
        ev["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        ev["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
    )
}

pub fn configmap(ns: &str, name: &str, data: Value) -> Value {
    serde_json::json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":name,"namespace":ns},"data":data})
}

pub fn endpoints(ns: &str, name: &str, labels: Value, ips: &[&str]) -> Value {
    let addresses: Vec<Value> = ips.iter().map(|ip| serde_json::json!({"ip": ip})).collect();
    serde_json::json!({"apiVersion":"v1","kind":"Endpoints","metadata":{"name":name,"namespace":ns,"labels":labels},
        "subsets":[{"addresses":addresses,"ports":[{"name":"http","port":8080,"protocol":"TCP"}]}]})
}

/// What kube-rs sends for a metadata list (`Api::list_metadata`, `metadata_watcher`).
pub const METADATA_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// What kube-rs sends for a metadata GET or watch.
pub const METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// A server loaded with the two-site world.
pub async fn start_two_sites() -> Harness {
    let h = start_default().await;
    h.server.load(sitegrid_fakeapi::sample::two_sites("v1"));
    h
}

/// `node` (a Node as the server returns it) with label `location` set to `site`.
pub fn relabelled(node: &Value, site: &str) -> Value {
    let mut node = node.clone();
    node["metadata"]["labels"]["location"] = serde_json::json!(site);
    node
}

/// A server playing `version` (default gates), loaded with the two-site
/// world as that release stores it.
pub async fn start_release(version: sitegrid_fakeapi::KubernetesVersion) -> Harness {
    start_configured(ApiServerConfig::for_version(version)).await
}

/// A server made with `config`, loaded with the two-site world as its
/// release stores it.
pub async fn start_configured(config: ApiServerConfig) -> Harness {
    let h = start(config).await;
    h.server.load_two_sites();
    h
}

/// kube-apiserver's answer to a path it serves nothing at (the 1.20
/// reference §0, the note §5.1).
pub const NOT_FOUND_RESOURCE: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}"#;
