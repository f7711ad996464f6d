"""Loads proxgen (Go) checkpoints into the reference PyTorch models.

Run with /usr/bin/python3 (PyTorch 1.13 CPU) from anywhere:

    /usr/bin/python3 testdata/check_go_checkpoint.py                # the committed Go fixture
    /usr/bin/python3 testdata/check_go_checkpoint.py RUN/model.safetensors [--cifar DIR]

For every file given (default: testdata/checkpoint/go_resnet20_w0.25.safetensors)
it

  1. reads the safetensors file with fixturelib (no safetensors module needed)
     and, for a training-state file (metadata format proxgen-train-state-v1,
     or proxgen-run-v1 for the checkpoints of package nn/train),
     keeps the tensors under "model/" with that prefix stripped;
  2. builds the reference model named by the file's metadata ("model",
     "width", "shortcut", "num_classes"): akamaster resnetN (option A or B),
     kuangliu VGG('VGG16'), ResNet18 or ResNet34;
  3. checks that every tensor has exactly the dtype and shape of the model's
     own state_dict (float32 weights, int64 scalar num_batches_tracked) and
     calls model.load_state_dict(tensors, strict=True);
  4. if a companion file <name>.io.safetensors exists (input "x", eval-mode
     "logits" computed by Go), runs the model in eval mode in float64 and
     compares the logits;
  5. with --cifar DIR (a folder holding cifar-10-batches-bin/test_batch.bin
     or the file's folder itself), evaluates the test accuracy in eval mode
     with the reference normalisation and prints it, so it can be compared
     with the accuracy the Go program reported.

It exits non-zero on the first failure. The model classes below are written
from the published architectures (kuangliu/pytorch-cifar,
akamaster/pytorch_resnet_cifar10); gen_checkpoint.py imports them.
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixturelib import load_with_metadata  # noqa: E402

DEFAULT = os.path.join(HERE, "checkpoint", "go_resnet20_w0.25.safetensors")
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2023, 0.1994, 0.2010)


def scaled(c, width):
    """Go's max(1, int(math.Round(c*width))) for positive values."""
    return max(1, int(math.floor(c * width + 0.5)))


