#!/usr/bin/env bash
# Installs everything Clank needs on Debian 12, as root. Idempotent: when every
# package is already there it touches nothing and asks no registry.
#   vendor/deps.sh           build and run dependencies
#   vendor/deps.sh --test    and what the test suite needs
#   vendor/deps.sh --bench   and what bench/ needs
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

packages=(liblua5.4-dev lua5.4 libuv1-dev lua-cjson lua-busted lua-socket
          cmake pkg-config gcc make libssl-dev libwslay-dev
          libsqlite3-dev libpq-dev libsodium-dev libcmark-dev)
node=0 testing=0 # Node and npm: for the specs (--test) and the benches (--bench), never the build
for arg in "$@"; do
  case "$arg" in
    --test) node=1 testing=1; packages+=(postgresql sqlite3 chromium lua-check clang-format clang
                      libclang-rt-14-dev
                      python3-prometheus-client groff-base man-db curl openssl
                      nginx) ;; # spec/functional/scale_out: deploy/nginx.conf in front of two instances
    # bench/db.sh: its own PostgreSQL, sqlite3 (the mixed workload's trigger), and LuaSQL for
    # the comparison with the tasks app as it was before clank.db (the only place LuaSQL is
    # still used)
    --bench) node=1; packages+=(wrk nginx libnginx-mod-http-lua util-linux curl jq
                        postgresql sqlite3 lua-sql-sqlite3 lua-sql-postgres) ;;
    *) echo "deps.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

sudo_if_needed() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${packages[@]}" libllhttp-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node (>= 18, which Debian 12 has) with npm, for --test and --bench: the MCP client and
# browser specs run on Node, and spec/unit/vendor/morphdom checks vendor/morphdom against the
# npm package pinned in vendor/npm. The build needs neither (morphdom is in vendor/morphdom).
# A machine that already has both (from Debian or elsewhere) keeps them.
if [ $node = 1 ]; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
# llhttp must be >= 9.2 (Debian 12's 8.1 accepts CR in header values, CVE-2023-30589).
if ! pkg-config --atleast-version=9.2 libllhttp 2>/dev/null; then
  case " ${missing[*]} " in *" libllhttp-dev "*) ;; *) missing+=(libllhttp-dev) ;; esac
fi
# For --test, the npm package vendor/morphdom is checked against (vendor/npm/package-lock.json),
# as the calling user, once the tools are there.
npm_packages() {
  [ $testing = 1 ] || return 0
  [ -d "$here/npm/node_modules/morphdom" ] && return 0
  (cd "$here/npm" && npm ci --no-audit --no-fund --loglevel=error)
}
[ ${#missing[@]} -eq 0 ] && { npm_packages; exit 0; }

echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# llhttp 9.2 comes from Debian 13, pinned so that nothing else does.
sudo_if_needed install -m 644 "$here/apt/clank-trixie.sources" /etc/apt/sources.list.d/clank-trixie.sources
sudo_if_needed install -m 644 "$here/apt/clank-llhttp.pref" /etc/apt/preferences.d/clank-llhttp
sudo_if_needed apt-get update -qq
sudo_if_needed apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if apt-get -s dist-upgrade 2>/dev/null | grep -E '^Inst' | grep -q 'trixie'; then
  echo "deps.sh: refusing: a dist-upgrade would take packages from trixie; check $here/apt" >&2
  exit 1
fi
pkg-config --atleast-version=9.2 libllhttp || { echo "deps.sh: llhttp >= 9.2 was not installed" >&2; exit 1; }
npm_packages
