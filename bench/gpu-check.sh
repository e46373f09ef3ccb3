#!/usr/bin/env bash
# The GPU check of the cuda backend (docs/gpu.md). On a machine with an NVIDIA
# GPU (written for an H200, sm_90; about 5-8 minutes there), from a clean
# checkout:
#   1. installs the build dependencies if missing (apt-get; skipped when the
#      machine is offline and they are there), builds ovt with CUDA for sm_90;
#   2. runs test_cuda_ops: every op with the cuda backend on one side of each
#      backend pair, RECORD/REPLAY bitwise identical (must PASS, not skip);
#      and test_cuda_resident: every family with the run in device memory
#      against OVT_CUDA_HOST_TENSORS=1 and the cpu replay (must PASS);
#   3. for gpt2-tiny, gpt2-small, llama-tiny and resnet-mini: trains STEPS steps on the GPU (--backend
#      cuda, RECORD), replays them on the CPU (cpu backend, --replay with the
#      GPU's logs) and requires identical stateHashes at every step; runs the
#      ablation on the CPU without the logs (--nearest) and reports the first
#      step whose state differs from the GPU's; reruns the first HOST_STEPS
#      (5) GPU steps with host tensors (OVT_CUDA_HOST_TENSORS=1): the same
#      states required, its step time the resident run's baseline;
#   4. times the matrix products of a GPT-2 step with controlled rounding on the
#      GPU against plain FP32 and FP64 cuBLAS, the batched products against
#      OVT_CUDA_GEMM=per-chunk, and the tree hash on the device against the
#      host (bench_gpu);
#   5. prints a table; exits 0 only if every replay matched at every step.
# Environment: OVT_GPU_BUILD (build folder, default build-gpu), STEPS (20),
# MODELS ("gpt2-tiny gpt2-small llama-tiny resnet-mini"), RESNET_B (16),
# SMALL_B / SMALL_T (2 / 64), TINY_B / TINY_T (8 / 64), HOST_STEPS (5), OVT_GPU_ARCH (90).
# OVT_GPU_REHEARSAL=1 rehearses the script without a GPU: the "GPU" runs use
# the ref backend, the CUDA build, test_cuda_ops and bench_gpu are skipped.
# OVT_GPU_PREBUILT=DIR uses a build made elsewhere instead of building (for a
# GPU machine that cannot install packages): DIR as bench/gpu-bundle.sh makes
# it (bin/ with ovt and the device programs, lib/ with the shared libraries
# that machine lacks); nothing is installed or compiled.
# FIGURES: the MODEL:B[:T] list bench/gpu-figures.py measures against PyTorch
# on the same GPU (docs/gpu.md's device table; default gpt2-small:16:1024,
# llama-110m:16:1024,resnet-50:128; "none" skips it).
# The "GPU" runs of step 3 keep the run in device memory (docs/gpu.md,
# "Memory"); OVT_CUDA_HOST_TENSORS=1 in the environment runs them the way
# verified on 2026-12-04 instead (host tensors, copies per op).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${OVT_GPU_BUILD:-build-gpu}
steps=${STEPS:-20}
out=${OVT_GPU_OUT:-$root/runs/gpu-check}
arch=${OVT_GPU_ARCH:-90}
rehearsal=${OVT_GPU_REHEARSAL:-0}
prebuilt=${OVT_GPU_PREBUILT:-}
gpu_backend=cuda
[ "$rehearsal" = 1 ] && gpu_backend=ref
t_start=$(date +%s)
mkdir -p "$out"
say() { printf '\n== %s\n' "$*"; }
fail() { printf 'gpu-check: FAIL: %s\n' "$*" >&2; exit 1; }

say "machine"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
nproc

