#!/usr/bin/env bash
# Load test of the HTTP server on loopback with wrk (Debian package `wrk`):
# a release `hippocamp serve` (durable profile, fresh data directory),
# 64 users seeded with 200 entries each through `hippocamp memory import`,
# then search-only, add-only and mixed (90% search / 10% add) runs at a
# fixed concurrency. Prints one JSON line per run.
# Settings: CONNECTIONS (default 32), THREADS (2), SECONDS (20).
set -euo pipefail
cd "$(dirname "$0")/.."
connections="${CONNECTIONS:-32}"
threads="${THREADS:-2}"
seconds="${SECONDS_PER_RUN:-20}"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 2; }

cargo build --release -q
bin=target/release/hippocamp
dir="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
RUST_LOG=warn "$bin" serve --data-dir "$dir/data" --bind 127.0.0.1:0 >"$dir/serve.out" &
pid=$!
for _ in $(seq 1 100); do grep -q "admin token" "$dir/serve.out" 2>/dev/null && break; sleep 0.1; done
addr="$(head -1 "$dir/serve.out" | sed 's|.*http://||')"
admin="$(grep "admin token" "$dir/serve.out" | awk '{print $NF}')"
token="$("$bin" token --data-dir "$dir/data" create --app load --permissions memory:read,memory:write | sed -n 's/.*"token": "\(.*\)".*/\1/p')"

python3 - "$dir/events.jsonl" <<'PY'
import json, random, sys
random.seed(7)
words = ("cat jazz flight seat peanut allergy saxophone garden lisbon coffee marathon python "
         "birthday sister guitar vegan hiking museum window aisle dentist piano tennis recipe "
         "morning weekend favourite moved learned bought visited started").split()
with open(sys.argv[1], "w") as f:
    for i in range(200):
        text = " ".join(random.choice(words) for _ in range(14))
        f.write(json.dumps({"id": f"e{i}", "author": "user", "timestamp_ms": 1700000000000 + i,
                            "content": {"role": "user", "parts": [{"text": text}]}}) + "\n")
PY
for u in $(seq 0 63); do
    "$bin" memory --server "http://$addr" --token "$token" --app load --user "u$u" \
        import "$dir/events.jsonl" --session seed >/dev/null
done

for mode in search add mixed; do
    MODE=$mode TOKEN=$token wrk -t "$threads" -c "$connections" -d "${seconds}s" --latency \
        -s scripts/load/memory.lua "http://$addr" | grep '^{'
done
: "$admin"
