#!/usr/bin/env python3
"""Measure EndpointSlice change -> iptables rule, for kube-proxies in network namespaces.

Driven by latency.sh, which brings up the cluster and the kube-proxies. Each
change flips the readiness of one pod through the status subresource (what a
kubelet's probe does). Times, all from this machine's monotonic clock:

  t_patch   the status PATCH returned (the pod changed in the API server)
  t_slice   a watch on the API server delivered the EndpointSlice with the
            pod's endpoint in its new readiness
  t_rule    the first `iptables-save -t nat` in a namespace whose DNAT
            targets for the Service show the change (polled continuously)

and reports t_rule - t_slice per namespace (p50/p99), plus the
controller-manager's share t_slice - t_patch.
"""
import argparse
import http.client
import json
import math
import os
import ssl
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse


def api(args):
    ctx = ssl.create_default_context(cafile=os.path.join(args.pki, "ca.crt"))
    ctx.load_cert_chain(os.path.join(args.pki, "admin.crt"), os.path.join(args.pki, "admin.key"))
    url = urllib.parse.urlsplit(args.apiserver)
    return http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=30)


def slice_ready(obj, ip):
    """Whether IP is a ready endpoint of the EndpointSlice (None: not in it)."""
    for ep in obj.get("endpoints") or []:
        if ip in ep.get("addresses", []):
            return (ep.get("conditions") or {}).get("ready", True) is not False
    return None


class SliceWatch(threading.Thread):
    """Watches the Service's EndpointSlices on the API server; keeps when the pod's readiness changed."""

    def __init__(self, args):
        super().__init__(daemon=True)
        self.args, self.cond, self.ready, self.since = args, threading.Condition(), None, 0.0

    def run(self):
        sel = urllib.parse.quote(f"kubernetes.io/service-name={self.args.service}")
        base = f"/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices?labelSelector={sel}"
        conn = api(self.args)
        conn.request("GET", base)
        listed = json.load(conn.getresponse())
        slices = {i["metadata"]["name"]: slice_ready(i, self.args.ip) for i in listed["items"]}
        self.update(slices)
        conn.request("GET", f"{base}&watch=1&resourceVersion={listed['metadata']['resourceVersion']}")
        resp = conn.getresponse()
        conn.sock.settimeout(None)
        for line in resp:
            now = time.monotonic()
            ev = json.loads(line)
            name = ev["object"]["metadata"]["name"]
            if ev["type"] == "DELETED":
                slices.pop(name, None)
            else:
                slices[name] = slice_ready(ev["object"], self.args.ip)
            self.update(slices, now)

    def update(self, slices, now=None):
        ready = any(v for v in slices.values())
        with self.cond:
            if ready != self.ready:
                self.ready, self.since = ready, now or time.monotonic()
                self.cond.notify_all()


class RulePoll(threading.Thread):
    """Polls iptables-save in a namespace; keeps when the DNAT target for the pod appeared or went."""

    def __init__(self, args, ns):
        super().__init__(daemon=True)
        self.args, self.ns = args, ns
        self.cond, self.present, self.since, self.polls, self.poll_time = threading.Condition(), None, 0.0, 0, 0.0
        self.target = f"{args.ip}:{args.port}"

    def present_now(self):
        out = subprocess.run(["ip", "netns", "exec", self.ns, "iptables-save", "-t", "nat"],
                             capture_output=True, text=True, check=True).stdout
        want = f"default/{self.args.service}"
        for line in out.splitlines():
            f = line.split()
            if "DNAT" in f and "--comment" in f and "--to-destination" in f:
                comment = f[f.index("--comment") + 1].strip('"')
                if comment == want and f[f.index("--to-destination") + 1] == self.target:
                    return True
        return False

    def run(self):
        while True:
            started = time.monotonic()
            present = self.present_now()
            self.polls += 1
            self.poll_time += time.monotonic() - started
            with self.cond:
                if present != self.present:
                    # The rule changed at most one poll before this poll started.
                    self.present, self.since = present, started
                    self.cond.notify_all()
            time.sleep(0.005)


def wait_state(obj, attr, want, timeout):
    deadline = time.monotonic() + timeout
    with obj.cond:
        while getattr(obj, attr) != want:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            obj.cond.wait(left)
        return obj.since


