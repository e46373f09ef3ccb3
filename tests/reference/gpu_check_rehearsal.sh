#!/usr/bin/env bash
# bench/gpu-check.sh rehearsed in its prebuilt mode (docs/gpu.md): the ctest
# build stands in for a bundle (bin/ovt), the ref backend for the GPU and
# PyTorch on the CPU for PyTorch on it. Asserts the script's own PASS, a
# replay PASS for each model and a figures.json whose rows each replayed
# identically; so a change that breaks the device check's plumbing fails
# here, before a session with a GPU finds out.
# Usage: gpu_check_rehearsal.sh OVT SOURCE_DIR WORK_DIR
set -euo pipefail
ovt=$1 src=$2 work=$3
rm -rf "$work"
mkdir -p "$work/bundle/bin" "$work/bundle/lib"
ln -s "$ovt" "$work/bundle/bin/ovt"
echo "commit (ctest build)" > "$work/bundle/BUILT"
cd "$src"
log="$work/gpu-check.log"
if ! OVT_GPU_PREBUILT="$work/bundle" OVT_GPU_REHEARSAL=1 OVT_GPU_OUT="$work/out" MODELS="gpt2-tiny llama-tiny" \
     STEPS=3 TINY_B=2 FIGURES="gpt2-tiny:2:32,resnet-mini:4" bash bench/gpu-check.sh > "$log" 2>&1; then
  tail -30 "$log"
  echo "FAIL: gpu-check.sh (rehearsal, prebuilt) did not pass"
  exit 1
fi
fails=0
check() { if "$@"; then echo "ok: ${*: -1}"; else echo "FAIL: $*"; fails=$((fails + 1)); fi; }
check grep -q '^gpu-check: PASS$' "$log"
check grep -Eq '^gpt2-tiny +2x64 +3  PASS' "$log"
check grep -Eq '^llama-tiny +2x64 +3  PASS' "$log"
check grep -q 'prebuilt: ' "$log"
# the first steps again with host tensors (OVT_CUDA_HOST_TENSORS=1): the same states
check grep -Eq '^gpt2-tiny +3  PASS ' "$log"
check grep -Eq '^llama-tiny +3  PASS ' "$log"
check /usr/bin/python3 - "$work/out/figures/figures.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["model"]: r for r in d["rows"]}
assert set(rows) == {"gpt2-tiny", "resnet-mini"}, rows.keys()
for r in rows.values():
    assert r["replay"]["identical"] is True and r["replay"]["steps"] == 3, r
    assert r["ovt"]["step_s"] > 0 and r["torch"]["fp32"]["step_s"] > 0 and r["ratio_fp32"] > 0, r
    assert r["ovt"]["log_bytes_per_step"] > 0, r
PY
[ $fails -eq 0 ] || { tail -30 "$log"; exit 1; }
echo "gpu-check rehearsal (prebuilt mode): all checks passed"
