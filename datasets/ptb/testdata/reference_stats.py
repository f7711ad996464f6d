#!/usr/bin/env python3
"""Prints the reference numbers checked by TestRealFiles in ptb_test.go.

It replays the data handling of PyTorch's word_language_model example
(data.Corpus tokenisation, batchify) on the real PTB files in
/work/shared/data/ptb, with the vocabulary built from ptb.valid.txt (the
training split is not available there), and prints token counts, vocabulary
size, special ids, the first and last rows of the batchified valid data and a
position-weighted checksum of both batchified splits.
Run: /usr/bin/python3 reference_stats.py [PTB_DIR]
"""
import sys

import torch

DIR = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/ptb"


def tokenize(path, vocab, build):
    ids = []
    with open(path, encoding="utf8") as f:
        for line in f:
            for w in line.split() + ["<eos>"]:
                if build and w not in vocab:
                    vocab[w] = len(vocab)
                ids.append(vocab.get(w, vocab.get("<unk>")))
    return ids


def batchify(data, bsz):
    data = torch.tensor(data)
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def checksum(b):
    pos = torch.arange(b.numel(), dtype=torch.int64).view_as(b)
    return int((b.to(torch.int64) * pos).sum() % 1000003)


vocab = {}
valid = tokenize(DIR + "/ptb.valid.txt", vocab, True)
test = tokenize(DIR + "/ptb.test.txt", vocab, False)
print("valid tokens", len(valid), "vocab", len(vocab), "eos", vocab["<eos>"], "unk", vocab["<unk>"])
print("test tokens", len(test), "mapped to unk", sum(1 for x in test if x == vocab["<unk>"]))
bv = batchify(valid, 10)
bt = batchify(test, 10)
print("valid batchified", tuple(bv.shape), "first row", bv[0].tolist(), "last row", bv[-1].tolist(),
      "checksum", checksum(bv))
print("test batchified", tuple(bt.shape), "checksum", checksum(bt))
