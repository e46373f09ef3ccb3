"""Drives the peer benchmark (bench/peers/run.sh): bench_peers (ovt RECORD,
ovt PLAIN, plain FP32 C with SGEMM) and torch_step.py (PyTorch, when it
imports) each start once and warm up, then take turns, one round at a time:
a round is one timed step of each of the four, never two running at once.
Prints every round with the load average, then the medians and their ratios
to ovt's RECORD step, ovt's log of one RECORD step (entries, encoded bytes)
and each process's peak resident set."""
import argparse
import os
import statistics
import subprocess
import sys

# layers, width, heads, vocab, context; Llama: its kv heads, hidden width and tied head too
MODELS = {"gpt2-small": (12, 768, 12, 50257, 1024), "gpt2-tiny": (2, 64, 4, 256, 64),
          "llama-tiny": (2, 64, 4, 256, 64, 2, 192, 0), "llama-15m": (6, 288, 6, 32000, 256, 6, 768, 1),
          "llama-110m": (12, 768, 12, 32000, 1024, 12, 2048, 1)}
# ResNets (trainer/config.c): width, block (1 basic, 2 bottleneck), blocks per
# stage, input channels and side, classes, and the trainable parameters counted
# by hand (torch_step.py fails on another count): ResNet-50 is torchvision's
# 25,557,032 less its 7x7 stem and 1000-class head (9,408 + 2,049,000) plus a
# 3x3 stem and a 10-class head (1,728 + 20,490); ResNet-18 the CIFAR ResNet-18's
# 11,173,962; resnet-mini 144 + 32 (stem) + 4,672 + 14,528 + 57,728 + 650 (fc)
RESNETS = {"resnet-mini": (16, 1, "1,1,1", 1, 28, 10, 77754), "resnet-18": (64, 1, "2,2,2,2", 3, 32, 10, 11173962),
           "resnet-50": (64, 2, "3,4,6,3", 3, 32, 10, 23520842)}


def start(cmd):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = p.stdout.readline().strip()
    if not ready.startswith("ready"):
        p.kill()
        return None, ready
    return p, ready


def ask(p):
    return [float(x) for x in say(p, "round")]


def say(p, what):
    p.stdin.write(what + "\n")
    p.stdin.flush()
    return p.stdout.readline().split()[1:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bench/bench_peers")
    ap.add_argument("--model", default="gpt2-small", choices=sorted(MODELS) + sorted(RESNETS))
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", default="", help="the python3 that runs torch_step.py (default: the first that imports torch)")
    a = ap.parse_args()
    if a.model in RESNETS:
        width, block, stages, in_ch, hw, K, nparams = RESNETS[a.model]
        arch = ["--arch", "resnet", "--width", str(width), "--block", str(block), "--stages", stages, "--in-ch",
                str(in_ch), "--in-hw", str(hw), "--classes", str(K), "--expect-params", str(nparams)]
    else:
        L, C, NH, V, maxT = MODELS[a.model][:5]
        arch = ["--layers", str(L), "--width", str(C), "--heads", str(NH), "--vocab", str(V), "--max-seq", str(maxT)]
        if a.model.startswith("llama"):
            NKV, H, tied = MODELS[a.model][5:]
            arch += ["--arch", "llama", "--kv-heads", str(NKV), "--hidden", str(H), "--tied", str(tied)]
    shape = ["--batch", str(a.batch), "--seq", str(a.seq), "--threads", str(a.threads)]
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    c, ready = start([a.bin, "--model", a.model] + shape)
    if c is None:
        sys.exit(f"bench_peers did not start: {ready}")
    print(ready, flush=True)
    here = os.path.dirname(os.path.abspath(__file__))
    # the first of these that imports torch runs its step (Debian's
    # python3-torch lives in /usr/bin/python3's packages, not a venv's)
    t, tready = None, "no python3 here imports torch (Debian: apt-get install python3-torch)"
    for py in dict.fromkeys([a.python] if a.python else [sys.executable, "/usr/bin/python3"]):
        if subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0:
            t, tready = start([py, os.path.join(here, "torch_step.py")] + arch + shape)
            break
    print(tready if t else f"PyTorch row skipped: {tready}", flush=True)
    ovt_state, torch_state = ready.split()[2], (tready.split() + ["", "", ""])[5]
    if t and a.model in RESNETS and torch_state != ovt_state:
        sys.exit(f"PyTorch's ResNet has {torch_state} parameters and running statistics, ovt's state {ovt_state}: "
                 "the two networks differ")

    rows = {"ovt RECORD": [], "ovt PLAIN": [], "plain FP32 C (OpenBLAS SGEMM)": [], "PyTorch FP32": []}
    loads = []
    for r in range(a.rounds):
        rec, plain, f32 = ask(c)
        rows["ovt RECORD"].append(rec)
        rows["ovt PLAIN"].append(plain)
        line = f"round {r + 1}: RECORD {rec:.3f} s, PLAIN {plain:.3f} s"
        if f32 >= 0:  # GPT-2 only
            rows["plain FP32 C (OpenBLAS SGEMM)"].append(f32)
            line += f", FP32 C {f32:.3f} s"
        if t:
            (pt,) = ask(t)
            rows["PyTorch FP32"].append(pt)
            line += f", PyTorch {pt:.3f} s"
        load = os.getloadavg()[0]
        loads.append(load)
        print(f"{line}; load average {load:.2f}", flush=True)
    rss = {name: int(say(p, "rss")[0]) for name, p in (("ovt (bench_peers)", c), ("PyTorch", t)) if p}
    for p in (c, t):
        if p:
            p.stdin.close()
            p.wait()

    rec = statistics.median(rows["ovt RECORD"])
    seq = "" if a.model in RESNETS else f", T = {a.seq}"
    print(f"\n{a.model}, B = {a.batch}{seq}, {a.threads} threads, median of {a.rounds} interleaved rounds, "
          f"load average {min(loads):.2f} to {max(loads):.2f}")
    # the fastest round too: on shared cores it is the least disturbed one
    print("| step | median s | this / ovt RECORD | ovt RECORD / this | fastest round s |")
    print("|---|---|---|---|---|")
    for name, v in rows.items():
        if v:
            m = statistics.median(v)
            print(f"| {name} | {m:.3f} | {m / rec:.2f} | {rec / m:.2f} | {min(v):.3f} |")
        else:
            print(f"| {name} | not run | | | |")
    info = ready.split()
    entries, nbytes = int(info[info.index("log_entries") + 1]), int(info[info.index("log_bytes") + 1])
    print(f"\novt's log of one RECORD step: {entries} entries, {nbytes} bytes encoded ({nbytes / 1e6:.3f} MB)")
    print("peak resident set (getrusage; ovt's holds the initial state and each step's copy of it): " +
          ", ".join(f"{name} {kb} KB ({kb / 1e6:.2f} GB)" for name, kb in rss.items()))


if __name__ == "__main__":
    main()
