#!/usr/bin/env bash
# proxgen against its peers, side by side.
#
#   scripts/bench.sh [gemm]     blas.Sgemm vs OpenBLAS sgemm (numpy)
#   scripts/bench.sh train ...  training throughput vs PyTorch (bench_train.sh)
#   scripts/bench.sh all        both
#
# The gemm part runs `bench gemm` (Go) and scripts/bench_gemm.py (numpy
# linked to OpenBLAS, OPENBLAS_CORETYPE=SkylakeX) at the same sizes and
# thread counts, alternating REPEAT times because the machine is shared, and
# prints the best GFLOP/s of each and the ratio Go/OpenBLAS.
#
# Environment: THREADS ("1 2"), REPS (20 timed repetitions per run),
#   REPEAT (3), SIZES (MxNxK[:tA][:tB] ...; default the square sizes and the
#   GEMMs of ResNet-20's 3x3 convolutions), PYTHON (/usr/bin/python3),
#   OUT (directory for the JSON lines; default a temporary directory).
#
# The peers are set up by scripts/peers.sh: numpy is installed with apt if
# missing, and OpenBLAS (libopenblas0-pthread) when the system BLAS is
# Debian's reference BLAS; OPENBLAS_CORETYPE=SkylakeX on AVX-512 CPUs. The
# script prints the BLAS numpy loads and the Go GEMM kernel.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-gemm}
case $what in
gemm) ;;
train)
	shift
	exec scripts/bench_train.sh "$@"
	;;
all)
	"$0" gemm
	exec scripts/bench_train.sh
	;;
*)
	echo "usage: scripts/bench.sh [gemm|train [model ...]|all]" >&2
	exit 2
	;;
esac

THREADS=${THREADS:-1 2}
REPS=${REPS:-20}
REPEAT=${REPEAT:-3}
PYTHON=${PYTHON:-/usr/bin/python3}
# Square sizes, then ResNet-20 conv GEMMs as autograd.Conv2d issues them:
# forward W·col (transposed filter matrix), weight gradient dY·colT and
# input gradient Wᵀ·dY, for 16, 32 and 64 channels at 32², 16² and 8².
SIZES=${SIZES:-1024x1024x1024 2048x2048x2048
16x1024x144:tA 32x512x288:tA 64x512x576:tA
16x144x1024 32x288x512 64x576x512
144x1024x16:tA 288x512x32:tA 576x512x64:tA
16x8192x144 64x4096x576}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

source scripts/peers.sh
peers_python numpy
peers_openblas
peers_coretype

go build -o "$OUT/bench" ./cmd/bench
peers_report "$OUT/bench" numpy
: >"$OUT/go.jsonl"
: >"$OUT/openblas.jsonl"
for r in $(seq 1 "$REPEAT"); do
	for th in $THREADS; do
		echo "== run $r, $th thread(s)" >&2
		for s in $SIZES; do
			IFS=x read -r m n rest <<<"${s%%:*}"
			k=${rest}
			flags=()
			case $s in *:tA*) flags+=(-transa) ;; esac
			case $s in *:tB*) flags+=(-transb) ;; esac
			"$OUT/bench" gemm -m "$m" -n "$n" -k "$k" "${flags[@]}" -threads "$th" -reps "$REPS" -json |
				tail -n 1 >>"$OUT/go.jsonl"
			"$PYTHON" scripts/bench_gemm.py --threads "$th" --reps "$REPS" --json "$s" |
				tail -n 1 >>"$OUT/openblas.jsonl"
		done
	done
done

"$PYTHON" - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def best(path, field):
    rows = {}
    for line in open(path):
        r = json.loads(line)
        key = (r["m"], r["n"], r["k"], r["transa"], r["transb"], r["threads"])
        rows[key] = max(rows.get(key, 0.0), r.get(field, 0.0))
    return rows
go, ob = best(f"{out}/go.jsonl", "gflops"), best(f"{out}/openblas.jsonl", "gflops")
gc, oc = best(f"{out}/go.jsonl", "cpu_gflops"), best(f"{out}/openblas.jsonl", "cpu_gflops")
ratio = lambda a, b: f"{a / b:6.2f}" if a and b else "   n/a"
print(f"{'m':>5} {'n':>5} {'k':>5} {'op':>3} {'thr':>3} | {'proxgen':>8} {'OpenBLAS':>8} {'ratio':>6} | {'proxgen':>8} {'OpenBLAS':>8} {'ratio':>6}")
print(f"{'':23} | {'GFLOP/s (wall, best)':^24} | {'GFLOP/s per CPU second':^24}")
for key in go:
    m, n, k, ta, tb, th = key
    op = ("T" if ta else "N") + ("T" if tb else "N")
    print(f"{m:>5} {n:>5} {k:>5} {op:>3} {th:>3} | {go[key]:8.1f} {ob.get(key, 0):8.1f} {ratio(go[key], ob.get(key))} | "
          f"{gc.get(key, 0):8.1f} {oc.get(key, 0):8.1f} {ratio(gc.get(key), oc.get(key))}")
print(f"\nbest of the runs in {out}; ratio = proxgen / OpenBLAS. The wall rate is the speed;")
print("the rate per CPU second is steadier on a busy machine but, with several threads, measures work, not speed-up.")
PY
