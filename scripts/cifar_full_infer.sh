#!/usr/bin/env bash
# Inference speed of the shipped models (nn/pretrained/models) through
# nn/infer, sparse path on (the default), batch 1 and 64 at 2 threads,
# REPEATS alternated repeats: one JSON line of `cmd/bench infer` per
# measurement, appended to $RUNS/<run>/infer.jsonl for the run each model
# came from (docs/cifar-full.md reads them). Run it on an otherwise idle
# machine.
#
# Usage: scripts/cifar_full_infer.sh   Environment: RUNS (default runs/full),
# REPEATS (default 3), THREADS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-runs/full}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-2}
bin=$(mktemp -d)/bench
go build -o "$bin" ./cmd/bench
declare -A RUN=([resnet20-dense]=sgd [resnet20-sparse]=proxgen-l12-lambda2 [resnet20-compact]=proxgen-gl21 [resnet20-binary]=proxgen-binary-lr1e-3)
for rep in $(seq "$REPEATS"); do
	for f in nn/pretrained/models/*.safetensors; do
		name=$(basename "$f" .safetensors)
		run=${RUN[$name]:?no run for $name}
		[ "$rep" -gt 1 ] || : >"$RUNS/$run/infer.jsonl"
		for batch in 1 64; do
			steps=$((batch == 1 ? 2000 : 40))
			"$bin" infer -weights "$f" -batch "$batch" -threads "$THREADS" -steps "$steps" -warmup 5 -json >>"$RUNS/$run/infer.jsonl"
		done
	done
done
