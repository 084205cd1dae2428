# The real-node scenarios' common ground (80-real-nodes, 81-node-cache): a plain control plane,
# kube-proxy as kubeadm leaves it, and sitegrid installed exactly as README "Deploy on a cluster"
# says. Sourced after lib.sh and nodes.sh, never run.
# shellcheck shell=bash

REAL_TAG=$(sed -n 's/^version = "\(.*\)"/\1/p' "$SITEGRID_E2E_ROOT/Cargo.toml" | head -1)

# real_plane: a fresh control plane (the suite's is reset; the caller puts the sample back)
# and the real nodes' images in $NODES_DIR/images; WORK is the scenario's folder.
real_plane() {
    "$E2E_DIR/cluster.sh" down >/dev/null 2>&1 || true
    "$E2E_DIR/cluster.sh" up >/dev/null 2>"$SITEGRID_E2E_LOGS/cluster-real.log" ||
        fail "control plane: $(tail -3 "$SITEGRID_E2E_LOGS/cluster-real.log")"
    WORK=$SITEGRID_E2E_RUN/real
    mkdir -p "$WORK" "$NODES_DIR/images"
    "$E2E_DIR/node-images.sh" "$NODES_DIR/images" "$REAL_TAG" >"$SITEGRID_E2E_LOGS/node-images.log" 2>&1 ||
        fail "node images: $(tail -3 "$SITEGRID_E2E_LOGS/node-images.log")"
}

# real_image_file IMAGE PATH OUT: the file PATH of image IMAGE (a docker-archive in
# $NODES_DIR/images, real_plane's) copied to OUT, executable, as an operator copies the proxy's
# binary out of its image to run it as a host service.
real_image_file() {
    python3 - "$NODES_DIR/images/$1.tar" "${2#/}" "$3" <<'PY' || fail "$2 from image $1"
import io, json, os, sys, tarfile
archive, path, out = sys.argv[1:]
with tarfile.open(archive) as outer:
    layers = json.load(outer.extractfile("manifest.json"))[0]["Layers"]
    for layer in reversed(layers):
        with tarfile.open(fileobj=io.BytesIO(outer.extractfile(layer).read())) as t:
            try:
                data = t.extractfile(path).read()
            except KeyError:
                continue
            with open(out + ".tmp", "wb") as f:
                f.write(data)
            os.chmod(out + ".tmp", 0o755)
            os.rename(out + ".tmp", out)
            sys.exit(0)
sys.exit(f"{path} is in no layer of {archive}")
PY
}

# real_back: the suite's control plane with the sample again, for later scenarios.
real_back() {
    REAL_BACK=1
    # The scenario's control plane goes down: its logs and events kept for a failure's reading.
    kubectl get events -A -o wide --sort-by=.lastTimestamp >"$SITEGRID_E2E_RUN/logs/events.txt" 2>&1
    rm -rf "$SITEGRID_E2E_LOGS/cluster-${SCENARIO:-real}" && cp -r "$SITEGRID_E2E_RUN/logs" "$SITEGRID_E2E_LOGS/cluster-${SCENARIO:-real}"
    nodes_cleanup
    "$E2E_DIR/cluster.sh" down >/dev/null 2>&1
    "$E2E_DIR/cluster.sh" up >/dev/null 2>>"$SITEGRID_E2E_LOGS/cluster-real.log" || fail "control plane after the scenario"
    "$E2E_DIR/sample.sh" >/dev/null || fail "sample.sh after the scenario"
}

# real_exit: the real-node scenarios' EXIT trap. Passed or failed, the suite's control plane
# is back with the sample when the scenario ends: a failed one used to leave its own plain
# control plane behind, and every later scenario failed on it (no sample nodes, no grids).
real_exit() { [[ -n ${REAL_BACK:-} ]] || real_back; }

# real_kube_proxy: kube-proxy as kubeadm 1.20 leaves it
# (cmd/kubeadm/app/phases/addons/proxy: ServiceAccount, binding to system:node-proxier,
# ConfigMap kube-proxy with config.conf and kubeconfig.conf, the DaemonSet). Its
# kubeconfig reaches the API server's own address, its ServiceAccount's token.
real_kube_proxy() {
    kubectl apply -f - >/dev/null <<'KP' || fail "kubeadm's kube-proxy"
apiVersion: v1
kind: ServiceAccount
metadata: {name: kube-proxy, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kubeadm:node-proxier}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-proxier}
subjects: [{kind: ServiceAccount, name: kube-proxy, namespace: kube-system}]
---
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
        server: https://192.0.2.1:6443
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
    # A node here is a network namespace: conntrack's table size is the host's, not its own.
    conntrack:
      maxPerCore: 0
