-- /__clank/inspector (SPEC §16): only for a loopback peer asking for a loopback Host, unless
-- --inspector HOST opens it for that Host; everyone else gets 404 (it does not exist for them,
-- whatever allowedOrigins say). And clank_action_calls_total (SPEC §15) counts calls made over
-- MCP and from live views, not only the bridge's.
local server = require "helpers.server"
local http = require "helpers.http"
local rpc = require "helpers.mcp"
local json = require "clank.json"

local PAGE = "/__clank/inspector"

-- A non-loopback address of this machine, or nil (then the peer rule cannot be exercised).
local function own_address()
  local p = io.popen("hostname -I 2>/dev/null")
  local out = p and p:read("a") or ""
  if p then p:close() end
  for addr in out:gmatch("%S+") do
    if addr:find("^%d+%.%d+%.%d+%.%d+$") and not addr:find("^127%.") then return addr end
  end
  return nil
end

-- GET path with Host `host` over a connection to `address` (default loopback).
local function get(port, path, host, address)
  local conn = assert(http.connect(port, address))
  assert(conn:send(http.build("GET", path, nil, nil, { host = host })))
  local res = assert(conn:read_response({ method = "GET" }))
  conn:close()
  return res
end

describe("/__clank/inspector access", function()
  local s
  before_each(function() s = nil end)
  after_each(function() if s then assert.are.equal(0, s:stop()) end end)

  it("opens for a loopback peer naming a loopback Host", function()
    s = server.start(server.fixture("live"))
    for _, host in ipairs({ "127.0.0.1:" .. s.port, "localhost", "LOCALHOST:1", "[::1]:" .. s.port }) do
      local res = get(s.port, PAGE, host)
      assert.are.equal(200, res.status, host)
      assert.truthy(res.headers["content-type"]:find("text/html", 1, true))
      assert.truthy(res.body:find('data-clank-session="i.', 1, true))
      assert.truthy(res.body:find("items.add", 1, true))
    end
  end)

  it("is 404 for a Host that is not loopback, even one allowedOrigins lists", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/app.lua", "w"))
    f:write([[
local clank = require "clank"
return clank.app { name = "origins", allowedOrigins = { "https://app.example" },
  routes = { ["GET /hello"] = function() return { status = 200, body = "hi" } end } }
]])
    f:close()
    s = server.start(dir .. "/app.lua")
    assert.are.equal(200, get(s.port, "/hello", "app.example").status) -- §13 lets it through
    local res = get(s.port, PAGE, "app.example")
    assert.are.equal(404, res.status)
    assert.are.equal("Not found.", res.body)
    assert.are.equal(404, get(s.port, "/__clank/sessions/i.abc/live", "app.example").status)
    assert.are.equal(404, get(s.port, PAGE, "evil.example").status) -- not 403
    assert.are.equal(200, get(s.port, PAGE, "localhost").status) -- an app without views
    assert.are.equal(0, s:stop())
    s = nil
    os.remove(dir .. "/app.lua")
    os.remove(dir)
  end)

  it("is 404 for a peer that is not loopback, whatever the Host says", function()
    local addr = own_address()
    if not addr then
      pending("no non-loopback address on this machine")
      return
    end
    s = server.start(server.fixture("live"), { args = { "--host", "0.0.0.0" } })
    assert.are.equal(404, get(s.port, PAGE, "localhost", addr).status)
    assert.are.equal(200, get(s.port, PAGE, "localhost", "127.0.0.1").status)
  end)

  it("opens for the Host --inspector names, from any peer", function()
    local addr = own_address()
    local args = { "--inspector", "inspect.test" }
    if addr then args[#args + 1] = "--host"; args[#args + 1] = "0.0.0.0" end
    s = server.start(server.fixture("live"), { args = args })
    assert.are.equal(200, get(s.port, PAGE, "inspect.test:" .. s.port).status)
    assert.are.equal(200, get(s.port, PAGE, "Inspect.Test").status)
    if addr then
      assert.are.equal(200, get(s.port, PAGE, "inspect.test", addr).status)
      assert.are.equal(404, get(s.port, PAGE, "other.test", addr).status)
    end
    assert.are.equal(404, get(s.port, PAGE, "inspect.test.evil").status)
  end)

  it("lists reloads with their result, and requests without query strings or session tokens", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local app = dir .. "/app.lua"
    local function write(text)
      local f = assert(io.open(app, "w"))
      f:write(text)
      f:close()
    end
    write('return require("clank").app { name = "reloading", routes = { ["GET /a"] = '
      .. 'function() return { status = 200, body = "a" } end } }\n')
    s = server.start(app)
    assert.are.equal(200, get(s.port, "/a?token=hunter2", "localhost").status)
    assert.are.equal(404, get(s.port, "/__clank/sessions/SECRETTOKEN/surface?x=1", "localhost").status)
    s:signal("HUP")
    local function page_after(want)
      local deadline = os.time() + 5
      repeat
        local body = get(s.port, PAGE, "localhost").body
        if body:find(want, 1, true) then return body end
        os.execute("sleep 0.05")
      until os.time() > deadline
      error("the inspector never showed " .. want)
    end
    local body = page_after("<td>ok</td>")
    assert.truthy(body:find("<td>/a</td>", 1, true))
    assert.truthy(body:find("<td>/__clank/sessions/&lt;redacted&gt;/surface</td>", 1, true))
    assert.falsy(body:find("hunter2", 1, true))
    assert.falsy(body:find("SECRETTOKEN", 1, true))
    write("return (\n") -- a syntax error: the reload fails, the old generation keeps serving
    s:signal("HUP")
    body = page_after("<td>failed</td>")
    assert.truthy(body:find("app.lua:", 1, true)) -- the error, with its place
    assert.are.equal(0, s:stop())
    s = nil
    os.remove(app)
    os.remove(dir)
  end)

  it("answers only GET and HEAD at its page", function()
    s = server.start(server.fixture("live"))
    local res = assert(http.request(s.port, "POST", PAGE, { ["content-type"] = "text/plain" }, "x"))
    assert.are.equal(404, res.status)
    res = assert(http.request(s.port, "HEAD", PAGE))
    assert.are.equal(200, res.status)
  end)
end)

-- clank_action_calls_total{action,outcome} as the metrics text has it (0 when absent).
local function calls(port, action, outcome)
  local res = assert(http.get(port, "/__clank/metrics"))
  assert.are.equal(200, res.status)
  local pattern = 'clank_action_calls_total{action="' .. action:gsub("%p", "%%%0")
    .. '",outcome="' .. outcome .. '"} (%d+)'
  return tonumber(res.body:match(pattern)) or 0
end

local function post_json(port, path, body, headers)
  local h = { ["content-type"] = "application/json" }
  for k, v in pairs(headers or {}) do h[k] = v end
  return assert(http.request(port, "POST", path, h, json.encode(body)))
end

describe("clank_action_calls_total", function()
  local s
  before_each(function() s = server.start(server.fixture("live")) end)
  after_each(function() assert.are.equal(0, s:stop()) end)

  it("counts MCP tools/call, by outcome", function()
    local function post(port, message, headers)
      return post_json(port, "/__clank/mcp", message, headers)
    end
    local sid = rpc.initialize(post, s.port)
    local function tool(args, id)
      local res = post(s.port, { jsonrpc = "2.0", id = id, method = "tools/call",
        params = { name = "items_add", arguments = args } },
        { ["mcp-session-id"] = sid, ["mcp-protocol-version"] = "2025-11-25" })
      assert.are.equal(200, res.status, res.body)
    end
    tool({ title = "one" }, 1)
    tool({ title = "two" }, 2)
    tool({ title = "" }, 3) -- invalid input: an error result
    assert.are.equal(2, calls(s.port, "items.add", "ok"))
    assert.are.equal(1, calls(s.port, "items.add", "error"))
    -- tools/list is no call
    post(s.port, { jsonrpc = "2.0", id = 4, method = "tools/list" },
      { ["mcp-session-id"] = sid, ["mcp-protocol-version"] = "2025-11-25" })
    assert.are.equal(3, calls(s.port, "items.add", "ok") + calls(s.port, "items.add", "error"))
  end)

  it("counts the actions a live view's handlers run (here through a surface call)", function()
    local res = post_json(s.port, "/__clank/views/counter/sessions", {})
    assert.are.equal(201, res.status, res.body)
    local id = json.decode(res.body).id
    local path = "/__clank/sessions/" .. id .. "/surface/activate"
    res = post_json(s.port, path, { id = "clear" }, { ["x-clank-confirmation"] = "confirmed" })
    assert.are.equal(200, res.status, res.body)
    assert.are.equal(1, calls(s.port, "items.clear", "ok"))
    assert.are.equal(0, calls(s.port, "items.clear", "error"))
    -- a handler that does not run an action counts nothing
    res = post_json(s.port, "/__clank/sessions/" .. id .. "/surface/activate", { id = "inc" })
    assert.are.equal(200, res.status, res.body)
    assert.are.equal(1, calls(s.port, "items.clear", "ok") + calls(s.port, "items.clear", "error"))
  end)

  it("still counts the bridge's calls once", function()
    local res = post_json(s.port, "/actions/items.add", { title = "x" })
    assert.are.equal(200, res.status, res.body)
    res = post_json(s.port, "/actions/items.add", { title = "" })
    assert.are.equal(422, res.status, res.body)
    assert.are.equal(1, calls(s.port, "items.add", "ok"))
    assert.are.equal(1, calls(s.port, "items.add", "error"))
  end)
end)