def patch_ready(args, ready):
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = "True" if ready else "False"
    body = {"status": {"conditions": [
        {"type": "Ready", "status": status, "lastTransitionTime": now},
        {"type": "ContainersReady", "status": status, "lastTransitionTime": now}]}}
    conn = api(args)
    # A strategic merge patch merges conditions by type.
    conn.request("PATCH", f"/api/v1/namespaces/default/pods/{args.pod}/status", json.dumps(body),
                 {"Content-Type": "application/strategic-merge-patch+json"})
    resp = conn.getresponse()
    resp.read()
    if resp.status != 200:
        sys.exit(f"latency: PATCH pod status: HTTP {resp.status}")
    return time.monotonic()


def pct(values, p):
    # nearest rank
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--changes", type=int, default=60)
    ap.add_argument("--apiserver", required=True)
    ap.add_argument("--pki", required=True)
    ap.add_argument("--pod", required=True)
    ap.add_argument("--ip", required=True)
    ap.add_argument("--port", default="8080")
    ap.add_argument("--service", default="servicegrid-demo-svc")
    # Each flip changes two EndpointSlices (both Services select the pod), so
    # kube-proxy syncs twice; its limiter (--iptables-min-sync-period 1 s,
    # burst 2) needs 2 s to be full again. With less, about a third of the
    # changes wait up to 1 s for it, on either path.
    ap.add_argument("--pause", type=float, default=2.2,
                    help="seconds between a change's last rule and the next change")
    ap.add_argument("--timeout", type=float, default=15)
    ap.add_argument("--csv", help="write one line per change here")
    ap.add_argument("ns", nargs="+", help="LABEL=NAMESPACE")
    args = ap.parse_args()

    watch = SliceWatch(args)
    watch.start()
    polls = {}
    for spec in args.ns:
        label, ns = spec.split("=", 1)
        polls[label] = RulePoll(args, ns)
        polls[label].start()
    # Start in agreement: the pod Ready everywhere.
    patch_ready(args, True)
    if wait_state(watch, "ready", True, args.timeout) is None:
        sys.exit("latency: the EndpointSlice never showed the pod ready")
    for label, poll in polls.items():
        if wait_state(poll, "present", True, args.timeout) is None:
            sys.exit(f"latency: {label}: no rule for {poll.target}")
    time.sleep(args.pause)

    rows, controller = {label: [] for label in polls}, []
    csv = open(args.csv, "w") if args.csv else None
    if csv:
        csv.write("change,ready,slice_after_patch_ms," + ",".join(f"{l}_rule_after_slice_ms" for l in polls) + "\n")
    for i in range(args.changes):
        ready = i % 2 == 1  # ready -> not ready -> ready ...
        t_patch = patch_ready(args, ready)
        t_slice = wait_state(watch, "ready", ready, args.timeout)
        if t_slice is None:
            sys.exit(f"latency: change {i}: the EndpointSlice did not follow")
        controller.append(t_slice - t_patch)
        line = [f"{i}", f"{ready}", f"{(t_slice - t_patch) * 1000:.1f}"]
        for label, poll in polls.items():
            t_rule = wait_state(poll, "present", ready, args.timeout)
            if t_rule is None:
                sys.exit(f"latency: change {i}: {label}'s rules did not follow within {args.timeout} s")
            rows[label].append(t_rule - t_slice)
            line.append(f"{(t_rule - t_slice) * 1000:.1f}")
        if csv:
            csv.write(",".join(line) + "\n")
        time.sleep(args.pause)

    ms = lambda v: f"{v * 1000:7.1f} ms"
    print(f"latency: {args.changes} changes (pod readiness flips), EndpointSlice event -> DNAT rule in iptables-save")
    for label, values in rows.items():
        poll = polls[label]
        print(f"  {label:<16} p50 {ms(pct(values, 50))}  p99 {ms(pct(values, 99))}  max {ms(max(values))}"
              f"  mean {ms(statistics.mean(values))}   (poll every {ms(poll.poll_time / poll.polls + 0.005).strip()})")
    print(f"  {'(controller)':<16} p50 {ms(pct(controller, 50))}  p99 {ms(pct(controller, 99))}"
          "  pod status PATCH -> EndpointSlice event, not included above")


if __name__ == "__main__":
    main()
