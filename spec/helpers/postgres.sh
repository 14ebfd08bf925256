#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the test run, on a unix socket only.
#   spec/helpers/postgres.sh start DIR   creates the cluster in DIR (an empty folder), starts it,
#                                        creates the database clank_test and a superuser role
#                                        for the calling user, prints the connection URL
#   spec/helpers/postgres.sh down DIR    stops the server at once (as a crash would), keeping DIR
#   spec/helpers/postgres.sh up DIR      starts it again
#   spec/helpers/postgres.sh stop DIR    stops the cluster and removes DIR
# DIR holds data/ (0700, owned by postgres), the socket and server.log. The server runs as the
# postgres user with fsync off and no TCP listener; the URL names the socket folder and the user:
#   postgresql:///clank_test?host=DIR&user=root
set -euo pipefail

usage() { echo "usage: $0 start|down|up|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2
db=clank_test

# Debian puts the server programs in /usr/lib/postgresql/<major>/bin; take the newest.
bindir=
for d in /usr/lib/postgresql/*/bin; do
  [ -x "$d/pg_ctl" ] && bindir=$d
done

as_postgres() { # runs a command as the postgres user, from a folder it can enter
  if [ "$(id -u)" = 0 ]; then
    (cd "$dir" && runuser -u postgres -- "$@")
  else
    (cd "$dir" && sudo -u postgres -- "$@")
  fi
}

start_server() { # the cluster in $dir, on its socket only
  as_postgres "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
    -o "-k $dir -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
}

case "$cmd" in
  start)
    [ -n "$bindir" ] || { echo "postgres.sh: no /usr/lib/postgresql/*/bin/pg_ctl (install postgresql)" >&2; exit 1; }
    id postgres >/dev/null 2>&1 || { echo "postgres.sh: there is no postgres user" >&2; exit 1; }
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; else sudo chown postgres: "$dir"; fi
    chmod 755 "$dir" 2>/dev/null || sudo chmod 755 "$dir"
    me=$(id -un)
    as_postgres "$bindir/initdb" -D "$dir/data" --auth=trust --no-locale -E UTF8 --no-sync \
      -U postgres >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    start_server
    if [ "$me" != postgres ]; then
      as_postgres "$bindir/psql" -h "$dir" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 \
        -c "CREATE ROLE \"$me\" SUPERUSER LOGIN" >/dev/null
    fi
    as_postgres "$bindir/psql" -h "$dir" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 \
      -c "CREATE DATABASE $db OWNER \"$me\"" >/dev/null
    echo "postgresql:///$db?host=$dir&user=$me"
    ;;
  down) # stops the server (at once, as a crash would) and keeps the cluster for `up`
    as_postgres "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null
    ;;
  up) # starts a cluster `down` stopped, with the options `start` gave it
    start_server
    ;;
  stop)
    [ -d "$dir" ] || exit 0
    if [ -n "$bindir" ] && [ -f "$dir/data/postmaster.pid" ]; then
      as_postgres "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *) usage ;;
esac
