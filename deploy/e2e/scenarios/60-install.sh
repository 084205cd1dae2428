# What an operator installs, against the real kube-apiserver 1.20: the
# kustomize base (deploy/) and every overlay render and pass a server-side
# dry run; the kube-proxy patch takes kubeadm's kube-proxy DaemonSet to the
# proxy and rollback.yaml back; then the RBAC and ServiceAccounts for real,
# and the proxy, the controller and dnsd run with those ServiceAccounts'
# tokens (not the admin's): the proxy serves its cached kinds over HTTPS to a
# client certificate, and its identity may not delete a Service or read
# Secrets; kube-proxy 1.20, run as the patched DaemonSet would run it, reaches
# the proxy with the kubeconfig and client certificate of the manifests. No
# kubelet runs here, so the DaemonSets and the Deployment never start pods:
# their objects are checked by the API server only.
# shellcheck shell=bash
ROOT=$SITEGRID_E2E_ROOT
WORK=$SITEGRID_E2E_RUN/install
PROXY=25261 PROXY_OPS=25262 CTL=18091 DNSD=25263
# A copy of deploy/ (the suite itself left out), so the certificates the
# example overlay reads never land in the source tree.
rm -rf "$WORK" && mkdir -p "$WORK"
rsync -a --exclude /e2e --exclude /overlays/example/certs "$ROOT/deploy/" "$WORK/deploy/"
CERTS=$WORK/deploy/overlays/example/certs

# make_certs DIR: what an operator runs (README, "Deploy on a cluster"):
# ca.crt ca.key server.crt server.key kube-proxy.crt kube-proxy.key, the client
# certificate for user system:kube-proxy (whom the proxy impersonates for
# kube-proxy's passed-through requests).
make_certs() {
    local dir=$1
    mkdir -p "$dir"
    "$SITEGRID_CERTS_BIN" init --out "$dir" >/dev/null
    "$SITEGRID_CERTS_BIN" server --out "$dir" >/dev/null
    "$SITEGRID_CERTS_BIN" client kube-proxy --user system:kube-proxy --out "$dir" >/dev/null
}
make_certs "$CERTS"

# --- rendering -------------------------------------------------------------------

