-- The example app apps/tasks over HTTP, on the real clank-run: the bridge's envelopes and
-- statuses (SPEC §5), the schema messages (SPEC §3), storage on SQLite and PostgreSQL, and its
-- jobs (issue 32): reminders, written with their task in one transaction, and the nightly
-- archive (through spec/fixtures/apps/tasks_jobs, the app with actions only a spec needs).
-- Expected values are written from the SPEC by hand; cjson decodes independently.
local server = require "helpers.server"
local files = require "helpers.files"
local http = require "helpers.http"
local storage = require "helpers.storage"
local ws = require "helpers.websocket"
local cjson = require "cjson"
local socket = require "socket"

local APP = server.source_dir() .. "/apps/tasks/app.lua"
local JOBS_APP = server.fixture("tasks_jobs")
local slow = server.sanitized and 4 or 1

-- A user no other run or spec uses, so runs never see each other's tasks in a shared database.
local unique_user = storage.unique_user

--------------------------------------------------------------------------------
-- HTTP helpers

local JSON = { "content-type", "application/json" }
local CONFIRMED = { "x-clank-confirmation", "confirmed" }

-- POSTs a raw JSON body to /actions/<name>; returns the response and the decoded body.
local function post(port, name, body, confirm)
  local headers = { JSON }
  if confirm ~= false then
    headers[2] = CONFIRMED
  end
  local res = assert(http.request(port, "POST", "/actions/" .. name, headers, body))
  local ok, decoded = pcall(cjson.decode, res.body)
  assert(ok, "the body is not JSON: " .. res.body)
  return res, decoded
end

-- POSTs and requires {"ok":true,"output":...} with 200; returns the output.
local function call(port, name, body)
  local res, decoded = post(port, name, body)
  assert.are.equal(200, res.status, res.body)
  assert.are.equal("application/json", res.headers["content-type"]:match("^[^;]+"))
  assert.is_true(decoded.ok, res.body)
  return decoded.output, res
end

local function failure(port, name, body, confirm)
  local res, decoded = post(port, name, body, confirm)
  assert.is_false(decoded.ok, res.body)
  assert.are.equal("no-store", res.headers["cache-control"])
  return res.status, decoded.error, res
end

local function find(tasks, id)
  for _, t in ipairs(tasks) do
    if t.id == id then
      return t
    end
  end
  return nil
end

local function create(port, title)
  local out = call(port, "tasks.create",
    '{"title":' .. cjson.encode(title) .. ',"estimate":null,"tags":[]}')
  return out.id
end

local function list(port, body)
  return call(port, "tasks.list", body or "{}").tasks
end

-- The wall clock in milliseconds since the epoch, as remindAt is given.
local function now_ms()
  return math.floor(socket.gettime() * 1000)
end

-- Polls check() (which returns a value when done) for up to `seconds` (longer under the
-- sanitizers); fails naming `what` after that.
local function eventually(seconds, check, what)
  return files.within(seconds * slow, check, what)
end

-- A live session of the page (its first html frame read), as a browser opens it: whole html
-- frames, no diffs.
local function live_page(port)
  local res = assert(http.get(port, "/"))
  assert.are.equal(200, res.status, res.body)
  local id = assert(res.body:match('data%-clank%-session="([^"]+)"'), "no session token in the page")
  local origin = "127.0.0.1:" .. port
  local live = assert(ws.connect(port, "/__clank/sessions/" .. id .. "/live",
    { Host = origin, Origin = "http://" .. origin }))
  local first = assert(live:next_json())
  assert.are.equal("html", first.t)
  return live, first.html
end

-- The reminder badge of task `id`, as the page renders it: "<span ...>Reminder</span>".
local function badge(html, id)
  for tag, text in html:gmatch("(<span [^>]*>)([^<]*)</span>") do
    if tag:find('data-clank-id="reminder-' .. id .. '"', 1, true) then
      return tag, text
    end
  end
  return nil
end

--------------------------------------------------------------------------------
-- The suite, once per database

local backends = storage.backends

