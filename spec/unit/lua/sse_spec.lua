-- clank.sse (SPEC §15): server-sent events over a streamed route's send,
-- in the wire format of WHATWG HTML §9.2.
local sse = require "clank.sse"

-- A send that keeps what it is given.
local function recorder()
  local sent = {}
  return function(chunk)
    sent[#sent + 1] = chunk
    return true
  end, sent
end

describe("clank.sse", function()
  it("is exported from require 'clank'", function()
    assert.are.equal(sse, require("clank").sse)
  end)

  it("writes one chunk per event, fields in order, a blank line after", function()
    local send, sent = recorder()
    local s = sse(send)
    assert.is_true(s:event({ data = "hi" }))
    s:event({ event = "update", id = "42", retry = 3000, data = "x" })
    assert.are.same({ "data: hi\n\n", "event: update\nid: 42\nretry: 3000\ndata: x\n\n" }, sent)
  end)

  it("splits multi-line data into data: lines, whatever the line ending", function()
    local send, sent = recorder()
    sse(send):event({ data = "a\nb\r\nc\rd\n" })
    assert.are.equal("data: a\ndata: b\ndata: c\ndata: d\ndata: \n\n", sent[1])
  end)

  it("encodes table data as canonical JSON", function()
    local send, sent = recorder()
    sse(send):event({ data = { z = 1, a = { true, "x" } } })
    assert.are.equal('data: {"a":[true,"x"],"z":1}\n\n', sent[1])
  end)

  it("writes comments as : lines", function()
    local send, sent = recorder()
    sse(send):comment("ping\npong")
    assert.are.equal(": ping\n: pong\n\n", sent[1])
  end)

  it("returns what send returns (false once the client is gone)", function()
    local s = sse(function()
      return false
    end)
    assert.is_false(s:event({ data = "lost" }))
    assert.is_false(s:comment("lost"))
  end)

  local refused = {
    { "an event name with a newline", { event = "a\nb", data = "" }, "event must be one line" },
    { "an id with a carriage return", { id = "1\r", data = "" }, "id must be one line" },
    { "missing data", { event = "x" }, "data must be a string or a table, got nil" },
    { "a negative retry", { retry = -1, data = "" }, "retry must be a non-negative integer" },
  }
  for _, case in ipairs(refused) do
    it("refuses " .. case[1], function()
      local send, sent = recorder()
      local ok, err = pcall(sse(send).event, sse(send), case[2])
      assert.is_false(ok)
      assert.matches(case[3], err, 1, true)
      assert.are.equal(0, #sent)
    end)
  end
end)
