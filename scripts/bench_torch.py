#!/usr/bin/python3
"""PyTorch peer of `go run ./cmd/bench train`: training throughput on random data.

Runs full training steps (forward, cross-entropy, backward, Adam step) of one
model on a fixed random batch and prints a readable line to stderr and, as the
last stdout line, a JSON object with the same keys as the Go benchmark:

    {"impl": "torch", "model": "resnet20", "threads": 2, "batch": 128,
     "img_per_s": 586.1, "ms_per_step": 218.4, ...}

(`tok_per_s` instead of `img_per_s` for the LSTM language model.)

The models are written out here exactly as their reference implementations
define them, so no repository is needed:

  vgg16     VGG('VGG16') of kuangliu/pytorch-cifar (BN, conv bias, Linear 512->10)
  resnet34  ResNet34() of kuangliu/pytorch-cifar (option-B shortcuts)
  resnet20, resnet56
            resnet20()/resnet56() of akamaster/pytorch_resnet_cifar10
            (widths 16/32/64, option-A shortcuts, kaiming_normal_ init;
            build(name, shortcut="B") gives its option B, a 1x1 conv
            without bias + BatchNorm2d, as cmd/cifar -shortcut B)
  lstm      RNNModel('LSTM') of pytorch/examples word_language_model,
            untied, 1 layer, embedding 300, hidden 300, vocab 10000,
            dropout 0.2, bptt 35 x batch 20, hidden state carried across
            steps and detached (truncated BPTT)

Usage: /usr/bin/python3 scripts/bench_torch.py --model resnet20 --batch 128 --threads 2
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import loaded_blas  # noqa: E402

# ---------------------------------------------------------------------------
# kuangliu/pytorch-cifar: VGG

VGG_CFG = {
    "VGG16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
}


class VGG(nn.Module):
    def __init__(self, vgg_name, num_classes=10):
        super().__init__()
        self.features = self._make_layers(VGG_CFG[vgg_name])
        self.classifier = nn.Linear(512, num_classes)

    def forward(self, x):
        out = self.features(x)
        out = out.view(out.size(0), -1)
        return self.classifier(out)

    def _make_layers(self, cfg):
        layers = []
        in_channels = 3
        for x in cfg:
            if x == "M":
                layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            else:
                layers += [nn.Conv2d(in_channels, x, kernel_size=3, padding=1),
                           nn.BatchNorm2d(x),
                           nn.ReLU(inplace=True)]
                in_channels = x
        layers += [nn.AvgPool2d(kernel_size=1, stride=1)]
        return nn.Sequential(*layers)


# ---------------------------------------------------------------------------
# kuangliu/pytorch-cifar: ResNet18/34


class KBasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(self.expansion * planes),
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class KResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10):
        super().__init__()
        self.in_planes = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.layer1 = self._make_layer(block, 64, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 128, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, 256, num_blocks[2], stride=2)
        self.layer4 = self._make_layer(block, 512, num_blocks[3], stride=2)
        self.linear = nn.Linear(512 * block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for s in strides:
            layers.append(block(self.in_planes, planes, s))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer1(out)
        out = self.layer2(out)
        out = self.layer3(out)
        out = self.layer4(out)
        out = F.avg_pool2d(out, 4)
        out = out.view(out.size(0), -1)
        return self.linear(out)


def ResNet34(num_classes=10):
    return KResNet(KBasicBlock, [3, 4, 6, 3], num_classes)


# ---------------------------------------------------------------------------
# akamaster/pytorch_resnet_cifar10: resnet20/32/44/56


def _weights_init(m):
    if isinstance(m, (nn.Linear, nn.Conv2d)):
        init.kaiming_normal_(m.weight)


class LambdaLayer(nn.Module):
    def __init__(self, lambd):
        super().__init__()
        self.lambd = lambd

    def forward(self, x):
        return self.lambd(x)


class ABasicBlock(nn.Module):
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
                self.shortcut = LambdaLayer(lambda x: F.pad(
                    x[:, :, ::2, ::2], (0, 0, 0, 0, planes // 4, planes // 4), "constant", 0))
            elif option == "B":
                self.shortcut = nn.Sequential(
                    nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False),
                    nn.BatchNorm2d(self.expansion * planes),
                )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class AResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10, option="A"):
        super().__init__()
        self.option = option
        self.in_planes = 16
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = self._make_layer(block, 16, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 32, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, 64, num_blocks[2], stride=2)
        self.linear = nn.Linear(64, num_classes)
        self.apply(_weights_init)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for s in strides:
            layers.append(block(self.in_planes, planes, s, self.option))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer1(out)
        out = self.layer2(out)
        out = self.layer3(out)
        out = F.avg_pool2d(out, out.size()[3])
        out = out.view(out.size(0), -1)
        return self.linear(out)


def resnet_a(depth, num_classes=10, option="A"):
    if option not in ("A", "B"):
        raise ValueError(f"shortcut option {option!r}: want A or B")
    n = (depth - 2) // 6
    return AResNet(ABasicBlock, [n, n, n], num_classes, option)


# ---------------------------------------------------------------------------
# pytorch/examples word_language_model: RNNModel('LSTM')


class RNNModel(nn.Module):
    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


# ---------------------------------------------------------------------------

MODELS = ["resnet20", "resnet56", "vgg16", "resnet34", "lstm"]

# Language-model shape used by the benchmark (the paper's PTB LSTM).
LM_VOCAB, LM_EMB, LM_HIDDEN, LM_LAYERS, LM_DROPOUT = 10000, 300, 300, 1, 0.2
LM_BPTT, LM_BATCH = 35, 20


def peak_rss_mb():
    """Peak resident set size of this process in MB (10^6 bytes): VmHWM
    from /proc/self/status, else getrusage's ru_maxrss (KiB on Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) * 1024 / 1e6, 1)
    except OSError:
        pass
    import resource
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6, 1)