bin_of() { # the path of a built program: the bundle's bin/ or the build folder's
  if [ -n "$prebuilt" ]; then echo "$prebuilt/bin/$(basename "$1")"; else echo "$build/$1"; fi
}
if [ -n "$prebuilt" ]; then
  say "prebuilt: $prebuilt ($(cat "$prebuilt/BUILT" 2>/dev/null || echo 'no BUILT file'))"
  [ -x "$prebuilt/bin/ovt" ] || fail "$prebuilt/bin/ovt is missing: make the folder with bench/gpu-bundle.sh"
  export LD_LIBRARY_PATH="$prebuilt/lib:/usr/local/cuda/targets/x86_64-linux/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for b in "$prebuilt"/bin/*; do
    if ldd "$b" | grep -q "not found"; then
      fail "$(basename "$b") needs shared libraries this machine lacks: $(ldd "$b" | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')(add them with OVT_BUNDLE_LIBS when making the bundle)"
    fi
  done
fi

say "dependencies"
export PATH=/usr/local/cuda/bin:$PATH
[ "$rehearsal" = 1 ] || [ -n "$prebuilt" ] || command -v nvcc >/dev/null ||
  fail "nvcc not found (CUDA toolkit expected in /usr/local/cuda)"
packages=(build-essential cmake pkg-config libsecp256k1-dev libcurl4-openssl-dev libjansson-dev
          libssl-dev libopenblas-dev libzstd-dev zlib1g-dev)
missing=()
if command -v dpkg >/dev/null; then
  for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
