-- clank.live pages and session tokens (SPEC §11): GET / and /views/:name answer a whole HTML
-- page holding a signed session token; a page load keeps no state.
local clank = require "clank"
local live_mod = require "clank.live"
local token = require "clank.live.token"
local h, s = clank.h, clank.schema

-- Runs fn in a runtime task (as clank-run runs page and http) and returns its result.
local harness = require "helpers.live_socket"
local run, fake_socket = harness.run, harness.fake_socket

local function request(url, extra)
  local path, query = url:match("^([^?]*)%??(.*)$")
  local q = {}
  for k, v in query:gmatch("([^&=]+)=([^&]*)") do q[k] = v end
  local r = { method = "GET", url = url, path = path, query = q, headers = {}, scheme = "http" }
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end

local Hello = clank.defineView {
  name = "hello", description = "Say hello",
  props = s.object { name = s.string(), times = s.optional(s.number { integer = true }), loud = s.optional(s.boolean()),
    tags = s.optional(s.array(s.string())) },
  render = function(props)
    return h.p(nil, "Hello ", props.name, props.loud and "!" or nil)
  end,
}
local Plain = clank.defineView { name = "plain", render = function() return h.main(nil, "plain") end }

local CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
  .. "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
  .. "form-action 'self'"

local function new_live(app_fields, opts)
  local def = { name = "t", views = { Hello, Plain } }
  for k, v in pairs(app_fields or {}) do def[k] = v end
  local o = { app = clank.app(def), secret = "spec-secret" }
  for k, v in pairs(opts or {}) do o[k] = v end
  return live_mod.new(o)
end

describe("clank.live page", function()
  it("answers a whole page with the view rendered in the root div", function()
    local live = new_live { page = { stylesheets = { "/app.css", "/x.css?a=1&b=2" } } }
    local res = run(function() return live:page(request("/?name=Ada")) end)
    assert.are.equal(200, res.status)
    local id = res.body:match('data%-clank%-session="([%w_%-]+)"')
    assert.is_not_nil(id)
    assert.are.equal(table.concat {
      '<!doctype html><html lang="en"><head><meta charset="utf-8">',
      '<meta name="viewport" content="width=device-width, initial-scale=1">',
      '<title>Say hello</title>',
      '<link rel="stylesheet" href="/app.css"><link rel="stylesheet" href="/x.css?a=1&amp;b=2">',
      '</head><body><div data-clank-root data-clank-session="', id, '"><p>Hello Ada</p></div>',
      '<script src="', require("clank.live.page").scriptPath(), '" defer></script></body></html>',
    }, res.body)
  end)

  it("sends the headers of a page", function()
    local res = run(function() return new_live():page(request("/views/plain")) end)
    assert.are.same({
      ["content-type"] = "text/html; charset=utf-8",
      ["cache-control"] = "no-store",
      ["content-security-policy"] = CSP,
      ["referrer-policy"] = "same-origin",
    }, res.headers)
  end)

  it("extends each CSP directive with app.page.csp", function()
    local live = new_live { page = { csp = { ["img-src"] = { "https://cdn.example" },
      ["frame-ancestors"] = { "https://host.example" } } } }
    local res = run(function() return live:page(request("/views/plain")) end)
    assert.are.equal("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
      .. "img-src 'self' data: https://cdn.example; connect-src 'self'; "
      .. "frame-ancestors https://host.example; base-uri 'none'; form-action 'self'",
      res.headers["content-security-policy"])
  end)

  it("titles a view without a description by its name", function()
    local res = run(function() return new_live():page(request("/views/plain")) end)
    assert.truthy(res.body:find("<title>plain</title>", 1, true))
  end)

  it("answers 404 for an unknown view", function()
    local res = run(function() return new_live():page(request("/views/nope")) end)
    assert.are.equal(404, res.status)
    assert.are.equal("text/html; charset=utf-8", res.headers["content-type"])
  end)

  it("keeps no state", function()
    local live = new_live()
    run(function() return live:page(request("/?name=Ada")) end)
    run(function() return live:page(request("/views/plain")) end)
    assert.are.equal(0, live:sessions())
  end)

  describe("props from the query", function()
    local seen
    local Props = clank.defineView {
      name = "props", props = s.object { n = s.number(), i = s.optional(s.number { integer = true }), b = s.boolean(),
        list = s.array(s.number()), e = s.optional(s.enum { "x", "y" }) },
      render = function(props) seen = props return h.p(nil, "ok") end,
    }

    it("coerces numbers, booleans and repeated keys for arrays; unknown names are left out", function()
      local live = new_live { views = { Props } }
      local res = run(function()
        return live:page(request("/views/props?n=2.5&b=true&list=1&list=2&utm_source=x&e="))
      end)
      assert.are.equal(200, res.status)
      assert.are.same({ n = 2.5, b = true, list = { 1, 2 } }, seen)
    end)

    it("answers 400 naming the issues when the props are invalid", function()
      local res = run(function() return new_live():page(request("/?times=two")) end)
      assert.are.equal(400, res.status)
      assert.truthy(res.body:find("name: Expected a string.", 1, true), res.body)
      assert.truthy(res.body:find("times: ", 1, true), res.body)
      assert.are.equal(CSP, res.headers["content-security-policy"])
    end)

    it("answers 400 when the props exceed 2 KiB as canonical JSON", function()
      local ok = run(function() return new_live():page(request("/?name=" .. ("a"):rep(2030))) end)
      assert.are.equal(200, ok.status) -- {"name":"aaa…"} is 2041 bytes
      local res = run(function() return new_live():page(request("/?name=" .. ("a"):rep(2040))) end)
      assert.are.equal(400, res.status)
    end)
  end)

  it("runs load with the props and the request's context, and renders its data", function()
    local got
    local Loaded = clank.defineView {
      name = "loaded", props = s.object { id = s.number { integer = true } },
      load = function(props, ctx)
        got = { id = props.id, user = ctx.user }
        clank.sleep(1)
        return { title = "Item " .. props.id }
      end,
      render = function(_, data) return h.h1(nil, data.title) end,
    }
    local live = new_live { views = { Loaded }, context = function(r) return { user = r.headers.user } end }
    local res = run(function() return live:page(request("/views/loaded?id=7", { headers = { user = "u1" } })) end)
    assert.are.same({ id = 7, user = "u1" }, got)
    assert.truthy(res.body:find("<h1>Item 7</h1>", 1, true))
  end)
end)

