#!/usr/bin/env bash
# Starts a real S3-compatible server (s3s-fs) on loopback for the tests,
# installing it first if needed, and prints the environment the tests
# read. Usage:
#   eval "$(scripts/s3-server.sh start)"   # installs, starts, exports
#   scripts/s3-server.sh stop
# Settings: HIPPOCAMP_TOOLS (install root, default ~/.cache/hippocamp-tools),
# HIPPOCAMP_S3_PORT (default 18014), HIPPOCAMP_S3_DIR (data, default a
# temporary folder).
set -euo pipefail

tools="${HIPPOCAMP_TOOLS:-$HOME/.cache/hippocamp-tools}"
port="${HIPPOCAMP_S3_PORT:-18014}"
bin="$tools/bin/s3s-fs"
pidfile="$tools/s3s-fs.$port.pid"
key=hippocamp
secret=hippocamp-secret
bucket=hippocamp-test

install() {
    if [ ! -x "$bin" ]; then
        # Newer versions need a newer compiler than the one pinned here.
        cargo install s3s-fs@0.14.1 --features binary --locked --root "$tools" >&2
    fi
}

case "${1:-start}" in
install)
    install
    ;;
start)
    install
    dir="${HIPPOCAMP_S3_DIR:-$(mktemp -d)}"
    mkdir -p "$dir/$bucket"
    if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        kill "$(cat "$pidfile")" || true
        sleep 0.2
    fi
    "$bin" --host 127.0.0.1 --port "$port" --access-key "$key" --secret-key "$secret" "$dir" \
        >"$tools/s3s-fs.$port.log" 2>&1 &
    echo $! >"$pidfile"
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    echo "export HIPPOCAMP_TEST_S3_ENDPOINT=http://127.0.0.1:$port"
    echo "export HIPPOCAMP_TEST_S3_BUCKET=$bucket"
    echo "export HIPPOCAMP_TEST_S3_ACCESS_KEY=$key"
    echo "export HIPPOCAMP_TEST_S3_SECRET_KEY=$secret"
    ;;
stop)
    if [ -f "$pidfile" ]; then
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    fi
    ;;
*)
    echo "usage: $0 [install|start|stop]" >&2
    exit 2
    ;;
esac
