#!/usr/bin/env bash
# Peak memory of CIFAR-10 training: `cmd/cifar` against PyTorch
# (scripts/cifar_torch.py), same protocol, side by side.
#
# Protocol (both sides): the whole data set (50,000 training and 10,000 test
# images) is loaded as uint8; training runs STEPS steps of batch 128 on the
# first STEPS*128 training images (one shuffled pass; random crop with
# padding 4 and horizontal flip; Adam, lr 1e-3, no regularizer), at THREADS
# threads; then the model is evaluated on all 10,000 test images in batches
# of 500 (cmd/cifar's default). STEPS=390 is one full epoch. Each run's peak
# resident set size is the high-water mark the kernel reports for the child
# process (getrusage RUSAGE_CHILDREN ru_maxrss), measured the same way for
# both sides; the runs alternate REPEAT times.
#
# Usage: scripts/bench_mem.sh [model ...]      (default: resnet20 vgg16)
# Environment: STEPS (100), THREADS (1), REPEAT (3), TEST (0: all 10,000
#   test images), DATA (CIFAR-10 folder; default ../shared/data/cifar10/
#   prepare's output, or cmd/cifar's download cache when that is missing),
#   PYTHON (/usr/bin/python3), OUT (directory for the JSON lines).
# Quick check of every path: STEPS=2 TEST=500 REPEAT=1 scripts/bench_mem.sh resnet20
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS=${STEPS:-100}
THREADS=${THREADS:-1}
REPEAT=${REPEAT:-3}
TEST=${TEST:-0}
PYTHON=${PYTHON:-/usr/bin/python3}
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
	models=(resnet20 vgg16)
fi
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

source scripts/peers.sh
peers_python torch numpy
peers_openblas
peers_coretype

if [ -z "${DATA:-}" ]; then
	if [ -x ../shared/data/cifar10/prepare ]; then
		DATA=$(../shared/data/cifar10/prepare /tmp/cifar10 | tail -n 1)
	else
		DATA=${XDG_CACHE_HOME:-$HOME/.cache}/proxgen/cifar10
	fi
fi
go build -o "$OUT/cifar" ./cmd/cifar
go build -o "$OUT/bench" ./cmd/bench
if [ ! -e "$DATA/cifar-10-batches-bin/test_batch.bin" ] && [ ! -e "$DATA/test_batch.bin" ]; then
	# cmd/cifar downloads the data set into DATA.
	"$OUT/cifar" -data "$DATA" -model resnet20 -width 0.25 -epochs 1 -train-subset 128 -test-subset 1 \
		-out "$OUT/download" -progress none >/dev/null
fi
peers_report "$OUT/bench" torch 2>&1 | tee "$OUT/peers.txt" >&2

# maxrss CMD...: runs CMD and prints its output's last line with the child's
# peak RSS and wall time added as JSON keys.
maxrss() {
	"$PYTHON" - "$@" <<'EOF'
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, text=True)
wall = time.perf_counter() - t
if p.returncode:
    sys.exit(f"bench_mem.sh: {sys.argv[1]} exited with {p.returncode}")
lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
rec = json.loads(lines[-1]) if lines else {}
# ru_maxrss is in KiB on Linux.
rec["child_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e6, 1)
rec["wall_s"] = round(wall, 2)
print(json.dumps(rec))
EOF
}

images=$((STEPS * 128))
for m in "${models[@]}"; do
	: >"$OUT/mem-go-$m.jsonl"
	: >"$OUT/mem-torch-$m.jsonl"
	for r in $(seq 1 "$REPEAT"); do
		echo "== $m run $r: go" >&2
		rm -rf "$OUT/run-$m"
		maxrss "$OUT/cifar" -data "$DATA" -no-download -model "$m" -optimizer adam -reg none -epochs 1 \
			-batch 128 -eval-batch 500 -train-subset "$images" -test-subset "$TEST" -threads "$THREADS" \
			-out "$OUT/run-$m" -progress none -json >>"$OUT/mem-go-$m.jsonl"
		echo "== $m run $r: torch" >&2
		maxrss "$PYTHON" -W ignore scripts/cifar_torch.py --data "$DATA" --model "$m" --epochs 1 \
			--batch 128 --eval-batch 500 --train-subset "$images" --test-subset "$TEST" \
			--threads "$THREADS" --json >>"$OUT/mem-torch-$m.jsonl"
	done
done

"$PYTHON" - "$OUT" "$STEPS" "$THREADS" "${models[@]}" <<'EOF'
import json, statistics, sys
out, steps, threads, models = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def col(path, key):
    return [json.loads(l)[key] for l in open(path) if l.strip()]
def spread(v):
    m = statistics.median(v)
    return f"{m:.0f}" if len(v) == 1 else f"{m:.0f} ({min(v):.0f}–{max(v):.0f})"
print("| model | peak RSS proxgen, MB | peak RSS PyTorch, MB | ratio | wall s proxgen | wall s PyTorch | runs |")
print("|---|---|---|---|---|---|---|")
for m in models:
    g = col(f"{out}/mem-go-{m}.jsonl", "child_peak_rss_mb")
    t = col(f"{out}/mem-torch-{m}.jsonl", "child_peak_rss_mb")
    gw = col(f"{out}/mem-go-{m}.jsonl", "wall_s")
    tw = col(f"{out}/mem-torch-{m}.jsonl", "wall_s")
    print(f"| {m} | {spread(g)} | {spread(t)} | **{statistics.median(g) / statistics.median(t):.2f}×** |"
          f" {spread(gw)} | {spread(tw)} | {len(g)}+{len(t)} |")
print(f"\n{steps} training steps of batch 128 at {threads} thread(s), whole data set loaded as uint8, then the")
print(f"test evaluation in batches of 500; median (range) over the runs in {out}. Peak RSS = the child's")
print("ru_maxrss (MB = 10^6 bytes); ratio = proxgen / PyTorch medians (< 1: proxgen needs less).")
EOF