local CREATE_SCHEMA = {
  type = "object",
  properties = {
    estimate = { anyOf = { { type = "number", minimum = 0 }, { type = "null" } } },
    priority = { type = "string", enum = { "low", "normal", "high" } },
    remindAt = {
      type = "integer",
      description = "When to be reminded, in milliseconds since the Unix epoch (in the future)",
    },
    tags = { type = "array", items = { type = "string" }, maxItems = 10 },
    title = { type = "string", minLength = 1, maxLength = 120, description = "Short task title" },
  },
  required = { "estimate", "title" }, -- tags are optional: none is an empty list
  additionalProperties = false,
}

-- Invalid CreateTask bodies and the exact 422 message (SPEC §3: paths joined by ".", 0-based
-- indexes, object keys in byte order, issues joined by "; ").
local INVALID_CREATE = {
  { '{"title":"","estimate":null,"tags":[]}', "title: Must contain at least 1 character." },
  { '{"title":"' .. string.rep("x", 121) .. '","estimate":null,"tags":[]}',
    "title: Must contain at most 120 characters." },
  { '{"estimate":null,"tags":[]}', "title: Expected a string." },
  { '{"title":7,"estimate":null,"tags":[]}', "title: Expected a string." },
  { '{"title":"t","priority":"urgent","estimate":null,"tags":[]}',
    "priority: Expected one of: low, normal, high." },
  { '{"title":"t","estimate":-1,"tags":[]}', "estimate: Must be at least 0." },
  { '{"title":"t","estimate":"2","tags":[]}', "estimate: Expected a finite number." },
  { '{"title":"t","tags":[]}', "estimate: Expected a finite number." },
  { '{"title":"t","estimate":null,"tags":["a","b","c","d","e","f","g","h","i","j","k"]}',
    "tags: Must contain at most 10 items." },
  { '{"title":"t","estimate":null,"tags":["ok",1]}', "tags.1: Expected a string." },
  { '{"title":"t","estimate":null,"tags":"docs"}', "tags: Expected an array." },
  { '{"title":"t","estimate":null,"tags":[],"due":"today"}', "due: Unknown property." },
  { '{"title":"t","estimate":null,"tags":[],"remindAt":1.5}', "remindAt: Expected an integer." },
  { '{"title":"t","estimate":null,"tags":[],"remindAt":"tomorrow"}', "remindAt: Expected a finite number." },
  { '{"title":"","priority":"x","estimate":-1,"tags":"no"}',
    "estimate: Must be at least 0.; priority: Expected one of: low, normal, high.; "
      .. "tags: Expected an array.; title: Must contain at least 1 character." },
  { "[]", "value: Expected an object." },
}

