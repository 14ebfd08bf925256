-- clank.signal: signals, computed values, effects and batches (SPEC §7).
--
-- A push-pull graph. A write that changes a signal marks what depends on it
-- (computeds become outdated, effects are queued) and, once the outermost
-- batch ends, runs the queued effects. Computeds recompute lazily, when read,
-- and only when the version of something they read changed, in dependency
-- order: every read sees a consistent graph (glitch-free), and a diamond
-- a → b, c → d runs d once per change of a.
--
-- Cost: a write visits each edge below it at most once; an effect re-run
-- checks each of its sources once. Edges are doubly linked lists, so
-- subscribing and unsubscribing are O(1).
--
-- Lifetime: a source holds its subscribers (effects, and computeds that
-- something subscribed reads); a computed nobody subscribes to holds nothing
-- and is checked by versions when read, so dropping it frees it. An effect
-- lives until its disposer is called.
--
-- Errors:
-- * An effect re-run by a write that raises: every other queued effect still
--   runs, then the first error is raised to the writer (the `s.value = v`
--   assignment, or the `batch` call whose end ran the effects), as the error
--   object it raised. The graph stays consistent; the failed effect stays
--   subscribed to what it read before failing and runs again when that
--   changes.
-- * `effect(fn)` whose first run raises is disposed and raises to its caller.
-- * A computed whose function raises caches the error: each read raises it
--   again until one of its sources changes.
-- * A computed must not write signals (that raises). Effects, computeds and
--   batch functions must not wait (clank.sleep) or yield: the graph is
--   synchronous and its state is shared by every coroutine of the Lua state.
--
-- Tasks: batches are counted per coroutine. The runtime may stop a task for
-- good anywhere (over its CPU or memory budget: it is never resumed, and no
-- Lua code of it runs again, not even a pcall's handler), so nothing here
-- waits for a task's normal end. A batch left open by a coroutine that is
-- not running (preempted, waiting, stopped) holds no other task's effects:
-- the next write elsewhere runs them, with those the batch queued so far. A
-- coroutine resumed inside a batch or an effect is part of it, as before.
-- An effect a stopped task was running is taken out of the queue; the others
-- stay queued for the next one to run them. A tracked run a stopped task
-- left (its observer, a computed's running mark) counts for nothing.
--
-- Limits: each computed in a chain being recomputed costs two C-stack levels
-- (the .value metamethod and a pcall), so chains deeper than about 90
-- computeds recomputing at once hit Lua's "C stack overflow" (raised, not a
-- crash). Effects created inside an effect are independent: dispose them
-- in the outer effect's cleanup when they should not outlive its run.
--
-- An effect function may return a cleanup function: it runs (untracked)
-- before the effect's next run and when the effect is disposed.
local error, next, pairs, pcall, rawequal, setmetatable, getmetatable, tostring, type =
  error, next, pairs, pcall, rawequal, setmetatable, getmetatable, tostring, type
local pack, unpack = table.pack, table.unpack
local running, co_status = coroutine.running, coroutine.status

local SIGNAL, COMPUTED, EFFECT = 1, 2, 3

-- A node's fields are array slots, named by these constants (compiled to GETI/SETI): a
-- list's render reads a few fields of a hundred computeds, and slots next to each other are
-- a cache line or two where string keys are spread over a hash part. A signal has the first
-- five; a computed the first thirty-five; an effect all of them, false where it has none.
-- (one per statement: only the last of several locals declared together is folded)
local KIND <const> = 1
local V <const> = 2
local VER <const> = 3
local FIRST <const> = 4
local LAST <const> = 5
local ERR <const> = 6
local OUTDATED <const> = 7
local SUBS <const> = 8
local RUNNING <const> = 9
-- Slots 10 to 22 are a host's (see computed(fn, host)): next to the few a read of an up to
-- date computed looks at, so that a memo hit reads its entry's fields in the same lines.
local HOST_FIRST <const> = 10
local HOST_LAST <const> = 22
local GV <const> = 23
local DEPS <const> = 24
local VERS <const> = 25
local NOTIFIED <const> = 26
local ND <const> = 27
local NV <const> = 28
local NS <const> = 29
local NN <const> = 30
local IDX <const> = 31
local KEPT <const> = 32
local FORCE <const> = 33
local FN <const> = 34
local SELF <const> = 35
local QUEUED <const> = 36
local DISPOSED <const> = 37
local CLEANUP <const> = 38
local HINTS <const> = 39
local RUN_HINTS <const> = 40
local MAX_PASSES = 100 -- flush passes before a cycle is assumed
local MAX_HINTS = 32 -- sources an effect remembers as having notified it

-- Stands for nil in a node's value field, so the field is never absent (the
-- node's __newindex would catch the next write to an absent field). A function
-- no app can reach: == against it is raw (functions have no __eq).
local NIL = function() end
local EMPTY = {}

-- Per-module state (never globals).
local observer = false -- the computed or effect being run: it tracks reads
local observer_co = false -- the coroutine running it

-- observer is this Lua state's, not a task's: code run while it is set must
-- not be preempted or wait, or another task would track into it meanwhile.
-- clank.core's pcallAtomic is pcall with no yield across it (plain pcall
-- where clank.core is not loaded). The queue below is every task's too:
-- what adds to it or takes from it runs atomically as well.
local atomic_pcall = pcall
do
  local ok, core = pcall(require, "clank.core")
  if ok and type(core) == "table" and core.pcallAtomic then atomic_pcall = core.pcallAtomic end
