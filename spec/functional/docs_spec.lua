-- /__clank/docs (issue 34): the reference manual, doc/*.md rendered by clank-run with libcmark.
-- Every page reachable from the index is served, every link between pages names a page and an
-- anchor that exist; a path that names no page is 404, a path that leaves the folder too; raw
-- HTML in the Markdown never reaches the page; and only those who may see the inspector may
-- read it (a loopback peer naming a loopback Host, or the Host --inspector names).
local server = require "helpers.server"
local http = require "helpers.http"
local files = require "helpers.files"

local INDEX = "/__clank/docs"

-- A non-loopback address of this machine, or nil (then the peer rule cannot be exercised).
local function own_address()
  local p = io.popen("hostname -I 2>/dev/null")
  local out = p and p:read("a") or ""
  if p then p:close() end
  for addr in out:gmatch("%S+") do
    if addr:find("^%d+%.%d+%.%d+%.%d+$") and not addr:find("^127%.") then return addr end
  end
  return nil
end

-- `method path` with Host `host` (default loopback) over a connection to `address`.
local function request(port, method, path, host, address)
  local conn = assert(http.connect(port, address))
  assert(conn:send(http.build(method, path, nil, nil, { host = host or ("127.0.0.1:" .. port) })))
  local res = assert(conn:read_response({ method = method }))
  conn:close()
  return res
end

local function get(port, path, host, address)
  return request(port, "GET", path, host, address)
end

local function tmpdir() return files.tmpdir("clank-docs") end
local write = files.write

describe("/__clank/docs", function()
  local s = server.for_describe(server.fixture("live"))

  it("serves the index as an HTML page with the manual's title", function()
    local res = get(s.port, INDEX)
    assert.are.equal(200, res.status)
    assert.truthy(res.headers["content-type"]:find("text/html", 1, true))
    assert.truthy(res.headers["content-security-policy"]:find("default-src 'none'", 1, true))
    assert.truthy(res.body:find("<!doctype html>", 1, true))
    assert.truthy(res.body:find("<title>Clank reference manual</title>", 1, true), res.body:sub(1, 600))
    assert.are.equal(200, get(s.port, INDEX .. "/").status)
    assert.are.equal(res.body, get(s.port, INDEX .. "/README").body)
  end)

  it("serves a page by its name, with or without .md", function()
    local res = get(s.port, INDEX .. "/actions")
    assert.are.equal(200, res.status)
    assert.truthy(res.body:find('<h1 id="actions">', 1, true), res.body:sub(1, 800))
    assert.are.equal(res.body, get(s.port, INDEX .. "/actions.md").body)
    assert.are.equal(200, request(s.port, "HEAD", INDEX .. "/actions").status)
  end)

  it("resolves every link between pages, anchors included", function()
    local pages, queue, checked = {}, { INDEX }, 0
    local function page(path)
      if pages[path] == nil then
        local res = get(s.port, path)
        assert.are.equal(200, res.status, path)
        pages[path] = res.body
        queue[#queue + 1] = path
      end
      return pages[path]
    end
    page(INDEX)
    local i = 1
    while queue[i] do
      local from = queue[i]
      for href in pages[from]:gmatch('href="(/__clank/docs[^"]*)"') do
        local path, anchor = href:match("^([^#]*)#?(.*)$")
        local body = page(path)
        if anchor ~= "" then
          assert.truthy(body:find(' id="' .. anchor .. '"', 1, true),
            from .. " links to " .. href .. ", which has no such anchor")
        end
        checked = checked + 1
      end
      i = i + 1
    end
    assert.is_true(#queue >= 10, "only " .. #queue .. " pages reachable from the index")
    assert.is_true(checked >= 50, "only " .. checked .. " links")
  end)

  it("is 404 for a page that does not exist", function()
    for _, path in ipairs { INDEX .. "/nope", INDEX .. "/nope.md", INDEX .. "/actions/x", INDEX .. "x" } do
      local res = get(s.port, path)
      assert.are.equal(404, res.status, path)
      assert.are.equal("Not found.", res.body)
    end
  end)

  it("refuses every path that leaves its folder", function()
    for _, path in ipairs { INDEX .. "/../README", INDEX .. "/..%2FREADME", INDEX .. "/%2e%2e/README",
      INDEX .. "/../../../../etc/passwd", INDEX .. "/..", INDEX .. "/.md", INDEX .. "/clank-run.1",
      INDEX .. "/%2Fetc%2Fpasswd" } do
      assert.are.equal(404, get(s.port, path).status, path)
    end
  end)

  it("answers only GET and HEAD", function()
    local res = request(s.port, "POST", INDEX)
    assert.are.equal(405, res.status)
    assert.are.equal("GET, HEAD", res.headers["allow"])
  end)

  it("is one click from the inspector", function()
    local res = get(s.port, "/__clank/inspector")
    assert.are.equal(200, res.status)
    assert.truthy(res.body:find('href="/__clank/docs"', 1, true))
  end)

  it("is 404 for a Host that is not loopback, as the inspector is", function()
    for _, host in ipairs { "app.example", "evil.example:" .. s.port } do
      local res = get(s.port, INDEX, host)
      assert.are.equal(404, res.status, host)
      assert.are.equal("Not found.", res.body)
      assert.are.equal(404, get(s.port, INDEX .. "/actions", host).status)
    end
  end)
end)

describe("/__clank/docs access", function()
  local s
  before_each(function() s = nil end)
  after_each(function() if s then assert.are.equal(0, s:stop()) end end)

  it("is 404 for a peer that is not loopback, whatever the Host says", function()
    local addr = own_address()
    if not addr then
      pending("no non-loopback address on this machine")
      return
    end
    s = server.start(server.fixture("live"), { args = { "--host", "0.0.0.0" } })
    assert.are.equal(404, get(s.port, INDEX, "localhost", addr).status)
    assert.are.equal(200, get(s.port, INDEX, "localhost", "127.0.0.1").status)
  end)

  it("opens for the Host --inspector names, from any peer", function()
    local addr = own_address()
    local args = { "--inspector", "inspect.test" }
    if addr then args[#args + 1] = "--host"; args[#args + 1] = "0.0.0.0" end
    s = server.start(server.fixture("live"), { args = args })
    assert.are.equal(200, get(s.port, INDEX, "inspect.test:" .. s.port).status)
    if addr then
      assert.are.equal(200, get(s.port, INDEX, "inspect.test", addr).status)
      assert.are.equal(404, get(s.port, INDEX, "other.test", addr).status)
    end
    assert.are.equal(404, get(s.port, INDEX, "inspect.test.evil").status)
  end)

  it("renders tables and anchors, and never raw HTML or unsafe links", function()
    local dir = tmpdir()
    write(dir .. "/README.md", table.concat({
      "# Title & more",
      "",
      "<script>alert(1)</script>",
      "",
      "Text <b onclick=\"x()\">bold</b> [bad](javascript:alert(1)) [page](other.md#a-b) [top](#title--more)",
      "",
      "| name | what |",
      "|---|:---:|",
      "| `a \\| b` | [x](other.md) |",
      "",
      "```",
      "| not | a table |",
      "|---|---|",
      "```",
      "",
      "## A b",
      "## A b",
    }, "\n"))
    write(dir .. "/other.md", "# Other\n\n## A b\n")
    s = server.start(server.fixture("live"), { env = { CLANK_DOC_DIR = dir } })
    local body = get(s.port, INDEX).body
    assert.falsy(body:find("<script>alert", 1, true))
    assert.falsy(body:find("onclick", 1, true))
    assert.falsy(body:find("javascript:", 1, true))
    assert.truthy(body:find("<title>Title &amp; more</title>", 1, true), body)
    assert.truthy(body:find('<h1 id="title--more">', 1, true), body)
    assert.truthy(body:find('<a href="/__clank/docs/other#a-b">page</a>', 1, true), body)
    assert.truthy(body:find('<a href="#title--more">top</a>', 1, true), body)
    assert.truthy(body:find("<table>", 1, true), body)
    assert.truthy(body:find("<code>a | b</code>", 1, true), body)
    assert.truthy(body:find('<a href="/__clank/docs/other">x</a>', 1, true), body)
    assert.truthy(body:find("<pre><code>| not | a table |", 1, true), body)
    assert.truthy(body:find('<h2 id="a-b">A b</h2>', 1, true), body)
    assert.truthy(body:find('<h2 id="a-b-1">A b</h2>', 1, true), body)
    assert.truthy(get(s.port, INDEX .. "/other").body:find('<h2 id="a-b">', 1, true))
    os.execute("rm -rf " .. dir)
  end)
end)
