-- Errors in the browser (SPEC §11, issue 34): clank.live.errors reads an error's text into what
-- a page in development shows, and a live object made with dev = true sends it as
-- {"t":"dev-error"} frames; without dev (production) the pages get only generic messages.
local clank = require "clank"
local live_mod = require "clank.live"
local errors = require "clank.live.errors"
local token = require "clank.live.token"
local json = clank.json
local h = clank.h
local signal = clank.signal

local harness = require "helpers.live_socket"
local run, fake_socket = harness.run, harness.fake_socket

local REQUEST = { method = "GET", url = "/", path = "/", query = {}, headers = {} }
local SPEC = debug.getinfo(1, "S").short_src -- this file, as tracebacks name it
-- the folder the runtime's modules come from, as chunk names spell it
local RUNTIME = assert(package.searchpath("clank.live.errors", package.path)):match("^(.*/)clank/")

local function event(seq, v, key, type_)
  return json.encode({ t = "event", seq = seq, v = v, key = key, type = type_ })
end

local broken = false -- the render raises while set
local Counter = clank.defineView {
  name = "counter",
  load = function() return { n = signal.signal(0) } end,
  render = function(_, data)
    if broken then error("render broke") end -- line 29
    return h.div(nil,
      h.output({ id = "n" }, data.n.value),
      h.button({ agentId = "inc", onClick = function() data.n.value = data.n.value + 1 end }, "Add"),
      h.button({ agentId = "boom", onClick = function() error("boom on purpose") end }, "Fail")) -- line 33
  end,
}

local function new_live(dev)
  return live_mod.new { app = clank.app { name = "t", views = { Counter } }, secret = "spec-secret",
    dev = dev }
end

local function session_id()
  return token.sign("spec-secret", "counter", {}, nil, os.time())
end

