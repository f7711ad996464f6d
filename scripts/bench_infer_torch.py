#!/usr/bin/python3
"""PyTorch peer of nn/infer's BenchmarkPredict: eval-mode inference latency
and throughput of one model (torch.no_grad, batch-norm running statistics)
on a fixed random batch.

Prints one JSON line per (batch, threads) case with wall and process CPU time
per image, the figures BenchmarkPredict reports as ns/op, img/s and
cpu-ms/img:

    {"impl": "torch", "model": "resnet20", "batch": 1, "threads": 1,
     "ms_per_batch": 2.1, "img_per_s": 476.2, "cpu_ms_per_img": 2.1}

The model definitions are those of scripts/bench_torch.py.

Usage: /usr/bin/python3 scripts/bench_infer_torch.py [--model resnet20] [--min-time 1]
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torch import build  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet20")
    p.add_argument("--batches", default="1,64")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--min-time", type=float, default=1.0, help="seconds per case (at least)")
    args = p.parse_args()
    torch.manual_seed(1)
    model = build(args.model)
    model.eval()
    for batch in [int(b) for b in args.batches.split(",")]:
        x = torch.randn(batch, 3, 32, 32)
        for threads in [int(t) for t in args.threads.split(",")]:
            torch.set_num_threads(threads)
            with torch.no_grad():
                for _ in range(2):
                    model(x)
                n, t0, c0 = 0, time.perf_counter(), time.process_time()
                while n < 3 or time.perf_counter() - t0 < args.min_time:
                    torch.softmax(model(x), dim=1)
                    n += 1
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            print(json.dumps({
                "impl": "torch", "model": args.model, "batch": batch, "threads": threads,
                "ms_per_batch": round(1e3 * wall / n, 3),
                "img_per_s": round(n * batch / wall, 1),
                "cpu_ms_per_img": round(1e3 * cpu / (n * batch), 3),
            }), flush=True)


if __name__ == "__main__":
    main()
