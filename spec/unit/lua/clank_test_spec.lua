-- require "clank.test" (SPEC §16) in plain lua5.4: an app loaded in process answers as the bridge
-- of SPEC §5 does (status, code and message written from the SPEC), with its context replaceable,
-- and nothing listening on a port. The surface side is used by apps/tasks/spec and the starter's.
local test = require "clank.test"
local server = require "helpers.server"

local bridge_app = server.fixture("bridge")

local function tmpfile(text)
  local path = os.tmpname() .. ".lua"
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

describe("clank.test", function()
  local t = test.app(bridge_app)

  describe("t:call", function()
    it("answers { ok = true, output } with 200 for an action that runs", function()
      local answer, status, headers = t:call("echo", { text = "hi", tags = { "a" } })
      assert.are.equal(200, status)
      assert.are.same({ ok = true, output = { text = "hi", tags = { "a" } } }, answer)
      assert.truthy(headers["content-type"]:find("^application/json"))
    end)

    it("answers 404 NOT_FOUND `Action not found.` for an unknown name (step 5)", function()
      local answer, status = t:call("nope", {})
      assert.are.equal(404, status)
      assert.are.same({ ok = false, error = { code = "NOT_FOUND", message = "Action not found." } }, answer)
    end)

    it("answers 422 INVALID_INPUT for input that fails the schema", function()
      local answer, status = t:call("echo", { text = "" })
      assert.are.equal(422, status)
      assert.are.equal("INVALID_INPUT", answer.error.code)
    end)

    it("needs { confirmed = true } for a destructive action", function()
      local answer, status = t:call("notes.delete", { id = "n1" })
      assert.are.equal(428, status)
      assert.are.same({ ok = false, error = { code = "CONFIRMATION_REQUIRED",
        message = "This action requires explicit confirmation." } }, answer)
      answer, status = t:call("notes.delete", { id = "n1" }, { confirmed = true })
      assert.are.equal(200, status)
      assert.are.same({ ok = true, output = { deleted = "n1" } }, answer)
    end)

    it("answers an ActionError with its status, code and message", function()
      local answer, status = t:call("conflict", {})
      assert.are.equal(409, status)
      assert.are.equal("NOTE_EXISTS", answer.error.code)
      assert.are.equal("A note with this title exists.", answer.error.message)
    end)

    it("answers 504 TIMEOUT `The action timed out.` past the app's actionTimeout", function()
      local answer, status = t:call("slow", { ms = 1000 })
      assert.are.equal(504, status)
      assert.are.same({ ok = false, error = { code = "TIMEOUT", message = "The action timed out." } }, answer)
    end)

    it("runs the app's context, as a POST /actions/<name>; opts.context replaces it", function()
      local answer = t:call("whoami", {})
      assert.is_number(answer.output.calls)
      assert.are.equal("POST", answer.output.method)
      assert.are.equal("/actions/whoami", answer.output.path)
      answer = t:call("whoami", {}, { context = { calls = 42 } })
      assert.are.equal(42, answer.output.calls)
      local other = test.app(bridge_app, { context = function() return { calls = 7 } end })
      assert.are.equal(7, other:call("whoami", {}).output.calls)
    end)
  end)

  describe("t:page and t:surface", function()
    it("answer 404 and raise for an app without views", function()
      assert.are.equal(404, (t:page("/")))
      assert.has_error(function() t:surface("x") end, "clank.test: the app has no views")
    end)
  end)

  describe("test.app", function()
    it("refuses a file that does not return clank.app", function()
      local path = tmpfile("return 42\n")
      local ok, err = pcall(test.app, path)
      os.remove(path)
      assert.is_false(ok)
      assert.truthy(tostring(err):find(path .. " must return clank.app { ... }", 1, true), tostring(err))
    end)

    it("raises the load error of a file that does not parse", function()
      local path = tmpfile("return (\n")
      local ok, err = pcall(test.app, path)
      os.remove(path)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("clank.test.app: " .. path .. ":", 1, true), tostring(err))
    end)
  end)
end)
