#!/usr/bin/env python3
"""Turns a run of loadtest/edge-link.sh into its figures: bytes from the
cloud to the site on each placement's link, per phase, per node and per
site, with the peak rate, beside OpenYurt's published figures; and a chart
(SVG) of the waves.

  report.py RUN_DIR MARKDOWN_OUT SVG_OUT
"""
import os
import sys

# Beijing: the sampled site, its nodes, and which nodes each link serves.
SITE_NODES = 3
PLACEMENTS = [
    # key, name, nodes behind the link
    ("A", "kube-proxy direct", 1),
    ("B", "a node proxy", 1),
    ("C", "node proxies behind a site proxy at the site", SITE_NODES),
    ("D", "node proxies behind a site proxy in the cloud", SITE_NODES),
    ("E", "node proxies behind a site proxy at the site, behind one in the cloud", SITE_NODES),
]
PHASES = [
    ("idle-before", "idle-before", "create", "idle (before)"),
    ("create", "create", "created", "create wave"),
    ("idle-loaded", "idle-loaded", "delete", "idle, loaded (every node's status once)"),
    ("delete", "delete", "deleted", "delete wave"),
]
# OpenYurt's YurtHub performance test (openyurt.io, versioned_docs v1.0-v1.6,
# test-report/yurthub-performance-test.md): per edge node, 100 nodes.
OPENYURT = {"idle-before": "15-20 KB/s (peak of a 5-min wave)", "create": "350 KB/s peak",
            "idle-loaded": "15-20 KB/s", "delete": "780 KB/s peak"}
PEAK_WINDOW = 5  # seconds


def samples(path):
    out = []
    with open(path) as f:
        for line in f:
            t, down, up = line.split()
            out.append((float(t), int(down), int(up)))
    return out


def at(series, t):
    """Bytes down relayed by time t (the last sample at or before it)."""
    best = series[0]
    for s in series:
        if s[0] <= t:
            best = s
        else:
            break
    return best


def peak(series, start, end):
    """The highest mean rate down over PEAK_WINDOW seconds within [start, end], bytes/s."""
    inside = [s for s in series if start <= s[0] <= end]
    best = 0.0
    for i, s in enumerate(inside):
        for later in inside[i + 1:]:
            if later[0] - s[0] >= PEAK_WINDOW:
                best = max(best, (later[1] - s[1]) / (later[0] - s[0]))
                break
    return best


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n}"


