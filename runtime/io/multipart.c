/* clank.multipart: the Lua face of the incremental multipart/form-data
   parser (util/multipart.c) that request:form() uses (SPEC §15 "Bodies").
   new(boundary) -> parser | nil, message; parser:feed(s) -> true | nil,
   message; parser:finish() -> fields | nil, message; parse(body, boundary)
   does all three. Fields: a text part is a string, a part with a filename
   { filename, type, data }; a repeated name: the last part wins. */
#include <lauxlib.h>

#include "io/multipart.h"
#include "util/multipart.h"

#define PARSER_MT "clank.multipart.Parser"

typedef struct {
  clank_multipart_t p;
  lua_State *L;     /* while feeding: the fields table is at its top */
  const char *body; /* parse(): the whole body, parts are slices of it */
  int ok;           /* init succeeded */
} parser_t;

static void set_buf(lua_State *L, const char *key, const clank_buf_t *b) {
  lua_pushlstring(L, b->data ? b->data : "", b->len);
  lua_setfield(L, -2, key);
}

static void push_data(parser_t *u, const clank_multipart_part_t *part) {
  if (u->body)
    lua_pushlstring(u->L, u->body + part->offset, part->length);
  else
    lua_pushlstring(u->L, part->data.data ? part->data.data : "", part->data.len);
}

static int on_part(void *ud, clank_multipart_part_t *part) {
  parser_t *u = ud;
  lua_State *L = u->L;
  lua_pushlstring(L, part->name.data ? part->name.data : "", part->name.len);
  if (part->has_filename) {
    lua_createtable(L, 0, 3);
    set_buf(L, "filename", &part->filename);
    if (part->has_type)
      set_buf(L, "type", &part->type);
    else
      lua_pushliteral(L, "application/octet-stream"), lua_setfield(L, -2, "type");
    push_data(u, part);
    lua_setfield(L, -2, "data");
  } else {
    push_data(u, part);
  }
  lua_rawset(L, -3);
  /* a large part's bytes are in Lua now: not kept twice until the next one */
  if (part->data.cap > 64 * 1024) clank_buf_free(&part->data);
  return 0;
}

static parser_t *check(lua_State *L) { return luaL_checkudata(L, 1, PARSER_MT); }

static int fail(lua_State *L, parser_t *u, int rc) {
  if (rc == CLANK_MULTIPART_NOMEM) return luaL_error(L, "not enough memory");
  luaL_pushfail(L);
  lua_pushstring(L, clank_multipart_error(&u->p));
  return 2;
}

/* new(boundary) */
static int parser_new(lua_State *L) {
  size_t len = 0;
  const char *b = luaL_optlstring(L, 1, NULL, &len);
  parser_t *u = lua_newuserdatauv(L, sizeof *u, 1);
  u->ok = 0;
  u->body = NULL;
  luaL_setmetatable(L, PARSER_MT);
  int rc = clank_multipart_init(&u->p, b, len, on_part, u);
  u->ok = 1; /* init leaves nothing to free either way */
  if (rc != CLANK_MULTIPART_OK) return fail(L, u, rc);
  lua_newtable(L);
  lua_setiuservalue(L, -2, 1);
  return 1;
}

static int feed(lua_State *L, parser_t *u, int idx, const char *s, size_t len) {
  lua_getiuservalue(L, idx, 1);
  u->L = L;
  int rc = clank_multipart_feed(&u->p, s, len);
  lua_pop(L, 1);
  return rc;
}

/* parser:feed(s) */
static int parser_feed(lua_State *L) {
  parser_t *u = check(L);
  size_t len;
  const char *s = luaL_checklstring(L, 2, &len);
  int rc = feed(L, u, 1, s, len);
  if (rc != CLANK_MULTIPART_OK) return fail(L, u, rc);
  lua_pushboolean(L, 1);
  return 1;
}

/* parser:finish() */
static int parser_finish(lua_State *L) {
  parser_t *u = check(L);
  int rc = clank_multipart_finish(&u->p);
  if (rc != CLANK_MULTIPART_OK) return fail(L, u, rc);
  lua_getiuservalue(L, 1, 1);
  return 1;
}

static int parser_gc(lua_State *L) {
  parser_t *u = check(L);
  if (u->ok) clank_multipart_free(&u->p);
  u->ok = 0;
  return 0;
}

/* parse(body, boundary) */
static int parse(lua_State *L) {
  size_t len;
  const char *body = luaL_checklstring(L, 1, &len);
  lua_settop(L, 2);
  lua_pushcfunction(L, parser_new);
  lua_pushvalue(L, 2);
  lua_call(L, 1, 2);
  if (lua_isnil(L, -2)) return 2;
  lua_pop(L, 1); /* the parser at 3; the body stays at 1, alive */
  parser_t *u = lua_touserdata(L, 3);
  u->body = body; /* no copy of each part's bytes on the way */
  u->p.keep_data = 0;
  int rc = feed(L, u, 3, body, len);
  if (rc == CLANK_MULTIPART_OK) rc = clank_multipart_finish(&u->p);
  if (rc != CLANK_MULTIPART_OK) return fail(L, u, rc);
  lua_getiuservalue(L, 3, 1);
  return 1;
}

int luaopen_clank_multipart(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"feed", parser_feed}, {"finish", parser_finish}, {"__gc", parser_gc}, {NULL, NULL}};
  if (luaL_newmetatable(L, PARSER_MT)) {
    luaL_setfuncs(L, methods, 0);
    lua_pushvalue(L, -1);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {{"new", parser_new}, {"parse", parse}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}
