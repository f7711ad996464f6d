#!/usr/bin/python3
"""Prints which BLAS (and, for PyTorch, which ATen level and oneDNN ISA) a
peer of the benchmarks uses, as it runs in this environment.

Usage: /usr/bin/python3 scripts/peers.py numpy|torch   (called by peers.sh)
"""

import os
import subprocess
import sys


def loaded_blas(sep=", "):
    """The BLAS libraries this process has mapped, resolved, joined with sep
    (bench_torch.py's JSON uses it too)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return "unknown"
    hits = sorted({os.path.realpath(p) for p in libs if "blas" in os.path.basename(p).lower()})
    return sep.join(hits) or "none found (statically linked?)"


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "numpy"
    coretype = os.environ.get("OPENBLAS_CORETYPE", "(OpenBLAS's own detection)")
    if what == "numpy":
        import numpy as np
        a = np.ones((64, 64), np.float32)
        a @ a
        print(f"peers: numpy {np.__version__}: BLAS {loaded_blas()}, OPENBLAS_CORETYPE={coretype}")
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    from bench_torch import blas_library, cpu_capability
    print(f"peers: PyTorch {torch.__version__}: BLAS {blas_library()}, OPENBLAS_CORETYPE={coretype}; "
          f"ATen CPU capability {cpu_capability()}")
    # oneDNN names the ISA it dispatches to in its verbose output.
    code = "import torch; torch.nn.functional.conv2d(torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3))"
    env = dict(os.environ, DNNL_VERBOSE="1", ONEDNN_VERBOSE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout
    isa = [line.split("isa:", 1)[1] for line in out.splitlines() if ",isa:" in line]
    print(f"peers: PyTorch oneDNN (mkldnn {'on' if torch.backends.mkldnn.is_available() else 'off'}): "
          f"ISA {isa[0] if isa else 'not reported'}, "
          f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', '(unset)')}")


if __name__ == "__main__":
    main()
