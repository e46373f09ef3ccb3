#!/usr/bin/env python3
"""Independent reference for the trainer's hashes and checkpoint layout
(docs/formats.md).

Reads a JSON description written by test_trn_state and prints, one per line,
`name hex` for: the run-config encoding, configHash, stateHash, and any
batches listed. It rebuilds every byte from the field values with struct and
hashlib, sharing no code with the C implementation. With `--checkpoint FILE`
it parses a checkpoint instead and prints the stateHash of its contents,
and with `--proof FILE` it checks an `ovt state-proof --json` file: the leaf
hashes climb the tensor's tree to its root, and the roots with the config
and the step give the stateHash it states.

Two stateHash versions (docs/formats.md, "State and stateHash"): 1, a
SHA-256 per tensor, and 3, the root of each tensor's tree of 64 KiB leaves
(leaf SHA-256(0x00 || piece), node SHA-256(0x01 || left || right), an odd
last node moves up), named by a trailing u32 of the config encoding."""
import hashlib
import json
import struct
import sys


LEAF_BYTES = 65536
BASE_LENGTHS = {1: 168, 2: 204, 3: 208, 4: 236, 5: 260}


def config_encoding(c):
    model = [c["kind"], c["n_layer"], c["width"], c["n_head"], c["vocab"], c["max_seq"],
             c["in_dim"], c["n_class"]]
    schedule = c.get("schedule", 0)
    init_hash = bytes.fromhex(c.get("init_hash", "00" * 32))
    # version 1 while it can hold the config (linear schedule, no init_hash)
    v2 = schedule != 0 or init_hash != bytes(32)
    enc = b"OVTRCFG\x00" + struct.pack("<I", 2 if v2 else 1) + struct.pack("<8I", *model)
    enc += struct.pack("<7d", c["lr"], c["lr_min"], c["beta1"], c["beta2"], c["eps"],
                       c["weight_decay"], c["grad_clip"])
    enc += struct.pack("<4I", c["warmup_steps"], c["decay_steps"], c["batch_size"], c["seq_len"])
    enc += struct.pack("<Q", c["seed"])
    enc += struct.pack("<3I", c["grid_bits"], c["band_rules"], c["head_shift"])
    enc += bytes.fromhex(c["dataset_hash"])
    if v2:
        enc += struct.pack("<I", schedule) + init_hash
    if c.get("state_hash", 1) == 3:  # the tree: a trailing u32 3; version 1 has none
        enc += struct.pack("<I", 3)
    return enc


def tree_leaves(data):
    """The leaf hashes of a byte string: 64 KiB pieces, the last short, one
    empty piece for no bytes."""
    pieces = [data[i:i + LEAF_BYTES] for i in range(0, len(data), LEAF_BYTES)] or [b""]
    return [hashlib.sha256(b"\x00" + p).digest() for p in pieces]


def tree_levels(leaves):
    """Every level of the tree, leaves first, the root's level last."""
    levels = [list(leaves)]
    while len(levels[-1]) > 1:
        cur = levels[-1]
        up = [hashlib.sha256(b"\x01" + cur[i] + cur[i + 1]).digest() for i in range(0, len(cur) - 1, 2)]
        if len(cur) % 2:
            up.append(cur[-1])
        levels.append(up)
    return levels


def tensor_digest(data, version):
    if version == 3:
        return tree_levels(tree_leaves(data))[-1][0]
    return hashlib.sha256(data).digest()


def combine(config_hash, step, version, digests):
    h = hashlib.sha256()
    h.update(b"ovt.state.v3" if version == 3 else b"ovt.state.v1")
    h.update(config_hash)
    h.update(struct.pack("<QI", step, len(digests)))
    for d in digests:
        h.update(d)
    return h.digest()


def state_hash(config_hash, step, sizes, sections, version=1):
    """sections: the params, m and v, each a bytes object of little-endian
    float32 or a list of floats."""
    digests = []
    for values in sections:
        raw = values if isinstance(values, bytes) else struct.pack("<%df" % len(values), *values)
        off = 0
        for n in sizes:
            digests.append(tensor_digest(raw[4 * off:4 * (off + n)], version))
            off += n
    return combine(config_hash, step, version, digests)


def config_state_version(enc):
    """The stateHash version an encoding names: 3 with the trailing field."""
    base = BASE_LENGTHS[struct.unpack_from("<I", enc, 8)[0]]
    assert len(enc) in (base, base + 4), "config length"
    if len(enc) == base:
        return 1
    assert struct.unpack_from("<I", enc, base)[0] == 3, "stateHash version field"
    return 3


