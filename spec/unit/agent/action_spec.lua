-- clank.defineAction and clank.ActionError, in process (SPEC §1, §4).
-- Every expected code, message and status below is written from the SPEC.
local clank = require "clank"
local socket = require "socket"
local s = clank.schema

local NOT_IN_COROUTINE = "clank.sleep: cannot wait here (not in a handler coroutine)"

-- A valid definition; `over` replaces fields (use false to remove one).
local function def(over)
  local d = {
    name = "notes.add",
    description = "Add one note.",
    input = s.object { text = s.string { min = 1 } },
    handler = function(input) return { text = input.text } end,
  }
  for k, v in pairs(over or {}) do
    if v == false then d[k] = nil else d[k] = v end
  end
  return d
end

local raised = require("helpers.errors").raised

local function assert_action_error(err, code, message, status)
  assert.is_true(clank.isActionError(err), "not an ActionError: " .. tostring(err))
  assert.are.equal(code, err.code)
  assert.are.equal(message, err.message)
  assert.are.equal(status, err.status)
end

describe("clank.defineAction", function()
  describe("name", function()
    local accepted = {
      { "a single letter", "a" },
      { "an upper-case letter", "A" },
      { "dotted words", "tasks.create" },
      { "letters, digits, _ . and -", "a9_b.c-D" },
      { "a trailing dot", "a." },
      { "128 bytes", "a" .. string.rep("b", 127) },
    }
    for _, case in ipairs(accepted) do
      it("accepts " .. case[1], function()
        local action = clank.defineAction(def { name = case[2] })
        assert.are.equal(case[2], action.name)
        assert.are.equal(case[2], action.manifest.name)
      end)
    end

    local refused = {
      { "an empty name", "" },
      { "a leading digit", "1a" },
      { "a leading underscore", "_a" },
      { "a leading dot", ".a" },
      { "a leading dash", "-a" },
      { "a space", "a b" },
      { "a slash", "a/b" },
      { "a colon", "a:b" },
      { "a plus", "a+b" },
      { "a non-ASCII letter", "caf\u{e9}" },
      { "a newline at the end", "a\n" },
      { "129 bytes", "a" .. string.rep("b", 128) },
      { "a number", 1 },
      { "a table", {} },
      { "no name at all", false },
    }
    for _, case in ipairs(refused) do
      it("refuses " .. case[1] .. ", naming the field", function()
        local err = raised(clank.defineAction, def { name = case[2] })
        assert.truthy(tostring(err):find("name", 1, true), "message: " .. tostring(err))
      end)
    end
  end)

  describe("description", function()
    it("is kept in the manifest", function()
      local action = clank.defineAction(def { description = "Add one note to the list." })
      assert.are.equal("Add one note to the list.", action.manifest.description)
    end)

    for _, case in ipairs({ { "an empty string", "" }, { "a number", 3 }, { "a table", {} },
                            { "no description", false } }) do
      it("refuses " .. case[1] .. ", naming the field", function()
        local err = raised(clank.defineAction, def { description = case[2] })
        assert.truthy(tostring(err):find("description", 1, true), "message: " .. tostring(err))
      end)
    end
  end)

  -- confirm (issue 34): what a person is asked before a call that needs confirmation.
  describe("confirm and confirmText(input)", function()
    it("defaults to the description", function()
      local action = clank.defineAction(def())
      assert.are.equal("Add one note.", action:confirmText({ text = "x" }))
    end)

    it("is the text given", function()
      local action = clank.defineAction(def { confirm = "Add this note?" })
      assert.are.equal("Add this note?", action:confirmText({ text = "x" }))
    end)

    it("is what confirm(input) returns for that input", function()
      local action = clank.defineAction(def {
        confirm = function(input) return "Archive \u{201c}" .. input.text .. "\u{201d}?" end })
      assert.are.equal("Archive \u{201c}Milk\u{201d}?", action:confirmText({ text = "Milk" }))
      assert.are.equal("Archive \u{201c}Tea\u{201d}?", action:confirmText({ text = "Tea" }))
    end)

    it("raises, naming the action, when confirm(input) returns no text", function()
      for _, bad in ipairs({ false, "", 7 }) do
        local action = clank.defineAction(def { confirm = function() return bad or nil end })
        assert.are.equal("action notes.add: confirm(input) must return a non-empty string (got "
          .. (bad and type(bad) or "nil") .. ")", raised(action.confirmText, action, { text = "x" }))
      end
    end)

    it("raises confirm(input)'s own error", function()
      local action = clank.defineAction(def { confirm = function() error("no title", 0) end })
      assert.are.equal("no title", raised(action.confirmText, action, { text = "x" }))
    end)

    for _, case in ipairs({ { "an empty string", "" }, { "a number", 3 }, { "a table", {} }, { "true", true } }) do
      it("refuses " .. case[1] .. ", naming the field", function()
        assert.are.equal("clank.defineAction: 'confirm' must be a non-empty string or a function",
          tostring(raised(clank.defineAction, def { confirm = case[2] })))
      end)
    end

    it("stays out of the manifest", function()
      local action = clank.defineAction(def { confirm = "Sure?" })
      assert.is_nil(action.manifest.confirm)
    end)
  end)

  describe("sideEffects and confirmation", function()
    for _, value in ipairs({ "none", "read", "write", "destructive" }) do
      it("accepts sideEffects = " .. value, function()
        local action = clank.defineAction(def { sideEffects = value })
        assert.are.equal(value, action.manifest.sideEffects)
      end)
    end

    for _, value in ipairs({ "never", "write", "always" }) do
      it("accepts confirmation = " .. value, function()
        local action = clank.defineAction(def { confirmation = value })
        assert.are.equal(value, action.manifest.confirmation)
      end)
    end

    for _, value in ipairs({ "delete", "", "WRITE", "Read", 1, true }) do
      it("refuses sideEffects = " .. tostring(value) .. ", naming the field", function()
        local err = raised(clank.defineAction, def { sideEffects = value })
        assert.truthy(tostring(err):find("sideEffects", 1, true), "message: " .. tostring(err))
      end)
    end

    for _, value in ipairs({ "sometimes", "", "ALWAYS", "none", 0, true }) do
      it("refuses confirmation = " .. tostring(value) .. ", naming the field", function()
        local err = raised(clank.defineAction, def { confirmation = value })
        assert.truthy(tostring(err):find("confirmation", 1, true), "message: " .. tostring(err))
      end)
    end

    it("defaults sideEffects to write and confirmation to write", function()
      local action = clank.defineAction(def())
      assert.are.equal("write", action.manifest.sideEffects)
      assert.are.equal("write", action.manifest.confirmation)
    end)

    it("defaults confirmation to always for a destructive action", function()
      local action = clank.defineAction(def { sideEffects = "destructive" })
      assert.are.equal("always", action.manifest.confirmation)
    end)

    for _, value in ipairs({ "none", "read", "write" }) do
      it("defaults confirmation to write for sideEffects = " .. value, function()
        local action = clank.defineAction(def { sideEffects = value })
        assert.are.equal("write", action.manifest.confirmation)
      end)
    end

    -- { sideEffects (false = default), confirmation (false = default), required }
    local table_of_cases = {
      { false, false, true },
      { "none", false, false },
      { "read", false, false },
      { "write", false, true },
      { "destructive", false, true },
      { "none", "never", false },
      { "read", "never", false },
      { "write", "never", false },
      { "destructive", "never", false },
      { "none", "write", false },
      { "read", "write", false },
      { "write", "write", true },
      { "destructive", "write", true },
      { "none", "always", true },
      { "read", "always", true },
      { "write", "always", true },
      { "destructive", "always", true },
    }
    for _, case in ipairs(table_of_cases) do
      local label = "sideEffects = " .. (case[1] or "(default)") .. ", confirmation = "
        .. (case[2] or "(default)")
      it((case[3] and "requires" or "does not require") .. " confirmation for " .. label, function()
        local action = clank.defineAction(def { sideEffects = case[1], confirmation = case[2] })
        assert.are.equal(case[3], action:requiresConfirmation())
      end)
    end
  end)

  describe("definition fields", function()
    local refused = {
      { "an input that is not a schema", { input = { text = "string" } }, "input" },
      { "no input", { input = false }, "input" },
      { "an output that is not a schema", { output = {} }, "output" },
      { "an authorize that is not a function", { authorize = true }, "authorize" },
      { "a handler that is not a function", { handler = "run" }, "handler" },
      { "no handler", { handler = false }, "handler" },
    }
    for _, case in ipairs(refused) do
      it("refuses " .. case[1] .. ", naming the field", function()
        local err = raised(clank.defineAction, def(case[2]))
        assert.truthy(tostring(err):find(case[3], 1, true), "message: " .. tostring(err))
      end)
    end

    it("refuses a definition that is not a table", function()
      raised(clank.defineAction, "notes.add")
      raised(clank.defineAction)
    end)
  end)

  describe("manifest", function()
    it("is { name, description, inputSchema, outputSchema, sideEffects, confirmation }", function()
      local action = clank.defineAction {
        name = "tasks.create",
        description = "Create one task in the current workspace.",
        input = s.object { title = s.string { min = 1, max = 80 }, tags = s.optional(s.array(s.string())) },
        output = s.object { id = s.string(), created = s.boolean() },
        sideEffects = "write",
        confirmation = "write",
        handler = function() return { id = "t1", created = true } end,
      }
      assert.are.same({
        name = "tasks.create",
        description = "Create one task in the current workspace.",
        inputSchema = {
          type = "object",
          properties = {
            title = { type = "string", minLength = 1, maxLength = 80 },
            tags = { type = "array", items = { type = "string" } },
          },
          required = { "title" },
          additionalProperties = false,
        },
        outputSchema = {
          type = "object",
          properties = { id = { type = "string" }, created = { type = "boolean" } },
          required = { "created", "id" },
          additionalProperties = false,
        },
        sideEffects = "write",
        confirmation = "write",
      }, action.manifest)
    end)

    it("leaves outputSchema out when there is no output schema", function()
      local action = clank.defineAction(def { sideEffects = "read" })
      assert.are.same({
        name = "notes.add",
        description = "Add one note.",
        inputSchema = {
          type = "object",
          properties = { text = { type = "string", minLength = 1 } },
          required = { "text" },
          additionalProperties = false,
        },
        sideEffects = "read",
        confirmation = "write",
      }, action.manifest)
      assert.is_nil(action.manifest.outputSchema)
    end)

    it("encodes as canonical JSON", function()
      local action = clank.defineAction(def { sideEffects = "destructive" })
      assert.are.equal('{"confirmation":"always","description":"Add one note.",'
        .. '"inputSchema":{"additionalProperties":false,"properties":{"text":{"minLength":1,'
        .. '"type":"string"}},"required":["text"],"type":"object"},"name":"notes.add",'
        .. '"sideEffects":"destructive"}', clank.json.encode(action.manifest))
    end)
  end)

  describe("a call", function()
    it("returns the handler's output and passes the parsed input and the ctx", function()
      local seen = {}
      local action = clank.defineAction(def {
        authorize = function(input, ctx)
          seen.authorize = { input.text, ctx }
          return true
        end,
        handler = function(input, ctx)
          seen.handler = { input.text, ctx }
          return { text = input.text:upper() }
        end,
      })
      local ctx = { user = "ann" }
      local out = action({ text = "hi" }, ctx)
      assert.are.same({ text = "HI" }, out)
      assert.are.equal("hi", seen.authorize[1])
      assert.are.equal(ctx, seen.authorize[2])
      assert.are.equal("hi", seen.handler[1])
      assert.are.equal(ctx, seen.handler[2])
    end)

    it("runs authorize before the handler", function()
      local order = {}
      local action = clank.defineAction(def {
        output = s.object { text = s.string() },
        authorize = function()
          order[#order + 1] = "authorize"
          return true
        end,
        handler = function(input)
          order[#order + 1] = "handler"
          return { text = input.text }
        end,
      })
      assert.are.same({ text = "x" }, action({ text = "x" }, {}))
      assert.are.same({ "authorize", "handler" }, order)
    end)

    it("raises the input's ValidationError as is and never runs authorize or the handler", function()
      local ran = {}
      local action = clank.defineAction(def {
        authorize = function() ran.authorize = true return true end,
        handler = function() ran.handler = true return {} end,
      })
      local err = raised(action, { text = 3 }, {})
      assert.is_true(s.isValidationError(err), "not a ValidationError: " .. tostring(err))
      assert.are.equal("text: Expected a string.", tostring(err))
      assert.are.same({ "text" }, err.issues[1].path)
      assert.is_nil(ran.authorize)
      assert.is_nil(ran.handler)
    end)

    it("reports every input issue with 1-based Lua paths", function()
      local action = clank.defineAction(def {
        input = s.object { tags = s.array(s.string()), title = s.string { min = 1 } },
      })
      local err = raised(action, { tags = { "a", 2 }, title = "" }, {})
      assert.are.equal("tags.2: Expected a string.; title: Must contain at least 1 character.",
        tostring(err))
    end)

    for _, falsy in ipairs({ false, "nil" }) do
      it("raises FORBIDDEN 403 and never runs the handler when authorize returns " .. tostring(falsy), function()
        local ran = false
        local action = clank.defineAction(def {
          authorize = function()
            if falsy == "nil" then return nil end
            return false
          end,
          handler = function() ran = true return {} end,
        })
        local err = raised(action, { text = "x" }, {})
        assert_action_error(err, "FORBIDDEN", "Action is not authorized.", 403)
        assert.is_false(ran)
      end)
    end

    it("runs the handler when authorize returns any truthy value", function()
      local action = clank.defineAction(def { authorize = function() return "yes" end })
      assert.are.same({ text = "x" }, action({ text = "x" }, {}))
    end)

    it("raises ACTION_FAILED 500 when the output does not parse", function()
      local action = clank.defineAction(def {
        output = s.object { id = s.string() },
        handler = function() return { id = 42 } end,
      })
      local err = raised(action, { text = "x" }, {})
      assert_action_error(err, "ACTION_FAILED", "The action failed.", 500)
      assert.is_nil(tostring(err):find("Expected a string", 1, true), "issues leaked: " .. tostring(err))
    end)

    it("returns the parsed output when it parses", function()
      local action = clank.defineAction(def {
        output = s.object { id = s.string(), n = s.number { integer = true } },
        handler = function() return { id = "a", n = 2 } end,
      })
      assert.are.same({ id = "a", n = 2 }, action({ text = "x" }, {}))
    end)

    it("raises ACTION_FAILED 500 when the handler raises a ValidationError (a server fault)", function()
      local inner = s.object { n = s.number() }
      local action = clank.defineAction(def {
        handler = function() return inner:parse({ n = "x" }) end,
      })
      local err = raised(action, { text = "x" }, {})
      assert_action_error(err, "ACTION_FAILED", "The action failed.", 500)
    end)

    it("raises the handler's ActionError itself (same table)", function()
      local thrown = clank.ActionError("NOTE_EXISTS", "A note with this text exists.", 409, { text = "x" })
      local action = clank.defineAction(def { handler = function() error(thrown) end })
      local err = raised(action, { text = "x" }, {})
      assert.are.equal(thrown, err)
      assert_action_error(err, "NOTE_EXISTS", "A note with this text exists.", 409)
      assert.are.same({ text = "x" }, err.details)
    end)

    it("raises authorize's ActionError itself (same table)", function()
      local thrown = clank.ActionError("SIGN_IN", "Sign in first.", 401)
      local action = clank.defineAction(def { authorize = function() error(thrown) end })
      assert.are.equal(thrown, raised(action, { text = "x" }, {}))
    end)

    it("lets another Lua error through with its text", function()
      local action = clank.defineAction(def { handler = function() error("disk on fire") end })
      local err = raised(action, { text = "x" }, {})
      assert.truthy(tostring(err):find("disk on fire", 1, true), "error: " .. tostring(err))
    end)
  end)

  describe("waiting", function()
    it("lets the handler clank.sleep and still returns the output to top-level code", function()
      local action = clank.defineAction(def {
        handler = function(input)
          clank.sleep(30)
          return { text = input.text .. "!" }
        end,
      })
      local t0 = socket.gettime()
      assert.are.same({ text = "x!" }, action({ text = "x" }, {}))
      assert.is_true(socket.gettime() - t0 >= 0.025, "returned before the sleep was over")
    end)

    it("lets authorize clank.sleep", function()
      local action = clank.defineAction(def {
        authorize = function(_, ctx)
          clank.sleep(10)
          return ctx.user == "ann"
        end,
      })
      assert.are.same({ text = "x" }, action({ text = "x" }, { user = "ann" }))
      local err = raised(action, { text = "x" }, { user = "bob" })
      assert_action_error(err, "FORBIDDEN", "Action is not authorized.", 403)
    end)

    it("lets a handler call another action that sleeps", function()
      local inner = clank.defineAction {
        name = "inner", description = "Inner.", input = s.object { n = s.number() },
        handler = function(input)
          clank.sleep(10)
          return { n = input.n * 2 }
        end,
      }
      local outer = clank.defineAction {
        name = "outer", description = "Outer.", input = s.object { n = s.number() },
        handler = function(input, ctx)
          clank.sleep(5)
          local got = inner({ n = input.n }, ctx)
          clank.sleep(5)
          return { n = got.n + 1 }
        end,
      }
      assert.are.same({ n = 7 }, outer({ n = 3 }, {}))
    end)

    it("keeps an ActionError's identity across a sleep", function()
      local thrown = clank.ActionError("LATER", "Failed after waiting.", 503)
      local action = clank.defineAction(def {
        handler = function()
          clank.sleep(5)
          error(thrown)
        end,
      })
      assert.are.equal(thrown, raised(action, { text = "x" }, {}))
    end)

    it("keeps the ActionError of a nested action's handler across both coroutines", function()
      local thrown = clank.ActionError("INNER", "Inner failed.", 422)
      local inner = clank.defineAction {
        name = "inner", description = "Inner.", input = s.object {},
        handler = function()
          clank.sleep(5)
          error(thrown)
        end,
      }
      local outer = clank.defineAction {
        name = "outer", description = "Outer.", input = s.object {},
        handler = function(_, ctx) return inner({}, ctx) end,
      }
      assert.are.equal(thrown, raised(outer, {}, {}))
    end)

    it("refuses clank.sleep in top-level code with the SPEC message", function()
      local err = raised(clank.sleep, 1)
      assert.truthy(tostring(err):find(NOT_IN_COROUTINE, 1, true), "error: " .. tostring(err))
    end)

    it("refuses clank.sleep in a plain coroutine with the SPEC message", function()
      local ok, err = pcall(coroutine.wrap(function() clank.sleep(1) end))
      assert.is_false(ok)
      assert.truthy(tostring(err):find(NOT_IN_COROUTINE, 1, true), "error: " .. tostring(err))
    end)
  end)
end)

describe("clank.ActionError", function()
  it("defaults the status to 400 and leaves details nil", function()
    local err = clank.ActionError("BAD_THING", "That was bad.")
    assert.are.equal("BAD_THING", err.code)
    assert.are.equal("That was bad.", err.message)
    assert.are.equal(400, err.status)
    assert.is_nil(err.details)
  end)

  it("keeps the status and details given", function()
    local details = { field = "title" }
    local err = clank.ActionError("CONFLICT", "Already there.", 409, details)
    assert.are.equal(409, err.status)
    assert.are.same({ field = "title" }, err.details)
  end)

  it("prints as CODE: message", function()
    assert.are.equal("NOTE_EXISTS: A note with this text exists.",
      tostring(clank.ActionError("NOTE_EXISTS", "A note with this text exists.")))
  end)

  for _, status in ipairs({ 400, 404, 499, 500, 599 }) do
    it("accepts status " .. status, function()
      assert.are.equal(status, clank.ActionError("X", "x", status).status)
    end)
  end

  for _, status in ipairs({ 399, 600, 200, 0, -400, 400.5, 1e300 }) do
    it("refuses status " .. tostring(status) .. " (an integer 400-599 only)", function()
      raised(clank.ActionError, "X", "x", status)
    end)
  end

  it("is told apart by clank.isActionError", function()
    assert.is_true(clank.isActionError(clank.ActionError("X", "x")))
    local _, verr = pcall(s.string().parse, s.string(), 1)
    assert.is_false(clank.isActionError(verr))
    assert.is_false(clank.isActionError("X: x"))
    assert.is_false(clank.isActionError({ code = "X", message = "x", status = 400 }))
    assert.is_false(clank.isActionError(nil))
  end)

  it("keeps its identity through pcall(error(...))", function()
    local thrown = clank.ActionError("X", "x")
    local ok, err = pcall(error, thrown)
    assert.is_false(ok)
    assert.are.equal(thrown, err)
  end)
end)

-- SPEC §6: outside MCP, ctx.log and ctx.progress go to the log. The logger writes to stderr in
-- plain lua5.4, so the lines are read from a child lua5.4 (as spec/unit/core/core_spec.lua does).
describe("ctx.log and ctx.progress outside MCP", function()
  -- Runs code in a child lua5.4 (CLANK_DEBUG=1: debug lines too) and returns its stderr.
  local function stderr_of(code)
    local script, out = os.tmpname(), os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write(code)
    f:close()
    local ok = os.execute("CLANK_DEBUG=1 lua5.4 " .. script .. " 2>" .. out .. " >/dev/null")
    f = assert(io.open(out))
    local text = f:read("a")
    f:close()
    os.remove(script)
    os.remove(out)
    assert.is_true(ok, text)
    return text
  end

  -- An action whose handler runs `body` (Lua source using ctx), called as `call` says.
  local function child(body, call)
    return [[
      local clank = require "clank"
      local act = clank.defineAction {
        name = "spec.logs", description = "Logs.", sideEffects = "none",
        input = clank.schema.object {},
        handler = function(_, ctx) ]] .. body .. [[ return {} end,
      }
      ]] .. call .. "\n"
  end

  local function lines(text)
    local out = {}
    for line in text:gmatch("[^\n]+") do
      out[#out + 1] = line
    end
    return out
  end

  it("ctx.log(\"info\", \"x\") writes one info line naming the action", function()
    local text = stderr_of(child([[ctx.log("info", "x")]], "act({}, { user = 'ann' })"))
    assert.are.same({ "clank info: action spec.logs: x" }, lines(text))
  end)

  it("gives them to a direct call without a ctx, and to bridge:invoke", function()
    local text = stderr_of(child([[ctx.log("warning", "careful", { n = 1 })]], [[
      act({})
      clank.createAgentBridge({ act }):invoke("spec.logs", {}, {})
    ]]))
    -- warning is the logger's warn; the data follows the message as canonical JSON
    assert.are.same({ 'clank warn: action spec.logs: careful {"n":1}',
                      'clank warn: action spec.logs: careful {"n":1}' }, lines(text))
  end)

  it("maps the RFC 5424 levels onto the logger's", function()
    local text = stderr_of(child([[
      for _, level in ipairs { "debug", "info", "notice", "warning", "error", "critical", "alert",
                                "emergency" } do
        ctx.log(level, level)
      end
    ]], "act({}, {})"))
    assert.are.same({
      "clank debug: action spec.logs: debug", "clank info: action spec.logs: info",
      "clank info: action spec.logs: notice", "clank warn: action spec.logs: warning",
      "clank error: action spec.logs: error", "clank error: action spec.logs: critical",
      "clank error: action spec.logs: alert", "clank error: action spec.logs: emergency",
    }, lines(text))
  end)

  -- SPEC §6: "Outside MCP both go to the log": at info, as ctx.log("info", ...), not at debug,
  -- which the log drops unless CLANK_DEBUG is set
  it("ctx.progress writes an info line", function()
    local text = stderr_of(child([[ctx.progress(1, 3, "one"); ctx.progress(2)]], "act({}, {})"))
    assert.are.same({ "clank info: action spec.logs: progress 1/3 one",
                      "clank info: action spec.logs: progress 2/?" }, lines(text))
  end)

  it("leaves a ctx's own log and progress alone", function()
    local got = {}
    local act = clank.defineAction {
      name = "spec.own", description = "Own.", sideEffects = "none", input = s.object {},
      handler = function(_, ctx) ctx.log("info", "mine"); ctx.progress(1); return {} end,
    }
    local ctx = { log = function(...) got[#got + 1] = { "log", ... } end,
                  progress = function(...) got[#got + 1] = { "progress", ... } end }
    act({}, ctx)
    assert.are.same({ { "log", "info", "mine" }, { "progress", 1 } }, got)
  end)

  -- The error a handler's ctx call raised, caught in the handler itself.
  local function raised_in_handler(fn)
    local err
    local act = clank.defineAction {
      name = "spec.bad", description = "Bad.", sideEffects = "none", input = s.object {},
      handler = function(_, ctx)
        local ok
        ok, err = pcall(fn, ctx)
        assert.is_false(ok)
        return {}
      end,
    }
    act({}, {})
    return err
  end

  it("raises at the call site for a bad level", function()
    local err = raised_in_handler(function(ctx) ctx.log("loud", "x") end)
    assert.matches("action_spec.lua:%d+: ctx.log: level must be one of debug, info, notice, "
      .. "warning, error, critical, alert, emergency %(got loud%)", err)
  end)

  it("raises for a message that is not a string", function()
    local err = raised_in_handler(function(ctx) ctx.log("info", 5) end)
    assert.matches("action_spec.lua:%d+: ctx.log: message must be a string", err)
  end)

  it("raises at the call site for ctx.progress with a non-number", function()
    local err = raised_in_handler(function(ctx) ctx.progress("x") end)
    assert.matches("action_spec.lua:%d+: ctx.progress: done must be a finite number %(got string%)",
      err)
    err = raised_in_handler(function(ctx) ctx.progress(1, "3") end)
    assert.matches("ctx.progress: total must be a finite number %(got string%)", err)
  end)

  -- (a plain Lua error: the bridge and MCP answer it as ACTION_FAILED, SPEC §5 step 9)
  it("fails the call when the handler lets that error out", function()
    local act = clank.defineAction {
      name = "spec.bad", description = "Bad.", sideEffects = "none", input = s.object {},
      handler = function(_, ctx) ctx.progress("x") end,
    }
    local err = raised(act, {}, {})
    assert.matches("ctx.progress: done must be a finite number", tostring(err))
  end)
end)