def main(run, md_out, svg_out):
    phases = {}
    with open(os.path.join(run, "phases")) as f:
        for line in f:
            name, t = line.split()
            phases[name] = float(t)
    # A run from before placement E has no relay-E.log.
    placements = [p for p in PLACEMENTS if os.path.exists(os.path.join(run, f"relay-{p[0]}.log"))]
    series = {k: samples(os.path.join(run, f"relay-{k}.log")) for k, _, _ in placements}
    rows, chart = [], {}
    for key, name, nodes in placements:
        s = series[key]
        cells = []
        for pid, start, end, _ in PHASES:
            t0, t1 = phases[start], phases[end]
            down = at(s, t1)[1] - at(s, t0)[1]
            secs = max(t1 - t0, 1e-9)
            per_node = down / nodes
            cells.append((down, per_node, secs, peak(s, t0, t1) / nodes))
            chart.setdefault(pid, {})[key] = per_node
        rows.append((key, name, nodes, cells))
    checks = open(os.path.join(run, "checks")).read()
    lost = checks.count("LOST")

    md = []
    md.append("| placement | link serves | " + " | ".join(p[3] for p in PHASES) + " |")
    md.append("|---|---|" + "---|" * len(PHASES))
    for key, name, nodes, cells in rows:
        parts = []
        for (down, per_node, secs, pk), (pid, *_rest) in zip(cells, PHASES):
            if pid.startswith("idle"):
                parts.append(f"{human(per_node / secs)}/s per node")
            else:
                parts.append(f"{human(per_node)} per node in {secs:.0f} s; peak {human(pk)}/s")
        md.append(f"| {key}: {name} | {nodes} node{'s' if nodes > 1 else ''} | " + " | ".join(parts) + " |")
    md.append("| OpenYurt (YurtHub, per node) | 1 node | " + " | ".join(OPENYURT[p[0]] for p in PHASES) + " |")
    md.append("")
    md.append("Per site (the link's whole bytes; A and B multiplied by the site's 3 nodes):")
    md.append("")
    md.append("| placement | " + " | ".join(p[3] for p in PHASES if not p[0].startswith("idle")) + " |")
    md.append("|---|" + "---|" * 2)
    for key, name, nodes, cells in rows:
        waves = [c for c, p in zip(cells, PHASES) if not p[0].startswith("idle")]
        md.append(f"| {key}: {name} | " + " | ".join(human(c[1] * SITE_NODES) for c in waves) + " |")
    md.append("")
    a_create, a_delete = rows[0][3][1][1], rows[0][3][3][1]
    md.append("Against kube-proxy direct, per node:")
    md.append("")
    for key, name, nodes, cells in rows[1:]:
        md.append(f"- {key}, {name}: create wave {cells[1][1] / a_create:.3f}×, delete wave {cells[3][1] / a_delete:.3f}×")
    md.append("")
    sizes_path = os.path.join(run, "sizes")
    if os.path.exists(sizes_path):
        size = {}
        for line in open(sizes_path):
            kind, where, n = line.split()
            size[(kind, where)] = int(n)
        md.append("What the create wave carries, as lists in protobuf once loaded: whole (the API server) and as "
                  "beijing's view (the site proxy):")
        md.append("")
        md.append("| | whole | beijing's view | share |")
        md.append("|---|---|---|---|")
        for kind in ("services", "endpointslices"):
            whole, view = size[(kind, "apiserver")], size[(kind, "site")]
            md.append(f"| {kind} | {human(whole)} | {human(view)} | {view / whole:.1%} |")
        whole = size[("services", "apiserver")] + size[("endpointslices", "apiserver")]
        view = size[("services", "site")] + size[("endpointslices", "site")]
        md.append(f"| both | {human(whole)} | {human(view)} | {view / whole:.1%} |")
        md.append("")
    node_proxies = 1 + (len(placements) - 2) * SITE_NODES
    md.append(f"Loss checks: {lost} lost ({checks.count('group ')} Service groups compared on 2 kube-proxies and {node_proxies} node proxies).")
    with open(md_out, "w") as f:
        f.write("\n".join(md) + "\n")
    svg(chart, svg_out)
    print("\n".join(md))


def svg(chart, path):
    """Bars: bytes per node for each wave, per placement (log scale)."""
    import math
    waves = [("create", "create wave"), ("delete", "delete wave")]
    colors = {k: c for k, c in {"A": "#888888", "B": "#4e79a7", "C": "#59a14f", "D": "#f28e2b", "E": "#b07aa1"}.items()
              if k in chart["create"]}
    width, height, left, bottom, top = 720, 360, 70, 50, 30
    values = [chart[w][k] for w, _ in waves for k in colors if chart[w][k] > 0]
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    def y(v):
        v = max(v, lo)
        return top + (height - top - bottom) * (1 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="DejaVu Sans, sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">Bytes from the cloud per node, beijing (3 nodes), by placement</text>']
    d = math.log10(lo)
    while d <= math.log10(hi) + 1e-9:
        v = 10 ** d
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{human(v)}</text>')
        d += 1
    group_w = (width - left - 20) / len(waves)
    bar_w = group_w / (len(colors) + 1)
    for gi, (w, label) in enumerate(waves):
        x0 = left + gi * group_w + bar_w / 2
        for ki, k in enumerate(colors):
            v = chart[w][k]
            x = x0 + ki * bar_w
            out.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{bar_w * 0.9:.1f}" height="{height - bottom - y(v):.1f}" fill="{colors[k]}"/>')
            out.append(f'<text x="{x + bar_w * 0.45:.1f}" y="{y(v) - 4:.1f}" text-anchor="middle" font-size="10">{human(v)}</text>')
        out.append(f'<text x="{x0 + bar_w * 2:.1f}" y="{height - bottom + 18}" text-anchor="middle">{label}</text>')
    names = {"A": "A direct", "B": "B node proxy", "C": "C site proxy at site", "D": "D site proxy in cloud",
             "E": "E C behind D"}
    for ki, k in enumerate(colors):
        out.append(f'<rect x="{left + ki * 128}" y="{height - 18}" width="10" height="10" fill="{colors[k]}"/>')
        out.append(f'<text x="{left + ki * 128 + 14}" y="{height - 9}">{names[k]}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
