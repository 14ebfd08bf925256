-- Persistent connections and pipelining (SPEC §13, RFC 9112 §9).
local server = require "helpers.server"
local http = require "helpers.http"

describe("clank-run keep-alive", function()
  local s = server.for_describe(server.fixture("basic"))

  it("answers 100 requests one after another on one connection", function()
    local conn = assert(http.connect(s.port))
    for i = 1, 100 do
      assert(conn:send(http.build("GET", "/say?v=r" .. i)))
      local res = assert(conn:read_response())
      assert.are.equal(200, res.status)
      assert.are.equal("r" .. i, res.body)
    end
    conn:close()
  end)

  it("answers 16 pipelined requests sent in one write, in order", function()
    local parts = {}
    for i = 1, 16 do
      if i % 4 == 0 then
        parts[i] = http.build("POST", "/echo", nil, "posted-" .. i)
      else
        parts[i] = http.build("GET", "/say?v=piped-" .. i)
      end
    end
    local conn = assert(http.connect(s.port))
    assert(conn:send(table.concat(parts)))
    local list = assert(conn:read_responses(16))
    for i = 1, 16 do
      assert.are.equal(200, list[i].status)
      assert.are.equal(i % 4 == 0 and ("posted-" .. i) or ("piped-" .. i), list[i].body)
    end
    assert.is_true(conn:stays_open(0.2))
    conn:close()
  end)

  it("keeps pipelined responses in order when an earlier request is slower", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("GET", "/sleep?ms=200") .. http.build("GET", "/say?v=fast")
      .. http.build("HEAD", "/hello") .. http.build("GET", "/nope")))
    local list = assert(conn:read_responses(4, { "GET", "GET", "HEAD", "GET" }))
    assert.are.equal("slept 200", list[1].body)
    assert.are.equal("fast", list[2].body)
    assert.are.equal(200, list[3].status)
    assert.are.equal("", list[3].body)
    assert.are.equal(404, list[4].status)
    conn:close()
  end)

  it("answers a request that follows an early 404 for a POST with a body (one write)", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("POST", "/nope", nil, string.rep("x", 1000))
      .. http.build("GET", "/say?v=after")))
    local list = assert(conn:read_responses(2))
    assert.are.equal(404, list[1].status)
    assert.are.equal("Not found.", list[1].body)
    assert.are.equal(200, list[2].status)
    assert.are.equal("after", list[2].body)
    conn:close()
  end)

  it("answers a request that follows an early 404 whose body arrives after the answer", function()
    local conn = assert(http.connect(s.port))
    local body = string.rep("y", 2000)
    assert(conn:send("POST /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " .. #body
      .. "\r\n\r\n"))
    local first = assert(conn:read_response())
    assert.are.equal(404, first.status)
    assert.are_not.equal("close", first.headers["connection"])
    assert(conn:send(body .. http.build("GET", "/say?v=after-drain")))
    local second = assert(conn:read_response())
    assert.are.equal(200, second.status)
    assert.are.equal("after-drain", second.body)
    conn:close()
  end)

  it("closes an HTTP/1.0 connection after the response", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send("GET /hello HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"))
    local res = assert(conn:read_response())
    assert.are.equal(200, res.status)
    assert.are.equal("Hello, world!\n", res.body)
    assert.is_true(conn:closed(2))
    conn:close()
  end)

  it("keeps an HTTP/1.0 connection open when it asks for keep-alive", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send("GET /say?v=one HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n"))
    local res = assert(conn:read_response())
    assert.are.equal(200, res.status)
    assert.are.equal("one", res.body)
    assert(conn:send("GET /say?v=two HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n"))
    local res2 = assert(conn:read_response())
    assert.are.equal(200, res2.status)
    assert.are.equal("two", res2.body)
    conn:close()
  end)

  it("closes the connection after a request with Connection: close and ignores what follows", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("GET", "/say?v=last", { { "Connection", "close" } })
      .. http.build("GET", "/say?v=ignored")))
    local res = assert(conn:read_response())
    assert.are.equal(200, res.status)
    assert.are.equal("last", res.body)
    assert.is_true(conn:closed(2))
    conn:close()
  end)

  it("keeps an HTTP/1.1 connection open by default", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("GET", "/hello")))
    local res = assert(conn:read_response())
    assert.are.equal(200, res.status)
    assert.is_true(conn:stays_open(0.3))
    conn:close()
  end)

  it("answers 200 pipelined requests (over 64 KiB) sent while a handler waits, in order", function()
    local parts = { http.build("GET", "/sleep?ms=200") }
    local pad = string.rep("p", 400)
    for i = 1, 200 do
      parts[#parts + 1] = http.build("GET", "/say?v=" .. i, { { "X-Pad", pad } })
    end
    local data = table.concat(parts)
    assert.is_true(#data > 65536)
    local conn = assert(http.connect(s.port))
    assert(conn:send(data))
    local list = assert(conn:read_responses(201))
    assert.are.equal("slept 200", list[1].body)
    for i = 1, 200 do
      assert.are.equal(tostring(i), list[i + 1].body)
    end
    conn:close()
  end)

  it("answers 20 pipelined 64 KiB responses that the client reads only afterwards", function()
    local conn = assert(http.connect(s.port))
    local parts = {}
    for i = 1, 20 do
      parts[i] = http.build("GET", "/big")
    end
    parts[21] = http.build("GET", "/say?v=end")
    assert(conn:send(table.concat(parts)))
    http.sleep(0.3) -- let the server's writes back up
    local list = assert(conn:read_responses(21))
    for i = 1, 20 do
      assert.are.equal(65536, #list[i].body)
    end
    assert.are.equal("end", list[21].body)
    conn:close()
  end)

  it("keeps serving after clients disconnect mid-header, mid-body and while a handler runs", function()
    local a = assert(http.connect(s.port))
    a:send("GET /hello HTTP/1.1\r\nHost: 12")
    a:close()
    local b = assert(http.connect(s.port))
    b:send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nhalf")
    b:close()
    local c = assert(http.connect(s.port))
    c:send(http.build("GET", "/sleep?ms=100"))
    http.sleep(0.02)
    c:close()
    local d = assert(http.connect(s.port))
    d:send(http.build("GET", "/big"))
    d:close() -- without reading the response
    http.sleep(0.2)
    local res = assert(http.get(s.port, "/hello"))
    assert.are.equal(200, res.status)
    assert.are.equal("Hello, world!\n", res.body)
  end)

  it("serves many connections at once", function()
    local conns = {}
    for i = 1, 50 do
      conns[i] = assert(http.connect(s.port))
    end
    for i = 1, 50 do
      assert(conns[i]:send(http.build("GET", "/say?v=c" .. i)))
    end
    for i = 50, 1, -1 do
      local res = assert(conns[i]:read_response())
      assert.are.equal("c" .. i, res.body)
      conns[i]:close()
    end
  end)
end)
