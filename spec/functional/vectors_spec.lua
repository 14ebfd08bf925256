-- Raw request vectors (spec/functional/vectors.lua), each on a fresh connection,
-- plus the Expect: 100-continue exchanges that need more than one write.
local server = require "helpers.server"
local http = require "helpers.http"
local vectors = require "functional.vectors"

describe("clank-run request parsing", function()
  local s = server.for_describe(server.fixture("basic"))

  for _, v in ipairs(vectors) do
    local what = v.closes == true and " and closes the connection"
      or v.closes == false and " and keeps the connection" or ""
    it("answers " .. v.name .. " with " .. v.status .. what, function()
      local res, conn = http.raw(s.port, v.raw)
      assert(res, conn)
      assert.are.equal(v.status, res.status)
      if v.content_type then
        local ct = res.headers["content-type"] or ""
        assert.are.equal(v.content_type, ct:sub(1, #v.content_type), "content-type " .. ct)
      end
      if v.body then
        assert.are.equal(v.body, res.body)
      end
      if v.closes == true then
        local closed, why = conn:closed(2)
        assert.is_true(closed, "connection still open: " .. tostring(why))
      elseif v.closes == false then
        assert(conn:send(http.build("GET", "/say?v=follow-up")))
        local nxt = assert(conn:read_response())
        assert.are.equal(200, nxt.status)
        assert.are.equal("follow-up", nxt.body)
      end
      conn:close()
    end)
  end

  describe("Expect: 100-continue", function()
    it("answers POST /echo with an interim 100 Continue, then 200 once the body is sent", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n"
        .. "Content-Length: 5\r\n\r\n"))
      local interim = assert(conn:read_response())
      assert.are.equal(100, interim.status)
      assert.are.equal("HTTP/1.1", interim.version)
      assert(conn:send("hello"))
      local final = assert(conn:read_response())
      assert.are.equal(200, final.status)
      assert.are.equal("hello", final.body)
      conn:close()
    end)

    it("treats the expectation case-insensitively (100-Continue)", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-Continue\r\n"
        .. "Content-Length: 5\r\n\r\n"))
      local interim = assert(conn:read_response())
      assert.are.equal(100, interim.status)
      assert(conn:send("hello"))
      local final = assert(conn:read_response())
      assert.are.equal(200, final.status)
      assert.are.equal("hello", final.body)
      conn:close()
    end)

    it("answers 200 when the client sends the body without waiting for 100", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n"
        .. "Content-Length: 5\r\n\r\nhello" .. http.build("GET", "/say?v=next")))
      local res = assert(conn:read_response())
      if res.status == 100 then
        res = assert(conn:read_response())
      end
      assert.are.equal(200, res.status)
      assert.are.equal("hello", res.body)
      local nxt = assert(conn:read_response())
      assert.are.equal("next", nxt.body)
      conn:close()
    end)

    it("ignores 100-continue on HTTP/1.0 (RFC 9110 §10.1.1): no interim response", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /echo HTTP/1.0\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n"
        .. "Content-Length: 5\r\n\r\nhello"))
      local res = assert(conn:read_response())
      assert.are.equal(200, res.status)
      assert.are.equal("hello", res.body)
      conn:close()
    end)

    it("answers an unknown path with 404 and no 100 Continue before it", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n"
        .. "Content-Length: 5\r\n\r\n"))
      local res = assert(conn:read_response())
      assert.are.equal(404, res.status)
      assert.are.equal("Not found.", res.body)
      conn:close()
    end)

    it("answers a body over 1 MiB by content-length with 413 and no 100 Continue before it", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n"
        .. "Content-Length: 1048577\r\n\r\n"))
      local res = assert(conn:read_response())
      assert.are.equal(413, res.status)
      conn:close()
    end)

    it("answers a foreign Host with 403 and no 100 Continue before it", function()
      local conn = assert(http.connect(s.port))
      assert(conn:send("POST /echo HTTP/1.1\r\nHost: evil.example\r\nExpect: 100-continue\r\n"
        .. "Content-Length: 5\r\n\r\n"))
      local res = assert(conn:read_response())
      assert.are.equal(403, res.status)
      conn:close()
    end)
  end)

  it("answers pipelined requests up to a malformed one, answers that with 400, then closes", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("GET", "/say?v=first")
      .. "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad : y\r\n\r\n"
      .. http.build("GET", "/say?v=never")))
    local list = assert(conn:read_responses(2))
    assert.are.equal(200, list[1].status)
    assert.are.equal("first", list[1].body)
    assert.are.equal(400, list[2].status)
    local closed, why = conn:closed(2)
    assert.is_true(closed, "connection still open: " .. tostring(why))
    conn:close()
  end)

  it("still serves normal requests after all the vectors", function()
    local res = assert(http.get(s.port, "/hello"))
    assert.are.equal(200, res.status)
    assert.are.equal("Hello, world!\n", res.body)
  end)
end)
