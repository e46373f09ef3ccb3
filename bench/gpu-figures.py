"""The figures of docs/gpu.md's device table (issue 41), measured in one run.

For each model and shape: ovt trains --steps N with --backend cuda (RECORD)
and the median of its per-step times (steps 2..N: the first pays cuBLAS's
start) is held against PyTorch's FP32 step (bench/peers/torch_step.py
--device cuda, TF32 off), timed in the same run on the same GPU, with TF32
on and BF16 autocast beside it. Also: each side's peak GPU memory (sampled
from nvidia-smi for both processes, and PyTorch's allocator peak), ovt's
host RSS and log bytes per step, and the CPU replay's time per GPU step
(the cpu backend with the GPU's logs, which must give the same stateHash at
every replayed step).

    python3 bench/gpu-figures.py --ovt build-gpu/ovt --out runs/gpu-figures \\
        --models gpt2-small:16:1024,llama-110m:16:1024,resnet-50:128

--rehearsal runs the whole script without a GPU (the ref backend stands in
for cuda, PyTorch on the CPU, tiny shapes), so it can be checked anywhere.
Prints a table and writes figures.json and figures.md into --out.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))
from run import MODELS, RESNETS  # noqa: E402  (the peers' shapes, one table)

STEP_LINE = re.compile(r"^step\s+(\d+)/\d+ .* step ([0-9.]+) s")
STATE_LINE = re.compile(r"^state (\d+) ([0-9a-f]{64})")


def fail(msg):
    sys.exit(f"gpu-figures: {msg}")


class GpuSampler:
    """The peak GPU memory (MiB) nvidia-smi reports for one process id."""

    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self.ok = shutil.which("nvidia-smi") is not None
        self._t = threading.Thread(target=self._run, daemon=True)
        if self.ok:
            self._t.start()

    def _run(self):
        while not self._stop.is_set():
            r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                "--format=csv,noheader,nounits"], capture_output=True, text=True)
            for line in r.stdout.splitlines():
                parts = [p.strip() for p in line.split(",")]
                if len(parts) == 2 and parts[0] == str(self.pid) and parts[1].isdigit():
                    self.peak = max(self.peak, int(parts[1]))
            self._stop.wait(0.25)

    def stop(self):
        self._stop.set()
        if self.ok:
            self._t.join()
        return self.peak if self.ok else None


def make_data(out, model):
    """Byte-level text for the transformers, CIFAR-format images for the ResNets."""
    if model in RESNETS:
        path = os.path.join(out, "cifar.bin")
        if not os.path.exists(path):
            x, rec = 2463534242, bytearray()
            for i in range(1024):
                rec.append((i * 7) % 10)
                for p in range(3072):
                    x ^= (x << 13) & 0xffffffff
                    x ^= x >> 17
                    x ^= (x << 5) & 0xffffffff
                    rec.append(x >> 24)
            with open(path + ".tmp", "wb") as f:
                f.write(rec)
            os.replace(path + ".tmp", path)
        return path
    path = os.path.join(out, "tokens.txt")
    if not os.path.exists(path):
        root = os.path.dirname(HERE)
        docs = [os.path.join(root, "docs", f) for f in sorted(os.listdir(os.path.join(root, "docs")))]
        with open(path + ".tmp", "wb") as f:
            for _ in range(8):
                for d in docs:
                    f.write(open(d, "rb").read())
        os.replace(path + ".tmp", path)
    return path


def ovt_images(a, model, raw):
    """`ovt data` turns the CIFAR batch (3x32x32 presets) or an MNIST-shaped IDX pair (1x28x28) into images."""
    if RESNETS[model][3] == 3:
        img = raw + ".img"
        if not os.path.exists(img):
            subprocess.run([a.ovt, "data", "cifar", raw, "--out", img], check=True, stdout=subprocess.DEVNULL)
        return img
    img = os.path.join(a.out, "mnist-shaped.img")
    if not os.path.exists(img):
        with open(raw, "rb") as f:
            rec = f.read()
        pix = bytearray()
        lab = bytearray()
        for i in range(1024):
            r = rec[i * 3073:(i + 1) * 3073]
            lab.append(r[0])
            pix += r[1:785]
        imgs, labs = os.path.join(a.out, "img.idx"), os.path.join(a.out, "lab.idx")
        open(imgs, "wb").write(struct.pack(">IIII", 0x803, 1024, 28, 28) + pix)
        open(labs, "wb").write(struct.pack(">II", 0x801, 1024) + lab)
        subprocess.run([a.ovt, "data", "idx", "--images", imgs, "--labels", labs, "--out", img], check=True,
                       stdout=subprocess.DEVNULL)
    return img


def ovt_train(a, model, B, T, backend, out, steps, extra=()):
    data = make_data(a.out, model)
    cmd = [a.ovt, "train", "--model", model, "--steps", str(steps), "--batch", str(B), "--every", "1",
           "--checkpoint-every", "0", "--print-state", "--force", "--backend", backend, "--out", out]
    cmd += ["--data", ovt_images(a, model, data)] if model in RESNETS else ["--data", data, "--seq", str(T)]
    cmd += list(extra)
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = GpuSampler(p.pid)
    times, states, lines = {}, {}, []
    for line in p.stdout:
        lines.append(line)
        m = STEP_LINE.match(line)
        if m:
            times[int(m.group(1))] = float(m.group(2))
        m = STATE_LINE.match(line)
        if m:
            states[int(m.group(1))] = m.group(2)
    rc = p.wait()
    gpu_mib = sampler.stop()
    if rc != 0:
        fail(f"{' '.join(cmd)} failed (exit {rc}):\n" + "".join(lines[-15:]))
    run = json.load(open(os.path.join(out, "run.json")))
    timed = [times[k] for k in sorted(times) if k > 1] or list(times.values())
    return {"step_s": statistics.median(timed), "steps": steps, "states": states, "gpu_mib": gpu_mib,
            "rss_mib": run.get("max_rss_bytes_rank0", 0) / 2**20,
            "log_bytes_per_step": run.get("log_bytes_this_session", 0) / max(1, run.get("steps_this_session", 1))}


def torch_shape(model, B, T):
    if model in RESNETS:
        w, blk, stages, ch, hw, cl, n = RESNETS[model]
        return ["--arch", "resnet", "--width", str(w), "--block", str(blk), "--stages", stages, "--in-ch", str(ch),
                "--in-hw", str(hw), "--classes", str(cl), "--expect-params", str(n), "--batch", str(B)]
    m = MODELS[model]
    args = ["--layers", str(m[0]), "--width", str(m[1]), "--heads", str(m[2]), "--vocab", str(m[3]),
            "--max-seq", str(m[4]), "--batch", str(B), "--seq", str(T)]
    if len(m) > 5:
        args = ["--arch", "llama"] + args + ["--kv-heads", str(m[5]), "--hidden", str(m[6]), "--tied", str(m[7])]
    return args


def torch_step(a, model, B, T, precision):
    cmd = [a.python, os.path.join(HERE, "peers", "torch_step.py"), "--device", a.torch_device,
           "--threads", str(a.threads)] + torch_shape(model, B, T)
    if precision != "fp32" or a.torch_device == "cuda":
        cmd += ["--precision", precision]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    sampler = GpuSampler(p.pid)
    ready = p.stdout.readline().strip()
    if not ready.startswith("ready"):
        p.kill()
        sampler.stop()
        fail(f"PyTorch ({precision}) did not start: {ready or 'no output'}")

    def say(what):
        p.stdin.write(what + "\n")
        p.stdin.flush()
        return p.stdout.readline().split()[1:]

    rounds = [float(say("round")[0]) for _ in range(a.rounds)]
    alloc = int(say("gpumem")[0])
    p.stdin.close()
    p.wait()
    return {"step_s": statistics.median(rounds), "rounds": rounds, "alloc_mib": alloc / 2**20,
            "gpu_mib": sampler.stop(), "version": ready.split()[2]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ovt", default="build-gpu/ovt")
    ap.add_argument("--out", default="runs/gpu-figures")
    ap.add_argument("--models", default="gpt2-small:16:1024,llama-110m:16:1024,resnet-50:128",
                    help="MODEL:B[:T] list, comma-separated")
    ap.add_argument("--steps", type=int, default=3, help="ovt steps per model (the first is not timed)")
    ap.add_argument("--no-replay", action="store_true",
                    help="skip the CPU replay (it replays all --steps: the run's config, so its lr schedule, "
                         "names its length)")
    ap.add_argument("--rounds", type=int, default=5, help="PyTorch's timed steps per precision")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads (replay, PyTorch on cpu)")
    ap.add_argument("--python", default="", help="the python3 that imports torch (default: the first of "
                    "python3, /usr/bin/python3 that does)")
    ap.add_argument("--rehearsal", action="store_true", help="no GPU: ref backend and PyTorch on the CPU")
    a = ap.parse_args()
    a.backend = "ref" if a.rehearsal else "cuda"
    a.torch_device = "cpu" if a.rehearsal else "cuda"
    if not os.access(a.ovt, os.X_OK):
        fail(f"{a.ovt} is not an executable ovt (build one, or pass --ovt)")
    if not a.python:
        a.python = next((py for py in ("python3", "/usr/bin/python3") if shutil.which(py) and subprocess.run(
            [py, "-c", "import torch"], capture_output=True).returncode == 0), "")
        if not a.python:
            fail("no python3 here imports torch (Debian: apt-get install python3-torch; or pass --python)")
    os.makedirs(a.out, exist_ok=True)
    precisions = ["fp32"] if a.rehearsal else ["fp32", "tf32", "bf16"]
    rows = []
    for spec in a.models.split(","):
        parts = spec.split(":")
        model, B = parts[0], int(parts[1])
        T = int(parts[2]) if len(parts) > 2 else 0
        if model not in MODELS and model not in RESNETS:
            fail(f"unknown model {model} (known: {', '.join(list(MODELS) + list(RESNETS))})")
        print(f"== {model} B={B}" + (f" T={T}" if T else ""), flush=True)
        gdir = os.path.join(a.out, model + "-gpu")
        g = ovt_train(a, model, B, T, a.backend, gdir, a.steps)
        print(f"ovt {a.backend} RECORD: {g['step_s']:.3f} s/step, GPU {g['gpu_mib']} MiB, host RSS "
              f"{g['rss_mib']:.0f} MiB, log {g['log_bytes_per_step']:.0f} B/step", flush=True)
        t = {p: torch_step(a, model, B, T, p) for p in precisions}
        for p, r in t.items():
            print(f"PyTorch {r['version']} {p}: {r['step_s']:.4f} s/step, GPU {r['gpu_mib']} MiB "
                  f"(allocator peak {r['alloc_mib']:.0f} MiB)", flush=True)
        replay = None
        if not a.no_replay:
            k = a.steps
            c = ovt_train(a, model, B, T, "cpu", os.path.join(a.out, model + "-cpu"), k,
                          ["--replay", gdir, "--threads", str(a.threads)])
            same = all(c["states"].get(s) == g["states"].get(s) for s in range(1, k + 1))
            if not same:
                fail(f"{model}: the CPU replay's stateHashes differ from the GPU's within {k} step(s)")
            replay = {"steps": k, "step_s": c["step_s"], "identical": same}
            print(f"cpu replay ({a.threads} threads): {replay['step_s']:.3f} s per GPU step, stateHash identical "
                  f"at {k} step(s)", flush=True)
        rows.append({"model": model, "B": B, "T": T, "ovt": g, "torch": t, "replay": replay,
                     "ratio_fp32": g["step_s"] / t["fp32"]["step_s"],
                     "mem_ratio": (g["gpu_mib"] / t["fp32"]["gpu_mib"]) if g["gpu_mib"] and t["fp32"]["gpu_mib"]
                     else None})
    for r in rows:
        r["ovt"].pop("states", None)
    md = ["| model | shape | ovt RECORD s/step | PyTorch FP32 | ratio | TF32 | BF16 | GPU MiB ovt / PyTorch |"
          " host RSS MiB | log B/step | CPU replay s/step |", "|" + "---|" * 11]
    for r in rows:
        t = r["torch"]
        shape = f"B={r['B']}" + (f" T={r['T']}" if r["T"] else "")
        md.append(f"| {r['model']} | {shape} | {r['ovt']['step_s']:.3f} | {t['fp32']['step_s']:.4f} | "
                  f"{r['ratio_fp32']:.2f}x | {t.get('tf32', {}).get('step_s', float('nan')):.4f} | "
                  f"{t.get('bf16', {}).get('step_s', float('nan')):.4f} | {r['ovt']['gpu_mib']} / "
                  f"{t['fp32']['gpu_mib']} | {r['ovt']['rss_mib']:.0f} | {r['ovt']['log_bytes_per_step']:.0f} | "
                  f"{r['replay']['step_s'] if r['replay'] else '-'} |")
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    meta = {"date": stamp, "backend": a.backend, "rehearsal": a.rehearsal, "rows": rows}
    for name, text in (("figures.json", json.dumps(meta, indent=2)), ("figures.md", "\n".join(md) + "\n")):
        path = os.path.join(a.out, name)
        with open(path + ".tmp", "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
    print("\n".join(md))
    goal = [r for r in rows if r["model"] == "gpt2-small"]
    for r in goal:
        print(f"goal (gpt2-small): RECORD / PyTorch FP32 = {r['ratio_fp32']:.2f} (at most 1.3), GPU memory ratio "
              f"{r['mem_ratio'] if r['mem_ratio'] is None else round(r['mem_ratio'], 2)} (at most 2)")


if __name__ == "__main__":
    main()
