#!/usr/bin/env python3
"""The API objects of OpenYurt's YurtHub traffic test, written to a real
kube-apiserver with the suite's admin certificate (one keep-alive HTTPS
connection; kubectl would take minutes for 5,000 writes).

  load.py nodes SITES PER_SITE         SITES x PER_SITE Ready nodes, location=edge-<s>
  load.py pods COUNT GROUPS            COUNT pods in namespace edge, label grp=g<i % GROUPS>,
                                       bound round-robin to every node, then Running and Ready
  load.py services COUNT GROUPS        COUNT Services, Service i selecting grp=g<i % GROUPS>,
                                       with topologyKeys ["location"] (as a ServiceGrid's)
  load.py slices COUNT ENDPOINTS       wait (bounded) until COUNT EndpointSlices of namespace
                                       edge hold ENDPOINTS endpoints each
  load.py heartbeat                    every node writes its status once (a kubelet's report)
  load.py delete                       delete every Service, then every pod, of namespace edge
  load.py gone                         wait (bounded) until namespace edge has no endpoints left
  load.py sizes PORT                   bytes of namespace edge's Services and EndpointSlices as
                                       protobuf lists, from the API server and from the site
                                       proxy on 127.0.0.1:PORT (its site's view): one line each

Environment: SITEGRID_E2E_APISERVER (https://127.0.0.1:PORT), SITEGRID_E2E_RUN
(the cluster's run folder: pki/admin.{crt,key}, pki/ca.crt).
"""
import http.client
import json
import os
import ssl
import sys
import time
import urllib.parse

NS = "edge"


class Api:
    def __init__(self):
        url = urllib.parse.urlparse(os.environ["SITEGRID_E2E_APISERVER"])
        run = os.environ["SITEGRID_E2E_RUN"]
        ctx = ssl.create_default_context(cafile=f"{run}/pki/ca.crt")
        ctx.load_cert_chain(f"{run}/pki/admin.crt", f"{run}/pki/admin.key")
        self.host, self.port, self.ctx = url.hostname, url.port, ctx
        self.conn = None

    def call(self, method, path, body=None, content_type="application/json", ok=(200, 201, 202)):
        for attempt in range(5):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
            try:
                headers = {"Content-Type": content_type, "Accept": "application/json"}
                self.conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
                resp = self.conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException):
                self.conn = None
                time.sleep(0.2 * (attempt + 1))
                continue
            if resp.status == 429 or resp.status >= 500:
                time.sleep(0.2 * (attempt + 1))
                continue
            if resp.status not in ok:
                raise SystemExit(f"{method} {path}: {resp.status} {data[:300]!r}")
            return json.loads(data) if data else None
        raise SystemExit(f"{method} {path}: gave up")


def nodes(api, sites, per_site):
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for s in range(sites):
        for n in range(per_site):
            name = f"edge-{s}-{n}"
            api.call("POST", "/api/v1/nodes", {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"location": f"edge-{s}", "kubernetes.io/hostname": name}},
            }, ok=(201, 409))
            api.call("PATCH", f"/api/v1/nodes/{name}/status", {"status": {
                "addresses": [{"type": "InternalIP", "address": f"192.0.3.{s * per_site + n + 1}"}],
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "lastHeartbeatTime": now, "lastTransitionTime": now}],
                "capacity": {"pods": "500", "cpu": "8", "memory": "32Gi"},
                "allocatable": {"pods": "500", "cpu": "8", "memory": "32Gi"},
            }}, content_type="application/merge-patch+json")


def node_names(api):
    return sorted(n["metadata"]["name"] for n in api.call("GET", "/api/v1/nodes")["items"])


