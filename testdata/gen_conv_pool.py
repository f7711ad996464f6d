"""Generates PyTorch reference fixtures for autograd's Conv2d and pooling ops.

Run from the repository root or from testdata/ with /usr/bin/python3
(PyTorch 1.13 CPU):

    /usr/bin/python3 testdata/gen_conv_pool.py

For every case it writes testdata/conv_pool/<name>.safetensors holding the
inputs (x, w, b), a random projection p, the op output out and the
gradients (gx, gw, gb) of sum(out * p). Inputs are float32 values; the
reference results are computed in float64 and stored as float32. The op
parameters are repeated in the file metadata; the Go test
(autograd/conv_test.go, autograd/pool_test.go) has the same table.
"""

import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixturelib import save  # noqa: E402

OUT = os.path.join(HERE, "conv_pool")

# name, x shape, w shape, bias, stride, padding, dilation ((h, w) pairs)
CONV_CASES = [
    ("conv_3x3_s1_p1", (2, 3, 8, 8), (4, 3, 3, 3), True, (1, 1), (1, 1), (1, 1)),
    ("conv_3x3_s2_p0_odd", (2, 3, 7, 9), (5, 3, 3, 3), True, (2, 2), (0, 0), (1, 1)),
    ("conv_3x3_dil2", (1, 2, 9, 8), (3, 2, 3, 3), True, (1, 1), (2, 2), (2, 2)),
    ("conv_1x1", (2, 4, 5, 6), (6, 4, 1, 1), True, (1, 1), (0, 0), (1, 1)),
    ("conv_1x1_s2_nobias", (2, 4, 7, 7), (3, 4, 1, 1), False, (2, 2), (0, 0), (1, 1)),
    ("conv_2x5_mixed_nobias", (2, 3, 8, 10), (4, 3, 2, 5), False, (2, 1), (1, 2), (1, 2)),
    ("conv_5x5_s3_p2", (3, 2, 11, 10), (2, 2, 5, 5), True, (3, 3), (2, 2), (1, 1)),
    ("conv_resnet_16ch", (4, 16, 8, 8), (16, 16, 3, 3), True, (1, 1), (1, 1), (1, 1)),
]

# name, op, x shape, kernel, stride, padding
POOL_CASES = [
    ("maxpool_k3_s2_p1", "max", (2, 3, 9, 9), 3, 2, 1),
    ("maxpool_k2_s2_p0_odd", "max", (2, 3, 8, 7), 2, 2, 0),
    ("maxpool_k3_s1_p1", "max", (1, 2, 6, 5), 3, 1, 1),
    ("avgpool_k3_s2_p1", "avg", (2, 3, 9, 8), 3, 2, 1),
    ("avgpool_k2_s2_p0_odd", "avg", (2, 3, 7, 9), 2, 2, 0),
    ("avgpool_k3_s1_p1", "avg", (1, 2, 6, 5), 3, 1, 1),
    ("avgpool_k4_s4_p2", "avg", (2, 2, 8, 8), 4, 4, 2),
    ("globalavg", "global", (2, 5, 4, 6), 0, 0, 0),
]


def pair(p):
    return "%d,%d" % p


def grads(out, inputs):
    """Returns out and d sum(out*p)/d inputs for a random projection p."""
    p = torch.rand(out.shape, dtype=torch.float64) * 2 - 1
    gs = torch.autograd.grad((out * p).sum(), inputs)
    return p, gs


def conv_case(name, xs, ws, bias, stride, padding, dilation):
    x = torch.randn(xs).float().double().requires_grad_()
    w = (torch.randn(ws) * 0.5).float().double().requires_grad_()
    b = torch.randn(ws[0]).float().double().requires_grad_() if bias else None
    out = F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation)
    inputs = [x, w] + ([b] if bias else [])
    p, gs = grads(out, inputs)
    tensors = {"x": x, "w": w, "p": p, "out": out, "gx": gs[0], "gw": gs[1]}
    if bias:
        tensors["b"] = b
        tensors["gb"] = gs[2]
    meta = {"op": "conv2d", "stride": pair(stride), "padding": pair(padding),
            "dilation": pair(dilation), "bias": str(bias).lower(),
            "generator": "testdata/gen_conv_pool.py", "torch": torch.__version__}
    save(os.path.join(OUT, name + ".safetensors"), tensors, metadata=meta)


def distinct(shape):
    """Returns float32-representable values without ties, shuffled."""
    n = 1
    for d in shape:
        n *= d
    v = (torch.randperm(n).double() - n / 2) / 8 + torch.rand(n, dtype=torch.float64) * 0.05
    return v.float().double().reshape(shape)


def pool_case(name, op, xs, kernel, stride, padding):
    x = distinct(xs).requires_grad_()
    if op == "max":
        out = F.max_pool2d(x, kernel, stride, padding)
    elif op == "avg":
        out = F.avg_pool2d(x, kernel, stride, padding)
    else:
        out = F.adaptive_avg_pool2d(x, 1)
    p, (gx,) = grads(out, [x])
    meta = {"op": op, "kernel": str(kernel), "stride": str(stride), "padding": str(padding),
            "generator": "testdata/gen_conv_pool.py", "torch": torch.__version__}
    save(os.path.join(OUT, name + ".safetensors"), {"x": x, "p": p, "out": out, "gx": gx}, metadata=meta)


def main():
    torch.manual_seed(20261122)
    os.makedirs(OUT, exist_ok=True)
    for c in CONV_CASES:
        conv_case(*c)
    for c in POOL_CASES:
        pool_case(*c)


if __name__ == "__main__":
    main()
