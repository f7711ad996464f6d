#!/usr/bin/env bash
# Ships the model of a finished full-data CIFAR-10 run (scripts/cifar_full.sh)
# as nn/pretrained/models/NAME.safetensors with its model card NAME.md:
# the run's model file compacted and compressed (cmd/cifar -compact), then
# evaluated on the 10,000 test images with cmd/cifar -eval-only, whose
# figures the card quotes.
#
# Usage: scripts/ship_model.sh NAME RUN_DIR "one-line description"
# Environment: DATA (default /tmp/cifar10).
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1 run=$2 what=$3
DATA=${DATA:-/tmp/cifar10}
dir=nn/pretrained/models
file=$dir/$name.safetensors
mkdir -p "$dir"
bin=$(mktemp -d)/cifar
go build -o "$bin" ./cmd/cifar
compact_json=$("$bin" -weights "$run/model.safetensors" -compact "$file" -json)
# The dense network's totals, for runs that started from a compacted file.
dense_json=$("$bin" -weights "${DENSE:-$dir/resnet20-dense.safetensors}" -compact "$(mktemp -d)/dense.safetensors" -json)
eval_cmd="go run ./cmd/cifar -eval-only -weights $file -data $DATA"
eval_json=$("$bin" -eval-only -weights "$file" -data "$DATA" -json -progress none)
"$bin" -eval-only -weights "$file" -data "$DATA" -progress none >"$run/eval-only.txt"
python3 - "$name" "$run" "$what" "$file" "$eval_cmd" "$eval_json" "$compact_json" "$(git rev-parse --short=12 HEAD)" "$dense_json" <<'PY'
import json, os, sys
name, run, what, path, eval_cmd, eval_json, compact_json, head, dense_json = sys.argv[1:]
ev = json.loads(eval_json)
summ = json.load(open(os.path.join(run, "summary.json")))
cmd = open(os.path.join(run, "command.txt")).read().strip()
commit = open(os.path.join(run, "commit.txt")).read().strip()
size = os.path.getsize(path)
rem = json.loads(compact_json)["remaining"]  # against the network the run trained
dense = json.loads(dense_json)["remaining"]
dense_params = f" ({dense['params_total']:,} dense)" if ev['params'] != dense['params_total'] else ""
left = f"{100*rem['flops']/dense['flops_total']:.2f} % and {100*rem['params']/dense['params_total']:.2f} %"
if (rem['flops_total'], rem['params_total']) != (dense['flops_total'], dense['params_total']):
    # Trained from a compacted file: also against that network.
    left += f" of the dense network ({100*rem['flops']/rem['flops_total']:.2f} % and {100*rem['params']/rem['params_total']:.2f} % of the compacted one it was fine-tuned from)"
w = ev["weights_stats"]
eval_txt = open(os.path.join(run, "eval-only.txt")).read().rstrip()
hours = summ["train_seconds"] / 3600
# A warm start (-weights) names the file and its SHA-256; the batch-norm
# recalibrations (-recalibrate) the epochs and batches.
started = ""
if summ.get("init"):
    started = f"| started from | `{summ['init']}` (SHA-256 `{summ['init_sha256']}`) |\n"
recal = ""
if summ.get("recalibrated_epochs"):
    ep = ", ".join(str(e) for e in summ["recalibrated_epochs"])
    recal = f"| batch-norm statistics re-estimated | over {summ['config']['recalibrate']} training batches, in epoch {ep} |\n"
card = f"""# {name}

{what}

| | |
|---|---|
| network | ResNet-20 (option-B shortcuts), {ev['params']:,} parameters{dense_params} |
| test accuracy (10,000 CIFAR-10 test images) | {100*ev['test_acc']:.2f} % |
| exact zeros (convolution and linear weights) | {100*w['zero_ratio']:.2f} % |
| binary weights (±s, one s per tensor) | {100*w.get('binary_ratio', 0):.2f} % |
| FLOPs and parameters left after compaction | {left} |
| file size | {size:,} bytes |
| trained | {summ['epochs']} epochs in {hours:.2f} h on 2 cores, at commit {commit} |
{started}{recal}
Measured with (CIFAR-10 from `../shared/data/cifar10/prepare`, a JPEG-q75
reconstruction of the official images, so figures can differ slightly from
the official release):

```sh
{eval_cmd}
```

```
{eval_txt}
```

Trained with (the run's command; `scripts/cifar_full.sh` lists every run,
docs/cifar-full.md the results):

```sh
{cmd}
```

and shipped with `scripts/ship_model.sh` at commit {head}.
"""
open(path[:-len(".safetensors")] + ".md", "w").write(card)
PY
echo "$file: $(stat -c %s "$file") bytes; card ${file%.safetensors}.md"
