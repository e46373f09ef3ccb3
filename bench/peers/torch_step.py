"""PyTorch's CPU training step of ovt's GPT-2, Llama or ResNet (the peer benchmark's PyTorch row).

The same model and shapes as ovt's gpt2 presets (llm.c's structure: pre-norm
blocks, GELU with tanh, tied head, mean cross-entropy; AdamW with ovt's
defaults and global-norm clipping), FP32, written the way its users write it.
After one warm-up step it prints "ready"; then for each line "round" on stdin
it runs one timed step and prints "round SECONDS"; for "rss", "rss KB" (the
process's peak resident set so far); for "gpumem", "gpumem BYTES" (the CUDA
allocator's peak, 0 on the CPU). bench/peers/run.py and bench/gpu-figures.py
drive it.

--device cuda runs the step on the GPU (each timed step ends with
torch.cuda.synchronize()); --precision fp32 (the default: TF32 off for matrix
products and convolutions, the baseline ovt's GPU step is held against), tf32
(TF32 on) or bf16 (autocast to bfloat16) are the three ways its users run it.

    python3 torch_step.py --layers 12 --width 768 --heads 12 --vocab 50257 \
        --max-seq 1024 --batch 4 --seq 64 --threads 2
    python3 torch_step.py --arch llama --layers 6 --width 288 --heads 6 --kv-heads 6 \
        --hidden 768 --tied 1 --vocab 32000 --max-seq 256 --batch 4 --seq 256 --threads 2
    python3 torch_step.py --arch resnet --width 64 --block 2 --stages 3,4,6,3 --in-ch 3 \
        --in-hw 32 --classes 10 --expect-params 23520842 --batch 8 --threads 2

The Llama is llama2.c's model.py as its users write it in PyTorch 1.13 (which
has no nn.RMSNorm or fused attention): RMSNorm, rotary embeddings on q and k
from a precomputed complex table, repeated key/value heads, SwiGLU, no biases.

The ResNet is ovt's (trainer/resnet.c; torchvision's structure with the
CIFAR-style 3x3 stem and no max pooling): bias-free convolutions, BatchNorm2d
in training mode, basic or bottleneck blocks (stride on the 3x3 convolution,
expansion 4), projection shortcuts (1x1 conv and batch norm) where the shape
changes, global average pooling, a linear head, mean cross-entropy, AdamW with
clip 1.0 as above. Its trainable parameters must number --expect-params (the
run fails otherwise), and run.py checks that they and the running statistics
number ovt's state; the batch is random pixels / 256 and random labels.
"""
import resource
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
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


