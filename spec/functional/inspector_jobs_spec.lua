-- /__clank/inspector/jobs (SPEC §16, issue 32): the jobs fixture's jobs as a person sees them,
-- their Retry and Cancel forms, the CSRF rule on those forms' POSTs and the inspector's access
-- rule on all of it. Every expected count, state, attempt and error is worked out from the
-- fixture's jobs (spec/fixtures/apps/jobs/app.lua) and the retry rules, never read back from
-- an earlier answer.
local server = require "helpers.server"
local http = require "helpers.http"
local files = require "helpers.files"
local jobs = require "helpers.jobs"
local json = require "clank.json"

local PAGE = "/__clank/inspector/jobs"
local FORM = { ["content-type"] = "application/x-www-form-urlencoded" }

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

-- method path with headers (Host: 127.0.0.1:port unless given) over a connection to `address`
-- (default loopback).
local function send(port, method, path, headers, address)
  local h = { host = "127.0.0.1:" .. port }
  for k, v in pairs(headers or {}) do h[k] = v end
  local conn = assert(http.connect(port, address))
  assert(conn:send(http.build(method, path, h, method == "POST" and "" or nil)))
  local res = assert(conn:read_response({ method = method }))
  conn:close()
  return res
end

-- What a browser sends with the page's own form: its origin, and same-origin.
local function post_form(port, path, extra)
  local h = { origin = "http://127.0.0.1:" .. port, ["sec-fetch-site"] = "same-origin" }
  for k, v in pairs(FORM) do h[k] = v end
  for k, v in pairs(extra or {}) do h[k] = v end
  return send(port, "POST", path, h)
end

-- The line of the fixture's boom job that raises, so its error's place is known beforehand.
local function boom_line()
  local n = 0
  for line in io.lines(jobs.APP) do
    n = n + 1
    if line:find('error("boom")', 1, true) then return n end
  end
  error("the fixture has no boom job")
end

local runs = jobs.runs

local function plain(s) return (s:gsub("%p", "%%%0")) end

