-- apps/tasks/store.lua, the tasks app's storage, against SQLite and (when
-- CLANK_TEST_POSTGRES_URL is set, as in ./dev test) PostgreSQL. The store waits on clank.db
-- (SPEC §12), so every call runs in a runtime coroutine: the handler of an action called from
-- top-level code, which runs the loop until it finishes (run below).
local source = os.getenv("CLANK_SOURCE_DIR") or "."
package.path = source .. "/apps/tasks/?.lua;" .. package.path
local clank = require "clank"
local store = require "store"

local storage = require "helpers.storage"

local pg_url = storage.postgres_url
local unique_user, remove_db, backends = storage.unique_user, storage.remove_db, storage.backends
local null, array, isArray = clank.null, clank.json.array, clank.json.isArray
local oracle = require("cjson").new() -- a fresh instance: the store's is one too

-- tasks.list's task as apps/tasks/app.lua made it from list's before it read rows as its Task
-- schema: the oracle list_rows must agree with.
local function task_output(t)
  return {
    id = t.id, title = t.title, priority = t.priority,
    estimate = t.estimate == nil and null or t.estimate,
    tags = array(t.tags), completed = t.completed, archived = t.archived,
    createdAt = t.created, remindAt = t.remindAt, remindedAt = t.remindedAt,
  }
end

-- What cjson makes of stored tags text: the table it decodes, {} for anything else.
local function cjson_tags(text)
  local ok, v = pcall(oracle.decode, text)
  if not ok or type(v) ~= "table" then return {} end
  return v
end

-- Tags texts as the store writes them and as another program (or a hand) may have: valid
-- arrays, escapes, Unicode, whitespace, malformed text, other JSON values, objects, nesting.
local TAGS = {
  "[]", '["docs","release"]', '[""]', '["a"]', '["a\\"b","c\\\\d","e\\/f"]',
  '["\\u00e9t\\u00e9","\\ud83d\\ude00","\\u0001"]', '["été","日本","𝄞"]', '[ "spaced" , "out" ]',
  '["x",]', '["x"', "not json", "", "[", "]", '"docs"', "5", "true", "null", "{}",
  '{"a":"b"}', '[["nested"]]', "[1,2.5]", "[null]", '["a"] trailing', '["\\ud800"]',
  '["tab\there"]', '["\t"]', "[] ", " []", '["a",null]', "[9007199254740993]", '["a",["b"]]',
}

-- apps/tasks/app.lua's Task, which tasks.list answers.
local s = clank.schema
local TASK = s.object {
  id = s.string(), title = s.string(), priority = s.optional(s.enum { "low", "normal", "high" }),
  estimate = s.nullable(s.number { min = 0 }), tags = s.array(s.string()), completed = s.boolean(),
  archived = s.boolean(), createdAt = s.number { integer = true },
  remindAt = s.optional(s.number { integer = true }), remindedAt = s.optional(s.number { integer = true }),
}
-- The titles of the tasks whose TAGS text is a JSON array of strings, as this store writes
-- them: whitespace around it, escapes and Unicode included.
local WRITTEN_TAGS = { t1 = true, t2 = true, t3 = true, t4 = true, t5 = true, t6 = true, t7 = true,
                       t8 = true, t28 = true, t29 = true }

-- Runs fn() in an action's handler and returns what it returns; what it raises (a failed
-- assertion too) is raised again here, as it is.
local runner = clank.defineAction {
  name = "spec.run", description = "Runs a function in a runtime coroutine.",
  input = clank.schema.object {}, sideEffects = "read",
  handler = function(_, ctx)
    local fn = ctx.fn
    ctx.result = table.pack(pcall(fn))
    return {}
  end,
}
local function run(fn)
  local ctx = { fn = fn }
  runner({}, ctx)
  local r = ctx.result
  if not r[1] then
    error(r[2], 0)
  end
  return table.unpack(r, 2, r.n)
end

-- A test whose body runs in a runtime coroutine.
local function it_runs(name, fn)
  it(name, function() run(fn) end)
end

