"""Generates PyTorch reference fixtures for package nn and nn/models.

Run with /usr/bin/python3 (PyTorch 1.13 CPU) from anywhere:

    /usr/bin/python3 testdata/gen_models.py

It writes into testdata/models/:

  state_dicts.json
      For every model proxgen builds by name, the parameter count and the
      state_dict keys in order with their shapes and dtypes, from the
      reference PyTorch definitions below (VGG-16 and ResNet-18/34 as in
      kuangliu/pytorch-cifar, ResNet-20..56 as in
      akamaster/pytorch_resnet_cifar10 with option A or B shortcuts, and the
      LSTM language model of PyTorch's word_language_model example).

  <case>.safetensors
      A small model with random weights and random batch-norm statistics,
      an input batch, the eval-mode output, the train-mode output, the
      batch-norm buffers after that train-mode forward, and the gradients of
      the mean cross-entropy of the train-mode output for given labels.
      Tensors named "sd.<key>" are the state_dict before the forwards,
      "buf.<key>" the buffers after the train-mode forward and "grad.<key>"
      the parameter gradients. Inputs and weights are float32 values; the
      references are computed in float64 and stored as float32. The LSTM LM case starts from a random state
      and has no batch norm; it stores eval-mode logits, the final state and
      gradients.

The model definitions are written from the published architectures; they
are the reference the Go code is checked against, not part of the build.
"""

import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixturelib import save  # noqa: E402

OUT = os.path.join(HERE, "models")


def scaled(w, width):
    """Go's max(1, int(math.Round(w*width))) for positive values."""
    return max(1, int(math.floor(w * width + 0.5)))


# ---------------------------------------------------------------- VGG (kuangliu)
VGG16 = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


class VGG(nn.Module):
    def __init__(self, width=1.0, num_classes=10):
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


# ------------------------------------------------------ ResNet (kuangliu, option B)
class KBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class KResNet(nn.Module):
    def __init__(self, num_blocks, width=1.0, num_classes=10):
        super().__init__()
        w = [scaled(c, width) for c in (64, 128, 256, 512)]
        self.in_planes = w[0]
        self.conv1 = nn.Conv2d(3, w[0], 3, stride=1, padding=1, bias=False)
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


# ------------------------------------------------------------ ResNet (akamaster)
class LambdaLayer(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class ABlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1, option="A"):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            if option == "A":
                lo = planes // 4
                hi = planes - in_planes - lo
                self.shortcut = LambdaLayer(
                    lambda x: F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, lo, hi), "constant", 0))
            else:
                self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                                              nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class AResNet(nn.Module):
    def __init__(self, depth, option="A", width=1.0, num_classes=10):
        super().__init__()
        n = (depth - 2) // 6
        w = [scaled(c, width) for c in (16, 32, 64)]
        self.in_planes = w[0]
        self.conv1 = nn.Conv2d(3, w[0], 3, stride=1, padding=1, bias=False)
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
            layers.append(ABlock(self.in_planes, planes, s, option))
            self.in_planes = planes
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = F.avg_pool2d(out, out.size()[3])
        return self.linear(out.view(out.size(0), -1))


# ------------------------------------------------ word_language_model RNNModel
class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, ids, hidden):
        emb = self.drop(self.encoder(ids))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        return self.decoder(output.view(-1, output.size(2))), hidden


# ------------------------------------------------------------------- helpers
def describe(model):
    sd = model.state_dict()
    return {
        "num_params": sum(p.numel() for p in model.parameters()),
        "state_dict": [[k, list(v.shape), str(v.dtype).replace("torch.", "")] for k, v in sd.items()],
    }


def randomize(model, gen):
    """Random weights and batch-norm statistics, so eval mode is non-trivial."""
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                t.fill_(int(torch.randint(1, 100, (1,), generator=gen)))
            elif name.endswith("running_var"):
                t.copy_(0.5 + torch.rand(t.shape, generator=gen))
            elif name.endswith("running_mean"):
                t.copy_(0.2 * torch.randn(t.shape, generator=gen))
            elif t.dim() == 1 and name.endswith("weight"):  # batch-norm gamma
                t.copy_(1 + 0.2 * torch.randn(t.shape, generator=gen))
            elif t.dim() == 1:  # biases and beta
                t.copy_(0.1 * torch.randn(t.shape, generator=gen))
            else:
                fan_in = t[0].numel()
                t.copy_(torch.randn(t.shape, generator=gen) * math.sqrt(2.0 / fan_in))


