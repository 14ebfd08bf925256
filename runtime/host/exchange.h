/* One request in a handler: its task (coroutine), its connection, its
   generation. Pooled by exchange.c, run by drive.c, started by dispatch.c;
   stream.c writes answers while the handler runs. */
#ifndef CLANK_EXCHANGE_H
#define CLANK_EXCHANGE_H

#include "host/generation.h"
#include "host/host.h"
#include "http/server.h"
#include "agent/bridge.h"
#include "core/scheduler.h"

typedef struct exchange_s {
  clank_task_t task; /* first: the task table points here */
  clank_conn_t *conn;
  clank_host_t *host;
  clank_gen_t *gen;
  int co_ref;
  unsigned serial;   /* bumped on every use, so a kept writer can tell */
  int waited;        /* it went asynchronous: its end resumes the connection */
  int abandoned;     /* the connection went away */
  int streaming;     /* the answer's head went out, its body streams */
  int stream_closed; /* the last chunk went out */
  /* its action timed out while it waited: the 504 went out and the
     connection moved on; it serves no connection (conn NULL) until its
     coroutine ends, in the generation's late list, then it is reused */
  int late;
  clank_task_t *send_waiter;    /* the task a full stream suspended, until the output drains */
  clank_bridge_answer_t answer; /* the bridge's, given as C values */
  struct exchange_s *next;      /* in the generation's spares */
} exchange_t;

static inline exchange_t *exchange_of(lua_State *co) { return (exchange_t *)clank_task_of(co); }
/* An exchange for a request of g, from its spares or new (a coroutine bound
   as a task once, and kept). */
exchange_t *clank_exchange_get(clank_gen_t *g);
/* Whether x's coroutine may serve again after it ended with status st. */
static inline int clank_exchange_reusable(const exchange_t *x, int st) {
  return st == LUA_OK && !x->task.exhausted && !x->task.mem_over;
}
/* x back among its generation's spares when reusable and there is room,
   else freed: a coroutine that failed keeps its broken stack. */
void clank_exchange_put(exchange_t *x, int reusable);
/* x's action timed out while it waited: x serves no connection now and
   waits in its generation's late list until its coroutine ends; unlate
   takes it off again. */
void clank_exchange_late(exchange_t *x);
void clank_exchange_unlate(exchange_t *x);
/* Frees the generation's spare and late exchanges (before it closes). */
void clank_exchange_forget(clank_gen_t *g);

/* The exchange co serves: its own task's, or the one of a task it was joined
   from (an action the request's handler runs), or NULL. */
exchange_t *clank_exchange_serving(lua_State *co);

/* env.stream(status, headers) → a writer (lua_CFunction; runs in a task). */
int clank_stream_begin(lua_State *L);
/* Ends a stream its handler left open. */
void clank_stream_finish(exchange_t *x);
/* Detaches the writer Lua may still hold from an exchange that ends. */
void clank_stream_forget(exchange_t *x, lua_State *L);
/* The output drained, or the connection went: a send waiting goes on. */
void clank_stream_wake(exchange_t *x);
/* A route's streamed answer: [response table at idx] → its head written and
   send (a function) pushed; the route then calls stream(send). */
void clank_stream_route_begin(lua_State *co, exchange_t *x, int idx);

#endif
