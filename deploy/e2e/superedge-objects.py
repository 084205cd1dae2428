#!/usr/bin/env python3
"""SuperEdge's objects as its application-grid-controller left them
(controller/tests/fixtures/superedge-a979e05/), ready to create again in
another cluster: what the API server set (uid, resourceVersion, timestamps,
generation, status, managedFields) is dropped, everything SuperEdge wrote is
kept.

  superedge-objects.py crds                       its three CRDs
  superedge-objects.py grids NS                   the default namespace's grids, in NS
  superedge-objects.py children NS KIND/NAME=UID…  their children, in NS, owned by
                                                  the grids' new uids; a Service
                                                  gets a new clusterIP

Prints one JSON List for `kubectl create -f -`.
"""
import gzip
import json
import os
import sys

import yaml

CAPTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "controller", "tests", "fixtures", "superedge-a979e05")
SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink")


def load(name):
    path = os.path.join(CAPTURE, name)
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [o for o in yaml.safe_load_all(f) if o]


def stripped(obj, namespace=None):
    meta = obj["metadata"]
    for key in SERVER_SET:
        meta.pop(key, None)
    obj.pop("status", None)
    if namespace is not None:
        meta["namespace"] = namespace
    return obj


def main(argv):
    if len(argv) < 2 or argv[1] not in ("crds", "grids", "children"):
        sys.exit(__doc__)
    mode = argv[1]
    if mode == "crds":
        items = [stripped(o) for o in load("crds.yaml.gz")]
    elif mode == "grids":
        items = [stripped(o, argv[2]) for o in load("grids.yaml") if o["metadata"]["namespace"] == "default"]
    else:
        namespace, uids = argv[2], dict(arg.split("=", 1) for arg in argv[3:])
        items = []
        for obj in load("children.yaml"):
            stripped(obj, namespace)
            for ref in obj["metadata"].get("ownerReferences", []):
                key = f"{ref['kind']}/{ref['name']}"
                if key not in uids:
                    sys.exit(f"no new uid given for owner {key}")
                ref["uid"] = uids[key]
            if obj["kind"] == "Service":
                obj["spec"].pop("clusterIP", None)
                obj["spec"].pop("clusterIPs", None)
            items.append(obj)
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv)
