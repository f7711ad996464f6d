#!/usr/bin/python3
"""PyTorch reference run of cmd/ptb's default training, for docs/ptb.md.

It follows pytorch/examples word_language_model (RNNModel 'LSTM', untied)
with the settings cmd/ptb uses by default: embedding and hidden size 300,
one layer, dropout 0.5, Adam (lr 1e-3), gradient clipping to norm 0.25,
bptt 35, batch 20, evaluation batch 10, hidden state carried and detached,
lr divided by 1.2 after an epoch whose validation loss did not improve.
As cmd/ptb does without ptb.train.txt, it trains on ptb.valid.txt (which
defines the vocabulary; unknown test words become <unk>) and uses
ptb.test.txt for the schedule and the reported perplexity.

Usage: /usr/bin/python3 cmd/ptb/testdata/torch_ptb.py DATA_DIR [EPOCHS] [THREADS]
Prints one JSON line per epoch (train/test perplexity, tokens per second).
"""

import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def tokens(path, vocab, grow):
    ids = []
    unk = vocab.get("<unk>")
    with open(path) as f:
        for line in f:
            for w in line.split() + ["<eos>"]:
                if w not in vocab:
                    if grow:
                        vocab[w] = len(vocab)
                    else:
                        ids.append(unk)
                        continue
                ids.append(vocab[w])
    return torch.tensor(ids, dtype=torch.long)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    n = min(bptt, len(source) - 1 - i)
    return source[i:i + n], source[i + 1:i + 1 + n].reshape(-1)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, x, hidden):
        emb = self.drop(self.encoder(x))
        out, hidden = self.rnn(emb, hidden)
        return self.decoder(self.drop(out)).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, bsz):
        w = next(self.parameters())
        return (w.new_zeros(self.nlayers, bsz, self.nhid), w.new_zeros(self.nlayers, bsz, self.nhid))


def main():
    data = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    vocab = {}
    train = batchify(tokens(os.path.join(data, "ptb.valid.txt"), vocab, True), 20)
    test = batchify(tokens(os.path.join(data, "ptb.test.txt"), vocab, False), 10)
    model = RNNModel(len(vocab), 300, 300, 1, 0.5)
    lr = 1e-3
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    best = None
    for epoch in range(1, epochs + 1):
        model.train()
        hidden = model.init_hidden(20)
        total, count, start = 0.0, 0, time.time()
        for i in range(0, train.size(0) - 1, 35):
            x, y = get_batch(train, i, 35)
            hidden = tuple(h.detach() for h in hidden)
            opt.zero_grad()
            out, hidden = model(x, hidden)
            loss = F.cross_entropy(out, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            opt.step()
            total += loss.item() * y.numel()
            count += y.numel()
        secs = time.time() - start
        model.eval()
        hidden = model.init_hidden(10)
        tl, tc = 0.0, 0
        with torch.no_grad():
            for i in range(0, test.size(0) - 1, 35):
                x, y = get_batch(test, i, 35)
                out, hidden = model(x, hidden)
                tl += F.cross_entropy(out, y, reduction="sum").item()
                tc += y.numel()
        test_loss = tl / tc
        if best is None or test_loss < best:
            best = test_loss
        else:
            lr /= 1.2
            for g in opt.param_groups:
                g["lr"] = lr
        print(json.dumps({"epoch": epoch, "train_ppl": math.exp(total / count), "test_ppl": math.exp(test_loss),
                          "tok_per_s": count / secs, "threads": threads, "vocab": len(vocab)}), flush=True)


if __name__ == "__main__":
    main()
