"""Drives the peer benchmark (bench/peers/run.sh): bench_peers (ovt RECORD,
ovt PLAIN, plain FP32 C with SGEMM) and torch_step.py (PyTorch, when it
imports) each start once and warm up, then take turns, one round at a time:
a round is one timed step of each of the four, never two running at once.
Prints every round with the load average, then the medians and their ratios
to ovt's RECORD step."""
import argparse
import os
import statistics
import subprocess
import sys

# layers, width, heads, vocab, context; Llama: its kv heads, hidden width and tied head too
MODELS = {"gpt2-small": (12, 768, 12, 50257, 1024), "gpt2-tiny": (2, 64, 4, 256, 64),
          "llama-tiny": (2, 64, 4, 256, 64, 2, 192, 0), "llama-15m": (6, 288, 6, 32000, 256, 6, 768, 1),
          "llama-110m": (12, 768, 12, 32000, 1024, 12, 2048, 1)}


def start(cmd):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = p.stdout.readline().strip()
    if not ready.startswith("ready"):
        p.kill()
        return None, ready
    return p, ready


def ask(p):
    p.stdin.write("round\n")
    p.stdin.flush()
    return [float(x) for x in p.stdout.readline().split()[1:]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bench/bench_peers")
    ap.add_argument("--model", default="gpt2-small", choices=sorted(MODELS))
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", default="", help="the python3 that runs torch_step.py (default: the first that imports torch)")
    a = ap.parse_args()
    L, C, NH, V, maxT = MODELS[a.model][:5]
    arch = []
    if a.model.startswith("llama"):
        NKV, H, tied = MODELS[a.model][5:]
        arch = ["--arch", "llama", "--kv-heads", str(NKV), "--hidden", str(H), "--tied", str(tied)]
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
            t, tready = start([py, os.path.join(here, "torch_step.py"), "--layers", str(L), "--width", str(C),
                               "--heads", str(NH), "--vocab", str(V), "--max-seq", str(maxT)] + arch + shape)
            break
    print(tready if t else f"PyTorch row skipped: {tready}", flush=True)

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
    for p in (c, t):
        if p:
            p.stdin.close()
            p.wait()

    rec = statistics.median(rows["ovt RECORD"])
    print(f"\n{a.model}, B = {a.batch}, T = {a.seq}, {a.threads} threads, median of {a.rounds} interleaved rounds, "
          f"load average {min(loads):.2f} to {max(loads):.2f}")
    print("| step | median s | this / ovt RECORD | ovt RECORD / this |")
    print("|---|---|---|---|")
    for name, v in rows.items():
        if v:
            m = statistics.median(v)
            print(f"| {name} | {m:.3f} | {m / rec:.2f} | {rec / m:.2f} |")
        else:
            print(f"| {name} | not run | | |")


if __name__ == "__main__":
    main()
