"""What deploy/monitoring/check.sh checks, where Python reads it better than bash.

    monitoring.py rule-crd              the PrometheusRule wrapping alerts.yaml, on stdout
    monitoring.py test-coverage         every alert has a firing and a quiet case in alerts.test.yaml
    monitoring.py manifests FILE        the PodMonitors in FILE (kubectl kustomize output) match
                                        the pods, ports and addresses of the workloads in it
    monitoring.py evaluate URL SECONDS  every query of the dashboard returns data from the
                                        Prometheus at URL, retried for up to SECONDS; its rules
                                        are loaded and healthy; every metric they name exists

Needs python3 with PyYAML (Debian's python3-yaml). Exits non-zero, saying
what is wrong, on the first check that fails.
"""

import json
import math
import re
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ALERTS = HERE / "alerts.yaml"
TESTS = HERE / "alerts.test.yaml"
DASHBOARD = HERE / "grafana-dashboard.json"

# What Grafana substitutes before a query reaches Prometheus: every node,
# and a rate window wide enough for a few scrapes (check.sh scrapes every second).
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$node": ".*"}

# Metrics only a multi-cluster control cluster exports (its managed clusters'
# heartbeat Leases): the in-memory API server serves no Leases, so the
# scenario has no managed cluster. Their panels and alerts are exempt from
# "returns data" and "was scraped"; promtool's unit tests cover the alert.
MULTI_CLUSTER_ONLY = {"sitegrid_controller_cluster_reachable"}


def multi_cluster_only(expr):
    return any(name in expr for name in MULTI_CLUSTER_ONLY)

CRD_HEADER = """\
# Generated from deploy/monitoring/alerts.yaml by `deploy/monitoring/check.sh --write`:
# edit that file, not this one (check.sh fails when they differ).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: sitegrid
  namespace: kube-system
  labels:
    app.kubernetes.io/part-of: sitegrid
spec:
"""


def fail(message):
    print(f"monitoring.py: {message}", file=sys.stderr)
    sys.exit(1)


def alert_names():
    rules = yaml.safe_load(ALERTS.read_text())
    return [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]


# === rule-crd ===


def rule_crd():
    """alerts.yaml below its opening comment, indented under `spec:`."""
    lines = ALERTS.read_text().splitlines()
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    body = "\n".join(("  " + line) if line.strip() else "" for line in lines)
    text = CRD_HEADER + body + "\n"
    crd = yaml.safe_load(text)
    if crd["spec"] != yaml.safe_load(ALERTS.read_text()):
        fail("the PrometheusRule's spec does not read back as alerts.yaml")
    sys.stdout.write(text)


# === test-coverage ===


def test_coverage():
    tests = yaml.safe_load(TESTS.read_text())
    firing, quiet = set(), set()
    for test in tests.get("tests", []):
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = alert_names()
    problems = []
    for name in names:
        if name not in firing:
            problems.append(f"{name}: no case where it fires")
        if name not in quiet:
            problems.append(f"{name}: no case where it stays quiet")
    for name in sorted((firing | quiet) - set(names)):
        problems.append(f"{name}: tested but not in alerts.yaml")
    if problems:
        fail("alerts.test.yaml:\n  " + "\n  ".join(problems))
    print(f"alerts.test.yaml: each of the {len(names)} alerts fires in a case and stays quiet in another")


# === manifests ===


def containers_args(pod_spec):
    for c in pod_spec.get("containers", []):
        yield c, c.get("args", [])


def flag(args, name):
    for a in args:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def manifests(path):
    docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
    workloads = [d for d in docs if d["kind"] in ("DaemonSet", "Deployment")]
    monitors = [d for d in docs if d["kind"] == "PodMonitor"]
    if not any(d["kind"] == "PrometheusRule" for d in docs):
        fail(f"{path}: no PrometheusRule")
    if len(monitors) != 3:
        fail(f"{path}: {len(monitors)} PodMonitors, expected one per binary (3)")
    for pm in monitors:
        name, spec = pm["metadata"]["name"], pm["spec"]
        want = spec["selector"]["matchLabels"]
        ns = pm["metadata"].get("namespace")
        matched = [
            w for w in workloads
            if w["metadata"].get("namespace") == ns
            and want.items() <= w["spec"]["template"]["metadata"].get("labels", {}).items()
        ]
        if len(matched) != 1:
            fail(f"PodMonitor {name} selects {len(matched)} workloads' pods in {ns}, expected 1")
        workload = matched[0]
        template = workload["spec"]["template"]
        labels = template["metadata"]["labels"]
        if spec.get("jobLabel") and labels.get(spec["jobLabel"]) != name:
            fail(f"PodMonitor {name}: the pods' label {spec['jobLabel']} is "
                 f"{labels.get(spec['jobLabel'])!r}, the alerts expect job {name!r}")
        for endpoint in spec["podMetricsEndpoints"]:
            check_endpoint(name, endpoint["port"], template["spec"])
        print(f"PodMonitor {name}: selects {workload['kind']} {workload['metadata']['name']}, "
              f"port {', '.join(e['port'] for e in spec['podMetricsEndpoints'])}")


