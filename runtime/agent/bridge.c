/* clank.bridge (SPEC §5): createAgentBridge (its options, the actions
   indexed by name, the manifest and its etag), the bridge's methods
   (manifest, invoke, handle), what C reads of a bridge, and luaopen, which
   gathers the functions of the other files (bridge_internal.h lists them):
   the rules clank.mcp and clank.app share (isJsonMediaType, checkOrigin,
   errorEnvelope, context, isReservedPath, actionsByName,
   DEFAULT_ACTION_TIMEOUT). Owns the bridge userdata: its scratch buffer
   (freed by __gc) and its uservalues (the UV_ slots). */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "agent/action.h"
#include "agent/bridge_internal.h"
#include "data/json.h"
#include "util/bytes.h"

const char clank_bridge_tag = 0;

/* createAgentBridge builds the uservalues in a table under these names
   first, then moves each to its UV_ slot */
#define K_ACTIONS "actions"
#define K_MANIFEST "manifest"
#define K_ETAG "etag"
#define K_ORIGINS "origins"
#define K_INDEX "index"
#define K_LIST "list"
#define K_REALM "realm"

/* ---- createAgentBridge ---- */

static int compare_names(const void *x, const void *y) {
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Pushes list (at idx) sorted by the string at field `key` of each item,
   as a marked array, each item replaced by item[take] when take != NULL. */
static void push_sorted(lua_State *L, int list, const char *key, const char *take) {
  lua_Integer n = luaL_len(L, list);
  lua_createtable(L, 0, (int)n); /* name → item */
  int byname = lua_gettop(L);
  const char **names = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 1), 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, list, i);
    if (take) {
      lua_getfield(L, -1, take);
      lua_remove(L, -2);
    }
    lua_getfield(L, -1, key);
    names[i - 1] = lua_tostring(L, -1);
    if (names[i - 1] == NULL) luaL_error(L, "clank.createAgentBridge: an item has no %s", key);
    lua_insert(L, -2);
    lua_rawset(L, byname); /* byname keeps the name strings alive */
  }
  qsort(names, (size_t)n, sizeof *names, compare_names);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer i = 0; i < n; i++) {
    lua_getfield(L, byname, names[i]);
    lua_rawseti(L, -2, i + 1);
  }
  clank_mark_array(L, -1);
  lua_replace(L, byname);
  lua_pop(L, 1);
}

/* Pushes name → action for the list at idx and returns 1; or, when an item
   is not an action or a name repeats, pushes the problem instead and
   returns 0. */
static int push_actions_by_name(lua_State *L, int list) {
  list = lua_absindex(L, list);
  lua_newtable(L);
  int byname = lua_gettop(L);
  lua_Integer n = luaL_len(L, list);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, list, i);
    if (clank_action_test(L, -1) == NULL) {
      lua_pushfstring(L, "actions[%I] is not an action (clank.defineAction)", (LUAI_UACINT)i);
      lua_replace(L, byname);
      lua_settop(L, byname);
      return 0;
    }
    clank_action_push_name(L, -1);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, byname) != LUA_TNIL) {
      lua_pushfstring(L, "duplicate action name '%s'", lua_tostring(L, -2));
      lua_replace(L, byname);
      lua_settop(L, byname);
      return 0;
    }
    lua_pop(L, 1);
    lua_insert(L, -2);
    lua_rawset(L, byname);
  }
  return 1;
}

/* The actions of the list at list (all checked) in uv: K_LIST, a copy of
   the list, and K_INDEX, their entries sorted by name, which b points to. */
static void index_actions(lua_State *L, bridge_t *b, int list, int uv) {
  size_t n = (size_t)luaL_len(L, list);
  lua_createtable(L, (int)n, 0);
  entry_t *index = lua_newuserdatauv(L, n ? n * sizeof *index : 1, 0);
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, list, (lua_Integer)i + 1);
    index[i].action = clank_action_test(L, -1);
    if (index[i].action == NULL) /* only a list whose length moves gets here */
      luaL_error(L, "clank.createAgentBridge: actions[%d] is not an action", (int)i + 1);
    index[i].slot = (int)i + 1;
    index[i].confirm = clank_action_requires_confirmation(index[i].action);
    index[i].needs_user = clank_bridge_needs_user(&b->rules, index[i].action);
    clank_action_push_name(L, -1);
    index[i].name = lua_tolstring(L, -1, &index[i].len); /* the action holds the string */
    lua_pop(L, 1);
    lua_rawseti(L, -3, (lua_Integer)i + 1);
  }
  qsort(index, n, sizeof *index, clank_bridge_compare_entries);
  b->rules.index = index;
  b->rules.nindex = n;
  lua_setfield(L, uv, K_INDEX);
  lua_setfield(L, uv, K_LIST);
}

