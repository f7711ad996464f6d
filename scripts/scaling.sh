#!/usr/bin/env bash
# Thread scaling of training and inference: `bench train` (ResNet-20,
# batch 128) and `bench infer` (ResNet-20, batch 64 and batch 1) at 1, 2,
# 4, ... threads up to the number of CPUs, REPEAT times each, the thread
# counts alternating within every repeat. Prints a Markdown table (for
# docs/benchmarks.md) with the median and range of images/s, the speed-up
# over one thread and the efficiency per thread (speed-up / threads), and
# the CPU it ran on. Results are bit-identical for any thread count
# (internal/parallel), so only the time changes.
#
# Usage: scripts/scaling.sh
# Environment: MAX_THREADS (nproc), REPEAT (3), MODEL (resnet20),
#   TRAIN_BATCH (128), MIN_TIME (3s per measurement), OUT (folder for the
#   JSON lines; default a temporary folder).
set -euo pipefail

cd "$(dirname "$0")/.."
MAX_THREADS=${MAX_THREADS:-$(nproc)}
REPEAT=${REPEAT:-3}
MODEL=${MODEL:-resnet20}
TRAIN_BATCH=${TRAIN_BATCH:-128}
MIN_TIME=${MIN_TIME:-3s}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
CGO_ENABLED=0 go build -o "$bin/" ./cmd/bench

threads=()
for ((t = 1; t < MAX_THREADS; t *= 2)); do threads+=("$t"); done
threads+=("$MAX_THREADS")

for ((r = 1; r <= REPEAT; r++)); do
	for t in "${threads[@]}"; do
		"$bin/bench" train -model "$MODEL" -batch "$TRAIN_BATCH" -threads "$t" -warmup 1 -steps 2 -min-time "$MIN_TIME" -json >>"$OUT/train.jsonl"
		"$bin/bench" infer -model "$MODEL" -batch 64 -threads "$t" -warmup 2 -steps 5 -min-time "$MIN_TIME" -json >>"$OUT/infer64.jsonl"
		"$bin/bench" infer -model "$MODEL" -batch 1 -threads "$t" -warmup 20 -steps 200 -min-time "$MIN_TIME" -json >>"$OUT/infer1.jsonl"
	done
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
python3 - "$OUT" "$cpu" "$(nproc)" "$TRAIN_BATCH" "$MODEL" <<'PY'
import json, statistics, sys
out, cpu, ncpu, tb, model = sys.argv[1:6]
print(f"{model} on {cpu}, {ncpu} CPUs; images/s, median [range] over the repeats\n")
print("| workload | threads | images/s | speed-up | efficiency per thread |")
print("|---|---:|---:|---:|---:|")
for name, label in [("train", f"training, batch {tb}"), ("infer64", "inference, batch 64"), ("infer1", "inference, batch 1")]:
    by = {}
    for line in open(f"{out}/{name}.jsonl"):
        r = json.loads(line)
        by.setdefault(r["threads"], []).append(r["img_per_s"])
    base = statistics.median(by[min(by)])
    for t in sorted(by):
        v = by[t]
        m = statistics.median(v)
        print(f"| {label} | {t} | {m:,.0f} [{min(v):,.0f}–{max(v):,.0f}] | {m/base:.2f} | {m/base/t:.2f} |")
PY
echo
echo "JSON lines in $OUT"