def check_endpoint(monitor, port_name, pod_spec):
    """The named port exists and the binary listens on it on every address."""
    for container, args in containers_args(pod_spec):
        for port in container.get("ports", []):
            if port.get("name") != port_name:
                continue
            number = port["containerPort"]
            # The proxy serves /metrics on --metrics-bind-address; the
            # controller and dnsd on --bind-address.
            address = flag(args, "--metrics-bind-address") or flag(args, "--bind-address")
            if address != f"0.0.0.0:{number}":
                fail(f"PodMonitor {monitor}: port {port_name} is {number}, but the container "
                     f"listens for /metrics on {address}: Prometheus cannot reach it")
            return
    fail(f"PodMonitor {monitor}: the pods have no port named {port_name}")


# === evaluate ===


def get(url, path, params):
    query = urllib.parse.urlencode(params, doseq=True)
    with urllib.request.urlopen(f"{url}{path}?{query}", timeout=10) as resp:
        body = json.load(resp)
    if body.get("status") != "success":
        fail(f"{path} {params}: {body}")
    return body["data"]


def substitute(expr):
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def dashboard_queries():
    """(where, PromQL) for every target of every panel, variables substituted."""
    dash = json.loads(DASHBOARD.read_text())
    out = []
    row = ""
    for panel in dash["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
            continue
        for target in panel.get("targets", []):
            legend = target.get("legendFormat") or target["refId"]
            out.append((f"{row} / {panel['title']} / {legend}", substitute(target["expr"])))
    return dash, out


def has_data(result):
    """At least one series, and not every value NaN (a quantile of no requests)."""
    return any(not math.isnan(float(r["value"][1])) for r in result)


def evaluate(url, seconds):
    dash, queries = dashboard_queries()
    deadline = time.monotonic() + float(seconds)
    while True:
        results = {q: get(url, "/api/v1/query", {"query": q})["result"] for _, q in queries}
        empty = [(where, q) for where, q in queries
                 if not has_data(results[q]) and not multi_cluster_only(q)]
        if not empty or time.monotonic() > deadline:
            break
        time.sleep(1)
    for where, q in queries:
        r = results[q]
        shown = ", ".join(sorted({r0["value"][1] for r0 in r})[:3])
        state = "ok   " if has_data(r) else "skip " if multi_cluster_only(q) else "EMPTY"
        print(f"  {state} {len(r):3} series  {where}  [{shown}]")
    if empty:
        fail("dashboard queries without data:\n  " + "\n  ".join(f"{w}: {q}" for w, q in empty))
    skipped = sum(1 for _, q in queries if multi_cluster_only(q))
    print(f"dashboard: all {len(queries) - skipped} panel queries return data "
          f"({skipped} multi-cluster only, not checked here)")
    check_variables(url, dash)
    check_rules(url)


def check_variables(url, dash):
    for var in dash["templating"]["list"]:
        if var["type"] != "query":
            continue
        m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", var["definition"])
        if not m:
            fail(f"variable {var['name']}: cannot evaluate {var['definition']}")
        values = get(url, f"/api/v1/label/{m[2]}/values", {"match[]": m[1]})
        if not values:
            fail(f"variable {var['name']}: {var['definition']} has no values")
        print(f"dashboard: variable {var['name']} = {values}")


def check_rules(url):
    names = alert_names()
    loaded = [r for g in get(url, "/api/v1/rules", {})["groups"] for r in g["rules"]]
    sick = [f"{r['name']}: {r.get('health')} {r.get('lastError', '')}" for r in loaded
            if r.get("health") != "ok"]
    if sorted(r["name"] for r in loaded) != sorted(names) or sick:
        fail(f"Prometheus' rules are not alerts.yaml's, all healthy: {sick or [r['name'] for r in loaded]}")
    exported = set(get(url, "/api/v1/label/__name__/values", {}))
    exprs = " ".join(r["expr"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"])
    named = set(re.findall(r"\b(sitegrid_[a-z0-9_]+|up)\b", exprs))
    missing = sorted(named - exported - MULTI_CLUSTER_ONLY)
    if missing:
        fail(f"alerts.yaml names metrics no binary exported here: {', '.join(missing)}")
    states = [f"{r['name']}={r['state']}" for r in loaded if r["state"] != "inactive"]
    print(f"alerts: {len(loaded)} rules loaded and evaluated without error; the {len(named)} "
          f"metrics they name were scraped; not inactive: {', '.join(states) or 'none'}")


def main(argv):
    if argv[:1] == ["rule-crd"]:
        rule_crd()
    elif argv[:1] == ["test-coverage"]:
        test_coverage()
    elif argv[:1] == ["manifests"] and len(argv) == 2:
        manifests(argv[1])
    elif argv[:1] == ["evaluate"] and len(argv) == 3:
        evaluate(argv[1], argv[2])
    else:
        fail(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
