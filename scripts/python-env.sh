#!/usr/bin/env bash
# Installs what the Python package's tests need into a virtual
# environment (google-adk, langgraph, openai-agents and anthropic pinned,
# pytest, ruff) plus the package itself (editable), and prints the
# environment the tests read. Usage:
#   eval "$(scripts/python-env.sh install)"
# Settings: HIPPOCAMP_TOOLS (install root, default ~/.cache/hippocamp-tools).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
tools="${HIPPOCAMP_TOOLS:-$HOME/.cache/hippocamp-tools}"
venv="$tools/adk-venv"

case "${1:-install}" in
install)
    if ! "$venv/bin/python" -c "import google.adk, pytest" 2>/dev/null || [ ! -x "$venv/bin/ruff" ]; then
        mkdir -p "$tools"
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install -q "google-adk==2.13.0" "pytest==8.4.2" "ruff==0.14.6" >&2
    fi
    # The agent frameworks the package's other adapters implement.
    if ! "$venv/bin/python" -c "import langgraph.store.base, agents, anthropic" 2>/dev/null; then
        "$venv/bin/pip" install -q "langgraph==1.2.22" "openai-agents==0.24.0" "anthropic==2.10.0" >&2
    fi
    # The package under test, from this checkout (no dependencies beyond
    # httpx and google-adk, already there).
    "$venv/bin/pip" install -q --no-deps -e "$here/clients/python" >&2
    echo "export HIPPOCAMP_TEST_PYTHON=$venv/bin/python"
    ;;
*)
    echo "usage: $0 [install]" >&2
    exit 2
    ;;
esac
