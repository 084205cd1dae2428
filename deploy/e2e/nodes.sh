# Real nodes for the suite (scenario 80): kubelet 1.20 and containerd running real
# containers, one node per network namespace. Sourced after lib.sh, never run.
#
# A node NODE is
#   - network namespace sg-NODE: eth0 on the bridge of namespace sg-fabric (192.0.2.x/24;
#     every node routes the others' pod CIDRs, so pods of different sites can reach each
#     other), no default route, and on lo 192.0.2.1 (the API server's advertised address):
#     192.0.2.1:6443 leads to the host's 127.0.0.1:6443 through a unix-socket bridge
#     (socat on each side), the only way out of the namespace;
#   - a mount namespace (private) in which the node's directories are bind-mounted over the
#     paths a kubelet and the manifests use (/var/lib/kubelet, /var/lib/containerd,
#     /run/containerd, /etc/kubernetes, /etc/cni/net.d, /var/lib/cni, /var/log/pods,
#     /var/lib/sitegrid-proxy, /data/edge, /etc/sitegrid, ...), from $SITEGRID_E2E_RUN/nodes/NODE;
#   - cgroup /sitegrid-e2e/NODE in every hierarchy: its processes (containerd, kubelet, the
#     shims and containers) live under it, the kubelet's --cgroup-root is it, and killing
#     what is in it stops the node entirely;
#   - its own containerd (root, state and socket in its directories) with the CNI bridge
#     plugin and a pod CIDR of its own, and a kubelet 1.20.2 (cgroupfs driver) registered
#     as NODE with InternalIP 192.0.2.x and --cluster-dns at that address, where a dnsmasq
#     serves the node's /data/edge (sitegrid-dnsd's hosts file).
# nodes_cleanup (also run by the harness) kills every process of every node, removes the
# cgroups, the namespaces and the mount points it had to create, and restores the kernel
# settings kubelet changes.
# shellcheck shell=bash

NODES_DIR=$SITEGRID_E2E_RUN/nodes
NODES_CGROUP=sitegrid-e2e
NODES_SERVICE_CIDR=10.96.0.0/16
FABRIC=sg-fabric
# Paths a node sees as its own: "path-in-the-node dir-under-NODES_DIR/NODE".
NODE_BINDS=(
    "/var/lib/kubelet kubelet" "/var/lib/containerd containerd" "/run/containerd run-containerd"
    "/run/netns run-netns" "/etc/kubernetes etc-kubernetes" "/etc/cni/net.d cni-conf" "/var/lib/cni cni-state"
    "/var/log/pods log-pods" "/var/log/containers log-containers" "/var/lib/sitegrid-proxy sitegrid-proxy"
    "/data/edge edge" "/etc/sitegrid etc-sitegrid" "/lib/modules modules" "/var/lib/sitegrid-e2e e2e"
)
# Kernel settings kubelet sets at start (pkg/kubelet/cm, setupKernelTunables): restored by nodes_cleanup.
NODES_SYSCTLS=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes)

# node_ip NODE / node_podnet NODE: from "NODE IP PODNET" lines in $NODES_DIR/nodes.
node_ip() { awk -v n="$1" '$1 == n {print $2}' "$NODES_DIR/nodes"; }
node_podnet() { awk -v n="$1" '$1 == n {print $3}' "$NODES_DIR/nodes"; }
node_holder() { cat "$NODES_DIR/$1/holder.pid"; }
# in_node NODE CMD...: CMD in NODE's network and mount namespaces (as the node's own processes see them).
in_node() { local n=$1; shift; nsenter --target "$(node_holder "$n")" --mount --net -- "$@"; }
node_ctr() { ctr --address "$NODES_DIR/$1/run-containerd/containerd.sock" -n k8s.io "${@:2}"; }