def checkpoint_state_hash(path):
    """Parses a checkpoint by the offsets in docs/formats.md, checks its
    trailing SHA-256, and recomputes stateHash from its contents."""
    raw = open(path, "rb").read()
    assert raw[:8] == b"OVTCKPT\x00", "magic"
    version, cfg_len = struct.unpack_from("<II", raw, 8)
    assert version == 1, "checkpoint version"
    assert hashlib.sha256(raw[:-32]).digest() == raw[-32:], "checksum"
    enc = raw[16:16 + cfg_len]
    assert enc[:8] == b"OVTRCFG\x00", "config magic"
    state_version = config_state_version(enc)
    config_hash = hashlib.sha256(enc).digest()
    step, count, nparams = struct.unpack_from("<QIQ", raw, 16 + cfg_len)
    sizes = list(struct.unpack_from("<%dQ" % count, raw, 36 + cfg_len))
    assert sum(sizes) == nparams, "sizes table"
    body = 36 + cfg_len + 8 * count
    assert len(raw) == body + 12 * nparams + 32, "length"
    sections = [raw[body + 4 * nparams * s:body + 4 * nparams * (s + 1)] for s in range(3)]
    return state_hash(config_hash, step, sizes, sections, state_version)


def check_proof(path):
    """Checks an `ovt state-proof --json` file by docs/formats.md alone:
    the leaves [first, first + count) with the proof climb to the tensor's
    stated root (rebuilding the climb level by level), the roots combine to
    the stated stateHash. Returns the stateHash."""
    p = json.load(open(path))
    hx = lambda s: bytes.fromhex(s.removeprefix("0x"))
    enc = hx(p["config"])
    version = config_state_version(enc)
    assert version == 3, "a proof needs the tree stateHash"
    roots = [hx(r) for r in p["roots"]]
    d = p["digest"]
    n, first, count = p["leaves_total"], p["first"], len(p["leaves"])
    assert 0 <= first and count >= 1 and first + count <= n, "leaf range"
    level = {first + i: hx(h) for i, h in enumerate(p["leaves"])}
    proof = [hx(h) for h in p["proof"]]
    lo, hi, width = first, first + count - 1, n
    while width > 1:
        if lo % 2 == 1:
            level[lo - 1] = proof.pop(0)
            lo -= 1
        if hi % 2 == 0 and hi + 1 < width:
            level[hi + 1] = proof.pop(0)
            hi += 1
        up = {}
        for i in range(lo, hi + 1, 2):
            up[i // 2] = hashlib.sha256(b"\x01" + level[i] + level[i + 1]).digest() if i + 1 <= hi else level[i]
        level, lo, hi, width = up, lo // 2, hi // 2, (width + 1) // 2
    assert not proof, "proof longer than the climb"
    assert level[0] == roots[d], "the leaves do not climb to the tensor's root"
    sh = combine(hashlib.sha256(enc).digest(), p["step"], version, roots)
    assert sh == hx(p["state_hash"]), "the roots do not combine to the stateHash"
    return sh


def main():
    if sys.argv[1] == "--checkpoint":
        print("checkpoint_state_hash", checkpoint_state_hash(sys.argv[2]).hex())
        return
    if sys.argv[1] == "--proof":
        print("proof_state_hash", check_proof(sys.argv[2]).hex())
        return
    d = json.load(open(sys.argv[1]))
    enc = config_encoding(d["config"])
    ch = hashlib.sha256(enc).digest()
    print("config_encoding", enc.hex())
    print("config_hash", ch.hex())
    st = d["state"]
    version = d["config"].get("state_hash", 1)
    print("state_hash", state_hash(ch, st["step"], st["sizes"], [st["params"], st["m"], st["v"]], version).hex())
    for i, b in enumerate(d.get("token_batches", [])):
        n = b["B"] * b["T"]
        raw = struct.pack("<II", b["B"], b["T"]) + struct.pack("<%dI" % n, *b["inputs"])
        raw += struct.pack("<%dI" % n, *b["targets"])
        print("token_batch_%d" % i, hashlib.sha256(raw).hexdigest())
    for i, b in enumerate(d.get("sample_batches", [])):
        raw = struct.pack("<II", b["B"], b["dim"]) + struct.pack("<%df" % len(b["x"]), *b["x"])
        raw += struct.pack("<%dI" % len(b["y"]), *b["y"])
        print("sample_batch_%d" % i, hashlib.sha256(raw).hexdigest())


if __name__ == "__main__":
    main()
