#!/usr/bin/env bash
# Installs the official MCP client SDKs the MCP tests drive (Python `mcp`
# 2.3.0 into a venv, `@modelcontextprotocol/sdk` 1.32.2 into an npm
# prefix) and prints the environment the tests read. Usage:
#   eval "$(scripts/mcp-clients.sh install)"
# Settings: HIPPOCAMP_TOOLS (install root, default ~/.cache/hippocamp-tools).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
tools="${HIPPOCAMP_TOOLS:-$HOME/.cache/hippocamp-tools}"
venv="$tools/mcp-venv"
node_dir="$tools/mcp-node"

case "${1:-install}" in
install)
    if ! "$venv/bin/python" -c "import mcp, httpx2" 2>/dev/null; then
        mkdir -p "$tools"
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install -q "mcp==2.3.0" >&2
    fi
    if [ ! -d "$node_dir/node_modules/@modelcontextprotocol/sdk" ]; then
        mkdir -p "$node_dir"
        cp "$here/clients/mcp-tests/package.json" "$node_dir/"
        (cd "$node_dir" && npm install --silent --no-audit --no-fund >&2)
    fi
    echo "export HIPPOCAMP_TEST_MCP_PYTHON=$venv/bin/python"
    echo "export HIPPOCAMP_TEST_MCP_NODE_MODULES=$node_dir/node_modules"
    ;;
*)
    echo "usage: $0 [install]" >&2
    exit 2
    ;;
esac
