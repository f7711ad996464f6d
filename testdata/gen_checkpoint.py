"""Writes the PyTorch-made checkpoint fixture read by nn/checkpoint's tests.

Run with /usr/bin/python3 (PyTorch 1.13 CPU) from anywhere:

    /usr/bin/python3 testdata/gen_checkpoint.py

It builds akamaster resnet20 (option A shortcuts, 269,722 parameters) with
torch.manual_seed(20), trains it for a few SGD steps on random images so
that its weights, batch-norm statistics and num_batches_tracked are those of
a real PyTorch run, and writes into testdata/checkpoint/:

  torch_resnet20.safetensors
      model.state_dict() exactly as PyTorch holds it (keep_dtype: float32
      weights, int64 num_batches_tracked of shape []), metadata model,
      width, shortcut, num_classes and generator.
  torch_resnet20.io.safetensors
      "x": a fixed input batch (4, 3, 32, 32) and "logits": the model's
      eval-mode output for it, computed in float64 and stored as float32.

The Go test loads the state dict into models.New("resnet20") and must
reproduce the logits. check_go_checkpoint.py runs the same comparison on
this file (and on Go-written ones) from the PyTorch side.
"""

import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixturelib import save  # noqa: E402
from check_go_checkpoint import build  # noqa: E402

OUT = os.path.join(HERE, "checkpoint")


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(20)
    model = build("resnet20", 10, 1.0, "A")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    model.train()
    for _ in range(3):
        x = torch.randn(16, 3, 32, 32)
        y = torch.randint(0, 10, (16,))
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    meta = {"generator": "gen_checkpoint.py", "model": "resnet20", "width": "1",
            "shortcut": "A", "num_classes": "10"}
    sd = model.state_dict()
    save(os.path.join(OUT, "torch_resnet20.safetensors"), sd, metadata=meta, keep_dtype=True)

    x = torch.randn(4, 3, 32, 32)
    model.eval()
    with torch.no_grad():
        logits = model.double()(x.double())
    save(os.path.join(OUT, "torch_resnet20.io.safetensors"), {"x": x, "logits": logits},
         metadata={"generator": "gen_checkpoint.py", "mode": "eval"})
    nbt = sd["layer1.0.bn1.num_batches_tracked"]
    print(f"wrote {OUT}: {len(sd)} tensors, num_batches_tracked {nbt.dtype}{list(nbt.shape)}={nbt.item()}")


if __name__ == "__main__":
    main()
