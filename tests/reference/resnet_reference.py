#!/usr/bin/python3
"""An independent ResNet to hold ovt against (issue 29):
torchvision's CIFAR-style ResNet built here from torch.nn.functional's
conv2d, batch_norm (training mode, momentum 0.1, the running variance
unbiased), relu and adaptive average pooling in torch.float64, reading the
safetensors files `ovt export` writes (torchvision's names) with
gpt2_reference.py's reader, on gpt2_reference.py's bound. A bottleneck block
is torchvision's (ResNet v1.5): the stride on conv2, the 3x3, and the
projection a 1x1 convolution at the block's stride with its batch norm.

  1. ovt trains the model two steps on Fashion-MNIST images (an ovt image
     file of the first 2,048 training images) and exports steps 0 and 1:
     resnet-mini (basic blocks) or resnet-50-block (a bottleneck block at
     stride 1 and one at stride 2, both projecting);
  2. the batch of step 1 is rebuilt from the seed with
     tests/kernels/rng_reference.py (pixels / 256, the samples' rule; for
     resnet-mini-augment, trained with --augment-crop 4 --augment-flip,
     each image cropped and flipped here by docs/trainer.md's formula);
  3. the loss of that batch under the step-0 parameters equals ovt's logged
     loss to a relative 1e-6;
  4. one AdamW step gives ovt's step-1 trainable parameters within
     gpt2_reference.py's per-element bound, and the running statistics after
     the step equal PyTorch's own batch_norm update to 2^-20 of each
     channel's scale (|value| + its running standard deviation).

Exit status 0 pass, 1 fail, 77 skipped (no torch, no Fashion-MNIST)."""
import gzip
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels"))
import gpt2_reference as R  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist"
RUNNING_REL = 2.0 ** -20


def image_file(path):
    with open(path, "rb") as f:
        d = f.read()
    if d[:8] != b"OVTIMGS1":
        R.fail("%s is not an ovt image file" % path)
    _, n, c, h, w, classes = struct.unpack("<6I", d[8:32])
    npix = n * c * h * w
    return dict(n=n, c=c, h=h, w=w, pixels=d[32:32 + npix], labels=d[32 + npix:])


def augment(pixels, c, h, w, seed, step, j, crop, flip):
    """Sample j's image of step `step` cropped and flipped as docs/trainer.md
    ("Data augmentation") states it: dx, dy in -crop..crop and the flip from
    purpose 4 (KRN_RNG_AUGMENT), counters 3j, 3j+1, 3j+2; out(c, y, x) =
    in(c, y + dy, (flip ? w-1-x : x) + dx), 0 outside the image."""
    import rng_reference
    dx = rng_reference.below(seed, step, 4, 3 * j, 2 * crop + 1) - crop if crop else 0
    dy = rng_reference.below(seed, step, 4, 3 * j + 1, 2 * crop + 1) - crop if crop else 0
    f = rng_reference.below(seed, step, 4, 3 * j + 2, 2) if flip else 0
    out = []
    for ch in range(c):
        for y in range(h):
            for x in range(w):
                sy, sx = y + dy, (w - 1 - x if f else x) + dx
                out.append(pixels[(ch * h + sy) * w + sx] if 0 <= sy < h and 0 <= sx < w else 0)
    return out


def batch_of(img, seed, step, B, crop=0, flip=0):
    """The batch of step `step`: the schedule's picks (purpose 2,
    KRN_RNG_BATCH), augmented when crop or flip is set, pixels / 256."""
    import rng_reference
    dim = img["c"] * img["h"] * img["w"]
    xs, ys = [], []
    for j in range(B):
        k = rng_reference.below(seed, step, 2, j, img["n"])  # purpose 2: KRN_RNG_BATCH
        pixels = img["pixels"][k * dim:(k + 1) * dim]
        if crop or flip:
            pixels = augment(pixels, img["c"], img["h"], img["w"], seed, step, j, crop, flip)
        xs.append([p / 256.0 for p in pixels])
        ys.append(img["labels"][k])
    return xs, ys


def batch_hash(xs, ys):
    """batchHash of an image batch (docs/formats.md): u32le(B) || u32le(dim) ||
    x binary32 LE || labels u32le."""
    import hashlib
    flat = [v for x in xs for v in x]
    return hashlib.sha256(struct.pack("<II", len(xs), len(xs[0])) + struct.pack("<%df" % len(flat), *flat) +
                          struct.pack("<%dI" % len(ys), *ys)).hexdigest()


def blocks(P):
    """(prefix, units, projection, stride 2) of every residual block, in
    order; the projection where torchvision's _make_layer has one (the
    block's stride is not 1, or its output has other channels than its
    input)."""
    out, s = [], 1
    while "layer%d.0.conv1.weight" % s in P:
        b = 0
        while "layer%d.%d.conv1.weight" % (s, b) in P:
            pre = "layer%d.%d." % (s, b)
            units = [u for u in ("1", "2", "3") if pre + "conv" + u + ".weight" in P]
            down = s > 1 and b == 0
            proj = pre + "downsample.0.weight" in P
            c_in, c_out = P[pre + "conv1.weight"].shape[1], P[pre + "conv" + units[-1] + ".weight"].shape[0]
            if proj != (down or c_in != c_out):
                R.fail("block %s (%d -> %d channels, stride %d) %s a projection, torchvision's %s"
                       % (pre, c_in, c_out, 2 if down else 1, "has" if proj else "lacks",
                          "does not" if proj else "has one"))
            out.append((pre, units, proj, down))
            b += 1
        s += 1
    return out


