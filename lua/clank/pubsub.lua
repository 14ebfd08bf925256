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
--
-- The runtime may stop a task for good anywhere (over its CPU or memory budget: no Lua code of
-- it runs again), so nothing here waits for a delivery task's normal end: a stopped one loses at
-- most the publish it was delivering (delivery is at most once); those queued after it go out,
-- in order, with the next publish, which a task of its own delivers.
local core = require "clank.core"
local json = require "clank.json"

local type, pairs, ipairs, next, error, format = type, pairs, ipairs, next, error, string.format
local tostring, setmetatable = tostring, setmetatable
local running, co_status = coroutine.running, coroutine.status

local M = {}

local MAX_TOPIC, MAX_PAYLOAD = 200, 4096
M.MAX_PAYLOAD = MAX_PAYLOAD

-- topic → { [key] = fn }: subscribers (key a fresh table each) and the runtime's watchers
-- (key the watcher's own table).
local subscribers, watchers = {}, {}
-- Publishes to deliver, oldest first: topic and payload at pending[2i - 1], pending[2i] for
-- head <= i <= tail. Every delivery task takes them from here, one at a time.
local pending, head, tail = {}, 1, 0
-- [1]: the delivery task spawned that has not started delivering yet. Weak: one dropped before it
-- started (a reload retires its tasks) goes, and the next publish spawns another.
local scheduled = setmetatable({}, { __mode = "v" })
-- pcall with no yield across it: tasks delivering at once (one preempted) take turns between
-- publishes, never within one, so each subscriber gets them in publish order.
local atomic_pcall = core.pcallAtomic

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

-- (Atomic.) Takes the oldest publish out and delivers it: its watchers are called, its
-- subscribers spawned. Taken out first: a task stopped while delivering it loses only it.
local function deliver_next()
  local i = head
  local topic, payload = pending[2 * i - 1], pending[2 * i]
  pending[2 * i - 1], pending[2 * i] = nil, nil
  head = i + 1
  if i >= tail then -- empty: the next publish goes first again
    head = 1
    tail = 0
  end
  if topic == nil then return end
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
end

-- Publishes made while delivering (a watcher's, a subscriber's before it waits) go out in this
-- turn, after the others, in order.
local function deliver()
  if scheduled[1] == running() then scheduled[1] = nil end -- a publish from now on spawns another
  while head <= tail do
    local ok, err = atomic_pcall(deliver_next)
    if not ok then core.log("error", "pubsub: a delivery failed: " .. tostring(err)) end
  end
end

local function spawn_delivery()
  core.spawn(function()
    scheduled[1] = running()
    core.sleep(0) -- the publisher goes on first
    deliver()
  end)
end

-- (Atomic.) Queues a publish; spawns a delivery task unless one is spawned and not started (a
-- dead one, stopped before it started, does not count).
local function push(topic, payload)
  local i = tail + 1
  pending[2 * i - 1], pending[2 * i] = topic, payload
  tail = i
  local task = scheduled[1]
  if task == nil or co_status(task) == "dead" then spawn_delivery() end
end

-- Queues a publish for the subscribers of this state.
local function enqueue(topic, payload)
  if subscribers[topic] == nil and watchers[topic] == nil then return end -- nobody listens
  local ok, err = atomic_pcall(push, topic, payload)
  if not ok then error(err, 0) end
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
