"""Generates the PyTorch reference for nn.RecalibrateBatchNorm.

Run from the repository root or from testdata/ with /usr/bin/python3
(PyTorch 1.13 CPU):

    /usr/bin/python3 testdata/gen_recalibrate.py

It writes testdata/recalibrate/convbn.safetensors. The network is
Sequential(Conv2d(3, 6, 3, padding=1), BatchNorm2d(6), ReLU,
Conv2d(6, 5, 3, stride=2, padding=1, bias=False), BatchNorm2d(5), ReLU,
AdaptiveAvgPool2d(1), Flatten, Linear(5, 4)), the same layers as the Go
test builds. Its batch normalisations start with random γ, β and running
statistics (and num_batches_tracked 7), as a trained network whose weights
changed would. The recalibration is PyTorch's own recipe
(torch.optim.swa_utils.update_bn): reset_running_stats(), momentum=None,
a forward pass in training mode without gradients over each batch; the
batches have 5, 3, 4 and 2 images, so that an equal-weight average per
batch differs from one per image.

Tensors: "state.<name>" the state_dict before, "want.<name>" after the
recalibration; "x.<i>" the batches; "eval_x" a test batch and "eval_out"
the network's output on it in evaluation mode after the recalibration.
"""

import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixturelib import save  # noqa: E402

OUT = os.path.join(HERE, "recalibrate")


def main():
    torch.manual_seed(34)
    net = nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1),
        nn.BatchNorm2d(6),
        nn.ReLU(),
        nn.Conv2d(6, 5, 3, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(5),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(5, 4),
    )
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
                m.running_mean.uniform_(-2, 2)
                m.running_var.uniform_(0.2, 3)
                m.num_batches_tracked.fill_(7)
    tensors = {"state." + k: v.clone() for k, v in net.state_dict().items()}

    # Inputs with a non-zero mean and a scale, so that the statistics are
    # far from the reset values.
    batches = [torch.randn(n, 3, 8, 8) * 1.7 + 0.4 for n in (5, 3, 4, 2)]
    for i, x in enumerate(batches):
        tensors["x.%d" % i] = x

    # torch.optim.swa_utils.update_bn, written out.
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    net.train()
    with torch.no_grad():
        for x in batches:
            net(x)
    for k, v in net.state_dict().items():
        tensors["want." + k] = v.clone()

    net.eval()
    eval_x = torch.randn(3, 3, 8, 8)
    with torch.no_grad():
        tensors["eval_x"] = eval_x
        tensors["eval_out"] = net(eval_x)

    os.makedirs(OUT, exist_ok=True)
    save(os.path.join(OUT, "convbn.safetensors"), tensors,
         metadata={"generator": "testdata/gen_recalibrate.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
