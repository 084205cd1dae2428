//! What the node cache reads out of a kept object: its identity and version,
//! what a selector may ask about it, and, for a pod, what it references
//! (the Secrets, ConfigMaps and claims the kubelet will read for it, as
//! kubelet 1.20's `VisitPodSecretNames` / `VisitPodConfigmapNames` walk a
//! pod: `pkg/api/v1/pod/util.go`). Read from JSON or protobuf alike; the
//! object's bytes themselves are kept as the API server sent them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::resource::KeptResource;

/// What the node cache knows of a kept object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`, as the API server gave it.
    pub resource_version: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// The resource's selectable fields beyond name and namespace, when set.
    pub fields: Vec<(&'static str, String)>,
    /// What the object makes the kubelet read.
    pub refs: Refs,
}

/// What a kept object makes the kubelet read: a pod's Secrets, ConfigMaps
/// and claims (in its namespace), a claim's bound volume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refs {
    /// Secret names.
    pub secrets: BTreeSet<String>,
    /// ConfigMap names.
    pub config_maps: BTreeSet<String>,
    /// PersistentVolumeClaim names (generic ephemeral volumes included:
    /// `<pod>-<volume>`).
    pub claims: BTreeSet<String>,
    /// A claim's `spec.volumeName`.
    pub volume: Option<String>,
}

impl Facts {
    /// The value of field `path` for a field selector (`None` for an unset
    /// field, which selectors compare as `""`).
    pub fn field(&self, path: &str) -> Option<String> {
        match path {
            "metadata.name" => Some(self.name.clone()),
            "metadata.namespace" => Some(self.namespace.clone()),
            _ => self
                .fields
                .iter()
                .find(|(f, _)| *f == path)
                .map(|(_, v)| v.clone()),
        }
    }
}

// === JSON ===

