-- ctx.log and ctx.progress for a tool called over MCP (SPEC §6): notifications/message and
-- notifications/progress for the call. The first one turns the call's answer into
-- text/event-stream (env.stream); later ones stream; the result closes the stream.

local json = require "clank.json"
local rpc = require "clank.mcp.rpc"

local encode = json.encode
local type, error, tostring, pairs = type, error, tostring, pairs
local mtype = math.type

local notify = {}

-- RFC 5424 severities, least severe first (MCP's LoggingLevel).
notify.LEVELS = { "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency" }
local rank = {}
for i, level in ipairs(notify.LEVELS) do
  rank[level] = i
end
notify.DEFAULT_LEVEL = "info"

function notify.valid_level(level)
  return type(level) == "string" and rank[level] ~= nil
end

-- logging/setLevel per session (per worker: a session that moves to another worker gets the
-- default there). Bounded: past `limit` sessions the table starts over.
local levels, count, limit = {}, 0, 10000

function notify.set_level(session_id, level)
  if levels[session_id] == nil then
    count = count + 1
    if count > limit then
      levels, count = {}, 1
    end
  end
  levels[session_id] = level
end

function notify.level(session_id)
  return levels[session_id] or notify.DEFAULT_LEVEL
end

local function check_log_args(level, message)
  if not notify.valid_level(level) then
    error("ctx.log: level must be one of debug, info, notice, warning, error, critical, alert, "
      .. "emergency (got " .. tostring(level) .. ")", 3)
  end
  if message ~= nil and type(message) ~= "string" then
    error("ctx.log: message must be a string", 3)
  end
end

local function finite(x)
  return type(x) == "number" and x == x and x ~= math.huge and x ~= -math.huge
end

local function check_progress_args(done, total, message)
  if not finite(done) then
    error("ctx.progress: done must be a finite number (got " .. type(done) .. ")", 3)
  end
  if total ~= nil and not finite(total) then
    error("ctx.progress: total must be a finite number (got " .. type(total) .. ")", 3)
  end
  if message ~= nil and type(message) ~= "string" then
    error("ctx.progress: message must be a string", 3)
  end
end

notify.check_log_args, notify.check_progress_args = check_log_args, check_progress_args

-- A channel for one tools/call: { queue, writer?, gone?, ... }.
--   env, cors: the endpoint's; session_id: for the level; action: the action's name (logger);
--   token: the call's _meta.progressToken (nil: no progress notifications);
--   writer: an open stream (elicit mode), else opened on the first notification.
function notify.channel(opts)
  local ch = { queue = {}, env = opts.env, cors = opts.cors, writer = opts.writer,
               token = opts.token, action = opts.action,
               min = rank[notify.level(opts.session_id)] }
  return setmetatable(ch, { __index = notify })
end

local function push(ch, method, params)
  ch.queue[#ch.queue + 1] = encode { jsonrpc = "2.0", method = method, params = params }
  ch:flush()
end

-- Writes the waiting notifications (opening the stream on the first); after the client went
-- away they are dropped.
function notify:flush()
  local q = self.queue
  if #q == 0 then
    return
  end
  self.queue = {}
  if self.gone then
    return
  end
  if not self.writer then
    local headers = { ["content-type"] = "text/event-stream", ["cache-control"] = "no-cache" }
    for k, v in pairs(self.cors or {}) do
      headers[k] = v
    end
    self.writer = self.env.stream(200, headers)
  end
  for i = 1, #q do
    if not self.writer:write(rpc.event(q[i])) then
      self.gone = true
      return
    end
  end
end

-- Installs ctx.log and ctx.progress on ctx.
function notify:install(ctx)
  ctx.log = function(level, message, data)
    check_log_args(level, message)
    if rank[level] < self.min then
      return
    end
    local payload = data
    if message ~= nil then
      payload = data == nil and message or { message = message, data = data }
    end
    push(self, "notifications/message", { level = level, logger = self.action,
                                          data = payload == nil and json.null or payload })
  end
  ctx.progress = function(done, total, message)
    check_progress_args(done, total, message)
    if self.token == nil then
      return
    end
    push(self, "notifications/progress", { progressToken = self.token, progress = done,
                                           total = total, message = message })
  end
end

-- The call's answer: { status, headers, body } when nothing streamed; otherwise the result goes
-- out as the stream's last event, the stream closes, and nil comes back.
function notify:answer(id, result)
  self:flush()
  if not self.writer then
    return rpc.answer(200, rpc.result(id, result), self.cors)
  end
  if not self.gone then
    self.writer:write(rpc.event(rpc.result(id, result)))
  end
  self.writer:close()
  return nil
end

function notify.valid_token(token)
  return type(token) == "string" or mtype(token) == "integer"
    or (mtype(token) == "float" and token == token and token % 1 == 0)
end

return notify
