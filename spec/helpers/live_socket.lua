-- clank.live without clank-run, for the unit specs: run(fn) calls fn in a runtime task (an
-- action's handler) and returns its value; settle(ms) lets the tasks run for ms (5 by
-- default); fake_socket() is a live connection's socket that keeps each frame sent, decoded
-- (frames) and its size (sizes), and how it was closed (closed = { code, reason });
-- apply(html, splices) is html with a diff frame's splices applied (their places and lengths
-- in UTF-16 units, as a browser counts).
local clank = require "clank"

local M = {}

function M.run(fn)
  local a = clank.defineAction { name = "spec.run", description = "Runs a function.",
    input = clank.schema.object {}, sideEffects = "none", handler = function() return { v = fn() } end }
  return a({}, {}).v
end

function M.settle(ms) M.run(function() clank.sleep(ms or 5) end) end

function M.fake_socket()
  local sock = { frames = {}, sizes = {} }
  function sock.send(self, text)
    self.frames[#self.frames + 1] = clank.json.decode(text)
    self.sizes[#self.frames] = #text
    return true
  end
  function sock.close(self, code, reason) self.closed = { code = code, reason = reason } end
  function sock.last(self) return self.frames[#self.frames] end
  return sock
end

-- The bytes of s that its first n UTF-16 units take (what a browser's string indexes count).
local function bytes_of(s, n)
  local units = 0
  for p, c in utf8.codes(s) do
    if units >= n then
      assert(units == n, "a splice inside a character's two units")
      return p - 1
    end
    units = units + (c >= 0x10000 and 2 or 1)
  end
  assert(units == n, "a splice past the end")
  return #s
end

function M.apply(html, splices)
  local out, from = {}, 1
  for _, sp in ipairs(splices) do
    out[#out + 1] = html:sub(from, bytes_of(html, sp[1]))
    out[#out + 1] = sp[3]
    from = bytes_of(html, sp[1] + sp[2]) + 1
  end
  out[#out + 1] = html:sub(from)
  return table.concat(out)
end

return M
