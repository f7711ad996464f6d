#!/usr/bin/env python3
"""Markdown tables of a scripts/cifar_suite.sh run (standard library only).

Usage: scripts/cifar_tables.py RUNS [--svg FILE]

Reads RUNS/<name>/summary.json and metrics.jsonl of every run of the suite and
prints the sparse-training table and the binary ResNet-20 table. With --svg it
also draws the sparse runs' test accuracy, exact-zero ratio and |w| < 1e-3
ratio per epoch into FILE.
"""
import json
import os
import sys

SPARSE = [
    ("adam", "Adam (dense reference)", "-"),
    ("proxgen-l1", "ProxGen", "l1"),
    ("subgrad-l1", "subgradient (AdamW)", "l1"),
    ("proxsgd-l1", "Prox-SGD", "l1"),
    ("proxgen-l23", "ProxGen", "l2/3"),
    ("subgrad-l23", "subgradient (AdamW)", "l2/3"),
    ("proxgen-l12", "ProxGen", "l1/2"),
    ("subgrad-l12", "subgradient (AdamW)", "l1/2"),
    ("proxgen-l0", "ProxGen", "l0"),
    ("l0hc", "l0 hard-concrete", "l0"),
    ("l0hc-lr0.01", "l0 hard-concrete, lr 1e-2", "l0"),
]

BINARY = [
    ("binary-pretrain", "full precision (SGD pre-training)"),
    ("binary-bc", "BinaryConnect"),
    ("binary-proxquant", "ProxQuant (original), paper's λ"),
    ("binary-proxgen-binw1", "revised ProxQuant l1 (ProxGen binw:1), paper's λ"),
    ("binary-proxgen-binw23", "revised ProxQuant l2/3, paper's λ"),
    ("binary-proxgen-binw12", "revised ProxQuant l1/2, paper's λ"),
    ("binary-proxquant-scaled", "ProxQuant, λ scaled"),
    ("binary-proxgen-binw1-scaled", "revised ProxQuant l1, λ scaled"),
    ("binary-proxgen-binw23-scaled", "revised ProxQuant l2/3, λ scaled"),
    ("binary-proxgen-binw12-scaled", "revised ProxQuant l1/2, λ scaled"),
]


def load(runs, name):
    path = os.path.join(runs, name)
    if not os.path.isdir(path):
        # The binary runs are a sweep of their own in RUNS/binary
        # (scripts/sweeps/cifar-binary.json).
        path = os.path.join(runs, "binary", name)
    try:
        with open(os.path.join(path, "summary.json")) as f:
            summary = json.load(f)
        with open(os.path.join(path, "metrics.jsonl")) as f:
            epochs = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return None, None
    return summary, epochs


def pct(x):
    return "%.2f" % (100 * x)


COLORS = ["#000000", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
          "#8c564b", "#e377c2", "#7f7f7f", "#17becf"]


def svg(runs, path):
    """Three panels (test accuracy, exact zeros, |w| < 1e-3) per epoch."""
    series = []
    for i, (name, method, reg) in enumerate(SPARSE):
        _, ep = load(runs, name)
        if ep:
            label = method if reg == "-" else "%s %s" % (method, reg)
            series.append((label, COLORS[i % len(COLORS)], "4 3" if "subgradient" in method else "", ep))
    panels = [("test accuracy %", "test_acc"), ("exact zeros %", "zero_ratio"),
              ("|w| &lt; 1e-3 %", "small_ratio")]
    pw, ph, left, top = 300, 220, 50, 30
    width = left + len(panels) * (pw + left) + 220
    height = top + ph + 50
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (width, height),
           '<rect width="100%" height="100%" fill="white"/>']
    epochs = max(len(ep) for *_, ep in series)
    for k, (title, key) in enumerate(panels):
        x0 = left + k * (pw + left)
        vals = [100 * e[key] for *_, ep in series for e in ep]
        hi = max(vals) if key != "test_acc" else 100
        lo = 0
        hi = max(hi, 1)
        fx = lambda e: x0 + pw * (e - 1) / max(epochs - 1, 1)
        fy = lambda v: top + ph - ph * (v - lo) / (hi - lo)
        out.append('<text x="%d" y="%d" font-weight="bold">%s</text>' % (x0, top - 10, title))
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>' % (x0, top, pw, ph))
        for t in range(5):
            v = lo + (hi - lo) * t / 4
            out.append('<text x="%d" y="%.1f" text-anchor="end">%.0f</text>' % (x0 - 4, fy(v) + 4, v))
        for e in range(1, epochs + 1):
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (fx(e), top + ph + 14, e))
        out.append('<text x="%d" y="%d" text-anchor="middle">epoch</text>' % (x0 + pw // 2, top + ph + 30))
        for label, color, dash, ep in series:
            pts = " ".join("%.1f,%.1f" % (fx(e["epoch"]), fy(100 * e[key])) for e in ep)
            out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="%s"/>'
                       % (pts, color, dash))
    lx = left + len(panels) * (pw + left)
    for i, (label, color, dash, _) in enumerate(series):
        y = top + 12 + 16 * i
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>'
                   % (lx, y - 4, lx + 24, y - 4, color, dash))
        out.append('<text x="%d" y="%d">%s</text>' % (lx + 30, y, label))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def parse_args(argv, usage):
    """RUNS and the --svg FILE (or None) of a command line RUNS [--svg FILE]."""
    args = argv[1:]
    out_svg = None
    if len(args) == 3 and args[1] == "--svg":
        out_svg = args[2]
        args = args[:1]
    if len(args) != 1:
        sys.exit(usage)
    return args[0], out_svg


def main():
    runs, out_svg = parse_args(sys.argv, __doc__)
    if out_svg:
        svg(runs, out_svg)

    print("Sparse training (final epoch; sparsity over conv and linear weights)\n")
    print("| method | reg | λ | test acc % | best % | exact zeros % | abs(w) < 1e-3 % | abs(w) < 1e-2 % |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, method, reg in SPARSE:
        s, ep = load(runs, name)
        if s is None:
            print("| %s | %s | | not run | | | | |" % (method, reg))
            continue
        lam = s["config"]["lambda"] if reg != "-" else 0
        print("| %s | %s | %g | %s | %s | %s | %s | %s |" % (
            method, reg, lam, pct(s["test_acc"]), pct(s["best_test_acc"]),
            pct(s["zero_ratio"]), pct(s["small_ratio"]),
            pct(s["below_1e2_ratio"])))

    print("\nBinary ResNet-20 (test accuracy after the last epoch; quantized "
          "runs are hard-quantized, so every binarised weight is ±1)\n")
    print("| method | test acc % | test error % | epoch before hard quantization: test acc % | ... weights at ±1 % |")
    print("|---|---:|---:|---:|---:|")
    for name, method in BINARY:
        s, ep = load(runs, name)
        if s is None:
            print("| %s | not run | | | |" % method)
            continue
        hq = s["config"].get("hard_quant_epoch", 0)
        before, before_pm1 = "-", "-"
        if hq >= 2 and hq <= len(ep):
            # Epoch hq's record is measured after the hard quantization.
            before = pct(ep[hq - 2]["test_acc"])
            if "binary_ratio" in ep[hq - 2]:
                before_pm1 = pct(ep[hq - 2]["binary_ratio"])
        print("| %s | %s | %s | %s | %s |" % (
            method, pct(s["test_acc"]), pct(1 - s["test_acc"]), before,
            before_pm1))


if __name__ == "__main__":
    main()