fi
if [ ${#missing[@]} -gt 0 ] && [ -z "$prebuilt" ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  if ! { "${sudo_cmd[@]}" apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
    echo "apt-get could not install ${missing[*]} (offline?); trying the build anyway"
  fi
fi

if [ -n "$prebuilt" ] && [ "$rehearsal" = 1 ]; then
  ops_status="(rehearsal: not run)"
  resident_status="(rehearsal: not run)"
elif [ "$rehearsal" = 1 ]; then
  say "rehearsal: build without CUDA, the ref backend stands in for the GPU"
  cmake -S . -B "$build" -DOVT_CUDA=OFF >"$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; fail "cmake"; }
  cmake --build "$build" -j"$(nproc)" --target ovt >/dev/null
  ops_status="(rehearsal: not run)"
  resident_status="(rehearsal: not run)"
else
  if [ -z "$prebuilt" ]; then
    say "build (CUDA, sm_$arch)"
    # Warnings are not errors here: another nvcc or GCC may warn where the CI's
    # do not, and this check is about the numbers (CI builds with -Werror).
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DOVT_WERROR=OFF -DOVT_CUDA=ON \
          -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; fail "cmake"; }
    grep -q "ovt: CUDA backend ON" "$out/cmake.log" || fail "CMake did not enable the CUDA backend (see $out/cmake.log)"
    cmake --build "$build" -j"$(nproc)" --target ovt bench_gpu test_cuda_ops test_cuda_host test_cuda_resident >/dev/null
  fi

  say "test_cuda_host, test_cuda_ops (cuda on one side of every backend pair)"
  "$(bin_of tests/kernels/test_cuda_host)" | tail -1
  set +e
  "$(bin_of tests/kernels/test_cuda_ops)" > "$out/ops.log" 2>&1
  ops_rc=$?
  set -e
  tail -15 "$out/ops.log"
  [ $ops_rc -eq 77 ] && fail "test_cuda_ops skipped: no usable device"
  ops_status=$([ $ops_rc -eq 0 ] && echo PASS || echo FAIL)

  say "test_cuda_resident (every family in device memory against host tensors and the cpu replay)"
  set +e
  "$(bin_of tests/trainer/test_cuda_resident)" > "$out/resident.log" 2>&1
  res_rc=$?
  set -e
  tail -8 "$out/resident.log"
  resident_status=$([ $res_rc -eq 0 ] && echo PASS || echo FAIL)
fi
ovt=$(bin_of ovt)
t_built=$(date +%s)

# Byte-level training text: the project's own docs, repeated.
data="$out/tokens.txt"
: > "$data"
for k in 1 2 3 4; do cat docs/*.md README.md >> "$data" 2>/dev/null || true; done
# resnet-mini's images: 1,024 of 28 x 28 from a fixed generator (IDX, as MNIST
# ships them; the device machine reaches no registry), through `ovt data idx`
images="$out/images.img"
python3 - "$out" <<'PY'
import struct, sys
x, img, lab = 2463534242, bytearray(), bytearray()
for i in range(1024):
    for p in range(784):
        x ^= (x << 13) & 0xffffffff; x ^= x >> 17; x ^= (x << 5) & 0xffffffff
        img.append(x >> 24 if (p * 7 + i) % 3 else 0)
    lab.append((i * 7) % 10)
open(sys.argv[1] + "/img.idx", "wb").write(struct.pack(">IIII", 0x803, 1024, 28, 28) + img)
open(sys.argv[1] + "/lab.idx", "wb").write(struct.pack(">II", 0x801, 1024) + lab)
PY
"$ovt" data idx --images "$out/img.idx" --labels "$out/lab.idx" --out "$images" >/dev/null

# run_json RUNDIR EXPR: EXPR (Python, over j = RUNDIR/run.json) printed, or '?'
run_json() { python3 -c "import json;j=json.load(open('$1/run.json'));print($2)" 2>/dev/null || echo '?'; }
per_step='"%.4f" % (j["step_seconds_this_session"] / j["steps_this_session"])'

# run MODEL B T: GPU record, CPU replay, CPU nearest; fills the table row.
rows=()
resident_rows=()
all_ok=1
run_model() {
  local model=$1 B=$2 T=$3 dir="$out/$1"
  rm -rf "$dir"; mkdir -p "$dir"
  local input=(--data "$data" --seq "$T")
  [ "$T" = - ] && input=(--data "$images")
  # --force: gpt2-small trains on the byte-level text (no registry here for
  # its BPE vocabulary); the exactness checked does not depend on the tokens
  local common=(--model "$model" "${input[@]}" --steps "$steps" --batch "$B" --every 0
                --checkpoint-every 0 --print-state --force)
  say "$model: $steps steps on the GPU ($gpu_backend, RECORD)"
  local t0 t1 t2 t3
  t0=$(date +%s.%N)
  "$ovt" train "${common[@]}" --backend "$gpu_backend" --out "$dir/gpu" > "$dir/gpu.txt" ||
    echo "the GPU run failed (its message is above)"
  t1=$(date +%s.%N)
  tail -3 "$dir/gpu.txt"
  # The baseline of the same run: host tensors copied per op (the path
  # verified on 2026-12-04), its first HOST_STEPS steps: the same states,
  # and the step time against the resident run's (run.json's step seconds)
  local hsteps=$(( ${HOST_STEPS:-5} < steps ? ${HOST_STEPS:-5} : steps ))
  say "$model: $hsteps steps on the GPU with host tensors (OVT_CUDA_HOST_TENSORS=1), the baseline"
  local hcommon=(--model "$model" "${input[@]}" --steps "$hsteps" --batch "$B" --every 0
                 --checkpoint-every 0 --print-state --force)
  OVT_CUDA_HOST_TENSORS=1 "$ovt" train "${hcommon[@]}" --backend "$gpu_backend" --out "$dir/host" > "$dir/host.txt" ||
    echo "the host-tensor run failed (its message is above)"
  local n_host
  n_host=$(paste -d' ' <(grep '^state ' "$dir/gpu.txt" | head -n "$hsteps") <(grep '^state ' "$dir/host.txt") |
           awk '$1=="state" && $2==$5 && $3==$6' | wc -l)
  local res_s host_s
  res_s=$(run_json "$dir/gpu" "$per_step")
  host_s=$(run_json "$dir/host" "$per_step")
  [ "$n_host" -eq "$hsteps" ] || all_ok=0
  local where
  where=$(run_json "$dir/gpu" 'j["tensors"]')
  echo "host tensors: $n_host of $hsteps states identical; step $host_s s, resident $res_s s (the run's tensors: $where)"
  # on a GPU the run must really have kept its tensors in device memory
  if [ "$rehearsal" != 1 ] && [ "${OVT_CUDA_HOST_TENSORS:-0}" != 1 ] && [ "$where" != backend ]; then
    echo "the GPU run's tensors were '$where', not device memory"
    all_ok=0
  fi
  resident_rows+=("$(printf '%-10s %5s  %-6s %10s %10s %8s' "$model" "$hsteps" \
                   "$([ "$n_host" -eq "$hsteps" ] && echo PASS || echo FAIL)" "$host_s" "$res_s" \
                   "$(awk -v a="$host_s" -v b="$res_s" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "?"}')")")
  # The replay and the ablation run side by side, half the cores each.
  say "$model: replay on the CPU with the GPU's logs (cpu, REPLAY) and the ablation without logs (cpu, NEAREST)"
  local half=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))
  "$ovt" train "${common[@]}" --backend cpu --threads "$half" --replay "$dir/gpu" --out "$dir/cpu" > "$dir/cpu.txt" &
  local replay_pid=$!
  "$ovt" train "${common[@]}" --backend cpu --threads "$half" --nearest --out "$dir/nearest" > "$dir/nearest.txt" &
  local nearest_pid=$!
  wait "$replay_pid" || echo "the CPU replay failed: $(tail -1 "$dir/cpu.txt")"
  t2=$(date +%s.%N)
  wait "$nearest_pid" || echo "the CPU ablation run failed"
  t3=$(date +%s.%N)
  grep '^state ' "$dir/gpu.txt" > "$dir/gpu.state" || true
  grep '^state ' "$dir/cpu.txt" > "$dir/cpu.state" || true
  grep '^state ' "$dir/nearest.txt" > "$dir/nearest.state" || true
  local n_gpu n_match first_nearest replay
  n_gpu=$(wc -l < "$dir/gpu.state")
  n_match=$(paste -d' ' "$dir/gpu.state" "$dir/cpu.state" | awk '$1=="state" && $2==$5 && $3==$6' | wc -l)
  first_nearest=$(paste -d' ' "$dir/gpu.state" "$dir/nearest.state" | awk '$3!=$6 {print $2; exit}')
  if [ "$n_gpu" -eq "$steps" ] && [ "$n_match" -eq "$steps" ]; then replay=PASS; else replay=FAIL; all_ok=0; fi
  local entries bytes
  entries=$(run_json "$dir/gpu" 'j["log_entries_this_session"]')
  bytes=$(run_json "$dir/gpu" 'j["log_bytes_this_session"]')
  echo "replay with log: $n_match of $steps steps identical ($replay); ablation first differs at step ${first_nearest:-none}"
  local gpu_s cpu_s
  gpu_s=$(awk -v a="$t0" -v b="$t1" -v n="$steps" 'BEGIN {printf "%.3f", (b - a) / n}')
  cpu_s=$(awk -v a="$t1" -v b="$t2" -v n="$steps" 'BEGIN {printf "%.3f", (b - a) / n}')
  rows+=("$(printf '%-10s %-8s %5s  %-6s %8s  %9s %10s  %8s %8s' "$model" "${B}x${T}" "$steps" "$replay" \
          "${first_nearest:-none}" "$entries" "$bytes" "$gpu_s" "$cpu_s")")
}

for model in ${MODELS:-gpt2-tiny gpt2-small llama-tiny resnet-mini}; do
  case $model in
    gpt2-tiny) run_model gpt2-tiny "${TINY_B:-8}" "${TINY_T:-64}" ;;
    gpt2-small) run_model gpt2-small "${SMALL_B:-2}" "${SMALL_T:-64}" ;;
    llama-tiny) run_model llama-tiny "${TINY_B:-8}" "${TINY_T:-64}" ;;
    resnet-mini) run_model resnet-mini "${RESNET_B:-16}" - ;;
    *) fail "unknown model $model" ;;
  esac
done

say "timing: the matrix products of one gpt2-small step (bench_gpu)"
if [ "$rehearsal" = 1 ]; then : > "$out/bench_gpu.txt"; else
  "$(bin_of bench/bench_gpu)" gpt2-small "${SMALL_B:-2}" "${SMALL_T:-64}" 3 | tee "$out/bench_gpu.txt" ||
    echo "bench_gpu failed"
fi
g() { awk -v k="$1" '$1==k {print $2}' "$out/bench_gpu.txt"; }

figures=${FIGURES:-gpt2-small:16:1024,llama-110m:16:1024,resnet-50:128}
[ "$rehearsal" = 1 ] && figures=${FIGURES:-gpt2-tiny:2:32,resnet-mini:4}
figures_ok=1
if [ "$figures" != none ]; then
  say "figures: ovt's RECORD step against PyTorch's on the same device (bench/gpu-figures.py)"
  fig_args=(--ovt "$ovt" --out "$out/figures" --models "$figures" --threads "$(nproc)")
  [ "$rehearsal" = 1 ] && fig_args+=(--rehearsal)
  python3 bench/gpu-figures.py "${fig_args[@]}" || { figures_ok=0; echo "gpu-figures failed (above)"; }
fi

t_end=$(date +%s)
say "summary (commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
echo "test_cuda_ops (every op, cuda <-> cpu/shuffle, RECORD/REPLAY): $ops_status"
echo "test_cuda_resident (every family in device memory = host tensors = cpu replay): $resident_status"
echo "tensors: $([ "${OVT_CUDA_HOST_TENSORS:-0}" = 1 ] && echo 'host memory, copied per op (OVT_CUDA_HOST_TENSORS=1)' || echo 'device memory (resident)')"
printf '%-10s %-8s %5s  %-6s %8s  %9s %10s  %8s %8s\n' model BxT steps replay ablation entries "log bytes" "gpu s/st" "cpu s/st"
for r in "${rows[@]}"; do echo "$r"; done
echo "resident against host tensors (same run config, same GPU; step seconds from run.json):"
printf '%-10s %5s  %-6s %10s %10s %8s\n' model steps same "host s/st" "res s/st" "host/res"
for r in "${resident_rows[@]}"; do echo "$r"; done
echo "gpt2-small step products: controlled $(g gemm_controlled_ms) ms, plain FP32 cuBLAS $(g gemm_fp32_ms) ms," \
     "plain FP64 cuBLAS $(g gemm_fp64_ms) ms: controlled/FP32 $(g ratio_controlled_over_fp32)x," \
     "controlled/FP64 $(g ratio_controlled_over_fp64)x"
echo "products, batched (default) against OVT_CUDA_GEMM=per-chunk: controlled $(g gemm_controlled_ms) against" \
     "$(g gemm_controlled_per_chunk_ms) ms ($(g ratio_controlled_per_chunk_over_batched)x); resident" \
     "$(g products_batched_ms) against $(g products_per_chunk_ms) ms ($(g ratio_products_per_chunk_over_batched)x)," \
     "elements whose bits differ: $(g products_elements_differing)"
echo "tree hash of $(g tree_bytes) bytes: device $(g tree_device_ms) ms, host (1 thread) $(g tree_host_ms) ms" \
     "($(g ratio_tree_host_over_device)x), roots equal: $(g tree_roots_equal)"
echo "wall: build $((t_built - t_start)) s, total $((t_end - t_start)) s"
[ "$ops_status" = PASS ] || [ "$rehearsal" = 1 ] || fail "test_cuda_ops failed (see $out/ops.log)"
[ "$resident_status" = PASS ] || [ "$rehearsal" = 1 ] || fail "test_cuda_resident failed (see $out/resident.log)"
[ $all_ok -eq 1 ] || fail "a replay did not match (see above)"
[ $figures_ok -eq 1 ] || fail "the figures' run failed (see above)"
echo "gpu-check: PASS"
