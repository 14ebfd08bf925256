-- clank.live: live server-side views (SPEC §11), transport-agnostic. clank-run owns the sockets
-- (HTTP, WebSocket framing) and calls one live object per app generation:
--
--   live = require("clank.live").new { app, bridge, secret, limits = { idleMs, maxIdle }, clock?,
--                                      worker = { index, count }?, dev? }
--   live:page(request)                → response         (in a task: load may wait)
--   live:http(request)                → response         (in a task; /__clank/views|sessions)
--   live:connect(id, request, socket)                    (plain call: the work is spawned)
--   live:receive(id, text, socket?)   → pause            (in a task: charged for the input;
--                                                         true: stop reading the socket until
--                                                         socket:resume())
--   live:disconnect(id, socket?)                         (plain call)
--   live:adopt(id, request, socket)                      (plain call: a hot reload)
--   live:appFailed(text)                                 (plain call: a hot reload failed)
--   live:tick(nowMs)                                     (plain call, about once a second)
--   live:sessions()                   → count
--
-- socket: socket:send(text) → true | false, socket:close(code, reason), socket:resume() (reads
-- again after receive asked for a pause; optional). A session ID is a
-- signed token (clank.live.token); a view session (signals, runners, element tree) is mounted
-- from it on its first live connection or surface call and ends when idle too long.
local core = require "clank.core"
local json = require "clank.json"
local view_mod = require "clank.ui.view"
local render = require "clank.ui.render"
local element = require "clank.ui.element"
local runner = require "clank.runner"
local token = require "clank.live.token"
local page = require "clank.live.page"
local props_mod = require "clank.live.props"
local pubsub = require "clank.pubsub"
local diff = require "clank.live.diff"
local memo = require "clank.ui.memo"
local render_core = require "clank.render_core"
local new_html_buffer, patch_html, patch_in_place =
  render_core.htmlBuffer, render_core.htmlPatch, render_core.htmlPatchInPlace

local type, pairs, ipairs, pcall, xpcall, error, tonumber, setmetatable, getmetatable, rawset, rawget =
  type, pairs, ipairs, pcall, xpcall, error, tonumber, setmetatable, getmetatable, rawset, rawget
local math_type = math.type
local remove, running = table.remove, coroutine.running
local now_ms = core.nowMs
local find, sub = string.find, string.sub

local PUSH_MS = 50 -- pushes while a handler waits, and later changes, at most this often
-- How long an event's handler waits for the person to answer a confirmation (then: declined).
local ASK_MS = 300000
-- A session's input is bounded: past MAX_QUEUE events or MAX_QUEUE_BYTES of them waiting for
-- their handler, its socket is no longer read until the queue is down to half of both
-- (backpressure: the client's sends wait in TCP, nothing is dropped). An event's value and
-- values together hold at most MAX_VALUE_BYTES (an element's own maxlength, in characters,
-- counts too): a larger one is dropped before any handler runs, answered with an error and the
-- current html.
local MAX_QUEUE, MAX_QUEUE_BYTES, MAX_VALUE_BYTES = 64, 1024 * 1024, 64 * 1024
local HANDLERS = { click = "onClick", input = "onInput", change = "onChange", submit = "onSubmit" }

local M = {}
M.limits = { queue = MAX_QUEUE, queueBytes = MAX_QUEUE_BYTES, valueBytes = MAX_VALUE_BYTES }

local keep_tree

local log = core.log
M.log = log

local errors = require "clank.live.errors"
local trace, describe_error = errors.trace, errors.describe

-- Waits (in a task) until pred() holds or ms pass; true when it holds.
local function wait_for(pred, ms)
  local waited, step = 0, 1
  while not pred() do
    if ms and waited >= ms then return false end
    core.sleep(step)
    waited = waited + step
    step = step < 16 and step * 2 or 16
  end
  return true
end
M.waitFor = wait_for

-- A flag a task holds: the task's coroutine, which holds it no longer once it is dead (a task
-- stopped over its budget runs no more Lua, so it never clears what it set).
local function held(flag)
  return flag and (type(flag) ~= "thread" or coroutine.status(flag) ~= "dead")
end

local Live = {}
Live.__index = Live

function M.new(opts)
  if type(opts) ~= "table" or type(opts.app) ~= "table" then
    error("clank.live.new: expected { app = ..., secret = ... }", 2)
  end
  if type(opts.secret) ~= "string" or opts.secret == "" then
    error("clank.live.new: secret must be a non-empty string", 2)
  end
  local app = opts.app
  local limits = opts.limits or {}
  local self = setmetatable({
    app = app, bridge = opts.bridge, secret = opts.secret,
    idleMs = limits.idleMs or 600000, maxIdle = limits.maxIdle or 1000,
    -- a session without events or pushes for this long lets its tree go (0: never)
    hibernateMs = limits.hibernateMs or 15000,
    clock = opts.clock or os.time,
    worker = opts.worker, -- --workers N: this worker's index and N (SPEC §13)
    dev = opts.dev == true, -- development: errors go to the pages in full (dev-error frames)
    actionTimeout = app.actionTimeout or require("clank.bridge").DEFAULT_ACTION_TIMEOUT,
    views = {}, actions = {}, sessionsById = {}, conns = {},
    count = 0, idleCount = 0, -- nowMs: the loop's clock at the last tick (nil before the first)
    reloadTask = false, toReload = false, -- the sessions a turn's publishes reach (published)
  }, Live)
  for i, v in ipairs(app.views or {}) do
    if i == 1 then self.first = v end
    self.views[v.viewManifest.name] = v
  end
  for _, a in ipairs(app.actions or {}) do self.actions[a.name] = a end
  if app.auth then
    require("clank.auth.bind").watchEnded(self, function(hashes) self:signedOut(hashes) end)
  end
  self.pageOptions = (app.page or {})
  self.csp = page.csp(self.pageOptions.csp)
  self.renderOptions = { live = true, actions = self.actions }
  -- a request ctx's signal, made when read: aborted at the action timeout
  self.contextMeta = { __index = function(t, k)
    if k ~= "signal" then return nil end
    local s = core.timeout(self.actionTimeout)
    rawset(t, "signal", s)
    return s
  end }
  return self
