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
        assert.are.same({}, assert(db:list(alice)))
      end)
    end)
  end

  describe("on SQLite", function()
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
