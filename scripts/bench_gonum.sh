#!/usr/bin/env bash
# proxgen's pure-Go GEMM kernel against gonum's Sgemm, one thread, m=n=k=N.
#
#   scripts/bench_gonum.sh            N=1024, REPEAT=3 rounds, REPS=5 per round
#
# gonum (GONUM_VERSION, default v0.17.0) is fetched through the Go module
# proxy into a temporary module outside proxgen's go.mod, which replaces
# proxgen with this checkout. The program scripts/gonumcmp/main.go is built
# twice, both with -tags purego, so that proxgen is pure Go (its "generic"
# kernel and Go packing): with -tags noasm as well (gonum's pure-Go
# kernels) and without (gonum's amd64 assembly). Each round runs the two binaries
# one after the other, and each binary alternates proxgen and gonum, so the
# ratios compare runs made moments apart on a shared machine.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-1024}
REPEAT=${REPEAT:-3}
REPS=${REPS:-5}
KERNEL=${KERNEL:-generic}
GONUM_VERSION=${GONUM_VERSION:-v0.17.0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$repo/scripts/gonumcmp/main.go" "$tmp/main.go"
sed -i '1{/^\/\/go:build ignore$/d}' "$tmp/main.go"
cd "$tmp"
cat >go.mod <<MOD
module gonumcmp

go 1.24

require (
	github.com/proxgen/proxgen v0.0.0
	gonum.org/v1/gonum $GONUM_VERSION
)

replace github.com/proxgen/proxgen => $repo
MOD
export GOFLAGS=-mod=mod
go mod tidy >/dev/null 2>&1 || go mod download
go build -tags 'noasm purego' -o noasm.bin .
go build -tags purego -o asm.bin .
go version
echo "gonum $GONUM_VERSION, proxgen kernel $KERNEL, N=$N, one thread; $REPEAT rounds of $REPS alternating repetitions"
for r in $(seq "$REPEAT"); do
	echo "-- round $r"
	./noasm.bin -n "$N" -reps "$REPS" -kernel "$KERNEL" -gonum gonum-noasm
	./asm.bin -n "$N" -reps "$REPS" -kernel "$KERNEL" -gonum gonum-asm
done
