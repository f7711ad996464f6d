#!/usr/bin/python3
"""PyTorch peer of a `cmd/cifar` run: peak memory, speed, and the dense recipes.

Trains one of bench_torch.py's models on CIFAR-10 with the data pipeline of
proxgen's datasets/cifar10 and cmd/cifar, evaluating it on the test set
after every epoch as cmd/cifar does:

  - all five training files and the test file are read into uint8 tensors
    (N x 3 x 32 x 32), as datasets/cifar10 keeps them;
  - every epoch visits the (first --train-subset) training images in a
    random order in batches of --batch, the last partial batch dropped
    (cmd/cifar: DropLast, 390 updates per epoch on 50,000 images);
  - each batch is augmented as the reference code (and cmd/cifar) does:
    zero padding of 4, a random 32 x 32 crop and a random horizontal flip,
    on the uint8 images, then normalised ((v/255 - mean) / std per channel,
    mean 0.4914, 0.4822, 0.4465, std 0.2023, 0.1994, 0.2010, in float32 as
    the engine's look-up table) into one float32 batch buffer reused for
    every batch;
  - evaluation in eval mode (running batch-norm statistics) without
    autograd in batches of --eval-batch on the (first --test-subset) test
    images: mean cross-entropy and accuracy, as cmd/cifar.

It prints a readable line per epoch to stderr and, as the last stdout line,
a JSON object with the peak resident set size of the process (VmHWM) and
the final test metrics. With --out FILE it also writes one JSON line per
epoch with the keys of cmd/cifar's metrics.jsonl (epoch, step, loss,
train_acc, test_loss, test_acc, lr, seconds, eval_seconds, img_per_s), so
the two runs can be compared epoch by epoch.

Default: Adam (lr 1e-3, no weight decay, constant step size), option-A
ResNet, PyTorch's random streams for the data order: the memory comparison
of scripts/bench_mem.sh, as `cmd/cifar -optimizer adam -reg none`.

The dense SGD recipe of scripts/cifar_full.sh (run "sgd"),

  cmd/cifar -model resnet20 -shortcut B -width 1 -seed 1 -epochs 40
            -schedule cosine -optimizer sgd -lr 0.1 -momentum 0.9 -wd 5e-4

is `--model resnet20 --shortcut B --seed 1 --epochs 40 --schedule cosine
--optimizer sgd --lr 0.1 --momentum 0.9 --wd 5e-4 --sampling engine`. What
was matched, from the engine's code:

  - network (nn/models): akamaster resnet20, widths 16/32/64, option-B
    shortcuts (1x1 conv without bias + BatchNorm2d, only in the two blocks
    that downsample), global average pooling, Linear(64, 10) with bias;
    batch norm eps 1e-5, momentum 0.1, unbiased running variance, as
    PyTorch. 272,474 parameters.
  - initialisation (nn/models/resnet.go, nn/init.go): kaiming_normal_
    (N(0, 2/fan_in)) on every conv and linear weight, the 1x1 shortcut
    convolutions included; linear bias U(+-1/sqrt(64)); batch norm weight 1,
    bias 0. Same distributions here (bench_torch.py's _weights_init), not
    the same numbers: the engine draws from Go's PCG. For the same numbers,
    write the engine's initial weights with
      go run scripts/engine_init/main.go -model resnet20 -shortcut B -seed 1 -out init.safetensors
    and pass --init init.safetensors (any safetensors state dict with this
    model's keys works). The other way round, --save-init FILE writes this
    script's initial weights for `cmd/cifar -weights FILE`, and --save FILE
    the final weights for `cmd/cifar -eval-only -weights FILE`.
  - SGD (optim.SGDConfig, optim/proxgen.go): PyTorch's heavy-ball form
    v = mu*v + (g + wd*w); w -= lr*v (dampening 0, v = g + wd*w at the
    first update), no Nesterov, weight decay coupled (L2 added to the
    gradient) on every parameter: conv and linear weights, the linear bias
    and the batch-norm weight and bias (optim.SplitGroups gives both of
    its groups the same -wd). That is torch.optim.SGD(model.parameters(),
    lr, momentum, weight_decay=wd), used here.
  - cosine (optim.Cosine, built by optim.ScheduleSpec.Build): per update,
    not per epoch, no warm-up, floor 0: update t = 1..T of the run uses
    lr_t = lr * (1 + cos(pi * (t-1) / T)) / 2 with T = epochs * updates per
    epoch (15,600 for 40 epochs of 390), so the first update uses lr and
    the last lr * (1 + cos(pi * (T-1)/T)) / 2 = lr * sin(pi/(2T))^2 (1.0e-9
    for lr 0.1 and T = 15,600); it reaches 0 only after the run. Set here
    in closed form before every update (PyTorch's CosineAnnealingLR(T_max=T)
    stepped per update gives the same values up to rounding). The metric
    "lr" of an epoch is the step size of its first update, as in
    metrics.jsonl.
  - data: batch 128, last partial batch dropped, reshuffled every epoch;
    --sampling engine reproduces the engine's order and augmentation
    exactly (datasets/cifar10 Permutation and SampleAugment: Go's
    math/rand/v2 PCG-DXSM seeded through splitmix64 from --seed, the epoch
    and the image index, reimplemented here), so with the same --seed the
    network sees the same images, crops and flips, batch by batch, as
    cmd/cifar's; --sampling torch (the default) draws them from
    torch.Generator.
  - loss: mean cross-entropy of the batch; "loss" and "train_acc" of an
    epoch are the sample-weighted mean of the batch losses and the
    fraction of correctly classified augmented images (training-mode
    forward, before the update), as cmd/cifar.
  - "seconds" is the time of the epoch's training steps (batch
    preparation included; cmd/cifar prepares batches in the background),
    "eval_seconds" the time of the evaluation.

Checked against the engine (throw-away Go programs calling its packages):
the permutations and crops/flips of --sampling engine equal
cifar10.Permutation and cifar10.SampleAugment, and the first batch's
input tensor is bitwise the engine's; the network has the engine's
parameter names, shapes and order, and loads its initial weights; from
them (--init) the first batch's loss is bitwise the engine's (3.9269135
on the first 128 images, seed 1), and after one SGD update the gradients
agree to float32 rounding (within 4e-3 relative in the first layers,
where PyTorch float32 is itself 2e-3 from float64 on that batch; 6e-6 in
the last conv, 3e-7 in the linear layer); cmd/cifar -eval-only of a
--save file gives the same test loss as this script; the cosine step
sizes equal optim.Cosine's bitwise at the updates checked (1, 2, 391,
7800, 7801, 15599 of 15,600) and to 5e-9 relative at the last one (Go's
math.Cos against C's cos, where 1 + cos cancels).

What is not the same: the initial weights' random numbers (without
--init), and the floating-point rounding of convolutions and batch norm
(PyTorch's kernels against the engine's), which, as between any two
float32 implementations, makes the runs drift apart after a few updates
even from the same initial weights and batches: their final accuracies
are two samples of the same recipe, to be compared with the seed-to-seed
spread (a few tenths of a point), not bit for bit.

Usage:
  /usr/bin/python3 scripts/cifar_torch.py --data DIR --model resnet20 --threads 1
  /usr/bin/python3 scripts/cifar_torch.py --data DIR --model resnet20 --shortcut B \\
      --seed 1 --epochs 40 --schedule cosine --optimizer sgd --lr 0.1 \\
      --momentum 0.9 --wd 5e-4 --sampling engine --threads 2 --out sgd.jsonl
(DIR holds cifar-10-batches-bin or its files, as cmd/cifar's -data.)
"""

