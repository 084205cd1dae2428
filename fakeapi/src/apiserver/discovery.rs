//! Discovery documents (`/api`, `/api/v1`, `/apis`, `/apis/<g>[/<v>]`) and
//! `/version`, generated from the resource table. Only plain JSON is served:
//! clients asking for aggregated discovery (`as=APIGroupDiscoveryList`) get
//! the legacy documents as `application/json` and fall back, as they do
//! against a 1.20 server.

use serde_json::{json, Value};

use super::resource::{Resources, VERBS};
use super::version::KubernetesVersion;

/// `/version`, as the release played answers it.
pub(crate) fn version(version: KubernetesVersion) -> Value {
    version.version_info()
}

/// `/api`: APIVersions. `server_address` is where clients reached us.
pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn group_version(group: &str, version: &str) -> Value {
    json!({"groupVersion": format!("{group}/{version}"), "version": version})
}

/// `/apis/<group>`: APIGroup, or `None` for a group not served.
pub(crate) fn group(resources: &Resources, name: &str) -> Option<Value> {
    let versions = resources.versions_of(name);
    let preferred = *versions.first()?;
    Some(json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": versions.iter().map(|v| group_version(name, v)).collect::<Vec<_>>(),
        "preferredVersion": group_version(name, preferred)
    }))
}

/// `/apis`: APIGroupList.
pub(crate) fn groups(resources: &Resources) -> Value {
    let groups: Vec<Value> = resources
        .groups()
        .into_iter()
        .filter_map(|g| {
            let mut v = group(resources, g)?;
            if let Value::Object(m) = &mut v {
                m.shift_remove("kind");
                m.shift_remove("apiVersion");
            }
            Some(v)
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/api/v1` or `/apis/<g>/<v>`: APIResourceList, or `None` if not served.
pub(crate) fn resource_list(resources: &Resources, group: &str, version: &str) -> Option<Value> {
    let mut entries: Vec<(String, Value)> = Vec::new();
    for rt in resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let mut entry = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": VERBS,
        });
        if !rt.short_names.is_empty() {
            entry["shortNames"] = json!(rt.short_names);
        }
        entries.push((rt.plural.to_owned(), entry));
        if rt.has_status {
            entries.push((
                format!("{}/status", rt.plural),
                json!({
                    "name": format!("{}/status", rt.plural),
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ["get", "patch", "update"],
                }),
            ));
        }
    }
    if entries.is_empty() {
        return None;
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let list: Vec<Value> = entries.into_iter().map(|(_, v)| v).collect();
    Some(if group.is_empty() {
        json!({"kind": "APIResourceList", "groupVersion": version, "resources": list})
    } else {
        json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{group}/{version}"),
            "resources": list
        })
    })
}

/// `/`: the served paths.
pub(crate) fn root(resources: &Resources) -> Value {
    let mut paths = vec!["/api".to_owned(), "/api/v1".to_owned(), "/apis".to_owned()];
    for g in resources.groups() {
        paths.push(format!("/apis/{g}"));
        for v in resources.versions_of(g) {
            paths.push(format!("/apis/{g}/{v}"));
        }
    }
    paths.extend(["/healthz", "/livez", "/readyz", "/version"].map(str::to_owned));
    json!({ "paths": paths })
}

#[cfg(test)]
mod tests {
    use super::super::version::Profile;
    use super::*;

    #[test]
    fn documents() {
        let r = Resources::new(&Profile::v1_20("v1beta1"));
        let core = resource_list(&r, "", "v1").unwrap();
        let svc = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "services")
            .unwrap();
        assert_eq!(svc["shortNames"], json!(["svc"]));
        assert_eq!(svc["kind"], "Service");
        assert!(core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "services/status"));
        assert!(resource_list(&r, "discovery.k8s.io", "v1").is_none());
        let g = groups(&r);
        assert_eq!(
            g["groups"][0]["preferredVersion"]["groupVersion"],
            "discovery.k8s.io/v1beta1"
        );
        assert_eq!(g["groups"][0]["versions"].as_array().unwrap().len(), 1);
        assert_eq!(group(&r, "events.k8s.io").unwrap()["kind"], "APIGroup");
    }
}
