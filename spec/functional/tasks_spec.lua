-- The example app apps/tasks over HTTP, on the real clank-run: the bridge's envelopes and
-- statuses (SPEC §5), the schema messages (SPEC §3), storage on SQLite and PostgreSQL.
-- Expected values are written from the SPEC by hand; cjson decodes independently.
local server = require "helpers.server"
local http = require "helpers.http"
local storage = require "helpers.storage"
local cjson = require "cjson"

local APP = server.source_dir() .. "/apps/tasks/app.lua"

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

--------------------------------------------------------------------------------
-- The suite, once per database

local backends = storage.backends

local CREATE_SCHEMA = {
  type = "object",
  properties = {
    estimate = { anyOf = { { type = "number", minimum = 0 }, { type = "null" } } },
    priority = { type = "string", enum = { "low", "normal", "high" } },
    tags = { type = "array", items = { type = "string" }, maxItems = 10 },
    title = { type = "string", minLength = 1, maxLength = 120, description = "Short task title" },
  },
  required = { "estimate", "tags", "title" },
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
