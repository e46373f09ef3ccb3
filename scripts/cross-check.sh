#!/usr/bin/env bash
# The cross-architecture check (docs/architectures.md): trains a few steps of
# gpt2-tiny, llama-tiny, mlp-demo and resnet-mini natively, then under qemu user-mode emulation of
# ARCH re-executes the first and last step with `ovt step` and audits each
# run on the cpu and ref backends; then the other way: trains the same runs
# under emulation and audits them natively. Prints every stateHash, batchHash
# and logHash `ovt step` compared, and whether the step tables (steps.bin:
# every step's three hashes) are identical, and whether each build's export of
# its own run (safetensors; llama2c for llama-tiny) is the same bytes.
# Needs build/ovt (native) and build-cross-ARCH/ovt (scripts/cross.sh ARCH).
#   scripts/cross-check.sh ARCH [STEPS]   (default 3 steps)
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${1:?usage: scripts/cross-check.sh aarch64|s390x [steps]}
steps=${2:-3}
native=(build/ovt)
cross=(qemu-$arch-static)
[ -d "build-cross-$arch/sysroot" ] && cross+=(-L "$PWD/build-cross-$arch/sysroot")
cross+=("build-cross-$arch/ovt")
for b in "${native[0]}" "${cross[-1]}"; do
  [ -x "$b" ] || { echo "cross-check: $b is missing (build it first)" >&2; exit 1; }
done
here=$(uname -m)

work=$(mktemp -d /tmp/ovt-cross-check-XXXXXX)
trap 'rm -rf "$work"' EXIT
# a small corpus of its own: the check depends on no file outside the repository
for i in $(seq 1 400); do echo "line $i of the cross-architecture corpus: the quick brown fox $((i * 7919 % 1000))"; done \
  > "$work/text.txt"
"${native[@]}" data text "$work/text.txt" --out "$work/gpt2.bin" >/dev/null
"${native[@]}" data mlp --seed 1 --samples 256 --out "$work/mlp.bin" >/dev/null
# 64 images of 28x28 (IDX, as MNIST ships them) from a fixed generator, for resnet-mini
python3 - "$work" <<'PY'
import struct, sys
x, img, lab = 2463534242, bytearray(), bytearray()
for i in range(64):
    for p in range(784):
        x ^= (x << 13) & 0xffffffff; x ^= x >> 17; x ^= (x << 5) & 0xffffffff
        img.append(x >> 24 if (p * 7 + i) % 3 else 0)
    lab.append(i % 10)
open(sys.argv[1] + "/img.idx", "wb").write(struct.pack(">IIII", 0x803, 64, 28, 28) + img)
open(sys.argv[1] + "/lab.idx", "wb").write(struct.pack(">II", 0x801, 64) + lab)
PY
"${native[@]}" data idx --images "$work/img.idx" --labels "$work/lab.idx" --out "$work/images.bin" >/dev/null

fail=0
say() { echo "cross-check: $*"; }
bad() { say "$*"; fail=1; }

# train MODEL WHO DIR: `ovt train` of MODEL by WHO (native or cross) into DIR
train() {
  local -n who=$2
  local seq=(); [ "$1" != mlp-demo ] && [ "$1" != resnet-mini ] && seq=(--seq 16)
  "${who[@]}" train --model "$1" --batch 2 "${seq[@]}" --steps "$steps" --threads 2 --data "$work/$1.bin" \
    --out "$3" --json > "$3.json"
}

# audit MODEL WHO DIR BACKEND: `ovt audit` of the run in DIR by WHO
audit() {
  local -n who=$2
  if "${who[@]}" audit "$3" --data "$work/$1.bin" --backend "$4" --threads 2 > "$3.audit" 2>&1; then
    say "$1 trained on $5, audited on $6 $4: $(head -1 "$3.audit")"
  else
    bad "$1 trained on $5, audited on $6 $4 FAILED:"; sed 's/^/    /' "$3.audit"
  fi
}

for model in gpt2-tiny llama-tiny mlp-demo resnet-mini; do
  data=gpt2; [ $model = mlp-demo ] && data=mlp; [ $model = resnet-mini ] && data=images
  ln -sf "$work/$data.bin" "$work/$model.bin"
  train $model native "$work/$model-$here"
  say "$model: trained $steps steps on $here; root $(grep -o '"root": "[0-9a-f]*"' "$work/$model-$here.json" | cut -d'"' -f4)"
  for k in 1 "$steps"; do
    if "${cross[@]}" step --run "$work/$model-$here" --step "$k" --data "$work/$model.bin" --threads 2 --json \
         > "$work/step.json"; then
      say "$model: $arch ovt step $k matches $here:"
    else
      bad "$model: $arch ovt step $k does NOT match $here:"
    fi
    grep -E '"(result|state_hash|batch_hash|log_hash)"' "$work/step.json" | sed 's/^/    /'
  done
  for backend in cpu ref; do audit $model cross "$work/$model-$here" $backend "$here" "$arch"; done
  train $model cross "$work/$model-$arch"
  audit $model native "$work/$model-$arch" cpu "$arch" "$here"
  if cmp -s "$work/$model-$here/steps.bin" "$work/$model-$arch/steps.bin"; then
    say "$model: steps.bin of the runs trained on $here and on $arch identical"
  else
    bad "$model: steps.bin of the runs trained on $here and on $arch differ"
  fi
  # the model leaving ovt: each build exports its own run; the files must be the same bytes
  formats=(safetensors); [ $model = llama-tiny ] && formats+=(llama2c)
  for f in "${formats[@]}"; do
    "${native[@]}" export "$work/$model-$here" --format "$f" --out "$work/$model-$here.$f" >/dev/null
    "${cross[@]}" export "$work/$model-$arch" --format "$f" --out "$work/$model-$arch.$f" >/dev/null
    if cmp -s "$work/$model-$here.$f" "$work/$model-$arch.$f"; then
      say "$model: the $f exports written on $here and on $arch identical"
    else
      bad "$model: the $f exports written on $here and on $arch differ"
    fi
  done
done
exit $fail
