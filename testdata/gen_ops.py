"""Generates PyTorch reference fixtures for autograd's BatchNorm, LSTMCell,
Embedding, LogSoftmax and CrossEntropy ops.

Run from anywhere with /usr/bin/python3 (PyTorch 1.13 CPU):

    /usr/bin/python3 testdata/gen_ops.py

It writes testdata/ops/<name>.safetensors. Inputs are float32 values; the
reference results are computed in float64 and stored as float32. Gradients
are those of sum(out * p) for a stored random projection p (and, for the
LSTM, of sum(out * p) + sum(c_n * pc)). Op parameters are in the file
metadata; the Go tests are autograd/batchnorm_test.go, lstm_test.go,
embedding_test.go and loss_test.go.
"""

import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fixturelib import save  # noqa: E402

OUT = os.path.join(HERE, "ops")
GEN = "testdata/gen_ops.py"


def f32(t):
    """Rounds t to float32 values held in float64."""
    return t.float().double()


def proj(shape):
    return f32(torch.rand(shape, dtype=torch.float64) * 2 - 1)


def meta(**kw):
    m = {"generator": GEN, "torch": torch.__version__}
    m.update({k: str(v) for k, v in kw.items()})
    return m


def batchnorm_case(name, shape, training, momentum=0.1, eps=1e-5):
    c = shape[1]
    x = f32(torch.randn(shape, dtype=torch.float64) * 2 + 0.5).requires_grad_()
    gamma = f32(torch.rand(c, dtype=torch.float64) + 0.5).requires_grad_()
    beta = f32(torch.randn(c, dtype=torch.float64)).requires_grad_()
    rm = f32(torch.randn(c, dtype=torch.float64) * 0.1)
    rv = f32(torch.rand(c, dtype=torch.float64) + 0.5)
    rm_after, rv_after = rm.clone(), rv.clone()
    out = F.batch_norm(x, rm_after, rv_after, gamma, beta, training=training, momentum=momentum, eps=eps)
    p = proj(out.shape)
    gx, ggamma, gbeta = torch.autograd.grad((out * p).sum(), [x, gamma, beta])
    tensors = {"x": x, "gamma": gamma, "beta": beta, "running_mean": rm, "running_var": rv,
               "out": out, "p": p, "gx": gx, "ggamma": ggamma, "gbeta": gbeta,
               "running_mean_after": rm_after, "running_var_after": rv_after}
    save(os.path.join(OUT, name + ".safetensors"), tensors,
         metadata=meta(op="batch_norm", training=str(training).lower(), momentum=momentum, eps=eps))


def lstm_case(name, steps, batch, inp, hid):
    lstm = torch.nn.LSTM(inp, hid, num_layers=1).double()
    with torch.no_grad():
        for prm in lstm.parameters():
            prm.copy_(f32(prm))
    x = f32(torch.randn(steps, batch, inp, dtype=torch.float64)).requires_grad_()
    h0 = f32(torch.randn(1, batch, hid, dtype=torch.float64) * 0.5).requires_grad_()
    c0 = f32(torch.randn(1, batch, hid, dtype=torch.float64) * 0.5).requires_grad_()
    out, (hn, cn) = lstm(x, (h0, c0))
    p, pc = proj(out.shape), proj(cn.shape)
    params = [lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0]
    gs = torch.autograd.grad((out * p).sum() + (cn * pc).sum(), [x, h0, c0] + params)
    tensors = {"x": x, "h0": h0[0], "c0": c0[0], "out": out, "h_n": hn[0], "c_n": cn[0], "p": p, "pc": pc[0],
               "gx": gs[0], "gh0": gs[1][0], "gc0": gs[2][0]}
    for n, prm, g in zip(["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"], params, gs[3:]):
        tensors[n] = prm
        tensors["g" + n] = g
    save(os.path.join(OUT, name + ".safetensors"), tensors, metadata=meta(op="lstm", steps=steps))


def embedding_case(name, vocab, dim, n):
    w = f32(torch.randn(vocab, dim, dtype=torch.float64)).requires_grad_()
    ids = torch.randint(0, vocab, (n,))
    ids[1] = ids[n - 1] = ids[0]  # repeated ids accumulate
    out = F.embedding(ids, w)
    p = proj(out.shape)
    (gw,) = torch.autograd.grad((out * p).sum(), [w])
    save(os.path.join(OUT, name + ".safetensors"), {"weight": w, "ids": ids, "out": out, "p": p, "gweight": gw},
         metadata=meta(op="embedding"))


def cross_entropy_case(name, n, k, scale, offset):
    x = f32(torch.randn(n, k, dtype=torch.float64) * scale + offset).requires_grad_()
    labels = torch.randint(0, k, (n,))
    loss = F.cross_entropy(x, labels)
    (gx,) = torch.autograd.grad(loss, [x])
    loss_sum = F.cross_entropy(x, labels, reduction="sum")
    (gx_sum,) = torch.autograd.grad(loss_sum, [x])
    lsm = F.log_softmax(x, dim=1)
    p = proj(lsm.shape)
    (glsm,) = torch.autograd.grad((lsm * p).sum(), [x])
    tensors = {"logits": x, "labels": labels, "loss": loss.reshape(()), "glogits": gx,
               "loss_sum": loss_sum.reshape(()), "glogits_sum": gx_sum,
               "log_softmax": lsm, "p": p, "glog_softmax": glsm}
    save(os.path.join(OUT, name + ".safetensors"), tensors, metadata=meta(op="cross_entropy"))


def main():
    torch.manual_seed(20261122)
    os.makedirs(OUT, exist_ok=True)
    batchnorm_case("batchnorm2d_train", (4, 3, 5, 5), True)
    batchnorm_case("batchnorm2d_train_m03", (2, 5, 3, 4), True, momentum=0.3, eps=1e-3)
    batchnorm_case("batchnorm2d_eval", (4, 3, 5, 5), False)
    batchnorm_case("batchnorm1d_train", (8, 6), True)
    lstm_case("lstm_4steps", 4, 3, 5, 6)
    lstm_case("lstm_6steps_wide", 6, 2, 7, 10)
    embedding_case("embedding", 10, 4, 12)
    cross_entropy_case("cross_entropy", 8, 7, 1.0, 0.0)
    cross_entropy_case("cross_entropy_large", 6, 5, 30.0, 1000.0)


if __name__ == "__main__":
    main()