end

-- ---- requests ----

-- A live event's request id: 16 hex digits, a random start per run counted up, as the HTTP
-- layer makes them (random bytes per event cost a system call and a string per byte).
local last_request_id = string.unpack("<i8", core.randomBytes(8))
local function request_id()
  last_request_id = last_request_id + 1
  return ("%016x"):format(last_request_id)
end

-- The ctx of one request (a live event, a surface call, a load): the app's context plus
-- request, requestId (id; else the running task's, an HTTP request's; else a new one),
-- confirmed and a signal aborted at the action timeout (made when read).
function Live:context(request, confirmed, id)
  local ctx = {}
  if self.app.context then
    local c = self.app.context(request)
    if type(c) == "table" then for k, v in pairs(c) do ctx[k] = v end end
  end
  ctx.request, ctx.confirmed = request, confirmed == true
  ctx.requestId = id or core.requestId() or request_id()
  return setmetatable(ctx, self.contextMeta)
end

-- Runs fn(...) as the request ctx: runners started there get ctx and its confirmation, and
-- the lines logged meanwhile its request id. ask(text) → true | false, when given, asks the
-- person to confirm an action the request was not confirmed for (runner.c: after its input
-- was found valid).
function Live.asRequest(_, ctx, fn, ...)
  return Live.asRequestAsking(_, ctx, nil, fn, ...)
end

function Live.asRequestAsking(_, ctx, ask, fn, ...)
  local co = running()
  runner.bindRequest(co, ctx, ask)
  local previous = core.requestId(ctx.requestId)
  local r = table.pack(xpcall(fn, trace, ...))
  core.requestId(previous)
  runner.bindRequest(co, nil)
  return table.unpack(r, 1, r.n)
end

