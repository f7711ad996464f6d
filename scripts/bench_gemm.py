#!/usr/bin/env python3
"""Time numpy's float32 matrix multiplication (OpenBLAS sgemm) as the peer of
`bench gemm`.

For each size it multiplies random float32 matrices with numpy.matmul,
which calls cblas_sgemm of the BLAS numpy is linked against, after warm-up
runs, and prints the best and the median wall time of --reps repetitions
and the least process CPU time of one, in the same JSON keys as
`go run ./cmd/bench gemm -json` (one object per line).

OpenBLAS reads its environment when it is loaded, so the script sets
OPENBLAS_NUM_THREADS (from --threads) and OPENBLAS_CORETYPE (default
SkylakeX, the AVX-512 kernels) before importing numpy unless they are set
already.

Usage:
  scripts/bench_gemm.py [--threads N] [--reps R] [--json] MxNxK[:tA][:tB] ...
e.g.
  scripts/bench_gemm.py --threads 1 1024x1024x1024 16x8192x144 144x8192x16:tA
"""
import argparse
import json
import os
import sys
import time


def parse_size(s):
    parts = s.split(":")
    try:
        m, n, k = (int(x) for x in parts[0].lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size {s!r} is not MxNxK[:tA][:tB]")
    flags = set(parts[1:])
    if not flags <= {"tA", "tB"} or min(m, n, k) < 1:
        raise argparse.ArgumentTypeError(f"size {s!r} is not MxNxK[:tA][:tB] with positive dimensions")
    return m, n, k, "tA" in flags, "tB" in flags


def blas_library():
    """Names the BLAS shared library loaded into this process."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if ".so" in line}
    except OSError:
        return "unknown"
    for lib in sorted(libs):
        base = os.path.basename(lib)
        if "openblas" in base or "libblas" in base or "mkl" in base or "blis" in base:
            return lib
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", nargs="*", type=parse_size, default=[parse_size("1024x1024x1024")])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2, help="untimed repetitions (at least)")
    ap.add_argument("--warmup-time", type=float, default=0.2,
                    help="keep warming up for this many seconds, so the CPU clock settles")
    ap.add_argument("--coretype", default="SkylakeX")
    ap.add_argument("--json", action="store_true", help="print one JSON object per size")
    args = ap.parse_args()
    if args.threads < 1 or args.reps < 1 or args.warmup < 0:
        ap.error("--threads and --reps must be at least 1 and --warmup not negative")

    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OPENBLAS_CORETYPE", args.coretype)
    import numpy as np  # after the environment is set

    rng = np.random.default_rng(1)
    lib = None
    if not args.json:
        print(f"{'blas':<10} {'m':>6} {'n':>6} {'k':>6} {'transA':>6} {'transB':>6} {'threads':>7} "
              f"{'best_s':>12} {'best_GF/s':>10} {'median_s':>12} {'median_GF/s':>11} {'cpu_GF/s':>9}")
    for m, n, k, ta, tb in args.sizes:
        # Stored shapes as in bench gemm: A is k×m when transposed, B n×k.
        a = rng.uniform(-1, 1, (k, m) if ta else (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
        opa, opb = (a.T if ta else a), (b.T if tb else b)
        c = np.empty((m, n), np.float32)
        i, t0 = 0, time.perf_counter()
        while i < args.warmup or time.perf_counter() - t0 < args.warmup_time:
            np.matmul(opa, opb, out=c)
            i += 1
        times, cpu = [], []
        for _ in range(args.reps):
            c0 = time.process_time()
            t0 = time.perf_counter()
            np.matmul(opa, opb, out=c)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        times.sort()
        r = len(times)
        median = times[r // 2] if r % 2 else (times[r // 2 - 1] + times[r // 2]) / 2
        flops = 2.0 * m * n * k
        lib = lib or blas_library()
        res = {
            "op": "sgemm", "m": m, "n": n, "k": k, "transa": ta, "transb": tb,
            "threads": args.threads, "kernel": "openblas" if "openblas" in lib else os.path.basename(lib),
            "coretype": os.environ["OPENBLAS_CORETYPE"], "reps": args.reps, "stat": "best",
            "seconds": times[0], "gflops": flops / times[0] / 1e9,
            "median_seconds": median, "median_gflops": flops / median / 1e9,
            # Least process CPU time (all threads) of a repetition: steadier
            # than wall time on a shared machine; with several threads it
            # measures the work done, not the speed-up.
            "cpu_seconds": min(cpu), "cpu_gflops": flops / min(cpu) / 1e9 if min(cpu) > 0 else 0.0,
        }
        if args.json:
            print(json.dumps(res), flush=True)
        else:
            print(f"{res['kernel'][:10]:<10} {m:>6} {n:>6} {k:>6} {str(ta):>6} {str(tb):>6} {args.threads:>7} "
                  f"{times[0]:>12.6f} {res['gflops']:>10.1f} {median:>12.6f} {res['median_gflops']:>11.1f} {res['cpu_gflops']:>9.1f}", flush=True)
    if lib and "openblas" not in lib:
        print(f"bench_gemm.py: warning: numpy uses {lib}, not OpenBLAS", file=sys.stderr)


if __name__ == "__main__":
    main()
