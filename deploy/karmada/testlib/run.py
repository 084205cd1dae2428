#!/usr/bin/env python3
"""Runs the test cases of deploy/karmada against the luaScripts of
resourceinterpretercustomizations.yaml with Debian's lua5.1 (testlib/vm.lua).

    python3 testlib/run.py [LUA]        # LUA defaults to lua5.1; test.sh calls this

Test cases: testdata/<dir>/*-test.yaml, one YAML document per case, in the
shape of Karmada's own (pkg/resourceinterpreter/default/thirdparty): name,
description, operation, desiredObj / observedObj / statusItems, output.

  operation          hook                  arguments                  output keys
  InterpretReplica   replicaResource       desiredObj                 replica, requires
  InterpretStatus    statusReflection      observedObj                status
  AggregateStatus    statusAggregation     desiredObj, statusItems    status (*)
  InterpretHealth    healthInterpretation  observedObj                healthy

(*) the status of the object AggregateStatus returns; the rest of that object
must equal desiredObj (as Karmada's conversions leave it). statusItems are
AggregatedStatusItems: clusterName, status, applied, appliedMessage, health.

The customization is chosen by the kind of desiredObj / observedObj. A case
with `mustFail: <why>` must fail (testdata/selftest: the checks can fail).
"Now" is NOW below. What Karmada does around the Lua is emulated here:
arguments go through JSON (null -> nil; {} and [] -> empty table), results
come back through gopher-json (vm.lua) and, for ReflectStatus and
AggregateStatus, through ConvertLuaResultInto without references, which turns
a top-level [] into {} and deletes every other empty [] (Lua cannot tell an
empty object from an empty array).
"""

import calendar
import difflib
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CUSTOMIZATIONS = os.path.join(ROOT, "resourceinterpretercustomizations.yaml")
NOW = "2026-11-23T12:00:00Z"
NOW_UNIX = calendar.timegm((2026, 11, 23, 12, 0, 0))

OPERATIONS = {
    # operation: (hook, function, arguments, number of results)
    "InterpretReplica": ("replicaResource", "GetReplicas", ["desiredObj"], 2),
    "InterpretStatus": ("statusReflection", "ReflectStatus", ["observedObj"], 1),
    "AggregateStatus": ("statusAggregation", "AggregateStatus", ["desiredObj", "statusItems"], 1),
    "InterpretHealth": ("healthInterpretation", "InterpretHealth", ["observedObj"], 1),
    "ReviseReplica": ("replicaRevision", "ReviseReplica", ["desiredObj", "inputReplicas"], 1),
    "Retain": ("retention", "Retain", ["desiredObj", "observedObj"], 1),
}
HOOK_FUNCTIONS = {hook: fn for hook, fn, _, _ in OPERATIONS.values()}
HOOK_FUNCTIONS["dependencyInterpretation"] = "GetDependencies"
HOOK_FUNCTIONS["componentResource"] = "GetComponents"

# The hooks each kind ships (README.md says why: no replicaRevision, no retention).
GRID_HOOKS = {"replicaResource", "statusReflection", "statusAggregation", "healthInterpretation"}
EXPECTED_HOOKS = {
    "DeploymentGrid": GRID_HOOKS,
    "StatefulSetGrid": GRID_HOOKS,
    "ServiceGrid": {"statusReflection", "statusAggregation", "healthInterpretation"},
}


class Loader(yaml.SafeLoader):
    """YAML as Kubernetes reads it: timestamps stay strings."""


Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class CaseError(Exception):
    pass


# ------------------------------------------------------------------ Lua values

def lua_string(s):
    out = ['"']
    for byte in s.encode("utf-8"):
        ch = chr(byte)
        if 0x20 <= byte < 0x7F and ch not in '"\\':
            out.append(ch)
        else:
            out.append("\\%03d" % byte)
    out.append('"')
    return "".join(out)


