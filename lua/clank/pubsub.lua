-- clank.publish and clank.subscribe (issue 28): topics. Each generation's Lua state has its own
-- subscribers, so a reload drops them with the state. A publish is delivered here, and clank-run
-- carries it to the other workers and instances (runtime/host/pubsub.h), whose states get it
-- through M.receive.
--
--   clank.publish(topic, payload?)   topic: ^[A-Za-z0-9_.:/-]{1,200}$; payload: a JSON value of at
--                                    most 4 KiB as canonical JSON. Never waits: delivery runs from
--                                    the loop, in publish order, each subscriber once.
--   clank.subscribe(topic, fn) → unsubscribe
--                                    fn(topic, payload) runs as a runtime task of its own; one that
--                                    raises is logged, the others still get the message.
--
-- The runtime's own watchers (view sessions, clank.live) are called in the delivering task and
-- must only take note (a session marks itself stale and queues one re-load).
local core = require "clank.core"
local json = require "clank.json"

local type, pairs, ipairs, next, error, format = type, pairs, ipairs, next, error, string.format

local M = {}

local MAX_TOPIC, MAX_PAYLOAD = 200, 4096
M.MAX_PAYLOAD = MAX_PAYLOAD

-- topic → { [key] = fn }: subscribers (key a fresh table each) and the runtime's watchers
-- (key the watcher's own table).
local subscribers, watchers = {}, {}
local pending, pending_n, scheduled = {}, 0, false

local function valid_topic(topic)
  return type(topic) == "string" and #topic > 0 and #topic <= MAX_TOPIC and topic:find("^[%w_.:/-]+$") ~= nil
end

local function check_topic(topic, who)
  if not valid_topic(topic) then
    error(format("%s: topic must be a string matching ^[A-Za-z0-9_.:/-]{1,%d}$, got %s", who,
      MAX_TOPIC, type(topic) == "string" and format("%q", topic:sub(1, 60)) or type(topic)), 3)
  end
end

-- The functions of a set, copied: a subscriber may subscribe or unsubscribe while it runs.
local function list(set)
  local fns, n = {}, 0
  for _, fn in pairs(set) do
    n = n + 1
    fns[n] = fn
  end
  return fns, n
end

local count, relay = core.count, core.relay

local function deliver()
  local i = 1
  while i <= pending_n do -- publishes made while delivering go out in this turn, in order
    local topic, payload = pending[2 * i - 1], pending[2 * i]
    local set = watchers[topic]
    if set then
      local fns, n = list(set)
      for k = 1, n do
        count("delivered")
        local ok, err = pcall(fns[k], topic, payload)
        if not ok then core.log("error", "pubsub: a watcher of " .. topic .. " failed: " .. tostring(err)) end
      end
    end
    set = subscribers[topic]
    if set then
      local fns, n = list(set)
      for k = 1, n do
        local fn = fns[k]
        count("delivered")
        core.spawn(function() fn(topic, payload) end)
      end
    end
    i = i + 1
  end
  pending, pending_n, scheduled = {}, 0, false
end

-- Queues a publish for the subscribers of this state.
local function enqueue(topic, payload)
  if subscribers[topic] == nil and watchers[topic] == nil then return end -- nobody listens
  pending[2 * pending_n + 1], pending[2 * pending_n + 2] = topic, payload
  pending_n = pending_n + 1
  if not scheduled then
    scheduled = true
    core.spawn(function()
      core.sleep(0) -- the publisher goes on first
      deliver()
    end)
  end
end

function M.publish(topic, payload)
  check_topic(topic, "clank.publish")
  local text
  if payload ~= nil then
    local ok
    ok, text = pcall(json.encode, payload)
    if not ok or type(text) ~= "string" then
      error("clank.publish: payload must be a JSON value: " .. tostring(text), 2)
    end
    if #text > MAX_PAYLOAD then
      error(format("clank.publish: payload must be at most %d bytes as canonical JSON, got %d",
        MAX_PAYLOAD, #text), 2)
    end
  end
  count("published")
  relay(topic, text)
  enqueue(topic, payload)
end

-- What other workers and instances published (clank-run calls it): records "topic[ payload]\n",
-- payload canonical JSON. A record that is not one is skipped.
function M.receive(records)
  for topic, rest in records:gmatch("([^ \n]+)([^\n]*)\n") do
    if valid_topic(topic) then
      if rest == "" then
        enqueue(topic, nil)
      else
        local payload = json.decode(rest:sub(2))
        if payload ~= nil then enqueue(topic, payload) end
      end
    end
  end
end

-- After publishes may have been lost (the PostgreSQL listener reconnected): every watcher is
-- told once, as for a publish without payload, so every subscribed view re-loads.
function M.resync()
  local told = {}
  for topic, set in pairs(watchers) do
    for key, fn in pairs(set) do
      if not told[key] then
        told[key] = true
        local ok, err = pcall(fn, topic, nil)
        if not ok then core.log("error", "pubsub: a watcher of " .. topic .. " failed: " .. tostring(err)) end
      end
    end
  end
end

local function add(map, topic, key, fn)
  local set = map[topic]
  if not set then
    set = {}
    map[topic] = set
  end
  set[key] = fn
  return function()
    local s = map[topic]
    if s and s[key] == fn then
      s[key] = nil
      if next(s) == nil then map[topic] = nil end
    end
  end
end

function M.subscribe(topic, fn)
  check_topic(topic, "clank.subscribe")
  if type(fn) ~= "function" then error("clank.subscribe: expected a function", 2) end
  return add(subscribers, topic, {}, fn)
end

-- The runtime's watchers: fn(topic, payload) is called in the delivering task, and must only take
-- note; key is the watcher's own table (one entry per key and topic) → unwatch.
function M.watch(topic, key, fn)
  check_topic(topic, "clank.pubsub.watch")
  return add(watchers, topic, key, fn)
end

-- defineAction's publishes = { topic, ... }: checked when the action is defined.
function M.checkTopics(topics)
  for i, topic in ipairs(topics) do
    if not valid_topic(topic) then
      error(format("clank.defineAction: 'publishes' item %d must be a topic matching "
        .. "^[A-Za-z0-9_.:/-]{1,%d}$", i, MAX_TOPIC), 0)
    end
  end
end

-- After an action's successful call: its publishes, a list or function(input, output, ctx) →
-- a topic or a list of them.
function M.publishAction(publishes, input, output, ctx)
  local topics = publishes
  if type(publishes) == "function" then topics = publishes(input, output, ctx) end
  if type(topics) == "string" then topics = { topics } end
  if topics == nil then return end
  if type(topics) ~= "table" then error("publishes must return a topic or a list of topics", 0) end
  for _, topic in ipairs(topics) do M.publish(topic) end
end

return M
