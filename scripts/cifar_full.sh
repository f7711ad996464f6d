#!/usr/bin/env bash
# The full-data CIFAR-10 runs of docs/cifar-full.md: all 50,000 training and
# 10,000 test images, full-width ResNet-20 with option-B shortcuts (so that
# the binary runs can start from the dense SGD model), seed $SEED, $EPOCHS
# epochs with a cosine step size for every run from scratch (the binary runs:
# BIN_EPOCHS, below). Each run is an ordinary
# cmd/cifar run in $RUNS/<name>; a finished run (summary.json present) is
# skipped and an interrupted one resumed, so the script can be re-run until
# every listed run is done.
#
# Usage: scripts/cifar_full.sh NAME...   (default: all, in the order below)
# Environment: DATA (default /tmp/cifar10, built with
# ../shared/data/cifar10/prepare when missing), RUNS (default runs/full),
# EPOCHS (default 40), SEED (default 1), THREADS (default 0: all cores),
# BIN_EPOCHS (default 15): the binary runs (proxgen-binary, proxquant, bc)
# fine-tune the dense SGD model for BIN_EPOCHS epochs at a constant step
# size, hard-quantizing after 2/3 of them (H epochs). Their λ is the
# paper's pull towards ±1 spread over this budget: the paper's Σ_t λ_t over
# 200 epochs of 390 steps with the homotopy λ_t = λ·epoch (epochs from 0; λ
# 5e-8 for ProxGen, 1e-4 for ProxQuant) equals ours over the H epochs
# before hard quantization when λ is multiplied by 19,900 / (H(H−1)/2):
# 442 for 15 epochs (H = 10), 255 for 20. proxgen-binary-lr1e-3 fine-tunes
# at a tenth of the step size with ten times the λ (ProxGen's pull per
# step is α·λ/d), since the first epoch at 0.01 costs the dense model 19
# points of test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-/tmp/cifar10}
RUNS=${RUNS:-runs/full}
EPOCHS=${EPOCHS:-40}
SEED=${SEED:-1}
THREADS=${THREADS:-0}
BIN=${BIN:-$(mktemp -d)/cifar}

if [ ! -d "$DATA/cifar-10-batches-bin" ]; then
	../shared/data/cifar10/prepare "$DATA" >/dev/null
fi
go build -o "$BIN" ./cmd/cifar

common=(-data "$DATA" -model resnet20 -shortcut B -width 1 -seed "$SEED" -threads "$THREADS"
	-progress lines -json)
scratch="-epochs $EPOCHS -schedule cosine" # the runs from scratch

# flags of each run (besides the common ones)
BIN_EPOCHS=${BIN_EPOCHS:-15}
hard=$((BIN_EPOCHS * 2 / 3))
[ "$hard" -ge 2 ] || { echo "BIN_EPOCHS must be at least 3" >&2; exit 2; }
scale() { awk -v l="$1" -v h="$hard" 'BEGIN { printf "%.3g", l * 19900 / (h * (h - 1) / 2) }'; }

declare -A FLAGS=(
	[sgd]="$scratch -optimizer sgd -lr 0.1 -momentum 0.9 -wd 5e-4"
	[adam]="$scratch -optimizer adam -lr 1e-3"
	[proxgen-l12]="$scratch -optimizer proxgen -reg l12 -lambda ${LAMBDA_L12:-4}"
	[proxgen-l12-lambda2]="$scratch -optimizer proxgen -reg l12 -lambda 2"
	[subgrad-l12]="$scratch -optimizer subgrad -reg l12 -lambda ${LAMBDA_L12:-4}"
	[proxgen-l0]="$scratch -optimizer proxgen -reg l0 -lambda ${LAMBDA_L0:-256}"
	[proxgen-gl21]="$scratch -optimizer proxgen -reg gl21 -lambda ${LAMBDA_GL21:-200}"
	[proxgen-binary]="-optimizer proxgen -reg bin-l1 -lambda ${LAMBDA_BIN:-$(scale 5e-8)} -lr 0.01 -schedule const -epochs $BIN_EPOCHS -weights $RUNS/sgd/model.safetensors"
	[proxgen-binary-lr1e-3]="-optimizer proxgen -reg bin-l1 -lambda ${LAMBDA_BIN_SMALL:-$(scale 5e-7)} -lr 1e-3 -schedule const -epochs $BIN_EPOCHS -weights $RUNS/sgd/model.safetensors"
	[proxquant]="-optimizer proxquant -lambda ${LAMBDA_PQ:-$(scale 1e-4)} -schedule const -epochs $BIN_EPOCHS -weights $RUNS/sgd/model.safetensors"
	[bc]="-optimizer bc -schedule const -epochs $BIN_EPOCHS -weights $RUNS/sgd/model.safetensors"
)
ORDER=(sgd adam proxgen-l12 proxgen-binary proxgen-gl21 subgrad-l12 proxgen-l12-lambda2 proxgen-l0 proxquant bc proxgen-binary-lr1e-3)

names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${ORDER[@]}")
for name in "${names[@]}"; do
	flags=${FLAGS[$name]:?unknown run $name (one of: ${ORDER[*]})}
	out=$RUNS/$name
	if [ -f "$out/summary.json" ]; then
		echo "$name: done ($out/summary.json)"
		continue
	fi
	resume=()
	[ -d "$out" ] && resume=(-resume)
	mkdir -p "$out"
	echo "$name: $BIN ${common[*]} $flags -out $out ${resume[*]}"
	if [ ${#resume[@]} -eq 0 ]; then
		echo "go run ./cmd/cifar ${common[*]} $flags -out $out" >"$out/command.txt"
		git rev-parse --short=12 HEAD >"$out/commit.txt"
	fi
	# shellcheck disable=SC2086
	"$BIN" "${common[@]}" $flags -out "$out" "${resume[@]}" >>"$out/stdout.jsonl" 2>>"$out/stderr.log"
done
