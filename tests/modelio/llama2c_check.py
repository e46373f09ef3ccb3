#!/usr/bin/env python3
"""An independent reader of llama2.c checkpoint files, for test_trn_llama2c.

usage: llama2c_check.py FILE.bin MODEL.safetensors

Parses FILE.bin as llama2.c's export.py writes it (legacy_export, version 0,
what run.c's memory_map_weights reads; or version1_export with its "ak42"
header), written from that description and not from ovt's C, and checks it
against ovt's safetensors export of the same parameters: every header field
against the run config in the export's "ovt.config" metadata
(docs/formats.md, "Run config": the version-4 encoding of a Llama), the file
length, every weight against the Hugging Face tensor it corresponds to (q_proj
and k_proj rows mapped back from Hugging Face's rotate_half order: HF row
h*hs + p*hs/2 + i is llama2.c row h*hs + 2i + p), and the legacy rotary tables
against cos and sin of t / theta^(2i/hs) rounded to float32. Prints one line
and exits 0 when everything matches, 1 otherwise.
"""
import json
import math
import struct
import sys


def fail(msg):
    print("llama2c_check: " + msg)
    sys.exit(1)


def read_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack_from("<Q", buf, 0)
    header = json.loads(buf[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, t in header.items():
        if t["dtype"] != "F32":
            fail("%s is %s, not F32" % (name, t["dtype"]))
        b, e = t["data_offsets"]
        tensors[name] = (t["shape"], buf[base + b : base + e])
    return meta, tensors


def run_config(meta):
    """The model fields of a version-4 run config encoding (hex)."""
    enc = bytes.fromhex(meta["ovt.config"].removeprefix("0x"))
    if enc[:8] != b"OVTRCFG\0":
        fail("ovt.config has a wrong magic")
    version, kind, n_layer, width, n_head, vocab, max_seq = struct.unpack_from("<7I", enc, 8)
    if version != 4 or kind != 3 or len(enc) not in (236, 240):  # 240: the tree stateHash's field
        fail("ovt.config is version %d of kind %d (%d bytes), not a Llama's version 4" % (version, kind, len(enc)))
    n_kv_head, hidden, tied = struct.unpack_from("<3I", enc, 208)
    (theta,) = struct.unpack_from("<d", enc, 220)
    return dict(L=n_layer, C=width, NH=n_head, V=vocab, T=max_seq, KV=n_kv_head, H=hidden, tied=tied, theta=theta)


def main():
    if len(sys.argv) != 3:
        fail("usage: llama2c_check.py FILE.bin MODEL.safetensors")
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    meta, st = read_safetensors(sys.argv[2])
    m = run_config(meta)

    # the header
    (magic,) = struct.unpack_from("<I", data, 0)
    if magic == 0x616B3432:
        (version,) = struct.unpack_from("<i", data, 4)
        dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack_from("<7i", data, 8)
        shared = data[36]
        if version != 1 or any(data[37:256]):
            fail("version %d, or the header's padding is not zero" % version)
        pos = 256
    else:
        version = 0
        dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack_from("<7i", data, 0)
        shared = 1 if vocab > 0 else 0
        vocab = abs(vocab)
        pos = 28
    want = (m["C"], m["H"], m["L"], m["NH"], m["KV"], m["V"], m["T"], 0 if not m["tied"] else 1)
    have = (dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared)
    if have != want:
        fail("header (dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared) = %s, the run's %s" % (have, want))

    C, H, L, V, T = dim, hidden, layers, vocab, seq_len
    hs = dim // heads
    kvd = kv_heads * hs

    def take(count):
        nonlocal pos
        chunk = data[pos : pos + 4 * count]
        if len(chunk) != 4 * count:
            fail("file ends at byte %d, inside a tensor" % len(data))
        pos += 4 * count
        return chunk

    def rows_of(b, rows, cols):
        return [b[4 * r * cols : 4 * (r + 1) * cols] for r in range(rows)]

    def expect(name, shape, got, rope_heads=0):
        if name not in st:
            fail("the safetensors export lacks %s" % name)
        sshape, sbytes = st.pop(name)
        if list(sshape) != list(shape):
            fail("%s is %s in the export, %s in llama2.c" % (name, sshape, shape))
        if rope_heads:
            hf = rows_of(sbytes, shape[0], shape[1])
            half = hs // 2
            l2c = [None] * shape[0]
            for h in range(rope_heads):
                for i in range(half):
                    for p in range(2):
                        l2c[h * hs + 2 * i + p] = hf[h * hs + p * half + i]
            sbytes = b"".join(l2c)
        if sbytes != got:
            fail("%s differs from llama2.c's tensor" % name)

    def stacked(hf_name, rows, cols, rope_heads=0):
        for layer in range(L):
            shape = [rows, cols] if cols else [rows]
            expect("model.layers.%d.%s" % (layer, hf_name), shape, take(rows * (cols or 1)), rope_heads)

    def embedding():
        expect("model.embed_tokens.weight", [V, C], take(V * C))

    def final_norm():
        expect("model.norm.weight", [C], take(C))

    def weights():
        stacked("self_attn.q_proj.weight", C, C, heads)
        stacked("self_attn.k_proj.weight", kvd, C, kv_heads)
        stacked("self_attn.v_proj.weight", kvd, C)
        stacked("self_attn.o_proj.weight", C, C)

    def ffn():
        stacked("mlp.gate_proj.weight", H, C)  # w1
        stacked("mlp.down_proj.weight", C, H)  # w2
        stacked("mlp.up_proj.weight", H, C)  # w3

    if version == 0:
        embedding()
        stacked("input_layernorm.weight", C, 0)
        weights()
        stacked("post_attention_layernorm.weight", C, 0)
        ffn()
        final_norm()
        for table, fn in (("freq_cis_real", math.cos), ("freq_cis_imag", math.sin)):
            got = take(T * (hs // 2))
            vals = []
            for t in range(T):
                for i in range(hs // 2):
                    vals.append(fn(t * (1.0 / m["theta"] ** ((2 * i) / hs))))
            if struct.pack("<%df" % len(vals), *vals) != got:
                fail("%s is not cos/sin(t * freq) in float32" % table)
    else:
        stacked("input_layernorm.weight", C, 0)
        stacked("post_attention_layernorm.weight", C, 0)
        final_norm()
        embedding()
        weights()
        ffn()
    if not shared:
        expect("lm_head.weight", [V, C], take(V * C))
    if pos != len(data):
        fail("%d bytes after the last tensor" % (len(data) - pos))
    if st:
        fail("the export has tensors llama2.c's file lacks: %s" % sorted(st)[:3])
    print("llama2c_check: ok, version %d, %d bytes, header %s" % (version, len(data), have))


main()
