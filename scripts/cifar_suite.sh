#!/usr/bin/env bash
# The CIFAR-10 experiment suite of docs/cifar-experiments.md, scaled down to
# fit a 2-core machine: the paper's sparse-training comparison (Figs. 1-2),
# its binary ResNet-20 table (Table 3) and the structured-sparsity comparison
# of docs/cifar-group.md (group ℓ0 and group lasso over filters, the
# subgradient method and magnitude filter pruning with fine-tuning;
# compaction and inference latency).
#
# The runs are two sweeps of cmd/sweep (docs/sweeps.md):
# scripts/sweeps/cifar-suite.json (the sparse, group-sparse and
# full-precision pre-training runs), planned into $RUNS, and
# scripts/sweeps/cifar-binary.json (the binary runs, which start from the
# pre-trained model), planned into $RUNS/binary; the values below reach the
# specs as environment variables. Each run writes its own folder
# (metrics.jsonl, summary.json, curves.svg, checkpoints) named as before.
# `sweep local` skips finished runs and resumes interrupted ones, so an
# interrupted suite continues where it stopped; the same specs run on a
# Slurm or Kubernetes cluster with `sweep slurm` or `sweep k8s`. The
# pruning runs, which depend on the FLOPs the group runs kept, and the
# latency timings follow in the group part. At the end the script prints
# the result tables in Markdown (scripts/cifar_tables.py and
# scripts/group_tables.py).
#
# Usage: scripts/cifar_suite.sh [sparse|binary|group|tables]...   (default: all)
#   sparse  the runs of scripts/sweeps/cifar-suite.json (also the group
#           runs' ProxGen and subgradient training and the pre-training)
# Environment:
#   DATA     CIFAR-10 folder (default: ../shared/data/cifar10/prepare's output,
#            built on first use)
#   RUNS     folder for the run folders (default runs/suite)
#   THREADS  worker threads per run (default 1; results do not depend on it)
#   JOBS     runs at a time (default 1)
#   WIDTH    channel-width multiplier of ResNet-20 (default 0.5)
#   TRAIN    training images (default 10000, the first of the training set)
#   TEST     test images (default 5000, the first of the test set)
#   EPOCHS   epochs of each sparse and each quantized run (default 10)
#   PRE      epochs of the full-precision pre-training (default 15)
#   SEED     seed of every run (default 1)
#   LAMBDA_L1, LAMBDA_L23, LAMBDA_L12, LAMBDA_L0, LAMBDA_L0HC
#            -lambda of each regularizer (defaults 20, 4, 1.5, 0.1, 0.1;
#            divided by TRAIN per step, see docs/cifar-experiments.md)
#   LAMBDA_GL0, LAMBDA_GL21
#            the -lambda values of the group runs (defaults "30000 60000
#            100000" and "100 300 1000", divided by TRAIN per step)
#   FINETUNE epochs of fine-tuning after magnitude filter pruning (default 5)
#   LATENCY_REPEATS
#            alternating repeats of each inference timing (default 3)
#   LAMBDA_PQ_SCALED, LAMBDA_BINW_SCALED
#            λ of the binary runs scaled to the paper's total pull towards
#            ±1 (defaults 0.66 for ProxQuant, 3.3e-4 for revised ProxQuant)
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-runs/suite}
THREADS=${THREADS:-1}
JOBS=${JOBS:-1}
WIDTH=${WIDTH:-0.5}
TRAIN=${TRAIN:-10000}
TEST=${TEST:-5000}
EPOCHS=${EPOCHS:-10}
PRE=${PRE:-15}
SEED=${SEED:-1}
LAMBDA_L1=${LAMBDA_L1:-20}
LAMBDA_L23=${LAMBDA_L23:-4}
LAMBDA_L12=${LAMBDA_L12:-1.5}
LAMBDA_L0=${LAMBDA_L0:-0.1}
LAMBDA_L0HC=${LAMBDA_L0HC:-0.1}
LAMBDA_GL0=${LAMBDA_GL0:-30000 60000 100000}
LAMBDA_GL21=${LAMBDA_GL21:-100 300 1000}
FINETUNE=${FINETUNE:-5}
LATENCY_REPEATS=${LATENCY_REPEATS:-3}
LAMBDA_PQ_SCALED=${LAMBDA_PQ_SCALED:-0.66}
LAMBDA_BINW_SCALED=${LAMBDA_BINW_SCALED:-3.3e-4}
if [ -z "${DATA:-}" ]; then
	DATA=$(../shared/data/cifar10/prepare /tmp/cifar10 | tail -1)
