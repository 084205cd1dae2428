//! The CRDs: committed copies match the code, and the definitions have the
//! names, scope, subresources and schemas users rely on.

use std::path::PathBuf;

use serde_json::Value;
use sitegrid_api::crd as crds;

const REGENERATE: &str = "cargo run -p sitegrid-controller -- crds --out-dir deploy/crds";

fn committed_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds")
}

#[test]
fn committed_crds_match_the_code() {
    for file in crds::all() {
        let path = committed_dir().join(&file.file_name);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        let generated = crds::to_yaml(&file.crd).unwrap();
        assert!(
            committed == generated,
            "{} is missing or differs from what the code generates; \
             regenerate with `{REGENERATE}` (from the workspace root) and commit the result",
            path.display()
        );
    }
}

#[test]
fn crd_files_are_named_by_group_and_plural() {
    let names: Vec<String> = crds::all().into_iter().map(|f| f.file_name).collect();
    assert_eq!(
        names,
        [
            "superedge.io_deploymentgrids.yaml",
            "superedge.io_statefulsetgrids.yaml",
            "superedge.io_servicegrids.yaml",
            "site.superedge.io_nodeunits.yaml",
            "site.superedge.io_nodegroups.yaml",
        ]
    );
}

#[test]
fn names_scope_and_subresources() {
    let expected = [
        ("DeploymentGrid", "deploymentgrids", "dg"),
        ("StatefulSetGrid", "statefulsetgrids", "ssg"),
        ("ServiceGrid", "servicegrids", "sg"),
    ];
    for (file, (kind, plural, short)) in crds::all().into_iter().zip(expected) {
        let spec = &file.crd.spec;
        assert_eq!(spec.group, "superedge.io");
        assert_eq!(spec.scope, "Namespaced");
        assert_eq!(spec.names.kind, kind);
        assert_eq!(spec.names.plural, plural);
        assert_eq!(
            spec.names.short_names.as_deref(),
            Some(&[short.to_owned()][..])
        );
        let [version] = &spec.versions[..] else {
            panic!("{kind}: one version")
        };
        assert_eq!(version.name, "v1");
        assert!(version.served && version.storage);
        let status = version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref());
        assert!(status.is_some(), "{kind}: status subresource");
        let columns: Vec<&str> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(columns.last(), Some(&"Age"), "{kind}");
        if kind != "ServiceGrid" {
            assert_eq!(columns, ["Sites", "Ready", "Age"], "{kind}");
        }
    }
}

/// The `openAPIV3Schema` of one CRD, as JSON.
fn schema(kind: &str) -> Value {
    let file = crds::all()
        .into_iter()
        .find(|f| f.crd.spec.names.kind == kind)
        .unwrap();
    let crd = serde_json::to_value(file.crd).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

#[test]
fn schemas_embed_the_kubernetes_specs() {
    let dg = schema("DeploymentGrid");
    let spec = &dg["properties"]["spec"];
    assert_eq!(
        spec["required"],
        serde_json::json!(["gridUniqKey", "template"])
    );
    let template = &spec["properties"]["template"];
    // A real DeploymentSpec, down to the containers.
    assert_eq!(
        template["required"],
        serde_json::json!(["selector", "template"])
    );
    let containers =
        &template["properties"]["template"]["properties"]["spec"]["properties"]["containers"];
    assert_eq!(containers["items"]["required"], serde_json::json!(["name"]));
    let pool = &spec["properties"]["templatePool"]["additionalProperties"];
    assert_eq!(pool["required"], template["required"]);
    assert_eq!(
        spec["properties"]["templates"]["additionalProperties"]["type"],
        "string"
    );

    let ssg = schema("StatefulSetGrid");
    let ssg_template = &ssg["properties"]["spec"]["properties"]["template"];
    assert_eq!(ssg_template["properties"]["serviceName"]["type"], "string");
    // What makes the API server refuse a StatefulSetGrid without a pod template.
    assert_eq!(
        ssg_template["required"],
        serde_json::json!(["selector", "template"])
    );

    let sg = schema("ServiceGrid");
    let ports = &sg["properties"]["spec"]["properties"]["template"]["properties"]["ports"];
    assert_eq!(
        ports["items"]["properties"]["targetPort"]["x-kubernetes-int-or-string"],
        true
    );
}

#[test]
fn schemas_do_not_give_up_on_structure() {
    for kind in ["DeploymentGrid", "StatefulSetGrid", "ServiceGrid"] {
        let text = schema(kind).to_string();
        assert!(
            !text.contains("x-kubernetes-preserve-unknown-fields"),
            "{kind}"
        );
        assert!(!text.contains("\"$ref\""), "{kind}");
    }
}

#[test]
fn crds_stay_small_enough_for_client_side_apply() {
    // `kubectl apply` keeps the whole object as JSON in a 256 KiB annotation.
    for file in crds::all() {
        let json = serde_json::to_string(&file.crd).unwrap();
        assert!(
            json.len() < 200 * 1024,
            "{}: {} bytes",
            file.file_name,
            json.len()
        );
    }
}

#[test]
fn the_stream_holds_every_crd() {
    let yaml = crds::all_yaml().unwrap();
    let docs = yaml.lines().filter(|l| *l == "---").count();
    assert_eq!(docs, 5);
    for name in [
        "deploymentgrids.superedge.io",
        "statefulsetgrids.superedge.io",
        "servicegrids.superedge.io",
        "nodeunits.site.superedge.io",
        "nodegroups.site.superedge.io",
    ] {
        assert!(yaml.contains(&format!("name: {name}")), "{name}");
    }
}
