/* clank.password: Argon2id password hashes (libsodium's crypto_pwhash),
   computed on libuv's thread pool while the calling task waits.

   password.hash(pw [, params [, signal]]) -> encoded | nil, err
     "$argon2id$v=19$m=<KiB>,t=<opslimit>,p=1$<salt>$<hash>", a new random
     salt each time. params: { opslimit = N, memlimit = bytes }, each absent
     field password.DEFAULT's; out of libsodium's range raises.
     nil, { code = "OUT_OF_MEMORY", message } when memlimit could not be had.
   password.verify(stored, pw [, signal]) -> true | false
     false also for a stored string that is not an Argon2id encoded hash
     (argon2i, truncated, garbage: answered at once, without a thread).
     Answering an unknown user as slowly as a known one is the caller's: verify
     against a hash made for the purpose.
   password.needsRehash(stored [, params]) -> boolean
     true when stored was not made with params (default password.DEFAULT) or
     is not an Argon2id encoded hash. No wait.
   password.DEFAULT: { opslimit, memlimit }, what hash uses without params (a
     copy: changing it changes nothing). CLANK_PASSWORD_COST=fast, read when
     the module loads, makes it libsodium's minimum (for test suites).

   pw and stored are strings (any bytes; pw may be empty); other types raise.
   hash and verify wait like clank.db's calls (io/db.h): outside a task they
   raise the SPEC §1 message; signal (a clank.AbortSignal, default: the
   running task's, as clank.core.currentSignal gives it) aborted before or
   while waiting -> nil, { code = "ABORTED", message = "aborted: <reason>",
   reason }, at once: the thread's work goes on and its memory is freed when
   it ends. The password's copy in C memory is wiped; the Lua string is not
   (Lua strings are immutable).

   libuv's pool has UV_THREADPOOL_SIZE threads (4 by default), shared with
   file reads and name lookups: that bounds the hashes running at once, and
   with them the memory they take (memlimit each). */
#ifndef CLANK_PASSWORD_H
#define CLANK_PASSWORD_H

#include <lua.h>

int luaopen_clank_password(lua_State *L);

#endif
