-- The request path's shortcuts agree with what they stand for (issue 15): header names
-- lowercased 8 bytes at a time as byte by byte, request ids made up as 16 lowercase hex
-- digits of a count, host / transfer-encoding / expect found in one pass over the headers,
-- and the bridge's view of a request kept from its header block to its body (or read again
-- when trailers came), so every answer is the one the slow way gives.
local server = require "helpers.server"
local http = require "helpers.http"

-- The answer to raw request bytes on a fresh connection.
local function raw(port, bytes)
  local res, conn = http.raw(port, bytes)
  assert.is_truthy(res, conn)
  conn:close()
  return res
end

describe("request path", function()
  local s
  setup(function()
    s = server.start(server.fixture("basic"))
  end)
  teardown(function()
    assert.are.equal(0, s:stop())
  end)

  it("lowercases header names of every length, letters only", function()
    -- token characters around the letters; lengths 1 to 40 cover the byte loop (< 8), whole
    -- words, and the overlapping last word
    local alphabet = "AbCdEfGhIjKlMnOpQrStUvWxYz09!#$%&'*+-.^_`|~Z@"
    alphabet = alphabet:gsub("@", "")
    local names = {}
    for len = 1, 40 do
      local start = (len * 7) % #alphabet
      local name = "X" .. (alphabet .. alphabet):sub(start + 1, start + len - 1)
      names[#names + 1] = name
    end
    local head = { "GET /inspect HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" }
    for i, name in ipairs(names) do
      head[#head + 1] = name .. ": v" .. i .. "\r\n"
    end
    local res = raw(s.port, table.concat(head) .. "\r\n")
    assert.are.equal(200, res.status)
    for i, name in ipairs(names) do
      -- the expected line written by hand's rule: ASCII A-Z become a-z, nothing else changes
      local lower = name:gsub("%u", function(c) return string.char(c:byte() + 32) end)
      local line = "header." .. lower .. "=v" .. i .. "\n"
      assert.is_truthy(res.body:find(line, 1, true), "missing " .. line .. " in " .. res.body)
    end
  end)

  it("makes up request ids as 16 lowercase hex digits of a count", function()
    local conn = assert(http.connect(s.port))
    local last
    for _ = 1, 40 do
      assert(conn:send("GET /inspect HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
      local res = assert(conn:read_response())
      assert.are.equal(200, res.status)
      local id = res.headers["x-request-id"]
      assert.is_truthy(id and id:match("^[0-9a-f]+$") and #id == 16, tostring(id))
      local n = math.tointeger(tonumber(id:sub(1, 8), 16)) << 32 | tonumber(id:sub(9), 16)
      if last then
        assert.are.equal(last + 1, n, "ids do not count: " .. id)
      end
      last = n
    end
    conn:close()
    -- a given id is kept as it was
    local res = assert(http.get(s.port, "/inspect", { ["x-request-id"] = "Given.ID_1-x" }))
    assert.are.equal("Given.ID_1-x", res.headers["x-request-id"])
  end)

  it("checks host, transfer-encoding and expect as before", function()
    local function status(head)
      return raw(s.port, "GET /inspect HTTP/1.1\r\n" .. head .. "Connection: close\r\n\r\n").status
    end
    assert.are.equal(200, status("Host: 127.0.0.1\r\n"))
    assert.are.equal(200, status("HOST: 127.0.0.1:8080\r\n"))
    assert.are.equal(400, status(""))
    assert.are.equal(400, status("Host: 127.0.0.1\r\nHost: 127.0.0.1\r\n"))
    assert.are.equal(400, status("Host: a b\r\n"))
    assert.are.equal(400, status("Host: 127.0.0.1:x\r\n"))
    assert.are.equal(501, status("Host: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n"))
    assert.are.equal(417, status("Host: 127.0.0.1\r\nExpect: something\r\n"))
    local res = raw(s.port, "GET /inspect HTTP/1.0\r\nExpect: something\r\n\r\n")
    assert.are.equal(200, res.status) -- HTTP/1.0: expect is not read
  end)
end)

describe("request path: the bridge's view", function()
  local s
  setup(function()
    s = server.start(server.fixture("bridge_request"))
  end)
  teardown(function()
    assert.are.equal(0, s:stop())
  end)

  local body = '{"note":"n"}'

  -- status and body of a POST /actions/inspect with these extra header lines and body bytes
  local function post(extra, bytes)
    local res = raw(s.port, "POST /actions/inspect?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n" ..
      "Connection: close\r\n" .. extra .. "\r\n" .. bytes)
    return res.status, res.body
  end

  it("answers alike with the header block's view and with a view read again", function()
    local plain_status, plain =
      post("Content-Type: application/json\r\nContent-Length: " .. #body .. "\r\n", body)
    assert.are.equal(200, plain_status)
    -- chunked with a trailer: more headers at the message than at the header block
    local chunked = string.format("%x\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n", #body, body)
    local status, got = post("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n", chunked)
    assert.are.equal(200, status)
    assert.are.equal(plain, got)
    -- chunked without one: the kept view
    chunked = string.format("%x\r\n%s\r\n0\r\n\r\n", #body, body)
    status, got = post("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n", chunked)
    assert.are.equal(200, status)
    assert.are.equal(plain, got)
  end)

  it("takes the JSON media types of SPEC §5 step 7, and only those", function()
    local function status_for(ct)
      return (post("Content-Type: " .. ct .. "\r\nContent-Length: " .. #body .. "\r\n", body))
    end
    for _, ct in ipairs { "application/json", "Application/JSON", "application/json; charset=utf-8",
      " application/json ", "application/vnd.api+json", "text/x+JSON;q=1" } do
      assert.are.equal(200, status_for(ct), ct)
    end
    for _, ct in ipairs { "application/jsonx", "text/plain", "application/json5", "+json", "/+json",
      "application/xjson" } do
      assert.are.equal(415, status_for(ct), ct)
    end
  end)
end)
