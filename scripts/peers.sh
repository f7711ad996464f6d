# Shared set-up of the peers the benchmark scripts compare proxgen with
# (numpy/OpenBLAS and PyTorch). Sourced by bench.sh, bench_train.sh and
# bench_mem.sh after `cd` to the repository root; PYTHON must be set.
#
#   peers_python PKG...   installs python3-PKG with apt where `import PKG` fails
#   peers_openblas        makes OpenBLAS the system BLAS (see below)
#   peers_coretype        exports OPENBLAS_CORETYPE for the CPU
#   peers_report GOBENCH  prints which BLAS, oneDNN ISA and Go kernel run
#
# Debian's numpy and PyTorch call whatever libblas.so.3 the alternatives
# system selects. With only libblas3 installed that is the netlib reference
# BLAS, tens of times slower than an optimised one (PyTorch's LSTM ran at
# 191 tok/s against 1,500-1,900 with OpenBLAS). A user comparing would have
# an optimised BLAS, so the scripts install libopenblas0-pthread, which
# becomes the alternative automatically.

if [ "$(id -u)" -eq 0 ]; then peers_sudo=; else peers_sudo=sudo; fi

peers_python() {
	local missing=()
	for m in "$@"; do
		"$PYTHON" -c "import $m" 2>/dev/null || missing+=("python3-$m")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "peers: installing ${missing[*]} with apt" >&2
		$peers_sudo apt-get update -qq
		$peers_sudo apt-get install -y -qq "${missing[@]}"
	fi
}

# The libblas.so.3 the alternatives system selects (empty if none).
peers_system_blas() {
	update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | sed -n 's/^Value: //p'
}

peers_openblas() {
	if [ "$(uname -s)" != Linux ] || ! command -v update-alternatives >/dev/null; then
		return 0
	fi
	local cur
	cur=$(peers_system_blas)
	case $cur in
	*openblas*) return 0 ;;
	esac
	echo "peers: the system BLAS is ${cur:-unset} (not OpenBLAS); installing libopenblas0-pthread with apt" >&2
	$peers_sudo apt-get update -qq
	$peers_sudo apt-get install -y -qq libopenblas0-pthread
	cur=$(peers_system_blas)
	case $cur in
	*openblas*) ;;
	*)
		local lib
		lib=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu | grep openblas | head -n 1)
		if [ -z "$lib" ]; then
			echo "peers: libopenblas0-pthread did not register a libblas.so.3 alternative" >&2
			return 1
		fi
		$peers_sudo update-alternatives --set libblas.so.3-x86_64-linux-gnu "$lib"
		;;
	esac
	echo "peers: system BLAS now $(peers_system_blas)" >&2
}

# OpenBLAS picks its kernels by CPU model; on CPUs it does not know (Zen 4
# in OpenBLAS 0.3.21) it falls back to Haswell's AVX2 kernels although the
# CPU has AVX-512. Force the AVX-512 (SkylakeX) kernels where the CPU has
# AVX-512F, overriding an inherited OPENBLAS_CORETYPE unless
# PEERS_KEEP_CORETYPE=1.
peers_coretype() {
	if [ "${PEERS_KEEP_CORETYPE:-0}" = 1 ] && [ -n "${OPENBLAS_CORETYPE:-}" ]; then
		export OPENBLAS_CORETYPE
	elif grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
		export OPENBLAS_CORETYPE=SkylakeX
	else
		unset OPENBLAS_CORETYPE
	fi
	echo "peers: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset, OpenBLAS detects the CPU}" >&2
}

# peers_report GOBENCH [torch|numpy]: which GEMM kernel the Go side and which
# BLAS (and for PyTorch which oneDNN ISA) the peer uses (scripts/peers.py).
peers_report() {
	local kernel
	kernel=$("$1" gemm -m 64 -n 64 -k 64 -reps 1 -json | tail -n 1 | sed -n 's/.*"kernel":"\([^"]*\)".*/\1/p')
	echo "peers: Go GEMM kernel: ${kernel:-unknown}" >&2
	echo "peers: system libblas.so.3: $(peers_system_blas)" >&2
	"$PYTHON" scripts/peers.py "${2:-numpy}" >&2
}
