#!/usr/bin/env python3
"""Measure pod address change in the API server -> new answer from a DNS server
reading sitegrid-dnsd's hosts file. Driven by dnsd-figures.sh.

Each change writes a new address into the pod's status through the status
subresource (as a kubelet would). Times, from this machine's monotonic clock:

  t_api   the status PATCH returned (the change is in the API server)
  t_dns   the first answer for NAME from the DNS server (queried over UDP
          every millisecond) that is exactly the new address

and reports t_dns - t_api (p50/p99/max) over the changes.
"""
import argparse
import http.client
import json
import os
import random
import socket
import ssl
import statistics
import struct
import sys
import time
import urllib.parse


def api(args):
    ctx = ssl.create_default_context(cafile=os.path.join(args.pki, "ca.crt"))
    ctx.load_cert_chain(os.path.join(args.pki, "admin.crt"), os.path.join(args.pki, "admin.key"))
    url = urllib.parse.urlsplit(args.apiserver)
    return http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=30)


def query(name):
    qid = random.randrange(65536)
    head = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    qname = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    return qid, head + qname + struct.pack(">HH", 1, 1)


def skip_name(msg, i):
    while True:
        n = msg[i]
        if n == 0:
            return i + 1
        if n & 0xC0 == 0xC0:
            return i + 2
        i += n + 1


def answers(msg, qid):
    """The A records of a response to qid (None if it is not that response)."""
    rid, _flags, qd, an, _ns, _ar = struct.unpack(">HHHHHH", msg[:12])
    if rid != qid:
        return None
    i = 12
    for _ in range(qd):
        i = skip_name(msg, i) + 4
    out = []
    for _ in range(an):
        i = skip_name(msg, i)
        rtype, _cls, _ttl, rdlen = struct.unpack(">HHIH", msg[i:i + 10])
        i += 10
        if rtype == 1 and rdlen == 4:
            out.append(socket.inet_ntoa(msg[i:i + 4]))
        i += rdlen
    return sorted(out)


def resolve(sock, name):
    qid, packet = query(name)
    sock.send(packet)
    while True:
        try:
            got = answers(sock.recv(4096), qid)
        except socket.timeout:
            return None
        if got is not None:
            return got


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s)) - 1))]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--apiserver", required=True)
    p.add_argument("--pki", required=True)
    p.add_argument("--pod", required=True, help="pod in namespace default whose address changes")
    p.add_argument("--name", required=True, help="the DNS name that must follow it")
    p.add_argument("--dns-port", type=int, required=True)
    p.add_argument("--changes", type=int, default=100)
    p.add_argument("--pause", type=float, default=0.2, help="seconds between changes")
    p.add_argument("--timeout", type=float, default=10.0, help="give up on one change after this")
    p.add_argument("--csv")
    args = p.parse_args()

    conn = api(args)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(("127.0.0.1", args.dns_port))
    sock.settimeout(0.5)
    path = f"/api/v1/namespaces/default/pods/{args.pod}/status"
    times = []
    for k in range(args.changes):
        ip = f"10.0.7.{k % 250 + 1}"
        body = json.dumps({"status": {"podIP": ip, "podIPs": [{"ip": ip}]}})
        conn.request("PATCH", path, body, {"Content-Type": "application/merge-patch+json"})
        resp = conn.getresponse()
        resp.read()
        t_api = time.monotonic()
        if resp.status != 200:
            sys.exit(f"PATCH {path}: HTTP {resp.status}")
        deadline = t_api + args.timeout
        while resolve(sock, args.name) != [ip]:
            if time.monotonic() > deadline:
                sys.exit(f"change {k}: {args.name} never answered {ip}")
            time.sleep(0.001)
        times.append(time.monotonic() - t_api)
        time.sleep(args.pause)
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("change,seconds\n")
            f.writelines(f"{k},{t:.6f}\n" for k, t in enumerate(times))
    ms = [t * 1000 for t in times]
    print(f"{len(ms)} changes: p50 {percentile(ms, 50):.1f} ms, p99 {percentile(ms, 99):.1f} ms, "
          f"max {max(ms):.1f} ms, mean {statistics.mean(ms):.1f} ms")


if __name__ == "__main__":
    main()
