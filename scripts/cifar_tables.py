#!/usr/bin/env python3
"""Markdown tables of a scripts/cifar_suite.sh run (standard library only).

Usage: scripts/cifar_tables.py RUNS

Reads RUNS/<name>/summary.json and metrics.jsonl of every run of the suite and
prints the sparse-training table and the binary ResNet-20 table.
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
]

BINARY = [
    ("binary-pretrain", "full precision (SGD pre-training)"),
    ("binary-bc", "BinaryConnect"),
    ("binary-proxquant", "ProxQuant (original, binw:1)"),
    ("binary-proxgen-binw1", "revised ProxQuant = ProxGen binw:1 (l1)"),
    ("binary-proxgen-binw23", "revised ProxQuant = ProxGen binw:2/3"),
    ("binary-proxgen-binw12", "revised ProxQuant = ProxGen binw:1/2"),
]


def load(runs, name):
    path = os.path.join(runs, name)
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


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    runs = sys.argv[1]

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
