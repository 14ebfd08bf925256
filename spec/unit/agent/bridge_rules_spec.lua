-- The rules of SPEC §5 as clank.bridge exports them, so clank.mcp and clank.app use the bridge's
-- own rules instead of copies: media type (step 7), origin (step 3), the error envelope (step 9),
-- ctx (step 8), reserved paths (§2), duplicate action names and the default action timeout.
-- Every expected value is written from the SPEC.
local clank = require "clank"
local bridge = require "clank.bridge"
local json = require "clank.json"
local s = clank.schema

local HOST = "127.0.0.1:8080"
local SELF = "http://127.0.0.1:8080"
local FOREIGN = "http://localhost:5173"

local function request(headers, scheme)
  local h = { host = HOST }
  for k, v in pairs(headers or {}) do
    if v == false then h[k] = nil else h[k] = v end
  end
  return { method = "POST", url = "/actions/x", path = "/actions/x", headers = h,
           scheme = scheme or "http" }
end

describe("clank.bridge rules", function()
  describe("isJsonMediaType", function()
    local cases = {
      { "application/json", true },
      { "application/json; charset=utf-8", true },
      { "application/json;charset=UTF-8", true },
      { "Application/JSON", true },
      { "APPLICATION/JSON; CHARSET=UTF-8", true },
      { "application/json ; charset=utf-8", true },
      { "application/merge-patch+json", true },
      { "application/vnd.api+json; ext=bulk", true },
      { "Application/Problem+JSON", true },
      { "text/json", false },
      { "text/plain", false },
      { "application/jsonp", false },
      { "application/json-patch", false },
      { "application/json+xml", false },
      { "application/x-www-form-urlencoded", false },
      { "multipart/form-data; boundary=x", false },
      { "json", false },
      { "+json", false },
      { "", false },
    }
    for _, case in ipairs(cases) do
      it((case[2] and "accepts " or "rejects ") .. "'" .. case[1] .. "'", function()
        assert.are.equal(case[2], bridge.isJsonMediaType(case[1]))
      end)
    end

    it("rejects a missing or non-string content type", function()
      assert.is_false(bridge.isJsonMediaType(nil))
      assert.is_false(bridge.isJsonMediaType(42))
      assert.is_false(bridge.isJsonMediaType({}))
    end)
  end)

  describe("checkOrigin", function()
    local allowed = { FOREIGN }
    -- { name, headers, scheme, allowedOrigins, requireOrigin, ok, cors origin }
    local cases = {
      { "no origin header", {}, nil, allowed, false, true, nil },
      { "the server's own origin", { origin = SELF }, nil, allowed, false, true, nil },
      { "its own origin over https", { origin = "https://" .. HOST }, "https", allowed, false, true, nil },
      { "a scheme other than the request's", { origin = "https://" .. HOST }, nil, allowed, false,
        false, nil },
      { "a listed foreign origin", { origin = FOREIGN }, nil, allowed, false, true, FOREIGN },
      { "an unlisted foreign origin", { origin = "http://evil.example" }, nil, allowed, false,
        false, nil },
      { "a listed origin with a trailing slash (exact match only)", { origin = FOREIGN .. "/" }, nil,
        allowed, false, false, nil },
      { "a listed origin in other case (exact match only)", { origin = "HTTP://LOCALHOST:5173" }, nil,
        allowed, false, false, nil },
      { "the origin null", { origin = "null" }, nil, allowed, false, false, nil },
      { "a foreign origin with no allowedOrigins", { origin = FOREIGN }, nil, nil, false, false, nil },
      { "sec-fetch-site: cross-site with its own origin", { origin = SELF,
        ["sec-fetch-site"] = "cross-site" }, nil, allowed, false, false, nil },
      { "sec-fetch-site: cross-site with a listed origin", { origin = FOREIGN,
        ["sec-fetch-site"] = "cross-site" }, nil, allowed, false, false, nil },
      { "sec-fetch-site: cross-site without origin", { ["sec-fetch-site"] = "cross-site" }, nil,
        allowed, false, false, nil },
      { "sec-fetch-site: same-origin", { origin = SELF, ["sec-fetch-site"] = "same-origin" }, nil,
        allowed, false, true, nil },
      { "no origin when requireOrigin", {}, nil, allowed, true, false, nil },
      { "its own origin when requireOrigin", { origin = SELF }, nil, allowed, true, true, nil },
      { "a listed origin when requireOrigin", { origin = FOREIGN }, nil, allowed, true, true, FOREIGN },
    }
    for _, case in ipairs(cases) do
      it((case[6] and "lets through " or "refuses ") .. case[1], function()
        local ok, cors = bridge.checkOrigin(request(case[2], case[3]), case[4], case[5])
        assert.are.equal(case[6], ok)
        assert.are.equal(case[7], cors)
      end)
    end

    it("takes the origin from a request without a scheme as http", function()
      local req = request({ origin = SELF })
      req.scheme = nil
      assert.is_true((bridge.checkOrigin(req, {})))
    end)
  end)

  describe("errorEnvelope", function()
    local Notes = s.object { tags = s.array(s.string()), pin = s.optional(s.string { max = 2 }) }

    local function validation_error(schema, value)
      local r = schema:safeParse(value)
      assert.is_false(r.success)
      return r.error
    end

    it("maps the input's ValidationError to 422 INVALID_INPUT with 0-based paths", function()
      local env, log = bridge.errorEnvelope(validation_error(Notes, { tags = { "a", 5 } }))
      assert.is_nil(log)
      assert.are.equal(422, env.status)
      assert.are.equal("INVALID_INPUT", env.code)
      assert.are.equal("tags.1: Expected a string.", env.message)
      assert.are.equal('[{"expected":"string","message":"Expected a string.","path":["tags",1]}]',
        json.encode(env.details))
    end)

    it("gives the root issue the path [] and the message prefix value", function()
      local env = bridge.errorEnvelope(validation_error(s.string(), 5))
      assert.are.equal("value: Expected a string.", env.message)
      assert.are.equal('[{"expected":"string","message":"Expected a string.","path":[]}]',
        json.encode(env.details))
    end)

    it("never shows input values", function()
      local env = bridge.errorEnvelope(validation_error(Notes, { tags = {}, pin = "SECRET-PIN" }),
        { exposeErrors = true })
      assert.are.equal(422, env.status)
      assert.is_nil(json.encode(env):find("SECRET", 1, true))
    end)

    it("puts pathPrefix before every path (MCP's wrapped inputs)", function()
      local env = bridge.errorEnvelope(validation_error(s.string(), 5), { pathPrefix = "value" })
      assert.are.equal("value: Expected a string.", env.message)
      assert.are.equal('[{"expected":"string","message":"Expected a string.","path":["value"]}]',
        json.encode(env.details))
      env = bridge.errorEnvelope(validation_error(s.array(s.string()), { "a", 5 }),
        { pathPrefix = "value" })
      assert.are.equal("value.1: Expected a string.", env.message)
      assert.are.equal('[{"expected":"string","message":"Expected a string.","path":["value",1]}]',
        json.encode(env.details))
    end)

    it("leaves the error's own issues as they are", function()
      local err = validation_error(s.array(s.string()), { "a", 5 })
      bridge.errorEnvelope(err, { pathPrefix = "value" })
      assert.are.same({ 2 }, err.issues[1].path)
    end)

    it("maps an ActionError to its status, code, message and details", function()
      local env, log = bridge.errorEnvelope(clank.ActionError("NOTE_EXISTS", "A note exists.", 409,
        { title = "dup" }))
      assert.is_nil(log)
      assert.are.same({ status = 409, code = "NOTE_EXISTS", message = "A note exists.",
                        details = { title = "dup" } }, env)
      env = bridge.errorEnvelope(clank.ActionError("BAD", "Bad."))
      assert.are.same({ status = 400, code = "BAD", message = "Bad." }, env)
    end)

    it("maps anything else to 500 ACTION_FAILED and returns the real error for the log", function()
      local env, log = bridge.errorEnvelope("db password is SECRET-BOOM")
      assert.are.same({ status = 500, code = "ACTION_FAILED", message = "The action failed." }, env)
      assert.truthy(log:find("SECRET-BOOM", 1, true))
      env, log = bridge.errorEnvelope({ "a table" })
      assert.are.same({ status = 500, code = "ACTION_FAILED", message = "The action failed." }, env)
      assert.is_string(log)
    end)

    it("shows the real message only with exposeErrors", function()
      local env, log = bridge.errorEnvelope("boom", { exposeErrors = true })
      assert.are.same({ status = 500, code = "ACTION_FAILED", message = "boom" }, env)
      assert.truthy(log:find("boom", 1, true))
      env = bridge.errorEnvelope("boom", { exposeErrors = false })
      assert.are.equal("The action failed.", env.message)
    end)

    it("logs a handler's error with its traceback, and exposes only its message", function()
      local failing = clank.defineAction {
        name = "spec.fail", description = "Fails.", input = s.object {},
        handler = function() error("deep failure") end,
      }
      local ok, err = pcall(failing, {}, {})
      assert.is_false(ok)
      local env, log = bridge.errorEnvelope(err, { exposeErrors = true })
      assert.truthy(log:find("deep failure", 1, true), log)
      assert.truthy(log:find("stack traceback:", 1, true), log)
      assert.truthy(env.message:find("deep failure", 1, true), env.message)
      assert.is_nil(env.message:find("stack traceback", 1, true))
    end)
  end)

  describe("context", function()
    local req = request({})

    it("copies a table's fields and sets request", function()
      local source = { user = "ann", request = "not this" }
      local ctx = bridge.context(source, req)
      assert.are.same({ user = "ann", request = req }, ctx)
      assert.are_not.equal(source, ctx)
    end)

    it("calls a function with the request and copies what it returns", function()
      local seen
      local ctx = bridge.context(function(r) seen = r; return { user = "bob" } end, req)
      assert.are.equal(req, seen)
      assert.are.same({ user = "bob", request = req }, ctx)
    end)

    it("gives just the request for nil or a function returning nothing", function()
      assert.are.same({ request = req }, bridge.context(nil, req))
      assert.are.same({ request = req }, bridge.context(function() end, req))
    end)

    it("lets the context function wait", function()
      local waiting = clank.defineAction {
        name = "spec.ctx", description = "Builds a ctx.", sideEffects = "none", input = s.unknown(),
        handler = function()
          return bridge.context(function() clank.sleep(1); return { slept = true } end, req)
        end,
      }
      assert.are.same({ slept = true, request = req }, waiting(nil, {}))
    end)

    it("passes the context function's error on unchanged", function()
      local e = clank.ActionError("NO_USER", "No user.", 401)
      local ok, err = pcall(bridge.context, function() error(e) end, req)
      assert.is_false(ok)
      assert.are.equal(e, err)
    end)
  end)

  describe("isReservedPath", function()
    local cases = {
      { "/manifest", false, true },
      { "/.well-known/clank", false, true },
      { "/actions/notes.add", false, true },
      { "/actions/", false, true },
      { "/__clank/mcp", false, true },
      { "/__clank/", false, true },
      { "/views/list", false, true },
      { "/", true, true },
      { "/", false, false },
      { "/manifest/x", false, false },
      { "/api/manifest", false, false },
      { "/actions", false, false },
      { "/about", true, false },
    }
    for _, case in ipairs(cases) do
      it((case[3] and "reserves " or "leaves ") .. case[1] .. (case[2] and " (with views)" or ""),
        function()
          assert.are.equal(case[3], bridge.isReservedPath(case[1], case[2]))
        end)
    end
  end)

  describe("actionsByName", function()
    local function action(name)
      return clank.defineAction { name = name, description = "An action.", input = s.object {},
                                  handler = function() end }
    end
    local a, b = action("notes.add"), action("notes.list")

    it("indexes actions by name", function()
      assert.are.same({ ["notes.add"] = a, ["notes.list"] = b }, bridge.actionsByName({ a, b }))
    end)

    it("names a duplicate, and an item that is not an action", function()
      assert.are.same({ nil, "duplicate action name 'notes.add'" },
        { bridge.actionsByName({ a, b, action("notes.add") }) })
      assert.are.same({ nil, "actions[2] is not an action (clank.defineAction)" },
        { bridge.actionsByName({ a, {} }) })
    end)

    it("is the rule clank.app and createAgentBridge raise with", function()
      local ok, err = pcall(clank.app, { actions = { a, action("notes.add") } })
      assert.is_false(ok)
      assert.matches("clank.app: duplicate action name 'notes.add'", err, 1, true)
      ok, err = pcall(clank.createAgentBridge, { a, action("notes.add") })
      assert.is_false(ok)
      assert.matches("clank.createAgentBridge: duplicate action name 'notes.add'", err, 1, true)
    end)
  end)

  it("exports the default action timeout, 30000 ms, once", function()
    assert.are.equal(30000, bridge.DEFAULT_ACTION_TIMEOUT)
    assert.are.equal("integer", math.type(bridge.DEFAULT_ACTION_TIMEOUT))
  end)

  it("exports the default maxRequestBytes, 65536, once", function()
    assert.are.equal(65536, bridge.DEFAULT_MAX_REQUEST_BYTES)
  end)

  it("reads a JSON body as step 7 does, for the endpoints that read one as the bridge does", function()
    local function read(ctype, body, max)
      return { bridge.readJsonBody({ headers = { ["content-type"] = ctype }, body = body }, max or 16) }
    end
    local ok = read("application/json; charset=utf-8", '{"a":[1]}')
    assert.are.equal(1, ok[1].a[1])
    assert.are.equal(1, read("application/vnd.api+json", "[]")[1] and 1)
    local MEDIA = { 415, "UNSUPPORTED_MEDIA_TYPE", "Expected an application/json request body." }
    local NO_BODY = { 400, "INVALID_JSON", "A JSON request body is required." }
    local NOT_JSON = { 400, "INVALID_JSON", "Request body is not valid JSON." }
    for _, case in ipairs {
      { "text/plain", "{}", MEDIA },
      { nil, "{}", MEDIA },
      { "application/json", nil, NO_BODY },
      { "application/json", "", NO_BODY },
      { "application/json", '"' .. ("x"):rep(15) .. '"',
        { 413, "PAYLOAD_TOO_LARGE", "Request body exceeds 16 bytes." } },
      { "application/json", '"' .. string.char(0xff) .. '"',
        { 400, "INVALID_ENCODING", "Request body must be valid UTF-8." } },
      { "application/json", "{", NOT_JSON },
      { "application/json", "[1,]", NOT_JSON },
    } do
      local got = read(case[1], case[2])
      assert.are.same({ nil, case[3][1], case[3][2], case[3][3] }, { got[1], got[2], got[3], got[4] },
        tostring(case[1]) .. " " .. tostring(case[2]))
    end
  end)
end)
