#!/usr/bin/env bash
# What clusternet leaves in place once a child cluster's registration is
# approved, without clusternet itself (no agent, no hub, no CRDs): the objects
# SuperEdge's and sitegrid's multi-cluster mode read, made the way clusternet
# makes them (CN = github.com/clusternet/clusternet):
#
#   parent ($KUBECONFIG):
#     Namespace   clusternet-xxxxx (generateName), labels clusternet.io/created-by:
#                 clusternet-agent, clusters.clusternet.io/cluster-id: <uuid>,
#                 clusters.clusternet.io/cluster-name: NAME
#                 (CN pkg/controllermanager/approver/approver.go, createNamespaceForChildClusterIfNeeded)
#     ServiceAccount clusternet-xxxxx in it (generateName, same labels; 1.20's
#                 token controller makes its kubernetes.io/service-account-token Secret)
#     Role and RoleBinding clusternet-managedcluster-role: apiGroups/resources/verbs
#                 ["*"] in that namespace only (defaultRoles, bindingRoleIfNeeded)
#   child (CHILD_KUBECONFIG):
#     Secret clusternet-system/parent-cluster, Opaque, keys apiserver-advertise-url,
#                 token, ca.crt (the token Secret's, i.e. the parent's CA) and namespace,
#                 labels as the agent sets them (CN pkg/agent/agent.go, storeParentClusterCredentials)
#
# Not made: the ManagedCluster object and clusternet's cluster-wide roles
# (neither SuperEdge nor sitegrid reads them).
#
#   clusternet-register.sh NAME CHILD_KUBECONFIG [PARENT_URL]
#
# PARENT_URL defaults to the server of $KUBECONFIG. Prints the dedicated
# namespace. Idempotent for NAME: an existing dedicated namespace of that
# cluster name is reused, and the child's Secret is replaced.
set -euo pipefail
E2E_NAME=clusternet-register
# shellcheck source-path=SCRIPTDIR source=harness.sh
source "$(dirname "$0")/harness.sh"

[[ $# -ge 2 ]] || fail "usage: $0 NAME CHILD_KUBECONFIG [PARENT_URL]"
name=$1 child=$2
url=${3:-$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')}
WAIT=${SITEGRID_E2E_WAIT:-60}

ns=$(kubectl get ns -l "clusternet.io/created-by=clusternet-agent,clusters.clusternet.io/cluster-name=$name" \
    -o jsonpath='{.items[0].metadata.name}' 2>/dev/null || true)
if [[ -z $ns ]]; then
    id=$(cat /proc/sys/kernel/random/uuid)
    ns=$(kubectl create -o jsonpath='{.metadata.name}' -f - <<EOF
apiVersion: v1
kind: Namespace
metadata:
  generateName: clusternet-
  labels:
    clusternet.io/created-by: clusternet-agent
    clusters.clusternet.io/cluster-id: $id
    clusters.clusternet.io/cluster-name: $name
EOF
    ) || fail "namespace for $name"
else
    id=$(kubectl get ns "$ns" -o jsonpath='{.metadata.labels.clusters\.clusternet\.io/cluster-id}')
fi

sa=$(kubectl -n "$ns" get sa -l clusternet.io/created-by=clusternet-agent -o jsonpath='{.items[0].metadata.name}' 2>/dev/null || true)
if [[ -z $sa ]]; then
    sa=$(kubectl create -o jsonpath='{.metadata.name}' -f - <<EOF
apiVersion: v1
kind: ServiceAccount
metadata:
  generateName: clusternet-
  namespace: $ns
  labels:
    clusternet.io/created-by: clusternet-agent
    clusters.clusternet.io/cluster-id: $id
    clusters.clusternet.io/cluster-name: $name
EOF
    ) || fail "service account for $name"
fi

kubectl apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: clusternet-managedcluster-role
  namespace: $ns
  labels: {clusters.clusternet.io/bootstrapping: rbac-defaults}
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: clusternet-managedcluster-role
  namespace: $ns
  labels: {clusters.clusternet.io/bootstrapping: rbac-defaults}
subjects:
- kind: ServiceAccount
  name: $sa
  namespace: $ns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: clusternet-managedcluster-role
EOF

# The token controller fills the ServiceAccount's secrets (as clusternet's
# getCredentialsForChildCluster waits for).
token_secret() { kubectl -n "$ns" get sa "$sa" -o jsonpath='{.secrets[0].name}'; }
has_token() { [[ -n $(token_secret) ]] && [[ -n $(kubectl -n "$ns" get secret "$(token_secret)" -o jsonpath='{.data.token}') ]]; }
retry "$WAIT" has_token || fail "no token for $ns/$sa after ${WAIT}s (is the controller-manager running?)"
secret=$(token_secret)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
kubectl -n "$ns" get secret "$secret" -o jsonpath='{.data.token}' | base64 -d >"$dir/token"
kubectl -n "$ns" get secret "$secret" -o jsonpath='{.data.ca\.crt}' | base64 -d >"$dir/ca.crt"

kubectl --kubeconfig "$child" create namespace clusternet-system --dry-run=client -o yaml |
    kubectl --kubeconfig "$child" apply -f - >/dev/null
kubectl --kubeconfig "$child" -n clusternet-system create secret generic parent-cluster \
    --from-literal=apiserver-advertise-url="$url" --from-file=token="$dir/token" \
    --from-file=ca.crt="$dir/ca.crt" --from-literal=namespace="$ns" --dry-run=client -o yaml |
    kubectl --kubeconfig "$child" label -f - --local -o yaml \
        clusters.clusternet.io/bootstrapping=credentials-auto \
        "clusters.clusternet.io/cluster-id=$id" "clusters.clusternet.io/cluster-name=$name" |
    kubectl --kubeconfig "$child" apply -f - >/dev/null
echo "$ns"
