"""PyTorch's CPU training step of ovt's GPT-2 (the peer benchmark's PyTorch row).

The same model and shapes as ovt's gpt2 presets (llm.c's structure: pre-norm
blocks, GELU with tanh, tied head, mean cross-entropy; AdamW with ovt's
defaults and global-norm clipping), FP32, written the way its users write it.
After one warm-up step it prints "ready"; then for each line "round" on stdin
it runs one timed step and prints "round SECONDS". bench/peers/run.py drives it.

    python3 torch_step.py --layers 12 --width 768 --heads 12 --vocab 50257 \
        --max-seq 1024 --batch 4 --seq 64 --threads 2
"""
import argparse
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH, max_seq):
        super().__init__()
        self.NH = NH
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.attproj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)
        mask = torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, max_seq, max_seq), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.NH, hs).transpose(1, 2)
        k = k.view(B, T, self.NH, hs).transpose(1, 2)
        v = v.view(B, T, self.NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attproj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, L, C, NH, V, max_seq):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(max_seq, C)
        self.blocks = nn.ModuleList(Block(C, NH, max_seq) for _ in range(L))
        self.lnf = nn.LayerNorm(C)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("layers", 12), ("width", 768), ("heads", 12), ("vocab", 50257), ("max-seq", 1024),
                          ("batch", 4), ("seq", 64), ("threads", 2)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = GPT2(a.layers, a.width, a.heads, a.vocab, a.max_seq)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(inputs, targets)
        loss.backward()
        if a.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        return loss.item()

    step()
    nparams = sum(p.numel() for p in model.parameters())
    print(f"ready torch {torch.__version__} {nparams} params threads {torch.get_num_threads()}", flush=True)
    for line in sys.stdin:
        if not line.startswith("round"):
            break
        t0 = time.perf_counter()
        step()
        print(f"round {time.perf_counter() - t0:.4f}", flush=True)


if __name__ == "__main__":
    main()
