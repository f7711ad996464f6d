#!/usr/bin/env bash
# bfloat16 training against float32, and against PyTorch's CPU autocast,
# alternated in one run.
#
# For the model it runs, REPEAT times in turn: `bench train -precision
# fp32`, `bench train -precision bf16`, scripts/bench_torch.py in fp32 and
# scripts/bench_torch.py --precision bf16 (torch.cpu.amp.autocast with
# dtype torch.bfloat16), all at THREADS threads and batch BATCH, and
# prints each variant's median and range of images/s and of CPU ms per
# step, and the ratios of the medians.
#
# Usage: scripts/bench_bf16.sh [model]   (default resnet20)
# Environment: THREADS (2), BATCH (128), WARMUP (2), STEPS (5), REPEAT (3),
#   PYTHON (/usr/bin/python3), OMP_WAIT_POLICY for PyTorch (PASSIVE: on a
#   shared machine spin-waiting OpenMP threads wait for descheduled ones),
#   OUT (directory for the JSON lines; default a temporary directory).
set -euo pipefail

cd "$(dirname "$0")/.."
MODEL=${1:-resnet20}
THREADS=${THREADS:-2}
BATCH=${BATCH:-128}
WARMUP=${WARMUP:-2}
STEPS=${STEPS:-5}
REPEAT=${REPEAT:-3}
PYTHON=${PYTHON:-/usr/bin/python3}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
go build -o "$OUT/bench" ./cmd/bench
grep -m1 'model name' /proc/cpuinfo >&2 || true
: >"$OUT/runs.jsonl"
for r in $(seq 1 "$REPEAT"); do
	for p in fp32 bf16; do
		echo "== run $r: go $p" >&2
		"$OUT/bench" train -model "$MODEL" -batch "$BATCH" -threads "$THREADS" -warmup "$WARMUP" \
			-steps "$STEPS" -precision "$p" -json | tail -n 1 >>"$OUT/runs.jsonl"
	done
	for p in fp32 bf16; do
		echo "== run $r: torch $p" >&2
		"$PYTHON" -W ignore scripts/bench_torch.py --model "$MODEL" --batch "$BATCH" --threads "$THREADS" \
			--warmup "$WARMUP" --steps "$STEPS" --precision "$p" --json | tail -n 1 >>"$OUT/runs.jsonl"
	done
done
"$PYTHON" - "$OUT/runs.jsonl" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    key = (d["impl"], d["precision"].split()[0])
    runs.setdefault(key, []).append(d)
def med(k, f):
    return statistics.median(r[f] for r in runs[k])
print("| variant | images/s median (range) | CPU ms/step median |")
print("|---|---|---|")
for k in [("go", "fp32"), ("go", "bf16"), ("torch", "fp32"), ("torch", "bf16")]:
    if k not in runs:
        continue
    v = [r["img_per_s"] for r in runs[k]]
    print(f"| {k[0]} {k[1]} | {statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f}) | {med(k, 'cpu_ms_per_step'):.0f} |")
g32, g16, t16 = ("go", "fp32"), ("go", "bf16"), ("torch", "bf16")
if g32 in runs and g16 in runs:
    print(f"\ngo bf16 / go fp32: {med(g16, 'img_per_s') / med(g32, 'img_per_s'):.2f}x images/s, "
          f"{med(g32, 'cpu_ms_per_step') / med(g16, 'cpu_ms_per_step'):.2f}x by CPU time")
if t16 in runs and g16 in runs:
    print(f"go bf16 / torch bf16: {med(g16, 'img_per_s') / med(t16, 'img_per_s'):.2f}x images/s, "
          f"{med(t16, 'cpu_ms_per_step') / med(g16, 'cpu_ms_per_step'):.2f}x by CPU time")
PY
