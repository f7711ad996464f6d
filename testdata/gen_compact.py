"""Checks proxgen's channel compaction against PyTorch and writes its fixtures.

Run with /usr/bin/python3 (PyTorch 1.13 CPU) from anywhere; it runs the Go
tool (`go run ./cmd/cifar -compact`) from the repository root:

    /usr/bin/python3 testdata/gen_compact.py                   # write testdata/compact/
    /usr/bin/python3 testdata/gen_compact.py DENSE COMPACT     # check two files
    /usr/bin/python3 testdata/gen_compact.py DENSE COMPACT test_batch.bin [N]
                                          # ... on the first N (1000) real CIFAR-10 test images

For each case (ResNet-20 with option-A and option-B shortcuts, VGG-16, all at
reduced width) it

  1. builds the reference PyTorch model (check_go_checkpoint.build) with
     random weights and batch-norm statistics, and zeroes groups the way
     structured sparsity leaves them: output filters with their batch norm's
     gamma and beta (the channel is exactly zero), filters alone (the batch
     norm's constant decides whether the ReLU kills the channel), input
     slices of a convolution (nothing reads the channel), whole
     residual-stream channels (every writer of the stage), a padding channel
     of an option-A stage and a stream channel that only the residual path
     carries (its readers ignore it);
  2. saves it as <case>.dense.safetensors with the metadata nn/infer reads;
  3. runs `go run ./cmd/cifar -weights <case>.dense.safetensors -compact
     <case>.compact.safetensors`, which writes the compacted network with its
     per-layer widths in the metadata ("widths", JSON of models.Widths);
  4. builds the reduced architecture from that metadata (build_compact below),
     loads the compacted file with load_state_dict(strict=True) and checks, in
     float64, that its eval-mode logits equal the dense model's;
  5. writes <case>.io.safetensors: the input images "x" (synthetic 32x32
     pictures, normalised with the CIFAR-10 constants), the dense model's
     logits "logits" and the compacted model's "logits_compact", computed in
     float64 and stored as float32.

nn/prune's TestTorchCompactFixtures checks that Go's logits of the dense file,
of the dense network compacted in memory and of the committed compacted file
all equal PyTorch's, and that Go compacts the dense file to exactly the
committed compacted file.

With two file arguments it only runs steps 4 (on the files given) and prints
the largest logit difference on random inputs; with a CIFAR-10 binary batch
file (3073-byte records: label, then 32x32 R, G and B planes) as the third,
on the first N images of that file, normalised as in training.
"""

import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "compact")
sys.path.insert(0, HERE)
from fixturelib import save  # noqa: E402
from check_go_checkpoint import MEAN, STD, VGG, AkaBlock, build, load_strict, model_tensors  # noqa: E402


# ------------------------------------------------------ reduced architectures
class PadMap(nn.Module):
    """Option-A shortcut of a compacted network: x[:, :, ::2, ::2] with input
    channel i copied to output channel pad[i] (none for -1), other channels 0.
    For the reference layout pad[i] = planes//4 + i, this is akamaster's F.pad."""

    def __init__(self, pad, out):
        super().__init__()
        self.src = [i for i, d in enumerate(pad) if d >= 0]
        self.dst = [d for d in pad if d >= 0]
        self.out = out

    def forward(self, x):
        x = x[:, :, ::2, ::2]
        y = x.new_zeros((x.shape[0], self.out, x.shape[2], x.shape[3]))
        y[:, self.dst] = x[:, self.src]
        return y