/* In the manifests of the sorted list at list, "auth": "user" for each
   action that says nothing: what an app with accounts asks of it. Copies:
   the action's own manifest stays as it was defined. */
static void give_default_auth(lua_State *L, int list) {
  lua_Integer n = luaL_len(L, list);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, list, i);
    if (lua_getfield(L, -1, "auth") == LUA_TNIL) {
      lua_newtable(L);
      for (lua_pushnil(L); lua_next(L, -4);) { /* [key, value] → [key] */
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
      }
      lua_pushliteral(L, "user");
      lua_setfield(L, -2, "auth");
      lua_rawseti(L, list, i);
    }
    lua_pop(L, 2);
  }
}

/* Pushes www-authenticate's value for a 401: Bearer realm="<the name in
   the options at opts>" (quotes and backslashes escaped), or realm="clank". */
static void push_realm(lua_State *L, int opts) {
  size_t n = 0;
  const char *name = NULL;
  if (lua_istable(L, opts) && lua_getfield(L, opts, "name") == LUA_TSTRING)
    name = lua_tolstring(L, -1, &n);
  luaL_Buffer buf;
  luaL_buffinit(L, &buf);
  luaL_addstring(&buf, "Bearer realm=\"");
  if (name == NULL) luaL_addstring(&buf, "clank");
  for (size_t i = 0; name && i < n; i++) {
    char c = name[i];
    if ((unsigned char)c < 0x20 || c == 0x7f) continue; /* never a header's control byte */
    if (c == '"' || c == '\\') luaL_addchar(&buf, '\\');
    luaL_addchar(&buf, c);
  }
  luaL_addchar(&buf, '"');
  luaL_pushresult(&buf);
  if (lua_istable(L, opts)) lua_remove(L, -2);
}

static const char *const bridge_options[] = {"name",          "description",
                                             "views",         "allowedOrigins",
                                             "requireOrigin", "maxRequestBytes",
                                             "exposeErrors",  "actionTimeout",
                                             "auth",          NULL};

