/* A JSON text decoded and checked against a schema in one pass (the
   bridge's step 8 and the input half of step 9 together). */
#ifndef CLANK_SCHEMA_DECODE_H
#define CLANK_SCHEMA_DECODE_H

#include <lua.h>
#include <stddef.h>

#include "data/schema.h"

enum {
  CLANK_SCHEMA_DECODE_MALFORMED = 0, /* nothing pushed: clank_json_decode says why */
  CLANK_SCHEMA_DECODE_VALID = 1,     /* the value pushed, and n accepts it */
  CLANK_SCHEMA_DECODE_UNSURE = 2     /* the value pushed: validate it as usual */
};

/* Decodes the JSON text s as clank_json_decode does, pushing the very value
   it pushes (the same table, built in the same order), and checks it against
   n on the way. VALID is a promise that clank_schema_validate(n) accepts the
   value; UNSURE says nothing (a constraint failed, or the schema has a part
   this pass does not check: unions, literals, patterns). MALFORMED pushes
   nothing and leaves the verdict on the text (and its message) to
   clank_json_decode. Raises only when memory runs out. */
int clank_schema_decode(lua_State *L, const clank_schema_node_t *n, const char *s, size_t len);

#endif
