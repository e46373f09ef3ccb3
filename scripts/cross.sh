#!/usr/bin/env bash
# Cross-builds ovt for ARCH (aarch64 or s390x) into build-cross-ARCH with
# Debian's cross GCC and the target's -dev packages, and runs the unit tests
# of the kernels and the formats under qemu user-mode emulation
# (docs/architectures.md). Installs what is missing: qemu-user-static, the
# cross GCC, the :arm64 / :s390x -dev packages. Where apt cannot install a
# target's package (a security-updated amd64 version has no twin for the
# target yet), the target's .deb files come from the Debian archive through
# `apt-get download` and are unpacked into build-cross-ARCH/sysroot.
#   scripts/cross.sh ARCH [ctest regex]   (default: the tests listed below)
#   OVT_CROSS_NO_TESTS=1   build only
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${1:?usage: scripts/cross.sh aarch64|s390x [ctest regex]}
case $arch in
  aarch64) deb=arm64 ;;
  s390x) deb=s390x ;;
  *) echo "cross: unknown ARCH '$arch' (aarch64 or s390x)" >&2; exit 2 ;;
esac
triple=$arch-linux-gnu
build=build-cross-$arch
tests=${2:-'^(test_grid|test_rng|test_rlog|test_site|test_shard|test_trn_state|test_trn_schedule|test_trn_byte_order|test_common|test_libm)$'}
devs=(libc6-dev libsecp256k1-dev libcurl4-openssl-dev libjansson-dev libssl-dev libopenblas-dev libzstd-dev zlib1g-dev)

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
apt_install() { DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }

# libc6-dev-ARCH-cross: the C runtime files the cross gcc links with
# (Scrt1.o, crti.o), which --no-install-recommends would leave out
host=(qemu-user-static gcc-$triple libc6-dev-$deb-cross pkg-config cmake)
missing=()
for p in "${host[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ! dpkg --print-foreign-architectures | grep -qx "$deb"; then
  "${sudo_cmd[@]}" dpkg --add-architecture "$deb"
  "${sudo_cmd[@]}" apt-get update -qq
fi
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"

target=()
for p in "${devs[@]}"; do dpkg -s "$p:$deb" >/dev/null 2>&1 || target+=("$p:$deb"); done
sysroot=
if [ ${#target[@]} -gt 0 ] && ! apt_install "${target[@]}" 2>/dev/null; then
  sysroot=$PWD/$build/sysroot
  echo "cross: apt cannot install ${target[*]}; unpacking the target's .deb files into $sysroot"
  mkdir -p "$build/debs" "$sysroot"
  # the packages and every library they need at run time, for the target
  pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
           --no-enhances "${devs[@]/%/:$deb}" 2>/dev/null | grep -v '^ ' | grep ":$deb\$" \
         | grep -Ev '^(pkg-?conf|libpkgconf|libopenblas0?-(openmp|serial))' | sort -u)
  (cd "$build/debs" && apt-get download -qq $pkgs libc6:$deb)
  for f in "$build"/debs/*.deb; do dpkg -x "$f" "$sysroot"; done
  # the links update-alternatives would make: OpenBLAS's pthread flavour
  lib=$sysroot/usr/lib/$triple
  ln -sf openblas-pthread/libopenblas.so "$lib/libopenblas.so"
  ln -sf openblas-pthread/libopenblas.so.0 "$lib/libopenblas.so.0"
  ln -sf openblas-pthread/libblas.so.3 "$lib/libblas.so.3"
  mkdir -p "$lib/pkgconfig"
  ln -sf ../openblas-pthread/pkgconfig/openblas.pc "$lib/pkgconfig/openblas.pc"
elif [ -d "$build/sysroot" ]; then
  sysroot=$PWD/$build/sysroot
fi

OVT_CROSS_SYSROOT=$sysroot cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/$triple.cmake \
  -DOVT_WERROR=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
[ "${OVT_CROSS_NO_TESTS:-}" = 1 ] || ctest --test-dir "$build" -R "$tests" --output-on-failure
