#!/usr/bin/env bash
# Installs the TypeScript client's pinned packages (clients/typescript's
# package-lock.json: typescript, openapi-typescript, openapi-fetch, the
# Vercel AI SDK `ai` and `@ai-sdk/openai-compatible`) into a tool cache
# keyed by the lock file, and prints the environment the tests read. Usage:
#   eval "$(scripts/typescript-env.sh install)"
# Settings: HIPPOCAMP_TOOLS (install root, default ~/.cache/hippocamp-tools).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
tools="${HIPPOCAMP_TOOLS:-$HOME/.cache/hippocamp-tools}"
client="$here/clients/typescript"

case "${1:-install}" in
install)
    key="$(sha256sum "$client/package-lock.json" | cut -c1-16)"
    dir="$tools/ts-client-$key"
    if [ ! -x "$dir/node_modules/.bin/tsc" ]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        cp "$client/package.json" "$client/package-lock.json" "$dir/"
        (cd "$dir" && npm ci --ignore-scripts --silent --no-audit --no-fund --loglevel=error >&2)
    fi
    echo "export HIPPOCAMP_TEST_TS_NODE_MODULES=$dir/node_modules"
    ;;
*)
    echo "usage: $0 [install]" >&2
    exit 2
    ;;
esac
