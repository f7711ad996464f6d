#!/usr/bin/python3
"""PyTorch peer of a `cmd/cifar` run, for comparing peak memory (and speed).

Trains one of bench_torch.py's models on CIFAR-10 with the data pipeline of
proxgen's datasets/cifar10 and cmd/cifar, then evaluates it on the test set:

  - all five training files and the test file are read into uint8 tensors
    (N x 3 x 32 x 32), as datasets/cifar10 keeps them;
  - every epoch visits the (first --train-subset) training images in a
    random order in batches of --batch (the last partial batch dropped);
  - each batch is augmented as the reference code (and cmd/cifar) does:
    zero padding of 4, a random 32 x 32 crop and a random horizontal flip,
    on the uint8 images, then normalised ((v/255 - mean) / std per channel)
    into one float32 batch buffer reused for every batch;
  - Adam (lr 1e-3, no weight decay) as `cmd/cifar -optimizer adam -reg none`;
  - evaluation in eval mode without autograd in batches of --eval-batch.

It prints a readable line to stderr and, as the last stdout line, a JSON
object with the peak resident set size of the process (VmHWM).

Usage: /usr/bin/python3 scripts/cifar_torch.py --data DIR --model resnet20 --threads 1
(DIR holds cifar-10-batches-bin or its files, as cmd/cifar's -data.)
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torch import build, peak_rss_mb  # noqa: E402

TRAIN_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)]
TEST_FILE = "test_batch.bin"
RECORD = 1 + 3 * 32 * 32
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2023, 0.1994, 0.2010)
PAD = 4


def resolve(data):
    for d in (os.path.join(data, "cifar-10-batches-bin"), data):
        if os.path.exists(os.path.join(d, TEST_FILE)):
            return d
    raise SystemExit(f"cifar_torch.py: no {TEST_FILE} in {data} or {data}/cifar-10-batches-bin")


def load(paths):
    """Reads binary CIFAR-10 files into uint8 images (N,3,32,32) and labels."""
    sizes = [os.path.getsize(p) for p in paths]
    for p, s in zip(paths, sizes):
        if s == 0 or s % RECORD:
            raise SystemExit(f"cifar_torch.py: {p}: size {s} is not a positive multiple of {RECORD}")
    n = sum(sizes) // RECORD
    images = torch.empty((n, 3, 32, 32), dtype=torch.uint8)
    labels = torch.empty(n, dtype=torch.int64)
    i = 0
    for p in paths:
        rec = np.fromfile(p, dtype=np.uint8).reshape(-1, RECORD)
        k = len(rec)
        labels[i:i + k] = torch.from_numpy(rec[:, 0].astype(np.int64))
        images[i:i + k] = torch.from_numpy(rec[:, 1:].reshape(k, 3, 32, 32))
        i += k
        del rec
    return images, labels


class Batcher:
    """Turns uint8 images into normalised float32 batches in reused buffers."""

    def __init__(self, batch):
        self.raw = torch.empty((batch, 3, 32, 32), dtype=torch.uint8)
        self.out = torch.empty((batch, 3, 32, 32), dtype=torch.float32)
        self.mean = torch.tensor(MEAN).view(1, 3, 1, 1)
        self.std = torch.tensor(STD).view(1, 3, 1, 1)

    def make(self, images, idx, gen=None):
        n = len(idx)
        raw, out = self.raw[:n], self.out[:n]
        if gen is None:
            torch.index_select(images, 0, idx, out=raw)
        else:
            padded = F.pad(images[idx], (PAD, PAD, PAD, PAD))
            offs = torch.randint(0, 2 * PAD + 1, (n, 2), generator=gen).tolist()
            flips = torch.rand(n, generator=gen).lt(0.5).tolist()
            for j in range(n):
                top, left = offs[j]
                crop = padded[j, :, top:top + 32, left:left + 32]
                raw[j].copy_(crop.flip(-1) if flips[j] else crop)
        out.copy_(raw).div_(255).sub_(self.mean).div_(self.std)
        return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="CIFAR-10 folder (holding cifar-10-batches-bin or its files)")
    p.add_argument("--model", default="resnet20", choices=["resnet20", "resnet56", "vgg16", "resnet34"])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--eval-batch", type=int, default=500)
    p.add_argument("--train-subset", type=int, default=0, help="train on the first N images (0: all)")
    p.add_argument("--test-subset", type=int, default=0, help="evaluate on the first N images (0: all)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="only print the JSON line")
    args = p.parse_args(argv)
    for flag in ("epochs", "batch", "eval_batch", "threads"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be at least 1")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    d = resolve(args.data)
    train_x, train_y = load([os.path.join(d, f) for f in TRAIN_FILES])
    test_x, test_y = load([os.path.join(d, TEST_FILE)])
    # Subsets are views: the whole data set stays loaded, as in cmd/cifar.
    n_train = len(train_x) if args.train_subset <= 0 else min(args.train_subset, len(train_x))
    n_test = len(test_x) if args.test_subset <= 0 else min(args.test_subset, len(test_x))
    if n_train < args.batch:
        p.error(f"{n_train} training images, fewer than one batch of {args.batch}")

    model = build(args.model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(args.seed)
    batcher = Batcher(max(args.batch, args.eval_batch))

    steps, t0 = 0, time.perf_counter()
    cpu0 = time.process_time()
    for _ in range(args.epochs):
        model.train()
        order = torch.randperm(n_train, generator=gen)
        for b in range(n_train // args.batch):
            idx = order[b * args.batch:(b + 1) * args.batch]
            x = batcher.make(train_x, idx, gen)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), train_y[idx])
            loss.backward()
            opt.step()
            steps += 1
    train_s = time.perf_counter() - t0
    train_cpu = time.process_time() - cpu0

    model.eval()
    correct, loss_sum = 0, 0.0
    with torch.no_grad():
        for lo in range(0, n_test, args.eval_batch):
            idx = torch.arange(lo, min(lo + args.eval_batch, n_test))
            logits = model(batcher.make(test_x, idx))
            y = test_y[idx]
            loss_sum += float(F.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(1) == y).sum())

    res = {
        "impl": "torch",
        "model": args.model,
        "threads": args.threads,
        "batch": args.batch,
        "eval_batch": args.eval_batch,
        "train_images": n_train,
        "test_images": n_test,
        "steps": steps,
        "train_seconds": round(train_s, 3),
        "img_per_s": round(steps * args.batch / train_s, 2),
        "cpu_ms_per_step": round(1000 * train_cpu / steps, 3),
        "test_loss": round(loss_sum / n_test, 4),
        "test_acc": round(correct / n_test, 4),
        "peak_rss_mb": peak_rss_mb(),
        "kernel": f"torch-{torch.__version__}",
    }
    if not args.json:
        print(f"torch {args.model}: {steps} steps, {res['img_per_s']:.1f} img/s, test acc "
              f"{100 * res['test_acc']:.2f}%, peak RSS {res['peak_rss_mb']:.1f} MB", file=sys.stderr)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
