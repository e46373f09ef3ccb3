#!/usr/bin/env python3
"""What the log's freedom buys a trainer (docs/bench-trainer.md, "Steering").

Trains gpt2-tiny for --steps steps honestly, with every element rule 3 leaves
free rounded up (--inject-fault steer-up) and down (steer-down) from step 1,
and honestly with other seeds; audits the steered runs on cpu and ref (they
must verify: the freedom is real and goes unchallenged), and prints how far
the final loss and parameters move against the honest run, beside the spread
that a different seed gives. Usage:
    bench/steer.py [--ovt build/ovt] [--steps 40] [--data FILE] [--json]
"""
import argparse, json, math, os, shutil, struct, subprocess, sys, tempfile

def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout

def final_params(rundir, steps, nparams):
    path = os.path.join(rundir, "ckpt", "step-%08d.ckpt" % steps)
    with open(path, "rb") as f:
        blob = f.read()
    body = blob[len(blob) - 32 - 12 * nparams: len(blob) - 32]
    return struct.unpack("<%di" % nparams, body[: 4 * nparams]), struct.unpack("<%df" % nparams, body[: 4 * nparams])

def ordered(i):  # float32 bits -> an integer whose order is the floats' order
    return i if i >= 0 else -(i & 0x7FFFFFFF)

def last_loss(rundir):
    with open(os.path.join(rundir, "loss.csv")) as f:
        rows = [l.split(",") for l in f.read().split("\n")[1:] if l]
    return float(rows[-1][1]), sum(float(r[1]) for r in rows) / len(rows)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ovt", default="build/ovt")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--data")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ovt-steer.")
    data = a.data
    if not data:
        text = os.path.join(work, "docs.txt")
        docs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs")
        with open(text, "w") as out:
            for name in sorted(os.listdir(docs)):
                with open(os.path.join(docs, name)) as f:
                    out.write(f.read())
        data = os.path.join(work, "tok.bin")
        run([a.ovt, "data", "text", text, "--out", data])
    common = ["--model", "gpt2-tiny", "--data", data, "--steps", str(a.steps), "--batch", "4", "--seq", "32",
              "--every", "0", "--checkpoint-every", str(a.steps), "--threads", "2"]
    runs = {"honest": [], "steer-up": ["--inject-fault", "steer-up", "--fault-step", "1"],
            "steer-down": ["--inject-fault", "steer-down", "--fault-step", "1"],
            "seed 2": ["--seed", "2"], "seed 3": ["--seed", "3"]}
    for name, extra in runs.items():
        run([a.ovt, "train", "--out", os.path.join(work, name.replace(" ", "-"))] + common + extra)
    nparams = 120576  # gpt2-tiny
    base, basef = final_params(os.path.join(work, "honest"), a.steps, nparams)
    norm = math.sqrt(sum(x * x for x in basef))
    out = {"steps": a.steps, "runs": {}}
    for name in runs:
        d = os.path.join(work, name.replace(" ", "-"))
        p, pf = final_params(d, a.steps, nparams)
        ulps = sorted(abs(ordered(x) - ordered(y)) for x, y in zip(p, base))
        moved = [u for u in ulps if u]
        last, mean = last_loss(d)
        row = {"final_loss": last, "mean_loss": mean, "params_changed": len(moved),
               "median_ulps_of_changed": moved[len(moved) // 2] if moved else 0,
               "p99_ulps_of_changed": moved[(99 * len(moved)) // 100] if moved else 0,
               "l2_over_norm": math.sqrt(sum((x - y) ** 2 for x, y in zip(pf, basef))) / norm}
        if name.startswith("steer"):
            for be in ("cpu", "ref"):
                rep = json.loads(subprocess.run([a.ovt, "audit", d, "--data", data, "--backend", be, "--json"],
                                                capture_output=True, text=True).stdout)
                row["audit_" + be] = rep["finding"]
        out["runs"][name] = row
    h = out["runs"]["honest"]
    for row in out["runs"].values():
        row["final_loss_minus_honest"] = row["final_loss"] - h["final_loss"]
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print("gpt2-tiny, B = 4, T = 32, %d steps; parameters against the honest run's" % a.steps)
        print("%-11s %12s %12s %12s %13s %11s %11s %12s  %s" % ("run", "final loss", "- honest", "mean loss",
              "params moved", "median ulp", "p99 ulp", "|dp|/|p|", "audits (cpu, ref)"))
        for name, r in out["runs"].items():
            print("%-11s %12.7f %+12.2e %12.7f %13d %11d %11d %12.3e  %s" % (name, r["final_loss"],
                  r["final_loss_minus_honest"], r["mean_loss"], r["params_changed"], r["median_ulps_of_changed"],
                  r["p99_ulps_of_changed"], r["l2_over_norm"],
                  ", ".join(r.get(k, "") for k in ("audit_cpu", "audit_ref")) if "audit_cpu" in r else "-"))
    shutil.rmtree(work)
    bad = [n for n, r in out["runs"].items() if n.startswith("steer") and
           (r["audit_cpu"] != "verified" or r["audit_ref"] != "verified")]
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main())
