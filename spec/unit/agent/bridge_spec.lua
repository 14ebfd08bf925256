-- clank.createAgentBridge in process: manifest(), invoke() and the nine steps
-- of handle() (SPEC §5, with §3 for messages and §4 for actions). Every
-- expected status, code, message, header and body is written from the SPEC.
local clank = require "clank"
local answers = require "helpers.bridge"
local s = clank.schema

local HOST = "127.0.0.1:8080"
local SELF = "http://127.0.0.1:8080" -- scheme .. "://" .. headers.host
local FOREIGN = "http://localhost:5173" -- listed in allowedOrigins below

--------------------------------------------------------------------------------
-- Helpers

-- A request as SPEC §2 shapes it. headers: a map; a false value removes a
-- default (host, content-type for POST, content-length).
local function request(method, target, headers, body)
  local h = { host = HOST }
  if method == "POST" then
    h["content-type"] = "application/json"
  end
  if body then
    h["content-length"] = tostring(#body)
  end
  for k, v in pairs(headers or {}) do
    if v == false then h[k] = nil else h[k] = v end
  end
  local path = target:match("^[^?]*")
  local query = {}
  for k, v in (target:match("%?(.*)$") or ""):gmatch("([^&=]+)=([^&]*)") do
    query[k] = v
  end
  return { method = method, url = target, path = path, query = query, headers = h, body = body,
           scheme = "http" }
end

local function post(target, body, headers)
  return request("POST", target, headers, body)
end

local failure_body, assert_json_type = answers.failure_body, answers.assert_json_type
local assert_failure, assert_ok = answers.assert_failure, answers.assert_ok

local function assert_no_body(res)
  assert.is_true(res.body == nil or res.body == "", "unexpected body: " .. tostring(res.body))
end

--------------------------------------------------------------------------------
-- Actions

local NotesInput = s.object { text = s.string { min = 1 }, tags = s.optional(s.array(s.string())) }
local Note = s.object { id = s.string(), text = s.string(), tags = s.array(s.string()) }

local notes_add = clank.defineAction {
  name = "notes.add", description = "Add one note.", input = NotesInput, output = Note,
  sideEffects = "write", confirmation = "never",
  handler = function(input) return { id = "n1", text = input.text, tags = input.tags or {} } end,
}

local notes_list = clank.defineAction {
  name = "notes.list", description = "List the notes.", input = s.object {},
  output = s.array(s.string()), sideEffects = "read",
  handler = function() return {} end,
}

local notes_delete = clank.defineAction {
  name = "notes.delete", description = "Delete one note.", input = s.object { id = s.string() },
  sideEffects = "destructive",
  handler = function(input) return { deleted = input.id } end,
}

local seen_ctx -- the ctx the last ctx.probe call saw
local ctx_probe = clank.defineAction {
  name = "ctx.probe", description = "Reports its ctx.", input = s.object {}, sideEffects = "read",
  handler = function(_, ctx)
    seen_ctx = ctx
    return { user = ctx.user or "none" }
  end,
}

local guarded = clank.defineAction {
  name = "guarded", description = "Only for ann.", input = s.object {}, sideEffects = "read",
  authorize = function(_, ctx) return ctx.user == "ann" end,
  handler = function() return { fine = true } end,
}

local fail_lua = clank.defineAction {
  name = "fail.lua", description = "Raises a Lua error.", input = s.object {}, sideEffects = "read",
  handler = function() error("db password hunter2 leaked") end,
}

local fail_table = clank.defineAction {
  name = "fail.table", description = "Raises a plain table.", input = s.object {}, sideEffects = "read",
  handler = function() error({ secret = "hunter2" }) end,
}

local fail_output = clank.defineAction {
  name = "fail.output", description = "Returns a bad output.", input = s.object {},
  output = s.object { id = s.string() }, sideEffects = "read",
  handler = function() return { id = 1 } end,
}

local fail_validation = clank.defineAction {
  name = "fail.validation", description = "Raises a ValidationError.", input = s.object {},
  sideEffects = "read",
  handler = function() return s.object { n = s.number() }:parse({ n = "hunter2" }) end,
}

local fail_custom = clank.defineAction {
  name = "fail.custom", description = "Raises an ActionError.", input = s.object {}, sideEffects = "read",
  handler = function()
    error(clank.ActionError("NOTE_EXISTS", "A note with this text exists.", 409, { text = "dup" }))
  end,
}

local fail_plain = clank.defineAction {
  name = "fail.plain", description = "Raises an ActionError with the default status.",
  input = s.object {}, sideEffects = "read",
  handler = function() error(clank.ActionError("NOPE", "Nope.")) end,
}

local secret = clank.defineAction {
  name = "secret", description = "Takes secrets.", sideEffects = "read",
  input = s.object {
    password = s.string { min = 20, format = "password" },
    pin = s.optional(s.number { integer = true }),
    role = s.optional(s.enum { "admin", "user" }),
    code = s.optional(s.string { pattern = "^%d+$" }),
    flag = s.optional(s.literal(true)),
  },
  handler = function() return { ok = true } end,
}

local abort_reasons = {} -- what slow's signal reported through onAbort
local slow = clank.defineAction {
  name = "slow", description = "Sleeps.", input = s.object { ms = s.number { integer = true } },
  sideEffects = "read",
  handler = function(input, ctx)
    if ctx.signal then -- invoke() passes the ctx as given
      ctx.signal:onAbort(function() abort_reasons[#abort_reasons + 1] = ctx.signal.reason end)
    end
    clank.sleep(input.ms)
    return { slept = input.ms }
  end,
}

local numbers = clank.defineAction {
  name = "numbers", description = "Returns numbers.", input = s.object {}, sideEffects = "read",
  handler = function()
    return { big = math.maxinteger, small = math.mininteger, tenth = 0.1, two53 = 2.0 ^ 53,
             huge = 1e308, tiny = 5e-324, negzero = -0.0, whole = 3.0 }
  end,
}

local all = { numbers, notes_add, notes_list, notes_delete, ctx_probe, guarded, fail_lua, fail_table,
              fail_output, fail_validation, fail_custom, fail_plain, secret, slow }

local function new_bridge(opts)
  local o = { name = "notes", description = "Notes for the specs.", allowedOrigins = { FOREIGN } }
  for k, v in pairs(opts or {}) do o[k] = v end
  return clank.createAgentBridge(all, o)
end

local bridge = new_bridge()

local ADD_MANIFEST = '{"confirmation":"never","description":"Add one note.","inputSchema":'
  .. '{"additionalProperties":false,"properties":{"tags":{"items":{"type":"string"},"type":"array"},'
  .. '"text":{"minLength":1,"type":"string"}},"required":["text"],"type":"object"},"name":"notes.add",'
  .. '"outputSchema":{"additionalProperties":false,"properties":{"id":{"type":"string"},'
  .. '"tags":{"items":{"type":"string"},"type":"array"},"text":{"type":"string"}},'
  .. '"required":["id","tags","text"],"type":"object"},"sideEffects":"write"}'
local LIST_MANIFEST = '{"confirmation":"write","description":"List the notes.","inputSchema":'
  .. '{"additionalProperties":false,"properties":{},"required":[],"type":"object"},"name":"notes.list",'
  .. '"outputSchema":{"items":{"type":"string"},"type":"array"},"sideEffects":"read"}'
local SMALL_MANIFEST = '{"actions":[' .. ADD_MANIFEST .. "," .. LIST_MANIFEST .. '],'
  .. '"description":"Notes for the specs.","name":"notes","protocol":"clank-agent/1"}'

local function small_bridge()
  return clank.createAgentBridge({ notes_list, notes_add },
    { name = "notes", description = "Notes for the specs." })
end

--------------------------------------------------------------------------------

describe("clank.bridge", function()
  describe("createAgentBridge", function()
    it("raises on duplicate action names, naming the action", function()
      local again = clank.defineAction {
        name = "notes.add", description = "Another.", input = s.object {}, handler = function() end,
      }
      local ok, err = pcall(clank.createAgentBridge, { notes_add, again })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("notes.add", 1, true), "message: " .. tostring(err))
    end)

    it("accepts an empty list of actions", function()
      local b = clank.createAgentBridge({})
      assert.are.same({ protocol = "clank-agent/1", actions = {} }, b:manifest())
    end)
  end)

  describe("manifest()", function()
    it("is { protocol, actions, name, description } with the actions' manifests sorted by name", function()
      local m = small_bridge():manifest()
      assert.are.same({
        protocol = "clank-agent/1",
        name = "notes",
        description = "Notes for the specs.",
        actions = { notes_add.manifest, notes_list.manifest },
      }, m)
    end)

    it("sorts action names in byte order", function()
      local function named(name)
        return clank.defineAction { name = name, description = "x", input = s.object {},
                                    handler = function() end }
      end
      local b = clank.createAgentBridge({ named("b"), named("a"), named("B"), named("A.b"), named("A") })
      local names = {}
      for i, a in ipairs(b:manifest().actions) do names[i] = a.name end
      assert.are.same({ "A", "A.b", "B", "a", "b" }, names)
    end)

    it("leaves name and description out when they are not given", function()
      local m = clank.createAgentBridge({ notes_list }):manifest()
      assert.is_nil(m.name)
      assert.is_nil(m.description)
      assert.is_nil(m.views)
      assert.are.equal("clank-agent/1", m.protocol)
      assert.are.same({ notes_list.manifest }, m.actions)
    end)

    it("lists views' viewManifests sorted by name when there are views", function()
      local list = clank.defineView { name = "TaskList", description = "All tasks.",
        render = function() return clank.h.ul() end }
      local card = clank.defineView { name = "TaskCard", description = "One task.",
        props = s.object { id = s.string() }, render = function() return clank.h.div() end }
      local m = clank.createAgentBridge({ notes_list }, { views = { list, card } }):manifest()
      assert.are.same({
        { name = "TaskCard", description = "One task.",
          propsSchema = { type = "object", properties = { id = { type = "string" } },
                          required = { "id" }, additionalProperties = false } },
        { name = "TaskList", description = "All tasks." },
      }, m.views)
      assert.are.equal(
        '[{"description":"One task.","name":"TaskCard","propsSchema":{"additionalProperties":false,'
          .. '"properties":{"id":{"type":"string"}},"required":["id"],"type":"object"}},'
          .. '{"description":"All tasks.","name":"TaskList"}]',
        clank.json.encode(m.views))
    end)
  end)

  describe("invoke()", function()
    it("runs one action in process and returns its output", function()
      assert.are.same({ id = "n1", text = "hi", tags = { "a" } },
        bridge:invoke("notes.add", { text = "hi", tags = { "a" } }, {}))
    end)

    it("passes the ctx to the action", function()
      assert.are.same({ user = "ann" }, bridge:invoke("ctx.probe", {}, { user = "ann" }))
    end)

    it("waits for a handler that sleeps", function()
      assert.are.same({ slept = 20 }, bridge:invoke("slow", { ms = 20 }, {}))
    end)

    it("raises NOT_FOUND `Unknown action: <name>` 404 for an unknown name", function()
      local ok, err = pcall(bridge.invoke, bridge, "notes.nope", {}, {})
      assert.is_false(ok)
      assert.is_true(clank.isActionError(err), "not an ActionError: " .. tostring(err))
      assert.are.equal("NOT_FOUND", err.code)
      assert.are.equal("Unknown action: notes.nope", err.message)
      assert.are.equal(404, err.status)
    end)

    it("raises the input's ValidationError as is", function()
      local ok, err = pcall(bridge.invoke, bridge, "notes.add", { text = "" }, {})
      assert.is_false(ok)
      assert.is_true(s.isValidationError(err))
      assert.are.equal("text: Must contain at least 1 character.", tostring(err))
    end)

    it("raises a handler's ActionError as is", function()
      local ok, err = pcall(bridge.invoke, bridge, "fail.custom", {}, {})
      assert.is_false(ok)
      assert.are.equal("NOTE_EXISTS", err.code)
      assert.are.equal(409, err.status)
    end)

    -- In a live view's request the person did not confirm (issue 34): the input is checked, then
    -- the person asked through the request's ask, with the action's words for the call.
    describe("in a request that was not confirmed", function()
      local runner = require "clank.runner"
      local removed
      local remove = clank.defineAction { name = "notes.remove", description = "Remove one note.",
        input = s.object { id = s.string { min = 1 } }, sideEffects = "destructive",
        confirm = function(input) return "Remove note " .. input.id .. "?" end,
        handler = function(input) removed[#removed + 1] = input.id return { removed = true } end }
      local b = clank.createAgentBridge({ remove })

      -- bridge:invoke("notes.remove", input) in a task bound to an unconfirmed request → ok,
      -- value, the texts asked.
      local function invoke_bound(input, answer)
        removed = {}
        local asked = {}
        local ask = answer ~= nil and function(text)
          asked[#asked + 1] = text
          clank.sleep(2)
          return answer
        end or nil
        local driver = clank.defineAction { name = "t.drive", description = "d", sideEffects = "none",
          input = s.object {}, handler = function()
            local co = coroutine.running()
            runner.bindRequest(co, { confirmed = false }, ask)
            local ok, v = pcall(b.invoke, b, "notes.remove", input, {})
            runner.bindRequest(co, nil)
            return { r = { ok, v } }
          end }
        local r = driver({}, {}).r
        return r[1], r[2], asked
      end

      it("runs the action when the person says yes", function()
        local ok, out, asked = invoke_bound({ id = "n7" }, true)
        assert.is_true(ok)
        assert.are.same({ removed = true }, out)
        assert.are.same({ "Remove note n7?" }, asked)
        assert.are.same({ "n7" }, removed)
      end)

      it("raises CONFIRMATION_REQUIRED 'The action was not confirmed.' when they say no", function()
        local ok, err, asked = invoke_bound({ id = "n7" }, false)
        assert.is_false(ok)
        assert.are.same({ true, "CONFIRMATION_REQUIRED", "The action was not confirmed.", 428 },
          { clank.isActionError(err), err.code, err.message, err.status })
        assert.are.same({ "Remove note n7?" }, asked)
        assert.are.same({}, removed)
      end)

      it("raises the input's ValidationError without asking", function()
        local ok, err, asked = invoke_bound({ id = "" }, true)
        assert.is_false(ok)
        assert.are.equal("id: Must contain at least 1 character.", tostring(err))
        assert.are.same({}, asked)
      end)

      it("without ask, raises CONFIRMATION_REQUIRED after the input check", function()
        local ok, err = invoke_bound({ id = "" })
        assert.is_false(ok)
        assert.are.equal("id: Must contain at least 1 character.", tostring(err))
        ok, err = invoke_bound({ id = "n7" })
        assert.is_false(ok)
        assert.are.same({ true, "CONFIRMATION_REQUIRED", "This action requires explicit confirmation.", 428 },
          { clank.isActionError(err), err.code, err.message, err.status })
        assert.are.same({}, removed)
      end)
    end)
  end)

  describe("handle() step 1, the manifest", function()
    for _, path in ipairs({ "/manifest", "/.well-known/clank", "/api/manifest", "/api/v1/.well-known/clank",
                            "/manifest?x=1" }) do
      it("answers GET " .. path .. " with 200, the canonical manifest, no-cache and an etag", function()
        local res = small_bridge():handle(request("GET", path))
        assert.are.equal(200, res.status)
        assert.are.equal(SMALL_MANIFEST, res.body)
        assert_json_type(res)
        assert.are.equal("no-cache", res.headers["cache-control"])
        assert.are.equal(answers.etag(SMALL_MANIFEST), res.headers.etag)
      end)
    end

    it("answers GET /actions/manifest with the manifest (step 1 comes first)", function()
      local res = small_bridge():handle(request("GET", "/actions/manifest"))
      assert.are.equal(200, res.status)
      assert.are.equal(SMALL_MANIFEST, res.body)
    end)

    it("serves the same bytes as clank.json.encode(bridge:manifest())", function()
      local b = small_bridge()
      assert.are.equal(clank.json.encode(b:manifest()), b:handle(request("GET", "/manifest")).body)
    end)

    it("encodes an empty list of actions as an array", function()
      local res = clank.createAgentBridge({}):handle(request("GET", "/manifest"))
      assert.are.equal('{"actions":[],"protocol":"clank-agent/1"}', res.body)
      assert.are.equal(answers.etag(res.body), res.headers.etag)
    end)

    it("gives another contract another etag", function()
      local a = small_bridge():handle(request("GET", "/manifest")).headers.etag
      local b = clank.createAgentBridge({ notes_add }):handle(request("GET", "/manifest")).headers.etag
      assert.are_not.equal(a, b)
    end)

    it("serves the manifest to any origin (step 1 comes before the origin check)", function()
      local res = small_bridge():handle(request("GET", "/manifest",
        { origin = "http://evil.example", ["sec-fetch-site"] = "cross-site" }))
      assert.are.equal(200, res.status)
      assert.are.equal(SMALL_MANIFEST, res.body)
    end)

    local etag = answers.etag(SMALL_MANIFEST)
    local matching = {
      { "the etag itself", etag },
      { "a list holding it", '"0000000000000000", ' .. etag },
      { "a list holding it without spaces", '"0000000000000000",' .. etag .. ',"1111111111111111"' },
      { "*", "*" },
      { "its weak form (weak comparison)", "W/" .. etag },
      { "a list holding its weak form", '"0000000000000000", W/' .. etag },
    }
    for _, case in ipairs(matching) do
      it("answers If-None-Match with " .. case[1] .. " with 304, the etag and no body", function()
        local res = small_bridge():handle(request("GET", "/manifest", { ["if-none-match"] = case[2] }))
        assert.are.equal(304, res.status)
        assert.are.equal(etag, res.headers.etag)
        assert_no_body(res)
      end)
    end

    for _, value in ipairs({ '"0000000000000000"', etag:sub(2, -2), '"' .. etag:sub(2, -3) .. '0"' }) do
      it("answers If-None-Match " .. value .. " that does not match with 200", function()
        local res = small_bridge():handle(request("GET", "/manifest", { ["if-none-match"] = value }))
        assert.are.equal(200, res.status)
        assert.are.equal(SMALL_MANIFEST, res.body)
      end)
    end
  end)

  describe("handle() step 2, methods and CORS preflight", function()
    it("answers OPTIONS on an action path from an allowed origin with 204 and the CORS headers", function()
      local res = bridge:handle(request("OPTIONS", "/actions/notes.add", {
        origin = FOREIGN,
        ["access-control-request-method"] = "POST",
        ["access-control-request-headers"] = "content-type",
      }))
      assert.are.equal(204, res.status)
      assert.are.equal(FOREIGN, res.headers["access-control-allow-origin"])
      assert.are.equal("POST", res.headers["access-control-allow-methods"])
      assert.are.equal("content-type, x-clank-confirmation", res.headers["access-control-allow-headers"])
      assert.are.equal("Origin", res.headers["vary"])
      assert_no_body(res)
    end)

    it("answers the preflight before looking at the name (an unknown action gets 204 too)", function()
      local res = bridge:handle(request("OPTIONS", "/actions/no.such.action", { origin = FOREIGN }))
      assert.are.equal(204, res.status)
      assert.are.equal(FOREIGN, res.headers["access-control-allow-origin"])
    end)

    local not_found = {
      { "OPTIONS on an action path from an origin not allowed", "OPTIONS", "/actions/notes.add",
        { origin = "http://localhost:5174" } },
      { "OPTIONS on an action path without an origin", "OPTIONS", "/actions/notes.add", {} },
      { "OPTIONS on the server's own origin", "OPTIONS", "/actions/notes.add", { origin = SELF } },
      { "OPTIONS on the manifest", "OPTIONS", "/manifest", { origin = FOREIGN } },
      { "GET on an action path", "GET", "/actions/notes.add", {} },
      { "HEAD on an action path", "HEAD", "/actions/notes.add", {} },
      { "PUT on an action path", "PUT", "/actions/notes.add", {} },
      { "DELETE on an action path", "DELETE", "/actions/notes.add", {} },
      { "PATCH on an action path", "PATCH", "/actions/notes.add", {} },
      { "POST on the manifest", "POST", "/manifest", {} },
      { "HEAD on the manifest", "HEAD", "/manifest", {} },
      { "POST on a path that is neither", "POST", "/notes.add", {} },
      { "GET on /manifest/ (trailing slash)", "GET", "/manifest/", {} },
      { "GET on /xmanifest", "GET", "/xmanifest", {} },
      { "GET /", "GET", "/", {} },
    }
    for _, case in ipairs(not_found) do
      it("answers " .. case[1] .. " with 404 NOT_FOUND `Agent endpoint not found.`", function()
        local body = case[2] == "POST" and '{"text":"x"}' or nil
        local res = bridge:handle(request(case[2], case[3], case[4], body))
        assert_failure(res, 404, "NOT_FOUND", "Agent endpoint not found.")
      end)
    end

    it("answers a method that is not POST with 404 before checking the origin", function()
      local res = bridge:handle(request("GET", "/actions/notes.add",
        { origin = "http://evil.example", ["sec-fetch-site"] = "cross-site" }))
      assert_failure(res, 404, "NOT_FOUND", "Agent endpoint not found.")
    end)
  end)

  describe("handle() step 3, the origin", function()
    it("answers sec-fetch-site: cross-site with 403 ORIGIN_MISMATCH", function()
      local res = bridge:handle(post("/actions/notes.add", '{"text":"x"}', { ["sec-fetch-site"] = "cross-site" }))
      assert_failure(res, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.")
    end)

    for _, site in ipairs({ "same-origin", "same-site", "none" }) do
      it("lets sec-fetch-site: " .. site .. " through", function()
        local res = bridge:handle(post("/actions/notes.add", '{"text":"x"}', { ["sec-fetch-site"] = site }))
        assert_ok(res, '{"id":"n1","tags":[],"text":"x"}')
      end)
    end

    local refused = {
      "http://localhost:5174",
      FOREIGN .. "/",
      "https://localhost:5173",
      "http://127.0.0.1:8081",
      "https://127.0.0.1:8080",
      SELF .. "/",
      "null",
      "http://evil.example",
    }
    for _, origin in ipairs(refused) do
      it("answers origin " .. origin .. " (neither its own nor allowed, exactly) with 403", function()
        local res = bridge:handle(post("/actions/notes.add", '{"text":"x"}', { origin = origin }))
        assert_failure(res, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.")
      end)
    end

    it("lets the server's own origin (scheme://host) through", function()
      local res = bridge:handle(post("/actions/notes.add", '{"text":"x"}', { origin = SELF }))
      assert_ok(res, '{"id":"n1","tags":[],"text":"x"}')
    end)

    it("compares the own origin exactly (an origin in another case is refused)", function()
      local res = bridge:handle(post("/actions/notes.add", '{"text":"x"}',
        { host = "localhost:8080", origin = "http://LOCALHOST:8080" }))
      assert_failure(res, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.")
    end)

    it("derives its own origin from the request's scheme and host", function()
      local req = post("/actions/notes.add", '{"text":"x"}',
        { host = "example.test:9000", origin = "https://example.test:9000" })
      req.scheme = "https"
      assert_ok(bridge:handle(req), '{"id":"n1","tags":[],"text":"x"}')
    end)

    it("answers an allowed foreign origin with access-control-allow-origin and vary: Origin", function()
      local res = bridge:handle(post("/actions/notes.add", '{"text":"x"}', { origin = FOREIGN }))
      assert_ok(res, '{"id":"n1","tags":[],"text":"x"}')
      assert.are.equal(FOREIGN, res.headers["access-control-allow-origin"])
      assert.are.equal("Origin", res.headers["vary"])
    end)

    it("adds the CORS headers to a later failure for an allowed foreign origin", function()
      local res = bridge:handle(post("/actions/nope", '{}', { origin = FOREIGN }))
      assert_failure(res, 404, "NOT_FOUND", "Action not found.")
      assert.are.equal(FOREIGN, res.headers["access-control-allow-origin"])
      assert.are.equal("Origin", res.headers["vary"])
    end)

    it("lets a request without origin through unless requireOrigin", function()
      assert_ok(bridge:handle(post("/actions/notes.add", '{"text":"x"}')), '{"id":"n1","tags":[],"text":"x"}')
    end)

    it("answers a request without origin with 403 when requireOrigin", function()
      local strict = new_bridge { requireOrigin = true }
      local res = strict:handle(post("/actions/notes.add", '{"text":"x"}'))
      assert_failure(res, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.")
      assert_ok(strict:handle(post("/actions/notes.add", '{"text":"x"}', { origin = SELF })),
        '{"id":"n1","tags":[],"text":"x"}')
      assert_ok(strict:handle(post("/actions/notes.add", '{"text":"x"}', { origin = FOREIGN })),
        '{"id":"n1","tags":[],"text":"x"}')
    end)

    it("checks the origin before the path, the name and the confirmation", function()
      for _, target in ipairs({ "/actions/%zz", "/actions/nope", "/actions/notes.delete" }) do
        local res = bridge:handle(post(target, "not json", { origin = "http://evil.example" }))
        assert_failure(res, 403, "ORIGIN_MISMATCH", "Cross-origin agent request rejected.")
      end
    end)
  end)

  describe("handle() step 4, the path", function()
    local decoded = {
      { "an escaped dot", "/actions/notes%2Eadd" },
      { "a lower-case escape", "/actions/notes%2eadd" },
      { "an escaped letter", "/actions/%6Eotes.add" },
      { "a prefix before /actions/", "/api/actions/notes.add" },
      { "the rest after the last /actions/", "/actions/v1/actions/notes.add" },
    }
    for _, case in ipairs(decoded) do
      it("finds the action through " .. case[1], function()
        assert_ok(bridge:handle(post(case[2], '{"text":"x"}')), '{"id":"n1","tags":[],"text":"x"}')
      end)
    end

    local bad = {
      { "a non-hex escape", "/actions/%zz" },
      { "a truncated escape", "/actions/notes%2" },
      { "a lone %", "/actions/%" },
      { "an escape of invalid UTF-8", "/actions/%FF" },
      { "an escape of a truncated UTF-8 sequence", "/actions/%C3" },
      { "an escape of an encoded surrogate", "/actions/%ED%A0%80" },
    }
    for _, case in ipairs(bad) do
      it("answers " .. case[1] .. " with 400 INVALID_PATH", function()
        local res = bridge:handle(post(case[2], '{"text":"x"}'))
        assert_failure(res, 400, "INVALID_PATH", "The action path is not valid URL encoding.")
      end)
    end

    it("keeps + literal (no action is named `notes add`, nor can one be named `notes+add`)", function()
      local res = bridge:handle(post("/actions/notes+add", '{"text":"x"}'))
      assert_failure(res, 404, "NOT_FOUND", "Action not found.")
    end)

    it("answers a bad escape with INVALID_PATH before the confirmation and the body", function()
      local res = bridge:handle(post("/actions/%zz", "not json", { ["content-type"] = "text/plain" }))
      assert_failure(res, 400, "INVALID_PATH", "The action path is not valid URL encoding.")
    end)
  end)

  describe("handle() step 5, the name", function()
    for _, target in ipairs({ "/actions/", "/actions/nope", "/actions/NOTES.ADD", "/actions/notes.add/",
                              "/actions/notes.add%20", "/api/actions/" }) do
      it("answers POST " .. target .. " with 404 NOT_FOUND `Action not found.`", function()
        local res = bridge:handle(post(target, '{"text":"x"}'))
        assert_failure(res, 404, "NOT_FOUND", "Action not found.")
      end)
    end

    it("answers an unknown name before the confirmation and the body", function()
      local res = bridge:handle(post("/actions/nope", nil, { ["content-type"] = "text/plain" }))
      assert_failure(res, 404, "NOT_FOUND", "Action not found.")
    end)
  end)

  describe("handle() step 6, confirmation", function()
    for _, value in ipairs({ false, "", "Confirmed", "CONFIRMED", "yes", "true", "confirmed, confirmed" }) do
      local label = value and ("x-clank-confirmation: " .. value) or "no x-clank-confirmation"
      it("answers a destructive action with " .. label .. " with 428", function()
        local res = bridge:handle(post("/actions/notes.delete", '{"id":"n1"}',
          { ["x-clank-confirmation"] = value }))
        assert_failure(res, 428, "CONFIRMATION_REQUIRED", "This action requires explicit confirmation.")
      end)
    end

    it("answers 428 before the body is looked at (bad type, bad JSON, no body, too large)", function()
      local small = new_bridge { maxRequestBytes = 8 }
      local cases = {
        post("/actions/notes.delete", "not json at all"),
        post("/actions/notes.delete", "{\"id\":\"\255\"}"),
        post("/actions/notes.delete", "not json", { ["content-type"] = "text/plain" }),
        post("/actions/notes.delete", nil),
        post("/actions/notes.delete", nil, { ["content-length"] = "100000" }),
      }
      for _, req in ipairs(cases) do
        assert_failure(small:handle(req), 428, "CONFIRMATION_REQUIRED",
          "This action requires explicit confirmation.")
      end
    end)

    it("runs a destructive action with x-clank-confirmation: confirmed", function()
      local res = bridge:handle(post("/actions/notes.delete", '{"id":"n1"}',
        { ["x-clank-confirmation"] = "confirmed" }))
      assert_ok(res, '{"deleted":"n1"}')
    end)

    it("asks no confirmation of an action that does not require it", function()
      assert_ok(bridge:handle(post("/actions/notes.list", "{}")), "[]")
      assert_ok(bridge:handle(post("/actions/notes.list", "{}", { ["x-clank-confirmation"] = "nope" })), "[]")
    end)
  end)

  describe("handle() step 7, the body", function()
    local accepted = {
      "application/json",
      "application/json; charset=utf-8",
      "application/json;charset=UTF-8",
      "APPLICATION/JSON",
      "Application/Json ; Charset=utf-8",
      "application/vnd.api+json",
      "application/merge-patch+json; charset=utf-8",
      "application/problem+JSON",
    }
    for _, ct in ipairs(accepted) do
      it("accepts content-type " .. ct, function()
        local res = bridge:handle(post("/actions/notes.add", '{"text":"x"}', { ["content-type"] = ct }))
        assert_ok(res, '{"id":"n1","tags":[],"text":"x"}')
      end)
    end

    local refused = {
      false, "", "text/plain", "text/json", "application/x-www-form-urlencoded", "multipart/form-data",
      "application/jsonx", "application/json-seq", "application/xml", "json",
    }
    for _, ct in ipairs(refused) do
      it("answers content-type " .. (ct and ("`" .. ct .. "`") or "(none)") .. " with 415", function()
        local res = bridge:handle(post("/actions/notes.add", '{"text":"x"}', { ["content-type"] = ct }))
        assert_failure(res, 415, "UNSUPPORTED_MEDIA_TYPE", "Expected an application/json request body.")
      end)
    end

    it("checks the content type before anything else in the body", function()
      local res = bridge:handle(post("/actions/notes.add", nil, { ["content-type"] = "text/plain" }))
      assert_failure(res, 415, "UNSUPPORTED_MEDIA_TYPE", "Expected an application/json request body.")
      res = bridge:handle(post("/actions/notes.add", "\255", { ["content-type"] = "text/plain" }))
      assert_failure(res, 415, "UNSUPPORTED_MEDIA_TYPE", "Expected an application/json request body.")
    end)

    it("answers no body with 400 INVALID_JSON `A JSON request body is required.`", function()
      local res = bridge:handle(post("/actions/notes.add", nil))
      assert_failure(res, 400, "INVALID_JSON", "A JSON request body is required.")
    end)

    it("answers an empty body with 400 INVALID_JSON", function()
      -- The SPEC does not say whether "" is "no body" or "not JSON"; either
      -- INVALID_JSON message is right.
      local res = bridge:handle(post("/actions/notes.add", ""))
      assert.are.equal(400, res.status)
      assert.is_true(res.body == failure_body("INVALID_JSON", "A JSON request body is required.")
        or res.body == failure_body("INVALID_JSON", "Request body is not valid JSON."), res.body)
    end)

    it("accepts a body of exactly maxRequestBytes and answers one byte more with 413", function()
      local small = new_bridge { maxRequestBytes = 32 }
      local exact = '{"text":"' .. string.rep("x", 21) .. '"}'
      assert.are.equal(32, #exact)
      assert_ok(small:handle(post("/actions/notes.add", exact)),
        '{"id":"n1","tags":[],"text":"' .. string.rep("x", 21) .. '"}')
      local over = '{"text":"' .. string.rep("x", 22) .. '"}'
      assert_failure(small:handle(post("/actions/notes.add", over)), 413, "PAYLOAD_TOO_LARGE",
        "Request body exceeds 32 bytes.")
    end)

    it("counts bytes, not characters", function()
      local small = new_bridge { maxRequestBytes = 32 }
      local body = '{"text":"' .. string.rep("\u{e9}", 11) .. '"}' -- 11 characters, 33 bytes
      assert.are.equal(33, #body)
      assert_failure(small:handle(post("/actions/notes.add", body)), 413, "PAYLOAD_TOO_LARGE",
        "Request body exceeds 32 bytes.")
    end)

    it("answers a content-length over maxRequestBytes with 413 before reading", function()
      local small = new_bridge { maxRequestBytes = 32 }
      local res = small:handle(post("/actions/notes.add", '{"text":"x"}', { ["content-length"] = "1000" }))
      assert_failure(res, 413, "PAYLOAD_TOO_LARGE", "Request body exceeds 32 bytes.")
    end)

    it("defaults maxRequestBytes to 65536", function()
      local exact = '{"text":"' .. string.rep("x", 65536 - 11) .. '"}'
      assert.are.equal(65536, #exact)
      assert.are.equal(200, bridge:handle(post("/actions/notes.add", exact)).status)
      local over = '{"text":"' .. string.rep("x", 65536 - 10) .. '"}'
      assert_failure(bridge:handle(post("/actions/notes.add", over)), 413, "PAYLOAD_TOO_LARGE",
        "Request body exceeds 65536 bytes.")
    end)

    it("checks the size before the encoding", function()
      local small = new_bridge { maxRequestBytes = 8 }
      assert_failure(small:handle(post("/actions/notes.add", '{"text":"\255\255\255"}')), 413,
        "PAYLOAD_TOO_LARGE", "Request body exceeds 8 bytes.")
    end)

    local bad_utf8 = {
      { "a 0xFF byte", '{"text":"\255"}' },
      { "a lone continuation byte", '{"text":"\128"}' },
      { "an overlong encoding", '{"text":"\192\175"}' },
      { "an encoded surrogate", '{"text":"\237\160\128"}' },
      { "a truncated sequence", '{"text":"\226\130"}' },
      { "invalid UTF-8 outside a string", '{"text":"x"}\255' },
    }
    for _, case in ipairs(bad_utf8) do
      it("answers " .. case[1] .. " with 400 INVALID_ENCODING", function()
        local res = bridge:handle(post("/actions/notes.add", case[2]))
        assert_failure(res, 400, "INVALID_ENCODING", "Request body must be valid UTF-8.")
      end)
    end

    local bad_json = {
      '{"text":', "{text:\"x\"}", "{'text':'x'}", '{"text":"x",}', "[1,]", "NaN", "01",
      '{"text":"x"} {}', '{"text":"x"}x', "undefined", '{"n":1.}', '"\\ud800"',
    }
    for _, body in ipairs(bad_json) do
      it("answers the body " .. body .. " with 400 INVALID_JSON `Request body is not valid JSON.`", function()
        local res = bridge:handle(post("/actions/notes.add", body))
        assert_failure(res, 400, "INVALID_JSON", "Request body is not valid JSON.")
      end)
    end

    it("answers a body nested deeper than 64 with 400 INVALID_JSON", function()
      local body = '{"text":"x","tags":' .. string.rep("[", 100) .. string.rep("]", 100) .. "}"
      assert_failure(bridge:handle(post("/actions/notes.add", body)), 400, "INVALID_JSON",
        "Request body is not valid JSON.")
    end)

    for _, body in ipairs({ "[]", "null", '"text"', "1", "true", '["x"]' }) do
      it("answers " .. body .. " for an object schema with 422 `value: Expected an object.`", function()
        local res = bridge:handle(post("/actions/notes.add", body))
        assert_failure(res, 422, "INVALID_INPUT", "value: Expected an object.",
          '[{"expected":"object","message":"Expected an object.","path":[]}]')
      end)
    end
  end)

  describe("handle() step 8, running the action", function()
    it("answers {\"ok\":true,\"output\":...} with canonical JSON", function()
      local res = bridge:handle(post("/actions/notes.add", '{"text":"hello","tags":["b","a"]}'))
      assert.are.equal('{"ok":true,"output":{"id":"n1","tags":["b","a"],"text":"hello"}}', res.body)
      assert.are.equal(200, res.status)
    end)

    it("encodes numbers canonically (exact integers, shortest round-trip floats)", function()
      assert_ok(bridge:handle(post("/actions/numbers", "{}")),
        '{"big":9223372036854775807,"huge":1e+308,"negzero":0,"small":-9223372036854775808,'
          .. '"tenth":0.1,"tiny":5e-324,"two53":9007199254740992,"whole":3}')
    end)

    it("encodes an empty output list as [] guided by the schema", function()
      assert_ok(bridge:handle(post("/actions/notes.list", "{}")), "[]")
      assert_ok(bridge:handle(post("/actions/notes.add", '{"text":"x"}')), '{"id":"n1","tags":[],"text":"x"}')
    end)

    it("runs the action with the ctx given plus ctx.request and ctx.signal", function()
      seen_ctx = nil
      local req = post("/actions/ctx.probe", "{}")
      local res = bridge:handle(req, { user = "ann" })
      assert_ok(res, '{"user":"ann"}')
      assert.are.equal("ann", seen_ctx.user)
      assert.are.equal("POST", seen_ctx.request.method)
      assert.are.equal("/actions/ctx.probe", seen_ctx.request.path)
      assert.are.equal(HOST, seen_ctx.request.headers.host)
      assert.is_false(seen_ctx.signal.aborted)
      assert.is_function(seen_ctx.signal.onAbort)
    end)

    it("waits for a handler that sleeps", function()
      assert_ok(bridge:handle(post("/actions/slow", '{"ms":20}')), '{"slept":20}')
    end)

    it("answers 504 TIMEOUT at the action timeout and aborts the signal with reason timeout", function()
      local quick = new_bridge { actionTimeout = 50 }
      local before = #abort_reasons
      local res = quick:handle(post("/actions/slow", '{"ms":300}'))
      assert_failure(res, 504, "TIMEOUT", "The action timed out.")
      assert.are.equal(before + 1, #abort_reasons)
      assert.are.equal("timeout", abort_reasons[#abort_reasons])
    end)

    it("lets authorize decide with the ctx given", function()
      assert_ok(bridge:handle(post("/actions/guarded", "{}"), { user = "ann" }), '{"fine":true}')
      assert_failure(bridge:handle(post("/actions/guarded", "{}"), { user = "bob" }), 403, "FORBIDDEN",
        "Action is not authorized.")
      assert_failure(bridge:handle(post("/actions/guarded", "{}")), 403, "FORBIDDEN",
        "Action is not authorized.")
    end)
  end)

  describe("handle() step 9, errors", function()
    local invalid = {
      {
        "an item of the wrong type (0-based index)", '{"text":"x","tags":[7]}',
        "tags.0: Expected a string.",
        '[{"expected":"string","message":"Expected a string.","path":["tags",0]}]',
      },
      {
        "two issues in key order", '{"text":"","tags":["a",2]}',
        "tags.1: Expected a string.; text: Must contain at least 1 character.",
        '[{"expected":"string","message":"Expected a string.","path":["tags",1]},'
          .. '{"message":"Must contain at least 1 character.","path":["text"]}]',
      },
      {
        "a missing key", "{}",
        "text: Expected a string.",
        '[{"expected":"string","message":"Expected a string.","path":["text"]}]',
      },
      {
        "an unknown key", '{"text":"x","extra":1}',
        "extra: Unknown property.",
        '[{"message":"Unknown property.","path":["extra"]}]',
      },
      {
        "a null where an array is expected", '{"text":"x","tags":null}',
        "tags: Expected an array.",
        '[{"expected":"array","message":"Expected an array.","path":["tags"]}]',
      },
    }
    for _, case in ipairs(invalid) do
      it("answers " .. case[1] .. " with 422 INVALID_INPUT, the message and details", function()
        local res = bridge:handle(post("/actions/notes.add", case[2]))
        assert_failure(res, 422, "INVALID_INPUT", case[3], case[4])
      end)
    end

    it("reports at most 100 issues", function()
      local tags = {}
      for i = 1, 150 do tags[i] = tostring(i) end
      local res = bridge:handle(post("/actions/notes.add", '{"text":"x","tags":[' .. table.concat(tags, ",") .. "]}"))
      assert.are.equal(422, res.status)
      local decoded = assert(clank.json.decode(res.body))
      local details = decoded.error.details
      assert.are.equal(100, #details)
      assert.are.same({ "tags", 0 }, { details[1].path[1], details[1].path[2] })
      assert.are.same({ "tags", 99 }, { details[100].path[1], details[100].path[2] })
      local parts = {}
      for i = 0, 99 do parts[#parts + 1] = "tags." .. i .. ": Expected a string." end
      assert.are.equal(table.concat(parts, "; "), decoded.error.message)
    end)

    it("never puts an input value in the response", function()
      local body = '{"password":"SECRET-1","pin":"SECRET-2","role":"SECRET-3","code":"SECRET-4",'
        .. '"flag":"SECRET-5"}'
      local res = bridge:handle(post("/actions/secret", body))
      assert_failure(res, 422, "INVALID_INPUT",
        "code: Must match ^%d+$.; flag: Expected true.; password: Must contain at least 20 characters.; "
          .. "pin: Expected a finite number.; role: Expected one of: admin, user.",
        '[{"message":"Must match ^%d+$.","path":["code"]},'
          .. '{"expected":"true","message":"Expected true.","path":["flag"]},'
          .. '{"message":"Must contain at least 20 characters.","path":["password"]},'
          .. '{"expected":"number","message":"Expected a finite number.","path":["pin"]},'
          .. '{"expected":"enum","message":"Expected one of: admin, user.","path":["role"]}]')
      assert.is_nil(res.body:find("SECRET", 1, true))
      for name, value in pairs(res.headers) do
        assert.is_nil(tostring(value):find("SECRET", 1, true), "header " .. name .. " holds an input value")
      end
    end)

    it("never puts a number or a short secret of the wrong type in the response", function()
      local res = bridge:handle(post("/actions/secret", '{"password":987654321,"pin":13.25}'))
      assert_failure(res, 422, "INVALID_INPUT", "password: Expected a string.; pin: Expected an integer.",
        '[{"expected":"string","message":"Expected a string.","path":["password"]},'
          .. '{"expected":"integer","message":"Expected an integer.","path":["pin"]}]')
      assert.is_nil(res.body:find("987654321", 1, true))
      assert.is_nil(res.body:find("13.25", 1, true))
    end)

    for _, name in ipairs({ "fail.lua", "fail.table", "fail.output", "fail.validation" }) do
      it("answers " .. name .. " with 500 ACTION_FAILED and no trace of the real error", function()
        local res = bridge:handle(post("/actions/" .. name, "{}"))
        assert_failure(res, 500, "ACTION_FAILED", "The action failed.")
        assert.is_nil(res.body:find("hunter2", 1, true))
      end)
    end

    it("exposes the real error's text with exposeErrors", function()
      local open = new_bridge { exposeErrors = true }
      local res = open:handle(post("/actions/fail.lua", "{}"))
      assert.are.equal(500, res.status)
      assert.are.equal("no-store", res.headers["cache-control"])
      assert.truthy(res.body:find('"code":"ACTION_FAILED"', 1, true), res.body)
      assert.truthy(res.body:find("db password hunter2 leaked", 1, true), res.body)
    end)

    it("still hides input values with exposeErrors", function()
      local open = new_bridge { exposeErrors = true }
      local res = open:handle(post("/actions/secret", '{"password":"SECRET-1"}'))
      assert.are.equal(422, res.status)
      assert.is_nil(res.body:find("SECRET", 1, true))
    end)

    it("answers an ActionError with its status, code, message and details", function()
      local res = bridge:handle(post("/actions/fail.custom", "{}"))
      assert_failure(res, 409, "NOTE_EXISTS", "A note with this text exists.", '{"text":"dup"}')
    end)

    it("answers an ActionError without details with 400 and leaves details out", function()
      local res = bridge:handle(post("/actions/fail.plain", "{}"))
      assert_failure(res, 400, "NOPE", "Nope.")
    end)
  end)
end)
