-- clank.live for agents without a browser (SPEC §11): view sessions over HTTP and their
-- surface. Calls run in runtime tasks, as clank-run runs them.
local clank = require "clank"
local live_mod = require "clank.live"
local json = clank.json
local h, s = clank.h, clank.schema
local signal = clank.signal

local run = require("helpers.live_socket").run

local function post(path, body, headers)
  local hd = { ["content-type"] = "application/json" }
  for k, v in pairs(headers or {}) do hd[k] = v end
  return { method = "POST", url = path, path = path, query = {}, headers = hd,
    body = type(body) == "string" and body or json.encode(body) }
end

local function get(path) return { method = "GET", url = path, path = path, query = {}, headers = {} } end

local removed = 0
local Remove = clank.defineAction { name = "items.remove", description = "Remove the item.",
  input = s.object {}, sideEffects = "destructive", handler = function() removed = removed + 1 return {} end }

local Counter = clank.defineView {
  name = "counter", props = s.object { start = s.number() },
  load = function(props) return { n = signal.signal(props.start), runner = clank.actionRunner(Remove) } end,
  render = function(_, d)
    return h.div(nil,
      h.output({ id = "n" }, d.n.value),
      h.button({ agentId = "inc", onClick = function() clank.sleep(5) d.n.value = d.n.value + 1 end }, "Add"),
      h.input({ agentId = "name", onInput = function(e) d.n.value = #e.value end }),
      h.button({ agentId = "remove", agentAction = "items.remove", onClick = function() d.runner:run({}) end },
        "Remove"))
  end,
}

local function new_live(limits)
  return live_mod.new { app = clank.app { name = "t", views = { Counter }, actions = { Remove } },
    secret = "spec-secret", limits = limits }
end

local function decoded(res) return json.decode(res.body) end

describe("clank.live http", function()
  it("creates a session with props and answers 201 with its id and nodes", function()
    local live = new_live()
    local res = run(function() return live:http(post("/__clank/views/counter/sessions", { start = 4 })) end)
    assert.are.equal(201, res.status)
    assert.are.equal("application/json", res.headers["content-type"])
    local body = decoded(res)
    assert.is_string(body.id)
    -- in the view's div, its wrapper (SPEC §9, §11)
    assert.are.equal("div", body.nodes[1].tag)
    assert.are.same({ id = "n", tag = "output", label = "4" }, body.nodes[1].children[1])
    assert.are.equal(1, live:sessions())
  end)

  it("refuses bad requests with the §5 envelope", function()
    local live = new_live()
    local cases = {
      { post("/__clank/views/nope/sessions", {}), 404, "NOT_FOUND" },
      { post("/__clank/views/counter/sessions", "{}", { ["content-type"] = "text/plain" }), 415,
        "UNSUPPORTED_MEDIA_TYPE" },
      { post("/__clank/views/counter/sessions", ""), 400, "INVALID_JSON" },
      { post("/__clank/views/counter/sessions", "{nope"), 400, "INVALID_JSON" },
      { post("/__clank/views/counter/sessions", { start = "x" }), 422, "INVALID_INPUT" },
      { post("/__clank/views/counter/sessions", { start = 1, pad = ("x"):rep(2100) }), 422, "INVALID_INPUT" },
    }
    for _, case in ipairs(cases) do
      local res = run(function() return live:http(case[1]) end)
      assert.are.equal(case[2], res.status, res.body)
      assert.are.equal(case[3], decoded(res).error.code)
      assert.is_false(decoded(res).ok)
      assert.are.equal("no-store", res.headers["cache-control"])
    end
    local bad = decoded(run(function()
      return live:http(post("/__clank/views/counter/sessions", { start = "secret-value" }))
    end))
    assert.are.same({ { path = { "start" }, message = "Expected a finite number.", expected = "number" } },
      bad.error.details)
    assert.is_nil(json.encode(bad):find("secret-value", 1, true))
  end)

  it("refuses props over 2 KiB as canonical JSON", function()
    local Big = clank.defineView { name = "big", props = s.object { text = s.string() },
      render = function() return h.p() end }
    local live = live_mod.new { app = clank.app { name = "t", views = { Big } }, secret = "k" }
    local res = run(function()
      return live:http(post("/__clank/views/big/sessions", { text = ("x"):rep(2100) }))
    end)
    assert.are.equal(413, res.status)
    assert.are.equal("PAYLOAD_TOO_LARGE", decoded(res).error.code)
  end)

  it("answers 404 Session not found for an unknown session", function()
    local res = run(function() return new_live():http(get("/__clank/sessions/bogus/surface")) end)
    assert.are.equal(404, res.status)
    assert.are.equal('{"error":{"code":"NOT_FOUND","message":"Session not found."},"ok":false}', res.body)
    assert.are.equal("no-store", res.headers["cache-control"])
  end)

  it("inspects, activates and types through the surface, after the handler finished", function()
    local live = new_live()
    local id = decoded(run(function()
      return live:http(post("/__clank/views/counter/sessions", { start = 1 }))
    end)).id
    local base = "/__clank/sessions/" .. id .. "/surface"
    local nodes = decoded(run(function() return live:http(get(base)) end)).nodes[1].children -- the div's
    assert.are.equal("1", nodes[1].label)
    local res = run(function() return live:http(post(base .. "/activate", { id = "inc" })) end)
    assert.are.equal(200, res.status)
    local body = decoded(res)
    assert.is_true(body.ok)
    assert.are.equal("2", body.nodes[1].children[1].label)
    body = decoded(run(function() return live:http(post(base .. "/input", { id = "name", value = "abc" })) end))
    assert.is_true(body.ok)
    assert.are.equal("3", body.nodes[1].children[1].label)
    body = decoded(run(function() return live:http(post(base .. "/activate", { id = "missing" })) end))
    assert.is_false(body.ok)
    res = run(function() return live:http(post(base .. "/input", { id = "name" })) end)
    assert.are.equal(422, res.status)
  end)

  it("mounts a page's session on its first surface call", function()
    local live = new_live()
    local page = run(function()
      return live:page({ method = "GET", url = "/?start=7", path = "/", query = { start = "7" }, headers = {} })
    end)
    local id = page.body:match('data%-clank%-session="([%w_%-]+)"')
    assert.are.equal(0, live:sessions())
    local nodes = decoded(run(function() return live:http(get("/__clank/sessions/" .. id .. "/surface")) end)).nodes
    assert.are.equal("7", nodes[1].children[1].label)
    assert.are.equal(1, live:sessions())
  end)

  it("asks for confirmation as §5 does", function()
    local live = new_live()
    local id = decoded(run(function()
      return live:http(post("/__clank/views/counter/sessions", { start = 0 }))
    end)).id
    local path = "/__clank/sessions/" .. id .. "/surface/activate"
    removed = 0
    local res = run(function() return live:http(post(path, { id = "remove" })) end)
    assert.are.equal(428, res.status)
    assert.are.same({ code = "CONFIRMATION_REQUIRED", message = "This action requires explicit confirmation.",
      details = { confirm = "Remove the item." } }, decoded(res).error)
    assert.are.equal(0, removed)
    res = run(function()
      return live:http(post(path, { id = "remove" }, { ["x-clank-confirmation"] = "confirmed" }))
    end)
    assert.are.equal(200, res.status)
    assert.are.equal(1, removed)
  end)

  -- issue 34: the input is checked before confirmation is asked for, and the 428 says what a
  -- person would confirm, in the action's words for that call.
  it("answers an invalid input with its issues, and asks confirmation only of a valid one", function()
    local renamed = {}
    local rename = clank.defineAction { name = "items.rename", description = "Rename the item.",
      input = s.object { title = s.string { min = 1 } }, sideEffects = "write",
      confirm = function(input) return "Rename it to \u{201c}" .. input.title .. "\u{201d}?" end,
      handler = function(input) renamed[#renamed + 1] = input.title end }
    local Rename = clank.defineView { name = "rename",
      load = function()
        return { form = clank.createForm { id = "r", schema = rename.input, action = rename } }
      end,
      render = function(_, d) return d.form:render() end }
    local live = live_mod.new { app = clank.app { name = "t", views = { Rename }, actions = { rename } },
      secret = "spec-secret" }
    local id = decoded(run(function() return live:http(post("/__clank/views/rename/sessions", {})) end)).id
    local base = "/__clank/sessions/" .. id .. "/surface/"
    local res = run(function() return live:http(post(base .. "activate", { id = "r.submit" })) end)
    assert.are.equal(200, res.status)
    -- found wherever they sit (SPEC §9: elements that are not kept wrap the kept ones)
    local function find(nodes, pred)
      for _, n in ipairs(nodes or {}) do
        if pred(n) then return n end
        local inner = find(n.children, pred)
        if inner then return inner end
      end
    end
    local title = find(decoded(res).nodes, function(n) return n.id == "r.title" end)
    assert.are.same({ "r.title", true }, { title.id, title.invalid })
    local alert = find(decoded(res).nodes, function(n) return n.role == "alert" end)
    assert.are.same({ tag = "p", role = "alert", label = "Required." }, { tag = alert.tag, role = alert.role,
      label = alert.label })
    run(function() return live:http(post(base .. "input", { id = "r.title", value = "Pen" })) end)
    res = run(function() return live:http(post(base .. "activate", { id = "r.submit" })) end)
    assert.are.equal(428, res.status)
    assert.are.same({ confirm = "Rename it to \u{201c}Pen\u{201d}?" }, decoded(res).error.details)
    assert.are.same({}, renamed)
    res = run(function()
      return live:http(post(base .. "activate", { id = "r.submit" }, { ["x-clank-confirmation"] = "confirmed" }))
    end)
    assert.are.equal(200, res.status)
    assert.are.same({ "Pen" }, renamed)
  end)

  it("ends a session idleMs after its last surface call", function()
    local live = new_live { idleMs = 1000, maxIdle = 10 }
    live:tick(1000)
    local id = decoded(run(function()
      return live:http(post("/__clank/views/counter/sessions", { start = 0 }))
    end)).id
    live:tick(1800)
    run(function() return live:http(get("/__clank/sessions/" .. id .. "/surface")) end)
    live:tick(2500)
    assert.are.equal(1, live:sessions())
    live:tick(2801)
    assert.are.equal(0, live:sessions())
  end)
end)