# ------------------------------------------------- akamaster/pytorch_resnet_cifar10
class LambdaLayer(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class AkaBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1, option="A"):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            if option == "A":
                lo = planes // 4
                hi = planes - in_planes - lo
                self.shortcut = LambdaLayer(
                    lambda x: F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, lo, hi), "constant", 0))
            elif option == "B":
                self.shortcut = nn.Sequential(
                    nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                    nn.BatchNorm2d(planes))
            else:
                raise ValueError(f"unknown shortcut option {option!r}")

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class AkaResNet(nn.Module):
    """resnet20/32/44/56 of akamaster/pytorch_resnet_cifar10 (resnet.py)."""

    def __init__(self, depth, num_classes=10, option="A", width=1.0):
        super().__init__()
        if (depth - 2) % 6 != 0:
            raise ValueError(f"depth {depth} is not 6n+2")
        n = (depth - 2) // 6
        w = [scaled(c, width) for c in (16, 32, 64)]
        self.in_planes = w[0]
        self.conv1 = nn.Conv2d(3, w[0], kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(w[0])
        self.layer1 = self._make_layer(w[0], n, 1, option)
        self.layer2 = self._make_layer(w[1], n, 2, option)
        self.layer3 = self._make_layer(w[2], n, 2, option)
        self.linear = nn.Linear(w[2], num_classes)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.kaiming_normal_(m.weight)

    def _make_layer(self, planes, n, stride, option):
        layers = []
        for s in [stride] + [1] * (n - 1):
            layers.append(AkaBlock(self.in_planes, planes, s, option))
            self.in_planes = planes
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = F.avg_pool2d(out, out.size()[3])
        return self.linear(out.view(out.size(0), -1))


# ------------------------------------------------------------- kuangliu/pytorch-cifar
VGG16 = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


class VGG(nn.Module):
    """VGG('VGG16') of kuangliu/pytorch-cifar (models/vgg.py)."""

    def __init__(self, num_classes=10, width=1.0):
        super().__init__()
        layers, c_in = [], 3
        for x in VGG16:
            if x == "M":
                layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            else:
                c = scaled(x, width)
                layers += [nn.Conv2d(c_in, c, kernel_size=3, padding=1), nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
                c_in = c
        layers += [nn.AvgPool2d(kernel_size=1, stride=1)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(c_in, num_classes)

    def forward(self, x):
        out = self.features(x)
        return self.classifier(out.view(out.size(0), -1))


class KBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class KResNet(nn.Module):
    """ResNet18/ResNet34 of kuangliu/pytorch-cifar (models/resnet.py)."""

    def __init__(self, num_blocks, num_classes=10, width=1.0):
        super().__init__()
        w = [scaled(c, width) for c in (64, 128, 256, 512)]
        self.in_planes = w[0]
        self.conv1 = nn.Conv2d(3, w[0], kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(w[0])
        self.layer1 = self._make_layer(w[0], num_blocks[0], 1)
        self.layer2 = self._make_layer(w[1], num_blocks[1], 2)
        self.layer3 = self._make_layer(w[2], num_blocks[2], 2)
        self.layer4 = self._make_layer(w[3], num_blocks[3], 2)
        self.linear = nn.Linear(w[3], num_classes)

    def _make_layer(self, planes, n, stride):
        layers = []
        for s in [stride] + [1] * (n - 1):
            layers.append(KBlock(self.in_planes, planes, s))
            self.in_planes = planes
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = F.avg_pool2d(out, 4)
        return self.linear(out.view(out.size(0), -1))


def build(name, num_classes=10, width=1.0, shortcut="A"):
    """Returns the reference model that proxgen's models.New(name) mirrors."""
    if name == "vgg16":
        return VGG(num_classes, width)
    if name == "resnet18":
        return KResNet([2, 2, 2, 2], num_classes, width)
    if name == "resnet34":
        return KResNet([3, 4, 6, 3], num_classes, width)
    if name.startswith("resnet"):
        return AkaResNet(int(name[len("resnet"):]), num_classes, shortcut, width)
    raise ValueError(f"unknown model {name!r}")


def build_from_metadata(meta, path):
    if not meta or "model" not in meta:
        raise SystemExit(f"{path}: no 'model' metadata entry; cannot tell which network it holds")
    return build(meta["model"], int(meta.get("num_classes", "10")),
                 float(meta.get("width", "1")), meta.get("shortcut", "A"))


# ------------------------------------------------------------------------ checks
def model_tensors(path):
    tensors, meta = load_with_metadata(path)
    if meta and meta.get("format") in ("proxgen-train-state-v1", "proxgen-run-v1"):
        tensors = {k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")}
    return tensors, meta or {}


def load_strict(model, tensors, path):
    own = model.state_dict()
    for k, v in tensors.items():
        if k in own and (own[k].dtype != v.dtype or tuple(own[k].shape) != tuple(v.shape)):
            raise SystemExit(f"{path}: {k}: {v.dtype}{list(v.shape)} in the file, "
                             f"PyTorch has {own[k].dtype}{list(own[k].shape)}")
    model.load_state_dict(tensors, strict=True)  # raises on missing/unexpected keys


def load_cifar_test(root):
    for cand in (os.path.join(root, "cifar-10-batches-bin", "test_batch.bin"),
                 os.path.join(root, "test_batch.bin")):
        if os.path.exists(cand):
            raw = np.fromfile(cand, dtype=np.uint8).reshape(-1, 3073)
            labels = torch.from_numpy(raw[:, 0].astype(np.int64))
            x = torch.from_numpy(raw[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32) / 255.0)
            mean = torch.tensor(MEAN).view(1, 3, 1, 1)
            std = torch.tensor(STD).view(1, 3, 1, 1)
            return (x - mean) / std, labels
    raise SystemExit(f"no test_batch.bin under {root}")


def check(path, cifar=None, limit=0):
    tensors, meta = model_tensors(path)
    model = build_from_metadata(meta, path)
    load_strict(model, tensors, path)
    n = sum(p.numel() for p in model.parameters())
    print(f"{path}: {meta['model']} ({n} parameters, {len(tensors)} tensors) "
          f"loads with load_state_dict(strict=True)")
    model.eval()

    io = path[:-len(".safetensors")] + ".io.safetensors" if path.endswith(".safetensors") else None
    if io and os.path.exists(io):
        ref, _ = load_with_metadata(io)
        with torch.no_grad():
            got = model.double()(ref["x"].double()).float()
        model.float()
        diff = (got - ref["logits"]).abs().max().item()
        scale = ref["logits"].abs().max().item()
        print(f"  eval-mode logits vs Go ({io}): max |diff| = {diff:.3g} (max |logit| {scale:.3g})")
        if not diff <= 1e-4 * max(1.0, scale):
            raise SystemExit(f"{path}: logits differ from Go's by {diff}")

    if cifar:
        x, y = load_cifar_test(cifar)
        if limit:
            x, y = x[:limit], y[:limit]
        correct = 0
        with torch.no_grad():
            for i in range(0, len(y), 500):
                correct += (model(x[i:i + 500]).argmax(1) == y[i:i + 500]).sum().item()
        print(f"  PyTorch test accuracy on {len(y)} images: {100.0 * correct / len(y):.2f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", default=[DEFAULT])
    ap.add_argument("--cifar", help="CIFAR-10 folder: also evaluate the test accuracy")
    ap.add_argument("--limit", type=int, default=0, help="evaluate only the first N test images")
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for f in args.files:
        check(f, args.cifar, args.limit)
    print("OK")


if __name__ == "__main__":
    main()