-- The signed-in user of a request (its context's user), or nil.
function Live:signedIn(request)
  local c = self.app.context and self.app.context(request)
  return type(c) == "table" and c.user or nil
end

-- Sessions that ended (signed out, a password changed or reset): their live pages close with
-- 4401, which the page's script turns into a visit to the sign-in page.
function Live:signedOut(hashes)
  local ended = {}
  for _, h in ipairs(hashes) do ended[h] = true end
  local closing = {}
  for _, conn in pairs(self.conns) do
    if conn.authSession and ended[conn.authSession] then closing[#closing + 1] = conn end
  end
  for _, conn in ipairs(closing) do
    conn.open = false
    self.conns[conn.socket] = nil
    pcall(conn.socket.close, conn.socket, 4401, "signed out")
    local s = conn.session
    if s and s.conn == conn then self:endSession(s) end
  end
end

function Live:principal(request)
  if self.app.principal then return self.app.principal(request) end
  return nil
end

-- ---- sessions ----

local function version(s) return s.mounted and s.mounted.version or 0 end

local WEAK_KEYS = { __mode = "k" }

-- The buffer s's next render goes into: one of its two, not the one its connection holds as
-- the base of its diffs.
local function html_buffer(s)
  local a, base = s.htmlA, s.conn and s.conn.sent
  if not a then
    a = new_html_buffer()
    s.htmlA = a
  end
  if not rawequal(a, base) then return a end
  local b = s.htmlB
  if not b then
    b = new_html_buffer()
    s.htmlB = b
  end
  return b
end

-- Lets go of s's html buffers, and of its connection's base (the next update is whole).
local function drop_html(s)
  if s.htmlA then s.htmlA:free() end
  if s.htmlB then s.htmlB:free() end
  s.htmlA, s.htmlB, s.html, s.htmlV, s.patchBase = nil, nil, nil, nil, nil
  if s.conn then s.conn.sent, s.conn.sentV = nil, nil end
end

-- The html of version v of s when the update from the one its connection holds (v - 1) only
-- put components' new trees where their old ones were (memo.swapChanged): the html held with
-- each old tree's HTML (kept in fragments, found once) replaced by the new tree's, written
-- alone where the old one was. nil when it is not that update, or that cannot be done: then
-- the page renders whole. (A one-row change of a long list writes one row, not the list.)
-- One tree changed: the connection's own html is patched where it is, and the splices of the
-- diff from it (made from that tree's old and new HTML alone; false when none can be) come
-- last, since no copy of the old page is left to compare. Else the patch goes into the
-- session's other buffer, and the bytes it left the same at the start and the end come back.
local function patched_html(self, s, v)
  local conn, swap, fragments = s.conn, s.mounted.swap, s.fragments
  local base = conn and conn.sent
  if not (base and swap and fragments and swap.version == v and conn.sentV == v - 1) then
    return nil
  end
  local olds, news, options = {}, {}, self.renderOptions
  for i = 1, #swap.olds do
    local old, new = swap.olds[i], swap.news[i]
    local kept = fragments[old]
    if type(kept) ~= "string" or type(new) ~= "table" or rawget(old, "tag") ~= rawget(new, "tag") then
      return nil
    end
    local nl = find(kept, "\n", 1, true)
    local html = render.render(new, { live = true, actions = options.actions,
      fragments = fragments, outputs = memo.outputs, at = sub(kept, 1, nl - 1) })
    if not html then return nil end
    olds[i], news[i] = sub(kept, nl + 1), html
  end
  if #olds == 0 then return nil end
  if #olds == 1 then
    local at = patch_in_place(base, olds[1], news[1])
    if not at then return nil end -- base as it was
    local splices = diff.splices(olds[1], news[1])
    if splices then
      for _, sp in ipairs(splices) do sp[1] = sp[1] + at end
    end
    return base, base, nil, nil, splices or false
  end
  local into = html_buffer(s)
  local patched, same_start, same_end = patch_html(base, into, olds, news)
  if not patched then return nil end
  return into, base, same_start, same_end
end

-- The current html of s (an Html buffer of s's: tostring gives the text) and its version.
function Live:html(s)
  self:awake(s)
  local v = version(s)
  if s.htmlV ~= v then
    -- the HTML of components' trees that did not change (clank.ui.memo) is written again from
    -- what the last render kept, while no event or surface call changed their props
    local fragments = s.fragments
    if not fragments then
      fragments = setmetatable({}, WEAK_KEYS)
      s.fragments = fragments
    end
    local options = self.renderOptions
    -- patched from the html the connection holds (patchBase): the bytes from sameStart to
    -- sameEnd of its end are those of the base, which the diff need not compare
    local html, base, same_start, same_end, splices = patched_html(self, s, v)
    s.patchBase, s.sameStart, s.sameEnd, s.patchSplices = base, same_start, same_end, splices
    s.html = html or render.render(s.mounted:tree(), { live = true,
      actions = options.actions, fragments = fragments, outputs = memo.outputs,
      into = html_buffer(s) })
    s.htmlV = v
  end
  return s.html, v
end

-- A session that hibernated renders again, as the version it was (the tree it let go of):
-- what an event, a surface call or a render needs first.
function Live.awake(_, s)
  local m = s.mounted
  if m and m:asleep() then
    core.count("wake")
    m:wake(false)
    keep_tree(s, m:tree(), version(s))
  end
end

-- Quiet sessions let their trees go (view.lua's hibernate), and the html their diffs would start
-- from: the signals their render read are all they watch, a change of one renders them again,
-- and their next update is a whole html. A session is quiet when nothing of it ran or was sent
-- for hibernateMs.
function Live:hibernate(now)
  local after = self.hibernateMs
  if after <= 0 then return end
  for _, s in pairs(self.sessionsById) do
    local m = s.mounted
    if s.ready and not s.ended and m and not m:asleep() and not s.busy and #s.queue == 0
      and not held(s.pushScheduled) and not held(s.reloadQueued) and version(s) == s.sentV
      and now - (s.activeAt or now) >= after then
      if m:hibernate(function()
        s.activeAt = self.nowMs
        core.count("wake")
      end) then
        s.trees, s.treeBorn, s.fragments = nil, nil, nil
        drop_html(s) -- and the base of its diffs: its next update is the whole html
        core.count("hibernate")
      end
    elseif not s.activeAt then
      s.activeAt = now
    end
  end
end

-- An event or a surface call wrote into the props of an element of s's tree: the HTML kept
-- of the trees holding it is no longer theirs.
function Live.touched(_, s) s.fragments = nil end

local function send(conn, frame)
  if not conn or not conn.open then return false end
  local ok, sent = pcall(conn.socket.send, conn.socket, json.encode(frame))
  if ok and sent ~= false then return true end
  conn.open = false -- gone or overloaded: the client reconnects and gets a fresh page state
  pcall(conn.socket.close, conn.socket, 1013, "overloaded")
  return false
end

-- In development, an error as the page shows it over the view (SPEC §11): kind "app" (a hot
-- reload failed to load), "view" (a view's load or render) or "handler"; title says what
-- failed, err is the error (with its traceback when a string). Nothing in production: the
-- log has it, the page a generic {"t":"error"}.
function Live:devError(conn, kind, title, err)
  if not self.dev then return end
  local frame = errors.report(err)
  frame.t, frame.kind, frame.title = "dev-error", kind, title
  send(conn, frame)
end

-- A hot reload failed and this generation stays: every open page shows why until one loads
-- (its sessions then get `reload` and {"t":"dev-clear"}), and so do pages opened meanwhile.
function Live:appFailed(text)
  if not self.dev then return end
  self.appFailure = text
  for _, conn in pairs(self.conns) do
    if conn.open then self:devError(conn, "app", "The app failed to load: the running version stays", text) end
  end
end

-- The diff frame of splices from what the connection last got (version baseV) to html, or nil
-- when it would not be much smaller than the html itself.
local function splices_frame(splices, baseV, html, seq, v)
  local bytes = 0
  for _, sp in ipairs(splices) do bytes = bytes + #sp[3] + 16 end
  if bytes * 2 > #html then return nil end
  return { t = "diff", seq = seq, base = baseV, v = v, splices = json.array(splices) }
end

-- A diff frame from what the connection last got (html of version base) to html, or nil when
-- it would not be much smaller than the html itself (or cannot be made). same_start and same_end
-- (optional): how many bytes the two have the same at their start and end, when known.
local function diff_frame(base, baseV, html, seq, v, same_start, same_end)
  local splices = diff.splices(base, html, same_start, same_end)
  if not splices then return nil end
  return splices_frame(splices, baseV, html, seq, v)
end
M.diffFrame = diff_frame

-- Sends html, of s's version v, as a diff from what the connection holds (unless full)
-- or whole, and keeps it as what the connection holds.
local function send_version(s, seq, full, html, v)
  local conn = s.conn
  local base = conn and conn.sent
  local written_from = base and s.patchBase == base and s.htmlV == v and rawequal(html, s.html)
  local frame
  if written_from and rawequal(html, base) then
    -- patched where it was (patched_html): the diff's splices were made then
    frame = not full and s.patchSplices and splices_frame(s.patchSplices, conn.sentV, html, seq, v)
  elseif not full and base then
    local same_start, same_end
    if written_from then same_start, same_end = s.sameStart, s.sameEnd end
    frame = diff_frame(base, conn.sentV, html, seq, v, same_start, same_end)
  end
  if send(conn, frame or { t = "html", seq = seq, v = v, html = tostring(html) }) then
    s.sentV = v
    -- what the browser holds now: the base of the next diff (one of the session's buffers)
    if conn.diffs then conn.sent, conn.sentV = html, v end
  end
end

-- Sends the current html as seq's answer (0: a push): to a connection that takes diffs
-- (?diffs=1) and got an html before, a diff from that one unless full is true.
-- (Atomic.) The html rendered and sent → true, or false and the render's error.
local function render_and_send(self, s, seq, full)
  local ok, html, v = xpcall(self.html, trace, self, s)
  if not ok then return false, html end
  send_version(s, seq, full, html, v)
  return true
end

function Live:sendHtml(s, seq, full)
  -- atomic, once a session that hibernated has its tree again: the html is rewritten in the
  -- session's buffer, and a push and an event's answer preempted between reading the base and
  -- sending would both send a diff from the same base
  local ok, err = xpcall(self.awake, trace, self, s)
  local called, rendered
  if ok then
    called, rendered, err = core.pcallAtomic(render_and_send, self, s, seq, full)
    if not called then error(rendered, 0) end
  end
  if not (ok and rendered) then
    log("error", "live view " .. s.name .. ": render failed: " .. describe_error(err))
    self:devError(s.conn, "view", "The view " .. s.name .. " failed to render", err)
    send(s.conn, { t = "error", message = "The view failed to render." })
    return
  end
  s.activeAt = self.nowMs
  s.html, s.htmlV = nil, nil -- sent: an idle session keeps its tree, not its HTML too
  if not (s.conn and s.conn.diffs) and s.htmlA then s.htmlA:free() end -- nothing diffs from it
end

local function pushable(s) return not s.ended and s.conn and s.ready and version(s) ~= s.sentV end

-- A push (seq 0), timed so that the next one waits PUSH_MS after it.
function Live:pushNow(s)
  self:sendHtml(s, 0)
  s.pushedAt = now_ms()
end

-- A change after the last html sent: pushed with seq 0 on the next loop iteration (a handler
-- that did not wait has sent its own html by then), or after delay ms, then at most every
-- PUSH_MS.
function Live:schedulePush(s, delay)
  if held(s.pushScheduled) or not s.conn then return end
  core.spawn(function()
    s.pushScheduled = coroutine.running()
    local ok, err = pcall(function()
      core.sleep(delay or 0)
      while pushable(s) do
        self:pushNow(s)
        core.sleep(PUSH_MS)
      end
    end)
    s.pushScheduled = false -- after an error too: a failed task's coroutine is reused
    if not ok then error(err, 0) end
  end)
end

-- A re-load's render (a publish): nothing else is sent for it, so it is pushed by the re-load
-- itself, at once, unless a push went out less than PUSH_MS ago or is on its way (a task then
-- pushes it in turn). A publish to a thousand sessions costs no push task per session.
function Live:pushReloaded(s)
  if held(s.pushScheduled) or not s.conn then return end
  local wait = (s.pushedAt or math.mininteger // 2) + PUSH_MS - now_ms()
  if wait > 0 then return self:schedulePush(s, wait) end
  if pushable(s) then self:pushNow(s) end
end

-- Idle sessions are kept in a list, oldest idle first (a session made idle again moves to the
-- end), so expiry and eviction look only at its head, however many sessions are connected.
local function unlink_idle(self, s)
  if s.idlePrev then s.idlePrev.idleNext = s.idleNext else self.idleHead = s.idleNext end
  if s.idleNext then s.idleNext.idlePrev = s.idlePrev else self.idleTail = s.idlePrev end
  s.idlePrev, s.idleNext = nil, nil
end

local function append_idle(self, s)
  s.idlePrev = self.idleTail
  if self.idleTail then self.idleTail.idleNext = s else self.idleHead = s end
  self.idleTail = s
end

function Live:setIdle(s)
  if s.ended then return end
  if s.idle then
    unlink_idle(self, s)
  else
    s.idle = true
    self.idleCount = self.idleCount + 1
  end
  append_idle(self, s)
  s.idleSince = self.nowMs
  self:enforceIdle(s)
end

-- A surface call on an idle session: idle from now.
function Live:setIdleIfIdle(s)
  if s.idle then self:setIdle(s) end
end

function Live:setActive(s)
  if s.idle then
    s.idle = false
    self.idleCount = self.idleCount - 1
    unlink_idle(self, s)
  end
end

-- At most maxIdle idle sessions: the oldest idle ones end first (not keep, just made idle).
function Live:enforceIdle(keep)
  while self.idleCount > self.maxIdle do
    local oldest = self.idleHead
    if oldest == keep then oldest = oldest.idleNext end
    if not oldest then return end
    self:endSession(oldest)
  end
end

function Live:endSession(s)
  if s.ended then return end
  s.ended = true
  if s.idle then
    self.idleCount = self.idleCount - 1
    unlink_idle(self, s)
  end
  s.idle = false
  if self.sessionsById[s.id] == s then
    self.sessionsById[s.id] = nil
    self.count = self.count - 1
  end
  self:unwatchTopics(s)
  if s.mounted then s.mounted:dispose() end
  drop_html(s)
  if s.conn and s.conn.open then
    s.conn.open = false
    pcall(s.conn.socket.close, s.conn.socket, 4404, "unknown session")
  end
  s.queue, s.queueBytes = {}, 0
end

-- Mounts a session for (view, props) under id (in a task: load may wait). The session is
-- registered at once (others wait for it to be ready), idle until a connection attaches.
-- The trees of the versions the browser may still show: an event names an element by its
-- position in the DOM it came from (its v), which can be a version or two behind while the
-- answers to earlier events are on their way (typing fast). Kept from the newest v the
-- browser sent on (it has that DOM, so none older can come): that one always, since a browser
-- typing faster than the answers arrive sends every event on it, and the newest MAX_TREES (a
-- browser may switch to any version it received: each event typed makes one, and a burst of
-- typing on a busy machine ran past eight). Past the newest two, a version replaced over
-- TREE_SECONDS ago goes too: an event on it would have had that long to arrive, and a session
-- whose browser only watches (pushes after publishes, no events) would otherwise keep
-- MAX_TREES whole trees.
local MAX_TREES, TREE_SECONDS = 32, 3

keep_tree = function(s, tree, v)
  s.trees = s.trees or {}
  s.treeBorn = s.treeBorn or {}
  local now = os.time()
  s.trees[v] = tree
  s.treeBorn[v] = now
  local acked = s.ackV or 0
  local oldest = math.max(acked, v - MAX_TREES + 1)
  for k in pairs(s.trees) do
    -- k + 1 replaced k: its age is how long ago k + 1 was born
    local replaced = s.treeBorn[k + 1]
    if k ~= acked and (k < oldest or (k < v - 1 and replaced and now - replaced >= TREE_SECONDS)) then
      s.trees[k] = nil
    end
  end
  for k in pairs(s.treeBorn) do
    if not s.trees[k] and k ~= v then s.treeBorn[k] = nil end
  end
end

-- The mount runs in a task of its own (a budget of its own, and an end that is seen however it
-- ended: a load stopped over its budget ends the session instead of leaving it never ready);
-- the caller waits for it → session | nil, "failed" | "stopped" | "unknown", and when
-- "failed" the error and the view's name.
function Live:mount(id, view, props, request)
  local s = { id = id, view = view, name = view.viewManifest.name, props = props, queue = {},
    queueBytes = 0, ready = false, idle = false }
  self.sessionsById[id] = s
  self.count = self.count + 1
  self:setIdle(s)
  local rid = core.requestId()
  core.spawnThen(function()
    core.requestId(rid) -- its log lines are the request's
    local ok, err = xpcall(function()
      local data
      local ctx = self:context(request)
      if view.load then data = view.load(props, ctx) end
      s.request = request -- a publish re-loads with it
      s.mounted = view_mod.mount(view, props, {
        data = data,
        onRender = function(tree, v)
          keep_tree(s, tree, v)
          -- an event's handler that has not waited yet sends the html itself when it ends
          -- (drain pushes it if the handler waits instead): no push task for that render
          if s.inEvent or s.reloading then s.pushDeferred = true else self:schedulePush(s) end
        end,
        onError = function(e)
          log("error", "live view " .. s.name .. ": render failed: " .. describe_error(e))
          self:devError(s.conn, "view", "The view " .. s.name .. " failed to render", e)
          send(s.conn, { t = "error", message = "The view failed to render." })
        end,
      })
    end, trace)
    if not ok then
      log("error", "live view " .. s.name .. ": mount failed: " .. describe_error(err))
      s.outcome, s.failure = "failed", err
      self:endSession(s)
      return
    end
    if s.ended then
      s.mounted:dispose()
      return
    end
    keep_tree(s, s.mounted:tree(), version(s))
    s.ready = true
    self:watchTopics(s)
    self:drain(s)
  end, function()
    if s.ready or s.ended then return end
    s.outcome = "stopped" -- over its CPU or memory budget
    self:endSession(s)
  end)
  wait_for(function() return s.ready or s.ended end)
  if s.ready then return s end
  return nil, s.outcome or "unknown", s.failure, s.name
end

-- ---- topics (issue 28) ----

-- The view's topics(props, ctx), watched: a publish to one queues a re-load of the session.
-- Computed at mount and after each re-load (the list may change), with the re-load's ctx when
-- it made one.
function Live:watchTopics(s, ctx)
  local topics_fn = s.view.topics
  if not topics_fn or s.ended then return end
  local ok, topics = xpcall(function() return topics_fn(s.props, ctx or self:context(s.request)) end, trace)
  if not ok or (topics ~= nil and type(topics) ~= "table") then
    log("error", "live view " .. s.name .. ": topics failed: "
      .. (ok and "expected a list of topics" or describe_error(topics)))
    return
  end
  local want = {}
  for _, topic in ipairs(topics or {}) do want[topic] = true end
  s.watched = s.watched or {}
  for topic, unwatch in pairs(s.watched) do
    if not want[topic] then
      unwatch()
      s.watched[topic] = nil
    end
  end
  for topic in pairs(want) do
    if s.ended or not s.watched then return end -- ended meanwhile (this task was preempted)
    if not s.watched[topic] then
      local watched, unwatch = pcall(pubsub.watch, topic, s, function() self:published(s) end)
      if watched and (s.ended or not s.watched) then
        unwatch()
      elseif watched then
        s.watched[topic] = unwatch
      else
        log("error", "live view " .. s.name .. ": " .. tostring(unwatch))
      end
    end
  end
end

function Live.unwatchTopics(_, s)
  for _, unwatch in pairs(s.watched or {}) do unwatch() end
  s.watched = nil
end

-- Queues the re-load of each session in the list (see published).
local function queue_reloads(self, sessions)
  for i = 1, #sessions do
    local s = sessions[i]
    if not s.ended then
      s.reloadQueued = true -- queued: the job clears it when it starts
      s.queue[#s.queue + 1] = { fn = function()
        s.reloadQueued = false
        s.stale = false
        self:reload(s, true)
      end }
      self:drain(s)
    end
  end
end

-- A topic of s got a publish: one re-load is queued on the next loop turn (the publishes of this
-- one, and those until the re-load starts, add none), and runs in the session's queue like an
-- event, so it never overlaps a handler. One task queues them for every session a turn's
-- publishes reach (a publish to a thousand sessions spawns one, not a thousand).
function Live:published(s)
  if s.ended or not s.ready or held(s.reloadQueued) then return end
  if not (s.conn and s.conn.open) then
    s.stale = true -- nobody watches it now: re-loaded when a connection or the surface asks
    return
  end
  if not held(self.reloadTask) then
    local sessions = {}
    self.toReload = sessions
    core.spawn(function()
      self.reloadTask = running()
      core.sleep(0)
      -- a publish from now on: another task
      if self.toReload == sessions then self.reloadTask, self.toReload = false, false end
      queue_reloads(self, sessions)
    end)
  end
  local sessions = self.toReload
  sessions[#sessions + 1] = s
  s.reloadQueued = self.reloadTask -- held while the task waits to queue it
end

-- A session that missed publishes while nobody watched it re-loads before it is shown (in its
-- queue, waited for up to the action timeout).
function Live:catchUp(s)
  if s.stale and not s.ended then
    self:run(s, function() if s.stale then self:reload(s) end end, self.actionTimeout)
  end
end

-- Re-runs load(props, ctx, previous) (when the view has one) and renders with its data; the
-- change is pushed as any other, or with push (a publish's re-load) by the re-load itself
-- (pushReloaded). A load that fails keeps the last tree, and the browser gets {"t":"error"}.
function Live:reload(s, push)
  if s.ended then return end
  s.stale = false
  core.count("rerender")
  local data, ctx
  if s.view.load then
    -- load gets what it returned before, to keep what the person was doing (a form being
    -- typed, a runner's state) and read the rest again
    local previous = s.mounted.data.value
    local ok, result = xpcall(function()
      ctx = self:context(s.request)
      return s.view.load(s.props, ctx, previous)
    end, trace)
    if not ok then
      log("error", "live view " .. s.name .. ": re-load failed: " .. describe_error(result))
      self:devError(s.conn, "view", "The view " .. s.name .. "'s load failed", result)
      send(s.conn, { t = "error", message = "The view failed to load." })
      return
    end
    data = result
  else
    data = s.mounted.data.value
  end
  -- a publish's: its render is pushed below, after the topics (otherwise the caller sends it)
  s.reloading = push and not s.inEvent
  local set, err = pcall(s.mounted.setData, s.mounted, data)
  s.reloading = false
  if not set then error(err, 0) end
  self:watchTopics(s, ctx)
  if s.pushDeferred and not s.inEvent then
    s.pushDeferred = false
    self:pushReloaded(s)
  end
end

-- The session of a token, mounted when needed (in a task) → session | nil, "unknown" | "failed"
-- | "stopped" | "full", and when "failed" the error and the view's name
function Live:open(id, request)
  local claims = token.verify(self.secret, id, self:principal(request), self.clock())
  if not claims then return nil, "unknown" end
  local s = self.sessionsById[id]
  if not s then
    local view = self.views[claims.view]
    if not view then return nil, "unknown" end
    local props = props_mod.validate(view, claims.props)
    if not props then return nil, "unknown" end
    -- Connected sessions count against the memory cap: past 80 % of it no new one is mounted
    -- (a page still renders; its live connection is refused with 1013 and tries again later).
    if core.memoryTight() then return nil, "full" end
    return self:mount(id, view, props, request)
  end
  wait_for(function() return s.ready or s.ended end) -- mounted by another request meanwhile
  if s.ended then return nil, "unknown" end
  return s
end

function Live:sessions() return self.count end

-- Idle sessions end idleMs after they became idle; one whose handler is still running waits
-- for it, at most the action timeout and 5 s more.
function Live:tick(now)
  self.nowMs = now
  self:hibernate(now)
  -- idle since before the first tick: idle from now (they lead the list, which is in idle order)
  local s = self.idleHead
  while s and s.idleSince == nil do
    s.idleSince = now
    s = s.idleNext
  end
  s = self.idleHead
  while s do
    if now - s.idleSince <= self.idleMs then break end
    local following = s.idleNext
    if not s.busy or now - (s.busySince or now) > self.actionTimeout + 5000 then self:endSession(s) end
    s = following
  end
end

-- ---- connections ----

function Live:attach(s, conn)
  local old = s.conn
  s.conn = conn
  conn.session = s
  self:setActive(s)
  if old and old ~= conn and old.open then
    old.open = false
    self.conns[old.socket] = nil
    pcall(old.socket.close, old.socket, 4409, "replaced by another connection")
  end
end

-- A live connection: its session found or mounted in a task (mount() → session | nil, why,
-- err, name), then ready(session) sends the first message; an unknown session closes 4404, a
-- failure 1011. In development a mount that failed (the view's load or render raised) leaves
-- the connection open without a session, its page showing the error: the next generation a
-- save loads adopts it and mounts it again (SPEC §14), so the page recovers by itself.
local function open_connection(self, id, request, socket, mount, ready)
  local query = type(request) == "table" and request.query
  local conn = { id = id, request = request, socket = socket, open = true,
    diffs = type(query) == "table" and query.diffs == "1" }
  self.conns[socket] = conn
  core.spawn(function()
    local ok, s, why, err, name = pcall(mount)
    if not ok then log("error", "live session: " .. describe_error(s)) end
    if not conn.open then return end
    if ok and why == "failed" then
      if self.dev then
        self:devError(conn, "view", "The view " .. tostring(name) .. " failed to mount", err)
        return
      end
      send(conn, { t = "error", message = "The view failed to load." })
    end
    if not ok or not s then
      conn.open = false
      self.conns[socket] = nil
      if not ok or why == "failed" or why == "stopped" then
        socket:close(1011, "internal error")
      elseif why == "full" then
        socket:close(1013, "try again later")
      else
        socket:close(4404, "unknown session")
      end
      return
    end
    if self.app.auth then conn.authSession = require("clank.auth.bind").session(self.app.auth, request) end
    self:attach(s, conn)
    ready(s, conn)
  end)
end

function Live:connect(id, request, socket)
  open_connection(self, id, request, socket, function() return self:open(id, request) end,
    function(s, conn)
      self:catchUp(s)
      self:sendHtml(s, 0)
      if self.appFailure then
        self:devError(conn, "app", "The app failed to load: the running version stays", self.appFailure)
      end
    end)
end

-- Hot reload: the session mounted afresh on this generation from its token; `reload` first.
function Live:adopt(id, request, socket)
  open_connection(self, id, request, socket, function()
    local claims = token.verify(self.secret, id, self:principal(request), self.clock())
    local view = claims and self.views[claims.view]
    local props = view and props_mod.validate(view, claims.props)
    if not props then return nil end
    local old = self.sessionsById[id]
    if old then self:endSession(old) end
    return self:mount(id, view, props, request)
  end, function(s, conn)
    -- atomic: the session's buffer is its text until the next render
    local rendered, html = core.pcallAtomic(function()
      local h = self:html(s)
      return tostring(h)
    end)
    if not rendered then
      log("error", "live view " .. s.name .. ": render failed: " .. describe_error(html))
      html = ""
    end
    -- reload (with v, for clients that take it), then the usual first html, which carries v;
    -- in development, what the page showed of an error is gone with the generation that had it
    if send(conn, { t = "reload", html = tostring(html), v = version(s) }) then
      self:sendHtml(s, 0)
      if self.dev and rendered then send(conn, { t = "dev-clear" }) end
    end
  end)
end

function Live:disconnect(id, socket)
  local conn
  if socket ~= nil then
    conn = self.conns[socket] -- nil: replaced (4409) or refused earlier
  else
    local s = self.sessionsById[id]
    conn = s and s.conn
  end
  if not conn then return end
  conn.open = false
  self.conns[conn.socket] = nil
  local s = conn.session
  if s then -- its events that still wait would be dropped unanswered: they go now
    local q, kept = s.queue, {}
    for _, job in ipairs(q) do
      if job.conn == conn then s.queueBytes = s.queueBytes - job.bytes else kept[#kept + 1] = job end
    end
    if #kept < #q then s.queue = kept end
  end
  if s and s.conn == conn then
    s.conn = nil
    self:setIdle(s)
  end
end

-- ---- events ----

local EVENT_KEYS = { t = true, seq = true, v = true, key = true, type = true, value = true,
  checked = true, values = true, confirmed = true }

-- false when v is not a list of strings, else the bytes it holds.
local function string_list(v)
  if not json.isArray(v) then return false end
  local n = 0
  for _, x in ipairs(v) do
    if type(x) ~= "string" then return false end
    n = n + #x
  end
  return n
end

-- The bytes an event's value or one of its values holds (a string or a list of strings).
local function value_bytes(v)
  if v == nil then return 0 end
  if type(v) == "string" then return #v end
  return string_list(v)
end

-- A data-clank-key (keys in it are "k:" and the key percent-encoded: runtime/render/keys.c):
-- whether it is in that one form.
local valid_path = render_core.validKeyPath
M.validPath = valid_path

-- The event message and the bytes its value and values hold, or nil when its shape is wrong.
local function check_event(m)
  if type(m) ~= "table" or json.isArray(m) or m.t ~= "event" then return nil end
  for k in pairs(m) do if not EVENT_KEYS[k] then return nil end end
  if math_type(m.seq) ~= "integer" or m.seq < 0 or math_type(m.v) ~= "integer" then return nil end
  if type(m.key) ~= "string" or not valid_path(m.key) or not HANDLERS[m.type] then
    return nil
  end
  local bytes = value_bytes(m.value)
  if not bytes then return nil end
  if m.checked ~= nil and type(m.checked) ~= "boolean" then return nil end
  if m.confirmed ~= nil and type(m.confirmed) ~= "boolean" then return nil end
  if m.values ~= nil then
    if type(m.values) ~= "table" or json.isArray(m.values) then return nil end
    for k, v in pairs(m.values) do
      local n = type(k) == "string" and value_bytes(v)
      if not n then return nil end
      bytes = bytes + #k + n
    end
  end
  return m, bytes
end

-- {"t":"confirm","id":N,"ok":bool}: the answer to the server's {"t":"confirm"} question N.
local CONFIRM_KEYS = { t = true, id = true, ok = true }
local function is_confirm_answer(m)
  if json.isArray(m) or math_type(m.id) ~= "integer" or type(m.ok) ~= "boolean" then return false end
  for k in pairs(m) do if not CONFIRM_KEYS[k] then return false end end
  return true
end

-- {"t":"resync"} and nothing else: a client that could not apply a diff asks for the html.
local function is_resync(m)
  if type(m) ~= "table" or m.t ~= "resync" or json.isArray(m) then return false end
  return next(m, next(m)) == nil
end

-- The element at a data-clank-key: "0.2.1" counts element children from the view's top; a
-- segment "k:<key>" is the child with that key, wherever it now is (runtime/render/keys.c).
local find_key = render_core.keyFinder(getmetatable(element.h.div()))
M.findKey = find_key

-- A message from a live connection (in a task of its own, so that what decoding it allocates
-- is charged like a request's) → true when the connection should not be read until
-- socket:resume(): its session's queue is full.
function Live:receive(id, text, socket)
  local s = self.sessionsById[id]
  local conn
  if socket ~= nil then conn = self.conns[socket] else conn = s and s.conn end
  if not conn or not conn.open then return false end
  local m = json.decode(text)
  if m == nil then
    conn.open = false
    pcall(conn.socket.close, conn.socket, 1007, "invalid JSON")
    return false
  end
  if is_resync(m) then
    -- the client could not apply a diff: the current html in full
    if s and conn.session == s and s.conn == conn and s.ready then self:sendHtml(s, 0, true) end
    return false
  end
  if type(m) == "table" and m.t == "confirm" then
    -- the person's answer to the handler that asks (not queued: that handler holds the queue)
    if not is_confirm_answer(m) then
      conn.open = false
      pcall(conn.socket.close, conn.socket, 1002, "unexpected message")
      return false
    end
    local asking = s and s.asking
    if asking and asking.conn == conn and asking.id == m.id then asking.answer = m.ok end
    return false
  end
  local bytes
  m, bytes = check_event(m)
  if not m then
    conn.open = false
    pcall(conn.socket.close, conn.socket, 1002, "unexpected message")
    return false
  end
  if not s or conn.session ~= s or s.conn ~= conn then return false end -- not attached (yet)
  -- Judged when it arrives: an event from the DOM of the current version has its element
  -- found now, in the tree that DOM shows, so events queued behind a handler that changes the
  -- view still reach what the person clicked. Any other is stale.
  s.activeAt = self.nowMs
  self:awake(s)
  local tree = s.trees and s.trees[m.v]
  local el = tree and find_key(tree, m.key)
  if tree and m.v > (s.ackV or 0) then
    s.ackV = m.v
    for k in pairs(s.trees) do if k < m.v then s.trees[k] = nil end end
  end
  local q = s.queue
  if m.type == "input" then
    -- queued input events for the same key collapse to the latest
    for i = #q, 1, -1 do
      local e = q[i].event
      if not e or e.type ~= "input" then break end
      if e.key == m.key then
        s.queueBytes = s.queueBytes - q[i].bytes
        remove(q, i)
        break
      end
    end
  end
  local too_large = bytes > MAX_VALUE_BYTES
  if not too_large and el and m.value ~= nil then
    local max = tonumber(el.props.maxlength)
    too_large = max ~= nil and type(m.value) == "string" and (utf8.len(m.value) or math.huge) > max
  end
  q[#q + 1] = { event = m, conn = conn, stale = tree == nil, el = el, tooLarge = too_large,
    bytes = #text }
  s.queueBytes = s.queueBytes + #text
  self:drain(s)
  if #s.queue >= MAX_QUEUE or s.queueBytes >= MAX_QUEUE_BYTES then
    conn.paused = true
    return true
  end
  return false
end

-- A job leaves the queue: a connection paused for a full queue is read again once it is half
-- empty.
local function dequeued(s, job)
  s.queueBytes = s.queueBytes - (job.bytes or 0)
  local conn = s.conn
  if conn and conn.paused and #s.queue <= MAX_QUEUE // 2 and s.queueBytes <= MAX_QUEUE_BYTES // 2 then
    conn.paused = false
    if conn.open and conn.socket.resume then pcall(conn.socket.resume, conn.socket) end
  end
end

-- What a surface call whose job was stopped over its budget answers (live.http: a 503).
local STOPPED = { code = "RESOURCE_LIMIT", message = "The request used too much CPU or memory." }
M.STOPPED = STOPPED

-- Runs the queued jobs one at a time, in order, each in a task of its own: each live event is a
-- request with its own CPU and memory budget (SPEC §11, §13). Jobs that end without waiting
-- are followed at once; one that waits, or whose task was stopped over its budget, is followed
-- by its task's done function, so the queue never stalls behind it.
function Live:drain(s)
  if s.draining or not s.ready or s.ended then return end
  s.draining = true
  while not s.ended and #s.queue > 0 do
    local job = remove(s.queue, 1)
    dequeued(s, job)
    s.busy, s.busySince = true, self.nowMs
    s.inEvent = job.event ~= nil
    core.spawnThen(function()
      if job.event then
        local ok, err = pcall(self.event, self, s, job)
        if not ok then log("error", "live event: " .. describe_error(err)) end
      else
        job.result = table.pack(pcall(job.fn))
      end
      job.done = true
    end, function()
      if job.followed then return end
      if not job.done then
        if job.event then
          self:devError(job.conn, "handler", "The " .. job.event.type .. " handler of the view " .. s.name
            .. " was stopped", "It was stopped before it finished: over its CPU or memory budget "
            .. "(--cpu-limit, --memory-limit).")
          send(job.conn, { t = "error", message = "Something went wrong. Please try again." })
        else
          job.result = table.pack(false, STOPPED)
        end
        job.done = true
      end
      s.busy, s.draining = false, false
      self:drain(s)
    end)
    s.inEvent = false
    if s.pushDeferred then
      s.pushDeferred = false
      -- the handler waits (or failed before it sent): what it rendered so far goes out
      if not job.done or version(s) ~= s.sentV then self:schedulePush(s) end
    end
    if not job.done then return end -- it waits: its done function goes on
    job.followed = true
    s.busy = false
  end
  s.draining = false
end

local function target_of(el)
  local p = el.props
  local function str(v)
    if type(v) == "string" then return v end
    if type(v) == "number" then return json.formatNumber(v) end
  end
  return { id = str(p.agentId) or str(p.id), name = str(p.name), tag = el.tag }
end

function Live:event(s, job)
  local m, conn = job.event, job.conn
  if not conn.open or s.conn ~= conn then return end
  if job.stale then
    -- stale: dropped, answered with the current html in full (the client may hold a DOM no
    -- diff's base names)
    self:sendHtml(s, m.seq, true)
    return
  end
  if job.tooLarge then
    log("warn", "live view " .. s.name .. ": an event's value over its limit was dropped")
    send(conn, { t = "error", message = "The input is too large." })
    self:sendHtml(s, m.seq)
    return
  end
  local el = job.el
  local handler = el and el.props[HANDLERS[m.type]]
  if type(handler) ~= "function" then
    log("debug", "live view " .. s.name .. ": no " .. m.type .. " handler at key " .. m.key)
    return
  end
  -- the element holds what the browser's holds, as after a surface input
  if m.checked ~= nil then
    el.props.checked = m.checked
    self:touched(s)
  elseif m.value ~= nil and (m.type == "input" or m.type == "change") then
    el.props.value = m.value
    self:touched(s)
  end
  local ev = { type = m.type, value = m.value, checked = m.checked, values = m.values,
    target = target_of(el) }
  -- each event is a request of its own (SPEC §11), with a new id its log lines carry
  local id = request_id()
  local previous = core.requestId(id)
  local ok, err = xpcall(self.context, trace, self, conn.request, m.confirmed, id)
  if ok then ok, err = self:asRequestAsking(err, self:asker(s, conn, m.seq), handler, ev, err) end
  if not ok then
    log("error", "live view " .. s.name .. ": " .. m.type .. " handler failed: " .. describe_error(err))
    self:devError(conn, "handler", "The " .. m.type .. " handler of the view " .. s.name .. " failed", err)
    send(conn, { t = "error", message = "Something went wrong. Please try again." })
    if version(s) ~= s.sentV then self:sendHtml(s, m.seq) end
  else
    self:sendHtml(s, m.seq)
  end
  core.requestId(previous)
end

-- ask(text) for an event's handler (issue 34): an action it runs that needs confirmation, whose
-- input is valid, is confirmed by the person in the page, with the action's own words for this
-- call. {"t":"confirm","seq":N,"id":K,"message":text} goes out (seq: the event's), the handler
-- waits for {"t":"confirm","id":K,"ok":bool}; a connection that goes, or no answer within ASK_MS,
-- is a no. What the handler changed meanwhile is pushed as usual.
function Live:asker(s, conn, seq)
  return function(text)
    s.askId = (s.askId or 0) + 1
    local asking = { id = s.askId, conn = conn }
    s.asking = asking
    if version(s) ~= s.sentV then self:sendHtml(s, 0) end -- what the person sees while asked
    if not send(conn, { t = "confirm", seq = seq, id = asking.id, message = text }) then
      s.asking = nil
      return false
    end
    wait_for(function()
      return asking.answer ~= nil or not conn.open or s.conn ~= conn or s.ended
    end, ASK_MS)
    if s.asking == asking then s.asking = nil end
    return asking.answer == true
  end
end

-- ---- pages and agents without a browser ----

function Live:page(request)
  return require("clank.live.http").page(self, request)
end

function Live:http(request)
  return require("clank.live.http").handle(self, request)
end

-- A job run in the session's queue (one handler at a time), waited for from the calling task
-- up to ms → done, ok, results...
function Live:run(s, fn, ms)
  local job = { fn = fn, done = false }
  s.queue[#s.queue + 1] = job
  self:drain(s)
  if not wait_for(function() return job.done or s.ended end, ms) then return false end
  if not job.done then return false end
  return true, table.unpack(job.result, 1, job.result.n)
end

return M
