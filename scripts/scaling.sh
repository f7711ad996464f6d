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
#   JSON lines; default a temporary folder), BENCH (a prebuilt `bench`
#   binary, for machines without Go; default: built here), TORCH=1 (also
#   time PyTorch's ResNet-20 training step, scripts/bench_torch.py, at each
#   thread count, alternating with the engine; PYTHON picks the
#   interpreter, default python3).
set -euo pipefail

cd "$(dirname "$0")/.."
MAX_THREADS=${MAX_THREADS:-$(nproc)}
REPEAT=${REPEAT:-3}
MODEL=${MODEL:-resnet20}
TRAIN_BATCH=${TRAIN_BATCH:-128}
MIN_TIME=${MIN_TIME:-3s}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

if [[ -n ${BENCH:-} ]]; then
	bench=$BENCH
else
	bin=$(mktemp -d)
	trap 'rm -rf "$bin"' EXIT
	CGO_ENABLED=0 go build -o "$bin/" ./cmd/bench
	bench=$bin/bench
fi
TORCH=${TORCH:-0}
PYTHON=${PYTHON:-python3}

threads=()
for ((t = 1; t < MAX_THREADS; t *= 2)); do threads+=("$t"); done
threads+=("$MAX_THREADS")

for ((r = 1; r <= REPEAT; r++)); do
	for t in "${threads[@]}"; do
		"$bench" train -model "$MODEL" -batch "$TRAIN_BATCH" -threads "$t" -warmup 1 -steps 2 -min-time "$MIN_TIME" -json >>"$OUT/train.jsonl"
		"$bench" infer -model "$MODEL" -batch 64 -threads "$t" -warmup 2 -steps 5 -min-time "$MIN_TIME" -json >>"$OUT/infer64.jsonl"
		"$bench" infer -model "$MODEL" -batch 1 -threads "$t" -warmup 20 -steps 200 -min-time "$MIN_TIME" -json >>"$OUT/infer1.jsonl"
		if [[ $TORCH == 1 ]]; then
			"$PYTHON" scripts/bench_torch.py --model "$MODEL" --batch "$TRAIN_BATCH" --threads "$t" --warmup 1 --steps 2 --min-time "${MIN_TIME%s}" --json >>"$OUT/torch.jsonl"
		fi
	done
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
python3 - "$OUT" "$cpu" "$(nproc)" "$TRAIN_BATCH" "$MODEL" <<'PY'
import json, statistics, sys
out, cpu, ncpu, tb, model = sys.argv[1:6]
print(f"{model} on {cpu}, {ncpu} CPUs; images/s, median [range] over the repeats\n")
print("| workload | threads | images/s | speed-up | efficiency per thread |")
print("|---|---:|---:|---:|---:|")
import os
workloads = [("train", f"training, batch {tb}"), ("infer64", "inference, batch 64"), ("infer1", "inference, batch 1")]
if os.path.exists(f"{out}/torch.jsonl"):
    workloads.append(("torch", f"PyTorch training, batch {tb}"))
for name, label in workloads:
    by = {}
    for line in open(f"{out}/{name}.jsonl"):
        r = json.loads(line)
        by.setdefault(r["threads"], []).append(r["img_per_s"])
    base = statistics.median(by[min(by)])
    for t in sorted(by):
        v = by[t]
        m = statistics.median(v)
        print(f"| {label} | {t} | {m:,.0f} [{min(v):,.0f}–{max(v):,.0f}] | {m/base:.2f} | {m/base/t:.2f} |")
if any(name == "torch" for name, _ in workloads):
    med = {}
    for name in ("train", "torch"):
        by = {}
        for line in open(f"{out}/{name}.jsonl"):
            r = json.loads(line)
            by.setdefault(r["threads"], []).append(r["img_per_s"])
        med[name] = {t: statistics.median(v) for t, v in by.items()}
    print("\n| threads | training ÷ PyTorch (medians) |")
    print("|---:|---:|")
    for t in sorted(med["train"]):
        if t in med["torch"]:
            print(f"| {t} | {med['train'][t] / med['torch'][t]:.2f} |")
PY
echo
echo "JSON lines in $OUT"
