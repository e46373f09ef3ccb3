#!/usr/bin/env python3
"""Issue 13's figures for whole training steps (docs/bench-trainer.md,
"Data-parallel steps"): `ovt train` with S = 4 shards on R = 1 process
(2 threads) and on R = 2 processes under mpirun (1 thread each; over TCP on
loopback as the tests run, and over Open MPI's shared-memory transport),
against the same run in one shard (S = 1, 2 threads), interleaved round by
round.

For each configuration it reports the median step time (steps 2.. of each
run: step 1 also faults in the workspace), the time rank 0 spent in the
exchanges with the other ranks (ovt train's run.json,
comm_seconds_this_session, over the steps), the log bytes per step, and the
peak memory of one process (run.json's max_rss_bytes_rank0; under mpirun
every rank holds the same buffers, rank 0 also writes the files). It checks
that the S = 4 runs on R = 1 and R = 2 wrote the same steps.bin (the bits do
not depend on the process count). Prints a Markdown table and the load
average before and after.

    python3 bench/dp_train.py [--model gpt2-tiny|gpt2-small] [--batch 8]
                              [--seq 64] [--steps 4] [--rounds 2]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPI_COMMON = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "oob_tcp_if_include", "lo"]
MPI_BTL = {"tcp": ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"],
           "vader": ["--mca", "btl", "self,vader"]}


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def make_data(ovt, model, tmp):
    text = os.path.join(tmp, "text.txt")
    with open(text, "w") as f:
        for i in range(20000):
            f.write("line %d: the quick brown fox jumps over the lazy dog %d times.\n" % (i, i * 7 % 13))
    out = os.path.join(tmp, "tokens.bin")
    cmd = [ovt, "data", "text", text, "--out", out]
    if model == "gpt2-small":
        cmd += ["--bpe", "default"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return out


def run(ovt, mpirun, cfg, args, data, out):
    shards, ranks, threads, btl = cfg
    cmd = [ovt, "train", "--model", args.model, "--data", data, "--out", out, "--steps", str(args.steps),
           "--batch", str(args.batch), "--seq", str(args.seq), "--every", "1", "--threads", str(threads),
           "--checkpoint-every", "0"]
    if shards > 1:
        cmd += ["--shards", str(shards)]
    env = dict(os.environ)
    if ranks > 1:
        cmd = [mpirun, "-np", str(ranks)] + MPI_COMMON + MPI_BTL[btl] + cmd
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), p.stdout[-2000:], p.stderr[-2000:]))
    steps = [float(m.group(1)) for m in re.finditer(r"step (\d+\.\d+) s$", p.stdout, re.M)]
    with open(os.path.join(out, "run.json")) as f:
        summary = json.load(f)
    return {
        "step_s": steps[1:] if len(steps) > 1 else steps,
        "comm_s": summary["comm_seconds_this_session"] / args.steps,
        "log_bytes": summary["log_bytes_this_session"] / args.steps,
        "rss_gb": summary["max_rss_bytes_rank0"] / 1e9,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gpt2-tiny")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ovt", default=os.path.join(ROOT, "build", "ovt"))
    args = ap.parse_args()
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        sys.exit("mpirun not found: install openmpi-bin (scripts/setup.sh)")
    configs = [(1, 1, 2, ""), (4, 1, 2, ""), (4, 2, 1, "tcp"), (4, 2, 1, "vader")]
    names = {configs[0]: "S = 1, R = 1, 2 threads", configs[1]: "S = 4, R = 1, 2 threads",
             configs[2]: "S = 4, R = 2, 1 thread each, TCP loopback",
             configs[3]: "S = 4, R = 2, 1 thread each, shared memory"}
    results = {c: [] for c in configs}
    tmp = tempfile.mkdtemp(prefix="ovt-dp-bench-")
    try:
        data = make_data(args.ovt, args.model, tmp)
        print("load average before: %s" % loadavg())
        for rnd in range(args.rounds):
            for c in configs:
                out = os.path.join(tmp, "run-%d-%d-%d-%d%s" % (rnd, *c))
                results[c].append(run(args.ovt, mpirun, c, args, data, out))
        ref = open(os.path.join(tmp, "run-0-4-1-2", "steps.bin"), "rb").read()
        same = all(open(os.path.join(tmp, "run-0-4-2-1" + b, "steps.bin"), "rb").read() == ref
                   for b in ("tcp", "vader"))
        print("load average after: %s" % loadavg())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n%s, B = %d, T = %d, %d steps x %d rounds (median step of steps 2..; "
          "ratios to S = 1 in the same run)\n" % (args.model, args.batch, args.seq, args.steps, args.rounds))
    print("| configuration | step s | / S = 1 | exchanges s per step (rank 0) | log bytes per step | / S = 1 | "
          "peak memory per process GB |")
    print("|---|---|---|---|---|---|---|")
    base = None
    for c in configs:
        step = statistics.median([s for r in results[c] for s in r["step_s"]])
        comm = statistics.median([r["comm_s"] for r in results[c]])
        logb = statistics.median([r["log_bytes"] for r in results[c]])
        rss = max(r["rss_gb"] for r in results[c])
        if base is None:
            base = (step, logb)
        print("| %s | %.3f | %.2f | %.3f | %.0f | %.2f | %.2f |" % (names[c], step, step / base[0], comm, logb,
                                                                     logb / base[1], rss))
    print("\nS = 4 steps.bin identical on R = 1 and R = 2 (both transports): %s" % ("yes" if same else "NO"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