def cnn_case(name, model, batch, gen, note, grads=None):
    randomize(model, gen)
    tensors = {"sd." + k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(batch, 3, 32, 32, generator=gen)
    labels = torch.randint(0, 10, (batch,), generator=gen)
    tensors["x"] = x
    tensors["labels"] = labels
    # The float32 values are computed in float64: exact references.
    model.double()
    x = x.double()
    model.eval()
    with torch.no_grad():
        tensors["out_eval"] = model(x)
    model.train()
    out = model(x)
    F.cross_entropy(out, labels).backward()
    tensors["out_train"] = out.detach()
    for k, v in model.state_dict().items():
        if "running" in k or "num_batches" in k:
            tensors["buf." + k] = v.clone()
    for k, p in model.named_parameters():
        if grads is None or p.dim() == 1 or k in grads:
            tensors["grad." + k] = p.grad
    save(os.path.join(OUT, name + ".safetensors"), tensors,
         metadata={"generator": "gen_models.py", "model": note})


def lm_case(name, gen):
    vocab, emb, hid, layers, steps, batch = 40, 12, 10, 2, 5, 3
    model = RNNModel(vocab, emb, hid, layers, dropout=0.3)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=gen))
    tensors = {"sd." + k: v.clone() for k, v in model.state_dict().items()}
    ids = torch.randint(0, vocab, (steps, batch), generator=gen)
    targets = torch.randint(0, vocab, (steps * batch,), generator=gen)
    h0 = 0.5 * torch.randn(layers, batch, hid, generator=gen)
    c0 = 0.5 * torch.randn(layers, batch, hid, generator=gen)
    tensors.update({"ids": ids, "targets": targets, "h0": h0, "c0": c0})
    model.double()
    model.eval()
    out, (h, c) = model(ids, (h0.double(), c0.double()))
    F.cross_entropy(out, targets).backward()
    tensors.update({"out": out.detach(), "h": h.detach(), "c": c.detach()})
    for k, p in model.named_parameters():
        tensors["grad." + k] = p.grad
    save(os.path.join(OUT, name + ".safetensors"), tensors,
         metadata={"generator": "gen_models.py",
                   "model": f"RNNModel LSTM vocab {vocab} emb {emb} hidden {hid} layers {layers}, eval mode"})


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    specs = {
        "vgg16": lambda: VGG(),
        "resnet18": lambda: KResNet([2, 2, 2, 2]),
        "resnet34": lambda: KResNet([3, 4, 6, 3]),
        "resnet20": lambda: AResNet(20),
        "resnet32": lambda: AResNet(32),
        "resnet44": lambda: AResNet(44),
        "resnet56": lambda: AResNet(56),
        "resnet20_B": lambda: AResNet(20, "B"),
        "resnet56_B": lambda: AResNet(56, "B"),
        "vgg16_w0.03125": lambda: VGG(width=0.03125),
        "resnet34_w0.03125": lambda: KResNet([3, 4, 6, 3], width=0.03125),
        "resnet20_B_w0.25": lambda: AResNet(20, "B", width=0.25),
        "lm_ptb": lambda: RNNModel(10000, 300, 300, 1),
        "lm_2layer": lambda: RNNModel(40, 12, 10, 2),
    }
    desc = {name: describe(make()) for name, make in specs.items()}
    with open(os.path.join(OUT, "state_dicts.json"), "w") as f:
        json.dump(desc, f, indent=None, separators=(",", ":"))
        f.write("\n")

    gen = torch.Generator().manual_seed(20240607)
    cnn_case("resnet20", AResNet(20), 3, gen, "akamaster resnet20, option A",
             grads={"conv1.weight", "layer2.0.conv1.weight", "layer3.2.conv2.weight", "linear.weight"})
    cnn_case("resnet20_B_w0.25", AResNet(20, "B", width=0.25), 2, gen, "akamaster resnet20, option B, width 0.25")
    cnn_case("vgg16_w0.03125", VGG(width=0.03125), 2, gen, "kuangliu VGG16, width 1/32")
    cnn_case("resnet34_w0.03125", KResNet([3, 4, 6, 3], width=0.03125), 2, gen, "kuangliu ResNet34, width 1/32")
    lm_case("lm_2layer", gen)
    for name in ("vgg16", "resnet20", "resnet56", "resnet34"):
        print(name, desc[name]["num_params"])


if __name__ == "__main__":
    main()
