# Writes torch_clip.json: cases of torch.nn.utils.clip_grad_norm_ (PyTorch
# 1.13) for optim.ClipGradNorm's test. Run from this folder:
#   /usr/bin/python3 torch_clip.py > torch_clip.json
import json

import torch

torch.manual_seed(7)


def case(name, max_norm, shapes, scale, missing=()):
    params = []
    grads = []
    for i, s in enumerate(shapes):
        p = torch.zeros(s, requires_grad=True)
        if i in missing:
            grads.append(None)
        else:
            g = torch.randn(s) * scale
            p.grad = g.clone()
            grads.append(g.flatten().tolist())
        params.append(p)
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    clipped = [p.grad.flatten().tolist() if p.grad is not None else [] for p in params]
    return {"name": name, "max_norm": max_norm, "shapes": [list(s) for s in shapes],
            "grads": grads, "norm": float(norm), "clipped": clipped}


cases = [
    case("below", 100.0, [(3, 4), (5,)], 1.0),
    case("above", 0.25, [(3, 4), (5,), (2, 3, 2, 2)], 1.0),
    case("far above", 0.5, [(16, 9)], 10.0),
    case("missing grad", 1.0, [(4, 4), (6,), (3,)], 2.0, missing=(1,)),
]
print(json.dumps(cases))