for _, backend in ipairs(backends) do
  describe("apps/tasks on " .. backend.name, function()
    local target, cleanup, user, s

    local function start(env_user)
      return server.start(APP, {
        args = { "--no-watch" },
        env = { CLANK_TASKS_DB = target, CLANK_TASKS_USER = env_user or user },
      })
    end

    setup(function()
      if backend.pending then
        return
      end
      target, cleanup = backend.fresh()
      user = unique_user()
      s = start()
    end)

    teardown(function()
      if s then
        assert.are.equal(0, s:stop())
        s = nil
      end
      server.kill_all()
      if cleanup then
        cleanup()
      end
    end)

    -- Runs fn, or reports the test pending when the database is not there.
    local function test(name, fn)
      it(name, function()
        if backend.pending then
          pending(backend.pending)
        else
          fn()
        end
      end)
    end

    test("serves its task list as a live page (SPEC §11) with the user's tasks and its stylesheet", function()
      create(s.port, "Shown on the page")
      local res = assert(http.get(s.port, "/"))
      assert.are.equal(200, res.status)
      assert.are.equal("text/html; charset=utf-8", res.headers["content-type"])
      assert.truthy(res.body:find("^<!doctype html>"), res.body)
      assert.truthy(res.body:find("data-clank-session=\"", 1, true), res.body)
      assert.truthy(res.body:find("Shown on the page", 1, true), res.body)
      assert.truthy(res.body:find('<link rel="stylesheet" href="/assets/app.css">', 1, true), res.body)
      local css = assert(http.get(s.port, "/assets/app.css"))
      assert.are.equal(200, css.status)
      assert.are.equal("text/css; charset=utf-8", css.headers["content-type"])
    end)

    test("describes the four actions in the manifest", function()
      local res = assert(http.get(s.port, "/manifest"))
      assert.are.equal(200, res.status)
      local m = cjson.decode(res.body)
      assert.are.equal("clank-agent/1", m.protocol)
      assert.are.equal("tasks", m.name)
      assert.are.equal("Task tracker", m.description)
      local seen = {}
      for i, a in ipairs(m.actions) do
        seen[i] = { a.name, a.sideEffects, a.confirmation }
      end
      assert.are.same({
        { "tasks.archive", "destructive", "always" },
        { "tasks.complete", "write", "write" },
        { "tasks.create", "write", "write" },
        { "tasks.list", "read", "write" },
      }, seen)
      assert.are.equal("Create one task in the current workspace.", m.actions[3].description)
      assert.are.same(CREATE_SCHEMA, m.actions[3].inputSchema)
      assert.are.same({
        type = "object",
        properties = { created = { type = "boolean" }, id = { type = "string" } },
        required = { "created", "id" },
        additionalProperties = false,
      }, m.actions[3].outputSchema)
    end)

    test("creates a task without tags: they are optional, and listed as []", function()
      local _, decoded = post(s.port, "tasks.create", '{"title":"No tags","estimate":null}')
      assert.is_true(decoded.ok, cjson.encode(decoded))
      local task = find(list(s.port), decoded.output.id)
      assert.are.same({}, task.tags)
      assert.are.equal("No tags", task.title)
    end)

    test("creates a task: 200 with {ok = true, output = {id, created = true}}", function()
      local res, decoded = post(s.port, "tasks.create",
        '{"title":"Ship docs","priority":"high","estimate":1.5,"tags":["docs","release"]}')
      assert.are.equal(200, res.status, res.body)
      assert.are.equal("application/json", res.headers["content-type"]:match("^[^;]+"))
      assert.is_true(decoded.ok)
      assert.is_string(decoded.output.id)
      assert.are.same({ id = decoded.output.id, created = true }, decoded.output)

      local task = find(list(s.port), decoded.output.id)
      assert.is_table(task)
      assert.is_number(task.createdAt)
      task.createdAt = nil
      assert.are.same({
        id = decoded.output.id, title = "Ship docs", priority = "high", estimate = 1.5,
        tags = { "docs", "release" }, completed = false, archived = false,
      }, task)
    end)

    test("lists absent fields as the schema says: no priority, estimate null, tags []", function()
      local id = create(s.port, "Bare")
      local out, res = call(s.port, "tasks.list", "{}")
      local task = find(out.tasks, id)
      assert.is_nil(task.priority)
      assert.are.equal(cjson.null, task.estimate)
      assert.are.same({}, task.tags)
      -- canonical JSON: empty arrays stay arrays
      assert.truthy(res.body:find('"estimate":null,"id":"' .. id .. '","tags":[],"title":"Bare"',
        1, true), res.body)
    end)

    test("keeps text exactly, quotes and non-ASCII included", function()
      local title = "it's \"quoted\" \\ '); DROP TABLE tasks; -- Ünïcode ✓"
      local out = call(s.port, "tasks.create", cjson.encode({
        title = title, estimate = 0, tags = { "ü", "a'b" },
      }))
      local task = find(list(s.port), out.id)
      assert.are.equal(title, task.title)
      assert.are.equal(0, task.estimate)
      assert.are.same({ "ü", "a'b" }, task.tags)
    end)

    test("lists tasks in creation order", function()
      local a = create(s.port, "first")
      local b = create(s.port, "second")
      local tasks = list(s.port)
      local ia, ib
      for i, t in ipairs(tasks) do
        if t.id == a then ia = i end
        if t.id == b then ib = i end
      end
      assert.is_number(ia)
      assert.is_number(ib)
      assert.is_true(ia < ib)
    end)

    test("completes a task", function()
      local id = create(s.port, "to finish")
      assert.are.same({ id = id, completed = true },
        call(s.port, "tasks.complete", '{"id":"' .. id .. '"}'))
      local task = find(list(s.port), id)
      assert.is_true(task.completed)
      assert.is_false(task.archived)
    end)

    test("archives a task: gone from the list, back with includeArchived", function()
      local id = create(s.port, "to archive")
      assert.are.same({ id = id, archived = true },
        call(s.port, "tasks.archive", '{"id":"' .. id .. '"}'))
      assert.is_nil(find(list(s.port), id))
      assert.is_nil(find(list(s.port, '{"includeArchived":false}'), id))
      local task = find(list(s.port, '{"includeArchived":true}'), id)
      assert.is_table(task)
      assert.is_true(task.archived)
    end)

    test("answers 428 CONFIRMATION_REQUIRED to writes without the header, and changes nothing",
      function()
        local before = #list(s.port, '{"includeArchived":true}')
        local id = create(s.port, "confirm me")
        for _, case in ipairs({
          { "tasks.create", '{"title":"unconfirmed","estimate":null,"tags":[]}' },
          { "tasks.complete", '{"id":"' .. id .. '"}' },
          { "tasks.archive", '{"id":"' .. id .. '"}' },
        }) do
          local status, err = failure(s.port, case[1], case[2], false)
          assert.are.equal(428, status, case[1])
          assert.are.same({
            code = "CONFIRMATION_REQUIRED",
            message = "This action requires explicit confirmation.",
          }, err)
        end
        local all = list(s.port, '{"includeArchived":true}')
        assert.are.equal(before + 1, #all)
        local task = find(all, id)
        assert.is_false(task.completed)
        assert.is_false(task.archived)
      end)

    test("lets a read run without the confirmation header", function()
      local res, decoded = post(s.port, "tasks.list", "{}", false)
      assert.are.equal(200, res.status, res.body)
      assert.is_true(decoded.ok)
      assert.is_table(decoded.output.tasks)
    end)

    test("answers 422 INVALID_INPUT with the exact message for an invalid CreateTask", function()
      for _, case in ipairs(INVALID_CREATE) do
        local status, err, res = failure(s.port, "tasks.create", case[1])
        assert.are.equal(422, status, case[1])
        assert.are.equal("INVALID_INPUT", err.code, case[1])
        assert.are.equal(case[2], err.message, case[1])
        assert.is_table(err.details, case[1])
        assert.falsy(res.body:find("urgent", 1, true), "input values never appear")
      end
    end)

    test("gives 422 details as {path, message, expected?} without input values", function()
      local status, err, res = failure(s.port, "tasks.create",
        '{"title":"","priority":"secret-value","estimate":null,"tags":["ok",42]}')
      assert.are.equal(422, status)
      assert.are.same({
        { path = { "priority" }, message = "Expected one of: low, normal, high.",
          expected = "enum" },
        { path = { "tags", 1 }, message = "Expected a string.", expected = "string" },
        { path = { "title" }, message = "Must contain at least 1 character." },
      }, err.details)
      assert.falsy(res.body:find("secret-value", 1, true))
      assert.falsy(res.body:find("42", 1, true))
    end)

    test("answers 422 for a bad task id and for unknown keys on list", function()
      local cases = {
        { "tasks.complete", '{"id":""}', "id: Must contain at least 1 character." },
        { "tasks.complete", "{}", "id: Expected a string." },
        { "tasks.archive", '{"id":5}', "id: Expected a string." },
        { "tasks.list", '{"includeArchived":"yes"}', "includeArchived: Expected a boolean." },
        { "tasks.list", '{"all":true}', "all: Unknown property." },
      }
      for _, case in ipairs(cases) do
        local status, err = failure(s.port, case[1], case[2])
        assert.are.equal(422, status, case[2])
        assert.are.equal("INVALID_INPUT", err.code)
        assert.are.equal(case[3], err.message, case[2])
      end
    end)

    test("answers 404 NOT_FOUND for an unknown task id", function()
      for _, name in ipairs({ "tasks.complete", "tasks.archive" }) do
        for _, id in ipairs({ "999999999", "nope", "1 OR 1=1" }) do
          local status, err = failure(s.port, name, cjson.encode({ id = id }))
          assert.are.equal(404, status, name .. " " .. id)
          assert.are.same({ code = "NOT_FOUND", message = "Task not found." }, err)
        end
      end
    end)

    test("refuses text the database cannot keep (NUL) with 422", function()
      local status, err = failure(s.port, "tasks.create",
        '{"title":"a\\u0000b","estimate":null,"tags":[]}')
      assert.are.equal(422, status)
      assert.are.same({ code = "INVALID_INPUT", message = "title: Must not contain NUL characters." },
        err)
    end)

    test("scopes tasks by CLANK_TASKS_USER", function()
      local id = create(s.port, "private")
      local other = start(unique_user())
      local ok, problem = pcall(function()
        assert.is_nil(find(list(other.port, '{"includeArchived":true}'), id))
        local status, err = failure(other.port, "tasks.complete", '{"id":"' .. id .. '"}')
        assert.are.equal(404, status)
        assert.are.equal("NOT_FOUND", err.code)
      end)
      assert.are.equal(0, other:stop())
      assert(ok, problem)
      assert.is_false(find(list(s.port), id).completed)
    end)

    test("reminds: a task created with remindAt is marked when it comes, and an open page shows it",
      function()
        local live, html = live_page(s.port)
        local at = now_ms() + 1500
        local id = call(s.port, "tasks.create", cjson.encode({
          title = "Call the bank", estimate = cjson.null, tags = {}, remindAt = at,
        })).id
        local task = find(list(s.port), id)
        assert.are.equal(at, task.remindAt)
        assert.is_nil(task.remindedAt) -- not yet: 1.5 s to go
        assert.is_nil(badge(html, id))
        -- the page re-renders when the job's publish comes: no reload, no event from it
        local frame = assert(live:next_json(function(m)
          return m.t == "html" and badge(m.html, id) ~= nil
        end, 10 * slow))
        live:close()
        local tag, text = badge(frame.html, id)
        assert.are.equal("Reminder", text)
        assert.truthy(tag:find('class="reminder"', 1, true), tag)
        assert.truthy(tag:find('role="note"', 1, true), tag)
        assert.truthy(tag:find('aria-label="Reminder: the time set for this task has come"', 1, true), tag)
        task = find(list(s.port), id)
        assert.are.equal(at, task.remindAt)
        assert.is_true(task.remindedAt >= at, "marked before its time")
        assert.is_true(task.remindedAt < at + 10000 * slow)
        -- and a task without a reminder lists neither field
        local plain_id = create(s.port, "No reminder")
        local plain = find(list(s.port), plain_id)
        assert.is_nil(plain.remindAt)
        assert.is_nil(plain.remindedAt)
        -- done, the badge goes
        call(s.port, "tasks.complete", '{"id":"' .. id .. '"}')
        assert.is_nil(badge(assert(http.get(s.port, "/")).body, id))
      end)

    test("answers 422 for a remindAt that is not in the future, and creates nothing", function()
      local before = #list(s.port, '{"includeArchived":true}')
      for _, at in ipairs({ now_ms() - 1500, 0, -1 }) do
        local status, err = failure(s.port, "tasks.create", cjson.encode({
          title = "Too late", estimate = cjson.null, tags = {}, remindAt = at,
        }))
        assert.are.equal(422, status, tostring(at))
        assert.are.same({
          code = "INVALID_INPUT",
          message = "remindAt: Must be in the future (milliseconds since the Unix epoch).",
        }, err)
      end
      assert.are.equal(before, #list(s.port, '{"includeArchived":true}'))
    end)

    test("keeps the data across a restart of clank-run", function()
      local kept = create(s.port, "survives a restart")
      local done = create(s.port, "done before the restart")
      call(s.port, "tasks.complete", '{"id":"' .. done .. '"}')
      assert.are.equal(0, s:stop())
      s = start()
      local tasks = list(s.port)
      assert.are.equal("survives a restart", find(tasks, kept).title)
      assert.is_false(find(tasks, kept).completed)
      assert.is_true(find(tasks, done).completed)
    end)
  end)
end

--------------------------------------------------------------------------------
-- The jobs, through spec/fixtures/apps/tasks_jobs (apps/tasks with actions only a spec needs)

for _, backend in ipairs(backends) do
  describe("apps/tasks' jobs on " .. backend.name, function()
    local target, cleanup, user, s

    setup(function()
      if backend.pending then
        return
      end
      target, cleanup = backend.fresh()
      user = unique_user()
      s = server.start(JOBS_APP, {
        args = { "--no-watch" },
        env = { CLANK_TASKS_DB = target, CLANK_TASKS_USER = user },
      })
    end)

    teardown(function()
      if s then
        pcall(call, s.port, "spec.refuseReminders", '{"on":false}')
        assert.are.equal(0, s:stop())
        s = nil
      end
      server.kill_all()
      if cleanup then
        cleanup()
      end
    end)

    local function test(name, fn)
      it(name, function()
        if backend.pending then
          pending(backend.pending)
        else
          fn()
        end
      end)
    end

    local function reminders()
      return call(s.port, "spec.reminders", cjson.encode({ owner = user })).jobs
    end

    local function reminder_of(id)
      local found
      for _, job in ipairs(reminders()) do
        if job.taskId == id then
          assert.is_nil(found, "two reminders of task " .. id)
          found = job
        end
      end
      return found
    end

    -- Enqueues job `name` now and waits until it is done.
    local function run_job(name)
      local id = call(s.port, "spec.enqueue", cjson.encode({ job = name })).id
      eventually(10, function()
        return call(s.port, "spec.job", cjson.encode({ id = id })).state == "done"
      end, name .. " done")
    end

    test("writes one tasks.remind job per task, due at its remindAt", function()
      local before = #reminders()
      local at = now_ms() + 3600000
      local id = call(s.port, "tasks.create", cjson.encode({
        title = "Later", estimate = cjson.null, tags = {}, remindAt = at,
      })).id
      local job = reminder_of(id)
      assert.are.same({ id = job.id, taskId = id, state = "available", runAt = at }, job)
      create(s.port, "No reminder, no job")
      assert.are.equal(before + 1, #reminders())
    end)

    test("leaves neither the task nor its reminder when the transaction fails", function()
      local title = call(s.port, "spec.refuseReminders", '{"on":true}').title
      local before = #reminders()
      local status, err = failure(s.port, "tasks.create", cjson.encode({
        title = title, estimate = cjson.null, tags = {}, remindAt = now_ms() + 60000,
      }))
      assert.are.equal(500, status)
      assert.are.same({ code = "ACTION_FAILED", message = "The action failed." }, err)
      for _, t in ipairs(list(s.port, '{"includeArchived":true}')) do
        assert.are_not.equal(title, t.title)
      end
      assert.are.equal(before, #reminders())
      -- what the trigger refused is the reminder: the same task without one is written
      local id = create(s.port, title)
      call(s.port, "spec.refuseReminders", '{"on":false}')
      assert.are.equal(title, find(list(s.port), id).title)
    end)

    test("marks nothing when the task was completed before its reminder came", function()
      local at = now_ms() + 1000
      local id = call(s.port, "tasks.create", cjson.encode({
        title = "Done in time", estimate = cjson.null, tags = {}, remindAt = at,
      })).id
      call(s.port, "tasks.complete", '{"id":"' .. id .. '"}')
      eventually(10, function() return reminder_of(id).state == "done" end, "the reminder ran")
      local task = find(list(s.port), id)
      assert.is_true(task.completed)
      assert.are.equal(at, task.remindAt)
      assert.is_nil(task.remindedAt)
    end)

    test("archives the tasks completed more than 30 days ago, and no others", function()
      local old = create(s.port, "Done 31 days ago")
      local recent = create(s.port, "Done 29 days ago")
      local today = create(s.port, "Done today")
      local open = create(s.port, "Not done")
      for _, id in ipairs({ old, recent, today }) do
        call(s.port, "tasks.complete", '{"id":"' .. id .. '"}')
      end
      assert.are.same({ changed = 1 }, call(s.port, "spec.backdate", cjson.encode({ id = old, days = 31 })))
      assert.are.same({ changed = 1 }, call(s.port, "spec.backdate", cjson.encode({ id = recent, days = 29 })))
      -- an old completed_at on a task that is not done does not make it archived
      assert.are.same({ changed = 1 }, call(s.port, "spec.backdate", cjson.encode({ id = open, days = 31 })))
      run_job("tasks.archiveDone")
      local all = list(s.port, '{"includeArchived":true}')
      assert.are.same({ true, true }, { find(all, old).archived, find(all, old).completed })
      assert.is_false(find(all, recent).archived)
      assert.is_false(find(all, today).archived)
      assert.is_false(find(all, open).archived)
      assert.is_nil(find(list(s.port), old))
      -- a task completed now is completed now, not 31 days ago: it stays
      run_job("tasks.archiveDone")
      assert.is_false(find(list(s.port, '{"includeArchived":true}'), today).archived)
    end)
  end)
end