def resnet_loss(torch, P, R_stats, xs, ys, shape):
    F = torch.nn.functional
    x = torch.tensor(xs, dtype=torch.float64).view(len(xs), *shape)

    def unit(h, conv, bn, stride, relu):
        w = P[conv + ".weight"]
        h = F.conv2d(h, w, stride=stride, padding=w.shape[2] // 2)
        h = F.batch_norm(h, R_stats[bn + ".running_mean"], R_stats[bn + ".running_var"], P[bn + ".weight"],
                         P[bn + ".bias"], training=True, momentum=0.1, eps=1e-5)
        return F.relu(h) if relu else h

    h = unit(x, "conv1", "bn1", 1, True)
    for pre, units, proj, down in blocks(P):
        y = h
        bottleneck = len(units) == 3
        for i, u in enumerate(units):
            stride = 2 if down and ((bottleneck and u == "2") or (not bottleneck and u == "1")) else 1
            y = unit(y, pre + "conv" + u, pre + "bn" + u, stride, i < len(units) - 1)
        short = unit(h, pre + "downsample.0", pre + "downsample.1", 2 if down else 1, False) if proj else h
        h = F.relu(y + short)
    h = F.adaptive_avg_pool2d(h, 1).flatten(1)
    logits = h @ P["fc.weight"].t() + P["fc.bias"]
    return F.cross_entropy(logits, torch.tensor(ys, dtype=torch.long))


def reference(torch, a):
    images = os.path.join(FASHION, "train-images-idx3-ubyte.gz")
    if not os.path.exists(images):
        print("skipped: no Fashion-MNIST in %s (apt-get install dataset-fashion-mnist)" % FASHION)
        sys.exit(77)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"):
        with gzip.open(os.path.join(FASHION, name + ".gz")) as f, open(os.path.join(a.work, name), "wb") as g:
            shutil.copyfileobj(f, g)
    data, rundir = os.path.join(a.work, "train.img"), os.path.join(a.work, "run")
    R.run([a.ovt, "data", "idx", "--images", os.path.join(a.work, "train-images-idx3-ubyte"), "--labels",
           os.path.join(a.work, "train-labels-idx1-ubyte"), "--limit", "2048", "--out", data])
    # resnet-mini-augment: resnet-mini with --augment-crop 4 --augment-flip,
    # the batch rebuilt here by batch_of's own crop and flip
    model, augment = a.model.replace("-augment", ""), a.model.endswith("-augment")
    R.run([a.ovt, "train", "--model", model, "--data", data, "--out", rundir, "--checkpoint-every", "1", "--steps",
           "2", "--batch", "16", "--lr", "0.003", "--weight-decay", "0.1", "--clip", "1.0", "--threads", "2",
           "--every", "0"] + (["--augment-crop", "4", "--augment-flip"] if augment else []))
    files = []
    for step in (0, 1):
        path = os.path.join(a.work, "step%d.safetensors" % step)
        R.run([a.ovt, "export", rundir, "--step", str(step), "--format", "safetensors", "--out", path])
        files.append(R.read_safetensors(path))
    with open(os.path.join(rundir, "loss.csv")) as f:
        rows = {int(r.split(",")[0]): r.split(",") for r in f.read().split("\n")[1:] if r}
    c = R.decode_config(bytes.fromhex(files[0][1]["ovt.config"]))
    img = image_file(data)
    xs, ys = batch_of(img, c["seed"], 1, c["batch"], c["augment_crop"], c["augment_flip"])
    if "0x" + batch_hash(xs, ys) != files[1][1]["ovt.batch_hash"]:
        R.fail("the batch of step 1 rebuilt here does not hash to the step-1 export's batchHash")
    every = R.tensors_f64(torch, files[0][0], files[0][2])
    P = {k: v for k, v in every.items() if not k.endswith((".running_mean", ".running_var"))}
    stats = {k: v.clone() for k, v in every.items() if k.endswith((".running_mean", ".running_var"))}
    for p in P.values():
        p.requires_grad_(True)
    loss = resnet_loss(torch, P, stats, xs, ys, (img["c"], img["h"], img["w"]))
    ovt_loss = float(rows[1][1])
    rel = abs(loss.item() - ovt_loss) / abs(loss.item())
    print("loss of step 1's batch at step 0: ovt %.9g, reference %.17g, relative difference %.3g"
          % (ovt_loss, loss.item(), rel))
    if rel > R.LOSS_REL:
        R.fail("the loss differs from ovt's by a relative %.3g > %g" % (rel, R.LOSS_REL))
    loss.backward()
    ref, grads, k = R.adamw_step(torch, P, c)
    got = R.tensors_f64(torch, files[1][0], files[1][2])
    bad = R.compare(torch, ref, grads, got, k, (), R.G_ABS)
    # A channel's batch mean can be small against its values (they cancel),
    # and ovt's comes from float32 convolution outputs: the bound is relative
    # to the channel's scale, the square root of its running variance.
    worst, where = 0.0, ""
    for name, v in stats.items():
        var = stats[name.replace("running_mean", "running_var")]
        d = ((got[name] - v).abs() / (v.abs() + var.sqrt())).max().item()
        if d > worst:
            worst, where = d, name
    print("running statistics after step 1: %d tensors, worst difference %.3g of the channel's scale at %s "
          "(bound %g)" % (len(stats), worst, where, RUNNING_REL))
    if bad:
        R.fail("%d parameters after step 1 are outside the bound" % bad)
    if worst > RUNNING_REL:
        R.fail("the running statistics after step 1 differ from PyTorch's by a relative %.3g" % worst)


if __name__ == "__main__":
    R.main(("resnet-mini", "resnet-50-block", "resnet-mini-augment"), reference)