local function frames_of(sock, t)
  local out = {}
  for _, f in ipairs(sock.frames) do
    if f.t == t then out[#out + 1] = f end
  end
  return out
end

describe("clank.live.errors.report", function()
  it("reads the message, its file:line and the frames, the runtime's and C's told from the app's", function()
    local text = table.concat({
      "/srv/app/app.lua:12: attempt to index a nil value (field 'x')",
      "stack traceback:",
      "\t[C]: in function 'error'",
      "\t/srv/app/app.lua:12: in upvalue 'render'",
      "\t(...tail calls...)",
      "\t" .. RUNTIME .. "clank/ui/memo.lua:118: in function 'clank.ui.memo.within'",
      "\t[C]: in function 'xpcall'",
      "\t/srv/app/store.lua:40: in function </srv/app/store.lua:38>",
      "\t[C]: in function 'clank.core.pcallAtomic'",
      "\t[C]: in ?",
    }, "\n")
    local r = errors.report(text)
    assert.are.equal("attempt to index a nil value (field 'x')", r.message)
    assert.are.equal("/srv/app/app.lua", r.file)
    assert.are.equal(12, r.line)
    assert.are.same({
      { file = "/srv/app/app.lua", line = 12, name = "upvalue 'render'", app = true },
      { name = "(...tail calls...)", app = false },
      { file = RUNTIME .. "clank/ui/memo.lua", line = 118, name = "function 'clank.ui.memo.within'", app = false },
      { file = "/srv/app/store.lua", line = 40, name = "function </srv/app/store.lua:38>", app = true },
      { file = "[C]", name = "function 'clank.core.pcallAtomic'", app = false },
    }, r.frames)
    assert.is_true(json.isArray(r.frames))
  end)

  it("places an error raised without a position at the first of the app's frames", function()
    local r = errors.report("no database\nstack traceback:\n\t[C]: in function 'error'\n"
      .. "\t" .. RUNTIME .. "clank/db.lua:10: in function 'clank.db.open'\n\t/srv/app/app.lua:3: in main chunk")
    assert.are.same({ "no database", "/srv/app/app.lua", 3 }, { r.message, r.file, r.line })
  end)

  it("tells a runtime file Lua shortened to ... and its end", function()
    local shortened = "..." .. (RUNTIME .. "clank/live/init.lua"):sub(-40)
    assert.is_true(errors.runtimeFile(RUNTIME .. "clank/live/init.lua"))
    assert.is_true(errors.runtimeFile(shortened))
    assert.is_false(errors.runtimeFile("...ne/very/long/folder/of/the/app/app.lua"))
    assert.is_false(errors.runtimeFile("/srv/app/app.lua"))
  end)

  it("reads an error without a traceback, a table's by its code", function()
    assert.are.same({ message = "plain", frames = {} }, errors.report("plain"))
    local r = errors.report(setmetatable({ code = "CONFLICT", message = "Taken." }, {}))
    assert.are.equal("CONFLICT: Taken.", r.message)
  end)

  it("keeps the traceback of where a render raised, not of the effect that raised it again", function()
    broken = true
    local ok, err = xpcall(clank.mount, errors.trace, Counter, {}, { data = { n = signal.signal(0) } })
    broken = false
    assert.is_false(ok)
    local r = errors.report(err)
    assert.are.equal("render broke", r.message)
    assert.are.same({ SPEC, 29, true }, { r.frames[1].file, r.frames[1].line, r.frames[1].app })
  end)
end)

describe("clank.live in development", function()
  after_each(function() broken = false end)

  it("sends a handler's error as dev-error, with its file:line and frames, then the generic error", function()
    local live = new_live(true)
    local sock = fake_socket()
    local id = session_id()
    live:connect(id, REQUEST, sock)
    live:receive(id, event(1, 1, "0.2", "click"), sock)
    local dev = frames_of(sock, "dev-error")[1]
    assert.are.same({ "handler", "The click handler of the view counter failed", "boom on purpose", SPEC, 33 },
      { dev.kind, dev.title, dev.message, dev.file, dev.line })
    assert.are.same({ file = SPEC, line = 33, app = true },
      { file = dev.frames[1].file, line = dev.frames[1].line, app = dev.frames[1].app })
    assert.are.equal("error", sock:last().t) -- then the generic one, as in production
    assert.is_nil(sock:last().message:find("boom", 1, true))
  end)

  it("leaves a connection whose mount failed open, and the next generation mounts it", function()
    local live = new_live(true)
    local sock = fake_socket()
    local id = session_id()
    broken = true
    live:connect(id, REQUEST, sock)
    assert.is_nil(sock.closed)
    assert.are.equal(1, #sock.frames)
    local dev = sock.frames[1]
    assert.are.same({ "dev-error", "view", "render broke", SPEC, 29 },
      { dev.t, dev.kind, dev.message, dev.file, dev.line })
    -- its events (a stale page's) go nowhere
    live:receive(id, event(1, 1, "0.1", "click"), sock)
    assert.are.equal(1, #sock.frames)
    -- the save that mends it: the host moves the connection to the new generation
    broken = false
    live:disconnect(id, sock)
    local next_gen = new_live(true)
    next_gen:adopt(id, REQUEST, sock)
    assert.are.same({ "dev-error", "reload", "html", "dev-clear" },
      { sock.frames[1].t, sock.frames[2].t, sock.frames[3].t, sock.frames[4].t })
    assert.truthy(sock.frames[2].html:find('<output id="n">0</output>', 1, true))
  end)

  it("tells every open page that a reload failed, and the pages that open meanwhile", function()
    local live = new_live(true)
    local a, b = fake_socket(), fake_socket()
    live:connect(session_id(), REQUEST, a)
    live:appFailed("/srv/app/app.lua:9: unexpected symbol near 'local'")
    local dev = a:last()
    assert.are.same({ "dev-error", "app", "unexpected symbol near 'local'", "/srv/app/app.lua", 9 },
      { dev.t, dev.kind, dev.message, dev.file, dev.line })
    live:connect(session_id(), REQUEST, b)
    assert.are.same({ "html", "dev-error" }, { b.frames[1].t, b.frames[2].t })
  end)

  it("answers a page whose render fails with the page and the error where the view goes", function()
    broken = true
    local res = run(function() return new_live(true):page(REQUEST) end)
    assert.are.equal(500, res.status)
    assert.truthy(res.body:find('<div data-clank-root data-clank-session="', 1, true), res.body)
    assert.truthy(res.body:find('<pre class="clank-dev-error-page">', 1, true), res.body)
    assert.truthy(res.body:find("render broke", 1, true), res.body)
    assert.truthy(res.body:find('<script src="', 1, true), res.body)
  end)
end)

describe("clank.live in production", function()
  after_each(function() broken = false end)

  it("sends no dev-error, for a handler, a mount or a failed reload", function()
    local live = new_live(false)
    local sock = fake_socket()
    local id = session_id()
    live:connect(id, REQUEST, sock)
    live:receive(id, event(1, 1, "0.2", "click"), sock)
    live:appFailed("/srv/app/app.lua:9: unexpected symbol near 'local'")
    broken = true
    local other = fake_socket()
    live:connect(session_id(), REQUEST, other)
    for _, sk in ipairs({ sock, other }) do
      assert.are.same({}, frames_of(sk, "dev-error"))
      for _, f in ipairs(sk.frames) do
        assert.is_nil(json.encode(f):find("on purpose", 1, true))
        assert.is_nil(json.encode(f):find("render broke", 1, true))
      end
    end
    assert.are.same({ "error", "The view failed to load." }, { other.frames[1].t, other.frames[1].message })
    assert.are.equal(1011, other.closed.code)
  end)

  it("answers a page whose render fails with a generic page", function()
    broken = true
    local res = run(function() return new_live(false):page(REQUEST) end)
    assert.are.equal(500, res.status)
    assert.truthy(res.body:find("<h1>Something went wrong</h1>", 1, true), res.body)
    assert.is_nil(res.body:find("broke", 1, true), res.body)
    assert.is_nil(res.body:find("data-clank-session", 1, true), res.body)
  end)
end)