---
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
        securityContext: {privileged: true}
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
KP
    kubectl -n kube-system rollout status daemonset/kube-proxy --timeout=120s >/dev/null || fail "kubeadm's kube-proxy never rolled out"
}

# real_sitegrid UNIT=RACK...: README "Deploy on a cluster", steps 2 to 5, in a copy of deploy/
# ($WORK/deploy, with the e2e overlay: imagePullPolicy Never): certificates (in $CERTS), the
# CRDs, a NodeUnit UNIT per node label rack=RACK (the caller labels the nodes) and NodeGroup
# location of them all, ConfigMap sitegrid-proxy-upstream, `kubectl apply -k`, every rollout,
# kube-proxy patched. Sets SITEGRID_READY (seconds from the apply to sitegrid's pods Ready).
real_sitegrid() {
    local spec unit rack units=() applied ds
    # A copy of deploy/ (the example overlay's certificates stay out of the source tree).
    rsync -a --exclude /e2e --exclude /overlays/example/certs "$SITEGRID_E2E_ROOT/deploy/" "$WORK/deploy/" || fail "copy of deploy/"
    cp -r "$E2E_DIR/overlay" "$WORK/deploy/overlays/e2e" || fail "the e2e overlay"
    CERTS=$WORK/deploy/overlays/example/certs
    # 2. Certificates.
    "$SITEGRID_CERTS_BIN" init --out "$CERTS" >/dev/null || fail "sitegrid-certs init"
    "$SITEGRID_CERTS_BIN" server --out "$CERTS" >/dev/null || fail "sitegrid-certs server"
    "$SITEGRID_CERTS_BIN" client kube-proxy --user system:kube-proxy --out "$CERTS" >/dev/null || fail "sitegrid-certs client"
    # 4. The CRDs first.
    kubectl apply -k "$WORK/deploy/crds" >/dev/null || fail "kubectl apply -k deploy/crds"
    crds_established crd/deploymentgrids.superedge.io crd/servicegrids.superedge.io \
        crd/statefulsetgrids.superedge.io crd/nodeunits.site.superedge.io crd/nodegroups.site.superedge.io ||
        fail "CRDs not established"
    # 3. Sites: the seed's NodeUnits by label (rack), NodeGroup location; the controller labels the nodes.
    for spec in "$@"; do
        unit=${spec%%=*} rack=${spec#*=}
        units+=("$unit")
        kubectl apply -f - >/dev/null <<UNIT || fail "NodeUnit $unit"
apiVersion: site.superedge.io/v1alpha2
kind: NodeUnit
metadata: {name: $unit}
spec:
  type: edge
  selector: {matchLabels: {rack: $rack}}
UNIT
    done
    kubectl apply -f - >/dev/null <<GROUP || fail "NodeGroup location"
apiVersion: site.superedge.io/v1alpha2
kind: NodeGroup
metadata: {name: location}
spec:
  nodeUnits: [$(IFS=,; echo "${units[*]}")]
GROUP
    # The proxy's upstream: the API server's own address (README, "The proxy's upstream").
    kubectl -n kube-system create configmap sitegrid-proxy-upstream \
        --from-literal=KUBERNETES_SERVICE_HOST=192.0.2.1 --from-literal=KUBERNETES_SERVICE_PORT=6443 >/dev/null ||
        fail "ConfigMap sitegrid-proxy-upstream"
    applied=$SECONDS
    kubectl apply -k "$WORK/deploy/overlays/e2e" >"$WORK/apply.txt" 2>&1 || fail "kubectl apply -k the example overlay: $(cat "$WORK/apply.txt")"
    for ds in sitegrid-proxy sitegrid-dnsd; do
        kubectl -n kube-system rollout status "daemonset/$ds" --timeout=180s >/dev/null || fail "daemonset $ds never rolled out"
    done
    kubectl -n kube-system rollout status deployment/sitegrid-controller --timeout=180s >/dev/null || fail "sitegrid-controller never rolled out"
    SITEGRID_READY=$((SECONDS - applied))
    # 5. kube-proxy -> sitegrid-proxy.
    kubectl -n kube-system patch daemonset kube-proxy --patch-file "$WORK/deploy/kube-proxy/patch.yaml" >/dev/null || fail "the kube-proxy patch"
    kubectl -n kube-system rollout status daemonset/kube-proxy --timeout=180s >/dev/null || fail "the patched kube-proxy never rolled out"
}
