#!/usr/bin/python3
"""An independent Llama to hold ovt against: written here directly in
PyTorch 1.13 in torch.float64 (no transformers package) from Hugging Face
LlamaForCausalLM's definition, reading the safetensors files `ovt export`
writes (LlamaForCausalLM's names, q_proj and k_proj in Hugging Face's
rotary order): RMSNorm x * rsqrt(mean(x^2) + eps) * w, rotary embeddings by
rotate_half on q and k, grouped-query attention (repeat_kv: key/value head
j serves query heads j*G .. j*G + G - 1), causal softmax scaled by
1/sqrt(head size), the SwiGLU MLP down(silu(gate(x)) * up(x)), no biases, a
final RMSNorm and the output head lm_head (embed_tokens when it is not
stored: tied), mean cross-entropy.

The rotary frequencies are the numeric contract's, float32 values of
theta^(-2i/hs) (docs/op-bounds.md, "rope"; Hugging Face computes inv_freq
in float32 as well); the angles t * freq and their cos and sin are FP64
here. Everything else is gpt2_reference.py's harness: the same checks
(the loss at every exported step, one AdamW step against ovt's step-1
parameters within its stated tolerance) and the same exit statuses.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as R  # noqa: E402

# The gradient's allowed error, as G_ABS in gpt2_reference.py (its value;
# the parameters after one step stay within half of the bound on both presets).
G_ABS = 16.0
ROW_SCALED = ("model.embed_tokens.weight",)


def llama_loss(torch, P, c, inputs, targets):
    F = torch.nn.functional
    idx = torch.tensor(inputs, dtype=torch.long)
    tgt = torch.tensor(targets, dtype=torch.long)
    B, T = idx.shape
    C, NH, NKV, L, eps = c["width"], c["n_head"], c["n_kv_head"], c["n_layer"], c["norm_eps"]
    hs, G = C // NH, NH // NKV
    emb = P["model.embed_tokens.weight"]
    inv = torch.tensor([R.f32(c["rope_theta"] ** (-(2.0 * i) / hs)) for i in range(hs // 2)], dtype=torch.float64)
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    cos = torch.cat([ang.cos(), ang.cos()], dim=-1)  # (T, hs), Hugging Face's halves
    sin = torch.cat([ang.sin(), ang.sin()], dim=-1)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))

    def rms(u, w):
        return u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + eps) * w

    def rotate_half(u):
        return torch.cat((-u[..., hs // 2:], u[..., :hs // 2]), dim=-1)

    def heads(u, n):
        return u.view(B, T, n, hs).transpose(1, 2)

    x = emb[idx]
    for layer in range(L):
        pre = "model.layers.%d." % layer
        h = rms(x, P[pre + "input_layernorm.weight"])
        q = heads(h @ P[pre + "self_attn.q_proj.weight"].t(), NH)
        k = heads(h @ P[pre + "self_attn.k_proj.weight"].t(), NKV)
        v = heads(h @ P[pre + "self_attn.v_proj.weight"].t(), NKV)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + y @ P[pre + "self_attn.o_proj.weight"].t()
        h = rms(x, P[pre + "post_attention_layernorm.weight"])
        gate, up = h @ P[pre + "mlp.gate_proj.weight"].t(), h @ P[pre + "mlp.up_proj.weight"].t()
        x = x + (F.silu(gate) * up) @ P[pre + "mlp.down_proj.weight"].t()
    x = rms(x, P["model.norm.weight"])
    logits = x @ P.get("lm_head.weight", emb).t()
    return F.cross_entropy(logits.view(B * T, -1), tgt.view(B * T))


def reference(torch, a):
    text = "/usr/share/common-licenses/GPL-3"
    if not os.path.exists(text):
        text = os.path.join(a.source_dir, "docs", "trainer.md")
    data, rundir = os.path.join(a.work, "tokens.bin"), os.path.join(a.work, "run")
    if a.model == "llama-15m":
        tok = os.path.join(a.source_dir, "node_modules", "@lenml", "tokenizer-llama2")
        if not os.path.isdir(tok):
            print("skipped: no Llama 2 tokenizer in %s (npm ci)" % tok)
            sys.exit(77)
        R.run([a.ovt, "data", "text", text, "--tokenizer", "llama2", "--out", data])
        flags, steps = ["--batch", "2", "--seq", "32", "--steps", "2", "--lr", "0.0006"], (0, 1)
    else:
        # byte tokens, grouped-query attention, its own head; a later step
        # too, where trained parameters make larger activations
        R.run([a.ovt, "data", "text", text, "--out", data])
        flags = ["--batch", "4", "--seq", "32", "--steps", "20", "--warmup", "2", "--schedule", "linear",
                 "--lr", "0.003"]
        steps = (0, 1, 19)
    R.run([a.ovt, "train", "--model", a.model, "--data", data, "--out", rundir, "--checkpoint-every", "1",
           "--weight-decay", "0.1", "--clip", "1.0", "--threads", "2", "--every", "0"] + flags)
    R.check_run(torch, a, data, rundir, steps, llama_loss, ROW_SCALED, G_ABS)


if __name__ == "__main__":
    R.main(("llama-tiny", "llama-15m"), reference)