fi

parts=("$@")
if [ ${#parts[@]} -eq 0 ]; then
	parts=(sparse binary group tables)
fi

mkdir -p "$RUNS"
bin="$RUNS/cifar"
go build -o "$bin" ./cmd/cifar
bench="$RUNS/bench"
go build -o "$bench" ./cmd/bench
sweep="$RUNS/sweep"
go build -o "$sweep" ./cmd/sweep

# The specs' variables.
export DATA WIDTH SEED TRAIN TEST EPOCHS PRE LAMBDA_L1 LAMBDA_L23 LAMBDA_L12 LAMBDA_L0 LAMBDA_L0HC \
	LAMBDA_GL0 LAMBDA_GL21 LAMBDA_PQ_SCALED LAMBDA_BINW_SCALED
# ProxGen at the middle λ of each group map gets the budget of pruning +
# fine-tuning (EPOCHS + FINETUNE epochs).
LAMBDA_GL0_MID=$(echo $LAMBDA_GL0 | awk '{print ($2 != "" ? $2 : $1)}')
LAMBDA_GL21_MID=$(echo $LAMBDA_GL21 | awk '{print ($2 != "" ? $2 : $1)}')
EPOCHS_FINETUNED=$((EPOCHS + FINETUNE))
PRETRAINED="$RUNS/binary-pretrain/model.safetensors"
export LAMBDA_GL0_MID LAMBDA_GL21_MID EPOCHS_FINETUNED PRETRAINED

# sweep_run SPEC DIR [MATCH]: plan SPEC into DIR and run its points here
# (those whose folder name matches the regular expression MATCH).
sweep_run() {
	"$sweep" plan -spec "$1" -dir "$2" >/dev/null
	"$sweep" local -dir "$2" -j "$JOBS" -threads "$THREADS" -match "${3:-.}"
	"$sweep" status -dir "$2"
}

# run NAME FLAGS...: one cmd/cifar run into $RUNS/NAME, skipped when done.
run() {
	local name=$1
	shift
	local dir="$RUNS/$name"
	if [ -f "$dir/summary.json" ]; then
		echo "== $name: done"
		return
	fi
	local common=(-data "$DATA" -out "$dir" -threads "$THREADS" -progress none -json)
	if [ -f "$dir/train_state.safetensors" ]; then
		echo "== $name: resuming"
		"$bin" "${common[@]}" -resume >"$dir.log.resumed" 2>&1
		return
	fi
	echo "== $name: $*"
	local t0=$SECONDS
	if ! "$bin" "${common[@]}" -model resnet20 -width "$WIDTH" -seed "$SEED" \
		-train-subset "$TRAIN" -test-subset "$TEST" "$@" >"$dir.log" 2>&1; then
		echo "   failed: $(tail -1 "$dir.log" | cut -c1-160)"
		return 1
	fi
	echo "   $((SECONDS - t0)) s: $(tail -1 "$dir.log" | cut -c1-160)"
}

sparse() {
	sweep_run scripts/sweeps/cifar-suite.json "$RUNS" '^(adam|proxgen-l|subgrad-l|proxsgd-l|l0hc)'
}

binary() {
	# Full-precision pre-training as in the ProxQuant reference (SGD,
	# momentum 0.9, wd 1e-4, lr 0.1 divided by 10 at 1/2 and 5/6 of the
	# run), option-B shortcuts so that, as there, the 1x1 shortcut
	# convolutions stay full precision; it is a point of cifar-suite.json.
	# The binary runs start from it: the paper's settings (ProxQuant λ
	# 1e-4, revised ProxQuant λ 5e-8, both with homotopy and the constant
	# step size 0.01), and λ scaled so that the total pull towards ±1
	# before hard quantization, Σ_t lr·λ_t over those steps, equals the
	# paper's (390 steps × 200 epochs there, 78 × 6 here: ×6633): ProxQuant
	# 0.66, revised 3.3e-4.
	sweep_run scripts/sweeps/cifar-suite.json "$RUNS" '^binary-pretrain$'
	sweep_run scripts/sweeps/cifar-binary.json "$RUNS/binary"
}

# flops_ratio NAME: the remaining FLOPs fraction in RUNS/NAME/summary.json.
flops_ratio() {
	/usr/bin/env python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["flops_ratio"])' "$RUNS/$1/summary.json"
}

group() {
	local l
	# The dense Adam run and the group runs are points of cifar-suite.json.
	# Group ℓ0 has no useful subgradient (zero almost everywhere), so only
	# group lasso runs with the subgradient method. Filter groups include
	# the γ and β of the batch norm after each convolution (cmd/cifar's
	# default), so a zero group is a removable channel. ProxGen at the
	# middle λ of each map also gets the budget of pruning + fine-tuning.
	sweep_run scripts/sweeps/cifar-suite.json "$RUNS" '^(adam|proxgen-gl|subgrad-gl|proxgen15-gl)'
	# One-shot magnitude filter pruning of the dense Adam model to the FLOPs
	# each ProxGen run kept, then fine-tuning with Adam.
	local r
	for r in $(for l in $LAMBDA_GL0; do echo "proxgen-gl0-$l"; done) \
		$(for l in $LAMBDA_GL21; do echo "proxgen-gl21-$l"; done); do
		local f
		f=$(flops_ratio "$r")
		if /usr/bin/env python3 -c 'import sys; sys.exit(float(sys.argv[1]) < 0.999)' "$f"; then
			echo "== prune-$r: skipped ($r kept all FLOPs)"
			continue
		fi
		# Pruning only inside the residual blocks cannot go below about 10 %
		# of the FLOPs; then residual-stream channels are pruned too.
		local p=(-epochs "$FINETUNE" -optimizer adam -weights "$RUNS/adam/model.safetensors" -prune-flops "$f")
		if ! run "prune-$r" "${p[@]}"; then
			rm -rf "${RUNS:?}/prune-$r"
			run "prune-$r" "${p[@]}" -prune-residual
		fi
	done
	# Compact every run's model and time inference of the compacted and the
	# dense network (1 thread, batch 1 and 64), the two alternated.
	local lat="$RUNS/group-latency.jsonl"
	if [ ! -f "$lat" ]; then
		local tmp="$lat.tmp"
		: >"$tmp"
		local names=(adam)
		for r in "$RUNS"/proxgen-gl* "$RUNS"/proxgen15-gl* "$RUNS"/subgrad-gl* "$RUNS"/prune-*; do
			[ -f "$r/summary.json" ] && names+=("$(basename "$r")")
		done
		for r in "${names[@]}"; do
			"$bin" -weights "$RUNS/$r/model.safetensors" -compact "$RUNS/$r/compact.safetensors" >/dev/null
		done
		local i b
		for i in $(seq "$LATENCY_REPEATS"); do
			for b in 1 64; do
				for r in "${names[@]}"; do
					"$bench" infer -json -dense -threads 1 -batch "$b" -min-time 2s \
						-weights "$RUNS/$r/compact.safetensors" |
						tail -1 | sed "s/^{/{\"run\":\"$r\",\"repeat\":$i,/" >>"$tmp"
				done
			done
		done
		mv "$tmp" "$lat"
	fi
}

for p in "${parts[@]}"; do
	case $p in
	sparse) sparse ;;
	binary) binary ;;
	group) group ;;
	tables)
		/usr/bin/env python3 scripts/cifar_tables.py "$RUNS"
		/usr/bin/env python3 scripts/group_tables.py "$RUNS"
		;;
	*)
		echo "cifar_suite.sh: unknown part $p (want sparse, binary, group or tables)" >&2
		exit 2
		;;
	esac
done
