#!/usr/bin/env bash
# Training throughput and memory of proxgen against PyTorch (CPU), side by side.
#
# For every model it runs `bench train` (Go) and scripts/bench_torch.py
# (PyTorch) at the same thread count and batch, alternating, REPEAT times,
# and prints a Markdown table (for docs/benchmarks.md) with the median and
# range over the repeats of each side's throughput, the ratio of the
# medians, the ratio of the median CPU time per step, and each side's peak
# resident set size (the process high-water mark, largest over the runs).
#
# PyTorch runs once per OpenMP wait policy in TORCH_POLICIES in every
# repeat and the better of them is that repeat's PyTorch result. PyTorch's
# default (libgomp spin-waiting) is fastest on an idle machine, but when
# other processes compete for the cores a spinning thread waits at every
# barrier for a descheduled one: on the shared 2-core project machine that
# made ResNet-20 7x slower (3.2 s/step against 0.46 s/step with
# OMP_WAIT_POLICY=PASSIVE). Taking the better of both keeps the comparison
# fair to PyTorch.
#
# The peers are set up by scripts/peers.sh: PyTorch must call OpenBLAS, not
# Debian's reference BLAS (installed with apt when it is the system BLAS),
# with OPENBLAS_CORETYPE=SkylakeX on AVX-512 CPUs; the script prints the
# BLAS, the oneDNN ISA and the Go GEMM kernel before the runs.
#
# Usage: scripts/bench_train.sh [model ...]   (default: resnet20 resnet56
#   vgg16 resnet34 lstm). Quick check of every path:
#   REPEAT=1 WARMUP=0 STEPS=1 MIN_TIME=0 BATCH=4 TORCH_POLICIES=default scripts/bench_train.sh resnet20 lstm
# Environment: THREADS (2), BATCH (128; the LSTM always uses 35x20),
#   WARMUP (2), STEPS (3), MIN_TIME (5, seconds), REPEAT (3),
#   TORCH_POLICIES ("default PASSIVE"; "default" leaves OMP_WAIT_POLICY unset),
#   PYTHON (/usr/bin/python3), OUT (directory for the JSON lines; default a
#   temporary directory), PROFILE=1 (also write Go CPU profiles to $OUT),
#   PRECISION (fp32; bf16 runs `bench train -precision bf16` against
#   PyTorch under torch.cpu.amp.autocast(dtype=torch.bfloat16); see
#   scripts/bench_bf16.sh for both precisions alternated).
set -euo pipefail

cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
BATCH=${BATCH:-128}
WARMUP=${WARMUP:-2}
STEPS=${STEPS:-3}
MIN_TIME=${MIN_TIME:-5}
REPEAT=${REPEAT:-3}
PYTHON=${PYTHON:-/usr/bin/python3}
PROFILE=${PROFILE:-0}
PRECISION=${PRECISION:-fp32}
TORCH_POLICIES=${TORCH_POLICIES:-default PASSIVE}
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
	models=(resnet20 resnet56 vgg16 resnet34 lstm)
fi
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

# PyTorch is only needed here, never to build or test proxgen.
source scripts/peers.sh
peers_python torch numpy
peers_openblas
peers_coretype

go build -o "$OUT/bench" ./cmd/bench
peers_report "$OUT/bench" torch 2>&1 | tee "$OUT/peers.txt" >&2
for m in "${models[@]}"; do : >"$OUT/go-$m.jsonl"; : >"$OUT/torch-$m.jsonl"; done

for m in "${models[@]}"; do
	batch=$BATCH
	if [ "$m" = lstm ]; then batch=20; fi
	for r in $(seq 1 "$REPEAT"); do
		prof=()
		if [ "$PROFILE" = 1 ]; then prof=(-cpuprofile "$OUT/go-$m-$r.prof"); fi
		echo "== $m run $r: go" >&2
		"$OUT/bench" train -model "$m" -batch "$batch" -threads "$THREADS" -warmup "$WARMUP" \
			-steps "$STEPS" -min-time "${MIN_TIME}s" -precision "$PRECISION" "${prof[@]}" -json | tail -n 1 >>"$OUT/go-$m.jsonl"
		for pol in $TORCH_POLICIES; do
			echo "== $m run $r: torch (OMP_WAIT_POLICY $pol)" >&2
			env=()
			if [ "$pol" != default ]; then env=(OMP_WAIT_POLICY="$pol"); fi
			env "${env[@]}" "$PYTHON" -W ignore scripts/bench_torch.py --model "$m" --batch "$batch" \
				--threads "$THREADS" --warmup "$WARMUP" --steps "$STEPS" --min-time "$MIN_TIME" \
				--precision "$PRECISION" --json |
				tail -n 1 | sed "s/^{/{\"repeat\": $r, /" >>"$OUT/torch-$m.jsonl"
		done
	done
done

"$PYTHON" scripts/bench_table.py "$OUT" "${models[@]}"
