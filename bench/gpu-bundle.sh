#!/usr/bin/env bash
# Makes the folder that `OVT_GPU_PREBUILT=DIR bench/gpu-check.sh` runs on a GPU
# machine that cannot install packages (docs/gpu.md, "Running the device
# check"): builds ovt with CUDA here (nvcc, no GPU needed; MPI off) and copies
#   DIR/bin/  ovt, test_cuda_host, test_cuda_ops, test_cuda_resident, bench_gpu
#   DIR/lib/  the shared libraries the device image lacks (default: those the
#             H200 image of 2026-12-04 lacked; OVT_BUNDLE_LIBS adds sonames)
#   DIR/BUILT the commit, date and cmake flags.
# Usage: bench/gpu-bundle.sh [DIR]   (default build-gpu-bundle; build folder
# OVT_GPU_BUILD, default build-gpu-x; OVT_GPU_ARCH, default 90)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-gpu-bundle}
build=${OVT_GPU_BUILD:-build-gpu-x}
arch=${OVT_GPU_ARCH:-90}
export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc >/dev/null || { echo "gpu-bundle: nvcc not found (CUDA toolkit expected in /usr/local/cuda)" >&2; exit 1; }
flags=(-DCMAKE_BUILD_TYPE=Release -DOVT_WERROR=OFF -DOVT_CUDA=ON -DOVT_MPI=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch")
mkdir -p "$build"
cmake -S . -B "$build" "${flags[@]}" > "$build/gpu-bundle.cmake.log" 2>&1 || { cat "$build/gpu-bundle.cmake.log"; exit 1; }
grep -q "ovt: CUDA backend ON" "$build/gpu-bundle.cmake.log" || { echo "gpu-bundle: CMake did not enable CUDA ($build/gpu-bundle.cmake.log)" >&2; exit 1; }
targets=(ovt test_cuda_host test_cuda_ops test_cuda_resident bench_gpu)
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >/dev/null
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp/bin" "$dir.tmp/lib"
cp "$build/ovt" "$build/tests/kernels/test_cuda_host" "$build/tests/kernels/test_cuda_ops" \
   "$build/tests/trainer/test_cuda_resident" "$build/bench/bench_gpu" "$dir.tmp/bin/"
# the H200 image lacked these (issue 41); the rest of the build's libraries it has
libs=(libsecp256k1.so.1 libssh2.so.1 libunistring.so.2 libldap-2.5.so.0 liblber-2.5.so.0 ${OVT_BUNDLE_LIBS:-})
for so in "${libs[@]}"; do
  path=$(ldd "$build/ovt" | awk -v s="$so" '$1==s {print $3}')
  [ -n "$path" ] || { echo "gpu-bundle: $so is not among ovt's libraries (ldd $build/ovt)" >&2; exit 1; }
  cp -L "$path" "$dir.tmp/lib/$so"
done
printf 'commit %s\ndate %s\nflags %s\n' "$(git rev-parse HEAD)" "$(date -u +%FT%TZ)" "${flags[*]}" > "$dir.tmp/BUILT"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
du -sh "$dir"
echo "gpu-bundle: $dir ready; on the GPU machine: OVT_GPU_PREBUILT=$dir bench/gpu-check.sh"
