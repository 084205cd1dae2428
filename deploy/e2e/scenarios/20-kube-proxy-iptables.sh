# The real kube-proxy 1.20 in iptables mode, one per node in its own network
# namespace, talking to that node's sitegrid-proxy: the DNAT rules of a
# topologyKeys Service name only the node's site's pods, a plain Service keeps
# all of them, and the rules follow a pod joining and leaving a site. Once with
# kube-proxy watching EndpointSlices v1beta1, once watching Endpoints; in
# protobuf both times, as kube-proxy asks.
# shellcheck shell=bash
BJ_PORT=25211 GZ_PORT=25212
start_proxy bj-1 $BJ_PORT
start_proxy gz-2 $GZ_PORT

BEIJING="10.0.0.70:8080 10.0.1.72:8080"
GUANGZHOU="10.0.0.139:8080 10.0.1.8:8080"
PLAIN="10.0.0.81:8080 10.0.1.33:8080"
EVENTS='requests_total{verb="passthrough",resource="events",code="201"}'

# json_answers PORT VERB KIND: the JSON answers of VERB on KIND the proxy at PORT gave.
json_answers() {
    proxy_metric "$1" "cached_responses_total{verb=\"$2\",resource=\"$3\",content_type=\"application/json\"}"
}

# kube-proxy's "Starting kube-proxy." events for NODE in the API server.
starting_events() {
    kubectl get events -n default -o name \
        --field-selector "source=kube-proxy,involvedObject.name=$1,reason=Starting" | wc -l
}

for slices in true false; do
    round="EndpointSliceProxying=$slices"
    if [[ $slices == true ]]; then watched=endpointslices; else watched=endpoints; fi
    events_before=$(starting_events bj-1) passed_before=$(proxy_metric $BJ_PORT "$EVENTS")
    declare -A json_before=()
    for port in $BJ_PORT $GZ_PORT; do
        for kind in $watched services; do
            for verb in list watch; do
                json_before[$port/$kind/$verb]=$(json_answers "$port" "$verb" "$kind")
            done
        done
    done
    start_kube_proxy bj-1 $BJ_PORT "$round"
    start_kube_proxy gz-2 $GZ_PORT "$round"

    expect_within 10 "$round: bj-1 DNAT servicegrid-demo-svc" "$BEIJING" dnat_targets sg-bj-1 servicegrid-demo-svc
    expect_within 10 "$round: gz-2 DNAT servicegrid-demo-svc" "$GUANGZHOU" dnat_targets sg-gz-2 servicegrid-demo-svc
    expect_within 10 "$round: bj-1 DNAT plain-echo" "$PLAIN" dnat_targets sg-bj-1 plain-echo
    expect_within 10 "$round: gz-2 DNAT plain-echo" "$PLAIN" dnat_targets sg-gz-2 plain-echo

    # kube-proxy's watches are served by the proxy (on the kind the gate picks),
    # and its start-up event reached the API server through it.
    for port in $BJ_PORT $GZ_PORT; do
        expect_within 10 "$round: :$port watches on $watched" 1 proxy_metric "$port" "watchers_open{resource=\"$watched\"}"
        expect_within 10 "$round: :$port watches on services" 1 proxy_metric "$port" 'watchers_open{resource="services"}'
    done
    # kube-proxy asks for protobuf (Accept: application/vnd.kubernetes.protobuf, */*)
    # and gets it for its lists and watches; nothing it reads is JSON (the
    # harness's own checks are: counted before kube-proxy started).
    for port in $BJ_PORT $GZ_PORT; do
        for kind in $watched services; do
            for verb in list watch; do
                ct=application/vnd.kubernetes.protobuf
                [[ $verb == watch ]] && ct="$ct;stream=watch"
                retry 10 more_than 0 proxy_metric "$port" "cached_responses_total{verb=\"$verb\",resource=\"$kind\",content_type=\"$ct\"}" ||
                    fail "$round: :$port sent kube-proxy no protobuf $verb of $kind"
                expect "$round: :$port JSON ${verb}s of $kind" \
                    "$(json_answers "$port" "$verb" "$kind")" "${json_before[$port/$kind/$verb]}"
            done
        done
    done
    retry 10 more_than "$passed_before" proxy_metric $BJ_PORT "$EVENTS" || fail "$round: no event passed through bj-1's proxy"
    retry 10 more_than "$events_before" starting_events bj-1 || fail "$round: no new Starting event of bj-1's kube-proxy"

    # A pod of both Services joins beijing: bj-1's rules gain it within seconds,
    # gz-2's only for the unfiltered plain-echo; then it leaves.
    add_ready_pod echoserver-bj-2 bj-2 10.0.0.71 "{appGrid: echo, app: plain}"
    expect_within 10 "$round: bj-1 after bj-2's pod joined" "10.0.0.70:8080 10.0.0.71:8080 10.0.1.72:8080" \
        dnat_targets sg-bj-1 servicegrid-demo-svc
    expect_within 10 "$round: gz-2 plain-echo after bj-2's pod joined" \
        "10.0.0.71:8080 10.0.0.81:8080 10.0.1.33:8080" dnat_targets sg-gz-2 plain-echo
    expect "$round: gz-2 after bj-2's pod joined" "$(dnat_targets sg-gz-2 servicegrid-demo-svc)" "$GUANGZHOU"
    delete_pod echoserver-bj-2
    expect_within 10 "$round: bj-1 after bj-2's pod left" "$BEIJING" dnat_targets sg-bj-1 servicegrid-demo-svc
    expect_within 10 "$round: gz-2 plain-echo after bj-2's pod left" "$PLAIN" dnat_targets sg-gz-2 plain-echo

    # kube-proxy gone: the proxies close its watches.
    stop_node bj-1
    stop_node gz-2
    for port in $BJ_PORT $GZ_PORT; do
        for kind in $watched services; do
            expect_within 10 "$round: :$port watches on $kind after kube-proxy stopped" 0 \
                proxy_metric "$port" "watchers_open{resource=\"$kind\"}"
        done
    done
done
