-- The access log line (SPEC §13), byte by byte in both formats: its time is
-- UTC with milliseconds ("YYYY-MM-DDTHH:MM:SS.mmmZ") and close to the clock,
-- then method, target, status, bytes, duration and the request id.
local server = require "helpers.server"
local http = require "helpers.http"
local files = require "helpers.files"
local json = require "clank.json"

-- Seconds since the epoch of a UTC stamp's fields.
local function utc_seconds(y, mo, d, h, mi, s)
  local days_before = { 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334 }
  local days = (y - 1970) * 365 + (y - 1969) // 4 - (y - 1901) // 100 + (y - 1601) // 400
  days = days + days_before[mo] + d - 1
  if mo > 2 and (y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0)) then
    days = days + 1
  end
  return ((days * 24 + h) * 60 + mi) * 60 + s
end

local STAMP = "(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)%.%d%d%dZ"

local function check_stamp(y, mo, d, h, mi, s)
  local t = utc_seconds(tonumber(y), tonumber(mo), tonumber(d), tonumber(h), tonumber(mi), tonumber(s))
  assert.is_true(math.abs(t - os.time()) <= 5, "the stamp is not the time now: " .. t .. " vs " .. os.time())
end

-- The line about the request with id `rid`, once the log is flushed.
local function line_of(s, rid)
  return files.eventually(5, function()
    for line in s:stderr():gmatch("[^\n]+") do
      if line:find(rid, 1, true) then
        return line
      end
    end
  end)
end

local function ask(s, rid)
  local res = assert(http.get(s.port, "/no/such?x=1", { ["x-request-id"] = rid }))
  assert.are.equal(404, res.status)
  return #res.body
end

describe("access log", function()
  it("text: stamp, method, target, status, bytes, ms and id, one line", function()
    local s = server.start(server.fixture("basic"))
    local bytes = ask(s, "acc-text.1")
    local line = line_of(s, "acc-text.1")
    assert.is_truthy(line, "no access log line")
    local y, mo, d, h, mi, sec, rest = line:match("^" .. STAMP .. "(.*)$")
    assert.is_truthy(y, "bad stamp in: " .. line)
    check_stamp(y, mo, d, h, mi, sec)
    local b, ms = rest:match("^ info GET /no/such%?x=1 404 (%d+)B (%d+%.%d%d%d)ms acc%-text%.1$")
    assert.is_truthy(b, "bad line: " .. line)
    assert.are.equal(bytes, tonumber(b))
    assert.is_true(tonumber(ms) < 5000)
    assert.are.equal(0, s:stop())
  end)

  it("json: one object with the same fields", function()
    local s = server.start(server.fixture("basic"), { args = { "--log", "json" } })
    local bytes = ask(s, "acc-json.2")
    local line = line_of(s, "acc-json.2")
    assert.is_truthy(line, "no access log line")
    local v = assert(json.decode(line))
    local y, mo, d, h, mi, sec = v.time:match("^" .. STAMP .. "$")
    assert.is_truthy(y, "bad stamp: " .. v.time)
    check_stamp(y, mo, d, h, mi, sec)
    assert.are.equal("info", v.level)
    assert.are.equal("request", v.msg)
    assert.are.equal("GET", v.method)
    assert.are.equal("/no/such?x=1", v.target)
    assert.are.equal(404, v.status)
    assert.are.equal(bytes, v.bytes)
    assert.are.equal("acc-json.2", v.requestId)
    assert.is_truthy(line:match('^{"time":"[^"]+","level":"info","msg":"request","method":"GET",'
      .. '"target":"/no/such%?x=1","status":404,"bytes":%d+,"ms":%d+%.%d%d%d,"requestId":"acc%-json%.2"}$'),
      "bad line: " .. line)
    assert.are.equal(0, s:stop())
  end)

  -- A view session's token is a bearer credential (SPEC §11): whoever reads the log must not be
  -- able to drive the session. The path after it stays, so the line still says what was asked.
  for _, format in ipairs { "text", "json" } do
    it(format .. ": a session's token is redacted", function()
      local s = server.start(server.fixture("basic"), { args = { "--log", format } })
      local token = "tok3nS3cr3t_must-not-leak"
      for i, path in ipairs { "/__clank/sessions/" .. token .. "/surface", "/__clank/sessions/" .. token } do
        local rid = "acc-tok." .. format .. "." .. i
        local res = assert(http.get(s.port, path, { ["x-request-id"] = rid }))
        assert.are_not.equal(200, res.status)
        local line = line_of(s, rid)
        assert.is_truthy(line, "no access log line")
        assert.is_falsy(line:find(token, 1, true), "the token is in: " .. line)
        local target = i == 1 and "/__clank/sessions/<redacted>/surface" or "/__clank/sessions/<redacted>"
        if format == "json" then
          assert.are.equal(target, assert(json.decode(line)).target)
        else
          assert.is_truthy(line:find(" GET " .. target .. " ", 1, true), "bad line: " .. line)
        end
      end
      assert.are.equal(0, s:stop())
    end)
  end
end)

-- Log lines are one line each (SPEC §13): control characters become \n, \r, \t or \u00XX in
-- both formats; JSON also escapes quotes and backslashes; anything else (UTF-8 too) is kept.
-- Each special byte is printed alone after a plain run of 0 to 17 bytes, so that it falls at
-- every place of an 8-byte block (the fixture's GET /print-escapes).
describe("log line escapes", function()
  local escapes = { -- special, as text writes it, as JSON writes it
    { "\x01", "\\u0001", "\\u0001" },
    { "\x1f", "\\u001f", "\\u001f" },
    { "\x7f", "\\u007f", "\\u007f" },
    { '"', '"', '\\"' },
    { "\\", "\\", "\\\\" },
    { "\n", "\\n", "\\n" },
    { "\r", "\\r", "\\r" },
    { "\t", "\\t", "\\t" },
    { "\u{e9}", "\u{e9}", "\u{e9}" },
  }
  for _, format in ipairs({ "text", "json" }) do
    it(format .. ": each special byte escaped, wherever it falls in the line", function()
      local s = server.start(server.fixture("basic"), { args = { "--log", format } })
      assert.are.equal(200, assert(http.get(s.port, "/print-escapes")).status)
      local want = #escapes * 18
      local lines = files.eventually(5, function()
        local found = {}
        for l in s:stderr():gmatch("[^\n]+") do
          local n, k = l:match("esc (%d+) (%d+): ")
          if n then found[#found + 1] = { tonumber(n), tonumber(k), l } end
        end
        return #found == want and found or nil
      end)
      assert.are.equal(0, s:stop())
      assert.truthy(lines, "expected " .. want .. " lines: " .. s:stderr())
      for _, f in ipairs(lines) do
        local n, k, line = f[1], f[2], f[3]
        local e = escapes[n]
        local head = "esc " .. n .. " " .. k .. ": " .. string.rep("p", k)
        local body = head .. (format == "text" and e[2] or e[3]) .. "tail"
        assert.truthy(line:find(body, 1, true), "expected\n" .. body .. "\nin\n" .. line)
        if format == "json" then
          assert.are.equal(head .. e[1] .. "tail", json.decode(line).msg)
        end
      end
    end)
  end
end)
