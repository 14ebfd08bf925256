/* clank.json seen from C: the canonical encoder and the number formatter,
   used by the server, the bridge and the schema messages. */
#ifndef CLANK_JSON_H
#define CLANK_JSON_H

#include <lua.h>

#include "util/buf.h"

/* ECMAScript Number.prototype.toString of d into out (>= 32 bytes, NUL-terminated);
   returns the length. */
size_t clank_json_format_number(double d, char *out);

/* Appends the canonical JSON of the value at idx to out. schema_idx is 0 or
   the index of a clank.Schema that guides array-ness. Raises a Lua error on
   values JSON cannot hold; allocates nothing with malloc that an error would
   leak (out belongs to the caller). */
void clank_json_encode(lua_State *L, int idx, int schema_idx, clank_buf_t *out);
/* The same, guided by a schema node already in hand (NULL for none). */
struct clank_schema_node_s;
void clank_json_encode_node(lua_State *L, int idx, const struct clank_schema_node_s *node,
                            clank_buf_t *out);
/* Validates the value at idx against node and appends its canonical JSON
   in one walk (schema_encode.c): returns 1 when the value is valid and
   written, byte for byte what clank_json_encode_node writes; else 0 with out
   as it was, when the value is invalid or unusual (a union, a pattern, a
   table under s.unknown, an unknown key, a metatable other than the array
   mark...): the caller then validates and encodes the general way. Never
   raises; the stack is left as it was. */
int clank_schema_encode(lua_State *L, const struct clank_schema_node_s *node, int idx,
                        clank_buf_t *out);

/* Appends s escaped as the inside of a JSON string (no quotes), as
   clank_json_encode writes strings: returns 0, -1 when out could not grow,
   or -2 when s is not valid UTF-8. */
int clank_json_escape(clank_buf_t *out, const char *s, size_t n);

/* Decodes the JSON text s (strict RFC 8259) and pushes the value, returning
   1; or pushes nil and a message naming the problem and its 1-based byte
   position, returning 2. Raises only when memory runs out. */
int clank_json_decode(lua_State *L, const char *s, size_t len);

/* For decoders built on this one (schema_decode.c): decodes the one value
   at *p (whitespace before it skipped) as clank_json_decode would, at
   nesting depth (the containers already entered) and with the array
   metatable at the absolute index mt; pushes it, moves *p past it and
   returns 0, or returns -1 when the text is malformed (the stack then holds
   what the value had pushed so far: the caller resets it). */
int clank_json_decode_part(lua_State *L, const char **p, const char *end, int depth, int mt);

/* The length of the well-formed UTF-8 character at p (of n > 0 bytes), or 0:
   overlongs, surrogates and code points above U+10FFFF are refused. */
size_t clank_json_utf8_char(const unsigned char *p, size_t n);

int luaopen_clank_json(lua_State *L);

#endif
