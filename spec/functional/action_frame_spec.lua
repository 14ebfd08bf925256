-- The frame an action runs in, over HTTP (SPEC §4 "ctx", §5 steps 8-10, §12, §13 x-request-id),
-- against the fixture action_frame: what a handler sees of its ctx (the request id and the
-- request, read at once, after a wait, after its request ended, written over; rawget and
-- pairs), and, for every outcome of a handler, that an action with an authorize that allows
-- it (the whole pipeline: "p.<case>") and one without ("d.<case>") answer byte for byte the
-- same and log the same. Expected values are written from the SPEC.
local server = require "helpers.server"
local http = require "helpers.http"
local socket = require "socket"
local answers = require "helpers.bridge"

local output = answers.output

local function post(port, name, body, headers)
  local h = { { "Content-Type", "application/json" } }
  for _, kv in ipairs(headers or {}) do h[#h + 1] = kv end
  return assert(http.request(port, "POST", "/actions/" .. name, h, body or "{}"))
end

-- The error lines stderr gained since from that name the action or carry the tag (the log
-- folds a line it wrote in the last 10 s: only these are the run's own), each with its time
-- stamp and request id taken out, the name and the tag made generic, and the C frames of its
-- traceback, if any, left out (the pipeline may or may not be one).
local function log_since(s, from, name, tag)
  local lines = {}
  local function generic(line, word, as)
    local at = line:find(word, 1, true)
    if not at then return line, false end
    return line:sub(1, at - 1) .. as .. line:sub(at + #word), true
  end
  for line in s:stderr():sub(from + 1):gmatch("[^\n]+") do
    line = line:gsub("^%S+ ", ""):gsub("^(%a+) %[[^%]]*%] ", "%1 "):gsub("\\n\\t%[C%]: in %?", "")
    if line:find("^error ") then
      local named, tagged
      line, named = generic(line, name, "<action>")
      line, tagged = generic(line, tag, "<tag>")
      if named or tagged then lines[#lines + 1] = line end
    end
  end
  return lines
end

describe("an action's frame", function()
  local s = server.for_describe(server.fixture("action_frame"))

  describe("ctx.requestId and ctx.request", function()
    local ids = { "0123456789abcdef", "ffffffffffffffff", "0000000000000000", "00000000000000ff",
      "7fffffffffffffff", "8000000000000000", "fedcba9876543210", "0123456789ABCDEF",
      "0123456789abcdeg", "0123456789abcde", "0123456789abcdef0", "0123456789abcdeF",
      "/123456789abcdef", ":123456789abcdef", "`123456789abcdef", "0123456789abcde@",
      "abc.def-12_34", false }
    for _, d in ipairs { "d", "p" } do
      for _, id in ipairs(ids) do
        it(d .. ": the client's id " .. tostring(id) .. " read at once, again, with the request", function()
          local res = post(s.port, d .. ".ids", "{}", id and { { "X-Request-Id", id } } or nil)
          -- SPEC §13: the client's when it is 1-64 of A-Za-z0-9._-, else one made up
          local valid = id and #id <= 64 and id:find("^[%w%._%-]+$") ~= nil
          local expected = valid and id or res.headers["x-request-id"]
          assert.are.equal(expected, res.headers["x-request-id"])
          if not valid then assert.truthy(expected:find("^[0-9a-f]+$") and #expected == 16, expected) end
          -- served when read, or set at once: either way ctx.requestId is the id
          local served = #expected == 16 and expected:find("^[0-9a-f]+$") ~= nil
          assert.are.same({ id = expected, again = expected, probe = id or nil,
            before = { requestId = served and "nil" or "string", request = "nil", signal = "nil" },
            after = { requestId = "string", request = "table", signal = "nil" } }, output(res))
        end)
      end

      it(d .. ": read after a wait, with the signal made while it waited", function()
        local id = "00000000deadbeef"
        assert.are.same({ method = "POST", id = id, aborted = false, same = true,
          keys = "log:function progress:function request:table requestId:string signal:userdata" },
          output(post(s.port, d .. ".waited", '{"ms":5}', { { "X-Request-Id", id } })))
      end)

      it(d .. ": read after the signal was, and a wait", function()
        local id = "0000ffff0000ffff"
        assert.are.same({ id = id, path = "/actions/" .. d .. ".signal_first", same = true,
          keys = "log:function progress:function request:table requestId:string signal:userdata" },
          output(post(s.port, d .. ".signal_first", "{}", { { "X-Request-Id", id } })))
      end)

      it(d .. ": written over before read, and cleared after", function()
        assert.are.same({ request = "mine", id = "1111222233334444", cleared = "nil", again = "POST",
          keys = "log:function note:string progress:function request:table signal:userdata" },
          output(post(s.port, d .. ".writes", "{}", { { "X-Request-Id", "1111222233334444" } })))
      end)

      it(d .. ": pairs lists requestId, log, progress and signal, and rawget nothing served", function()
        assert.are.same({ keys = "log:function progress:function requestId:string signal:userdata",
          raw = { requestId = "nil", request = "nil", signal = "nil" } },
          output(post(s.port, d .. ".keys", "{}", { { "X-Request-Id", "abcdefabcdefabcd" } })))
      end)

      for _, first in ipairs { "id", "request" } do
        for _, id in ipairs { "0123456701234567", "Trace-1", false } do
          it(d .. ": kept past its request's end, " .. first .. " read first, id " .. tostring(id), function()
            local tag = d .. first .. tostring(id)
            local h = { { "X-Probe", "kept-" .. tag } }
            if id then h[2] = { "X-Request-Id", id } end
            local res = post(s.port, d .. ".keep", '{"tag":"' .. tag .. '"}', h)
            assert.are.equal(200, res.status)
            local expected = id or res.headers["x-request-id"]
            -- other requests reuse the exchange, its coroutine and its registry slot
            for i = 1, 3 do output(post(s.port, d .. ".ids", "{}", { { "X-Request-Id", "999999999999999" .. i } })) end
            local url = "/actions/" .. d .. ".keep"
            assert.are.same({ first = first == "id" and expected or url, id = expected, url = url,
              probe = "kept-" .. tag,
              keys = "log:function progress:function request:table requestId:string signal:userdata" },
              output(post(s.port, d .. ".kept", '{"tag":"' .. tag .. '","first":"' .. first .. '"}')))
          end)
        end
      end
    end
  end)

  describe("run with or without its authorize", function()
    -- name, body, status, exact body (nil: compared between the two only)
    local outcomes = {
      { "ok", '{"text":"x"}', 200, '{"ok":true,"output":{"text":"x"}}' },
      { "empty", "{}", 200, '{"ok":true}' },
      { "bad_output", "{}", 500, answers.failure_body("ACTION_FAILED", "The action failed.") },
      { "action_error", "{}", 409, answers.failure_body("CONFLICT", "Taken.", '{"n":1}') },
      { "validation_error", "{}", 500, answers.failure_body("ACTION_FAILED", "The action failed.") },
      { "plain_error", "{}", 500, answers.failure_body("ACTION_FAILED", "The action failed.") },
      { "table_error", "{}", 500, answers.failure_body("ACTION_FAILED", "The action failed.") },
      { "wait_ok", '{"ms":5}', 200, '{"ok":true,"output":{"text":"waited"}}' },
      { "wait_error", '{"ms":5}', 500, answers.failure_body("ACTION_FAILED", "The action failed.") },
      { "wait_bad_output", '{"ms":5}', 500, answers.failure_body("ACTION_FAILED", "The action failed.") },
      { "wait_validation", '{"ms":5}', 500, answers.failure_body("ACTION_FAILED", "The action failed.") },
    }
    for _, o in ipairs(outcomes) do
      local name, body, status, expected = o[1], o[2], o[3], o[4]
      it(name .. " answers and logs the same", function()
        local seen = {}
        for _, d in ipairs { "d", "p" } do
          local from, tag = #s:stderr(), "tag-" .. d .. name
          local res = post(s.port, d .. "." .. name, (body:gsub("^{", '{"tag":"' .. tag .. '",'):gsub(",}$", "}")))
          assert.are.equal(status, res.status, res.body)
          assert.are.equal(expected, res.body)
          socket.sleep(0.05)
          seen[d] = { body = res.body, cache = res.headers["cache-control"],
            type = res.headers["content-type"], log = log_since(s, from, d .. "." .. name, tag) }
        end
        assert.are.same(seen.p, seen.d)
        if status == 500 and name ~= "table_error" then
          assert.are.equal(1, #seen.d.log, table.concat(seen.d.log, "\n"))
        end
      end)
    end

    for _, name in ipairs { "late_bad_output", "late_validation", "late_error" } do
      it(name .. " past the action timeout answers 504 and logs its later failure the same", function()
        local seen = {}
        for _, d in ipairs { "d", "p" } do
          local from, tag = #s:stderr(), "late-" .. d .. name
          local res = post(s.port, d .. "." .. name, '{"ms":300,"tag":"' .. tag .. '"}')
          assert.are.equal(504, res.status)
          assert.are.equal(answers.failure_body("TIMEOUT", "The action timed out."), res.body)
          local deadline = socket.gettime() + 3
          while #log_since(s, from, d .. "." .. name, tag) == 0 and socket.gettime() < deadline do
            socket.sleep(0.02)
          end
          socket.sleep(0.1)
          seen[d] = log_since(s, from, d .. "." .. name, tag)
          assert.truthy(#seen[d] >= 1, s:stderr():sub(from + 1))
        end
        assert.are.same(seen.p, seen.d)
      end)
    end
  end)
end)
