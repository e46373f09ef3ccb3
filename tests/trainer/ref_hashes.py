#!/usr/bin/env python3
"""Independent reference for the trainer's hashes and checkpoint layout
(docs/formats.md).

Reads a JSON description written by test_trn_state and prints, one per line,
`name hex` for: the run-config encoding, configHash, stateHash, and any
batches listed. It rebuilds every byte from the field values with struct and
hashlib, sharing no code with the C implementation. With `--checkpoint FILE`
it parses a checkpoint instead and prints the stateHash of its contents."""
import hashlib
import json
import struct
import sys


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
    return enc


def state_hash(config_hash, step, sizes, sections):
    h = hashlib.sha256()
    h.update(b"ovt.state.v1")
    h.update(config_hash)
    h.update(struct.pack("<QI", step, 3 * len(sizes)))
    for values in sections:
        off = 0
        for n in sizes:
            h.update(hashlib.sha256(struct.pack("<%df" % n, *values[off:off + n])).digest())
            off += n
    return h.digest()


def checkpoint_state_hash(path):
    """Parses a checkpoint by the offsets in docs/formats.md, checks its
    trailing SHA-256, and recomputes stateHash from its contents."""
    raw = open(path, "rb").read()
    assert raw[:8] == b"OVTCKPT\x00", "magic"
    version, cfg_len = struct.unpack_from("<II", raw, 8)
    assert version == 1 and cfg_len in (168, 204), "version or config length"
    assert struct.unpack_from("<I", raw, 24)[0] == (1 if cfg_len == 168 else 2), "config version"
    assert hashlib.sha256(raw[:-32]).digest() == raw[-32:], "checksum"
    config_hash = hashlib.sha256(raw[16:16 + cfg_len]).digest()
    step, count, nparams = struct.unpack_from("<QIQ", raw, 16 + cfg_len)
    sizes = list(struct.unpack_from("<%dQ" % count, raw, 36 + cfg_len))
    assert sum(sizes) == nparams, "sizes table"
    body = 36 + cfg_len + 8 * count
    assert len(raw) == body + 12 * nparams + 32, "length"
    sections = [struct.unpack_from("<%df" % nparams, raw, body + 4 * nparams * s) for s in range(3)]
    return state_hash(config_hash, step, sizes, sections)


def main():
    if sys.argv[1] == "--checkpoint":
        print("checkpoint_state_hash", checkpoint_state_hash(sys.argv[2]).hex())
        return
    d = json.load(open(sys.argv[1]))
    enc = config_encoding(d["config"])
    ch = hashlib.sha256(enc).digest()
    print("config_encoding", enc.hex())
    print("config_hash", ch.hex())
    st = d["state"]
    print("state_hash", state_hash(ch, st["step"], st["sizes"], [st["params"], st["m"], st["v"]]).hex())
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