describe("apps/tasks/store", function()
  it("tells PostgreSQL URLs from file paths", function()
    assert.is_true(store.is_postgres_url("postgres://u:p@h:5432/db"))
    assert.is_true(store.is_postgres_url("postgresql:///db?host=/tmp/s"))
    assert.is_false(store.is_postgres_url("/var/lib/tasks.db"))
    assert.is_false(store.is_postgres_url("tasks.db"))
    assert.is_false(store.is_postgres_url("mysql://h/db"))
  end)

  it("raises on a missing target (a programmer error)", function()
    assert.has_error(function() store.open(nil) end,
      "store.open: expected a file path or a postgresql:// URL")
    assert.has_error(function() store.open("") end,
      "store.open: expected a file path or a postgresql:// URL")
  end)

  it_runs("returns nil and a message when the SQLite file cannot be opened", function()
    local db, err = store.open("/nonexistent-dir-for-clank/tasks.db")
    assert.is_nil(db)
    assert.is_string(err)
  end)

  for _, backend in ipairs(backends) do
    describe("on " .. backend.name, function()
      local target, cleanup, db, alice, bob

      before_each(function()
        if backend.pending then
          return
        end
        target, cleanup = backend.fresh()
        db = run(function() return assert(store.open(target)) end)
        alice, bob = unique_user("alice"), unique_user("bob")
      end)

      after_each(function()
        if db then
          db:close()
          db = nil
        end
        if cleanup then
          cleanup()
          cleanup = nil
        end
      end)

      if backend.pending then
        it("runs the store against PostgreSQL", function()
          pending(backend.pending)
        end)
        return
      end

      it_runs("creates tasks and lists them in creation order with every field", function()
        local a = assert(db:create(alice, { title = "Ship docs", priority = "high", estimate = 1.5,
                                            tags = { "docs", "release" } }))
        local b = assert(db:create(alice, { title = "Plan", tags = {} }))
        assert.is_string(a.id)
        assert.is_string(b.id)
        assert.are_not.equal(a.id, b.id)
        assert.are.equal("Ship docs", a.title)
        assert.is_false(a.completed)
        assert.is_false(a.archived)

        local list = assert(db:list(alice))
        assert.are.equal(2, #list)
        local first, second = list[1], list[2]
        assert.are.equal(a.id, first.id)
        assert.are.equal("Ship docs", first.title)
        assert.are.equal("high", first.priority)
        assert.are.equal(1.5, first.estimate)
        assert.are.same({ "docs", "release" }, first.tags)
        assert.is_false(first.completed)
        assert.is_false(first.archived)
        assert.is_number(first.created)
        assert.are.equal(b.id, second.id)
        assert.is_nil(second.priority)
        assert.is_nil(second.estimate)
        assert.are.same({}, second.tags)
      end)

      it_runs("keeps numbers exact: integers, 0.1 and zero", function()
        assert(db:create(alice, { title = "a", estimate = 3, tags = {} }))
        assert(db:create(alice, { title = "b", estimate = 0.1, tags = {} }))
        assert(db:create(alice, { title = "c", estimate = 0, tags = {} }))
        local list = assert(db:list(alice))
        assert.are.equal(3, list[1].estimate)
        assert.are.equal(0.1, list[2].estimate)
        assert.are.equal(0, list[3].estimate)
      end)

      it_runs("stores quotes, backslashes, SQL and non-ASCII text verbatim", function()
        local nasty = {
          "it's",
          "'); DROP TABLE tasks; --",
          "back\\slash \\' and \"double\"",
          "Ünïcode ✓ 日本",
          "%s %d %%",
        }
        for _, title in ipairs(nasty) do
          assert(db:create(alice, { title = title, tags = { title } }))
        end
        local list = assert(db:list(alice))
        assert.are.equal(#nasty, #list)
        for i, title in ipairs(nasty) do
          assert.are.equal(title, list[i].title)
          assert.are.same({ title }, list[i].tags)
        end
      end)

      it_runs("treats the owner as data, not SQL", function()
        local sneaky = alice .. "' OR '1'='1"
        assert(db:create(alice, { title = "mine", tags = {} }))
        assert.are.same({}, assert(db:list(sneaky)))
        assert(db:create(sneaky, { title = "sneaky's", tags = {} }))
        local list = assert(db:list(sneaky))
        assert.are.equal(1, #list)
        assert.are.equal("sneaky's", list[1].title)
      end)

      it_runs("scopes tasks by owner", function()
        local a = assert(db:create(alice, { title = "alice's", tags = {} }))
        assert(db:create(bob, { title = "bob's", tags = {} }))
        local list = assert(db:list(bob))
        assert.are.equal(1, #list)
        assert.are.equal("bob's", list[1].title)
        assert.is_false(db:complete(bob, a.id))
        assert.is_false(db:archive(bob, a.id))
        assert.is_false(assert(db:list(alice))[1].completed)
        assert.is_false(assert(db:list(alice))[1].archived)
      end)

      it_runs("completes a task, again without harm", function()
        local a = assert(db:create(alice, { title = "a", tags = {} }))
        assert.is_true(db:complete(alice, a.id))
        assert.is_true(db:complete(alice, a.id))
        local list = assert(db:list(alice))
        assert.is_true(list[1].completed)
        assert.is_false(list[1].archived)
      end)

      it_runs("archives a task: hidden from the list unless archived ones are asked for", function()
        local a = assert(db:create(alice, { title = "old", tags = {} }))
        local b = assert(db:create(alice, { title = "current", tags = {} }))
        assert.is_true(db:archive(alice, a.id))
        local list = assert(db:list(alice))
        assert.are.equal(1, #list)
        assert.are.equal(b.id, list[1].id)
        local all = assert(db:list(alice, true))
        assert.are.equal(2, #all)
        assert.are.equal(a.id, all[1].id)
        assert.is_true(all[1].archived)
        assert.is_false(all[2].archived)
      end)

      it_runs("answers false for ids that name no task", function()
        local a = assert(db:create(alice, { title = "a", tags = {} }))
        for _, id in ipairs({ "999999999", "0", "", "abc", a.id .. "x", "1 OR 1=1", "-1", "1.0",
                              "123456789012345678901234567890", "' OR ''='" }) do
          assert.is_false(db:complete(alice, id), id)
          assert.is_false(db:archive(alice, id), id)
        end
        assert.is_false(assert(db:list(alice))[1].completed)
      end)

      it_runs("keeps the data when the store is opened again", function()
        local a = assert(db:create(alice, { title = "durable", priority = "low", tags = { "x" } }))
        assert.is_true(db:complete(alice, a.id))
        db:close()
        db = assert(store.open(target))
        local list = assert(db:list(alice))
        assert.are.equal(1, #list)
        assert.are.equal(a.id, list[1].id)
        assert.are.equal("durable", list[1].title)
        assert.are.equal("low", list[1].priority)
        assert.are.same({ "x" }, list[1].tags)
        assert.is_true(list[1].completed)
      end)

      it_runs("lets two stores share the database at once", function()
        local other = assert(store.open(target))
        assert(db:create(alice, { title = "one", tags = {} }))
        assert(other:create(alice, { title = "two", tags = {} }))
        assert.are.equal(2, #assert(other:list(alice)))
        assert.are.equal(2, #assert(db:list(alice)))
        other:close()
      end)

      -- Reminders and the nightly archive (issue 32's jobs in apps/tasks/app.lua)

      -- A column of one task, read from the database itself.
      local function column(id, name)
        local value = db.db:one("SELECT " .. name .. " AS v FROM tasks WHERE id = $1", tonumber(id)).v
        if value == clank.null then return nil end
        return value
      end

      it_runs("keeps a task's reminder time, and when the reminder fired", function()
        local a = assert(db:create(alice, { title = "call", tags = {}, remindAt = 1900000000000 }))
        local b = assert(db:create(alice, { title = "plain", tags = {} }))
        assert.are.equal(1900000000000, a.remindAt)
        assert.is_nil(a.remindedAt)
        assert.is_nil(b.remindAt)
        assert.is_true(db:remind(alice, a.id, 1900000000123))
        local list = assert(db:list(alice))
        assert.are.equal(1900000000000, list[1].remindAt)
        assert.are.equal(1900000000123, list[1].remindedAt)
        assert.is_nil(list[2].remindAt)
        assert.is_nil(list[2].remindedAt)
      end)

      it_runs("marks only an open task of its owner as reminded", function()
        local done = assert(db:create(alice, { title = "done", tags = {}, remindAt = 1900000000000 }))
        local gone = assert(db:create(alice, { title = "gone", tags = {}, remindAt = 1900000000000 }))
        local open = assert(db:create(alice, { title = "open", tags = {}, remindAt = 1900000000000 }))
        assert.is_true(db:complete(alice, done.id))
        assert.is_true(db:archive(alice, gone.id))
        assert.is_false(db:remind(alice, done.id, 1900000000001))
        assert.is_false(db:remind(alice, gone.id, 1900000000001))
        assert.is_false(db:remind(bob, open.id, 1900000000001))
        assert.is_false(db:remind(alice, "999999999", 1900000000001))
        assert.is_false(db:remind(alice, "nope", 1900000000001))
        for _, t in ipairs(assert(db:list(alice, true))) do
          assert.is_nil(t.remindedAt, t.title)
        end
      end)

      it_runs("records when a task was first completed, in seconds", function()
        local a = assert(db:create(alice, { title = "a", tags = {} }))
        assert.is_nil(column(a.id, "completed_at"))
        local t0 = os.time()
        assert.is_true(db:complete(alice, a.id))
        local at = column(a.id, "completed_at")
        assert.is_true(at >= t0 and at <= os.time(), tostring(at))
        -- completing again keeps the first time
        db.db:exec("UPDATE tasks SET completed_at = 1000000 WHERE id = $1", tonumber(a.id))
        assert.is_true(db:complete(alice, a.id))
        assert.are.equal(1000000, column(a.id, "completed_at"))
      end)

      -- Completion times before 1970-01-01T00:05Z (set here) are no other spec's nor test's: the
      -- PostgreSQL table is shared. Each owner is named once even with two tasks archived.
      it_runs("archives the tasks completed before a time, whoever's, naming each owner once", function()
        local a1 = assert(db:create(alice, { title = "a1", tags = {} }))
        local a2 = assert(db:create(alice, { title = "a2", tags = {} }))
        local b1 = assert(db:create(bob, { title = "b1", tags = {} }))
        local open = assert(db:create(alice, { title = "open", tags = {} }))
        for _, t in ipairs({ { alice, a1, 100 }, { alice, a2, 200 }, { bob, b1, 300 } }) do
          assert.is_true(db:complete(t[1], t[2].id))
          db.db:exec("UPDATE tasks SET completed_at = $1 WHERE id = $2", t[3], tonumber(t[2].id))
        end
        -- not done: an old completed_at does not make it archived
        db.db:exec("UPDATE tasks SET completed_at = 50 WHERE id = $1", tonumber(open.id))
        -- of the owners named, this test's (a failed run before this one may have left some)
        local function ours(owners)
          local out = {}
          for _, who in ipairs(owners) do
            if who == alice or who == bob then out[#out + 1] = who end
          end
          return out
        end
        assert.are.same({ alice }, ours(db:archive_done(250)))
        assert.are.same({ bob }, ours(db:archive_done(301)))
        assert.are.same({}, ours(db:archive_done(301)))
        local all = assert(db:list(alice, true))
        assert.are.same({ "a1", true, "a2", true, "open", false },
          { all[1].title, all[1].archived, all[2].title, all[2].archived, all[3].title, all[3].archived })
        assert.is_true(assert(db:list(bob, true))[1].archived)
      end)

      it_runs("runs calls in one transaction: kept when fn returns, gone when it raises", function()
        local kept = db:transaction(function(tx)
          assert.are.equal("tasks.Store (" .. db.kind .. ", in a transaction)", tostring(tx))
          local t = tx:create(alice, { title = "kept", tags = {}, remindAt = 1900000000000 })
          assert.is_true(tx:complete(alice, t.id))
          return t
        end)
        assert.are.equal("kept", kept.title)
        local ok, err = pcall(db.transaction, db, function(tx)
          tx:create(alice, { title = "rolled back", tags = {} })
          error("changed my mind", 0)
        end)
        assert.is_false(ok)
        assert.are.equal("changed my mind", err)
        local list = assert(db:list(alice))
        assert.are.equal(1, #list)
        assert.are.equal(kept.id, list[1].id)
        assert.is_true(list[1].completed)
        assert.are.equal(1900000000000, list[1].remindAt)
        assert.has_error(function() db:transaction(function(tx) tx:transaction(function() end) end) end,
          "store:transaction: already in a transaction")
        assert.has_error(function() db:transaction("no") end, "store:transaction: expected a function")
      end)

      -- tasks.list answers list_rows (apps/tasks/app.lua): the database's rows read as its Task
      -- schema (clank.db's queryAs), where tasks.list used to make a task_output of each of
      -- list's tasks. A row this store did not write, whose tags are not a JSON array of strings
      -- or whose estimate is not a number, is read as far as it goes: the answer's validation
      -- refuses it.
      it_runs("lists for tasks.list what list's tasks made, field for field, for rows it wrote", function()
        local texts, want_tags = {}, {}
        for i, tags in ipairs(TAGS) do
          local t = assert(db:create(alice, {
            title = "t" .. i,
            priority = ({ nil, "low", "high" })[i % 3 + 1],
            estimate = ({ nil, 0, 1.5, 3 })[i % 4 + 1],
            tags = {},
            remindAt = i % 2 == 0 and 1900000000000 + i or nil,
          }))
          db.db:exec("UPDATE tasks SET tags = $1 WHERE id = $2", tags, tonumber(t.id))
          if i % 4 == 0 then assert.is_true(db:remind(alice, t.id, 1900000000500 + i)) end
          if i % 5 == 0 then assert.is_true(db:complete(alice, t.id)) end
          if i % 7 == 0 then assert.is_true(db:archive(alice, t.id)) end
          texts["t" .. i], want_tags["t" .. i] = tags, cjson_tags(tags)
        end
        if backend.name == "SQLite" then -- text where a number belongs, NUL in the tags
          local odd = assert(db:create(alice, { title = "odd", tags = {} }))
          db.db:exec("UPDATE tasks SET estimate = 'about two', tags = $1 WHERE id = $2", '["a\0b"]',
            tonumber(odd.id))
          local half = assert(db:create(alice, { title = "half", tags = {} }))
          db.db:exec("UPDATE tasks SET estimate = '2.5' WHERE id = $1", tonumber(half.id))
          texts.odd, want_tags.half = '["a\0b"]', {}
        end
        for _, all in ipairs({ false, true }) do
          local want = {}
          for i, t in ipairs(assert(db:list(alice, all))) do want[i] = task_output(t) end
          local got = db:list_rows(TASK, alice, all)
          assert.are.equal(#want, #got)
          assert.are.equal(all and #TAGS + (backend.name == "SQLite" and 2 or 0) or #want, #got)
          for i, w in ipairs(want) do
            local g = got[i]
            if WRITTEN_TAGS[g.title] or g.title == "half" then
              assert.are.same(w, g) -- the same keys and values, tags item for item
              for k in pairs(g) do assert.is_not_nil(w[k], k) end
              assert.is_true(isArray(g.tags), g.title)
              assert.are.same(want_tags[g.title], g.tags, texts[g.title])
              assert.is_true(TASK:safeParse(g).success, g.title)
            else
              assert.is_false(TASK:safeParse(g).success, g.title) -- the answer fails
              assert.are.same(w.title, g.title)
            end
          end
        end
        assert.are.equal(0, #db:list_rows(TASK, bob))
      end)

      it_runs("raises on bad arguments (programmer errors)", function()
        assert.has_error(function() db:create(nil, { title = "x" }) end,
          "store: owner must be a non-empty string")
        assert.has_error(function() db:create(alice, { tags = {} }) end,
          "store:create: fields.title must be a string")
        assert.has_error(function() db:create(alice, { title = "x", estimate = "2" }) end,
          "store:create: fields.estimate must be a number or nil")
        assert.has_error(function() db:create(alice, { title = "a\0b" }) end,
          "store: text must not contain NUL bytes")
        assert.has_error(function() db:complete(alice, 1) end,
          "store: id must be a string, got number")
        assert.has_error(function() db:create(alice, { title = "x", remindAt = 1.5 }) end,
          "store:create: fields.remindAt must be an integer (milliseconds since the epoch) or nil")
        assert.has_error(function() db:remind(alice, "1", "soon") end,
          "store:remind: at must be an integer (milliseconds since the epoch)")
        assert.has_error(function() db:archive_done(nil) end,
          "store:archive_done: before must be an integer (seconds since the epoch)")
        assert.are.same({}, assert(db:list(alice)))
        assert.has_error(function() db:list_rows(TASK, nil) end, "store: owner must be a non-empty string")
      end)
    end)
  end

  describe("on SQLite", function()
    -- A database the app made before it had migrations, or before completed_at: its tasks done
    -- by then count as completed when the column came, so the nightly archive takes them 30
    -- days after that, and not at once.
    it_runs("dates the tasks done before completed_at existed at the migration", function()
      local path = os.tmpname()
      os.remove(path)
      path = path .. ".db"
      local old = clank.db.open(path)
      old:exec([[CREATE TABLE tasks (id INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT NOT NULL,
        title TEXT NOT NULL, priority TEXT, estimate REAL, tags TEXT NOT NULL,
        completed INTEGER NOT NULL DEFAULT 0, archived INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL)]])
      old:exec("INSERT INTO tasks (owner, title, tags, completed, created_at) VALUES ('ann', 'done', '[]', 1, 5)")
      old:exec("INSERT INTO tasks (owner, title, tags, completed, created_at) VALUES ('ann', 'open', '[]', 0, 5)")
      old:close()
      local t0 = os.time()
      local db = assert(store.open(path))
      local rows = db.db:query("SELECT title, completed_at FROM tasks ORDER BY id")
      local t1 = os.time()
      assert.are.same({}, db:archive_done(t0))
      local list = db:list("ann")
      db:close()
      remove_db(path)
      assert.are.equal("done", rows[1].title)
      -- (os.time() reads the kernel's coarse clock, which can be a tick behind SQLite's 'now'
      -- across a second's boundary: t1 may be one second short)
      assert.is_true(rows[1].completed_at >= t0 and rows[1].completed_at <= t1 + 1,
        tostring(rows[1].completed_at) .. " not within " .. t0 .. ".." .. t1 + 1)
      assert.are.equal(clank.null, rows[2].completed_at)
      assert.are.same({ "done", "open" }, { list[1].title, list[2].title })
    end)

    it("uses write-ahead logging", function()
      local path = os.tmpname()
      os.remove(path)
      path = path .. ".db"
      local db = run(function() return assert(store.open(path)) end)
      db:close()
      -- WAL is kept in the file: another process (the sqlite3 shell) reads the mode there
      -- the pool's threads close their connections after close() returns: a reader may find
      -- the file locked for a moment
      local mode
      for _ = 1, 50 do
        local p = assert(io.popen("env -u LD_PRELOAD sqlite3 '" .. path .. "' 'PRAGMA journal_mode' 2>&1"))
        mode = p:read("a")
        p:close()
        if not mode:find("locked", 1, true) then break end
        os.execute("sleep 0.1")
      end
      remove_db(path)
      assert.are.equal("wal\n", mode)
    end)
  end)

  describe("on PostgreSQL", function()
    it("returns nil and a message for a database that does not exist", function()
      if not pg_url then
        pending(backends[2].pending)
        return
      end
      local url = pg_url:gsub("^(postgres[a-z]*://[^/]*/)[^?]*", "%1clank_no_such_db")
      local db, err = run(function() return store.open(url) end)
      assert.is_nil(db)
      assert.matches("clank_no_such_db", err, 1, true)
    end)
  end)
end)
