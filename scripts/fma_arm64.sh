#!/usr/bin/env bash
# Lists the functions of proxgen's non-test code in which the Go compiler
# fuses a float multiply and add into one instruction (FMADD, FMSUB,
# FNMADD, FNMSUB) on arm64: there such expressions round once where amd64
# builds (GOAMD64=v1) round twice. Go fuses x*y+z on arm64 unless the
# product is converted explicitly, float32(x*y)+z, which is how the Go
# loops that assembly kernels must match bit for bit are written.
#
#   scripts/fma_arm64.sh [packages]     (default ./...)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pkgs=${*:-./...}
for pkg in $(GOOS=linux GOARCH=arm64 go list $pkgs); do
	out="$tmp/$(echo "$pkg" | tr / _).o"
	GOOS=linux GOARCH=arm64 go build -o "$out" "$pkg" 2>/dev/null || continue
	[ -s "$out" ] || continue
	go tool objdump "$out" 2>/dev/null | awk -v pkg="$pkg" '
		/^TEXT /{fn=$2; next}
		{for (i = 1; i <= NF; i++) if ($i ~ /^F(N)?M(ADD|SUB)(S|D)$/) n[fn]++}
		END {for (f in n) printf "%4d  %s\n", n[f], f}'
done | grep -v '\.abi0' | sort -k2 -u
