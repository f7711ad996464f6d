#!/usr/bin/python3
"""Tables of scripts/ortbench/run.

  table.py agree OUT NET...   max abs differences of the softmax outputs
  table.py table RESULTS      the timing table from results.jsonl

The timing table has one row per (network, batch, threads): images/s of
this engine and of ONNX Runtime as min-max over the repeats, the min-max of
the per-repeat ratios (this engine / ONNX Runtime, both measured back to
back), and CPU ms per image (all threads, median over the repeats).
"""

import collections
import json
import os
import platform
import statistics
import sys

import numpy as np


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def agree(out, nets):
    print("| network | max abs diff ORT - PyTorch | nn/infer - PyTorch | nn/infer - ORT |")
    print("|---|---|---|---|")
    for net in nets:
        r = np.fromfile(os.path.join(out, net + ".ref.f32"), "<f4")
        o = np.fromfile(os.path.join(out, net + ".ort.f32"), "<f4")
        g = np.fromfile(os.path.join(out, net + ".go.f32"), "<f4")
        print(f"| {net} | {abs(o - r).max():.2g} | {abs(g - r).max():.2g} | {abs(g - o).max():.2g} |")
        if abs(g - r).max() > 1e-4 or abs(o - r).max() > 1e-4:
            sys.exit(f"ortbench: {net}: the engines disagree")


def rng(v, fmt="{:.0f}"):
    lo, hi = min(v), max(v)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else fmt.format(lo) + "–" + fmt.format(hi)


def table(path):
    rows = collections.defaultdict(lambda: collections.defaultdict(dict))
    order = []
    for line in open(path):
        r = json.loads(line)
        key = (r["net"], r["batch"], r["threads"])
        if key not in rows:
            order.append(key)
        rows[key][r["repeat"]][r["impl"]] = r
    ncpu = os.cpu_count()
    print(f"CPU: {cpu_name()} ({ncpu} logical CPUs); images/s min–max over repeats; "
          "ratio = this engine / ONNX Runtime per repeat (back to back)\n")
    print("| network | batch | threads | nn/infer img/s | ONNX Runtime img/s | ratio | CPU ms/img nn/infer | CPU ms/img ORT | sparse layers |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in order:
        reps = [v for v in rows[key].values() if "go" in v and "ort" in v]
        if not reps:
            continue
        go = [v["go"]["img_per_s"] for v in reps]
        ort = [v["ort"]["img_per_s"] for v in reps]
        ratio = [v["go"]["img_per_s"] / v["ort"]["img_per_s"] for v in reps]
        b = key[1]
        gcpu = statistics.median(v["go"].get("cpu_ms_per_batch", float("nan")) / b for v in reps)
        ocpu = statistics.median(v["ort"]["cpu_ms_per_batch"] / b for v in reps)
        sp = reps[0]["go"]
        print(f"| {key[0]} | {b} | {key[2]} | {rng(go)} | {rng(ort)} | {rng(ratio, '{:.2f}')} | "
              f"{gcpu:.2f} | {ocpu:.2f} | {sp['sparse_layers']}/{sp['layers']} |")
    print(f"\n{len(rows[order[0]])} repeats" if order else "no results")


def main():
    if sys.argv[1] == "agree":
        agree(sys.argv[2], sys.argv[3:])
    else:
        table(sys.argv[2])


if __name__ == "__main__":
    main()
