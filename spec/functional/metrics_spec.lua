-- GET /__clank/health and /__clank/metrics (SPEC §15), both under the Host rules of §13.
-- The metrics text is parsed by an independent parser: prometheus_client's, from Debian's
-- python3-prometheus-client (vendor/deps.sh --test), run as /usr/bin/python3.
local server = require "helpers.server"
local http = require "helpers.http"
local cjson = require "cjson"

-- never with the ASan runtime the sanitizer build preloads into the specs (LeakSanitizer would
-- report Python's own allocations and fail the parse)
local PYTHON = "env -u LD_PRELOAD /usr/bin/python3"

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Families as prometheus_client parses them: name → {type, help, samples = {{name, labels, value}}}.
-- Raises when the parser rejects the text.
local PARSE = [[
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    out.append({"name": f.name, "type": f.type, "help": f.documentation,
                "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]})
print(json.dumps(out))
]]

local function parse(text)
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "wb"))
  f:write(text)
  f:close()
  local p = assert(io.popen(PYTHON .. " -c " .. quote(PARSE) .. " < " .. quote(tmp) .. " 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  os.remove(tmp)
  assert(ok, "prometheus_client rejected the metrics text:\n" .. out .. "\n" .. text)
  local families = {}
  for _, fam in ipairs(cjson.decode(out)) do
    families[fam.name] = fam
  end
  return families
end

local function scrape(s)
  local res = assert(http.get(s.port, "/__clank/metrics"))
  assert.are.equal(200, res.status)
  assert.are.equal("text/plain; version=0.0.4; charset=utf-8", res.headers["content-type"])
  return parse(res.body), res.body
end

-- The value of the sample `name` whose labels include `labels` (0 when there is none).
local function value(families, family, name, labels)
  local fam = families[family]
  if not fam then
    return 0
  end
  for _, sample in ipairs(fam.samples) do
    if sample.name == name then
      local match = true
      for k, v in pairs(labels or {}) do
        if sample.labels[k] ~= v then
          match = false
        end
      end
      if match then
        return sample.value
      end
    end
  end
  return 0
end

local function requests(families, kind, status)
  return value(families, "clank_requests", "clank_requests_total", { kind = kind, status = status })
end

-- The SPEC §15 families, as the parser names them (a counter's _total is the sample's).
local FAMILIES = {
  clank_requests = "counter",
  clank_request_duration_seconds = "histogram",
  clank_inflight_requests = "gauge",
  clank_connections = "gauge",
  clank_lua_memory_bytes = "gauge",
  clank_reloads = "counter",
  clank_action_calls = "counter",
  clank_pubsub_published = "counter",
  clank_pubsub_delivered = "counter",
  clank_live_rerenders = "counter",
  clank_jobs = "counter", -- issue 32: written for an app without jobs too, without samples
  clank_job_duration_seconds = "histogram",
}

local function wait_for(fn, what)
  for _ = 1, 200 do
    if fn() then
      return
    end
    http.sleep(0.02)
  end
  error("timed out waiting for " .. what)
end

describe("clank-run health and metrics", function()
  local s = server.for_describe(server.fixture("basic"))

  it("answers health in JSON with the generation and the uptime in whole seconds", function()
    local res = assert(http.get(s.port, "/__clank/health"))
    assert.are.equal(200, res.status)
    assert.are.equal("application/json", res.headers["content-type"])
    assert.are.equal("no-store", res.headers["cache-control"])
    assert.truthy(res.body:match('^{"generation":1,"status":"ok","uptime":%d+}$'), res.body)
    local h = cjson.decode(res.body)
    assert.are.equal("ok", h.status)
    assert.are.equal(1, h.generation)
    assert.is_true(h.uptime >= 0 and h.uptime < 60 and h.uptime == math.floor(h.uptime))
  end)

  it("answers HEAD on both, and 405 with allow to other methods", function()
    assert.are.equal(200, assert(http.request(s.port, "HEAD", "/__clank/health")).status)
    assert.are.equal(200, assert(http.request(s.port, "HEAD", "/__clank/metrics")).status)
    local res = assert(http.request(s.port, "POST", "/__clank/metrics", {}, ""))
    assert.are.equal(405, res.status)
    assert.are.equal("GET, HEAD", res.headers["allow"])
  end)

  it("writes every family of SPEC §15 with HELP and TYPE, accepted by prometheus_client", function()
    local families, text = scrape(s)
    for name, kind in pairs(FAMILIES) do
      assert.is_truthy(families[name], "missing family " .. name)
      assert.are.equal(kind, families[name].type, name)
      assert.is_truthy(#families[name].help > 0, name)
      local exposed = kind == "counter" and name .. "_total" or name
      assert.is_truthy(text:find("\n# HELP " .. exposed .. " ", 1, true) or
        text:find("^# HELP " .. exposed .. " "), "no HELP for " .. exposed)
      assert.is_truthy(text:find("\n# TYPE " .. exposed .. " " .. kind .. "\n", 1, true) or
        text:find("^# TYPE " .. exposed .. " " .. kind .. "\n"), "no TYPE for " .. exposed)
    end
    assert.is_true(value(families, "clank_lua_memory_bytes", "clank_lua_memory_bytes") > 0)
    assert.is_true(value(families, "clank_connections", "clank_connections") >= 1)
  end)

  it("counts requests by kind and status", function()
    local before = scrape(s)
    for _ = 1, 3 do
      assert.are.equal(200, assert(http.get(s.port, "/hello")).status)
    end
    assert.are.equal(418, assert(http.get(s.port, "/teapot")).status)
    assert.are.equal(404, assert(http.get(s.port, "/no-such-page")).status)
    assert.are.equal(200, assert(http.get(s.port, "/__clank/health")).status)
    assert.are.equal(404, assert(http.request(s.port, "POST", "/actions/none", {}, "{}")).status)
    local after = scrape(s)
    local function grew(kind, status)
      return requests(after, kind, status) - requests(before, kind, status)
    end
    assert.are.equal(3, grew("route", "200"))
    assert.are.equal(1, grew("route", "418"))
    assert.are.equal(1, grew("other", "404"))
    assert.are.equal(1, grew("bridge", "404"))
    -- the health check and the first scrape itself
    assert.are.equal(2, grew("runtime", "200"))
  end)

  it("keeps a consistent histogram: buckets monotonic, +Inf = count, sum grows", function()
    local before = scrape(s)
    assert.are.equal(200, assert(http.get(s.port, "/sleep?ms=30")).status)
    local families = scrape(s)
    local fam = families.clank_request_duration_seconds
    local buckets, count, sum = {}, nil, nil
    for _, sample in ipairs(fam.samples) do
      if sample.name == "clank_request_duration_seconds_bucket" then
        local le = sample.labels.le == "+Inf" and math.huge or tonumber(sample.labels.le)
        buckets[#buckets + 1] = { le = le, text = sample.labels.le, v = sample.value }
      elseif sample.name == "clank_request_duration_seconds_count" then
        count = sample.value
      elseif sample.name == "clank_request_duration_seconds_sum" then
        sum = sample.value
      end
    end
    local bounds = {}
    for _, b in ipairs(buckets) do
      bounds[#bounds + 1] = b.text
    end
    assert.are.same({ "0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1",
      "2.5", "5", "10", "+Inf" }, bounds)
    for i = 2, #buckets do
      assert.is_true(buckets[i].v >= buckets[i - 1].v)
    end
    assert.are.equal(count, buckets[#buckets].v)
    local old_sum = value(before, "clank_request_duration_seconds", "clank_request_duration_seconds_sum")
    assert.is_true(sum - old_sum >= 0.03, "the 30 ms request is in the sum")
    -- the 30 ms request landed above 0.025
    local old_025 = value(before, "clank_request_duration_seconds",
      "clank_request_duration_seconds_bucket", { le = "0.025" })
    local old_count = value(before, "clank_request_duration_seconds", "clank_request_duration_seconds_count")
    assert.is_true(count - old_count > buckets[4].v - old_025)
  end)

  it("counts a sleeping request's whole wait while other timers wake the loop", function()
    -- The loop's clock counts whole milliseconds: a 30 ms timer due on it alone fires when
    -- the clock turns, up to a millisecond early, as soon as anything else wakes the loop.
    for _ = 1, 8 do
      local before = scrape(s)
      assert.are.equal(200, assert(http.get(s.port, "/sleep-ticking?ms=30")).status)
      local after = scrape(s)
      local took = value(after, "clank_request_duration_seconds", "clank_request_duration_seconds_sum")
        - value(before, "clank_request_duration_seconds", "clank_request_duration_seconds_sum")
      assert.is_true(took >= 0.030, ("the sleep took %.6f s"):format(took))
    end
  end)

  it("shows a request in flight and its connection", function()
    local conn = assert(http.connect(s.port))
    assert(conn:send(http.build("GET", "/sleep?ms=400")))
    wait_for(function()
      return value(scrape(s), "clank_inflight_requests", "clank_inflight_requests") >= 1
    end, "an inflight request")
    local families = scrape(s)
    assert.is_true(value(families, "clank_connections", "clank_connections") >= 2)
    assert.are.equal(200, assert(conn:read_response()).status)
    conn:close()
    wait_for(function()
      return value(scrape(s), "clank_inflight_requests", "clank_inflight_requests") == 0
    end, "no inflight request")
  end)

  it("refuses a foreign Host with 403 on both", function()
    for _, path in ipairs({ "/__clank/health", "/__clank/metrics" }) do
      local res = assert(http.get(s.port, path, { Host = "evil.example" }))
      assert.are.equal(403, res.status, path)
      assert.is_nil(res.body:find("clank_requests_total", 1, true))
    end
    assert.are.equal(200, assert(http.get(s.port, "/__clank/health", { Host = "localhost:1" })).status)
  end)
end)

describe("clank-run metrics: action calls", function()
  local s = server.for_describe(server.fixture("bridge"))

  local function calls(families, action, outcome)
    return value(families, "clank_action_calls", "clank_action_calls_total",
      { action = action, outcome = outcome })
  end

  it("counts action calls by action and outcome, only for the app's actions", function()
    local before = scrape(s)
    local json = { ["content-type"] = "application/json" }
    for _ = 1, 2 do
      assert.are.equal(200, assert(http.request(s.port, "POST", "/actions/echo", json, '{"text":"hi"}')).status)
    end
    assert.are.equal(422, assert(http.request(s.port, "POST", "/actions/echo", json, '{"text":""}')).status)
    assert.are.equal(409, assert(http.request(s.port, "POST", "/actions/conflict", json, "{}")).status)
    assert.are.equal(404, assert(http.request(s.port, "POST", "/actions/nope", json, "{}")).status)
    local after, text = scrape(s)
    assert.are.equal(2, calls(after, "echo", "ok") - calls(before, "echo", "ok"))
    assert.are.equal(1, calls(after, "echo", "error") - calls(before, "echo", "error"))
    assert.are.equal(1, calls(after, "conflict", "error") - calls(before, "conflict", "error"))
    assert.are.equal(0, calls(after, "conflict", "ok"))
    assert.is_nil(text:find('action="nope"', 1, true))
    -- every action of the app is listed, calls or not
    assert.is_truthy(text:find('clank_action_calls_total{action="notes.delete",outcome="ok"} 0', 1, true))
    assert.are.equal(2, requests(after, "bridge", "200") - requests(before, "bridge", "200"))
  end)
end)

describe("clank-run metrics: topics", function()
  local s = server.for_describe(server.fixture("pubsub"))

  it("counts publishes, deliveries and the view sessions they re-loaded", function()
    local ws = require "helpers.websocket"
    local before = scrape(s)
    local page = assert(http.get(s.port, "/"))
    local id = assert(page.body:match('data%-clank%-session="([^"]+)"'))
    local origin = "127.0.0.1:" .. s.port
    local live = assert(ws.connect(s.port, "/__clank/sessions/" .. id .. "/live",
      { Host = origin, Origin = "http://" .. origin }))
    assert.truthy(assert(live:next_json()).html:find("Notes: 0", 1, true))
    local res = assert(http.request(s.port, "POST", "/actions/notes.add",
      { ["content-type"] = "application/json" }, "{}"))
    assert.are.equal(200, res.status, res.body)
    -- the session re-loads and pushes, with no event of its own
    local pushed = assert(live:next_json(function(m) return m.t == "html" and m.html:find("Notes: 1", 1, true) end))
    assert.are.equal(0, pushed.seq)
    live:close()
    local after = scrape(s)
    local function delta(family)
      return value(after, family, family .. "_total") - value(before, family, family .. "_total")
    end
    assert.are.equal(1, delta("clank_pubsub_published"))
    assert.are.equal(1, delta("clank_pubsub_delivered"))
    assert.are.equal(1, delta("clank_live_rerenders"))
  end)
end)

describe("clank-run metrics: reloads", function()
  local dir, s

  before_each(function()
    local p = assert(io.popen("mktemp -d"))
    dir = p:read("l")
    p:close()
    assert(os.execute("cp -R " .. quote(server.fixture("basic", "")) .. ". " .. quote(dir)))
    s = server.start(dir .. "/app.lua", { args = { "--no-watch" } })
  end)

  after_each(function()
    server.kill_all()
    os.execute("rm -rf " .. quote(dir))
  end)

  it("counts reloads by result and bumps the generation after SIGHUP", function()
    local families = scrape(s)
    assert.are.equal(0, value(families, "clank_reloads", "clank_reloads_total", { result = "ok" }))
    assert.are.equal(0, value(families, "clank_reloads", "clank_reloads_total", { result = "failed" }))
    s:signal("HUP")
    wait_for(function()
      return value(scrape(s), "clank_reloads", "clank_reloads_total", { result = "ok" }) == 1
    end, "a counted reload")
    local h = cjson.decode(assert(http.get(s.port, "/__clank/health")).body)
    assert.are.equal(2, h.generation)

    local f = assert(io.open(dir .. "/app.lua", "ab"))
    f:write("\nthis is not lua\n")
    f:close()
    s:signal("HUP")
    wait_for(function()
      return value(scrape(s), "clank_reloads", "clank_reloads_total", { result = "failed" }) == 1
    end, "a counted failed reload")
    families = scrape(s)
    assert.are.equal(1, value(families, "clank_reloads", "clank_reloads_total", { result = "ok" }))
    h = cjson.decode(assert(http.get(s.port, "/__clank/health")).body)
    assert.are.equal(2, h.generation)
  end)
end)

-- clank_jobs_total{queue,state} and clank_job_duration_seconds{queue} (issue 32), from the jobs
-- fixture's runs on an SQLite file of the spec's own. Every expected number is worked out from
-- the fixture's jobs and the runner's rules: a run that succeeds counts "done"; one that fails
-- with attempts left counts "failed"; the failure of the last attempt (retry.max) counts "dead".
describe("clank-run metrics: jobs", function()
  local jobs = require "helpers.jobs"
  local db, s

  after_each(function()
    if s then assert.are.equal(0, s:stop()) end
    s = nil
    server.kill_all()
    jobs.remove(db)
  end)

  local function start(env, args)
    db = jobs.database()
    env.JOBS_DB = db
    s = server.start(jobs.APP, { env = env, args = args })
  end

  local function runs(families, queue, state)
    return value(families, "clank_jobs", "clank_jobs_total", { queue = queue, state = state })
  end

  local function duration(families, queue, sample, le)
    return value(families, "clank_job_duration_seconds", "clank_job_duration_seconds_" .. sample,
      { queue = queue, le = le })
  end

  -- The scrape once `n` runs of `queue` have been counted (a run is counted just after its row
  -- is written, so the row may say so a moment before the scrape does).
  local function counted(queue, n)
    local families
    jobs.eventually(function()
      families = scrape(s)
      return duration(families, queue, "count") >= n
    end, n .. " counted runs of queue " .. queue)
    return families
  end

  it("counts each run's end by queue and state, and times them", function()
    start({ JOBS_QUEUES = "1" })
    local record = jobs.enqueue(s.port, { job = "record" })[1]
    local flaky = jobs.enqueue(s.port, { job = "flaky", input = { okAt = 2 } })[1]
    local boom = jobs.enqueue(s.port, { job = "boom" })[1]
    local nap = jobs.enqueue(s.port, { job = "q1", input = { ms = 300 } })[1]
    jobs.wait(s.port, record, { done = true })
    jobs.wait(s.port, flaky, { done = true })
    jobs.wait(s.port, boom, { dead = true })
    jobs.wait(s.port, nap, { done = true })
    -- record: 1 run, done. flaky (okAt 2, max 3): attempt 1 fails, attempt 2 is done.
    -- boom (max 2): attempt 1 fails, attempt 2 fails as the last one: dead.
    local families = counted("default", 5)
    assert.are.equal("counter", families.clank_jobs.type)
    assert.are.equal("histogram", families.clank_job_duration_seconds.type)
    assert.are.equal(2, runs(families, "default", "done"))
    assert.are.equal(2, runs(families, "default", "failed"))
    assert.are.equal(1, runs(families, "default", "dead"))
    assert.are.equal(5, duration(families, "default", "count"))
    assert.are.equal(5, duration(families, "default", "bucket", "+Inf"))
    -- q1 is a queue of its own: one run, done, that slept 300 ms
    families = counted("q1", 1)
    assert.are.equal(1, runs(families, "q1", "done"))
    assert.are.equal(0, runs(families, "q1", "failed"))
    assert.are.equal(0, runs(families, "q1", "dead"))
    assert.are.equal(1, duration(families, "q1", "count"))
    assert.are.equal(0, duration(families, "q1", "bucket", "0.25"))
    assert.are.equal(1, duration(families, "q1", "bucket", "+Inf"))
    assert.is_true(duration(families, "q1", "sum") >= 0.3)
    -- the request histogram's buckets, cumulative
    local bounds, last = {}, -1
    for _, sample in ipairs(families.clank_job_duration_seconds.samples) do
      if sample.name == "clank_job_duration_seconds_bucket" and sample.labels.queue == "default" then
        bounds[#bounds + 1] = sample.labels.le
        assert.is_true(sample.value >= last)
        last = sample.value
      end
    end
    assert.are.same({ "0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1",
      "2.5", "5", "10", "+Inf" }, bounds)
  end)

  it("keeps 16 queues by name and counts the runs of any other as queue=\"other\"", function()
    start({ JOBS_QUEUES = "17" })
    local ids = {}
    for i = 1, 16 do ids[i] = jobs.enqueue(s.port, { job = "q" .. i })[1] end
    for i = 1, 16 do jobs.wait(s.port, ids[i], { done = true }) end
    for i = 1, 16 do counted("q" .. i, 1) end
    -- the 16 names are taken: q17 and default, seen after them, are "other"
    local q17 = jobs.enqueue(s.port, { job = "q17" })[1]
    local record = jobs.enqueue(s.port, { job = "record" })[1]
    jobs.wait(s.port, q17, { done = true })
    jobs.wait(s.port, record, { done = true })
    local families, text = nil, nil
    jobs.eventually(function()
      families, text = scrape(s)
      return duration(families, "other", "count") >= 2
    end, "two runs counted as other")
    for i = 1, 16 do assert.are.equal(1, runs(families, "q" .. i, "done"), "q" .. i) end
    assert.are.equal(2, runs(families, "other", "done"))
    assert.are.equal(0, runs(families, "other", "failed"))
    assert.are.equal(2, duration(families, "other", "count"))
    assert.is_nil(text:find('queue="q17"', 1, true))
    assert.is_nil(text:find('queue="default"', 1, true))
  end)

  it("sums the runs of every worker", function()
    start({}, { "--workers", "2" })
    -- batches of slow jobs until runs come from both workers (each runs 10 at once at most)
    local ids, stats = {}, nil
    for _ = 1, 10 do
      for _, id in ipairs(jobs.enqueue(s.port, { job = "slow", input = { ms = 200 }, n = 15 })) do
        ids[#ids + 1] = id
      end
      for _, id in ipairs(ids) do jobs.wait(s.port, id, { done = true }) end
      local res = assert(http.request(s.port, "POST", "/actions/stats", { ["content-type"] = "application/json" },
        "{}"))
      stats = cjson.decode(res.body).output
      if stats.pids == 2 then break end
    end
    assert.are.equal(2, stats.pids, "every run was on one worker")
    -- slow records "start" and "end": two rows per run, each job ran once
    assert.are.equal(2 * #ids, stats.runs)
    counted("default", #ids)
    -- whichever worker answers, on fresh connections, says the sum
    for _ = 1, 6 do
      local families = scrape(s)
      assert.are.equal(#ids, runs(families, "default", "done"))
      assert.are.equal(0, runs(families, "default", "failed"))
      assert.are.equal(#ids, duration(families, "default", "count"))
    end
  end)
end)