class Block(AkaBlock):
    """BasicBlock with its own inner and output widths; AkaBlock's forward."""

    def __init__(self, in_planes, inner, planes, stride, option, pad):
        nn.Module.__init__(self)  # AkaBlock's layers have one width
        self.conv1 = nn.Conv2d(in_planes, inner, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(inner)
        self.conv2 = nn.Conv2d(inner, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            if option == "A":
                if pad is None:
                    pad = [planes // 4 + i for i in range(in_planes)]
                self.shortcut = PadMap(pad, planes)
            else:
                self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                                              nn.BatchNorm2d(planes))


class CompactResNet(nn.Module):
    """akamaster resnetN (pool over the whole map) or kuangliu ResNet18/34
    (pool 4) with the widths of models.Widths."""

    def __init__(self, widths, option, pool, num_classes):
        super().__init__()
        stem = widths["stem"]
        self.pool = pool
        self.conv1 = nn.Conv2d(3, stem, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(stem)
        c = stem
        for s, stage in enumerate(widths["stages"]):
            blocks = []
            for b, bw in enumerate(stage):
                stride = 2 if s > 0 and b == 0 else 1
                blocks.append(Block(c, bw["inner"], bw["out"], stride, option, bw.get("pad")))
                c = bw["out"]
            setattr(self, f"layer{s + 1}", nn.Sequential(*blocks))
        self.stages = len(widths["stages"])
        self.linear = nn.Linear(c, num_classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        for s in range(self.stages):
            out = getattr(self, f"layer{s + 1}")(out)
        out = F.avg_pool2d(out, self.pool or out.size()[3])
        return self.linear(out.view(out.size(0), -1))


class CompactVGG(VGG):
    """kuangliu VGG with the per-layer widths of models.Widths.features; VGG's
    forward."""

    def __init__(self, features, num_classes):
        nn.Module.__init__(self)  # VGG's layers come from VGG16 and one width
        layers, c_in = [], 3
        for c in features:
            if c == 0:
                layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            else:
                layers += [nn.Conv2d(c_in, c, kernel_size=3, padding=1), nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
                c_in = c
        layers += [nn.AvgPool2d(kernel_size=1, stride=1)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(c_in, num_classes)


def build_compact(meta):
    """Returns the reduced network a compacted file's metadata describes."""
    widths = json.loads(meta["widths"])
    name, classes = meta["model"], int(meta.get("num_classes", "10"))
    if name == "vgg16":
        return CompactVGG(widths["features"], classes)
    if name in ("resnet18", "resnet34"):
        return CompactResNet(widths, "B", 4, classes)
    return CompactResNet(widths, meta.get("shortcut", "A").upper(), 0, classes)


# ------------------------------------------------------------ dense fixtures
def writers(model):
    """(conv, bn) pairs of the model in forward order, with the stream they
    write for a ResNet: ("stem"|"inner"|"out"|"shortcut", stage, block)."""
    out = []
    if hasattr(model, "features"):
        mods = list(model.features)
        for i, m in enumerate(mods):
            if isinstance(m, nn.Conv2d):
                out.append((m, mods[i + 1], ("vgg", i, 0)))
        return out
    out.append((model.conv1, model.bn1, ("stem", 0, 0)))
    s = 1
    while hasattr(model, f"layer{s}"):
        for b, blk in enumerate(getattr(model, f"layer{s}")):
            out.append((blk.conv1, blk.bn1, ("inner", s, b)))
            out.append((blk.conv2, blk.bn2, ("out", s, b)))
            if isinstance(blk.shortcut, nn.Sequential) and len(blk.shortcut) == 2:
                out.append((blk.shortcut[0], blk.shortcut[1], ("shortcut", s, b)))
        s += 1
    return out


def kill(conv, bn, c):
    with torch.no_grad():
        conv.weight[c].zero_()
        if conv.bias is not None:
            conv.bias[c] = 0
        bn.weight[c] = 0
        bn.bias[c] = 0


def make_dense(name, width, shortcut, seed):
    torch.manual_seed(seed)
    g = np.random.default_rng(seed)
    model = build(name, 10, width, shortcut)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.3)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.2)
                m.num_batches_tracked.fill_(int(g.integers(1, 1000)))
        ws = writers(model)
        for conv, bn, _ in ws:
            for c in range(conv.out_channels):
                r = g.random()
                if r < 0.2:
                    kill(conv, bn, c)  # coupled group: exactly zero
                elif r < 0.3:
                    conv.weight[c].zero_()  # constant gamma*(0-mean)/std+beta
                    if conv.bias is not None:
                        conv.bias[c] = 0
                    bn.running_mean[c] = abs(bn.running_mean[c])
                    bn.bias[c] = -abs(bn.bias[c]) - 0.05  # negative: the ReLU kills it
                elif r < 0.35:
                    conv.weight[c].zero_()
                    bn.bias[c] = abs(bn.bias[c]) + 0.05  # positive constant: kept
        if name == "vgg16":
            # An input slice: no filter of features.3 reads channel 0 of features.0.
            model.features[3].weight[:, 0].zero_()
        else:
            stages = []
            s = 1
            while hasattr(model, f"layer{s}"):
                stages.append(getattr(model, f"layer{s}"))
                s += 1
            # An inner channel nobody reads.
            stages[0][1].conv2.weight[:, 1].zero_()
            # Stream channel 1 of stage 1: every writer.
            for conv, bn, (kind, s, b) in ws:
                if kind == "stem" or (kind in ("out", "shortcut") and s == 1):
                    kill(conv, bn, 1)
            # Channel 0 of stage 2 (a padding channel with option A).
            for conv, bn, (kind, s, b) in ws:
                if kind in ("out", "shortcut") and s == 2:
                    kill(conv, bn, 0)
            # A stage-3 stream channel that the residual path carries (with
            # option A, stage 2's channel 2 padded to lo3 + 2) but nobody reads:
            # it goes, and the option-A map drops its source (-1).
            t = stages[2][0].conv2.out_channels // 4 + 2 if shortcut == "A" else 3
            for blk in stages[2]:
                blk.conv1.weight[:, t].zero_()
            model.linear.weight[:, t].zero_()
    return model


def images(n, seed):
    """Synthetic 32x32 RGB pictures (gradients, a disc, noise) normalised with
    the CIFAR-10 constants."""
    g = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float32)
    out = []
    for _ in range(n):
        img = np.empty((3, 32, 32), np.float32)
        cy, cx, r = g.uniform(8, 24), g.uniform(8, 24), g.uniform(4, 10)
        disc = ((yy - cy) ** 2 + (xx - cx) ** 2 < r * r).astype(np.float32)
        for ch in range(3):
            a, b, c = g.uniform(-4, 4, 3)
            img[ch] = 128 + a * (xx - 16) + b * (yy - 16) + c * 10 * disc + g.normal(0, 8, (32, 32))
        img = np.clip(np.round(img), 0, 255) / 255.0
        out.append((img - np.array(MEAN, np.float32)[:, None, None]) / np.array(STD, np.float32)[:, None, None])
    return torch.from_numpy(np.stack(out).astype(np.float32))


def cifar_images(path, n):
    """The first n images of a CIFAR-10 binary batch file, normalised with the
    CIFAR-10 constants."""
    raw = np.fromfile(path, np.uint8)
    if raw.size % 3073 != 0 or raw.size == 0:
        raise SystemExit(f"{path}: {raw.size} bytes is not a whole number of 3073-byte CIFAR-10 records")
    rec = raw.reshape(-1, 3073)[:n, 1:].reshape(-1, 3, 32, 32).astype(np.float32) / 255.0
    rec = (rec - np.array(MEAN, np.float32)[:, None, None]) / np.array(STD, np.float32)[:, None, None]
    return torch.from_numpy(rec.astype(np.float32))


def logits64(model, x):
    model.eval()
    with torch.no_grad():
        y = model.double()(x.double())
    model.float()
    return y


def compare(dense_path, compact_path, x):
    dt, dmeta = model_tensors(dense_path)
    dense = build(dmeta["model"], int(dmeta.get("num_classes", "10")), float(dmeta.get("width", "1")),
                  dmeta.get("shortcut", "A"))
    load_strict(dense, dt, dense_path)
    ct, cmeta = model_tensors(compact_path)
    compact = build_compact(cmeta)
    load_strict(compact, ct, compact_path)
    nd = sum(p.numel() for p in dense.parameters())
    nc = sum(p.numel() for p in compact.parameters())
    yd, yc = logits64(dense, x), logits64(compact, x)
    diff = (yd - yc).abs().max().item()
    scale = yd.abs().max().item()
    print(f"{compact_path}: {nc} of {nd} parameters, loads strict; float64 logits differ by {diff:.3g} "
          f"(max |logit| {scale:.3g})")
    if not diff <= 1e-9 * max(1.0, scale):
        raise SystemExit(f"{compact_path}: the compacted network's logits differ from the dense one's by {diff}")
    return yd, yc


CASES = [
    # name, model, width, shortcut, seed
    ("resnet20_A", "resnet20", 0.25, "A", 1),
    ("resnet20_B", "resnet20", 0.25, "B", 2),
    ("vgg16", "vgg16", 0.0625, "A", 3),
]


def main():
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    if len(sys.argv) in (3, 4, 5):
        x = torch.randn(4, 3, 32, 32)
        if len(sys.argv) >= 4:
            x = cifar_images(sys.argv[3], int(sys.argv[4]) if len(sys.argv) == 5 else 1000)
        yd, _ = compare(sys.argv[1], sys.argv[2], x)
        print(f"{x.shape[0]} images; dense model's predictions: {yd.argmax(1).tolist()[:10]}...")
        print("OK")
        return
    os.makedirs(OUT, exist_ok=True)
    x = images(4, 7)
    for case, name, width, shortcut, seed in CASES:
        model = make_dense(name, width, shortcut, seed)
        dense = os.path.join(OUT, case + ".dense.safetensors")
        compact = os.path.join(OUT, case + ".compact.safetensors")
        meta = {"model": name, "width": repr(width), "shortcut": shortcut, "num_classes": "10",
                "generator": "gen_compact.py"}
        save(dense, model.state_dict(), metadata=meta)
        subprocess.run(["go", "run", "./cmd/cifar", "-weights", dense, "-compact", compact],
                       cwd=ROOT, check=True)
        yd, yc = compare(dense, compact, x)
        save(os.path.join(OUT, case + ".io.safetensors"), {"x": x, "logits": yd.float(), "logits_compact": yc.float()},
             metadata={"generator": "gen_compact.py", "mode": "eval"})
    print("OK")


if __name__ == "__main__":
    main()
