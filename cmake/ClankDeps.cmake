find_package(PkgConfig REQUIRED)
pkg_check_modules(LUA REQUIRED lua5.4)
# clank-run links Debian's static Lua (liblua5.4-dev's liblua5.4.a, position-independent) whole
# and exports its API, as Debian's own lua5.4 interpreter does: Lua C modules (cjson.so,
# luasql), which do not link liblua, resolve against the executable. Calls into Lua are then
# direct, without the shared library's indirections: about 4 % less server CPU for a 100-row
# tasks.list (bench/db.sh).
find_library(LUA_STATIC_LIBRARY NAMES liblua5.4.a HINTS ${LUA_LIBRARY_DIRS} REQUIRED)
pkg_check_modules(LIBUV REQUIRED libuv>=1.44)
# SHA-256 for manifest etags, HMAC for MCP sessions.
pkg_check_modules(CRYPTO REQUIRED libcrypto)
# clank.fetch's TLS (SPEC §12).
pkg_check_modules(SSL REQUIRED libssl)
# clank.db's SQLite driver (SPEC §12).
pkg_check_modules(SQLITE3 REQUIRED sqlite3)
# clank.db's PostgreSQL driver (SPEC §12): libpq in non-blocking mode.
pkg_check_modules(PQ REQUIRED libpq)
# clank.password: Argon2id (crypto_pwhash).
pkg_check_modules(SODIUM REQUIRED libsodium)
# The manual served at /__clank/docs: CommonMark to HTML (Debian's libcmark-dev).
pkg_check_modules(CMARK REQUIRED libcmark)
pkg_check_modules(LLHTTP libllhttp>=9.2)
if(NOT LLHTTP_FOUND)
  message(FATAL_ERROR "llhttp >= 9.2 was not found. Debian 12 ships only 8.1, which "
    "accepts a CR inside header values (CVE-2023-30589). Run vendor/deps.sh as root: "
    "it installs libllhttp-dev 9.2 from Debian 13, pinned so that nothing else comes from there.")
endif()
# WebSocket frames for the live channel (SPEC §11): wslay, no I/O of its own.
# Debian's libwslay-dev has no .pc file; find the header and the library.
find_path(WSLAY_INCLUDE_DIR wslay/wslay.h REQUIRED)
find_library(WSLAY_LINK_LIBRARIES wslay REQUIRED)