def lua_literal(v):
    """A JSON value as Karmada's VM sees it (null -> nil)."""
    if v is None:
        return "nil"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            raise CaseError("non-finite number in the input")
        return repr(v)
    if isinstance(v, str):
        return lua_string(v)
    if isinstance(v, list):
        if any(x is None for x in v):
            raise CaseError("null in a list: Karmada's decoding would leave a hole")
        return "{" + ",".join(lua_literal(x) for x in v) + "}"
    if isinstance(v, dict):
        return "{" + ",".join(
            "[%s]=%s" % (lua_string(str(k)), lua_literal(x)) for k, x in v.items() if x is not None
        ) + "}"
    raise CaseError("cannot pass %r to Lua" % (v,))


def through_lua(v):
    """What a JSON value looks like after a trip through a Lua table and
    gopher-json, untouched by the script: null gone, {} and [] -> []."""
    if isinstance(v, dict):
        if not v:
            return []
        return {k: through_lua(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [through_lua(x) for x in v]
    return v


def drop_empty(v):
    """ConvertLuaResultInto with no references: every nested [] deleted."""
    if isinstance(v, dict):
        return {k: drop_empty(x) for k, x in v.items() if x != []}
    if isinstance(v, list):
        return [drop_empty(x) for x in v if x != []]
    return v


def into_struct(v):
    """ConvertLuaResultInto(table, &struct) (Unstructured, RawExtension)."""
    if v == []:
        return {}
    if not isinstance(v, dict):
        raise CaseError("the result is a JSON array, not an object: %s" % json.dumps(v))
    return drop_empty(v)


def marshal_status_items(items):
    """[]AggregatedStatusItem through encoding/json (omitempty fields)."""
    if items is None:
        return None
    out = []
    for item in items:
        unknown = set(item) - {"clusterName", "status", "applied", "appliedMessage", "health"}
        if unknown:
            raise CaseError("statusItems: unknown field(s) %s" % ", ".join(sorted(unknown)))
        if item.get("health") not in (None, "", "Healthy", "Unhealthy", "Unknown"):
            raise CaseError("statusItems: health must be Healthy, Unhealthy or Unknown")
        m = {"clusterName": item.get("clusterName", "")}
        if item.get("status") is not None:
            m["status"] = item["status"]
        if item.get("applied"):
            m["applied"] = True
        if item.get("appliedMessage"):
            m["appliedMessage"] = item["appliedMessage"]
        if item.get("health"):
            m["health"] = item["health"]
        out.append(m)
    return out


# ------------------------------------------------------------------ customizations

def load_customizations():
    problems = []
    by_kind = {}
    with open(CUSTOMIZATIONS) as f:
        docs = [d for d in yaml.load_all(f, Loader=Loader) if d is not None]
    for d in docs:
        where = "%s/%s" % (d.get("kind"), (d.get("metadata") or {}).get("name"))
        if d.get("apiVersion") != "config.karmada.io/v1alpha1" or d.get("kind") != "ResourceInterpreterCustomization":
            problems.append("%s: not a config.karmada.io/v1alpha1 ResourceInterpreterCustomization" % where)
            continue
        spec = d.get("spec") or {}
        target = spec.get("target") or {}
        if target.get("apiVersion") != "superedge.io/v1":
            problems.append("%s: target.apiVersion is %r, not superedge.io/v1" % (where, target.get("apiVersion")))
        kind = target.get("kind")
        if kind in by_kind:
            problems.append("%s: a second customization for %s" % (where, kind))
        hooks = {}
        for hook, body in (spec.get("customizations") or {}).items():
            script = (body or {}).get("luaScript")
            if hook not in HOOK_FUNCTIONS:
                problems.append("%s: unknown hook %s" % (where, hook))
            elif not isinstance(script, str) or not script.strip():
                problems.append("%s: %s has no luaScript" % (where, hook))
            elif not re.search(r"^\s*function\s+%s\s*\(" % HOOK_FUNCTIONS[hook], script, re.M):
                problems.append("%s: %s does not define function %s" % (where, hook, HOOK_FUNCTIONS[hook]))
            else:
                hooks[hook] = script
        by_kind[kind] = hooks
    for kind, expected in EXPECTED_HOOKS.items():
        got = set(by_kind.get(kind, {}))
        if got != expected:
            problems.append("%s: hooks %s, expected %s" % (kind, sorted(got), sorted(expected)))
    for kind in set(by_kind) - set(EXPECTED_HOOKS):
        problems.append("unexpected customization for %s" % kind)
    dg, ss = by_kind.get("DeploymentGrid", {}), by_kind.get("StatefulSetGrid", {})
    for hook in sorted(GRID_HOOKS):
        if hook in dg and hook in ss and dg[hook] != ss[hook]:
            problems.append("%s: the DeploymentGrid and StatefulSetGrid scripts differ (they must be the same text)" % hook)
    return by_kind, problems


# ------------------------------------------------------------------ running

def run_lua(lua, script, function, args, nret, tmp):
    script_file = os.path.join(tmp, "script.lua")
    args_file = os.path.join(tmp, "args.lua")
    with open(script_file, "w") as f:
        f.write(script)
    with open(args_file, "w") as f:
        f.write("return {n=%d,%s}\n" % (len(args), ",".join(lua_literal(a) for a in args)))
    p = subprocess.run(
        [lua, os.path.join(HERE, "vm.lua"), script_file, function, args_file, str(nret), str(NOW_UNIX)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
    )
    if p.returncode != 0:
        raise CaseError("lua: " + (p.stderr.strip() or "exit status %d" % p.returncode))
    return json.loads(p.stdout)


def pretty(v):
    return json.dumps(v, indent=2, sort_keys=True, ensure_ascii=False)


def compare(label, expected, actual):
    if expected == actual and pretty(expected) == pretty(actual):
        return []
    diff = difflib.unified_diff(
        pretty(expected).splitlines(), pretty(actual).splitlines(),
        "expected " + label, "actual " + label, lineterm="",
    )
    return ["%s differs:" % label] + ["    " + line for line in diff]


def object_kind(case):
    for key in ("desiredObj", "observedObj"):
        obj = case.get(key)
        if isinstance(obj, dict) and obj.get("kind"):
            if obj.get("apiVersion") != "superedge.io/v1":
                raise CaseError("%s.apiVersion is %r" % (key, obj.get("apiVersion")))
            return obj["kind"]
    raise CaseError("no desiredObj or observedObj with a kind")


def run_case(lua, by_kind, case, covered, tmp):
    """Returns a list of failure lines (empty: passed)."""
    unknown = set(case) - {"name", "description", "operation", "desiredObj", "observedObj",
                           "statusItems", "inputReplicas", "output", "mustFail"}
    if unknown:
        raise CaseError("unknown field(s) %s" % ", ".join(sorted(unknown)))
    op = case.get("operation")
    if op not in OPERATIONS:
        raise CaseError("unknown operation %r" % (op,))
    hook, function, arg_names, nret = OPERATIONS[op]
    kind = object_kind(case)
    if kind not in by_kind:
        raise CaseError("no customization for %s" % kind)
    script = by_kind[kind].get(hook)
    if script is None:
        raise CaseError("%s has no %s hook (operation %s)" % (kind, hook, op))
    covered.add((kind, hook))
    output = case.get("output")
    if not isinstance(output, dict) or not output:
        raise CaseError("no output")

    args = []
    for name in arg_names:
        if name == "statusItems":
            args.append(marshal_status_items(case.get("statusItems")))
        else:
            args.append(case.get(name))
    results = run_lua(lua, script, function, args, nret, tmp)

    failures = []
    if op == "InterpretReplica":
        allowed = {"replica", "requires"}
        replica, requires = results
        if not isinstance(replica, (int, float)) or isinstance(replica, bool):
            raise CaseError("GetReplicas: the first result is %s, not a number" % json.dumps(replica))
        if requires is not None and not isinstance(requires, (dict, list)):
            raise CaseError("GetReplicas: the second result is %s, not a table or nil" % json.dumps(requires))
        if requires is not None:
            requires = into_struct(requires)
        if "replica" not in output:
            raise CaseError("output.replica missing")
        failures += compare("replica", output["replica"], int(replica))
        if "requires" in output:
            failures += compare("requires", output["requires"], requires)
    elif op == "InterpretStatus":
        allowed = {"status"}
        (status,) = results
        if not isinstance(status, (dict, list)):
            raise CaseError("ReflectStatus returned %s, not a table" % json.dumps(status))
        failures += compare("status", output.get("status"), into_struct(status))
    elif op == "AggregateStatus":
        allowed = {"status"}
        (obj,) = results
        if not isinstance(obj, (dict, list)):
            raise CaseError("AggregateStatus returned %s, not a table" % json.dumps(obj))
        obj = into_struct(obj)
        if not obj.get("apiVersion") or not obj.get("kind"):
            raise CaseError("the returned object has no apiVersion or kind (Karmada cannot decode it)")
        if "status" not in output:
            raise CaseError("output.status missing")
        failures += compare("status", output["status"], obj.get("status"))
        rest = {k: v for k, v in obj.items() if k != "status"}
        desired = {k: v for k, v in (case.get("desiredObj") or {}).items() if k != "status"}
        failures += compare("object but status", into_struct(through_lua(desired)), rest)
    elif op == "InterpretHealth":
        allowed = {"healthy"}
        (healthy,) = results
        if not isinstance(healthy, bool):
            raise CaseError("InterpretHealth returned %s, not a boolean" % json.dumps(healthy))
        if "healthy" not in output:
            raise CaseError("output.healthy missing")
        failures += compare("healthy", output["healthy"], healthy)
    else:
        raise CaseError("operation %s is not checked by this runner" % op)
    extra = set(output) - allowed
    if extra:
        raise CaseError("output: unknown key(s) %s" % ", ".join(sorted(extra)))
    return failures


def main():
    lua = sys.argv[1] if len(sys.argv) > 1 else "lua5.1"
    by_kind, problems = load_customizations()
    passed = failed = 0
    for p in problems:
        print("FAIL customizations: " + p)
        failed += 1
    if not problems:
        print("ok   customizations: hooks as decided; DeploymentGrid and StatefulSetGrid scripts identical")
        passed += 1

    covered = set()
    files = sorted(glob.glob(os.path.join(ROOT, "testdata", "*", "*-test.yaml")))
    if not files:
        print("FAIL no test files under testdata/")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            rel = os.path.relpath(path, os.path.join(ROOT, "testdata"))
            with open(path) as f:
                cases = [c for c in yaml.load_all(f, Loader=Loader) if c is not None]
            for i, case in enumerate(cases, 1):
                label = "%s #%d: %s" % (rel, i, case.get("name", "(no name)"))
                must_fail = case.get("mustFail")
                broken = False
                try:
                    failures = run_case(lua, by_kind, case, set() if must_fail else covered, tmp)
                except CaseError as e:
                    failures, broken = [str(e)], True
                except subprocess.TimeoutExpired:
                    failures, broken = ["lua5.1 did not finish"], True
                if must_fail:
                    # It must run and differ from its output, not break.
                    if failures and not broken:
                        print("ok   %s (fails as it must: %s)" % (label, must_fail))
                        passed += 1
                    else:
                        why = "it passed" if not failures else "it broke: " + failures[0]
                        print("FAIL %s: must differ from its output (%s), but %s" % (label, must_fail, why))
                        failed += 1
                elif failures:
                    print("FAIL %s" % label)
                    for line in failures:
                        print("     " + line)
                    failed += 1
                else:
                    print("ok   %s" % label)
                    passed += 1

    for kind in sorted(by_kind):
        for hook in sorted(by_kind[kind]):
            if (kind, hook) not in covered:
                print("FAIL coverage: no test case runs %s's %s" % (kind, hook))
                failed += 1
    print("karmada: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
