#!/usr/bin/env python3
"""The DNAT targets kube-proxy (iptables mode) programs for Services, read from
`iptables-save -t nat` on stdin:

  dnat.py NAMESPACE/SERVICE...    one line per Service: its sorted targets

Past 1,000 endpoints kube-proxy drops the comments from its per-endpoint
rules (its "large cluster mode"), so a Service is followed from its
KUBE-SERVICES rule (comment "NS/NAME cluster IP") to its KUBE-SVC chain and
that chain's KUBE-SEP chains, whose DNAT rules carry the targets.
"""
import re
import sys

svc_chain, sep_chains, sep_target = {}, {}, {}
for line in sys.stdin:
    if not line.startswith("-A "):
        continue
    chain = line.split()[1]
    jump = re.search(r" -j (KUBE-(?:SVC|SEP)-\w+)", line)
    comment = re.search(r'--comment "?([^" ]+)(?: cluster IP)?"?', line)
    if chain == "KUBE-SERVICES" and jump and jump.group(1).startswith("KUBE-SVC-") and " cluster IP" in line:
        svc_chain[comment.group(1)] = jump.group(1)
    elif chain.startswith("KUBE-SVC-") and jump and jump.group(1).startswith("KUBE-SEP-"):
        sep_chains.setdefault(chain, []).append(jump.group(1))
    elif chain.startswith("KUBE-SEP-"):
        target = re.search(r"--to-destination (\S+)", line)
        if target:
            sep_target[chain] = target.group(1)

for name in sys.argv[1:]:
    chain = svc_chain.get(name)
    targets = sorted(sep_target[s] for s in sep_chains.get(chain, []) if s in sep_target)
    print(" ".join(targets))
