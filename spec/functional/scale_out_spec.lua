-- Scale-out behind nginx (SPEC §13 "Beyond one machine", §11 view session tokens, §6 MCP session
-- ids): two real clank-run instances of apps/tasks on the shared PostgreSQL (CLANK_TEST_POSTGRES_URL,
-- as in ./dev test), one CLANK_SECRET, behind Debian's real nginx running deploy/nginx.conf with
-- only the two instance addresses and its listen address replaced. Which instance answered is
-- read from each instance's own /__clank/metrics (asked directly, by its port) and from the
-- access logs.
local server = require "helpers.server"
local http = require "helpers.http"
local storage = require "helpers.storage"
local ws = require "helpers.websocket"
local socket = require "socket"
local cjson = require "cjson"

local pg_url = storage.postgres_url
local PG_PENDING = "CLANK_TEST_POSTGRES_URL is not set (./dev test starts a throwaway cluster and sets it)"
local APP = server.source_dir() .. "/apps/tasks"
local CONF = server.source_dir() .. "/deploy/nginx.conf"
local SECRET = "scale-out-spec-0123456789abcdef0123456789abcdef"
-- nginx and psql run without the ASan runtime the sanitizer build preloads into lua5.4.
local PLAIN = "env -u LD_PRELOAD "
local slow = server.sanitized and 4 or 1

local files = require "helpers.files"
local quote, write_file, eventually = files.quote, files.write, files.eventually

local function read_file(path)
  return files.read(path) or ""
end

--------------------------------------------------------------------------------
-- nginx, run in the foreground from a folder of its own

local Nginx = {}
Nginx.__index = Nginx

