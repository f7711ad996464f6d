#!/usr/bin/env python3
"""Tables and plot of the structured-sparsity runs of scripts/cifar_suite.sh
(standard library only).

Usage: scripts/group_tables.py RUNS [--svg FILE]

Reads RUNS/<name>/summary.json of the group runs (adam, proxgen-gl0-*,
proxgen-gl21-*, subgrad-gl21-*, prune-*) and RUNS/group-latency.jsonl (the
inference timings of their compacted models) and prints a Markdown table:
test accuracy, remaining channels, parameters and FLOPs, and the 1-thread
inference time of the compacted network at batch 1 and 64 against the dense
one. With --svg it draws test accuracy against remaining FLOPs and against
remaining parameters into FILE.
"""
import json
import os
import re
import statistics
import sys

from cifar_tables import parse_args


def load(runs, name):
    try:
        with open(os.path.join(runs, name, "summary.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def method_of(name):
    """(method label, regularizer, series key) of a run folder name."""
    if name == "adam":
        return "Adam (dense reference)", "-", "dense"
    m = re.match(r"(proxgen|proxgen15|subgrad)-(gl0|gl21)-", name)
    if m:
        label = {"proxgen": "ProxGen", "proxgen15": "ProxGen, 15 epochs", "subgrad": "subgradient (Adam)"}[m.group(1)]
        return label, m.group(2), "%s %s" % (label, m.group(2))
    m = re.match(r"prune-proxgen-(gl0|gl21)-", name)
    if m:
        return "magnitude pruning + fine-tuning", "FLOPs of ProxGen " + m.group(1), "magnitude pruning + FT"
    return name, "?", name


def order_key(name):
    kinds = ["adam", "proxgen-gl0", "prune-proxgen-gl0", "proxgen15-gl0", "proxgen-gl21", "prune-proxgen-gl21",
             "proxgen15-gl21", "subgrad-gl21"]
    for i, k in enumerate(kinds):
        if name == k or name.startswith(k + "-"):
            lam = re.findall(r"-([0-9.e+]+)$", name)
            return (i, float(lam[0]) if lam else 0)
    return (len(kinds), 0)


def runs_of(runs):
    names = []
    for name in os.listdir(runs):
        if os.path.isdir(os.path.join(runs, name)) and (
                name == "adam" or re.match(r"(proxgen|proxgen15|subgrad)-gl|prune-proxgen-gl", name)):
            if load(runs, name) is not None:
                names.append(name)
    return sorted(names, key=order_key)


def latencies(runs):
    """{(run, batch): [ms per batch, one per repeat]} from group-latency.jsonl."""
    out = {}
    try:
        with open(os.path.join(runs, "group-latency.jsonl")) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    out.setdefault((r["run"], r["batch"]), []).append(r["ms_per_batch"])
    except FileNotFoundError:
        pass
    return out


def rng(xs, fmt):
    if not xs:
        return "-"
    lo, hi = min(xs), max(xs)
    return (fmt % lo) if lo == hi else ((fmt + "–" + fmt) % (lo, hi))


COLORS = {"dense": "#000000", "ProxGen gl0": "#1f77b4", "ProxGen gl21": "#2ca02c",
          "ProxGen, 15 epochs gl0": "#9467bd", "ProxGen, 15 epochs gl21": "#8c564b",
          "subgradient (Adam) gl21": "#d62728", "magnitude pruning + FT": "#ff7f0e"}


def svg(runs, names, path):
    """Two panels: test accuracy against remaining FLOPs and parameters."""
    pts = {}
    for name in names:
        s = load(runs, name)
        _, _, key = method_of(name)
        pts.setdefault(key, []).append((100 * s["flops_ratio"], 100 * s["params_ratio"], 100 * s["test_acc"]))
    panels = [("remaining FLOPs %", 0), ("remaining parameters %", 1)]
    pw, ph, left, top = 300, 220, 50, 30
    width = left + len(panels) * (pw + left) + 220
    height = top + ph + 50
    accs = [p[2] for v in pts.values() for p in v]
    lo, hi = 10 * int(min(accs) // 10), 10 * int(max(accs) // 10 + 1)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (width, height),
           '<rect width="100%" height="100%" fill="white"/>']
    for k, (title, idx) in enumerate(panels):
        x0 = left + k * (pw + left)
        fx = lambda v: x0 + pw * v / 100
        fy = lambda v: top + ph - ph * (v - lo) / (hi - lo)
        out.append('<text x="%d" y="%d" font-weight="bold">test accuracy %% against %s</text>' % (x0, top - 10, title))
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>' % (x0, top, pw, ph))
        for v in range(lo, hi + 1, 10):
            out.append('<text x="%d" y="%.1f" text-anchor="end">%d</text>' % (x0 - 4, fy(v) + 4, v))
        for t in range(5):
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (fx(25 * t), top + ph + 14, 25 * t))
        out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % (x0 + pw // 2, top + ph + 30, title))
        for key, ps in pts.items():
            color = COLORS.get(key, "#7f7f7f")
            ps = sorted(ps, key=lambda p: p[idx])
            if len(ps) > 1:
                out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="1"/>'
                           % (" ".join("%.1f,%.1f" % (fx(p[idx]), fy(p[2])) for p in ps), color))
            for p in ps:
                out.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (fx(p[idx]), fy(p[2]), color))
    lx = left + len(panels) * (pw + left)
    for i, key in enumerate(pts):
        y = top + 12 + 16 * i
        out.append('<circle cx="%d" cy="%d" r="4" fill="%s"/>' % (lx + 8, y - 4, COLORS.get(key, "#7f7f7f")))
        out.append('<text x="%d" y="%d">%s</text>' % (lx + 20, y, key))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    runs, out_svg = parse_args(sys.argv, __doc__)
    names = runs_of(runs)
    if not names:
        sys.exit("group_tables.py: no group runs in %s" % runs)
    if out_svg:
        svg(runs, names, out_svg)
    lat = latencies(runs)
    dense = {b: statistics.median(lat[("adam", b)]) for b in (1, 64) if ("adam", b) in lat}

    print("Structured sparsity (final epoch; compacted network; inference 1 thread, "
          "ms per batch over the repeats, speed-up = dense median / compacted median)\n")
    print("| method | reg | λ | test acc % | channels | params % | FLOPs % | batch 1 ms | speed-up | batch 64 ms | speed-up |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        s = load(runs, name)
        method, reg, _ = method_of(name)
        cfg = s["config"]
        if name.startswith("prune-"):
            lam = "%.1f %% FLOPs" % (100 * cfg.get("prune_flops", s["flops_ratio"]))
        elif name == "adam":
            lam = "0"
        else:
            lam = "%g" % cfg["lambda"]
        rem = s["remaining"]
        cells = []
        for b in (1, 64):
            xs = lat.get((name, b), [])
            cells.append(rng(xs, "%.2f" if b == 1 else "%.1f"))
            if xs and b in dense:
                cells.append("%.2f×" % (dense[b] / statistics.median(xs)))
            else:
                cells.append("-")
        print("| %s | %s | %s | %.2f | %d / %d | %.1f | %.1f | %s |" % (
            method, reg, lam, 100 * s["test_acc"], rem["channels"], rem["channels_total"],
            100 * s["params_ratio"], 100 * s["flops_ratio"], " | ".join(cells)))


if __name__ == "__main__":
    main()