# cgroup_hierarchies: the mounted cgroup hierarchies (v1 controllers, the named systemd one, unified).
cgroup_hierarchies() { local h; for h in /sys/fs/cgroup/*/; do [[ -f $h/cgroup.procs ]] && echo "${h%/}"; done; }

# node_cgroup_make PATH: PATH (relative) in every hierarchy; cpuset's get their parent's CPUs and memory nodes.
node_cgroup_make() {
    local h dir part path=
    for part in ${1//\// }; do
        path+=/$part
        for h in $(cgroup_hierarchies); do
            dir=$h$path
            [[ -d $dir ]] && continue
            mkdir "$dir"
            if [[ -f $dir/cpuset.cpus ]]; then
                cat "$(dirname "$dir")/cpuset.cpus" >"$dir/cpuset.cpus"
                cat "$(dirname "$dir")/cpuset.mems" >"$dir/cpuset.mems"
            fi
        done
    done
}

# node_cgroup_join PATH: this shell ($BASHPID) into PATH in every hierarchy.
node_cgroup_join() { local h; for h in $(cgroup_hierarchies); do echo "$BASHPID" >"$h/$1/cgroup.procs"; done; }

# node_pids NODE: every process in NODE's cgroup tree.
node_pids() { find "/sys/fs/cgroup/pids/$NODES_CGROUP/$1" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u; }

# node_kill NODE: SIGKILL every process of NODE (a power cut), until none is left (10 s at most).
node_kill() {
    local pids _
    for _ in $(seq 50); do
        pids=$(node_pids "$1")
        [[ -z $pids ]] && return 0
        # shellcheck disable=SC2086 # one PID a word
        kill -KILL $pids 2>/dev/null || true
        sleep 0.2
    done
    log "processes of node $1 survive SIGKILL: $(node_pids "$1" | paste -sd' ')"
    return 1
}

# node_cgroup_remove NODE: NODE's (empty) cgroups, deepest first.
node_cgroup_remove() {
    local h
    for h in $(cgroup_hierarchies); do
        [[ -d $h/$NODES_CGROUP/$1 ]] && find "$h/$NODES_CGROUP/$1" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    return 0
}

# fabric_up: namespace sg-fabric with the bridge every node's eth0 is plugged into.
fabric_up() {
    ip netns add "$FABRIC" || fail "namespace $FABRIC"
    ip -n "$FABRIC" link add fabric0 type bridge
    ip -n "$FABRIC" link set fabric0 up
    ip -n "$FABRIC" link set lo up
}

# node_net NODE IP: namespace sg-NODE plugged into the fabric at IP, 192.0.2.1 on lo, the API bridge.
node_net() {
    local node=$1 ip=$2 ns=sg-$1 dir=$NODES_DIR/$1
    ip netns add "$ns" || fail "node $node: namespace $ns (a leftover of a killed run? deploy/e2e/run.sh removes them)"
    ip -n "$ns" link set lo up
    ip link add "v-$node" netns "$FABRIC" type veth peer name eth0 netns "$ns"
    ip -n "$FABRIC" link set "v-$node" master fabric0 up
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" addr add 192.0.2.1/32 dev lo
    # No default route (nothing leaves the fabric); the service range is routed as a default
    # route would carry it, so the node's own connections to a ClusterIP get as far as
    # kube-proxy's rules, which send them to a pod.
    ip -n "$ns" route add "$NODES_SERVICE_CIDR" dev eth0 || fail "node $node: its network"
    # Routing between the node's pods and everything else; the bridge's traffic through
    # iptables (kube-proxy's service rules for pods on the same bridge).
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
    # 192.0.2.1:6443 in the namespace -> the host's 127.0.0.1:6443.
    socat "UNIX-LISTEN:$dir/apiserver.sock,fork,unlink-early" TCP:127.0.0.1:6443 </dev/null >>"$SITEGRID_E2E_LOGS/socat-$ns.log" 2>&1 &
    track $! "net-$node"
    retry 5 test -S "$dir/apiserver.sock" || fail "bridge socket $dir/apiserver.sock"
    ip netns exec "$ns" socat TCP-LISTEN:6443,bind=192.0.2.1,fork,reuseaddr "UNIX-CONNECT:$dir/apiserver.sock" \
        </dev/null >>"$SITEGRID_E2E_LOGS/socat-$ns.log" 2>&1 &
    track $! "net-$node"
    # dnsmasq: the node's DNS server (kubelet's --cluster-dns) reading dnsd's hosts file
    # directory (CoreDNS's hosts plugin on a real edge node); nothing upstream.
    ip netns exec "$ns" dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --pid-file \
        --hostsdir="$dir/edge" --listen-address="$ip" --bind-interfaces --port=53 \
        --log-facility=- </dev/null >>"$SITEGRID_E2E_LOGS/dnsmasq-$node.log" 2>&1 &
    track $! "net-$node"
}

# node_routes: every node routes every other node's pod CIDR to it.
node_routes() {
    local a b nodes
    mapfile -t nodes < <(awk '{print $1}' "$NODES_DIR/nodes")
    for a in "${nodes[@]}"; do
        for b in "${nodes[@]}"; do
            [[ $a == "$b" ]] && continue
            ip -n "sg-$a" route replace "$(node_podnet "$b")" via "$(node_ip "$b")" || fail "route $a -> $b"
        done
    done
}

# node_files NODE IP PODNET: the node's directories, kubeconfig (user system:node:NODE),
# containerd's configuration and the CNI bridge configuration.
node_files() {
    local node=$1 ip=$2 podnet=$3 dir=$NODES_DIR/$1 bind
    for bind in "${NODE_BINDS[@]}"; do mkdir -p "$dir/${bind#* }"; done
    mkdir -p "$dir/etc-kubernetes/manifests"
    "$E2E_DIR/cluster.sh" cert "node-$node" "/O=system:nodes/CN=system:node:$node"
    "$E2E_DIR/cluster.sh" kubeconfig "node-$node" https://192.0.2.1:6443
    mv "$SITEGRID_E2E_RUN/node-$node.kubeconfig" "$dir/kubelet.kubeconfig"
    : >"$dir/resolv.conf"
    cat >"$dir/containerd.toml" <<TOML
# containerd of node $node: every path is the node's own (bind mounts of $dir).
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "k8s.gcr.io/pause:3.2"
  # Lowering oom_score_adj is not allowed here: without this every sandbox fails
  # ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
TOML
    cat >"$dir/cni-conf/10-sitegrid.conflist" <<CNI
{"cniVersion": "0.4.0", "name": "sitegrid-e2e", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$podnet"}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}
CNI
}

# node_boot NODE: the node's mount namespace (holder process), containerd, the host service if
# the node has one (node_service), then kubelet. When the services and the kubelet were started
# (what a reboot is timed from) is in $NODES_DIR/NODE/services-started. Each boot has an id of
# its own, in the node's /var/lib/sitegrid-proxy/boot_id: the nodes share the host's kernel,
# whose boot id (what sitegrid-proxy reads by default) no reboot of theirs changes; scenario 81's
# proxies read this file instead (--boot-id-file).
node_boot() {
    local node=$1 dir=$NODES_DIR/$1 bind binds=() mp
    node_cgroup_make "$NODES_CGROUP/$node/system"
    cat /proc/sys/kernel/random/uuid >"$dir/sitegrid-proxy/boot_id"
    for bind in "${NODE_BINDS[@]}"; do
        mp=${bind% *}
        if [[ ! -e $mp ]]; then mkdir -p "$mp" && echo "$mp" >>"$NODES_DIR/created-mountpoints"; fi
        binds+=("$dir/${bind#* }" "$mp")
    done
    # The holder: a process that keeps the mount namespace (private: nothing mounted in it,
    # containers' root filesystems included, reaches the host) alive with the bind mounts.
    # shellcheck disable=SC2016 # the inner shell expands
    (node_cgroup_join "$NODES_CGROUP/$node/system"
        exec nsenter --net="/run/netns/sg-$node" -- unshare --mount --propagation private -- bash -c '
            while (($#)); do mount --bind "$1" "$2"; shift 2; done
            exec sleep infinity' holder "${binds[@]}") </dev/null >/dev/null 2>>"$SITEGRID_E2E_LOGS/holder-$node.log" &
    echo $! >"$dir/holder.pid"
    track $! "node-$node"
    disown $! # killed with its node: no job report
    retry 10 bash -c "[[ \$(cat /proc/$!/comm) == sleep ]]" || fail "node $node: mount namespace"
    node_spawn "$node" containerd containerd --config "$dir/containerd.toml"
    retry 30 test -S "$dir/run-containerd/containerd.sock" || fail "node $node: containerd does not start (containerd-$node.log)"
    retry 30 node_ctr "$node" version || fail "node $node: containerd does not answer"
    # The images, once (containerd keeps them on the node's disk), before the kubelet: its
    # static pods' images are there when it starts them.
    if [[ ! -e $dir/images-imported ]]; then
        local tar
        for tar in "$NODES_DIR"/images/*.tar; do
            [[ -e $tar ]] || continue
            node_ctr "$node" images import "$tar" >/dev/null || fail "node $node: import $tar"
        done
        touch "$dir/images-imported"
    fi
    date +%s.%N >"$dir/services-started"
    [[ ! -f $dir/sitegrid-proxy.service ]] || node_service "$node"
    node_kubelet "$node"
}

# node_service NODE: sitegrid-proxy as a host service, as systemd runs the unit in
# $NODES_DIR/NODE/sitegrid-proxy.service (deploy/static's) with the binary
# $NODES_DIR/NODE/host-bin/sitegrid-proxy: its ExecStart's flags and EnvironmentFile, NOTIFY_SOCKET
# given, started again a second after it exits (Restart=always, RestartSec=1), and the
# kubelet started only once it said READY=1 (Type=notify, Before=kubelet.service).
# What it told the socket is in $NODES_DIR/NODE/notify.log, its log sitegrid-proxy-NODE.log.
node_service() {
    local node=$1 dir=$NODES_DIR/$1 args=() env_file
    rm -f "$dir/notify.sock" "$dir/notify.log"
    # systemd's end of NOTIFY_SOCKET, a line per datagram.
    python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
while True:
    print(" ".join(s.recv(4096).decode().split()), flush=True)' "$dir/notify.sock" >"$dir/notify.log" 2>&1 </dev/null &
    track $! "node-$node"
    disown $!
    retry 10 test -S "$dir/notify.sock" || fail "node $node: no notify socket"
    # ExecStart's words, the backslash-newlines joined; the binary is the node's copy.
    read -r -a args < <(sed -n '/^ExecStart=/,/[^\\]$/p' "$dir/sitegrid-proxy.service" | sed 's/^ExecStart=//; s/\\$//' | tr '\n' ' ')
    args[0]=$dir/host-bin/sitegrid-proxy
    env_file=$(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$dir/sitegrid-proxy.service")
    # shellcheck disable=SC2016 # the inner shell expands
    node_spawn "$node" sitegrid-proxy env NOTIFY_SOCKET="$dir/notify.sock" bash -c '
        env_file=$1; shift
        set -a; [[ ! -f $env_file ]] || . "$env_file"; set +a
        while :; do "$@"; echo "exited with $?, started again in 1 s"; sleep 1; done' service "$env_file" "${args[@]}"
    retry 60 grep -qx 'READY=1' "$dir/notify.log" || fail "node $node: sitegrid-proxy never said READY=1 (sitegrid-proxy-$node.log)"
}

# node_kubelet NODE: the node's kubelet (its kubeconfig: $NODES_DIR/NODE/kubelet.kubeconfig), healthy;
# when it started is in $NODES_DIR/NODE/kubelet-started.
node_kubelet() {
    local node=$1 dir=$NODES_DIR/$1 ip
    ip=$(node_ip "$node")
    date +%s.%N >"$dir/kubelet-started"
    node_spawn "$node" kubelet "$SITEGRID_K8S_BIN/kubelet" \
        --kubeconfig="$dir/kubelet.kubeconfig" --hostname-override="$node" --node-ip="$ip" \
        --container-runtime=remote --container-runtime-endpoint=unix:///run/containerd/containerd.sock \
        --cgroup-driver=cgroupfs --cgroup-root="/$NODES_CGROUP/$node" --cgroups-per-qos=true \
        --pod-manifest-path=/etc/kubernetes/manifests --file-check-frequency=5s \
        --cluster-dns="$ip" --cluster-domain=cluster.local --resolv-conf="$dir/resolv.conf" \
        --address="$ip" --healthz-bind-address=127.0.0.1 --read-only-port=0 \
        --volume-plugin-dir=/var/lib/kubelet/volume-plugins \
        --fail-swap-on=false --oom-score-adj=0 \
        --image-gc-high-threshold=100 --image-gc-low-threshold=99 --eviction-hard= \
        --v=1
    retry 60 in_node "$node" curl -sf http://127.0.0.1:10248/healthz || fail "node $node: kubelet is not healthy (kubelet-$node.log)"
}

# node_kubelet_pid NODE: the PID of NODE's kubelet.
node_kubelet_pid() {
    local pid
    for pid in $(node_pids "$1"); do
        [[ $(cat "/proc/$pid/comm" 2>/dev/null) == kubelet ]] && echo "$pid"
    done | head -1
}

# node_kubelet_restart NODE: the kubelet stopped (SIGTERM) and started again; containers keep running.
node_kubelet_restart() {
    local pid
    pid=$(node_kubelet_pid "$1")
    [[ -n $pid ]] || fail "node $1: no kubelet to restart"
    kill "$pid"
    retry 20 pid_gone "$pid" || kill -KILL "$pid" 2>/dev/null || true
    node_kubelet "$1"
}

# node_spawn NODE NAME CMD...: CMD as a process of NODE (its cgroup, its namespaces), log NAME-NODE.log.
node_spawn() {
    local node=$1 name=$2
    shift 2
    (node_cgroup_join "$NODES_CGROUP/$node/system"
        exec nsenter --target "$(node_holder "$node")" --mount --net -- "$@") \
        </dev/null >>"$SITEGRID_E2E_LOGS/$name-$node.log" 2>&1 &
    track $! "node-$node"
    disown $! # killed with its node: no job report
}

# node_add NODE IP PODNET: a new node, up and Ready (its images imported from $NODES_DIR/images).
node_add() {
    local node=$1 ip=$2 podnet=$3
    mkdir -p "$NODES_DIR"
    [[ -f $NODES_DIR/sysctls ]] || for s in "${NODES_SYSCTLS[@]}"; do echo "$s $(cat "/proc/sys/$s")"; done >"$NODES_DIR/sysctls"
    ip netns list | grep -qw "$FABRIC" || fabric_up
    echo "$node $ip $podnet" >>"$NODES_DIR/nodes"
    node_files "$node" "$ip" "$podnet" || fail "node $node: its files"
    node_net "$node" "$ip"
    node_boot "$node"
}

# node_images_import NODE TAR...: more images into NODE's containerd.
node_images_import() {
    local node=$1 tar
    shift
    for tar in "$@"; do node_ctr "$node" images import "$tar" >/dev/null || fail "node $node: import $tar"; done
}

# node_power_off NODE: every process of NODE killed at once (containers included), then what a
# reboot clears: its cgroups, /run (containerd's state, the pods' network namespaces), the pods'
# bridge, every iptables rule of the namespace and the connections it tracked. The disk
# (/var/lib/..., /etc/...) stays.
node_power_off() {
    local node=$1 dir=$NODES_DIR/$1 ns=sg-$1 table
    node_kill "$node" || fail "node $node does not stop"
    stop_group "node-$node"
    node_cgroup_remove "$node"
    rm -rf "${dir:?}/run-containerd" "$dir/run-netns" && mkdir -p "$dir/run-containerd" "$dir/run-netns"
    ip -n "$ns" link del cni0 2>/dev/null || true
    for table in nat filter mangle raw; do
        ip netns exec "$ns" iptables -t "$table" -F
        ip netns exec "$ns" iptables -t "$table" -X
    done
    ip netns exec "$ns" conntrack -F 2>/dev/null || true
}

# node_cut NODE / node_uncut NODE: NODE's packets to the API server dropped (existing connections
# hang, as in a partition) / let through again.
node_cut() { ip netns exec "sg-$1" iptables -w -I INPUT 1 -d 192.0.2.1 -p tcp --dport 6443 -m comment --comment sitegrid-e2e-cut -j DROP; }
node_uncut() {
    while ip netns exec "sg-$1" iptables -w -D INPUT -d 192.0.2.1 -p tcp --dport 6443 -m comment --comment sitegrid-e2e-cut -j DROP 2>/dev/null; do :; done
}

# node_pod_cgroup NODE POD_UID: the memory cgroup directory of a pod on NODE.
node_pod_cgroup() { find "/sys/fs/cgroup/memory/$NODES_CGROUP/$1" -maxdepth 3 -type d -name "pod$2" | head -1; }

# nodes_cleanup: every node gone, whatever state it is in (also from the harness's EXIT trap).
nodes_cleanup() {
    local node line nodes=()
    [[ -d $NODES_DIR ]] || return 0
    # What the scenario's client pods wrote, and the containers' logs, kept with the logs.
    cp "$NODES_DIR"/*/e2e/*.log "$SITEGRID_E2E_LOGS/" 2>/dev/null
    for node in "$NODES_DIR"/*/; do
        [[ -d $node/log-pods ]] && cp -r "$node/log-pods" "$SITEGRID_E2E_LOGS/pods-$(basename "$node")" 2>/dev/null
    done
    [[ -f $NODES_DIR/nodes ]] && mapfile -t nodes < <(awk '{print $1}' "$NODES_DIR/nodes")
    for node in "${nodes[@]}"; do
        node_kill "$node" 2>/dev/null
        stop_group "node-$node"
        stop_group "net-$node"
        ip netns exec "sg-$node" iptables-save >"$SITEGRID_E2E_LOGS/iptables-sg-$node.txt" 2>&1
        node_cgroup_remove "$node"
        ip netns delete "sg-$node" 2>/dev/null
    done
    local h
    for h in $(cgroup_hierarchies); do rmdir "$h/$NODES_CGROUP" 2>/dev/null; done
    ip netns delete "$FABRIC" 2>/dev/null || true
    if [[ -f $NODES_DIR/created-mountpoints ]]; then
        sort -ru "$NODES_DIR/created-mountpoints" | while read -r line; do rmdir "$line" 2>/dev/null; done
    fi
    if [[ -f $NODES_DIR/sysctls ]]; then
        while read -r line; do echo "${line#* }" >"/proc/sys/${line%% *}"; done <"$NODES_DIR/sysctls"
    fi
    rm -rf "$NODES_DIR"
    return 0
}
