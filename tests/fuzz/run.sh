#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) in a separate build folder
# and runs each for SECONDS (default 30). Exits non-zero if any target finds a
# crash; the reproducer is left in the build folder (crash-*).
#   usage: tests/fuzz/run.sh [SECONDS]      env: OVT_FUZZ_BUILD_DIR (default build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-30}
build=${OVT_FUZZ_BUILD_DIR:-build-fuzz}
if ! command -v clang >/dev/null; then
  echo "fuzz: clang not found (apt-get install clang)" >&2
  exit 1
fi
rt="$(clang -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a"
if [ ! -f "$rt" ]; then
  echo "fuzz: libFuzzer runtime missing ($rt): apt-get install libclang-rt-14-dev" >&2
  exit 1
fi
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DOVT_FUZZ=ON -DOVT_CUDA=OFF >/dev/null
cmake --build "$build" -j2 --target fuzz_rlp fuzz_abi fuzz_rpc fuzz_rlog
status=0
for t in rlp abi rpc rlog; do
  corpus="$build/fuzz-corpus/$t"
  mkdir -p "$corpus"
  echo "fuzz: fuzz_$t for ${secs}s"
  log="$build/fuzz_$t.log"
  seeds=()   # the checked-in seed corpus of a target, where it has one
  [ -d "tests/fuzz/corpus/$t" ] && seeds=("$PWD/tests/fuzz/corpus/$t")
  if (cd "$build" && "./tests/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=4096 -rss_limit_mb=2048 \
        -print_final_stats=1 "fuzz-corpus/$t" "${seeds[@]+"${seeds[@]}"}") >"$log" 2>&1; then
    grep -E "^(Done|stat::number_of_executed_units|stat::new_units_added)" "$log" || true
  else
    echo "fuzz: fuzz_$t FAILED (full log: $log)" >&2
    tail -n 60 "$log" >&2
    status=1
  fi
done
exit $status
