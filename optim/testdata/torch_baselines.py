"""Generate torch_baselines.json: trajectories of PyTorch's optimizers on a
fixed gradient sequence, to check the optim baselines against them.

Run with PyTorch 1.13 (CPU): /usr/bin/python3 torch_baselines.py
"""
import json

import numpy as np
import torch

N, STEPS = 7, 6
rng = np.random.default_rng(20240601)
theta0 = rng.normal(size=N).astype(np.float32)
grads = (rng.normal(size=(STEPS, N)) * 0.7).astype(np.float32)

CASES = {
    "adam": lambda p: torch.optim.Adam([p], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    "adamw": lambda p: torch.optim.AdamW([p], lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.3),
    "sgd": lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=1e-2),
    "sgd_nesterov": lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2),
    "adagrad": lambda p: torch.optim.Adagrad([p], lr=0.1, eps=1e-10, weight_decay=0.01),
    "rmsprop": lambda p: torch.optim.RMSprop([p], lr=0.01, alpha=0.99, eps=1e-8, weight_decay=0.01),
}

out = {"theta0": theta0.tolist(), "grads": grads.tolist(), "cases": {}}
for name, make in CASES.items():
    p = torch.nn.Parameter(torch.from_numpy(theta0.copy()))
    opt = make(p)
    traj = []
    for g in grads:
        p.grad = torch.from_numpy(g.copy())
        opt.step()
        traj.append(p.detach().numpy().astype(np.float64).tolist())
    out["cases"][name] = traj

with open("torch_baselines.json", "w") as f:
    json.dump(out, f, indent=1)
print("torch", torch.__version__)
