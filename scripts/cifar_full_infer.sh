#!/usr/bin/env bash
# Inference speed of the shipped models (nn/pretrained/models) through
# nn/infer, sparse path on (the default), batch 1 and 64 at 2 threads,
# REPEATS alternated repeats: one JSON line of `cmd/bench infer` per
# measurement, appended to $RUNS/<run>/infer.jsonl for the run each model
# came from (the -out of the training command in the model's card;
# docs/cifar-full.md reads them). Run it on an otherwise idle
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
for rep in $(seq "$REPEATS"); do
	for f in nn/pretrained/models/*.safetensors; do
		# the run folder named by -out in the training command of its card
		run=$(sed -n 's/.* -out \([^ ]*\).*/\1/p' "${f%.safetensors}.md" | head -n 1)
		run=${run##*/}
		[ -n "$run" ] || { echo "no training command in ${f%.safetensors}.md" >&2; exit 1; }
		[ "$rep" -gt 1 ] || : >"$RUNS/$run/infer.jsonl"
		for batch in 1 64; do
			steps=$((batch == 1 ? 2000 : 40))
			"$bin" infer -weights "$f" -batch "$batch" -threads "$THREADS" -steps "$steps" -warmup 5 -json >>"$RUNS/$run/infer.jsonl"
		done
	done
done