static void read_options(lua_State *L, bridge_t *b, int opts, int uv) {
  b->rules.max_bytes = CLANK_BRIDGE_DEFAULT_MAX_BYTES;
  b->timeout_ms = CLANK_BRIDGE_DEFAULT_ACTION_TIMEOUT;
  lua_newtable(L);
  lua_setfield(L, uv, K_ORIGINS);
  if (lua_isnoneornil(L, opts)) return;
  luaL_checktype(L, opts, LUA_TTABLE);
  for (lua_pushnil(L); lua_next(L, opts); lua_pop(L, 1)) {
    int known = 0;
    for (int i = 0; bridge_options[i]; i++)
      if (lua_type(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -2), bridge_options[i]) == 0)
        known = 1;
    if (!known)
      luaL_error(L, "clank.createAgentBridge: unknown option '%s'", luaL_tolstring(L, -2, NULL));
  }
  if (lua_getfield(L, opts, "maxRequestBytes") != LUA_TNIL) {
    int isint;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint || v < 1)
      luaL_error(L, "clank.createAgentBridge: 'maxRequestBytes' must be a positive integer");
    b->rules.max_bytes = v;
  }
  if (lua_getfield(L, opts, "actionTimeout") != LUA_TNIL) {
    lua_Number v = lua_tonumber(L, -1);
    if (!(v > 0))
      luaL_error(L, "clank.createAgentBridge: 'actionTimeout' must be a positive number of ms");
    b->timeout_ms = v;
  }
  lua_getfield(L, opts, "requireOrigin");
  b->rules.require_origin = lua_toboolean(L, -1);
  lua_getfield(L, opts, "exposeErrors");
  b->expose_errors = lua_toboolean(L, -1);
  lua_getfield(L, opts, "auth");
  b->rules.auth = lua_toboolean(L, -1);
  lua_pop(L, 5);
  if (lua_getfield(L, opts, "allowedOrigins") == LUA_TTABLE) {
    lua_getfield(L, uv, K_ORIGINS);
    lua_Integer n = luaL_len(L, -2);
    for (lua_Integer i = 1; i <= n; i++) {
      if (lua_rawgeti(L, -2, i) != LUA_TSTRING)
        luaL_error(L, "clank.createAgentBridge: allowedOrigins[%d] must be a string", (int)i);
      lua_pushboolean(L, 1);
      lua_rawset(L, -3);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

static int l_create(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  bridge_t *b = lua_newuserdatauv(L, sizeof *b, UV_COUNT); /* 3 */
  memset(b, 0, sizeof *b);
  b->tag = &clank_bridge_tag;
  luaL_setmetatable(L, CLANK_BRIDGE_MT);
  lua_newtable(L); /* 4: uservalue */
  read_options(L, b, 2, 4);

  if (!push_actions_by_name(L, 1)) /* 5: name → action */
    return luaL_error(L, "clank.createAgentBridge: %s", lua_tostring(L, -1));
  lua_pushvalue(L, 5);
  lua_setfield(L, 4, K_ACTIONS);
  index_actions(L, b, 1, 4);

  /* the manifest: { protocol, actions (sorted by name), name?, description?, views? } */
  lua_createtable(L, 0, 5); /* 6 */
  lua_pushliteral(L, "clank-agent/1");
  lua_setfield(L, 6, "protocol");
  push_sorted(L, 1, "name", "manifest");
  if (b->rules.auth) give_default_auth(L, lua_gettop(L));
  lua_setfield(L, 6, "actions");
  push_realm(L, 2);
  lua_setfield(L, 4, K_REALM);
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "name");
    lua_setfield(L, 6, "name");
    lua_getfield(L, 2, "description");
    lua_setfield(L, 6, "description");
    if (lua_getfield(L, 2, "views") == LUA_TTABLE && luaL_len(L, -1) > 0) {
      push_sorted(L, lua_gettop(L), "name", "viewManifest");
      lua_setfield(L, 6, "views");
    }
    lua_pop(L, 1);
  }
  clank_buf_reset(&b->scratch);
  clank_json_encode(L, 6, 0, &b->scratch);
  lua_pushlstring(L, b->scratch.data, b->scratch.len);
  lua_setfield(L, 4, K_MANIFEST);

  /* etag: '"' + 16 hex digits of the SHA-256 of the body + '"' */
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  if (!EVP_Digest(b->scratch.data, b->scratch.len, md, &mdlen, EVP_sha256(), NULL))
    return luaL_error(L, "clank.createAgentBridge: SHA-256 failed");
  char etag[19];
  etag[0] = '"';
  for (int i = 0; i < 8; i++) {
    etag[1 + 2 * i] = clank_hex_digits[md[i] >> 4];
    etag[2 + 2 * i] = clank_hex_digits[md[i] & 15];
  }
  etag[17] = '"';
  etag[18] = '\0';
  lua_pushstring(L, etag);
  lua_setfield(L, 4, K_ETAG);

  static const char *const slots[UV_COUNT] = {K_ACTIONS, K_MANIFEST, K_ETAG, K_ORIGINS,
                                              K_INDEX,   K_LIST,     K_REALM};
  for (int i = 0; i < UV_COUNT; i++) {
    lua_getfield(L, 4, slots[i]);
    lua_setiuservalue(L, 3, i + 1);
  }
  lua_settop(L, 3);
  return 1;
}

/* ---- methods ---- */

static int return_one(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  (void)L;
  return 1;
}

/* Runs the function below 3 arguments here when in a task, else in a task
   of its own with the loop run until it ends. */
static int run3(lua_State *L) {
  if (clank_in_task(L)) {
    lua_callk(L, 3, 1, 0, return_one);
    return 1;
  }
  return clank_sched_call(L, 3);
}

static int l_manifest(lua_State *L) {
  check_bridge(L, 1);
  push_uv_field(L, 1, UV_MANIFEST);
  size_t n;
  const char *m = lua_tolstring(L, -1, &n);
  clank_json_decode(L, m, n);
  return 1;
}

/* [bridge, name, input, ctx, actions, action] → the action's output, run
   through the pipeline. */
static int invoke_run(lua_State *L) {
  lua_settop(L, 6);
  lua_pushcfunction(L, clank_action_pipeline);
  lua_insert(L, -2);
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 4);
  return run3(L);
}

/* ask's answer on top: true runs the action. */
static int invoke_asked(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  if (!lua_toboolean(L, -1)) {
    clank_action_error_push(L, "CONFIRMATION_REQUIRED", "The action was not confirmed.", 428);
    return lua_error(L);
  }
  return invoke_run(L);
}