-- deploy/nginx.conf with the instance addresses and the listen address replaced; each of the
-- three lines must be there exactly once, so the file cannot drift away from what is tested.
local function configure(port_a, port_b, port)
  local text = read_file(CONF)
  assert(text ~= "", "cannot read " .. CONF)
  for _, r in ipairs({
    { "server 127.0.0.1:8081 ", "server 127.0.0.1:" .. port_a .. " " },
    { "server 127.0.0.1:8082 ", "server 127.0.0.1:" .. port_b .. " " },
    { "listen 127.0.0.1:8080;", "listen 127.0.0.1:" .. port .. ";" },
  }) do
    local from, to = r[1], r[2]
    local at = text:find(from, 1, true)
    assert(at and not text:find(from, at + 1, true), "deploy/nginx.conf must hold " .. from .. " once")
    text = text:sub(1, at - 1) .. to .. text:sub(at + #from)
  end
  return text
end

local function start_nginx(port_a, port_b)
  local nginx = "/usr/sbin/nginx"
  local probe = io.open(nginx)
  assert(probe, "no " .. nginx .. ": install Debian's nginx (vendor/deps.sh --test)")
  probe:close()
  local dir = os.tmpname()
  os.remove(dir)
  -- 755: nginx's workers run as nobody when the spec runs as root
  assert(os.execute("mkdir -p " .. quote(dir .. "/logs") .. " && chmod 755 " .. quote(dir)))
  local self = setmetatable({ dir = dir, port = server.free_port() }, Nginx)
  write_file(dir .. "/nginx.conf", configure(port_a, port_b, self.port))
  self.status_path = dir .. "/status"
  local argv = { nginx, "-p", dir .. "/", "-c", dir .. "/nginx.conf", "-e", dir .. "/logs/error.log",
                 "-g", "daemon off;" }
  local words = {}
  for i, a in ipairs(argv) do
    words[i] = quote(a)
  end
  local inner = "echo $$; exec " .. PLAIN .. table.concat(words, " ") .. " >"
    .. quote(dir .. "/nginx.out") .. " 2>&1 </dev/null"
  self.pipe = assert(io.popen("sh -c " .. quote(inner) .. "; echo $? >" .. quote(self.status_path .. ".tmp")
    .. " && mv " .. quote(self.status_path .. ".tmp") .. " " .. quote(self.status_path), "r"))
  self.pid = tonumber(self.pipe:read("l"))
  assert(self.pid, "could not spawn nginx")
  local up = eventually(10, function()
    if read_file(self.status_path) ~= "" then
      return "exited"
    end
    local c = socket.connect("127.0.0.1", self.port)
    if c then
      c:close()
      return "up"
    end
  end)
  if up ~= "up" then
    local logs = read_file(dir .. "/nginx.out") .. read_file(dir .. "/logs/error.log")
    self:stop()
    error("nginx did not start (" .. tostring(up) .. "):\n" .. logs)
  end
  return self
end

function Nginx:log()
  return read_file(self.dir .. "/logs/access.log")
end

-- SIGTERM (fast shutdown), SIGKILL after 10 s; removes the folder.
function Nginx:stop()
  if not self.pid then
    return
  end
  os.execute("kill -s TERM " .. self.pid .. " 2>/dev/null")
  if not eventually(10, function() return read_file(self.status_path) ~= "" end) then
    os.execute("kill -s KILL " .. self.pid .. " 2>/dev/null")
    eventually(5, function() return read_file(self.status_path) ~= "" end)
  end
  self.pipe:close()
  self.pid = nil
  os.execute("rm -rf " .. quote(self.dir))
end

-- Runs SQL through psql against the test database; returns its output.
local function psql(sql)
  return require("helpers.psql")(pg_url, sql)
end

--------------------------------------------------------------------------------
-- Requests

local function create_body(title)
  return '{"estimate":null,"tags":[],"title":' .. cjson.encode(title) .. "}"
end

local WRITE = { ["content-type"] = "application/json", ["x-clank-confirmation"] = "confirmed" }

local function create(port, title, headers)
  local h = {}
  for k, v in pairs(WRITE) do
    h[k] = v
  end
  for k, v in pairs(headers or {}) do
    h[k] = v
  end
  return assert(http.request(port, "POST", "/actions/tasks.create", h, create_body(title)))
end

-- The value of one sample of an instance's metrics, asked of the instance itself.
local function metric(port, sample)
  local res = assert(http.get(port, "/__clank/metrics"))
  assert.are.equal(200, res.status)
  local at = res.body:find("\n" .. sample .. " ", 1, true)
  if not at then
    return 0
  end
  return tonumber(res.body:match("^ (%S+)", at + 1 + #sample))
end

local CREATED = 'clank_action_calls_total{action="tasks.create",outcome="ok"}'
local MCP_200 = 'clank_requests_total{kind="mcp",status="200"}'

-- The session token and the html of a page.
local function page(port)
  local res = assert(http.get(port, "/"))
  assert.are.equal(200, res.status, res.body)
  local id = res.body:match('<div data%-clank%-root data%-clank%-session="([^"]+)">')
  assert.truthy(id, "no session token in the page")
  return id, res.body
end

-- Opens the live channel of session `id` on `port` as a browser on that origin would.
local function live(port, id)
  local origin = "127.0.0.1:" .. port
  return ws.connect(port, "/__clank/sessions/" .. id .. "/live", { Host = origin, Origin = "http://" .. origin })
end

-- The data-clank-key of the element whose data-clank-id (or, for a form, data-clank-form) is `id`.
local function key_of(html, id, attribute)
  local marker = "data-clank-" .. (attribute or "id") .. '="' .. id .. '"'
  for tag in html:gmatch("<[a-z]+%s[^>]*>") do
    if tag:find(marker, 1, true) then
      return tag:match('data%-clank%-key="([^"]+)"')
    end
  end
  error("no element with " .. marker .. " in the view", 2)
end

local function summary(html)
  return html:match('<p class="summary" data%-clank%-id="summary">([^<]*)</p>')
end

-- "N open tasks · M done" (or "Nothing to do yet.") → N.
local function open_count(html)
  local s = summary(html)
  assert.truthy(s, "no summary in the view")
  if s == "Nothing to do yet." then
    return 0
  end
  return tonumber(s:match("^(%d+) open tasks? "))
end

local function mcp_post(port, message, headers)
  local h = { ["content-type"] = "application/json", accept = "application/json, text/event-stream" }
  for k, v in pairs(headers or {}) do
    h[k] = v
  end
  return assert(http.request(port, "POST", "/__clank/mcp", h, cjson.encode(message)))
end

local function mcp_initialize(port)
  local res = mcp_post(port, { jsonrpc = "2.0", id = 1, method = "initialize",
    params = { protocolVersion = "2025-11-25", capabilities = {}, clientInfo = { name = "spec", version = "0" } } })
  assert.are.equal(200, res.status, res.body)
  local sid = res.headers["mcp-session-id"]
  assert.truthy(sid, "initialize answered no Mcp-Session-Id")
  return sid
end

local function tools_list(port, sid)
  return mcp_post(port, { jsonrpc = "2.0", id = 2, method = "tools/list" },
    { ["mcp-session-id"] = sid, ["mcp-protocol-version"] = "2025-11-25" })
end

--------------------------------------------------------------------------------

describe("two clank-run instances behind nginx (deploy/nginx.conf)", function()
  if not pg_url then
    it("needs PostgreSQL", function() pending(PG_PENDING) end)
    return
  end

  local a, b, nginx
  local user = storage.unique_user("scale-out")

  setup(function()
    local opts = { args = { "--no-watch" },
                   env = { CLANK_SECRET = SECRET, CLANK_TASKS_DB = pg_url, CLANK_TASKS_USER = user } }
    a = server.start(APP, opts)
    b = server.start(APP, opts)
    nginx = start_nginx(a.port, b.port)
  end)

  teardown(function()
    if nginx then
      nginx:stop()
    end
    local failures = {}
    for _, s in ipairs({ a, b }) do
      if s and not s.killed then
        local ok, code = pcall(s.stop, s)
        if not ok then
          failures[#failures + 1] = tostring(code)
        elseif code ~= 0 then
          failures[#failures + 1] = "clank-run exited " .. code .. " after SIGTERM; stderr:\n" .. s:stderr()
        end
      end
    end
    server.kill_all()
    assert(#failures == 0, table.concat(failures, "\n"))
  end)

  it("spreads actions over both instances and passes request ids", function()
    local before_a, before_b = metric(a.port, CREATED), metric(b.port, CREATED)
    for i = 1, 20 do
      local res = create(nginx.port, "spread " .. i)
      assert.are.equal(200, res.status, res.body)
    end
    local got_a, got_b = metric(a.port, CREATED) - before_a, metric(b.port, CREATED) - before_b
    assert.are.equal(20, got_a + got_b)
    assert.is_true(got_a > 0 and got_b > 0, "instance A ran " .. got_a .. ", B " .. got_b)

    -- a client's request id reaches the instance (its access log) and comes back
    local rid = "scale-out-" .. math.random(1, 1e9)
    local res = create(nginx.port, "with an id", { ["x-request-id"] = rid })
    assert.are.equal(200, res.status, res.body)
    assert.are.equal(rid, res.headers["x-request-id"])
    assert.truthy(eventually(5 * slow, function()
      return (a:stderr() .. b:stderr()):find(rid, 1, true)
    end), "neither instance logged the request id " .. rid)
    -- without one, nginx's own (32 hex digits), in both access logs
    res = create(nginx.port, "without an id")
    assert.are.equal(200, res.status, res.body)
    local own = res.headers["x-request-id"]
    assert.truthy(own and own:match("^%x+$") and #own == 32, "not nginx's request id: " .. tostring(own))
    assert.truthy(eventually(5 * slow, function()
      return (a:stderr() .. b:stderr()):find(own, 1, true) and nginx:log():find("id=" .. own, 1, true)
    end), "the request id " .. own .. " is not in both access logs")
  end)

  it("serves a live view through nginx, and mounts a page of one instance on the other", function()
    local id, html = page(nginx.port)
    local before = open_count(html)
    local conn = assert(live(nginx.port, id))
    local first = assert(conn:next_json(nil, 5 * slow))
    assert.are.equal("html", first.t)
    assert.are.equal(0, first.seq)
    -- type the title (an input event), then submit the form, as the browser's client does
    local title = "live " .. math.random(1, 1e9)
    assert(conn:send_json({ t = "event", seq = 1, v = first.v, key = key_of(first.html, "new-task.title"),
                            type = "input", value = title }))
    local typed = assert(conn:next_json(function(m) return m.t == "html" and m.seq == 1 end, 10 * slow))
    assert(conn:send_json({ t = "event", seq = 2, v = typed.v, key = key_of(typed.html, "new-task", "form"),
                            type = "submit", confirmed = true,
                            values = { title = title, priority = "", estimate = "", tags = "" } }))
    local answer = assert(conn:next_json(function(m) return m.t == "html" and m.seq == 2 end, 10 * slow))
    assert.truthy(answer.html:find("Added \u{201c}" .. title .. "\u{201d}.", 1, true),
      "no notice of the task added in the view: " .. tostring(summary(answer.html)))
    assert.truthy(answer.html:find('data-clank-label="' .. title .. '"', 1, true), "the new task is not listed")
    assert.are.equal(before + 1, open_count(answer.html))
    conn:close()

    -- the same session always reaches the same instance: a second live connection replaces the
    -- first (4409), which it could not do on the other instance
    for _ = 1, 3 do
      local sid = page(nginx.port)
      local one = assert(live(nginx.port, sid))
      assert.are.equal("html", assert(one:next_json(nil, 5 * slow)).t)
      local two = assert(live(nginx.port, sid))
      assert.are.equal(4409, one:close_code(5 * slow))
      assert.are.equal("html", assert(two:next_json(nil, 5 * slow)).t)
      one:close()
      two:close()
    end

    -- a token from instance A mounts on instance B, and one from B on A
    for _, pair in ipairs({ { a, b }, { b, a } }) do
      local sid = page(pair[1].port)
      local other = assert(live(pair[2].port, sid))
      local msg = assert(other:next_json(nil, 5 * slow))
      assert.are.equal("html", msg.t)
      assert.truthy(msg.html:find("Add a task", 1, true), msg.html)
      other:close()
    end
  end)

  it("accepts an MCP session of one instance on the other, and routes it to one instance", function()
    local sid = mcp_initialize(a.port)
    local res = tools_list(b.port, sid)
    assert.are.equal(200, res.status, res.body)
    local names = {}
    for _, tool in ipairs(cjson.decode(res.body).result.tools) do
      names[#names + 1] = tool.name
    end
    table.sort(names)
    assert.are.same({ "tasks_archive", "tasks_complete", "tasks_create", "tasks_list" }, names)
    -- an id that does not verify is refused there
    local forged = sid:sub(1, -2) .. (sid:sub(-1) == "0" and "1" or "0")
    assert.are.equal(404, tools_list(b.port, forged).status)

    -- through nginx, every request of one MCP session goes to the same instance
    local sid2 = mcp_initialize(nginx.port)
    local before_a, before_b = metric(a.port, MCP_200), metric(b.port, MCP_200)
    for _ = 1, 8 do
      assert.are.equal(200, tools_list(nginx.port, sid2).status)
    end
    local got_a, got_b = metric(a.port, MCP_200) - before_a, metric(b.port, MCP_200) - before_b
    assert.are.same({ 8, 0 }, got_a > 0 and { got_a, got_b } or { got_b, got_a })
  end)

  it("loses no acknowledged write when an instance is killed mid-load", function()
    local CONNS, ROUNDS, KILL_ROUND = 8, 25, 6
    local conns = {}
    for i = 1, CONNS do
      conns[i] = assert(http.connect(nginx.port))
    end
    local acked, failed = {}, {} -- title → id; round → failures
    local n = 0
    local b_start, b_before = metric(b.port, CREATED), 0
    for round = 1, ROUNDS do
      local titles = {}
      for i, c in ipairs(conns) do
        n = n + 1
        titles[i] = "load " .. user .. " " .. n
        assert(c:send(http.build("POST", "/actions/tasks.create", WRITE, create_body(titles[i]))))
      end
      if round == KILL_ROUND then
        b_before = metric(b.port, CREATED)
        b:kill()
        b.killed = true
      end
      for i, c in ipairs(conns) do
        local res = assert(c:read_response({ timeout = 10 * slow }))
        local body = res.status == 200 and cjson.decode(res.body)
        if body and body.ok and body.output.created then
          acked[titles[i]] = body.output.id
        else
          failed[round] = (failed[round] or 0) + 1
        end
      end
    end
    for _, c in ipairs(conns) do
      c:close()
    end
    assert.is_true(b_before > b_start, "instance B ran no write of the load before it was killed")
    -- only the requests in flight when B died (and at most the next round) may fail
    for round, count in pairs(failed) do
      assert.is_true(round == KILL_ROUND or round == KILL_ROUND + 1,
        count .. " writes failed in round " .. round .. " (B was killed in round " .. KILL_ROUND .. ")")
    end

    -- every acknowledged write is in the database: read through the survivor, and by psql
    local res = assert(http.request(a.port, "POST", "/actions/tasks.list",
      { ["content-type"] = "application/json" }, "{}"))
    assert.are.equal(200, res.status, res.body)
    local listed = {}
    for _, t in ipairs(cjson.decode(res.body).output.tasks) do
      listed[t.id] = t.title
    end
    local rows, copies = {}, {}
    for line in psql("SELECT id || '|' || title FROM tasks WHERE owner = '" .. user .. "'"):gmatch("[^\n]+") do
      local id, title = line:match("^(%d+)|(.*)$")
      rows[id] = title
      copies[title] = (copies[title] or 0) + 1
    end
    -- and none was written twice (nginx never resends a POST that reached an instance)
    for title, k in pairs(copies) do
      assert.are.equal(1, k, title .. " was written " .. k .. " times")
    end
    local count = 0
    for title, id in pairs(acked) do
      count = count + 1
      assert.are.equal(title, listed[id], "acknowledged write " .. title .. " (id " .. id .. ") is not listed")
      assert.are.equal(title, rows[id], "acknowledged write " .. title .. " (id " .. id .. ") is not in PostgreSQL")
    end
    assert.is_true(count >= CONNS * (ROUNDS - 2), count .. " of " .. n .. " writes acknowledged")
  end)
end)
