#!/usr/bin/env bash
# An arbiter on another processor (docs/architectures.md): one `ovt devnet`
# dispute whose arbiter's watcher is the ARCH build under qemu user-mode
# emulation (--arbiter-cmd), while anvil, the trainer and the auditor run
# natively. The trainer flips a bit after step AT of a STEPS-step gpt2-tiny
# run; the check passes when the devnet's JSON says auditor-right at step
# AT, as expected, the arbiter's watcher logged the settlement, and the
# arbiter's `ovt version` and its watcher's first log line say ARCH (so it
# was not the native ovt).
# With ARBITERS > 1 the emulated watcher is the first seat of a committee
# of ARBITERS (the others native), under FAULT (default bitflip; e.g.
# lying-arbiter), and the check also wants the devnet's committee check
# passed: every honest arbiter, the emulated one among them, revealed the
# settled verdict with the same evidence, and every misbehaving one lost its
# bond.
# Needs build/ovt (or $OVT) and build-cross-ARCH/ovt (scripts/cross.sh ARCH).
#   scripts/cross-devnet.sh ARCH [STEPS [AT [ARBITERS [FAULT]]]]   (default 64 steps, bit flip at 17, one arbiter)
#   OVT_CROSS_SKIP=77   exit 77 (skip) instead of 1 when a build or qemu is missing
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${1:?usage: scripts/cross-devnet.sh aarch64|s390x [steps [at]]}
steps=${2:-64}
at=${3:-17}
arbiters=${4:-1}
fault=${5:-bitflip}
native=${OVT:-build/ovt}
missing() { echo "cross-devnet: $*" >&2; exit "${OVT_CROSS_SKIP:-1}"; }
[ -x "$native" ] || missing "$native is missing (build it first: cmake -S . -B build && cmake --build build)"
[ -x "build-cross-$arch/ovt" ] || missing "build-cross-$arch/ovt is missing (build it first: scripts/cross.sh $arch)"
command -v "qemu-$arch-static" >/dev/null || missing "qemu-$arch-static is not on \$PATH (scripts/cross.sh $arch installs it)"
# --arbiter-cmd is split on spaces: relative paths keep a checkout's own
# folder names out of it. The multiarch loader, not -L /usr/TRIPLE (which
# hangs under qemu-aarch64); a sysroot of unpacked .deb files where
# scripts/cross.sh made one (s390x here).
cmd="qemu-$arch-static"
[ -d "build-cross-$arch/sysroot" ] && cmd+=" -L build-cross-$arch/sysroot"
cmd+=" build-cross-$arch/ovt"

out=$(mktemp /tmp/ovt-cross-devnet-XXXXXX.json)
trap 'rm -f "$out"' EXIT
start=$(date +%s.%N)
rc=0
"$native" devnet --fault "$fault" --arbiters "$arbiters" --steps "$steps" --at "$at" --arbiter-cmd "$cmd" --json \
  > "$out" || rc=$?
wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "cross-devnet: ovt devnet --arbiter-cmd '$cmd' exited $rc after ${wall} s"
python3 - "$out" "$arch" "$at" "$arbiters" <<'EOF'
import json, sys
path, arch, at, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
order = "big-endian" if arch == "s390x" else "little-endian"
try:
    r = json.load(open(path))
except ValueError as e:
    sys.exit(f"cross-devnet: no JSON result from ovt devnet ({e})")
checks = [
    ("outcome auditor-right", r.get("outcome") == "auditor-right"),
    (f"at step {at}", r.get("step") == at),
    ("the trainer was wrong", r.get("wrong_party") == "trainer"),
    ("as expected", r.get("as_expected") is True),
    ("the arbiter's watcher logged the settlement", r.get("arbiter_saw", "").startswith("settled: auditor-right")),
    (f"the arbiter's command is the {arch} build", f"built for {arch}, {order}" in r.get("arbiter_version", "")),
    (f"the arbiter's watcher is the {arch} build", r.get("arbiter_built_for") == f"{arch}, {order}"),
]
if n > 1:
    seats = r.get("arbiters", [])
    checks += [
        (f"a committee of {n}", len(seats) == n),
        ("the committee check", r.get("committee_check") == ""),
        (f"the {arch} arbiter revealed auditor-right", bool(seats) and seats[0].get("verdict") == "auditor-right"),
    ]
    for a in seats:
        print(f"cross-devnet: {a.get('name')} {a.get('misbehave') or 'honest'}: verdict {a.get('verdict')}, "
              f"lost {a.get('forfeited')} wei, rewarded {a.get('reward')} wei")
print(f"cross-devnet: arbiter {r.get('arbiter_cmd')} ({r.get('arbiter_version')}); its watcher was built for "
      f"{r.get('arbiter_built_for')}")
print(f"cross-devnet: outcome {r.get('outcome')} at step {r.get('step')} (fault at {at}), wrong party "
      f"{r.get('wrong_party')}; the arbiter's watcher saw \"{r.get('arbiter_saw')}\"; "
      f"commitment to verdict {r.get('commit_to_verdict_s', 0):.1f} s, whole devnet {r.get('total_s', 0):.1f} s")
bad = [name for name, ok in checks if not ok]
for name in bad:
    print(f"cross-devnet: FAILED: {name}")
sys.exit(1 if bad else 0)
EOF