describe("/__clank/inspector/jobs", function()
  local db, s

  before_each(function()
    db = jobs.database()
    s = server.start(jobs.APP, { env = { JOBS_DB = db } })
  end)

  after_each(function()
    if s then assert.are.equal(0, s:stop()) end
    s = nil
    server.kill_all()
    jobs.remove(db)
  end)

  it("shows each queue's jobs by state, a dead job with its error, and the last jobs", function()
    local boom = jobs.enqueue(s.port, { job = "boom" })[1]
    jobs.wait(s.port, boom, { dead = true })
    local record = jobs.enqueue(s.port, { job = "record" })[1]
    jobs.wait(s.port, record, { done = true })
    local later = jobs.enqueue(s.port, { job = "record", delay = 600000 })[1]
    local res = send(s.port, "GET", PAGE)
    assert.are.equal(200, res.status)
    assert.are.equal("text/html; charset=utf-8", res.headers["content-type"])
    assert.are.equal("no-store", res.headers["cache-control"])
    assert.truthy(res.headers["content-security-policy"]:find("form-action 'self'", 1, true))
    local body = res.body
    -- default: 1 available (the delayed one), 0 running, 1 done, 1 dead, 0 cancelled
    assert.truthy(body:find("<tr><td>default</td><td>1</td><td>0</td><td>1</td><td>1</td><td>0</td></tr>", 1,
      true), body)
    -- boom (retry.max 2) died at its second attempt, with the error its handler raised
    local err = "app.lua:" .. boom_line() .. ": boom"
    local dead = assert(body:match('<table id="dead">.-</table>'), body)
    assert.truthy(dead:find('<tr id="dead%-' .. boom .. '"><td>' .. boom .. "</td><td>boom</td><td>default</td>"
      .. "<td>2/2</td><td>[^<]+</td><td class=\"error\">[^<]*" .. plain(err) .. "</td>"), dead)
    assert.truthy(dead:find('action="' .. PAGE .. "/" .. boom .. '/retry" method="post"', 1, true), dead)
    local _, deadRows = dead:gsub("<tr id=", "")
    assert.are.equal(1, deadRows)
    -- the last jobs, newest first: each with its state, attempts and the button that fits it
    local recent = assert(body:match('<table id="recent">.-</table>'), body)
    local a = recent:find('<tr id="job-' .. later .. '"><td>' .. later .. "</td><td>record</td><td>default</td>"
      .. "<td>available</td><td>0/5</td>", 1, true)
    local b = recent:find('<tr id="job-' .. record .. '"><td>' .. record .. "</td><td>record</td><td>default</td>"
      .. "<td>done</td><td>1/5</td>", 1, true)
    local c = recent:find('<tr id="job-' .. boom .. '"><td>' .. boom .. "</td><td>boom</td><td>default</td>"
      .. "<td>dead</td><td>2/2</td>", 1, true)
    assert.truthy(a and b and c and a < b and b < c, recent)
    assert.truthy(recent:find(PAGE .. "/" .. later .. "/cancel", 1, true))
    assert.falsy(recent:find(PAGE .. "/" .. later .. "/retry", 1, true))
    assert.truthy(recent:find(PAGE .. "/" .. record .. "/retry", 1, true))
    assert.falsy(recent:find(PAGE .. "/" .. record .. "/cancel", 1, true))
    -- and the inspector links to it
    local main = send(s.port, "GET", "/__clank/inspector")
    assert.truthy(main.body:find('href="' .. PAGE .. '"', 1, true))
    assert.are.equal(200, send(s.port, "HEAD", PAGE).status)
  end)

  it("runs a dead job again on Retry, and says so", function()
    local boom = jobs.enqueue(s.port, { job = "boom" })[1]
    jobs.wait(s.port, boom, { dead = true })
    assert.are.equal(2, runs(s.port)) -- its two attempts
    local res = post_form(s.port, PAGE .. "/" .. boom .. "/retry")
    assert.are.equal(303, res.status, res.body)
    assert.are.equal(PAGE .. "?op=retry&id=" .. boom .. "&ok=1", res.headers.location)
    -- its attempts counted afresh: two more runs, and dead again at 2/2
    local row = jobs.wait(s.port, boom, { dead = true })
    assert.are.equal(2, row.attempt)
    jobs.eventually(function() return runs(s.port) >= 4 end, "the retried job's runs")
    assert.are.equal(4, runs(s.port))
    local page = send(s.port, "GET", res.headers.location)
    assert.truthy(page.body:find("Job " .. boom .. " will run again.", 1, true), page.body)
    -- a job that has not ended cannot be retried: 303 with ok=0, and nothing changes
    local later = jobs.enqueue(s.port, { job = "record", delay = 600000 })[1]
    res = post_form(s.port, PAGE .. "/" .. later .. "/retry")
    assert.are.equal(303, res.status)
    assert.are.equal(PAGE .. "?op=retry&id=" .. later .. "&ok=0", res.headers.location)
    assert.are.equal("available", jobs.get(s.port, later).state)
    page = send(s.port, "GET", res.headers.location)
    assert.truthy(page.body:find("Job " .. later .. " was not retried", 1, true), page.body)
  end)

  it("cancels a delayed job on Cancel, once", function()
    local later = jobs.enqueue(s.port, { job = "record", delay = 600000 })[1]
    local res = post_form(s.port, PAGE .. "/" .. later .. "/cancel")
    assert.are.equal(303, res.status, res.body)
    assert.are.equal(PAGE .. "?op=cancel&id=" .. later .. "&ok=1", res.headers.location)
    assert.are.equal("cancelled", jobs.get(s.port, later).state)
    local page = send(s.port, "GET", res.headers.location)
    assert.truthy(page.body:find("Job " .. later .. " is cancelled.", 1, true), page.body)
    assert.truthy(page.body:find("<tr><td>default</td><td>0</td><td>0</td><td>0</td><td>0</td><td>1</td></tr>", 1,
      true), page.body)
    res = post_form(s.port, PAGE .. "/" .. later .. "/cancel")
    assert.are.equal(PAGE .. "?op=cancel&id=" .. later .. "&ok=0", res.headers.location)
    res = post_form(s.port, PAGE .. "/999999/cancel") -- no such job
    assert.are.equal(PAGE .. "?op=cancel&id=999999&ok=0", res.headers.location)
  end)

  it("refuses a cross-site POST with 403 and leaves the job as it was", function()
    local later = jobs.enqueue(s.port, { job = "record", delay = 600000 })[1]
    local path = PAGE .. "/" .. later .. "/cancel"
    for _, headers in ipairs {
      { origin = "https://evil.example" },
      { origin = "https://evil.example", ["sec-fetch-site"] = "cross-site" },
      { ["sec-fetch-site"] = "cross-site" },
      { origin = "null" },
    } do
      local h = {}
      for k, v in pairs(FORM) do h[k] = v end
      for k, v in pairs(headers) do h[k] = v end
      local res = send(s.port, "POST", path, h)
      assert.are.equal(403, res.status, json.encode(headers))
      assert.are.equal("Cross-site request refused.", res.body)
    end
    assert.are.equal("available", jobs.get(s.port, later).state)
  end)

  it("answers nothing else under it: other methods and paths are 404", function()
    local later = jobs.enqueue(s.port, { job = "record", delay = 600000 })[1]
    assert.are.equal(404, send(s.port, "GET", PAGE .. "/" .. later .. "/cancel").status)
    assert.are.equal(404, send(s.port, "PUT", PAGE .. "/" .. later .. "/cancel", FORM).status)
    assert.are.equal(404, post_form(s.port, PAGE).status)
    assert.are.equal(404, post_form(s.port, PAGE .. "/" .. later .. "/delete").status)
    assert.are.equal(404, post_form(s.port, PAGE .. "/x/cancel").status)
    assert.are.equal(404, send(s.port, "GET", PAGE .. "x").status) -- not under it: no such path
    assert.are.equal("available", jobs.get(s.port, later).state)
  end)
end)

