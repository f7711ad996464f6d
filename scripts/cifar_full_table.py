#!/usr/bin/env python3
"""Prints the results table of docs/cifar-full.md from the run folders of
scripts/cifar_full.sh: test accuracy, exact zeros, FLOPs and parameters left
after compaction, the shipped file's size and inference images/s
(scripts/cifar_full_infer.sh), and training wall time.

Usage: scripts/cifar_full_table.py [DIR]   (default docs/cifar-full, where the
summaries of the finished runs are committed; runs/full works as well)
"""
import glob
import json
import os
import re
import sys

RUNS = [
    ("sgd", "SGD + momentum, dense (reference recipe)"),
    ("adam", "Adam, dense (ProxGen's base)"),
    ("proxgen-l12", "**ProxGen** ℓ1/2"),
    ("proxgen-l12-lambda2", "**ProxGen** ℓ1/2"),
    ("subgrad-l12", "subgradient ℓ1/2 (AdamW)"),
    ("proxgen-l0", "**ProxGen** ℓ0"),
    ("proxgen-gl21", "**ProxGen** group lasso, compacted"),
    ("proxgen-binary", "**ProxGen** binary (W-shaped ℓ1), step 0.01"),
    ("proxgen-binary-lr1e-3", "**ProxGen** binary (W-shaped ℓ1), step 1e-3"),
    ("proxgen-binary-recal", "**ProxGen** binary (W-shaped ℓ1), 9 epochs, recalibrated"),
    ("proxgen-binary-bn5", "**ProxGen** binary, step 1e-3, + 5 batch-norm epochs"),
    ("proxquant", "ProxQuant"),
    ("bc", "BinaryConnect"),
]


MODELS = "nn/pretrained/models"


def shipped_runs():
    """Maps each run folder name to the shipped model trained in it: the
    folder is the -out of the training command in the model's card."""
    out = {}
    for card in sorted(glob.glob(os.path.join(MODELS, "*.md"))):
        m = re.search(r"-out (\S+)", open(card).read())
        if m:
            out[os.path.basename(m.group(1))] = os.path.basename(card)[:-len(".md")]
    return out


def ranges(lines, batch):
    v = [r["img_per_s"] for r in lines if r["batch"] == batch]
    if not v:
        return "–"
    lo, hi = min(v), max(v)
    return f"{lo:,.0f}" if round(lo) == round(hi) else f"{lo:,.0f}–{hi:,.0f}"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "docs/cifar-full"
    print("| method | λ | test acc % | best % (epoch) | exact zeros % | FLOPs left % | params left % | shipped file | img/s batch 1 | img/s batch 64 | training |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    ships = shipped_runs()
    for run, label in RUNS:
        shipped = ships.get(run)
        path = os.path.join(root, run, "summary.json")
        if not os.path.exists(path):
            print(f"| {label} | | not run | | | | | | | | |")
            continue
        s = json.load(open(path))
        lam = s["config"].get("lambda") or 0
        zeros = 100 * s["zero_ratio"]
        if s.get("binary_ratio") is not None:
            zeros_s = f"{zeros:.2f} (±1: {100*s['binary_ratio']:.2f})"
        else:
            zeros_s = f"{zeros:.2f}"
        file_s, b1, b64 = "–", "–", "–"
        if shipped:
            f = os.path.join(MODELS, shipped + ".safetensors")
            if os.path.exists(f):
                file_s = f"`{shipped}` {os.path.getsize(f)/1024:,.0f} KiB"
            inf = os.path.join(root, run, "infer.jsonl")
            if os.path.exists(inf):
                lines = [json.loads(l) for l in open(inf) if l.strip()]
                b1, b64 = ranges(lines, 1), ranges(lines, 64)
        mins = s["train_seconds"] / 60
        print(f"| {label} | {lam:g} | {100*s['test_acc']:.2f} | {100*s['best_test_acc']:.2f} ({s['best_epoch']}) | {zeros_s} | "
              f"{100*s['flops_ratio']:.1f} | {100*s['params_ratio']:.1f} | {file_s} | {b1} | {b64} | {mins:.0f} min |")


if __name__ == "__main__":
    main()
