-- Tracebacks in the log (issue 34) and when clank-run is in development (SPEC §11: errors go to
-- the open pages in full). A traceback keeps the app's frames and drops the lines that say
-- nothing of where an error came from: "[C]: in ?", the C function every protected call starts
-- from, and the standard functions that raise or catch (error, assert, pcall, xpcall). A
-- traceback with nothing else left goes with its "stack traceback:" heading.
local server = require "helpers.server"
local http = require "helpers.http"
local cjson = require "cjson"

local app = server.fixture("tracebacks")

local NOISE = { "[C]: in ?", "[C]: in function 'error'", "[C]: in function 'assert'",
  "[C]: in function 'pcall'", "[C]: in function 'xpcall'" }

local function call_fails(port)
  local res = assert(http.request(port, "POST", "/actions/fails",
    { ["Content-Type"] = "application/json" }, "{}"))
  assert.are.equal(500, res.status, res.body)
end

-- Waits until the server's stderr has a line holding `text` (the log is written once per loop
-- iteration) → that line.
local function wait_line(s, text)
  local deadline = http.now() + 5 * (server.sanitized and 3 or 1)
  while http.now() < deadline do
    for line in s:stderr():gmatch("[^\n]+") do
      if line:find(text, 1, true) then return line end
    end
    http.sleep(0.02)
  end
  error("no log line with " .. text .. " in:\n" .. s:stderr(), 2)
end

local function assert_no_noise(text)
  for _, noise in ipairs(NOISE) do
    assert.is_nil(text:find(noise, 1, true), "`" .. noise .. "` in: " .. text)
  end
end

describe("clank-run's log of an error", function()
  after_each(server.kill_all)

  it("keeps the app's frames, innermost first, and drops the C noise (text log)", function()
    local s = server.start(app)
    call_fails(s.port)
    local line = wait_line(s, "raised two frames down")
    assert.are.equal(0, s:stop())
    -- one line: the message, then the frames, newlines written \n
    local trace = assert(line:match("\\nstack traceback:\\n(.*)$"), line)
    local frames = {}
    for frame in (trace .. "\\n"):gmatch("\\t(.-)\\n") do frames[#frames + 1] = frame end
    assert.matches("/tracebacks/app%.lua:6: in ", frames[1])
    assert.matches("/tracebacks/app%.lua:7: in ", frames[2])
    assert.matches("/tracebacks/app%.lua:15: in ", frames[3])
    assert_no_noise(line)
  end)

  it("keeps them in the traceback field of a JSON line, without the noise", function()
    local s = server.start(app, { args = { "--log", "json" } })
    call_fails(s.port)
    local line = wait_line(s, "raised two frames down")
    assert.are.equal(0, s:stop())
    local obj = cjson.decode(line)
    assert.is_nil(obj.msg:find("stack traceback", 1, true))
    assert.matches("^\t[^\n]*/tracebacks/app%.lua:6: in [^\n]*\n\t[^\n]*/tracebacks/app%.lua:7: in ",
      obj.traceback)
    assert_no_noise(obj.traceback)
  end)

  it("writes a failed reload as file:line and message, with no empty traceback after it", function()
    local p = assert(io.popen("mktemp -d"))
    local dir = p:read("l")
    p:close()
    assert(os.execute("cp " .. app .. " " .. dir .. "/app.lua"))
    local s = server.start(dir .. "/app.lua", { env = { CLANK_FORCE_POLL = "1" } })
    local f = assert(io.open(dir .. "/app.lua", "ab"))
    f:write("\nlocal broken = {\n") -- line 19 opens, the end of the file leaves it open
    f:close()
    local line = wait_line(s, "reload failed")
    assert.are.equal(0, s:stop())
    os.execute("rm -rf " .. dir)
    assert.matches("reload failed, the running app stays: .*/app%.lua:%d+: .*expected", line)
    assert.is_nil(line:find("stack traceback", 1, true), line)
    assert_no_noise(line)
  end)
end)

describe("clank-run in development", function()
  after_each(server.kill_all)

  -- Whether the start-up lines say errors go to the pages.
  local function development(args)
    local s = server.start(app, { args = args })
    wait_line(s, "mcp: http")
    http.sleep(0.05)
    local said = s:stderr():find("development: errors show in the open pages", 1, true) ~= nil
    assert.are.equal(0, s:stop())
    return said
  end

  it("is the default on loopback, and --help names --production", function()
    assert.is_true(development({}))
    local code, stdout = server.run({ "--help" })
    assert.are.equal(0, code)
    assert.truthy(stdout:find("--production", 1, true), stdout)
  end)

  it("is off with --production, --public-origin, --allow-any-host or a listener that is not loopback", function()
    assert.is_false(development({ "--production" }))
    assert.is_false(development({ "--public-origin", "https://app.example" }))
    assert.is_false(development({ "--allow-any-host" }))
    assert.is_false(development({ "--host", "0.0.0.0" }))
  end)
end)