/// The facts of a JSON object of `resource`.
pub fn from_json(resource: KeptResource, object: &Value) -> Facts {
    let meta = &object["metadata"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut facts = Facts {
        namespace: text(&meta["namespace"]),
        name: text(&meta["name"]),
        uid: text(&meta["uid"]),
        resource_version: text(&meta["resourceVersion"]),
        labels: meta["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default(),
        ..Facts::default()
    };
    let pointer = |p: &str| object.pointer(p).and_then(Value::as_str).map(str::to_owned);
    match resource {
        KeptResource::Pods => {
            for (field, p) in [
                ("spec.nodeName", "/spec/nodeName"),
                ("spec.restartPolicy", "/spec/restartPolicy"),
                ("spec.schedulerName", "/spec/schedulerName"),
                ("spec.serviceAccountName", "/spec/serviceAccountName"),
                ("status.phase", "/status/phase"),
                ("status.podIP", "/status/podIP"),
                ("status.nominatedNodeName", "/status/nominatedNodeName"),
            ] {
                if let Some(v) = pointer(p) {
                    facts.fields.push((field, v));
                }
            }
            facts.refs = pod_refs_json(&object["spec"], &facts.name);
        }
        KeptResource::Secrets => {
            if let Some(v) = pointer("/type") {
                facts.fields.push(("type", v));
            }
        }
        KeptResource::PersistentVolumeClaims => {
            facts.refs.volume = pointer("/spec/volumeName").filter(|v| !v.is_empty());
        }
        _ => {}
    }
    facts
}

fn pod_refs_json(spec: &Value, pod: &str) -> Refs {
    let mut refs = Refs::default();
    let name_into = |v: &Value, set: &mut BTreeSet<String>| {
        if let Some(n) = v.as_str().filter(|n| !n.is_empty()) {
            set.insert(n.to_owned());
        }
    };
    let items = |v: &Value| v.as_array().cloned().unwrap_or_default();
    for s in items(&spec["imagePullSecrets"]) {
        name_into(&s["name"], &mut refs.secrets);
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in items(&spec[list]) {
            for e in items(&c["env"]) {
                name_into(&e["valueFrom"]["secretKeyRef"]["name"], &mut refs.secrets);
                name_into(
                    &e["valueFrom"]["configMapKeyRef"]["name"],
                    &mut refs.config_maps,
                );
            }
            for e in items(&c["envFrom"]) {
                name_into(&e["secretRef"]["name"], &mut refs.secrets);
                name_into(&e["configMapRef"]["name"], &mut refs.config_maps);
            }
        }
    }
    for v in items(&spec["volumes"]) {
        name_into(&v["secret"]["secretName"], &mut refs.secrets);
        name_into(&v["configMap"]["name"], &mut refs.config_maps);
        for p in items(&v["projected"]["sources"]) {
            name_into(&p["secret"]["name"], &mut refs.secrets);
            name_into(&p["configMap"]["name"], &mut refs.config_maps);
        }
        name_into(&v["csi"]["nodePublishSecretRef"]["name"], &mut refs.secrets);
        name_into(&v["azureFile"]["secretName"], &mut refs.secrets);
        for plugin in [
            "cephfs",
            "cinder",
            "flexVolume",
            "iscsi",
            "rbd",
            "scaleIO",
            "storageos",
        ] {
            name_into(&v[plugin]["secretRef"]["name"], &mut refs.secrets);
        }
        name_into(&v["persistentVolumeClaim"]["claimName"], &mut refs.claims);
        if v["ephemeral"].is_object() {
            if let Some(vol) = v["name"].as_str() {
                refs.claims.insert(format!("{pod}-{vol}"));
            }
        }
    }
    refs
}

// === protobuf ===

/// The facts of an object's protobuf message (no envelope) of `resource`.
pub fn from_protobuf(resource: KeptResource, message: &[u8]) -> Result<Facts, prost::DecodeError> {
    use prost::Message;
    let facts = match resource {
        KeptResource::Pods => {
            let pod = pb::Pod::decode(message)?;
            let mut facts = meta_facts(pod.metadata.as_ref());
            let spec = pod.spec.unwrap_or_default();
            let status = pod.status.unwrap_or_default();
            for (field, value) in [
                ("spec.nodeName", &spec.node_name),
                ("spec.restartPolicy", &spec.restart_policy),
                ("spec.schedulerName", &spec.scheduler_name),
                ("spec.serviceAccountName", &spec.service_account_name),
                ("status.phase", &status.phase),
                ("status.podIP", &status.pod_ip),
                ("status.nominatedNodeName", &status.nominated_node_name),
            ] {
                if let Some(v) = value {
                    facts.fields.push((field, v.clone()));
                }
            }
            facts.refs = pod_refs_protobuf(&spec, &facts.name);
            facts
        }
        KeptResource::Secrets => {
            let secret = pb::Secret::decode(message)?;
            let mut facts = meta_facts(secret.metadata.as_ref());
            if let Some(t) = secret.r#type {
                facts.fields.push(("type", t));
            }
            facts
        }
        KeptResource::PersistentVolumeClaims => {
            let claim = pb::PersistentVolumeClaim::decode(message)?;
            let mut facts = meta_facts(claim.metadata.as_ref());
            facts.refs.volume = claim
                .spec
                .and_then(|s| s.volume_name)
                .filter(|v| !v.is_empty());
            facts
        }
        // Every kind's message has its metadata as field 1.
        _ => meta_facts(Some(&metadata_of(message)?)),
    };
    Ok(facts)
}

/// Field 1 of any object message, its `ObjectMeta`.
fn metadata_of(message: &[u8]) -> Result<ObjectMeta, prost::DecodeError> {
    /// Only the metadata of a message; prost skips the other fields.
    #[derive(Clone, PartialEq, prost::Message)]
    struct MetaOnly {
        #[prost(message, optional, tag = "1")]
        metadata: Option<ObjectMeta>,
    }
    use prost::Message;
    Ok(MetaOnly::decode(message)?.metadata.unwrap_or_default())
}

fn meta_facts(meta: Option<&ObjectMeta>) -> Facts {
    let Some(m) = meta else {
        return Facts::default();
    };
    Facts {
        namespace: m.namespace.clone().unwrap_or_default(),
        name: m.name.clone().unwrap_or_default(),
        uid: m.uid.clone().unwrap_or_default(),
        resource_version: m.resource_version.clone().unwrap_or_default(),
        labels: m.labels.clone().into_iter().collect(),
        ..Facts::default()
    }
}

fn pod_refs_protobuf(spec: &pb::PodSpec, pod: &str) -> Refs {
    let mut refs = Refs::default();
    let put = |v: &Option<String>, set: &mut BTreeSet<String>| {
        if let Some(n) = v.as_ref().filter(|n| !n.is_empty()) {
            set.insert(n.clone());
        }
    };
    for s in &spec.image_pull_secrets {
        put(&s.name, &mut refs.secrets);
    }
    let containers = spec.init_containers.iter().chain(&spec.containers);
    let env = containers.map(|c| (&c.env, &c.env_from)).chain(
        spec.ephemeral_containers.iter().filter_map(|e| {
            e.ephemeral_container_common
                .as_ref()
                .map(|c| (&c.env, &c.env_from))
        }),
    );
    for (vars, from) in env {
        for e in vars {
            if let Some(src) = &e.value_from {
                put(
                    &src.secret_key_ref
                        .as_ref()
                        .and_then(|r| r.local_object_reference.as_ref()?.name.clone()),
                    &mut refs.secrets,
                );
                put(
                    &src.config_map_key_ref
                        .as_ref()
                        .and_then(|r| r.local_object_reference.as_ref()?.name.clone()),
                    &mut refs.config_maps,
                );
            }
        }
        for e in from {
            put(
                &e.secret_ref
                    .as_ref()
                    .and_then(|r| r.local_object_reference.as_ref()?.name.clone()),
                &mut refs.secrets,
            );
            put(
                &e.config_map_ref
                    .as_ref()
                    .and_then(|r| r.local_object_reference.as_ref()?.name.clone()),
                &mut refs.config_maps,
            );
        }
    }
    for v in &spec.volumes {
        let Some(src) = &v.volume_source else {
            continue;
        };
        put(
            &src.secret.as_ref().and_then(|s| s.secret_name.clone()),
            &mut refs.secrets,
        );
        put(
            &src.config_map
                .as_ref()
                .and_then(|c| c.local_object_reference.as_ref()?.name.clone()),
            &mut refs.config_maps,
        );
        for p in src.projected.iter().flat_map(|p| &p.sources) {
            put(
                &p.secret
                    .as_ref()
                    .and_then(|s| s.local_object_reference.as_ref()?.name.clone()),
                &mut refs.secrets,
            );
            put(
                &p.config_map
                    .as_ref()
                    .and_then(|c| c.local_object_reference.as_ref()?.name.clone()),
                &mut refs.config_maps,
            );
        }
        put(
            &src.csi
                .as_ref()
                .and_then(|c| c.node_publish_secret_ref.as_ref()?.name.clone()),
            &mut refs.secrets,
        );
        put(
            &src.azure_file.as_ref().and_then(|a| a.secret_name.clone()),
            &mut refs.secrets,
        );
        for secret_ref in [
            src.cephfs
                .as_ref()
                .and_then(|p| p.secret_ref.as_ref()?.name.clone()),
            src.cinder
                .as_ref()
                .and_then(|p| p.secret_ref.as_ref()?.name.clone()),
            src.flex_volume
                .as_ref()
                .and_then(|p| p.secret_ref.as_ref()?.name.clone()),
            src.iscsi
                .as_ref()
                .and_then(|p| p.secret_ref.as_ref()?.name.clone()),
            src.rbd
                .as_ref()
                .and_then(|p| p.secret_ref.as_ref()?.name.clone()),
            src.scale_io
                .as_ref()
                .and_then(|p| p.secret_ref.as_ref()?.name.clone()),
            src.storageos
                .as_ref()
                .and_then(|p| p.secret_ref.as_ref()?.name.clone()),
        ] {
            put(&secret_ref, &mut refs.secrets);
        }
        put(
            &src.persistent_volume_claim
                .as_ref()
                .and_then(|c| c.claim_name.clone()),
            &mut refs.claims,
        );
        if src.ephemeral.is_some() {
            if let Some(vol) = &v.name {
                refs.claims.insert(format!("{pod}-{vol}"));
            }
        }
    }
    refs
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use serde_json::json;

    fn pod_json() -> Value {
        json!({
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1",
                         "resourceVersion": "42", "labels": {"app": "web"}},
            "spec": {
                "nodeName": "bj-1", "serviceAccountName": "default",
                "imagePullSecrets": [{"name": "registry"}],
                "containers": [{"name": "c", "image": "x",
                    "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}},
                            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}}],
                    "envFrom": [{"configMapRef": {"name": "from-cm"}}]}],
                "volumes": [
                    {"name": "s", "secret": {"secretName": "vol-secret"}},
                    {"name": "p", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}},
                                                            {"serviceAccountToken": {"path": "token"}}]}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
            },
            "status": {"phase": "Running", "podIP": "10.0.0.7"}
        })
    }

    /// The same pod as kube-apiserver sends it in protobuf.
    fn pod_protobuf() -> Vec<u8> {
        let named = |n: &str| pb::LocalObjectReference {
            name: Some(n.into()),
        };
        let pod = pb::Pod {
            metadata: Some(ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("shop".into()),
                uid: Some("u-1".into()),
                resource_version: Some("42".into()),
                labels: [("app".to_owned(), "web".to_owned())].into(),
                ..ObjectMeta::default()
            }),
            spec: Some(pb::PodSpec {
                node_name: Some("bj-1".into()),
                service_account_name: Some("default".into()),
                image_pull_secrets: vec![named("registry")],
                containers: vec![pb::Container {
                    name: Some("c".into()),
                    env: vec![
                        pb::EnvVar {
                            name: Some("A".into()),
                            value_from: Some(pb::EnvVarSource {
                                secret_key_ref: Some(pb::SecretKeySelector {
                                    local_object_reference: Some(named("env-secret")),
                                    key: Some("k".into()),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                        pb::EnvVar {
                            name: Some("B".into()),
                            value_from: Some(pb::EnvVarSource {
                                config_map_key_ref: Some(pb::ConfigMapKeySelector {
                                    local_object_reference: Some(named("env-cm")),
                                    key: Some("k".into()),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                    ],
                    env_from: vec![pb::EnvFromSource {
                        config_map_ref: Some(pb::ConfigMapEnvSource {
                            local_object_reference: Some(named("from-cm")),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                volumes: vec![
                    pb::Volume {
                        name: Some("s".into()),
                        volume_source: Some(pb::VolumeSource {
                            secret: Some(pb::SecretVolumeSource {
                                secret_name: Some("vol-secret".into()),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                    },
                    pb::Volume {
                        name: Some("p".into()),
                        volume_source: Some(pb::VolumeSource {
                            projected: Some(pb::ProjectedVolumeSource {
                                sources: vec![pb::VolumeProjection {
                                    config_map: Some(pb::ConfigMapProjection {
                                        local_object_reference: Some(named("kube-root-ca.crt")),
                                        ..Default::default()
                                    }),
                                    ..Default::default()
                                }],
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                    },
                    pb::Volume {
                        name: Some("data".into()),
                        volume_source: Some(pb::VolumeSource {
                            persistent_volume_claim: Some(pb::PersistentVolumeClaimVolumeSource {
                                claim_name: Some("data".into()),
                                read_only: None,
                            }),
                            ..Default::default()
                        }),
                    },
                    pb::Volume {
                        name: Some("scratch".into()),
                        volume_source: Some(pb::VolumeSource {
                            ephemeral: Some(pb::EphemeralVolumeSource::default()),
                            ..Default::default()
                        }),
                    },
                ],
                ..Default::default()
            }),
            status: Some(pb::PodStatus {
                phase: Some("Running".into()),
                pod_ip: Some("10.0.0.7".into()),
                ..Default::default()
            }),
        };
        pod.encode_to_vec()
    }

    #[test]
    fn a_pod_reads_the_same_from_json_and_protobuf() {
        let from_json = from_json(KeptResource::Pods, &pod_json());
        let from_pb = from_protobuf(KeptResource::Pods, &pod_protobuf()).unwrap();
        assert_eq!(from_json, from_pb);
        assert_eq!(from_json.field("spec.nodeName").as_deref(), Some("bj-1"));
        assert_eq!(from_json.field("status.phase").as_deref(), Some("Running"));
        assert_eq!(
            from_json.field("metadata.namespace").as_deref(),
            Some("shop")
        );
        assert_eq!(from_json.field("status.nominatedNodeName"), None);
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(
            from_json.refs.secrets,
            set(&["env-secret", "registry", "vol-secret"])
        );
        assert_eq!(
            from_json.refs.config_maps,
            set(&["env-cm", "from-cm", "kube-root-ca.crt"])
        );
        assert_eq!(from_json.refs.claims, set(&["data", "web-1-scratch"]));
    }

    #[test]
    fn any_kind_gives_its_metadata_from_protobuf() {
        let driver = k8s_pb::api::storage::v1::CSIDriver {
            metadata: Some(ObjectMeta {
                name: Some("csi.example.com".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            }),
            spec: None,
        };
        let facts = from_protobuf(KeptResource::CsiDrivers, &driver.encode_to_vec()).unwrap();
        assert_eq!(
            (facts.name.as_str(), facts.resource_version.as_str()),
            ("csi.example.com", "7")
        );
        assert!(
            from_protobuf(KeptResource::Pods, b"\x0a\xff").is_err(),
            "truncated"
        );
    }
}