describe("clank.live session tokens", function()
  it("verifies what it signed, and nothing tampered with", function()
    local id = token.sign("k", "hello", { name = "Ada" }, nil, 1000)
    local claims = token.verify("k", id, nil, 1000)
    assert.are.same({ view = "hello", props = { name = "Ada" }, time = 1000 }, claims)
    assert.is_nil(token.verify("other", id, nil, 1000))
    local raw = token.decode64(id)
    local forged = token.encode64(raw:gsub("Ada", "Eve"))
    assert.is_nil(token.verify("k", forged, nil, 1000))
    assert.is_nil(token.verify("k", id:sub(1, -2), nil, 1000))
    assert.is_nil(token.verify("k", "not a token!", nil, 1000))
  end)

  it("carries a 128-bit nonce: two tokens for the same page differ", function()
    assert.are_not.equal(token.sign("k", "v", {}, nil, 1), token.sign("k", "v", {}, nil, 1))
  end)

  it("round-trips base64url", function()
    for _, str in ipairs { "", "f", "fo", "foo", "foob", "\255\254\253\0" } do
      assert.are.equal(str, token.decode64(token.encode64(str)))
    end
    assert.are.equal("-_8", token.encode64("\251\255"))
  end)

  it("is unknown after 24 hours (an injectable clock)", function()
    local now = 1000000
    local live = new_live(nil, { clock = function() return now end })
    local res = run(function() return live:page(request("/?name=Ada")) end)
    local id = res.body:match('data%-clank%-session="([%w_%-]+)"')
    now = now + 24 * 3600 + 1
    local sock = fake_socket()
    live:connect(id, request("/"), sock)
    assert.are.same({ code = 4404, reason = "unknown session" }, sock.closed)
    now = now - 2
    local fresh = fake_socket()
    live:connect(id, request("/"), fresh)
    assert.is_nil(fresh.closed)
    assert.are.equal("html", fresh.frames[1].t)
  end)

  it("is unknown when the principal differs from the request's", function()
    local live = new_live { principal = function(r) return r.headers.user end }
    local res = run(function() return live:page(request("/?name=Ada", { headers = { user = "u1" } })) end)
    local id = res.body:match('data%-clank%-session="([%w_%-]+)"')
    local other = fake_socket()
    live:connect(id, request("/", { headers = { user = "u2" } }), other)
    assert.are.equal(4404, other.closed.code)
    local nobody = fake_socket()
    live:connect(id, request("/", { headers = {} }), nobody)
    assert.are.equal(4404, nobody.closed.code)
    local same = fake_socket()
    live:connect(id, request("/", { headers = { user = "u1" } }), same)
    assert.is_nil(same.closed)
  end)
end)