/* bridge:invoke(name, input, ctx). In a live view's request that the person
   did not confirm, an action that requires confirmation has its input
   validated first, then the person asked (as runner.c does), else it fails
   with CONFIRMATION_REQUIRED. */
static int l_invoke(lua_State *L) {
  check_bridge(L, 1);
  const char *name = luaL_checkstring(L, 2);
  lua_settop(L, 4);
  push_uv_field(L, 1, UV_ACTIONS);
  lua_getfield(L, -1, name);
  if (lua_isnil(L, -1)) {
    lua_pushfstring(L, "Unknown action: %s", name);
    clank_action_error_push(L, "NOT_FOUND", lua_tostring(L, -1), 404);
    return lua_error(L);
  }
  clank_action_t *a = clank_action_test(L, -1);
  if (a && clank_action_requires_confirmation(a) && clank_bound_request_unconfirmed(L)) {
    if (!clank_schema_validate(L, clank_action_input(a), 3)) return lua_error(L);
    if (!clank_bound_request_ask(L)) {
      clank_action_error_push(L, "CONFIRMATION_REQUIRED",
                              "This action requires explicit confirmation.", 428);
      return lua_error(L);
    }
    lua_pushcfunction(L, clank_action_confirm_text); /* ask(action:confirmText(input)) */
    lua_pushvalue(L, 6);
    lua_pushvalue(L, 3);
    lua_call(L, 2, 1);
    lua_callk(L, 1, 1, 0, invoke_asked);
    return invoke_asked(L, LUA_OK, 0);
  }
  return invoke_run(L);
}

static int l_handle(lua_State *L) {
  check_bridge(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 3);
  lua_pushcfunction(L, clank_bridge_handle_task);
  lua_insert(L, 1);
  return run3(L);
}

/* ---- what C reads of a bridge ---- */

void clank_bridge_push_manifest(lua_State *L, int idx) {
  check_bridge(L, idx);
  push_uv_field(L, idx, UV_MANIFEST);
}

void clank_bridge_push_actions(lua_State *L, int idx) {
  check_bridge(L, idx);
  push_uv_field(L, idx, UV_ACTIONS);
}

void clank_bridge_push_contract_hash(lua_State *L, int idx) {
  check_bridge(L, idx);
  push_uv_field(L, idx, UV_ETAG);
  size_t n;
  const char *etag = lua_tolstring(L, -1, &n);
  lua_pushlstring(L, etag + 1, n - 2);
  lua_remove(L, -2);
}

long long clank_bridge_max_bytes(lua_State *L, int idx) {
  return check_bridge(L, idx)->rules.max_bytes;
}

/* bridge.actionsByName(list) → name → action, or nil and the problem (an
   item that is not an action, a duplicate name). */
static int l_actions_by_name(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (push_actions_by_name(L, 1)) return 1;
  lua_pushnil(L);
  lua_insert(L, -2);
  return 2;
}

static int l_gc(lua_State *L) {
  bridge_t *b = check_bridge(L, 1);
  clank_buf_free(&b->scratch);
  return 0;
}

static const luaL_Reg bridge_methods[] = {
    {"manifest", l_manifest}, {"invoke", l_invoke}, {"handle", l_handle}, {NULL, NULL}};

static const luaL_Reg bridge_funcs[] = {
    {"createAgentBridge", l_create}, {"actionsByName", l_actions_by_name}, {NULL, NULL}};

int luaopen_clank_bridge(lua_State *L) {
  luaL_newmetatable(L, CLANK_BRIDGE_MT);
  luaL_newlib(L, bridge_methods);
  luaL_setfuncs(L, clank_bridge_auth_methods, 0); /* bridge_auth.c */
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newlib(L, bridge_funcs);
  luaL_setfuncs(L, clank_bridge_rule_funcs, 0);     /* bridge_request.c */
  luaL_setfuncs(L, clank_bridge_envelope_funcs, 0); /* bridge_envelope.c */
  luaL_setfuncs(L, clank_bridge_ctx_funcs, 0);      /* bridge_ctx.c */
  lua_pushinteger(L, CLANK_BRIDGE_DEFAULT_ACTION_TIMEOUT);
  lua_setfield(L, -2, "DEFAULT_ACTION_TIMEOUT");
  lua_pushinteger(L, CLANK_BRIDGE_DEFAULT_MAX_BYTES);
  lua_setfield(L, -2, "DEFAULT_MAX_REQUEST_BYTES");
  return 1;
}