def pods(api, count, groups):
    api.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
             ok=(201, 409))
    names = node_names(api)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for i in range(count):
        name, node = f"p{i}", names[i % len(names)]
        ip = f"10.{60 + i // 65536}.{(i // 256) % 256}.{i % 256}"
        api.call("POST", f"/api/v1/namespaces/{NS}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"grp": f"g{i % groups}", "edge-link": "1"}},
            "spec": {"nodeName": node, "automountServiceAccountToken": False,
                     "containers": [{"name": "main", "image": "superedge/echoserver:2.2",
                                     "ports": [{"containerPort": 8080}]}]},
        })
        api.call("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}/status", {"status": {
            "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "192.0.2.1", "startTime": now,
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                           for t in ("Initialized", "ContainersReady", "Ready", "PodScheduled")],
        }}, content_type="application/merge-patch+json")


def services(api, count, groups):
    for i in range(count):
        api.call("POST", f"/api/v1/namespaces/{NS}/services", {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"s{i}", "labels": {"edge-link": "1"},
                         "annotations": {"topologyKeys": '["location"]'}},
            "spec": {"selector": {"grp": f"g{i % groups}"},
                     "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]},
        })


def slices(api, count, endpoints, limit=900):
    deadline = time.time() + limit
    while time.time() < deadline:
        items = api.call("GET", f"/apis/discovery.k8s.io/v1beta1/namespaces/{NS}/endpointslices")["items"]
        full = sum(1 for s in items if len(s.get("endpoints") or []) == endpoints)
        if full >= count:
            print(f"{full} EndpointSlices of {endpoints} endpoints")
            return
        time.sleep(2)
    raise SystemExit(f"EndpointSlices: only {full} of {count} full after {limit} s")


def heartbeat(api):
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for name in node_names(api):
        api.call("PATCH", f"/api/v1/nodes/{name}/status", {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "lastHeartbeatTime": now, "lastTransitionTime": now}]}},
            content_type="application/strategic-merge-patch+json")


def gone(api, limit=900):
    """Wait (bounded) until namespace edge has no EndpointSlices and no Endpoints left."""
    deadline = time.time() + limit
    while time.time() < deadline:
        left = len(api.call("GET", f"/apis/discovery.k8s.io/v1beta1/namespaces/{NS}/endpointslices")["items"])
        left += len(api.call("GET", f"/api/v1/namespaces/{NS}/endpoints")["items"])
        if left == 0:
            return
        time.sleep(2)
    raise SystemExit(f"{left} EndpointSlices and Endpoints left after {limit} s")


def delete(api):
    for s in api.call("GET", f"/api/v1/namespaces/{NS}/services")["items"]:
        api.call("DELETE", f"/api/v1/namespaces/{NS}/services/{s['metadata']['name']}", ok=(200, 202, 404))
    api.call("DELETE", f"/api/v1/namespaces/{NS}/pods?labelSelector=edge-link%3D1&gracePeriodSeconds=0")


PROTOBUF = "application/vnd.kubernetes.protobuf"
SIZED = [("services", f"/api/v1/namespaces/{NS}/services"),
         ("endpointslices", f"/apis/discovery.k8s.io/v1beta1/namespaces/{NS}/endpointslices")]


def sizes(api, port):
    """What a reader of each kind gets in protobuf, whole and as the site's view."""
    site = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    api.conn = http.client.HTTPSConnection(api.host, api.port, context=api.ctx, timeout=30)
    for kind, path in SIZED:
        for where, conn in (("apiserver", api.conn), ("site", site)):
            conn.request("GET", path, headers={"Accept": PROTOBUF})
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200 or not resp.getheader("Content-Type", "").startswith(PROTOBUF):
                raise SystemExit(f"{where} {path}: {resp.status} {resp.getheader('Content-Type')}")
            print(f"{kind} {where} {len(body)}")
    api.conn = None


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    api, cmd, args = Api(), argv[1], [int(a) for a in argv[2:]]
    commands = {"nodes": nodes, "pods": pods, "services": services, "slices": slices,
                "heartbeat": heartbeat, "delete": delete, "gone": gone, "sizes": sizes}
    commands[cmd](api, *args)


if __name__ == "__main__":
    main(sys.argv)
