#!/bin/sh
# The peer benchmark in one command: builds bench_peers, then runs ovt's
# RECORD and PLAIN steps, a plain FP32 C step (OpenBLAS SGEMM) and PyTorch's
# CPU step (when python3 can import torch) of one GPT-2, Llama or ResNet
# model, interleaved round by round in one run, and prints ratios to ovt's
# RECORD step with the load average, ovt's log per step and peak memory.
# Arguments go to run.py:
#   bench/peers/run.sh [--model gpt2-small|gpt2-tiny|llama-15m|resnet-50|...] [--batch 4] [--seq 64]
#                      [--threads 2] [--rounds 3]
# On cores shared with other work PyTorch's spinning OpenMP threads lose up
# to 7x; OMP_WAIT_POLICY=PASSIVE bench/peers/run.sh ... steadies its row
# (ovt's OpenBLAS is the pthread build, on one thread: not affected).
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
[ -f build/CMakeCache.txt ] || cmake -S . -B build >/dev/null
cmake --build build --target bench_peers >/dev/null
exec python3 bench/peers/run.py --bin build/bench/bench_peers "$@"