kubectl kustomize "$WORK/deploy" >"$WORK/base.yaml" || fail "kubectl kustomize deploy/"
kubectl kustomize "$WORK/deploy/base" | cmp -s - "$WORK/base.yaml" || fail "deploy/ and deploy/base render differently"
for overlay in "$WORK"/deploy/overlays/*/; do
    kubectl kustomize "$overlay" >"$WORK/overlay-$(basename "$overlay").yaml" || fail "kubectl kustomize $overlay"
done
# The CRDs for real: kubectl needs them to read the example's grids, and so does the dry run.
kubectl kustomize "$WORK/deploy/crds" >"$WORK/crds.yaml"
kubectl apply -f "$WORK/crds.yaml" >/dev/null
# (polled here: `kubectl wait` on a CRD created a moment ago may print an error
# while the API server has not yet written its conditions)
for crd in $(kubectl get -f "$WORK/crds.yaml" -o name); do
    expect_within 30 "$crd established" True kubectl get "$crd" -o 'jsonpath={.status.conditions[?(@.type=="Established")].status}'
done
# objects FILE: FILE's objects as one JSON array (kubectl reads the YAML; no PyYAML needed).
objects() {
    kubectl create --dry-run=client -o json -f "$1" | python3 -c 'import json, sys
text, dec, out, i = sys.stdin.read(), json.JSONDecoder(), [], 0
while i < len(text):
    if text[i].isspace(): i += 1; continue
    o, i = dec.raw_decode(text, i)
    out += o["items"] if o.get("kind") == "List" else [o]
json.dump(out, sys.stdout)'
}
objects "$WORK/base.yaml" >"$WORK/base.json" || fail "kubectl cannot read the rendered base"
objects "$WORK/overlay-example.yaml" >"$WORK/example.json" || fail "kubectl cannot read the rendered example overlay"
# names JSON: "Kind/name" of each object, sorted, space-separated.
names() { python3 -c 'import json, sys; print(" ".join(sorted(o["kind"] + "/" + o["metadata"]["name"] for o in json.load(open(sys.argv[1])))))' "$1"; }
# Every generated CRD file is in the base (deploy/crds/kustomization.yaml lists them).
crd_files=$(find "$ROOT/deploy/crds" -name '*.yaml' ! -name kustomization.yaml | wc -l)
expect "CRDs in the base" "$(names "$WORK/base.json" | tr ' ' '\n' | grep -c '^CustomResourceDefinition/')" "$crd_files"
for object in DaemonSet/sitegrid-proxy DaemonSet/sitegrid-dnsd Deployment/sitegrid-controller \
    ServiceAccount/sitegrid-proxy ServiceAccount/sitegrid-dnsd ServiceAccount/sitegrid-controller \
    ClusterRole/sitegrid-proxy ClusterRoleBinding/sitegrid-proxy ConfigMap/sitegrid-kube-proxy-kubeconfig; do
    [[ " $(names "$WORK/base.json") " == *" $object "* ]] || fail "the base lacks $object"
done
for object in Secret/sitegrid-proxy-tls Secret/sitegrid-kube-proxy-client \
    DeploymentGrid/deploymentgrid-demo ServiceGrid/servicegrid-demo DaemonSet/sitegrid-proxy; do
    [[ " $(names "$WORK/example.json") " == *" $object "* ]] || fail "overlays/example lacks $object"
done
# The example's grids are the seeds' walkthrough, verbatim.
cmp -s "$ROOT/deploy/overlays/example/deploymentgrid.yaml" "$ROOT/controller/tests/fixtures/seed000-04-deploymentgrid.yaml" ||
    fail "overlays/example/deploymentgrid.yaml is not seed000-04 verbatim"
cmp -s "$ROOT/deploy/overlays/example/servicegrid.yaml" "$ROOT/controller/tests/fixtures/seed000-05-servicegrid.yaml" ||
    fail "overlays/example/servicegrid.yaml is not seed000-05 verbatim"
# The Secrets carry sitegrid-certs' files under the keys the manifests mount.
secret_key() { # SECRET KEY: that key of the example's SECRET, decoded
    python3 -c 'import base64, json, sys
for o in json.load(open(sys.argv[1])):
    if o["kind"] == "Secret" and o["metadata"]["name"] == sys.argv[2]:
        sys.stdout.write(base64.b64decode(o["data"][sys.argv[3]]).decode())' "$WORK/example.json" "$@"
}
for pair in sitegrid-proxy-tls/tls.crt=server.crt sitegrid-proxy-tls/tls.key=server.key sitegrid-proxy-tls/ca.crt=ca.crt \
    sitegrid-kube-proxy-client/tls.crt=kube-proxy.crt sitegrid-kube-proxy-client/tls.key=kube-proxy.key \
    sitegrid-kube-proxy-client/ca.crt=ca.crt; do
    secret=${pair%%/*} key=${pair#*/} key=${key%%=*} file=${pair#*=}
    secret_key "$secret" "$key" | cmp -s - "$CERTS/$file" || fail "$secret/$key is not $file"
done
# Images: sitegrid/sitegrid-*:0.1.0, and an operator's overlay moves them to its registry.
expect "images" "$(grep -o 'image: sitegrid/.*' "$WORK/base.yaml" | sort | paste -sd' ')" \
    "image: sitegrid/sitegrid-controller:0.1.0 image: sitegrid/sitegrid-dnsd:0.1.0 image: sitegrid/sitegrid-proxy:0.1.0"
mkdir -p "$WORK/deploy/overlays/registry"
cat >"$WORK/deploy/overlays/registry/kustomization.yaml" <<'K'
resources: [../../base]
images:
- {name: sitegrid/sitegrid-proxy, newName: registry.example/sitegrid-proxy, newTag: "0.1.1"}
K
kubectl kustomize "$WORK/deploy/overlays/registry" | has 'image: registry.example/sitegrid-proxy:0.1.1' ||
    fail "an overlay's images: entry does not move the proxy's image"
rm -r "$WORK/deploy/overlays/registry"

# --- the API server's verdict ---------------------------------------------------------

# Multi-cluster is opt-in: the base neither names clusternet-system nor watches the parent
# Secret; the component deploy/multicluster adds both.
! grep -q clusternet-system "$WORK/base.yaml" || fail "the base names clusternet-system"
grep -q -- '- --parent-secret=$' "$WORK/base.yaml" || fail "the base's controller watches a parent Secret"
mkdir -p "$WORK/deploy/overlays/multicluster"
printf 'resources: [../../base]\ncomponents: [../../multicluster]\n' >"$WORK/deploy/overlays/multicluster/kustomization.yaml"
kubectl kustomize "$WORK/deploy/overlays/multicluster" >"$WORK/multicluster.yaml" || fail "an overlay with the multicluster component"
grep -q -- '- --parent-secret=clusternet-system/parent-cluster$' "$WORK/multicluster.yaml" &&
    grep -q 'name: sitegrid-controller-parent-cluster' "$WORK/multicluster.yaml" || fail "the multicluster component: no parent Secret or its Role"
rm -r "$WORK/deploy/overlays/multicluster"
kubectl apply --dry-run=server -k "$WORK/deploy" >"$WORK/dry-run-base.txt" 2>&1 || fail "dry run of deploy/: $(cat "$WORK/dry-run-base.txt")"
for overlay in "$WORK"/deploy/overlays/*/; do
    kubectl apply --dry-run=server -k "$overlay" >"$WORK/dry-run.txt" 2>&1 ||
        fail "dry run of overlays/$(basename "$overlay"): $(cat "$WORK/dry-run.txt")"
done
# The cloud-side site proxy of one site: its Deployment serves that site's
# certificates only, and the API server takes it.
kubectl kustomize "$WORK/deploy/site-proxy-cloud" >"$WORK/site-proxy-cloud.yaml" || fail "kubectl kustomize deploy/site-proxy-cloud"
grep -q -- '- --client-group=sitegrid:site:beijing$' "$WORK/site-proxy-cloud.yaml" &&
    grep -q -- '- --site-selector=location=beijing$' "$WORK/site-proxy-cloud.yaml" || fail "the cloud site proxy: no site selector or client group"
kubectl apply --dry-run=server -k "$WORK/deploy/site-proxy-cloud" >"$WORK/dry-run.txt" 2>&1 ||
    fail "dry run of deploy/site-proxy-cloud: $(cat "$WORK/dry-run.txt")"

# kube-proxy as kubeadm 1.20 deploys it (cmd/kubeadm/app/phases/addons/proxy/manifests.go),
# patched with deploy/kube-proxy/patch.yaml: its config.conf stays ConfigMap kube-proxy's,
# kubeconfig.conf (the file config.conf's clientConnection.kubeconfig names) becomes
# sitegrid's, and the client certificate is mounted where that kubeconfig looks.
# (kubeadm's container is privileged; this API server does not allow that, so
# the copy here is not.)
KUBEADM_DS=$WORK/kube-proxy-daemonset.yaml
cat >"$KUBEADM_DS" <<'DS'
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system, labels: {k8s-app: kube-proxy}}
spec:
  selector: {matchLabels: {k8s-app: kube-proxy}}
  updateStrategy: {type: RollingUpdate}
  template:
    metadata: {labels: {k8s-app: kube-proxy}}
    spec:
      priorityClassName: system-node-critical
      containers:
      - name: kube-proxy
        image: k8s.gcr.io/kube-proxy:v1.20.2
        imagePullPolicy: IfNotPresent
        command: [/usr/local/bin/kube-proxy, --config=/var/lib/kube-proxy/config.conf, --hostname-override=$(NODE_NAME)]
        volumeMounts:
        - {mountPath: /var/lib/kube-proxy, name: kube-proxy}
        - {mountPath: /run/xtables.lock, name: xtables-lock, readOnly: false}
        - {mountPath: /lib/modules, name: lib-modules, readOnly: true}
        env:
        - name: NODE_NAME
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
      hostNetwork: true
      serviceAccountName: kube-proxy
      volumes:
      - {name: kube-proxy, configMap: {name: kube-proxy}}
      - {name: xtables-lock, hostPath: {path: /run/xtables.lock, type: FileOrCreate}}
      - {name: lib-modules, hostPath: {path: /lib/modules}}
      tolerations:
      - {key: CriticalAddonsOnly, operator: Exists}
      - {operator: Exists}
      nodeSelector: {kubernetes.io/os: linux}
DS
patch_local() { # FILE PATCH: FILE patched locally, as JSON
    kubectl patch --local -o json -f "$1" --type strategic --patch-file "$2"
}
patch_local "$KUBEADM_DS" "$ROOT/deploy/kube-proxy/patch.yaml" >"$WORK/kube-proxy-patched.json" || fail "patch.yaml does not apply"
# mounts JSON: the kube-proxy container's mounts and what each volume is, one line each.
mounts() {
    python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["spec"]["template"]["spec"]
vols = {v["name"]: v for v in s["volumes"]}
for m in s["containers"][0]["volumeMounts"]:
    v = dict(vols[m["name"]]); v.pop("name")
    kind = next(iter(v))
    if kind == "projected":
        what = " ".join("%s:%s=%s" % (src["configMap"]["name"], i["key"], i["path"]) for src in v[kind]["sources"] for i in src["configMap"]["items"])
    elif kind == "configMap":
        what = "configMap:" + v[kind]["name"]
    elif kind == "secret":
        what = "secret:" + v[kind]["secretName"]
    else:
        what = kind
    print(m["mountPath"], "<-", " | ".join(sorted(set(vols[m["name"]]) - {"name"})), what)' "$1" | sort
}
expect "patched kube-proxy mounts" "$(mounts "$WORK/kube-proxy-patched.json")" "/lib/modules <- hostPath hostPath
/run/xtables.lock <- hostPath hostPath
/var/lib/kube-proxy <- projected kube-proxy:config.conf=config.conf sitegrid-kube-proxy-kubeconfig:kubeconfig=kubeconfig.conf
/var/lib/sitegrid/kube-proxy <- secret secret:sitegrid-kube-proxy-client"
# (without the empty status `kubectl patch --local` adds, which kubectl apply cannot read)
python3 -c 'import json, sys; o = json.load(open(sys.argv[1])); o.pop("status", None); json.dump(o, sys.stdout)' \
    "$WORK/kube-proxy-patched.json" | kubectl apply --dry-run=server -f - >/dev/null || fail "the patched kube-proxy DaemonSet is refused"
# The kubeconfig that lands at /var/lib/kube-proxy/kubeconfig.conf reaches the proxy with the mounted files.
python3 -c 'import json, sys
for o in json.load(open(sys.argv[1])):
    if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "sitegrid-kube-proxy-kubeconfig":
        sys.stdout.write(o["data"]["kubeconfig"])' "$WORK/base.json" >"$WORK/kube-proxy-in-pod.kubeconfig"
kc_fields=$(kubectl config view --kubeconfig "$WORK/kube-proxy-in-pod.kubeconfig" \
    -o jsonpath='{.clusters[0].cluster.server} {.clusters[0].cluster.certificate-authority} {.users[0].user.client-certificate} {.users[0].user.client-key}')
expect "kube-proxy's kubeconfig" "$kc_fields" \
    "https://127.0.0.1:51006 /var/lib/sitegrid/kube-proxy/ca.crt /var/lib/sitegrid/kube-proxy/tls.crt /var/lib/sitegrid/kube-proxy/tls.key"
# rollback.yaml gives back exactly what kubeadm deployed.
patch_local "$WORK/kube-proxy-patched.json" "$ROOT/deploy/kube-proxy/rollback.yaml" >"$WORK/kube-proxy-rolled-back.json" ||
    fail "rollback.yaml does not apply"
kubectl create --dry-run=client -o json -f "$KUBEADM_DS" >"$WORK/kube-proxy-kubeadm.json"
spec_of() { python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["spec"], sort_keys=True))' "$1"; }
expect "kube-proxy after rollback" "$(spec_of "$WORK/kube-proxy-rolled-back.json")" "$(spec_of "$WORK/kube-proxy-kubeadm.json")"

# --- the ServiceAccounts, for real ----------------------------------------------------

for component in proxy controller dnsd; do kubectl apply -f "$ROOT/deploy/$component/rbac.yaml" >/dev/null; done

# sa_kubeconfig NAME: a kubeconfig for kube-system/NAME's token (1.20's token controller
# makes the Secret), API server and CA as the Secret has them; prints its path.
sa_kubeconfig() {
    local sa=$1 secret kc=$WORK/$1.kubeconfig
    retry 30 bash -c "[[ -n \$(kubectl -n kube-system get sa $sa -o jsonpath='{.secrets[0].name}') ]]" ||
        fail "no token Secret for ServiceAccount $sa"
    secret=$(kubectl -n kube-system get sa "$sa" -o jsonpath='{.secrets[0].name}')
    kubectl -n kube-system get secret "$secret" -o jsonpath='{.data.ca\.crt}' | base64 -d >"$WORK/$sa-ca.crt"
    cat >"$kc" <<KC
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "https://127.0.0.1:6443", certificate-authority: "$WORK/$sa-ca.crt"}}]
users: [{name: $sa, user: {token: "$(kubectl -n kube-system get secret "$secret" -o jsonpath='{.data.token}' | base64 -d)"}}]
contexts: [{name: e2e, context: {cluster: e2e, user: $sa}}]
current-context: e2e
KC
    echo "$kc"
}
PROXY_KC=$(sa_kubeconfig sitegrid-proxy)
CTL_KC=$(sa_kubeconfig sitegrid-controller)
DNSD_KC=$(sa_kubeconfig sitegrid-dnsd)
expect "the proxy's token is the ServiceAccount" \
    "$(kubectl --kubeconfig "$PROXY_KC" auth can-i list services 2>&1)" yes

# The proxy's identity: its cached kinds, kube-proxy's events and Node reads,
# impersonating user system:kube-proxy (kube-proxy's client certificate), nothing else.
can() { kubectl auth can-i --as=system:serviceaccount:kube-system:sitegrid-proxy "$@" 2>/dev/null || true; }
for verb_kind in "list services" "watch services" "list endpoints" "watch endpoints" \
    "list endpointslices.discovery.k8s.io" "watch endpointslices.discovery.k8s.io" \
    "get nodes" "list nodes" "watch nodes" "create events" "patch events" "create events.events.k8s.io" \
    "impersonate users/system:kube-proxy"; do
    expect "sitegrid-proxy may $verb_kind" "$(can $verb_kind)" yes
done
for verb_kind in "delete services" "create services" "update services" "patch services" "get services" \
    "delete endpoints" "update endpointslices.discovery.k8s.io" "update nodes" "patch nodes" "delete nodes" \
    "get secrets" "list secrets" "list pods" "list configmaps" "create pods" "impersonate users" \
    "impersonate users/admin" "impersonate groups/system:masters" "list deploymentgrids.superedge.io"; do
    expect "sitegrid-proxy may $verb_kind" "$(can $verb_kind)" no
done
# And a real delete with its token is refused by the API server.
kubectl create service clusterip sitegrid-install-victim --tcp=80:80 >/dev/null
if out=$(kubectl --kubeconfig "$PROXY_KC" delete service sitegrid-install-victim 2>&1); then
    fail "the proxy's token deleted a Service"
fi
[[ $out == *Forbidden* && $out == *'system:serviceaccount:kube-system:sitegrid-proxy'* ]] || fail "unclear refusal: $out"
exists svc sitegrid-install-victim || fail "the victim Service is gone"

# --- sitegrid-proxy as its ServiceAccount, serving HTTPS to client certificates ------------

# As the DaemonSet runs it, with the example overlay's files (ports moved off 51006/51007).
"$SITEGRID_PROXY_BIN" --kubeconfig "$PROXY_KC" --hostname bj-1 --bind-address "127.0.0.1:$PROXY" \
    --cert-file "$CERTS/server.crt" --key-file "$CERTS/server.key" --ca-file "$CERTS/ca.crt" \
    --metrics-bind-address "127.0.0.1:$PROXY_OPS" --data-dir "$SITEGRID_E2E_RUN/proxy-data/bj-1-install" \
    >"$SITEGRID_E2E_LOGS/proxy-install.log" 2>&1 &
track $! install
retry 30 curl -sf "http://127.0.0.1:$PROXY_OPS/readyz" || fail "the proxy (ServiceAccount token) never got ready"
# kube-proxy's kubeconfig, with the files where this run has them.
CLIENT_KC=$WORK/kube-proxy.kubeconfig
cat >"$CLIENT_KC" <<KC
apiVersion: v1
kind: Config
clusters: [{name: sitegrid-proxy, cluster: {server: "https://127.0.0.1:$PROXY", certificate-authority: "$CERTS/ca.crt"}}]
users: [{name: kube-proxy, user: {client-certificate: "$CERTS/kube-proxy.crt", client-key: "$CERTS/kube-proxy.key"}}]
contexts: [{name: sitegrid-proxy, context: {cluster: sitegrid-proxy, user: kube-proxy}}]
current-context: sitegrid-proxy
KC
names=$(kubectl --kubeconfig "$CLIENT_KC" get services -A -o name) || fail "list services through the proxy: $names"
[[ $names == *service/servicegrid-demo-svc* && $names == *service/kubernetes* ]] || fail "services through the proxy: $names"
# The site filter, through HTTPS: bj-1 sees beijing's pods only.
bj_ips=$(kubectl --kubeconfig "$CLIENT_KC" get --raw /apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices |
    python3 -c 'import json,sys
print(" ".join(sorted(a for i in json.load(sys.stdin)["items"] if i["metadata"]["labels"].get("kubernetes.io/service-name")=="servicegrid-demo-svc"
    for e in i["endpoints"] or [] for a in e["addresses"])))')
expect "servicegrid-demo-svc's endpoints on bj-1" "$bj_ips" "10.0.0.70 10.0.1.72"
kubectl --kubeconfig "$CLIENT_KC" get nodes bj-1 -o name >/dev/null || fail "get of its own Node through the proxy"
# No client certificate, or one from another CA: refused during the handshake.
curl -s --cacert "$CERTS/ca.crt" -o /dev/null "https://127.0.0.1:$PROXY/api/v1/services" &&
    fail "the proxy answered a client without a certificate"
make_certs "$WORK/other-ca"
curl -s --cacert "$CERTS/ca.crt" --cert "$WORK/other-ca/kube-proxy.crt" --key "$WORK/other-ca/kube-proxy.key" \
    -o /dev/null "https://127.0.0.1:$PROXY/api/v1/services" && fail "the proxy answered a certificate of another CA"
# Passed through, kube-proxy's certificate gets no more than the proxy's identity may do:
# no delete of a Service, no Secrets.
if out=$(kubectl --kubeconfig "$CLIENT_KC" delete service sitegrid-install-victim 2>&1); then
    fail "a Service was deleted through the proxy"
fi
[[ $out == *Forbidden* ]] || fail "unclear refusal of a delete through the proxy: $out"
exists svc sitegrid-install-victim || fail "the victim Service is gone"
if out=$(kubectl --kubeconfig "$CLIENT_KC" -n kube-system get secrets 2>&1); then
    fail "Secrets were listed through the proxy"
fi
[[ $out == *Forbidden* ]] || fail "unclear refusal of Secrets through the proxy: $out"
kubectl delete service sitegrid-install-victim >/dev/null

# --- kube-proxy 1.20 as the patched DaemonSet runs it ------------------------------------

# This suite plays kubelet for the patched kube-proxy DaemonSet: each volume its
# container mounts is written from the objects it names (ConfigMap kube-proxy as
# kubeadm makes it, with kubeadm's own kubeconfig.conf; the base's
# sitegrid-kube-proxy-kubeconfig; the example's Secret sitegrid-kube-proxy-client)
# into a tree that a private mount namespace shows at /var/lib, and kube-proxy runs
# with the DaemonSet's command (--config=/var/lib/kube-proxy/config.conf) in bj-1's
# network namespace, where 127.0.0.1:51006 leads to the proxy above. If the patch
# did not take effect, kube-proxy would read kubeadm's kubeconfig.conf (the API
# server, a service account token that is not there) and write no rules.
cat >"$WORK/kube-proxy-configmap.yaml" <<'CM'
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-proxy, namespace: kube-system, labels: {app: kube-proxy}}
data:
  kubeconfig.conf: |-
    apiVersion: v1
    kind: Config
    clusters:
    - cluster:
        certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
        server: https://127.0.0.1:6443
      name: default
    contexts:
    - context: {cluster: default, namespace: default, user: default}
      name: default
    current-context: default
    users:
    - name: default
      user:
        tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
  config.conf: |-
    apiVersion: kubeproxy.config.k8s.io/v1alpha1
    kind: KubeProxyConfiguration
    clientConnection:
      kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
    clusterCIDR: 10.0.0.0/16
    mode: iptables
    # This suite's namespaces: no conntrack tuning, health and metrics on loopback.
    conntrack:
      maxPerCore: 0
      tcpEstablishedTimeout: 0s
      tcpCloseWaitTimeout: 0s
    oomScoreAdj: 0
    healthzBindAddress: 127.0.0.1:10256
    metricsBindAddress: 127.0.0.1:10249
CM
objects "$WORK/kube-proxy-configmap.yaml" >"$WORK/kube-proxy-configmap.json"
rm -rf "$WORK/pod" && mkdir -p "$WORK/pod"
# Writes the volumes under $WORK/pod/<mountPath>; prints the container's command, one word a line.
mapfile -t command < <(python3 - "$WORK/kube-proxy-patched.json" "$WORK/pod" \
    "$WORK/kube-proxy-configmap.json" "$WORK/base.json" "$WORK/example.json" <<'PY'
import base64, json, os, sys
ds, root = json.load(open(sys.argv[1])), sys.argv[2]
objs = {(o["kind"], o["metadata"]["name"]): o for f in sys.argv[3:] for o in json.load(open(f))}
spec = ds["spec"]["template"]["spec"]
vols = {v["name"]: v for v in spec["volumes"]}
container = spec["containers"][0]
def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").write(data)
for m in container["volumeMounts"]:
    v, dest = vols[m["name"]], root + m["mountPath"]
    if "hostPath" in v:
        continue
    if "projected" in v:
        for src in v["projected"]["sources"]:
            cm = objs[("ConfigMap", src["configMap"]["name"])]
            for i in src["configMap"]["items"]:
                write(os.path.join(dest, i["path"]), cm["data"][i["key"]].encode())
    elif "configMap" in v:
        for k, d in objs[("ConfigMap", v["configMap"]["name"])]["data"].items():
            write(os.path.join(dest, k), d.encode())
    elif "secret" in v:
        for k, d in objs[("Secret", v["secret"]["secretName"])]["data"].items():
            write(os.path.join(dest, k), base64.b64decode(d))
    else:
        sys.exit("unexpected volume %r" % v)
for word in container["command"] + container.get("args", []):
    print(word.replace("$(NODE_NAME)", "bj-1"))
PY
)
expect "kube-proxy's command" "${command[*]}" "/usr/local/bin/kube-proxy --config=/var/lib/kube-proxy/config.conf --hostname-override=bj-1"
[[ -d $WORK/pod/var/lib && $(find "$WORK/pod" -type f | sort | sed "s|$WORK/pod||" | paste -sd' ') == \
    "/var/lib/kube-proxy/config.conf /var/lib/kube-proxy/kubeconfig.conf /var/lib/sitegrid/kube-proxy/ca.crt /var/lib/sitegrid/kube-proxy/tls.crt /var/lib/sitegrid/kube-proxy/tls.key" ]] ||
    fail "the patched pod's files: $(find "$WORK/pod" -type f | sort | paste -sd' ')"
command[0]=$SITEGRID_K8S_BIN/kube-proxy
ns=$(node_netns bj-1)
# 127.0.0.1:51006 in the namespace → the proxy on the host's 127.0.0.1:$PROXY (as netns_bridge, other port).
sock=$SITEGRID_E2E_RUN/netns/$ns-51006.sock
socat "UNIX-LISTEN:$sock,fork,unlink-early" "TCP:127.0.0.1:$PROXY" 2>>"$SITEGRID_E2E_LOGS/socat-$ns.log" &
track $! "$ns"
retry 5 test -S "$sock" || fail "bridge socket $sock"
ip netns exec "$ns" socat TCP-LISTEN:51006,bind=127.0.0.1,fork,reuseaddr "UNIX-CONNECT:$sock" 2>>"$SITEGRID_E2E_LOGS/socat-$ns.log" &
track $! "$ns"
events_before=$(proxy_metric $PROXY_OPS 'requests_total{verb="passthrough",resource="events",code="201"}')
# shellcheck disable=SC2016 # $1 is the inner shell's
ip netns exec "$ns" unshare --mount --propagation private \
    sh -c 'mount --bind "$1" /var/lib && shift && exec "$@"' sh "$WORK/pod/var/lib" "${command[@]}" \
    >"$SITEGRID_E2E_LOGS/kube-proxy-bj-1-install.log" 2>&1 &
track $! "$ns"
retry 30 dnat_synced "$ns" || fail "the patched kube-proxy wrote no rules (see kube-proxy-bj-1-install.log)"
expect_within 10 "patched kube-proxy on bj-1: DNAT servicegrid-demo-svc" "10.0.0.70:8080 10.0.1.72:8080" \
    dnat_targets "$ns" servicegrid-demo-svc
expect_within 10 "patched kube-proxy on bj-1: DNAT plain-echo" "10.0.0.81:8080 10.0.1.33:8080" dnat_targets "$ns" plain-echo
retry 10 more_than 0 proxy_metric $PROXY_OPS 'watchers_open{resource="endpointslices"}' || fail "kube-proxy watches no slices through the proxy"
# Its Starting event went through the proxy, with the proxy's identity (its RBAC allows Events).
retry 10 more_than "$events_before" proxy_metric $PROXY_OPS 'requests_total{verb="passthrough",resource="events",code="201"}' ||
    fail "kube-proxy's event did not pass through the proxy"
stop_node bj-1

# --- sitegrid-controller and sitegrid-dnsd as their ServiceAccounts ---------------------

# Its own Lease name: a controller of an earlier scenario may still hold sitegrid-controller's.
# --parent-secret= as the base's Deployment runs it (one cluster, no clusternet).
"$SITEGRID_CONTROLLER_BIN" --kubeconfig "$CTL_KC" --bind-address "127.0.0.1:$CTL" --leader-elect=true \
    --leader-elect-resource-name=sitegrid-install --leader-elect-identity=install --parent-secret= \
    >"$SITEGRID_E2E_LOGS/controller-install.log" 2>&1 &
track $! install
retry 30 bash -c "[[ \$(curl -sf http://127.0.0.1:$CTL/metrics | awk '\$1 == \"sitegrid_controller_leader\" {print \$2}') == 1 ]]" ||
    fail "the controller (ServiceAccount token) never led"
# The example's grids, for real: the controller makes each site's Deployment.
for n in bj-1 bj-2 bj-3; do kubectl label node $n location=beijing --overwrite >/dev/null; done
for n in gz-1 gz-2 gz-3; do kubectl label node $n location=guangzhou --overwrite >/dev/null; done
kubectl apply -f "$ROOT/deploy/overlays/example/deploymentgrid.yaml" -f "$ROOT/deploy/overlays/example/servicegrid.yaml" >/dev/null
for site in beijing guangzhou; do
    retry 30 exists deploy "deploymentgrid-demo-$site" || fail "deploymentgrid-demo-$site never appeared"
done
retry 30 bash -c "[[ \$(kubectl get svc servicegrid-demo-svc -o jsonpath='{.metadata.ownerReferences[0].kind}') == ServiceGrid ]]" ||
    fail "servicegrid-demo-svc not adopted by the example's ServiceGrid"
retry 20 more_than 0 controller_metric "$CTL" reconciles_total || fail "the controller never reconciled"
! grep -qi forbidden "$SITEGRID_E2E_LOGS/controller-install.log" || fail "the controller was refused: $(grep -i forbidden "$SITEGRID_E2E_LOGS/controller-install.log" | head -3)"

mkdir -p "$WORK/dnsd" && chmod 755 "$WORK/dnsd"
"$SITEGRID_DNSD_BIN" --kubeconfig "$DNSD_KC" --hostname bj-1 --hosts-file "$WORK/dnsd/hosts" \
    --bind-address "127.0.0.1:$DNSD" >"$SITEGRID_E2E_LOGS/dnsd-install.log" 2>&1 &
track $! install
retry 30 curl -sf "http://127.0.0.1:$DNSD/readyz" || fail "dnsd (ServiceAccount token) never got ready"
! grep -qi forbidden "$SITEGRID_E2E_LOGS/dnsd-install.log" || fail "dnsd was refused: $(grep -i forbidden "$SITEGRID_E2E_LOGS/dnsd-install.log" | head -3)"

# Leave the cluster as the sample has it: the grids and their children go, the sample's Service comes back.
stop_group install
kubectl delete -f "$ROOT/deploy/overlays/example/deploymentgrid.yaml" -f "$ROOT/deploy/overlays/example/servicegrid.yaml" >/dev/null
retry 30 bash -c "! kubectl get deploy -o name | grep -q deploymentgrid-demo-" || fail "the example's Deployments outlived the grid"
retry 30 gone svc servicegrid-demo-svc || fail "the example's Service outlived its grid"
kubectl -n kube-system delete lease sitegrid-install --ignore-not-found >/dev/null
"$ROOT/deploy/e2e/sample.sh" >/dev/null
