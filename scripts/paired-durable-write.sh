#!/usr/bin/env bash
# Paired runs of `hippocamp bench durable-write`: each given binary in
# turn, ROUNDS times, so every build sees the same stretches of this
# noisy machine; prints each build's median `ratio_p50_to_log`, the share
# of runs at or under 1.2 (issue 17's bar) and the median excess over
# the log floor. docs/PERFORMANCE.md (issue 17) quotes its output.
#
#   scripts/paired-durable-write.sh ROUNDS BINARY...
#
# Settings: SAMPLES (default 2000).
set -euo pipefail
rounds="${1:?usage: $0 ROUNDS BINARY...}"
shift
[ "$#" -gt 0 ] || { echo "usage: $0 ROUNDS BINARY..." >&2; exit 2; }
samples="${SAMPLES:-2000}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for _ in $(seq "$rounds"); do
    for bin in "$@"; do
        "$bin" bench durable-write --samples "$samples" 2>/dev/null |
            python3 -c 'import json, sys
d = json.load(sys.stdin)
print(sys.argv[1], d["ratio_p50_to_log"], d["add_entry"]["p50_us"] - d["log_fsync"]["p50_us"])' "$bin" >>"$out"
    done
done
python3 - "$out" <<'PY'
import statistics as st
import sys

rows = [line.split() for line in open(sys.argv[1])]
for name in dict.fromkeys(r[0] for r in rows):
    ratios = [float(r[1]) for r in rows if r[0] == name]
    excess = [float(r[2]) for r in rows if r[0] == name]
    under = sum(x <= 1.2 for x in ratios) / len(ratios)
    print(f"{name}: runs={len(ratios)} median={st.median(ratios):.3f} "
          f"runs<=1.2={under:.0%} excess_median={st.median(excess):.1f}us")
PY
