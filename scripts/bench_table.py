#!/usr/bin/python3
"""Summarises the JSON lines of scripts/bench_train.sh as a Markdown table.

Usage: scripts/bench_table.py OUT model...

OUT holds go-MODEL.jsonl (one line per `bench train` run) and
torch-MODEL.jsonl (one line per bench_torch.py run, each with a "repeat"
number; several lines of one repeat are the OpenMP wait policies, and the
faster of them is that repeat's result). For each model the table gives the
median and range over the repeats of each side's throughput, the ratio of
the medians (Go/PyTorch, > 1: Go is faster), the ratio of the median CPU
time per step (PyTorch/Go, > 1: Go uses less CPU) and each side's peak RSS
(the largest over the runs).
"""

import json
import statistics
import sys


def rate_key(row):
    return "tok_per_s" if "tok_per_s" in row else "img_per_s"


def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def per_repeat(rows):
    """The best row of every repeat (rows without "repeat" are their own)."""
    best = {}
    for i, r in enumerate(rows):
        k = r.get("repeat", -1 - i)
        if k not in best or r[rate_key(r)] > best[k][rate_key(r)]:
            best[k] = r
    return list(best.values())


def spread(values, fmt):
    if not values:
        return "n/a"
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def main():
    out, models = sys.argv[1], sys.argv[2:]
    lines = [
        "| model | unit | proxgen median (range) | PyTorch median (range) | throughput ratio | CPU-time ratio"
        " | peak RSS proxgen | peak RSS PyTorch | runs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    notes = set()
    threads = set()
    for m in models:
        go = read(f"{out}/go-{m}.jsonl")
        torch = per_repeat(read(f"{out}/torch-{m}.jsonl"))
        if not go or not torch:
            lines.append(f"| {m} | | no results | | | | | | |")
            continue
        key = rate_key(go[0])
        unit = key.split("_")[0] + "/s"
        g = [r[key] for r in go]
        t = [r[key] for r in torch]
        gc = [r["cpu_ms_per_step"] for r in go if r.get("cpu_ms_per_step")]
        tc = [r["cpu_ms_per_step"] for r in torch if r.get("cpu_ms_per_step")]
        ratio = statistics.median(g) / statistics.median(t)
        cpu = statistics.median(tc) / statistics.median(gc) if gc and tc else float("nan")
        grss = max((r.get("peak_rss_mb", 0) for r in go), default=0)
        trss = max((r.get("peak_rss_mb", 0) for r in torch), default=0)
        lines.append(
            f"| {m} | {unit} | {spread(g, '{:.1f}')} | {spread(t, '{:.1f}')} | **{ratio:.2f}×** | {cpu:.2f}×"
            f" | {grss:.0f} MB | {trss:.0f} MB | {len(g)}+{len(t)} |")
        threads.update(r["threads"] for r in go + torch)
        notes.add(f"Go kernel {go[0]['kernel']}")
        for r in torch:
            notes.add(f"PyTorch {r['kernel']} BLAS {r.get('blas', '?')} (ATen {r.get('cpu_capability', '?')},"
                      f" OPENBLAS_CORETYPE={r.get('openblas_coretype') or 'unset'})")
        pols = sorted({r.get("omp_wait_policy", "?") for r in torch})
        notes.add(f"{m}: PyTorch's faster OpenMP wait policy per repeat was {', '.join(pols)}")
    print("\n".join(lines))
    print()
    print(f"Threads {', '.join(map(str, sorted(threads)))}; medians and ranges over the repeats in {out}.")
    print("Throughput ratio = proxgen / PyTorch medians; CPU-time ratio = PyTorch / proxgen median process CPU")
    print("time per step; peak RSS = the process high-water mark (VmHWM), MB = 10^6 bytes, largest over the runs.")
    for n in sorted(notes):
        print(f"- {n}")


if __name__ == "__main__":
    main()
