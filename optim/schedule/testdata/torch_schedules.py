"""Generate torch_schedules.json: the step size of every update under
PyTorch's learning-rate schedulers, to check optim's Cosine, Warmup and
OneCycle (and the schedules Warmup hands over to) against them.

Each case steps its scheduler once per optimizer update and records
group["lr"] of every parameter group before each update, so entry k of a
group's list is the step size of update t = k+1 (Schedule.Rate(base, t)).
Warm-up cases are SequentialLR([LinearLR(...), main], milestones=[W]).
There is no warm-up case before OneCycleLR: OneCycleLR rewrites the
groups' initial_lr to max_lr/div_factor, so SequentialLR would warm up from
that instead of from the base step size.

Run with PyTorch 1.13 (CPU): /usr/bin/python3 torch_schedules.py
"""
import json
import math
import warnings

import torch
from torch.optim import lr_scheduler as S

warnings.simplefilter("ignore")  # SequentialLR's step(0) deprecation warning
BASES = [0.1, 0.03]  # two groups: eta_min is absolute, shared by both


def optimizer():
    ps = [torch.nn.Parameter(torch.zeros(1)) for _ in BASES]
    return torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(ps, BASES)], lr=BASES[0], momentum=0.9)


def warm(start, steps, main):
    def make(o):
        return S.SequentialLR(o, [S.LinearLR(o, start_factor=start, end_factor=1.0, total_iters=steps), main(o)], milestones=[steps])
    return make


# name -> (steps, scheduler factory, parameters the Go test rebuilds from)
CASES = {
    "cosine": (25, lambda o: S.CosineAnnealingLR(o, T_max=10), {"T": 10, "min": 0.0}),
    "cosine_floor": (47, lambda o: S.CosineAnnealingLR(o, T_max=23, eta_min=1e-3), {"T": 23, "min": 1e-3}),
    "cosine_one": (5, lambda o: S.CosineAnnealingLR(o, T_max=1, eta_min=1e-4), {"T": 1, "min": 1e-4}),
    "warmup_cosine": (30, warm(0.1, 5, lambda o: S.CosineAnnealingLR(o, T_max=25, eta_min=1e-4)),
                      {"warmup": 5, "start": 0.1, "then": "cosine", "T": 25, "min": 1e-4}),
    "warmup_multistep": (16, warm(1 / 3, 4, lambda o: S.MultiStepLR(o, milestones=[3, 7], gamma=0.5)),
                         {"warmup": 4, "start": 1 / 3, "then": "multistep", "milestones": [3, 7], "gamma": 0.5}),
    "warmup_step": (15, warm(0.25, 3, lambda o: S.StepLR(o, step_size=4, gamma=0.3)),
                    {"warmup": 3, "start": 0.25, "then": "step", "every": 4, "gamma": 0.3}),
    "warmup_const": (12, warm(0.5, 6, lambda o: S.LambdaLR(o, lambda e: 1.0)),
                     {"warmup": 6, "start": 0.5, "then": "const"}),
    "warmup_invsqrt": (14, warm(0.2, 4, lambda o: S.LambdaLR(o, lambda e: 1 / math.sqrt(e + 1 + 4))),
                       {"warmup": 4, "start": 0.2, "then": "invsqrt", "offset": 4.0}),
    "onecycle": (100, lambda o: S.OneCycleLR(o, max_lr=BASES, total_steps=100, cycle_momentum=False),
                 {"total": 100, "pct": 0.3, "div": 25.0, "final": 1e4}),
    "onecycle_custom": (37, lambda o: S.OneCycleLR(o, max_lr=BASES, total_steps=37, pct_start=0.25, div_factor=10.0,
                                                   final_div_factor=100.0, cycle_momentum=False),
                        {"total": 37, "pct": 0.25, "div": 10.0, "final": 100.0}),
    "onecycle_three": (50, lambda o: S.OneCycleLR(o, max_lr=BASES, total_steps=50, pct_start=0.2, three_phase=True,
                                                  cycle_momentum=False),
                       {"total": 50, "pct": 0.2, "div": 25.0, "final": 1e4, "three": True}),
    "onecycle_linear": (23, lambda o: S.OneCycleLR(o, max_lr=BASES, total_steps=23, pct_start=0.4, anneal_strategy="linear",
                                                   cycle_momentum=False),
                        {"total": 23, "pct": 0.4, "div": 25.0, "final": 1e4, "linear": True}),
    "onecycle_three_linear": (31, lambda o: S.OneCycleLR(o, max_lr=BASES, total_steps=31, pct_start=0.35, three_phase=True,
                                                         anneal_strategy="linear", div_factor=5.0, cycle_momentum=False),
                              {"total": 31, "pct": 0.35, "div": 5.0, "final": 1e4, "three": True, "linear": True}),
}

out = {"torch": torch.__version__, "bases": BASES, "cases": {}}
for name, (steps, make, params) in CASES.items():
    opt = optimizer()
    sched = make(opt)
    lrs = [[] for _ in BASES]
    for k in range(steps):
        for i, g in enumerate(opt.param_groups):
            lrs[i].append(g["lr"])
        opt.step()
        if k < steps - 1:
            sched.step()
    out["cases"][name] = {"params": params, "lr": lrs}

with open("torch_schedules.json", "w") as f:
    json.dump(out, f, indent=1)
print("torch", torch.__version__)