describe("/__clank/inspector/jobs access", function()
  local db, s

  before_each(function() db = jobs.database() end)

  after_each(function()
    if s then assert.are.equal(0, s:stop()) end
    s = nil
    server.kill_all()
    jobs.remove(db)
  end)

  it("is 404 for a Host that is not loopback, even one allowedOrigins lists, for GET and POST", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. files.quote(dir)))
    -- the fixture with an allowed origin: §13 lets its Host through, the inspector does not
    local text = assert(files.read(jobs.APP)):gsub('name = "jobs", actions', 'name = "jobs", '
      .. 'allowedOrigins = { "https://app.example" }, actions')
    files.write(dir .. "/app.lua", text)
    s = server.start(dir .. "/app.lua", { env = { JOBS_DB = db } })
    local later = jobs.enqueue(s.port, { job = "record", delay = 600000 })[1]
    assert.are.equal(200, send(s.port, "GET", "/manifest", { host = "app.example" }).status)
    local res = send(s.port, "GET", PAGE, { host = "app.example" })
    assert.are.equal(404, res.status)
    assert.are.equal("Not found.", res.body)
    res = send(s.port, "POST", PAGE .. "/" .. later .. "/cancel",
      { host = "app.example", origin = "https://app.example", ["content-type"] = FORM["content-type"] })
    assert.are.equal(404, res.status)
    assert.are.equal("available", jobs.get(s.port, later).state)
    assert.are.equal(404, send(s.port, "GET", PAGE, { host = "evil.example" }).status)
    assert.are.equal(200, send(s.port, "GET", PAGE, { host = "localhost" }).status)
    os.remove(dir .. "/app.lua")
    os.remove(dir)
  end)

  it("is 404 for a peer that is not loopback, and opens for --inspector's Host", function()
    local addr = own_address()
    local args = { "--inspector", "inspect.test" }
    if addr then args[#args + 1] = "--host"; args[#args + 1] = "0.0.0.0" end
    s = server.start(jobs.APP, { env = { JOBS_DB = db }, args = args })
    assert.are.equal(200, send(s.port, "GET", PAGE, { host = "inspect.test:" .. s.port }).status)
    if not addr then
      pending("no non-loopback address on this machine")
      return
    end
    local later = jobs.enqueue(s.port, { job = "record", delay = 600000 })[1]
    assert.are.equal(404, send(s.port, "GET", PAGE, { host = "localhost" }, addr).status)
    local res = send(s.port, "POST", PAGE .. "/" .. later .. "/cancel", { host = "localhost" }, addr)
    assert.are.equal(404, res.status)
    assert.are.equal("available", jobs.get(s.port, later).state)
    assert.are.equal(200, send(s.port, "GET", PAGE, { host = "inspect.test" }, addr).status)
  end)

  it("says so for an app without jobs, which has no Retry or Cancel, nor a link", function()
    s = server.start(server.fixture("basic"))
    local res = send(s.port, "GET", PAGE)
    assert.are.equal(200, res.status)
    assert.truthy(res.body:find("This app has no jobs", 1, true), res.body)
    assert.are.equal(404, post_form(s.port, PAGE .. "/1/retry").status)
    assert.falsy(send(s.port, "GET", "/__clank/inspector").body:find('href="' .. PAGE .. '"', 1, true))
  end)
end)
