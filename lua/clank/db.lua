-- clank.db: SQL without blocking the loop (SPEC §12).
--
--   local db = clank.db.open("sqlite:data/app.db", { pool = 4, timeout = 5000 })
--   db:migrate { "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)" }
--   local id = db:exec("INSERT INTO t (name) VALUES ($1)", "a").lastId
--   local row = db:one("SELECT * FROM t WHERE id = $1", id)
--   local rows = db:queryAs(Row, "SELECT id, name FROM t")  -- read as the s.object Row's objects
--   db:transaction(function(tx) tx:exec(...); return tx:query(...) end)
--
-- The drivers (C: clank.db.sqlite, clank.db.postgres; their contract is in
-- runtime/io/db.h) own the pools, shared by every generation that opens the
-- same target; this module turns their `nil, err` into raised errors.
--
-- Waiting: every call waits in the running task, with the task's abort signal
-- (a request's ctx.signal; `db:withSignal(signal)` gives another) and, when
-- `timeout` was given or there is no signal, a time limit for each wait
-- (acquiring a connection, then running the query): `timeout` ms, default
-- 30,000 outside a request (in a request the signal already aborts at the
-- action timeout).
--
-- Errors raised:
--   * the database's: a clank.db.Error table { code = SQLSTATE or
--     "SQLITE_CONSTRAINT"-style name, message = ... }, tostring "<code>: <message>";
--   * a wait that timed out (the signal's reason "timeout", or `timeout`):
--     clank.ActionError("TIMEOUT", "The query timed out.", 504);
--   * a wait whose signal aborted for another reason (the client went away,
--     "disconnected"; a reload, "reload"): clank.ActionError("ABORTED",
--     "The query was aborted (<reason>).", 503), details = { reason = ... };
--   * programming errors (a bad parameter, a closed database): a string.
local core = require "clank.core"
local action = require "clank.action"

local ActionError = action.ActionError
local current_signal = core.currentSignal
local db_registry = core.dbRegistry
local sha256 = core.sha256
local clank_rows = require "clank.rows"
local shape, is_shape = clank_rows.shape, clank_rows.isShape
local pack, unpack = table.pack, table.unpack
local running = coroutine.running
local type, error, pcall, setmetatable = type, error, pcall, setmetatable

local DEFAULT_TIMEOUT = 30000
local EMPTY = { n = 0 }

local M = {}

-- ---- errors ----

local DbError = { __name = "clank.db.Error" }
DbError.__index = DbError
DbError.__tostring = function(e) return tostring(e.code) .. ": " .. tostring(e.message) end

local function raise(err, level)
  level = (level or 1) + 1
  if err.code == "TIMEOUT" or err.reason == "timeout" then
    error(ActionError("TIMEOUT", "The query timed out.", 504), level)
  elseif err.code == "ABORTED" then
    local reason = tostring(err.reason or "aborted")
    error(ActionError("ABORTED", "The query was aborted (" .. reason .. ").", 503,
      { reason = reason }), level)
  end
  error(setmetatable({ code = err.code or "ERROR", message = err.message or "database error" },
    DbError), level)
end
M.Error = DbError

function M.isError(e) return getmetatable(e) == DbError end

-- ---- targets ----

local function redact(target)
  return (target:gsub("^(%a[%w+.-]*://[^:/@]*):[^@]*@", "%1:***@"))
end

local function parse_target(target)
  if type(target) ~= "string" or target == "" then
    error("clank.db.open: target must be a file path, sqlite:PATH or a postgres:// URL", 3)
  end
  if target:match("^postgres://") or target:match("^postgresql://") then
    return "postgres", target
  end
  local path = target:match("^sqlite:(.*)$")
  if path then
    path = path:gsub("^//", "")
    if path == "" then error("clank.db.open: no path in target '" .. target .. "'", 3) end
    return "sqlite", path
  end
  if target:match("^%a[%w+.-]*:") and not target:match("^%a:[/\\]") then
    error("clank.db.open: unsupported target '" .. redact(target) ..
      "' (expected a file path, sqlite:PATH or a postgres:// URL)", 3)
  end
  return "sqlite", target
end

local function load_driver(kind, target)
  local ok, driver = pcall(require, "clank.db." .. kind)
  if not ok then
    error("clank.db.open: no " .. kind .. " driver for '" .. redact(target) .. "': " ..
      tostring(driver), 3)
  end
  return driver
end

-- ---- waiting ----

-- The signal and time limit of a wait on behalf of db (or tx).
local function wait_args(db)
  local signal, bounded = db._signal, true
  if not signal then signal, bounded = current_signal() end
  local timeout = db.timeout
  -- a signal without a deadline of its own (a route's, which only a disconnect aborts) does not
  -- bound the wait: the default limit does
  if timeout == nil and not (signal and bounded) then timeout = DEFAULT_TIMEOUT end
  return signal, timeout
end

-- The pool, from the registry the state uses now: a generation built off the
-- loop (a reload) opened its top-level pools on a private loop, closed when
-- it joined the host's loop.
local function pool_of(db)
  local registry = db_registry()
  if db._registry ~= registry then
    db.pool = db._driver.pool(db._where, { size = db._size })
    db._registry = registry
  end
  return db.pool
end

-- The databases this state opened (weak): rebound together when the state joins the loop.
local opened = setmetatable({}, { __mode = "k" })

-- clank_gen_attach: a generation built off the loop takes the host's pools for its databases
-- now, before the generation it replaces lets go of them (the same pools, no new connections).
function M._rebind()
  for db in pairs(opened) do
    if not db.closed then pool_of(db) end
  end
end

local function acquire(db, level)
  if db.closed then error("clank.db: the database is closed", level + 1) end
  local signal, timeout = wait_args(db)
  local conn, err = pool_of(db):acquire(signal, timeout)
  if not conn then raise(err, level + 1) end
  return conn
end

-- Runs on a held connection; raises what the driver returned as an error.
local function run(db, conn, sql, params, mode, level)
  local signal, timeout = wait_args(db)
  local ok, res, err = pcall(conn.run, conn, sql, params, mode, signal, timeout)
  if not ok then error(res, level + 1) end -- a bad parameter: the driver's message
  if res == nil then raise(err, level + 1) end
  return res
end

local function check_sql(sql, what)
  if type(sql) ~= "string" then error("clank.db: " .. what .. " expects SQL text", 3) end
end

-- One query on a connection of its own: the driver's queue when it has one (pool:run, which
-- lends no connection to Lua), else a connection acquired and released around it.
local function once(db, sql, params, mode)
  if db.closed then error("clank.db: the database is closed", 3) end
  local pool = pool_of(db)
  local queued = pool.run
  if queued then
    local ok, res, err = pcall(queued, pool, sql, params, mode, wait_args(db))
    if not ok then error(res, 3) end
    if res == nil then raise(err, 3) end
    return res
  end
  local conn = acquire(db, 3)
  local ok, res, err = pcall(conn.run, conn, sql, params, mode, wait_args(db))
  conn:release()
  if not ok then error(res, 3) end
  if res == nil then raise(err, 3) end
  return res
end

-- ---- the database ----

local Db = {}
Db.__index = Db
Db.__name = "clank.Database"

function Db:query(sql, ...)
  check_sql(sql, "query")
  return once(self, sql, pack(...), "rows")
end

-- queryAs's schema, an s.object, is checked before the query runs.
local function check_shape(schema)
  if not is_shape(schema) then error("clank.db: queryAs expects an s.object schema first", 3) end
end

local function shaped(result, schema)
  local ok, res = pcall(shape, result, schema)
  if not ok then error("clank.db: queryAs: " .. tostring(res), 3) end
  return res
end

-- The rows as the objects of an s.object schema (doc/data.md): a clank.Rows, which an
-- action's answer writes straight from the driver's buffer.
function Db:queryAs(schema, sql, ...)
  check_shape(schema)
  check_sql(sql, "queryAs")
  local rows = shaped(once(self, sql, pack(...), "raw"), schema)
  return rows -- not a tail call: shaped's error names the caller's line
end

function Db:one(sql, ...)
  check_sql(sql, "one")
  return once(self, sql, pack(...), "rows")[1]
end

function Db:exec(sql, ...)
  check_sql(sql, "exec")
  return once(self, sql, pack(...), "exec")
end

-- A view of this database whose waits take signal (nil: the task's).
function Db:withSignal(signal)
  return setmetatable({ _signal = signal }, { __index = self })
end

-- ---- transactions ----

local Tx = {}
Tx.__index = Tx
Tx.__name = "clank.Transaction"

local function tx_conn(tx)
  if tx.done then error("clank.db: the transaction is over", 3) end
  return tx.conn
end

function Tx:query(sql, ...)
  check_sql(sql, "query")
  return run(self.db, tx_conn(self), sql, pack(...), "rows", 2)
end

function Tx:queryAs(schema, sql, ...)
  check_shape(schema)
  check_sql(sql, "queryAs")
  local rows = shaped(run(self.db, tx_conn(self), sql, pack(...), "raw", 2), schema)
  return rows
end

function Tx:one(sql, ...)
  check_sql(sql, "one")
  return run(self.db, tx_conn(self), sql, pack(...), "rows", 2)[1]
end

function Tx:exec(sql, ...)
  check_sql(sql, "exec")
  return run(self.db, tx_conn(self), sql, pack(...), "exec", 2)
end

-- The transactions each task has open, by target (weak: a task that died inside leaves nothing):
-- what runs inside db:transaction on the same database joins it (a job's enqueue, issue 32).
local open_transactions = setmetatable({}, { __mode = "k" })

-- The transaction the running task has open on db's database (the same target), or nil.
function M.transactionOf(db)
  local open = open_transactions[running()]
  return open and open[db.target]
end

-- fn() once tx commits (not if it rolls back): e.g. waking the job runner for what it enqueued.
function Tx:afterCommit(fn)
  if type(fn) ~= "function" then error("clank.db: afterCommit expects a function", 2) end
  local list = self._after
  if not list then
    list = {}
    self._after = list
  end
  list[#list + 1] = fn
end

local function after_commit(tx)
  local list = tx._after
  if not list then return end
  for i = 1, #list do
    local ok, err = pcall(list[i])
    if not ok then core.log("error", "clank.db: an after-commit function failed: " .. tostring(err)) end
  end
end

-- fn(tx) on one held connection: commit when it returns (its results are
-- returned), rollback when it raises (the error raised again, as it was).
-- A task that dies inside, or a generation dropped meanwhile, rolls back
-- when the connection is collected. SQLite begins IMMEDIATE (the write lock
-- first, so two transactions never deadlock upgrading).
function Db:transaction(fn)
  if type(fn) ~= "function" then error("clank.db: transaction expects a function", 2) end
  local conn = acquire(self, 2)
  local ok, err = pcall(run, self, conn, self.begin, EMPTY, "exec", 1)
  if not ok then
    conn:release()
    error(err, 2)
  end
  local tx = setmetatable({ conn = conn, db = self }, Tx)
  local co = running()
  local open = open_transactions[co]
  if not open then
    open = {}
    open_transactions[co] = open
  end
  local outer = open[self.target]
  open[self.target] = tx
  local results = pack(pcall(fn, tx))
  open[self.target] = outer
  tx.done = true
  if results[1] then
    local committed, cerr = pcall(run, self, conn, "COMMIT", EMPTY, "exec", 1)
    conn:release() -- a failed COMMIT leaves the transaction open: release rolls it back
    if not committed then error(cerr, 2) end
    after_commit(tx)
    return unpack(results, 2, results.n)
  end
  -- ROLLBACK even when the signal aborted (no signal here; short limit); if
  -- it cannot run, release rolls back.
  pcall(conn.run, conn, "ROLLBACK", EMPTY, "exec", nil, 5000)
  conn:release()
  error(results[2], 0)
end

-- ---- migrations ----

local function hex(s)
  return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

local function describe(sql)
  local line = sql:match("^%s*([^\n]*)") or ""
  if #line > 60 then line = line:sub(1, 57) .. "..." end
  return line
end

-- The advisory lock key of a migrations table on PostgreSQL: clank_migrations keeps the key it
-- always had; another table's is derived from its name, so the app's migrations and the
-- runtime's (clank_auth_migrations) never wait for each other.
local DEFAULT_TABLE = "clank_migrations"
local function lock_key(name)
  if name == DEFAULT_TABLE then return 7231650146915447 end
  return (string.unpack(">i8", sha256("clank.db.migrate\0" .. name)))
end

-- The migrations table's name, the arguments checked (raised at the caller of migrate).
local function migrations_table(list, opts)
  if type(list) ~= "table" then error("clank.db: migrate expects a list of SQL strings", 3) end
  for i = 1, #list do
    if type(list[i]) ~= "string" then
      error("clank.db: migration " .. i .. " must be SQL text", 3)
    end
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("clank.db: migrate's options must be a table", 3)
  end
  local name = opts and opts.table or DEFAULT_TABLE
  if type(name) ~= "string" or not name:find("^[%a_][%w_]*$") then
    error("clank.db: migrate's table must be a name of letters, digits and _, got " ..
      tostring(name), 3)
  end
  return name
end

-- The migrations not yet recorded in table `name`, applied on tx (which holds the lock).
local function apply(tx, kind, list, name)
  if kind == "postgres" then
    tx:exec("SELECT pg_advisory_xact_lock($1)", lock_key(name))
  end
  -- name is checked (migrations_table): the only text spliced into these statements
  tx:exec("CREATE TABLE IF NOT EXISTS " .. name .. " (position INTEGER PRIMARY KEY, " ..
    "checksum TEXT NOT NULL, applied_at TEXT NOT NULL)")
  local recorded = {}
  for _, row in ipairs(tx:query("SELECT position, checksum FROM " .. name)) do
    recorded[math.tointeger(row.position) or row.position] = row.checksum
  end
  local applied = 0
  for i = 1, #list do
    local sum = hex(sha256(list[i]))
    if recorded[i] then
      if recorded[i] ~= sum then
        error(setmetatable({ code = "MIGRATION_CHANGED",
          message = ("migration %d (%s) changed since it was applied"):format(i, describe(list[i])),
        }, DbError), 0)
      end
    else
      tx:exec(list[i])
      tx:exec("INSERT INTO " .. name .. " (position, checksum, applied_at) VALUES ($1, $2, $3)",
        i, sum, os.date("!%Y-%m-%dT%H:%M:%SZ"))
      applied = applied + 1
    end
  end
  return applied
end

-- Applies each statement once, in order, recorded by position with its
-- checksum in clank_migrations (or opts.table: a list of migrations of its
-- own, such as the runtime's), under a lock (BEGIN IMMEDIATE on SQLite,
-- pg_advisory_xact_lock on PostgreSQL, a key per table): workers starting
-- together apply each once. A recorded migration whose text changed is an
-- error naming it. Returns how many it applied.
function Db:migrate(list, opts)
  local name = migrations_table(list, opts)
  return self:transaction(function(tx) return apply(tx, self.kind, list, name) end)
end

-- The same inside this transaction, which holds the lock until it ends (on SQLite it holds the
-- write lock already: db:migrate, on another connection, would wait for it): the migrations
-- are made, and recorded, exactly when the transaction's other writes are.
function Tx:migrate(list, opts)
  local name = migrations_table(list, opts)
  tx_conn(self)
  return apply(self, self.db.kind, list, name)
end

function Db:close()
  if self.closed then return end
  self.closed = true
  self.pool:close()
end

function Db:__tostring()
  return "clank.Database (" .. self.kind .. ": " .. redact(self.target) .. ")"
end

-- clank.db.open(target, { pool = N, timeout = MS }): connects lazily.
function M.open(target, opts)
  local kind, where = parse_target(target)
  opts = opts or {}
  if type(opts) ~= "table" then error("clank.db.open: options must be a table", 2) end
  local size = opts.pool
  if size ~= nil and (math.type(size) ~= "integer" or size < 1 or size > 64) then
    error("clank.db.open: pool must be an integer from 1 to 64", 2)
  end
  local timeout = opts.timeout
  if timeout ~= nil and (type(timeout) ~= "number" or timeout <= 0) then
    error("clank.db.open: timeout must be a positive number of milliseconds", 2)
  end
  local driver = load_driver(kind, target)
  local registry = db_registry()
  local pool = driver.pool(where, { size = size or 4 }) -- a bad target fails here
  local db = setmetatable({
    kind = kind, target = target, pool = pool, timeout = timeout,
    _driver = driver, _where = where, _size = size or 4, _registry = registry,
    begin = kind == "sqlite" and "BEGIN IMMEDIATE" or "BEGIN",
  }, Db)
  opened[db] = true
  M.first = M.first or db
  return db
end

return M