def blas_library():
    """The BLAS shared library this process has loaded (after a matmul)."""
    a = torch.ones(64, 64)
    a @ a
    return loaded_blas(",")


def cpu_capability():
    """ATen's vectorised-kernel level ("AVX2", "AVX512", ...)."""
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage" in line:
            return line.split(":", 1)[1].strip()
    return "unknown"


def build(name, shortcut="A"):
    """Builds model name; shortcut (A or B) selects the shortcut option of
    the akamaster ResNets (resnet20, resnet56) and must be A for the others,
    whose shortcuts are fixed."""
    if name in ("resnet20", "resnet56"):
        return resnet_a(int(name[len("resnet"):]), option=shortcut)
    if shortcut != "A":
        raise ValueError(f"shortcut {shortcut!r} applies to resnet20 and resnet56 only, not {name}")
    if name == "vgg16":
        return VGG("VGG16")
    if name == "resnet34":
        return ResNet34()
    if name == "lstm":
        return RNNModel("LSTM", LM_VOCAB, LM_EMB, LM_HIDDEN, LM_LAYERS, LM_DROPOUT)
    raise ValueError(f"unknown model {name!r} (known: {', '.join(MODELS)})")


def make_step(args, model):
    """Returns a function that runs one full training step, and the number
    of samples (images or tokens) one step processes."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(args.seed)
    if args.model == "lstm":
        bptt, batch = args.bptt, args.batch
        ids = torch.randint(0, LM_VOCAB, (bptt + 1, batch), generator=g)
        data, targets = ids[:-1], ids[1:].reshape(-1)
        state = [model.init_hidden(batch)]

        def step():
            hidden = tuple(h.detach() for h in state[0])
            opt.zero_grad()
            output, hidden = model(data, hidden)
            loss = F.nll_loss(output, targets)
            loss.backward()
            opt.step()
            state[0] = hidden
            return loss

        return step, bptt * batch

    x = torch.randn(args.batch, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)

    def step():
        opt.zero_grad()
        # --precision bf16: torch.cpu.amp.autocast runs the convolutions
        # and linear layers in bfloat16 (fp32 master weights), as
        # `bench train -precision bf16` does.
        with torch.cpu.amp.autocast(enabled=args.precision == "bf16", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step, args.batch


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet20", choices=MODELS)
    p.add_argument("--batch", type=int, default=0,
                   help="batch size (default 128; 20 columns for lstm)")
    p.add_argument("--bptt", type=int, default=LM_BPTT, help="lstm: time steps per batch")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps before timing")
    p.add_argument("--steps", type=int, default=10, help="timed steps (at least)")
    p.add_argument("--min-time", type=float, default=0.0,
                   help="keep stepping until this many seconds have been timed")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="only print the JSON line")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"),
                   help="bf16: CNN steps under torch.cpu.amp.autocast(dtype=torch.bfloat16)")
    args = p.parse_args(argv)
    if args.batch == 0:
        args.batch = LM_BATCH if args.model == "lstm" else 128
    for flag in ("batch", "bptt", "threads", "steps"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be at least 1, got {getattr(args, flag)}")
    if args.warmup < 0 or args.min_time < 0:
        p.error("--warmup and --min-time must not be negative")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = build(args.model)
    model.train()
    step, samples = make_step(args, model)

    for _ in range(args.warmup):
        step()
    n = 0
    fastest = float("inf")
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    while True:
        t = time.perf_counter()
        loss = step()
        fastest = min(fastest, time.perf_counter() - t)
        n += 1
        elapsed = time.perf_counter() - t0
        if n >= args.steps and elapsed >= args.min_time:
            break
    cpu = time.process_time() - cpu0
    loss = float(loss)

    rate = samples * n / elapsed
    res = {
        "impl": "torch",
        "model": args.model,
        "threads": args.threads,
        "batch": args.batch,
        "kernel": f"torch-{torch.__version__}",
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"),
        "params": sum(p.numel() for p in model.parameters()),
        "warmup": args.warmup,
        "steps": n,
        "seconds": round(elapsed, 4),
        "ms_per_step": round(1000 * elapsed / n, 3),
        "ms_per_step_min": round(1000 * fastest, 3),
        "cpu_ms_per_step": round(1000 * cpu / n, 3),
        "loss": loss,
        "precision": args.precision,
        "peak_rss_mb": peak_rss_mb(),
        "blas": blas_library(),
        "cpu_capability": cpu_capability(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", os.environ.get("DNNL_MAX_CPU_ISA", "")),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
    }
    if args.model == "lstm":
        res["bptt"] = args.bptt
        res["tok_per_s"] = round(rate, 2)
    else:
        res["img_per_s"] = round(rate, 2)
    if not args.json:
        unit = "tok/s" if args.model == "lstm" else "img/s"
        print(f"torch {args.model}: {rate:.1f} {unit}, {res['ms_per_step']:.1f} ms/step "
              f"({n} steps, {args.threads} threads, batch {args.batch})", file=sys.stderr)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