import argparse
import json
import math
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
M64 = (1 << 64) - 1


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


# ---------------------------------------------------------------------------
# The engine's data order and augmentation (datasets/cifar10/loader.go).


class PCG:
    """Go's math/rand/v2 PCG: a 128-bit LCG with the DXSM output function."""

    MUL = (2549297995355413924 << 64) | 4865540595714422341
    INC = (6364136223846793005 << 64) | 1442695040888963407
    M128 = (1 << 128) - 1

    def __init__(self, seed1, seed2):
        self.state = (seed1 << 64) | seed2

    def uint64(self):
        s = (self.state * self.MUL + self.INC) & self.M128
        self.state = s
        hi, lo = s >> 64, s & M64
        hi ^= hi >> 32
        hi = (hi * 0xda942042e4dd58b5) & M64
        hi ^= hi >> 48
        return (hi * (lo | 1)) & M64

    def bounded(self, n):
        """datasets/cifar10's boundedUint: uniform in [0, n) by rejection."""
        limit = ((1 << 64) - n) % n
        while True:
            v = self.uint64()
            if v >= limit:
                return v % n


def splitmix(x):
    x = (x + 0x9e3779b97f4a7c15) & M64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)


def mix(a, b):
    return splitmix(splitmix(a & M64) ^ (b & M64))


