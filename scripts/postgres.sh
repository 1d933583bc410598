#!/usr/bin/env bash
# Starts a throwaway PostgreSQL 15 cluster with pgvector on loopback for the
# tests, installing both first if needed, and prints the environment the
# tests read. Usage:
#   eval "$(scripts/postgres.sh start)"   # installs, starts, exports
#   scripts/postgres.sh restart [SECONDS]  # fast stop, SECONDS down, start again
#   scripts/postgres.sh stop
# PostgreSQL 15 comes from Debian 12; pgvector has no binary package for it,
# so it is built from the source package of Debian's next release (the recipe
# in the reference notes), once per machine.
# Settings: HIPPOCAMP_PG_PORT (default 18032), HIPPOCAMP_PG_DIR (cluster, default
# /tmp/hippocamp-postgres.PORT).
set -euo pipefail

port="${HIPPOCAMP_PG_PORT:-18032}"
pgbin=/usr/lib/postgresql/15/bin
# Under /tmp: the postgres user cannot enter a home directory.
dir="${HIPPOCAMP_PG_DIR:-/tmp/hippocamp-postgres.$port}"
database=hippocamp_test

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi
}

install() {
    export DEBIAN_FRONTEND=noninteractive
    if [ ! -x "$pgbin/initdb" ] || [ ! -f /usr/include/postgresql/15/server/postgres.h ]; then
        as_root apt-get update -qq >&2
        as_root apt-get install -y -qq postgresql-15 postgresql-server-dev-15 make gcc >&2
    fi
    if [ ! -f /usr/share/postgresql/15/extension/vector.control ]; then
        local uri
        uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
        printf 'Types: deb-src\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" |
            as_root tee /etc/apt/sources.list.d/trixie-src.sources >/dev/null
        as_root apt-get update -qq >&2
        local work
        work=$(mktemp -d)
        (
            cd "$work"
            apt-get source --download-only pgvector >&2
            tar xzf pgvector_*.orig.tar.gz
            cd pgvector-*/
            make -j2 PG_CONFIG="$pgbin/pg_config" OPTFLAGS="" >&2
            as_root make install PG_CONFIG="$pgbin/pg_config" >&2
        )
        rm -rf "$work"
    fi
}

stop_cluster() {
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_postgres "$pgbin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
    fi
}

start_cluster() {
    as_postgres "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/pg.log" -w start \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200 -c fsync=on" >&2
}

case "${1:-start}" in
install)
    install
    ;;
start)
    install
    stop_cluster
    rm -rf "$dir"
    mkdir -p "$dir"
    as_root chown postgres "$dir"
    as_postgres "$pgbin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
    start_cluster
    "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -q -c "CREATE DATABASE $database" >&2
    echo "export HIPPOCAMP_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:$port/$database"
    # For the fault test, which restarts the cluster under running servers.
    echo "export HIPPOCAMP_TEST_POSTGRES_CTL='$(realpath "$0") restart'"
    ;;
restart)
    # An optional downtime in seconds between the stop and the start.
    stop_cluster
    sleep "${2:-0}"
    start_cluster
    ;;
stop)
    stop_cluster
    ;;
*)
    echo "usage: $0 [install|start|restart|stop]" >&2
    exit 2
    ;;
esac
