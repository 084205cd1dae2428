//! The answers given from what is kept, as kube-apiserver writes them: a
//! list (`<Kind>List` with the scope's resourceVersion), an object, and the
//! frames of a watch (events, bookmarks, the end of a watch-list's initial
//! events, a `410 Gone`), in the format the objects were kept in.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};
use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sitegrid_apimachinery::{protobuf, watch::EventType, Status};

use crate::{
    resource::KeptResource,
    wire::{Format, Item, INITIAL_EVENTS_END},
};

/// A whole answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status (200; 201 for a kept TokenRequest answer).
    pub status: u16,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its body.
    pub body: Bytes,
}

/// A list of `items` (all in `format`) at `resource_version`.
pub fn list(
    resource: KeptResource,
    format: Format,
    resource_version: &str,
    items: &[&Item],
) -> Answer {
    let body = match format {
        Format::Json => {
            let head = format!(
                "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":{}}},\"items\":[",
                resource.list_kind(),
                resource.api_version(),
                serde_json::Value::from(resource_version)
            );
            let len = head.len() + items.iter().map(|i| i.bytes.len() + 1).sum::<usize>() + 3;
            let mut out = BytesMut::with_capacity(len);
            out.put_slice(head.as_bytes());
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.put_u8(b',');
                }
                out.put_slice(&item.bytes);
            }
            out.put_slice(b"]}\n");
            out.freeze()
        }
        Format::Protobuf => protobuf::list(
            resource.api_version(),
            &resource.list_kind(),
            &protobuf::list_meta(resource_version, "", None),
            items.iter().map(|i| &i.bytes[..]),
        ),
    };
    Answer {
        status: 200,
        content_type: format.content_type(),
        body,
    }
}

/// One object.
pub fn object(resource: KeptResource, item: &Item) -> Answer {
    Answer {
        status: 200,
        content_type: item.format.content_type(),
        body: on_wire(resource, item),
    }
}

/// An object as a GET answers it or a watch event carries it.
fn on_wire(resource: KeptResource, item: &Item) -> Bytes {
    match item.format {
        Format::Json => item.bytes.clone(),
        Format::Protobuf => {
            protobuf::envelope(resource.api_version(), resource.kind(), &item.bytes)
        }
    }
}

/// One watch frame: an event of `item`.
pub fn event(resource: KeptResource, event: EventType, item: &Item) -> Bytes {
    let object = on_wire(resource, item);
    frame(item.format, event.as_str(), &object)
}

/// A BOOKMARK at `resource_version`; `initial_end` marks the end of a
/// watch-list's initial events.
pub fn bookmark(
    resource: KeptResource,
    format: Format,
    resource_version: &str,
    initial_end: bool,
) -> Bytes {
    let annotations: BTreeMap<String, String> = if initial_end {
        [(INITIAL_EVENTS_END.to_owned(), "true".to_owned())].into()
    } else {
        BTreeMap::new()
    };
    let object = match format {
        Format::Json => {
            let mut meta =
                serde_json::json!({"resourceVersion": resource_version, "creationTimestamp": null});
            if initial_end {
                meta["annotations"] = serde_json::json!(annotations);
            }
            Bytes::from(
                serde_json::json!({
                    "kind": resource.kind(),
                    "apiVersion": resource.api_version(),
                    "metadata": meta,
                })
                .to_string(),
            )
        }
        Format::Protobuf => {
            // Every kind's message has its metadata as field 1.
            let meta = ObjectMeta {
                resource_version: Some(resource_version.to_owned()),
                annotations: annotations.into_iter().collect(),
                ..ObjectMeta::default()
            };
            let mut message = Vec::new();
            prost::encoding::message::encode(1, &meta, &mut message);
            protobuf::envelope(resource.api_version(), resource.kind(), &message)
        }
    };
    frame(format, "BOOKMARK", &object)
}

/// The ERROR frame of a watch that cannot continue from where it asked
/// (`410 Gone`, reason `Expired`): the client lists again.
pub fn expired(format: Format, message: &str) -> Bytes {
    let status = Status::expired(message);
    let object = match format {
        Format::Json => Bytes::from(serde_json::to_vec(&status).unwrap_or_default()),
        Format::Protobuf => protobuf::status(&status),
    };
    frame(format, "ERROR", &object)
}

fn frame(format: Format, event_type: &str, object: &[u8]) -> Bytes {
    match format {
        Format::Json => {
            let mut out = BytesMut::with_capacity(object.len() + event_type.len() + 24);
            out.put_slice(b"{\"type\":\"");
            out.put_slice(event_type.as_bytes());
            out.put_slice(b"\",\"object\":");
            out.put_slice(object);
            out.put_slice(b"}\n");
            out.freeze()
        }
        Format::Protobuf => protobuf::watch_event(event_type, object),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{self, Event};
    use k8s_pb::api::core::v1 as pb;
    use prost::Message;

    fn pod(format: Format) -> Item {
        let body = match format {
            Format::Json => br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"n","resourceVersion":"4"}}"#.to_vec(),
            Format::Protobuf => protobuf::envelope(
                "v1",
                "Pod",
                &pb::Pod {
                    metadata: Some(ObjectMeta {
                        name: Some("a".into()),
                        namespace: Some("n".into()),
                        resource_version: Some("4".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }
                .encode_to_vec(),
            )
            .to_vec(),
        };
        wire::object(KeptResource::Pods, format, &body).unwrap()
    }

    /// What is answered reads back as what was kept, in both formats.
    #[test]
    fn answers_read_back_as_the_kept_objects() {
        for format in [Format::Json, Format::Protobuf] {
            let item = pod(format);
            let l = list(KeptResource::Pods, format, "9", &[&item, &item]);
            assert_eq!(l.content_type, format.content_type());
            let back = wire::list(KeptResource::Pods, format, &l.body).unwrap();
            assert_eq!(back.resource_version, "9");
            assert_eq!(back.items, vec![item.clone(), item.clone()]);
            let empty = wire::list(
                KeptResource::Pods,
                format,
                &list(KeptResource::Pods, format, "9", &[]).body,
            )
            .unwrap();
            assert!(empty.items.is_empty());
            assert_eq!(
                wire::object(
                    KeptResource::Pods,
                    format,
                    &object(KeptResource::Pods, &item).body
                )
                .unwrap(),
                item
            );

            let strip = |f: Bytes| match format {
                Format::Json => f.slice(..f.len() - 1),
                Format::Protobuf => f.slice(4..),
            };
            match wire::event(
                KeptResource::Pods,
                format,
                &strip(event(KeptResource::Pods, EventType::Added, &item)),
            )
            .unwrap()
            {
                Event::Object(EventType::Added, back) => assert_eq!(*back, item),
                other => panic!("{other:?}"),
            }
            for initial_end in [false, true] {
                match wire::event(
                    KeptResource::Pods,
                    format,
                    &strip(bookmark(KeptResource::Pods, format, "12", initial_end)),
                )
                .unwrap()
                {
                    Event::Bookmark {
                        resource_version,
                        initial_end: end,
                    } => {
                        assert_eq!((resource_version.as_str(), end), ("12", initial_end))
                    }
                    other => panic!("{other:?}"),
                }
            }
            assert!(matches!(
                wire::event(
                    KeptResource::Pods,
                    format,
                    &strip(expired(format, "too old"))
                )
                .unwrap(),
                Event::Error
            ));
        }
    }
}
