#!/usr/bin/python3
"""Exports the networks of scripts/ortbench/run from PyTorch 1.13.

For each network NAME (resnet20, resnet56, vgg16, resnet20-z90, ...) it
writes into OUT:

  NAME.onnx         the eval-mode network, dynamic batch axis, opset 13,
                    input "x" (N, 3, 32, 32), output "logits"
  NAME.safetensors  the same weights under this engine's state-dict names,
                    with the metadata infer.Load reads (model, shortcut,
                    width, num_classes)
  NAME.in.f32       8 random input images, raw little-endian float32
  NAME.ref.f32      PyTorch's eval-mode softmax of them (8 x 10 float32)

Weights are PyTorch's default initialisation (seed 1), batch-norm running
statistics and affine parameters random, so that folding them matters, and
the classifier scaled to logits of standard deviation about 3; a
"-zNN" suffix sets NN % of every conv and linear weight to exact zeros,
chosen at random. The model definitions are testdata/check_go_checkpoint.py's
(the references of nn/models).

Usage: /usr/bin/python3 scripts/ortbench/export.py OUT NAME...
"""

import os
import warnings
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testdata"))
import check_go_checkpoint  # noqa: E402
from check_go_checkpoint import build  # noqa: E402
from fixturelib import save  # noqa: E402

# The references pool with F.avg_pool2d(out, out.size()[3]), a tensor while
# tracing; as a constant the export is the same network for 32x32 inputs.
_avg_pool2d = check_go_checkpoint.F.avg_pool2d


class _F:
    def __getattr__(self, name):
        if name == "avg_pool2d":
            return lambda x, k, *a, **kw: _avg_pool2d(x, int(k), *a, **kw)
        return getattr(torch.nn.functional, name)


check_go_checkpoint.F = _F()

warnings.filterwarnings("ignore")  # the tracer's notes on constant sizes

SHORTCUT = "B"  # option-B ResNets, as in issue 21


def export(out, name):
    arch, _, zeros = name.partition("-z")
    torch.manual_seed(1)
    model = build(arch, 10, 1.0, SHORTCUT)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                c = mod.num_features
                mod.running_mean.copy_(torch.randn(c, generator=g) * 0.2)
                mod.running_var.copy_(0.5 + torch.rand(c, generator=g))
                mod.weight.copy_(0.5 + torch.rand(c, generator=g))
                mod.bias.copy_(torch.randn(c, generator=g) * 0.1)
        if zeros:
            frac = int(zeros) / 100
            for p in model.parameters():
                if p.dim() >= 2:
                    p.mul_((torch.rand(p.shape, generator=g) >= frac).float())
    model.eval()
    # Scale the classifier so that the logits have a standard deviation of
    # about 3: probabilities away from 0 and 1 make the check meaningful.
    x = torch.randn(8, 3, 32, 32, generator=g)
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        scale = 3 / model(x).std().item()
        linear.weight.mul_(scale)
        linear.bias.mul_(scale)
    meta = {"model": arch, "width": "1", "num_classes": "10"}
    if arch.startswith("resnet") and arch not in ("resnet18", "resnet34"):
        meta["shortcut"] = SHORTCUT
    state = {k: v for k, v in model.state_dict().items()}
    save(os.path.join(out, name + ".safetensors"), state, metadata=meta)
    with torch.no_grad():
        ref = torch.softmax(model(x), dim=1)
    x.numpy().astype("<f4").tofile(os.path.join(out, name + ".in.f32"))
    ref.numpy().astype("<f4").tofile(os.path.join(out, name + ".ref.f32"))
    torch.onnx.export(model, x[:1], os.path.join(out, name + ".onnx"), opset_version=13,
                      input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "n"}, "logits": {0: "n"}})


def main():
    out, names = sys.argv[1], sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    for name in names:
        export(out, name)
        print(f"exported {name}", file=sys.stderr)


if __name__ == "__main__":
    main()