end
-- coroutine → how many batches it has open (a write's or an effect's run of
-- the queue counts as one). Weak keys: a stopped task's entry goes with it.
local depths = setmetatable({}, { __mode = "k" })
-- Effects to run, in the order they were queued: queue[i - base] for
-- popped < i <= pushed. Each is taken out just before it runs.
local queue, pushed, popped, base = {}, 0, 0, 0
local global_version = 0 -- bumped by every change of any signal

local SIGNAL_MT, COMPUTED_MT

-- An effect's disposer → the effect (weak keys: M.sources).
local effects = setmetatable({}, { __mode = "k" })

local function unwrap(v)
  if v == NIL then return nil end
  return v
end

local function same(a, b)
  if rawequal(a, b) then return true end
  if a == NIL or b == NIL then return false end
  return a == b or (a ~= a and b ~= b) -- NaN stays NaN
end

---- edges: src[FIRST] .. src[LAST], a list of { s = src, t = target, p, n } ----

local link, unlink

-- A computed with a first subscriber subscribes to its own sources. Its flags
-- restart: nobody notified yet, and outdated until checked, unless it was
-- checked at this global version (not running): no signal changed since, and
-- from now on each change notifies it. (A list's render links the hundred
-- rows' computeds it just brought up to date: its next render skips them.)
local function subscribe_sources(c)
  local subs = {}
  c[SUBS] = subs
  c[OUTDATED] = c[GV] ~= global_version or c[RUNNING] ~= false
  c[NOTIFIED] = false
  local deps = c[DEPS]
  for i = 1, #deps do subs[deps[i]] = link(deps[i], c) end
end

function link(src, tgt)
  local last = src[LAST]
  local e = { s = src, t = tgt, p = last, n = false }
  if last then
    last.n = e
  else
    src[FIRST] = e
  end
  src[LAST] = e
  if not last and src[KIND] == COMPUTED then subscribe_sources(src) end
  return e
end

function unlink(e)
  local src, p, n = e.s, e.p, e.n
  if p then p.n = n else src[FIRST] = n end
  if n then n.p = p else src[LAST] = p end
  if not src[FIRST] and src[KIND] == COMPUTED then
    -- its last subscriber left: it lets go of its sources
    local subs = src[SUBS]
    src[SUBS] = false
    if subs then
      for _, e2 in pairs(subs) do unlink(e2) end
    end
  end
end

---- tracking ----

-- The observer reads made now track into: the running coroutine's, or that
-- of a coroutine it runs inside (an effect resuming a coroutine). One a
-- coroutine left when it died in a tracked run (stopped) is dropped; one of a
-- suspended coroutine is not this one's.
local function current_observer()
  local obs, co = observer, observer_co
  if not obs or co == running() then return obs end
  local st = co_status(co)
  if st == "normal" then return obs end
  if st == "dead" then observer, observer_co = false, false end
  return false
end

-- Where each source of node is in its list (made when first asked for after a run that
-- tracked: an effect's hints and kept runs look sources up; a hibernated view's watch, which
-- reads a hundred signals and never asks, does not hold it).
local function index_of(node)
  local idx = node[IDX]
  if idx then return idx end
  idx = {}
  local deps = node[DEPS]
  for i = 1, #deps do idx[deps[i]] = i end
  node[IDX] = idx
  return idx
end

-- A kept run (retrack) reads something its last run did not: what that run read becomes this
-- run's tracking so far, as if read again.
local function unkeep(obs)
  local deps, vers = obs[DEPS], obs[VERS]
  local nd, nv, ns = {}, {}, {}
  for i = 1, #deps do
    nd[i], nv[i] = deps[i], vers[i]
    ns[deps[i]] = i
  end
  obs[ND], obs[NV], obs[NS], obs[NN] = nd, nv, ns, #deps
  obs[KEPT] = false
  return ns
end

-- A run that reads what its last run read, in the same order (a list re-rendered with the
-- same rows), tracks in "prefix" mode: NS is PREFIX, ND is the last run's list itself and
-- NN how much of it this run read again; only the versions are new. The first read that
-- leaves the order makes the run's tables from that prefix (materialize), and it tracks as
-- usual from there.
local PREFIX = {}

local function materialize(obs)
  local deps, n = obs[ND], obs[NN]
  local nd, seen = {}, {}
  for i = 1, n do
    nd[i] = deps[i]
    seen[deps[i]] = i
  end
  obs[NS], obs[ND] = seen, nd
  return seen
end

local function track(src)
  local obs = observer
  if observer_co ~= running() then
    obs = current_observer()
    if not obs then return end
  end
  local seen = obs[NS]
  if seen == PREFIX then
    local n, deps = obs[NN], obs[ND]
    if deps[n + 1] == src then -- (no __eq on signals: == is rawequal without the call)
      n = n + 1
      obs[NN] = n
      obs[NV][n] = src[VER]
      return
    end
    if deps[n] == src then return end -- the same source read again
    seen = materialize(obs)
  elseif not seen then -- the run's first read (tables made only for runs that track)
    if obs[KEPT] then
      if index_of(obs)[src] then return end
      seen = unkeep(obs)
    elseif obs[DEPS][1] == src then
      obs[NS], obs[ND], obs[NV], obs[NN] = PREFIX, obs[DEPS], { src[VER] }, 1
      return
    else
      seen = {}
      obs[NS], obs[ND], obs[NV] = seen, {}, {}
    end
  end
  if seen[src] then return end
  local n = obs[NN] + 1
  seen[src] = n
  obs[NN] = n
  obs[ND][n] = src
  obs[NV][n] = src[VER]
  local subs = obs[SUBS]
  if subs and not subs[src] then subs[src] = link(src, obs) end
end

-- A tracked run of node ended: drops the subscriptions to what it no longer
-- reads, and keeps what it read. A kept run (retrack) read what the last one
-- did: nothing changes.
local function settle(node)
  if node[KEPT] then
    node[KEPT] = false
    node[RUNNING] = false
    return
  end
  local seen, subs = node[NS] or EMPTY, node[SUBS]
  if seen == PREFIX then -- what it read is the start of the last run's list
    local deps, n = node[DEPS], node[NN]
    if n < #deps then
      if subs then
        for i = n + 1, #deps do
          local src = deps[i]
          unlink(subs[src])
          subs[src] = nil
        end
      end
      node[DEPS], node[IDX] = table.move(deps, 1, n, 1, {}), false
    end
    node[VERS] = node[NV]
    node[ND], node[NV], node[NS] = false, false, false
    node[RUNNING] = false
    return
  end
  if subs then
    for src, e in pairs(subs) do
      if not seen[src] then
        subs[src] = nil
        unlink(e)
      end
    end
  end
  node[DEPS], node[VERS], node[IDX] = node[ND] or EMPTY, node[NV] or EMPTY, false
  node[ND], node[NV], node[NS] = false, false, false
  node[RUNNING] = false
end

-- (Atomic.) Runs fn as node in coroutine co, recording what it reads; the
-- observer is set and put back (to prev) with no other task in between.
-- node[RUNNING] is co until the run is settled.
local function tracked(node, fn, co, prev, prev_co, self)
  node[RUNNING] = co
  node[ND], node[NV], node[NS], node[NN], node[KEPT] = false, false, false, 0, false
  observer, observer_co = node, co
  local v
  if self then v = fn(self) else v = fn() end
  observer, observer_co = prev, prev_co
  settle(node)
  return v
end

-- (Atomic.) The run of node by co raised: settled as any run, unless another
-- one started since.
local function settle_failed(node, co)
  if node[RUNNING] == co then settle(node) end
end

-- The observer to put back after a run in co: the one there now, if it is
-- co's or a coroutine's co runs inside (else it is a stopped task's, or one
-- of a task about to put back its own).
local function observer_before(co)
  local prev, prev_co = observer, observer_co
  if prev and prev_co ~= co and co_status(prev_co) ~= "normal" then return false, false end
  return prev, prev_co
end

-- Runs fn as node in co (the running coroutine) → pcall's first two
-- results. A run that raises is settled too (a second atomic call: errors
-- are rare, and a pcall inside the first would cost every run).
local function run_tracked(node, fn, co)
  local prev, prev_co = observer, observer_co
  if prev and prev_co ~= co then prev, prev_co = observer_before(co) end
  local ok, v = atomic_pcall(tracked, node, fn, co, prev, prev_co)
  if not ok then
    if observer == node then observer, observer_co = prev, prev_co end
    atomic_pcall(settle_failed, node, co)
  end
  return ok, v
end

-- atomic_pcall(fn, ...), untracked. Inside a tracked run (atomic itself) the
-- observer is put back before any other task runs.
local function untracked_pcall(fn, ...)
  if not (observer and current_observer()) then return atomic_pcall(fn, ...) end
  local prev, prev_co = observer, observer_co
  observer, observer_co = false, false
  local r = pack(atomic_pcall(fn, ...))
  observer, observer_co = prev, prev_co
  return unpack(r, 1, r.n)
end

---- notification ----

-- (Atomic, from change.) Each mark is set once what it stands for is done:
-- a notify its task was stopped in is done again by the next.
-- An effect keeps the sources that notified it (from) as hints, up to MAX_HINTS: its next
-- check looks at those instead of everything it read (a list of a hundred rows' computeds, one
-- of which changed). Past MAX_HINTS it checks everything (HINTS false).
local function notify(node, from)
  if node[KIND] == COMPUTED then
    if not node[NOTIFIED] then
      node[OUTDATED] = true
      local e = node[FIRST]
      while e do
        notify(e.t, node)
        e = e.n
      end
      node[NOTIFIED] = true
    end
  else
    local hints = node[HINTS]
    if hints then
      local n = #hints + 1
      if n > MAX_HINTS then node[HINTS] = false else hints[n] = from end
    end
    if not node[QUEUED] then
      local i = pushed + 1
      queue[i - base] = node
      pushed = i
      node[QUEUED] = true
    end
  end
end

-- A write's change and what it marks, in one atomic call: no other task sees
-- the one without the other, or adds to the queue in between.
local function change(s, v)
  s[V] = v
  s[VER] = s[VER] + 1
  global_version = global_version + 1
  local e = s[FIRST]
  while e do
    notify(e.t, s)
    e = e.n
  end
end

local refresh

-- True when something node read has a new version (computeds are brought up
-- to date first, in the order node read them).
-- Whether src is past the version ver a run read (a computed brought up to date first).
local function moved(src, ver)
  if src[VER] ~= ver then return true end
  if src[KIND] == COMPUTED then
    refresh(src)
    return src[VER] ~= ver
  end
  return false
end

local function stale(node)
  local deps, vers = node[DEPS], node[VERS]
  for i = 1, #deps do
    if moved(deps[i], vers[i]) then return true end
  end
  return false
end

-- stale(e) for an effect whose notifiers are known (hints): only those can have changed.
local function stale_hinted(e, hints)
  local idx, vers = index_of(e), e[VERS]
  for k = 1, #hints do
    local i = idx[hints[k]]
    if i and moved(hints[k], vers[i]) then return true end
  end
  return false
end

local function stale_effect(e)
  local hints = e[HINTS]
  if hints and e[DEPS] ~= EMPTY then return stale_hinted(e, hints) end
  return stale(e)
end

local function keep(c, ok, v)
  if v == nil then v = NIL end
  if ok then
    if c[ERR] or c[VER] == 0 or not same(c[V], v) then
      c[V], c[ERR] = v, false
      c[VER] = c[VER] + 1
    end
  else
    c[V], c[ERR] = v, true
    c[VER] = c[VER] + 1
  end
end

-- (Atomic.) Runs c's function and keeps its value: no other task sees c
-- between the two.
local function recompute(c, co, prev, prev_co)
  keep(c, true, tracked(c, c[FN], co, prev, prev_co, c[SELF] and c or nil))
end

-- (Atomic.) c's function raised err: cached, unless another run of c
-- started since.
local function recompute_failed(c, co, err)
  if c[RUNNING] ~= co then return end
  settle(c)
  keep(c, false, err)
end

function refresh(c)
  c[NOTIFIED] = false
  local co = c[RUNNING]
  if co then
    if co == running() or co_status(co) == "normal" then
      error("clank.signal: cycle detected (a computed reads itself)", 0)
    end
    -- left by a run whose task was stopped: that run counts for nothing
    c[OUTDATED], c[GV] = false, global_version
  else
    if c[SUBS] and not c[OUTDATED] then return end
    c[OUTDATED] = false
    if c[GV] == global_version then return end
    c[GV] = global_version
    if c[VER] > 0 and not c[FORCE] and not stale(c) then return end
  end
  c[FORCE] = false
  co = running()
  local prev, prev_co = observer, observer_co
  if prev and prev_co ~= co then prev, prev_co = observer_before(co) end
  local ok, err = atomic_pcall(recompute, c, co, prev, prev_co)
  if not ok then
    if observer == c then observer, observer_co = prev, prev_co end
    local done, err2 = atomic_pcall(recompute_failed, c, co, err)
    if not done then error(err2, 0) end
  end
end

---- effects ----

local function run_cleanup(fn)
  local ok, err = untracked_pcall(fn)
  if not ok then error(err, 0) end
end

local function run_effect(e, co)
  -- what notified it before this run: changed() reads them; what notifies it from now on is
  -- for the next one
  e[RUN_HINTS] = e[HINTS]
  e[HINTS] = {}
  local cleanup = e[CLEANUP]
  if cleanup then
    e[CLEANUP] = false
    run_cleanup(cleanup)
  end
  local ok, r = run_tracked(e, e[FN], co)
  e[RUN_HINTS] = false
  if not ok then error(r, 0) end
  if type(r) == "function" then
    if e[DISPOSED] then run_cleanup(r) else e[CLEANUP] = r end
  end
end

local function dispose(e)
  if e[DISPOSED] then return end
  e[DISPOSED] = true
  local subs = e[SUBS]
  e[SUBS] = false
  for _, edge in pairs(subs) do unlink(edge) end
  local cleanup = e[CLEANUP]
  if cleanup then
    e[CLEANUP] = false
    run_cleanup(cleanup)
  end
end

-- Takes the next queued effect out and brings it up to date. Atomic: tasks
-- running the queue at once (one preempted between two effects) take
-- different effects, and one stopped in an effect leaves the rest queued.
-- co: the running coroutine.
local function run_next(co)
  local i = popped + 1
  if i > pushed then return end
  local k = i - base
  local e = queue[k]
  if e then e[QUEUED] = false end
  popped = i
  queue[k] = nil
  if i == pushed then base = i end -- empty: the next one goes to queue[1]
  if not e or e[DISPOSED] then return end
  if stale_effect(e) then
    run_effect(e, co)
    return
  end
  local hints = e[HINTS] -- checked: what notified it changed nothing
  if hints then
    for h = #hints, 1, -1 do hints[h] = nil end
  else
    e[HINTS] = {} -- checked in full: up to date, so what notifies it from now on is all
  end
  if e[RUNNING] and e[DEPS] == EMPTY then
    -- its first run was stopped: effect() never returned its disposer, so nobody can
    dispose(e)
  end
end

-- (Atomic.) Empties the queue without running it.
local function drop_queue()
  for i = popped + 1, pushed do
    local e = queue[i - base]
    if e then e[QUEUED] = false end
    queue[i - base] = nil
  end
  popped = pushed
  base = pushed
end

-- The outermost batch of co ended (depths[co] is 1): runs the queued effects
-- (and those their writes queue), then raises the first error one of them
-- raised. Unless a coroutine co runs inside (one resumed it) has a batch
-- open: that one's end runs them, as if co's writes were its own.
-- (Atomic: a task preempted in this walk while another opens a batch would resume it on a key
-- next() no longer knows.) Whether a coroutine co runs inside has a batch open; the entries of
-- dead coroutines go.
local function nested_batch(co)
  for other in next, depths do
    if other ~= co then
      local st = co_status(other)
      if st == "normal" then return true end
      if st == "dead" then depths[other] = nil end
    end
  end
  return false
end

local function flush(co)
  local walked, nested = atomic_pcall(nested_batch, co)
  if not walked then error(nested, 0) end
  if nested then
    depths[co] = nil
    return
  end
  local failed, err = false, nil
  local passes = 0
  while popped < pushed do
    passes = passes + 1
    if passes > MAX_PASSES then
      atomic_pcall(drop_queue)
      if not failed then
        failed, err = true, "clank.signal: cycle detected (effects keep changing what they read)"
      end
      break
    end
    local last = pushed -- a pass: what was queued before it
    while popped < last do
      local ok, x = atomic_pcall(run_next, co)
      if not ok and not failed then failed, err = true, x end
    end
  end
  depths[co] = nil
  if failed then error(err, 0) end
end

local function open_batch()
  local co = running()
  depths[co] = (depths[co] or 0) + 1
  return co
end

local function end_batch(co)
  local depth = depths[co] or 1
  if depth > 1 then
    depths[co] = depth - 1
  else
    flush(co)
  end
end

---- signals ----

local function write(s, v)
  if v == nil then v = NIL end
  if same(s[V], v) then return end
  if not s[FIRST] then -- nothing depends on it
    s[V] = v
    s[VER] = s[VER] + 1
    global_version = global_version + 1
    return
  end
  local ok, err = atomic_pcall(change, s, v)
  if not ok then error(err, 0) end
  local co = running()
  if depths[co] then return end -- in a batch or an effect's run: its end runs them
  depths[co] = 1
  flush(co)
end

local signal_methods = {
  -- s:peek(): the value, without tracking the read
  peek = function(s) return unwrap(s[V]) end,
}

SIGNAL_MT = {
  __name = "clank.Signal",
  __index = function(s, k)
    if k == "value" then
      if observer then track(s) end
      return unwrap(s[V])
    end
    return signal_methods[k]
  end,
  __newindex = function(s, k, v)
    if k ~= "value" then
      error("clank.signal: cannot set '" .. tostring(k) .. "' on a signal (set .value)", 2)
    end
    if observer then
      local obs = current_observer()
      if obs and obs[KIND] == COMPUTED then error("clank.signal: a computed cannot write signals", 2) end
    end
    write(s, v)
  end,
}

local computed_methods = {
  peek = function(c)
    local ok, err = untracked_pcall(refresh, c)
    if not ok then error(err, 0) end
    if c[ERR] then error(unwrap(c[V]), 0) end
    return unwrap(c[V])
  end,
}

-- c.value: a computed with subscribers that nothing notified since it was brought up to date
-- is up to date (refresh would return at once: the check is inlined, for the component calls
-- of a list's render, a hundred per render).
local function computed_value(c)
  if c[OUTDATED] or not c[SUBS] or c[RUNNING] then refresh(c) end
  if observer then track(c) end
  if c[ERR] then error(unwrap(c[V]), 0) end
  return unwrap(c[V])
end

-- computed_value for a read made inside the observer's own run (a render: runs are atomic, so
-- the observer is this coroutine's or that of one that resumed it, as track would find). The
-- read a prefix run expects next costs no call.
local function value_in_run(c)
  if c[OUTDATED] or not c[SUBS] or c[RUNNING] then refresh(c) end
  local obs = observer
  if obs then
    local n = obs[NN] + 1
    if obs[NS] == PREFIX and obs[ND][n] == c then
      obs[NN] = n
      obs[NV][n] = c[VER]
    else
      track(c)
    end
  end
  local v = c[V]
  if c[ERR] then error(unwrap(v), 0) end
  if v == NIL then return nil end
  return v
end

COMPUTED_MT = {
  __name = "clank.Computed",
  __index = function(c, k)
    if k == "value" then return computed_value(c) end
    return computed_methods[k]
  end,
  __newindex = function(_, k)
    if k == "value" then error("clank.signal: a computed value is read-only", 2) end
    error("clank.signal: cannot set '" .. tostring(k) .. "' on a computed", 2)
  end,
}

---- the module ----

local M = {}

-- signal(v): a writable value; `s.value` reads (tracked) and writes.
function M.signal(v)
  if v == nil then v = NIL end
  return setmetatable({ SIGNAL, v, 0, false, false }, SIGNAL_MT) -- KIND, V, VER, FIRST, LAST
end

-- A computed's slots as it starts (FN and SELF are set by computed()).
local COMPUTED_START = { COMPUTED, NIL, 0, false, false, false, true, false, false,
  false, false, false, false, false, false, false, false, false, false, false, false, false, -- the host's
  -1, EMPTY, EMPTY, false, false, false, false, 0, false, false, false, false, false }

-- computed(fn): a read-only value fn derives from what it reads; lazy, cached.
-- computed(fn, host): host (a table without a metatable) becomes the computed, and fn is
-- called with it: a thing that is one computed each (a memo entry) holds its own fields and
-- needs no closure. The host's own fields are array slots M.hostFirst to M.hostLast, those
-- after M.computedSlots, and its string keys; the other slots, 1 to M.computedSlots, are the
-- computed's (a host made with all of them present, false where it has nothing, takes them
-- with no rehash). Its fields must never be set to nil (a computed takes no new fields).
function M.computed(fn, host)
  if type(fn) ~= "function" then error("clank.signal.computed: expected a function", 2) end
  local c = host
  if c == nil then
    c = {}
  elseif type(c) ~= "table" or getmetatable(c) ~= nil then
    error("clank.signal.computed: the host must be a table without a metatable", 2)
  end
  if host == nil then
    table.move(COMPUTED_START, 1, SELF, 1, c)
  else
    table.move(COMPUTED_START, 1, HOST_FIRST - 1, 1, c)
    table.move(COMPUTED_START, HOST_LAST + 1, SELF, HOST_LAST + 1, c)
  end
  c[FN], c[SELF] = fn, host ~= nil
  return setmetatable(c, COMPUTED_MT)
end

-- effect(fn): runs fn now and after each change of what it read; returns a
-- disposer. Inside a batch or another effect it still runs at once.
function M.effect(fn)
  if type(fn) ~= "function" then error("clank.signal.effect: expected a function", 2) end
  local e = { EFFECT, false, false, false, false, false, false, {}, false,
    false, false, false, false, false, false, false, false, false, false, false, false, false, -- no host
    false, EMPTY, EMPTY, false, false, false, false, 0, false, false, false, fn, false, false,
    false, false, {}, false }
  local co = open_batch()
  local ok, err = pcall(run_effect, e, co)
  if not ok then dispose(e) end
  local flushed, ferr = pcall(end_batch, co)
  if not ok then error(err, 0) end
  if not flushed then error(ferr, 0) end
  -- atomic: unlinking its edges halfway while another task links to the same
  -- signal (one preempted in between) would lose the other's edge
  local function disposer()
    local done, derr = atomic_pcall(dispose, e)
    if not done then error(derr, 0) end
  end
  effects[disposer] = e
  return disposer
end

-- sources(disposer): the signals the effect's last run read, itself or through the computeds
-- it read (each once): what can make it run again.
function M.sources(disposer)
  local e = effects[disposer]
  local out, seen = {}, {}
  local function walk(node)
    local deps = node[DEPS]
    for i = 1, #deps do
      local src = deps[i]
      if not seen[src] then
        seen[src] = true
        if src[KIND] == COMPUTED then walk(src) else out[#out + 1] = src end
      end
    end
  end
  if e then walk(e) end
  return out
end

-- batch(fn, ...): calls fn(...); effects run once, when the outermost batch
-- ends. Returns fn's results; raises fn's error, else an effect's.
function M.batch(fn, ...)
  local co = open_batch()
  local r = pack(pcall(fn, ...))
  local flushed, ferr = pcall(end_batch, co)
  if not r[1] then error(r[2], 0) end
  if not flushed then error(ferr, 0) end
  return unpack(r, 2, r.n)
end

-- untracked(fn, ...): calls fn(...) without tracking its reads.
function M.untracked(fn, ...)
  if not (observer and current_observer()) then return fn(...) end
  local r = pack(untracked_pcall(fn, ...))
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2, r.n)
end

-- changed(): inside the run of an effect or a computed, the sources its last run read whose
-- value changed since (computeds brought up to date first), in the order it read them; nil
-- outside a run or on its first. A run that finds only
-- changes it can apply without running its function again tracks what it read last time with
-- retrack(), and reads the changed sources itself.
function M.changed()
  local obs = observer and current_observer()
  if not obs or obs[DEPS] == EMPTY then return nil end
  local deps, vers, out = obs[DEPS], obs[VERS], {}
  local hints = obs[RUN_HINTS]
  if hints then -- an effect that knows what notified it: only those can have changed
    local idx, at = index_of(obs), {}
    for k = 1, #hints do
      local src = hints[k]
      local i = idx[src]
      if i then
        if src[KIND] == COMPUTED then refresh(src) end
        if src[VER] ~= vers[i] then at[#at + 1] = i end
      end
    end
    table.sort(at)
    for k = 1, #at do
      if at[k] ~= at[k - 1] then out[#out + 1] = deps[at[k]] end
    end
    return out
  end
  for i = 1, #deps do
    local src = deps[i]
    if src[KIND] == COMPUTED then refresh(src) end -- (the run's start checked them up to the first change)
    if src[VER] ~= vers[i] then out[#out + 1] = src end
  end
  return out
end

-- retrack(): inside a run, tracks again everything its last run read. When what the run read
-- so far is where the last run started, the run is kept: its list stays as it was (the
-- versions as they are now), with no tracking per source. A read after it that the last run
-- did not make tracks as usual.
function M.retrack()
  local obs = observer and current_observer()
  if not obs then return end
  local deps, nd, nn = obs[DEPS], obs[ND], obs[NN]
  local prefix = deps ~= EMPTY and obs[KIND] == EFFECT and not obs[KEPT] and nn <= #deps
  if prefix and nd then
    for i = 1, nn do
      if nd[i] ~= deps[i] then
        prefix = false
        break
      end
    end
  end
  if not prefix then
    for i = 1, #deps do track(deps[i]) end
    return
  end
  local vers, nv = obs[VERS], obs[NV]
  for i = 1, nn do vers[i] = nv[i] end
  local hints = obs[RUN_HINTS]
  if hints then
    -- only what notified it can be at a new version (every source of an effect notifies it):
    -- a hundred rows' computeds are not visited for the one that changed
    local idx = index_of(obs)
    for k = 1, #hints do
      local src = hints[k]
      local i = idx[src]
      if i and i > nn then vers[i] = src[VER] end
    end
  else
    for i = nn + 1, #deps do vers[i] = deps[i][VER] end
  end
  obs[ND], obs[NV], obs[NS], obs[NN], obs[KEPT] = false, false, false, 0, true
end

-- invalidate(c): c's function runs again when c is next read, whether or not what it read
-- changed (memo: a component call whose props changed). Its subscribers are not told.
function M.invalidate(c)
  if getmetatable(c) ~= COMPUTED_MT then error("clank.signal.invalidate: expected a computed", 2) end
  c[FORCE], c[OUTDATED], c[GV] = true, true, -1
end

-- valueOf(c): c.value of a computed c, without the metamethod's dispatch (memo reads one per
-- component call).
M.valueOf = computed_value
M.valueInRun = value_in_run

M.hostFirst, M.hostLast = HOST_FIRST, HOST_LAST -- a host's array slots (computed(fn, host))
M.computedSlots = SELF -- a computed's last slot: those after it are a host's too

-- isSignal(x): true for signals and computeds.
function M.isSignal(x)
  local mt = getmetatable(x)
  return rawequal(mt, SIGNAL_MT) or rawequal(mt, COMPUTED_MT)
end

return M