def engine_permutation(n, seed, epoch):
    """cifar10.Permutation: the order in which the engine's epoch visits n images."""
    src = PCG(mix(seed, 0x5eed5eed5eed5eed), mix(epoch, 0x9e3779b97f4a7c15))
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = src.bounded(i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def engine_augment(seed, epoch, idx, pad=PAD):
    """cifar10.SampleAugment: (top, left, flip) of image idx in epoch."""
    src = PCG(mix(seed, epoch), mix(idx, 0xa0761d6478bd642f))
    span = 2 * pad + 1
    top = src.bounded(span)
    left = src.bounded(span)
    flip = (src.uint64() >> 63) == 1
    return top, left, flip


# ---------------------------------------------------------------------------


class Batcher:
    """Turns uint8 images into normalised float32 batches in reused buffers."""

    def __init__(self, batch):
        self.raw = torch.empty((batch, 3, 32, 32), dtype=torch.uint8)
        self.out = torch.empty((batch, 3, 32, 32), dtype=torch.float32)
        self.mean = torch.tensor(MEAN).view(1, 3, 1, 1)
        self.std = torch.tensor(STD).view(1, 3, 1, 1)

    def make(self, images, idx, gen=None, aug=None):
        """Batch of images[idx]: plain (gen and aug None), augmented with
        offsets and flips drawn from gen, or with aug = (offsets, flips)."""
        n = len(idx)
        raw, out = self.raw[:n], self.out[:n]
        if gen is None and aug is None:
            torch.index_select(images, 0, idx, out=raw)
        else:
            padded = F.pad(images[idx], (PAD, PAD, PAD, PAD))
            if aug is None:
                offs = torch.randint(0, 2 * PAD + 1, (n, 2), generator=gen).tolist()
                flips = torch.rand(n, generator=gen).lt(0.5).tolist()
            else:
                offs, flips = aug
            for j in range(n):
                top, left = offs[j]
                crop = padded[j, :, top:top + 32, left:left + 32]
                raw[j].copy_(crop.flip(-1) if flips[j] else crop)
        out.copy_(raw).div_(255).sub_(self.mean).div_(self.std)
        return out


def step_size(args, t, total):
    """The step size of update t (1..total) of the run."""
    if args.schedule == "cosine":
        return args.lr * (1 + math.cos(math.pi * (t - 1) / total)) / 2
    return args.lr


# ---------------------------------------------------------------------------
# safetensors (the engine's model files), without the safetensors package.

ST_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "F16": np.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in ST_DTYPES:
            raise SystemExit(f"cifar_torch.py: {path}: tensor {name}: dtype {info['dtype']} not supported")
        lo, hi = info["data_offsets"]
        a = np.frombuffer(data[lo:hi], dtype=ST_DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(a.copy())
    return out


def write_safetensors(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    names = {np.dtype(v): k for k, v in ST_DTYPES.items()}
    for name, t in tensors.items():
        a = np.ascontiguousarray(t.detach().cpu().numpy())
        b = a.tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def model_metadata(args):
    """The metadata keys of the engine's model files (nn/models.Spec)."""
    meta = {"model": args.model, "width": "1"}
    if args.model in ("resnet20", "resnet56"):
        meta["shortcut"] = args.shortcut
    return meta


def load_init(model, path):
    sd = read_safetensors(path)
    own = model.state_dict()
    missing, extra = sorted(set(own) - set(sd)), sorted(set(sd) - set(own))
    if missing or extra:
        raise SystemExit(f"cifar_torch.py: --init {path}: missing {missing[:5]}, unexpected {extra[:5]}")
    for k, v in own.items():
        if tuple(sd[k].shape) != tuple(v.shape):
            raise SystemExit(f"cifar_torch.py: --init {path}: {k} has shape {tuple(sd[k].shape)}, want {tuple(v.shape)}")
        sd[k] = sd[k].to(v.dtype)
    model.load_state_dict(sd, strict=True)


# ---------------------------------------------------------------------------


def evaluate(model, batcher, test_x, test_y, n_test, eval_batch):
    model.eval()
    correct, loss_sum = 0, 0.0
    with torch.no_grad():
        for lo in range(0, n_test, eval_batch):
            idx = torch.arange(lo, min(lo + eval_batch, n_test))
            logits = model(batcher.make(test_x, idx))
            y = test_y[idx]
            loss_sum += float(F.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(1) == y).sum())
    model.train()
    return loss_sum / n_test, correct / n_test


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="CIFAR-10 folder (holding cifar-10-batches-bin or its files)")
    p.add_argument("--model", default="resnet20", choices=["resnet20", "resnet56", "vgg16", "resnet34"])
    p.add_argument("--shortcut", default="A", type=str.upper, choices=["A", "B"],
                   help="shortcut of resnet20/resnet56: A (zero padding) or B (1x1 conv + BN), as cmd/cifar -shortcut")
    p.add_argument("--optimizer", default="adam", choices=["adam", "sgd"],
                   help="adam: torch.optim.Adam; sgd: torch.optim.SGD with heavy-ball momentum (cmd/cifar's sgd)")
    p.add_argument("--lr", type=float, default=None, help="base step size (default 1e-3 adam, 0.1 sgd)")
    p.add_argument("--momentum", type=float, default=0.9, help="sgd momentum")
    p.add_argument("--wd", type=float, default=None,
                   help="coupled weight decay on every parameter (default 0 adam, 5e-4 sgd, as cmd/cifar)")
    p.add_argument("--schedule", default="const", choices=["const", "cosine"],
                   help="step size: const, or cosine per update to 0 at the end of the run (cmd/cifar's cosine)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--eval-batch", type=int, default=500)
    p.add_argument("--train-subset", type=int, default=0, help="train on the first N images (0: all)")
    p.add_argument("--test-subset", type=int, default=0, help="evaluate on the first N images (0: all)")
    p.add_argument("--sampling", default="torch", choices=["torch", "engine"],
                   help="data order and augmentation: torch.Generator, or exactly the engine's for the same --seed")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=1, help="seed of the initial weights and of the data order")
    p.add_argument("--init", metavar="FILE", help="start from this safetensors state dict (e.g. the engine's initial weights)")
    p.add_argument("--save-init", metavar="FILE", help="write the initial weights as safetensors (for cmd/cifar -weights FILE)")
    p.add_argument("--save", metavar="FILE",
                   help="write the final weights as safetensors (for cmd/cifar -eval-only -weights FILE)")
    p.add_argument("--out", metavar="FILE", help="write one JSON line of metrics per epoch (keys of cmd/cifar's metrics.jsonl)")
    p.add_argument("--json", action="store_true", help="only print the JSON line")
    args = p.parse_args(argv)
    for flag in ("epochs", "batch", "eval_batch", "threads"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be at least 1")
    if args.lr is None:
        args.lr = 0.1 if args.optimizer == "sgd" else 1e-3
    if args.wd is None:
        args.wd = 5e-4 if args.optimizer == "sgd" else 0.0
    if not args.lr > 0 or args.wd < 0 or not 0 <= args.momentum < 1:
        p.error("--lr must be positive, --wd not negative and --momentum in [0, 1)")
    if args.seed < 0:
        p.error("--seed must not be negative")
    if args.shortcut != "A" and args.model not in ("resnet20", "resnet56"):
        p.error(f"--shortcut {args.shortcut} applies to resnet20 and resnet56 only")

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

    model = build(args.model, args.shortcut)
    if args.init:
        load_init(model, args.init)
    if args.save_init:
        write_safetensors(args.save_init, model.state_dict(), model_metadata(args))
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                              weight_decay=args.wd, dampening=0, nesterov=False)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.wd)
    gen = torch.Generator().manual_seed(args.seed)
    batcher = Batcher(max(args.batch, args.eval_batch))
    per_epoch = n_train // args.batch
    total = per_epoch * args.epochs
    out = open(args.out, "w") if args.out else None

    steps, train_s, train_cpu = 0, 0.0, 0.0
    test_loss = test_acc = float("nan")
    model.train()
    for epoch in range(args.epochs):
        t0, cpu0 = time.perf_counter(), time.process_time()
        if args.sampling == "engine":
            order = torch.tensor(engine_permutation(n_train, args.seed, epoch))
        else:
            order = torch.randperm(n_train, generator=gen)
        lr0 = step_size(args, steps + 1, total)
        loss_sum, correct, seen = 0.0, 0, 0
        for b in range(per_epoch):
            idx = order[b * args.batch:(b + 1) * args.batch]
            aug = None
            if args.sampling == "engine":
                a = [engine_augment(args.seed, epoch, i) for i in idx.tolist()]
                aug = ([(top, left) for top, left, _ in a], [f for _, _, f in a])
            x = batcher.make(train_x, idx, gen, aug)
            y = train_y[idx]
            for g in opt.param_groups:
                g["lr"] = step_size(args, steps + 1, total)
            opt.zero_grad()
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            loss.backward()
            opt.step()
            steps += 1
            loss_sum += float(loss) * len(idx)
            correct += int((logits.detach().argmax(1) == y).sum())
            seen += len(idx)
        secs = time.perf_counter() - t0
        train_s += secs
        train_cpu += time.process_time() - cpu0
        e0 = time.perf_counter()
        test_loss, test_acc = evaluate(model, batcher, test_x, test_y, n_test, args.eval_batch)
        rec = {
            "epoch": epoch + 1,
            "step": steps,
            "loss": loss_sum / seen,
            "train_acc": correct / seen,
            "test_loss": test_loss,
            "test_acc": test_acc,
            "lr": lr0,
            "seconds": round(secs, 3),
            "eval_seconds": round(time.perf_counter() - e0, 3),
            "img_per_s": round(seen / secs),
        }
        if out:
            out.write(json.dumps(rec) + "\n")
            out.flush()
        if not args.json:
            print(f"epoch {epoch + 1}/{args.epochs}  loss {rec['loss']:.4f}  train {100 * rec['train_acc']:.2f}%  "
                  f"test {100 * test_acc:.2f}% (loss {test_loss:.4f})  lr {lr0:.3g}  {secs:.1f} s  "
                  f"{rec['img_per_s']} img/s", file=sys.stderr)
    if out:
        out.close()
    if args.save:
        write_safetensors(args.save, model.state_dict(), model_metadata(args))

    res = {
        "impl": "torch",
        "model": args.model,
        "shortcut": args.shortcut,
        "optimizer": args.optimizer,
        "lr": args.lr,
        "momentum": args.momentum if args.optimizer == "sgd" else None,
        "wd": args.wd,
        "schedule": args.schedule,
        "sampling": args.sampling,
        "seed": args.seed,
        "epochs": args.epochs,
        "threads": args.threads,
        "batch": args.batch,
        "eval_batch": args.eval_batch,
        "train_images": n_train,
        "test_images": n_test,
        "steps": steps,
        "train_seconds": round(train_s, 3),
        "img_per_s": round(steps * args.batch / train_s, 2),
        "cpu_ms_per_step": round(1000 * train_cpu / steps, 3),
        "test_loss": round(test_loss, 4),
        "test_acc": round(test_acc, 4),
        "peak_rss_mb": peak_rss_mb(),
        "kernel": f"torch-{torch.__version__}",
    }
    if not args.json:
        print(f"torch {args.model}: {steps} steps, {res['img_per_s']:.1f} img/s, test acc "
              f"{100 * res['test_acc']:.2f}%, peak RSS {res['peak_rss_mb']:.1f} MB", file=sys.stderr)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