class RMSNorm(nn.Module):
    def __init__(self, C, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary(x, cos, sin):
    """x (B, T, H, hs): rotate the interleaved pairs (2i, 2i+1) by position."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(3)


class LlamaBlock(nn.Module):
    def __init__(self, C, NH, NKV, H, max_seq):
        super().__init__()
        self.NH, self.NKV = NH, NKV
        self.attn_norm, self.ffn_norm = RMSNorm(C), RMSNorm(C)
        hs = C // NH
        self.wq = nn.Linear(C, C, bias=False)
        self.wk = nn.Linear(C, NKV * hs, bias=False)
        self.wv = nn.Linear(C, NKV * hs, bias=False)
        self.wo = nn.Linear(C, C, bias=False)
        self.w1 = nn.Linear(C, H, bias=False)
        self.w2 = nn.Linear(H, C, bias=False)
        self.w3 = nn.Linear(C, H, bias=False)
        mask = torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, max_seq, max_seq), persistent=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        hs = C // self.NH
        h = self.attn_norm(x)
        q = rotary(self.wq(h).view(B, T, self.NH, hs), cos, sin).transpose(1, 2)
        k = rotary(self.wk(h).view(B, T, self.NKV, hs), cos, sin).transpose(1, 2)
        v = self.wv(h).view(B, T, self.NKV, hs).transpose(1, 2)
        k = k.repeat_interleave(self.NH // self.NKV, dim=1)
        v = v.repeat_interleave(self.NH // self.NKV, dim=1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf")).softmax(dim=-1)
        x = x + self.wo((att @ v).transpose(1, 2).contiguous().view(B, T, C))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, L, C, NH, NKV, H, V, max_seq, tied, theta=10000.0):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.blocks = nn.ModuleList(LlamaBlock(C, NH, NKV, H, max_seq) for _ in range(L))
        self.norm = RMSNorm(C)
        self.head = None if tied else nn.Linear(C, V, bias=False)
        hs = C // NH
        freq = 1.0 / (theta ** (torch.arange(0, hs, 2).float() / hs))
        ang = torch.outer(torch.arange(max_seq).float(), freq)  # (T, hs/2)
        self.register_buffer("cos", ang.cos().view(max_seq, 1, hs // 2), persistent=False)
        self.register_buffer("sin", ang.sin().view(max_seq, 1, hs // 2), persistent=False)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx)
        for b in self.blocks:
            x = b(x, self.cos[:T], self.sin[:T])
        x = self.norm(x)
        logits = self.head(x) if self.head is not None else x @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def conv_bn(C, OC, k, stride):
    return nn.Sequential(nn.Conv2d(C, OC, k, stride, k // 2, bias=False), nn.BatchNorm2d(OC))


class ResBlock(nn.Module):
    def __init__(self, C, planes, stride, bottleneck):
        super().__init__()
        if bottleneck:
            OC = 4 * planes
            self.main = nn.Sequential(conv_bn(C, planes, 1, 1), nn.ReLU(), conv_bn(planes, planes, 3, stride),
                                      nn.ReLU(), conv_bn(planes, OC, 1, 1))
        else:
            OC = planes
            self.main = nn.Sequential(conv_bn(C, planes, 3, stride), nn.ReLU(), conv_bn(planes, planes, 3, 1))
        self.proj = conv_bn(C, OC, 1, stride) if stride != 1 or C != OC else None
        self.out_ch = OC

    def forward(self, x):
        return F.relu(self.main(x) + (self.proj(x) if self.proj is not None else x))


class ResNet(nn.Module):
    def __init__(self, width, bottleneck, stages, in_ch, classes):
        super().__init__()
        layers = [conv_bn(in_ch, width, 3, 1), nn.ReLU()]
        C = width
        for s, n in enumerate(stages):
            for b in range(n):
                blk = ResBlock(C, width << s, 2 if s > 0 and b == 0 else 1, bottleneck)
                layers.append(blk)
                C = blk.out_ch
        self.body = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(C, classes)

    def forward(self, x, targets):
        return F.cross_entropy(self.fc(self.pool(self.body(x)).flatten(1)), targets)


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("layers", 12), ("width", 768), ("heads", 12), ("vocab", 50257), ("max-seq", 1024),
                          ("batch", 4), ("seq", 64), ("threads", 2)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--arch", choices=["gpt2", "llama", "resnet"], default="gpt2")
    for name in ("kv-heads", "hidden", "tied", "block", "in-ch", "in-hw", "classes", "expect-params"):
        ap.add_argument("--" + name, type=int, default=0)
    ap.add_argument("--stages", default="", help="a ResNet's blocks per stage, e.g. 3,4,6,3")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("torch_step.py: --device cuda, but this PyTorch sees no CUDA device "
                     f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})")
        tf32 = a.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    elif a.precision != "fp32":
        sys.exit("torch_step.py: --precision tf32 and bf16 are GPU modes (add --device cuda)")
    if a.arch == "resnet":
        model = ResNet(a.width, a.block == 2, [int(n) for n in a.stages.split(",")], a.in_ch, a.classes)
        ntrain = sum(p.numel() for p in model.parameters() if p.requires_grad)
        if ntrain != a.expect_params:
            sys.exit(f"torch_step.py: this ResNet has {ntrain} trainable parameters, not the "
                     f"{a.expect_params} of ovt's preset: the two networks differ")
        inputs = torch.randint(0, 256, (a.batch, a.in_ch, a.in_hw, a.in_hw)).float() / 256
        targets = torch.randint(0, a.classes, (a.batch,))
    else:
        if a.arch == "llama":
            model = Llama(a.layers, a.width, a.heads, a.kv_heads, a.hidden, a.vocab, a.max_seq, a.tied)
        else:
            model = GPT2(a.layers, a.width, a.heads, a.vocab, a.max_seq)
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
        inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    model = model.to(dev)
    inputs, targets = inputs.to(dev), targets.to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    def forward():
        if a.precision == "bf16":
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                return model(inputs, targets)
        return model(inputs, targets)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = forward()
        loss.backward()
        if a.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        sync()
        return loss.item()

    step()
    nparams = sum(p.numel() for p in model.parameters())
    # ovt's state holds the batch norms' running statistics after the parameters
    nstate = nparams + sum(b.numel() for n, b in model.named_buffers() if n.endswith(("running_mean", "running_var")))
    print(f"ready torch {torch.__version__} {nparams} params {nstate} state threads {torch.get_num_threads()}"
          f" device {a.device} precision {a.precision}", flush=True)
    for line in sys.stdin:
        if line.startswith("rss"):
            print(f"rss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", flush=True)
            continue
        if line.startswith("gpumem"):
            peak = torch.cuda.max_memory_allocated() if a.device == "cuda" else 0
            print(f"gpumem {peak}", flush=True)
            continue
        if not line.startswith("round"):
            break
        sync()
        t0 = time.perf_counter()
        step()
        print(f"round {time.perf_counter() - t0:.4f}", flush=True)


if __name__ == "__main__":
    main()
