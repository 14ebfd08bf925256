-- clank.publish and clank.subscribe in process, and view sessions that subscribe with `topics`
-- (issue 28): topic and payload limits, delivery after the publisher goes on, in order, each
-- subscriber once, a failing subscriber isolated, and one re-load per burst of publishes.
local clank = require "clank"
local live_mod = require "clank.live"
local token = require "clank.live.token"
local json = clank.json
local core = require "clank.core"
local s = clank.schema
local h = clank.h

local harness = require "helpers.live_socket"
local run, settle = harness.run, harness.settle

describe("clank.publish", function()
  it("refuses a bad topic or payload at the call, naming the limit", function()
    for _, topic in ipairs { "", ("t"):rep(201), "a b", "ü", "a?b" } do
      local ok, err = pcall(clank.publish, topic)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("clank.publish: topic must be a string matching", 1, true), err)
    end
    local ok, err = pcall(clank.publish, 42)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("got number", 1, true), err)
    assert.is_true(pcall(clank.publish, ("t"):rep(200)))
    assert.is_true(pcall(clank.publish, "A-z_0.9:/x"))
    -- 4,096 bytes as canonical JSON: a string of 4,094 characters and its quotes
    assert.is_true(pcall(clank.publish, "t", ("x"):rep(4094)))
    ok, err = pcall(clank.publish, "t", ("x"):rep(4095))
    assert.is_false(ok)
    assert.truthy(tostring(err):find("at most 4096 bytes as canonical JSON, got 4097", 1, true), err)
    ok, err = pcall(clank.publish, "t", { f = print })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("clank.publish: payload must be a JSON value", 1, true), err)
  end)

  it("delivers after the publisher goes on, in publish order, to each subscriber once", function()
    local got = {}
    local off = clank.subscribe("news", function(topic, payload)
      got[#got + 1] = topic .. ":" .. json.encode(payload)
    end)
    run(function()
      clank.publish("news", { n = 1 })
      clank.publish("other", { n = 9 })
      clank.publish("news", { n = 2 })
      assert.are.same({}, got) -- not yet: publishing never waits for delivery
    end)
    settle()
    assert.are.same({ 'news:{"n":1}', 'news:{"n":2}' }, got)
    off()
    run(function() clank.publish("news", { n = 3 }) end)
    settle()
    assert.are.equal(2, #got)
  end)

  it("still delivers to the other subscribers when one raises", function()
    local got = 0
    local off1 = clank.subscribe("boom", function() error("subscriber failed on purpose") end)
    local off2 = clank.subscribe("boom", function() got = got + 1 end)
    run(function() clank.publish("boom") end)
    settle()
    assert.are.equal(1, got)
    off1()
    off2()
  end)
end)

describe("topics to and from other workers and instances", function()
  local pubsub = require "clank.pubsub"
  local registry = debug.getregistry()
  after_each(function() registry["clank.relay"] = nil end)

  it("hands every publish to clank-run's relay as topic and canonical JSON, listened to or not", function()
    local relayed = {}
    registry["clank.relay"] = function(topic, text) relayed[#relayed + 1] = { topic, text } end
    run(function()
      clank.publish("nobody:here", { b = 2, a = { 1, "x" } })
      clank.publish("nobody:here")
    end)
    assert.are.same({ { "nobody:here", '{"a":[1,"x"],"b":2}' }, { "nobody:here", nil } }, relayed)
  end)

  it("delivers what arrives to this state's subscribers in order, without relaying it again", function()
    local relayed, got = 0, {}
    registry["clank.relay"] = function() relayed = relayed + 1 end
    local off = clank.subscribe("far", function(topic, payload)
      got[#got + 1] = topic .. "=" .. (payload == nil and "nil" or json.encode(payload))
    end)
    run(function()
      pubsub.receive('far {"n":1}\nelse {"n":2}\nfar\nfar {"s":"a b"}\n')
      -- not records: a bad topic, a payload that is not JSON, a line without its newline
      pubsub.receive('f?r {"n":3}\nfar {nope\nfar {"n":4}')
    end)
    settle()
    off()
    assert.are.same({ 'far={"n":1}', "far=nil", 'far={"s":"a b"}' }, got)
    assert.are.equal(0, relayed)
  end)

  -- A task the runtime stops for good (over its CPU or memory budget, runtime/core/preempt.c):
  -- from the next instruction on each one raises again, so a pcall that catches it fails at its
  -- next step, and the task dies. No Lua code of it runs again.
  local STOPPED = "RESOURCE_LIMIT: the task used too much CPU"
  local function stop_here() debug.sethook(function() error(STOPPED, 0) end, "", 1) end

  it("delivers later publishes after a delivery task was stopped midway", function()
    local got, stopped_task = {}, nil
    local unwatch = pubsub.watch("stop:t", {}, function(_, payload)
      got[#got + 1] = payload.n
      if payload.n == 1 then -- the delivering task goes over its budget here
        stopped_task = coroutine.running()
        stop_here()
      end
    end)
    run(function()
      clank.publish("stop:t", { n = 1 })
      clank.publish("stop:t", { n = 2 }) -- still queued when the task stops
    end)
    settle()
    assert.are.equal("dead", coroutine.status(stopped_task))
    debug.sethook(stopped_task) -- its coroutine may serve another task now
    assert.are.same({ 1 }, got)
    run(function() clank.publish("stop:t", { n = 3 }) end) -- a delivery task of its own, 2 first
    settle()
    assert.are.same({ 1, 2, 3 }, got)
    run(function()
      clank.publish("stop:t", { n = 4 })
      clank.publish("stop:t", { n = 5 })
    end)
    settle()
    unwatch()
    assert.are.same({ 1, 2, 3, 4, 5 }, got)
  end)

  it("delivers what a watcher publishes while delivering after what came before, in order", function()
    local got, key = {}, {}
    local offs = {
      pubsub.watch("order:a", key, function(_, payload)
        got[#got + 1] = "a" .. payload.n
        clank.publish("order:b", { n = payload.n })
      end),
      pubsub.watch("order:b", key, function(_, payload) got[#got + 1] = "b" .. payload.n end),
    }
    run(function()
      clank.publish("order:a", { n = 1 })
      clank.publish("order:a", { n = 2 })
    end)
    settle()
    for _, off in ipairs(offs) do off() end
    assert.are.same({ "a1", "a2", "b1", "b2" }, got)
  end)

  it("tells each watching session once on resync, however many topics it watches", function()
    local told = {}
    local key_a, key_b = {}, {}
    local offs = {
      pubsub.watch("r1", key_a, function() told.a = (told.a or 0) + 1 end),
      pubsub.watch("r2", key_a, function() told.a = (told.a or 0) + 1 end),
      pubsub.watch("r2", key_b, function() told.b = (told.b or 0) + 1 end),
    }
    pubsub.resync()
    for _, off in ipairs(offs) do off() end
    assert.are.same({ a = 1, b = 1 }, told)
  end)
end)

describe("defineAction's publishes", function()
  it("refuses what is not a list of topics or a function, naming the field", function()
    for _, bad in ipairs { "tasks", 42, { "a b" }, { 7 } } do
      local ok, err = pcall(clank.defineAction, { name = "x", description = "X.", input = s.object {},
        publishes = bad, handler = function() end })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("'publishes'", 1, true), err)
    end
  end)

  it("publishes after each successful call, on every way in, and not after a failure", function()
    local got = {}
    local off1 = clank.subscribe("tasks", function(topic) got[#got + 1] = topic end)
    local off2 = clank.subscribe("tasks:ada", function(topic) got[#got + 1] = topic end)
    local fail = false
    local create = clank.defineAction { name = "tasks.create", description = "Create.",
      input = s.object { title = s.string() }, output = s.object { id = s.string() },
      sideEffects = "write", confirmation = "never", publishes = { "tasks" },
      handler = function(input)
        if fail then error("store down") end
        return { id = input.title }
      end }
    local mine = clank.defineAction { name = "tasks.mine", description = "Mine.", input = s.object {},
      sideEffects = "write", confirmation = "never",
      publishes = function(_, _, ctx) return "tasks:" .. ctx.user end,
      handler = function() return nil end }
    local bridge = clank.createAgentBridge { create, mine }
    run(function() create({ title = "a" }, {}) end)                      -- a plain call
    run(function() bridge:invoke("tasks.create", { title = "b" }, {}) end) -- bridge:invoke
    local res = bridge:handle({ method = "POST", url = "/actions/tasks.create", path = "/actions/tasks.create",
      query = {}, headers = { ["content-type"] = "application/json", host = "localhost" },
      body = '{"title":"c"}', scheme = "http" })                           -- the HTTP bridge
    assert.are.equal(200, res.status, res.body)
    run(function() mine({}, { user = "ada" }) end)
    fail = true
    run(function() pcall(create, { title = "d" }, {}) end)
    settle()
    table.sort(got)
    assert.are.same({ "tasks", "tasks", "tasks", "tasks:ada" }, got)
    off1()
    off2()
  end)
end)

describe("view sessions with topics", function()
  local function fake_socket()
    local sock = { frames = {} }
    function sock.send(self, text) self.frames[#self.frames + 1] = json.decode(text) return true end
    function sock.close(self, code) self.closed = code end
    return sock
  end

  -- A live module serving the view "list" (topic "list"), whose load reads list.store and counts
  -- list.loads; and a session token of it.
  local function list_live()
    local list = { store = { "a" }, loads = 0 }
    local List = clank.defineView {
      name = "list",
      topics = function() return { "list" } end,
      load = function()
        list.loads = list.loads + 1
        return { items = { table.unpack(list.store) } }
      end,
      render = function(_, d) return h.p({ id = "items" }, table.concat(d.items, ",")) end,
    }
    local live = live_mod.new { app = clank.app { name = "t", views = { List } }, secret = "spec-secret" }
    return list, live, token.sign("spec-secret", "list", {}, nil, os.time())
  end

  it("re-load once per burst of publishes and push the new html with seq 0", function()
    local store, loads = { "a" }, 0
    local List = clank.defineView {
      name = "list",
      topics = function(props) return { "list:" .. props.owner } end,
      props = s.object { owner = s.string() },
      load = function()
        loads = loads + 1
        return { items = { table.unpack(store) } }
      end,
      render = function(_, d)
        local lis = {}
        for i, item in ipairs(d.items) do lis[i] = h.li(nil, item) end
        return h.ul({ id = "items" }, lis)
      end,
    }
    local live = live_mod.new { app = clank.app { name = "t", views = { List } }, secret = "spec-secret" }
    local sock = fake_socket()
    local id = token.sign("spec-secret", "list", { owner = "ada" }, nil, os.time())
    run(function() live:connect(id, { method = "GET", url = "/", path = "/", query = {}, headers = {} }, sock) end)
    settle()
    assert.are.equal(1, loads)
    assert.truthy(sock.frames[1].html:find("<li>a</li>", 1, true))
    store[2] = "b"
    run(function()
      clank.publish("list:ada")
      clank.publish("list:ada")
      clank.publish("list:grace") -- another owner's topic: not this session's
    end)
    settle(80)
    assert.are.equal(2, loads)
    local last = sock.frames[#sock.frames]
    assert.are.same({ "html", 0 }, { last.t, last.seq })
    assert.truthy(last.html:find("<li>a</li><li>b</li>", 1, true), last.html)
  end)

  it("push a publish's re-load at once, and one within 50 ms of the last push 50 ms after it", function()
    local list, live, id = list_live()
    local sock = fake_socket()
    local sent_at = {}
    local send = sock.send
    function sock.send(self, text)
      sent_at[#self.frames + 1] = core.nowMs()
      return send(self, text)
    end
    run(function() live:connect(id, { method = "GET", url = "/", path = "/", query = {}, headers = {} }, sock) end)
    settle()
    local published_at
    run(function()
      list.store[2] = "b"
      published_at = core.nowMs()
      clank.publish("list")
      clank.sleep(10)
      list.store[3] = "c"
      clank.publish("list")
    end)
    settle(150)
    assert.are.equal(3, list.loads)
    assert.are.equal(3, #sock.frames) -- the first html, then one push per publish
    assert.truthy(sock.frames[2].html:find("a,b", 1, true), sock.frames[2].html)
    assert.truthy(sock.frames[3].html:find("a,b,c", 1, true), sock.frames[3].html)
    assert.is_true(sent_at[2] - published_at < 40, "first push " .. (sent_at[2] - published_at) .. " ms")
    -- the second publish's re-load is 10 ms after the first push: its push waits (timers may
    -- fire a few ms early by the wall clock)
    assert.is_true(sent_at[3] - sent_at[2] >= 40, "pushes " .. (sent_at[3] - sent_at[2]) .. " ms apart")
  end)

  it("keep no more than the two newest trees of a session that only watches", function()
    local n = 0
    local Count = clank.defineView {
      name = "count",
      topics = function() return { "count" } end,
      load = function() n = n + 1 return { n = n } end,
      render = function(_, d) return h.p({ id = "n" }, d.n) end,
    }
    local live = live_mod.new { app = clank.app { name = "t", views = { Count } }, secret = "spec-secret" }
    local id = token.sign("spec-secret", "count", {}, nil, os.time())
    local sock = fake_socket()
    run(function() live:connect(id, { method = "GET", url = "/", path = "/", query = {}, headers = {} }, sock) end)
    settle()
    local real_time, now = os.time, os.time()
    os.time = function() return now end -- luacheck: ignore 122
    local ok, err = pcall(function()
      for _ = 1, 10 do
        now = now + 5 -- a publish every 5 s: each version replaced long ago
        run(function() clank.publish("count") end)
        settle(80)
      end
    end)
    os.time = real_time -- luacheck: ignore 122
    assert(ok, err)
    assert.are.equal(11, n)
    local versions = {}
    for v in pairs(live.sessionsById[id].trees) do versions[#versions + 1] = v end
    table.sort(versions)
    local newest = versions[#versions]
    assert.are.same({ newest - 1, newest }, versions)
  end)

  it("re-load a session nobody watches only once it is connected again", function()
    local list, live, id = list_live()
    local request = { method = "GET", url = "/", path = "/", query = {}, headers = {} }
    local sock = fake_socket()
    run(function() live:connect(id, request, sock) end)
    settle()
    live:disconnect(id, sock)
    list.store[2] = "b"
    for _ = 1, 3 do
      run(function() clank.publish("list") end)
      settle(80)
    end
    assert.are.equal(1, list.loads) -- closed: its browser sees nothing, so nothing is rendered
    local again = fake_socket()
    run(function() live:connect(id, request, again) end)
    settle()
    assert.are.equal(2, list.loads) -- once, for all it missed, before its first frame
    assert.truthy(again.frames[1].html:find("a,b", 1, true), again.frames[1].html)
    assert.are.equal(1, #again.frames)
  end)
end)
