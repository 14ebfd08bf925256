-- bench/db/store_luasql.lua: apps/tasks/store.lua as it was before clank.db (SPEC §12), kept
-- only so that bench/db.sh can measure the same app on LuaSQL (bench/db/app_luasql.lua). Its
-- calls block the loop while they run. Storage for the tasks app, through LuaSQL: SQLite (a
-- file) or PostgreSQL (a URL). Needs lua-sql-sqlite3 and lua-sql-postgres (vendor/deps.sh --bench).
--
--   local store = require "store_luasql"
--   local db = assert(store.open("/path/to/tasks.db"))        -- or "postgresql:///db?host=/sock"
--   local task = assert(db:create("alice", { title = "Ship", priority = "high",
--                                            estimate = 2, tags = { "docs" } }))
--   db:list("alice", include_archived)  --> { task, ... } in creation order
--   db:complete("alice", task.id)       --> true, or false when alice has no such task
--   db:archive("alice", task.id)        --> true, or false
--   db:close()
--
-- A task is { id (string), title, priority?, estimate?, tags = {...}, completed, archived,
-- created (seconds since the epoch) }; absent priority and estimate are nil. Database failures
-- return nil, message; bad arguments raise at the caller. Every value in a statement is either
-- escaped by the driver (conn:escape) inside quotes or formatted from a checked number: no raw
-- input is ever concatenated into SQL. LuaSQL calls block the calling thread while they run.
local cjson = require "cjson"
local clank = require "clank"

local type, error, tonumber, ipairs, pcall, setmetatable = type, error, tonumber, ipairs, pcall,
  setmetatable
local format, concat = string.format, table.concat
local null, array = clank.null, clank.json.array
local mtype = math.type

local json = cjson.new() -- a private instance: its settings never leak into the app's cjson

local store = {}

-- The largest id accepted from callers: 18 digits always fit a 64-bit integer.
local MAX_ID_DIGITS = 18

--------------------------------------------------------------------------------
-- Dialects: what differs between SQLite and PostgreSQL

local COLUMNS = "id, title, priority, estimate, tags, completed, archived, created_at"

local sqlite = {
  driver = "luasql.sqlite3",
  schema = {
    [[CREATE TABLE IF NOT EXISTS tasks (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      owner TEXT NOT NULL,
      title TEXT NOT NULL,
      priority TEXT,
      estimate REAL,
      tags TEXT NOT NULL,
      completed INTEGER NOT NULL DEFAULT 0,
      archived INTEGER NOT NULL DEFAULT 0,
      created_at INTEGER NOT NULL)]],
    "CREATE INDEX IF NOT EXISTS tasks_owner ON tasks (owner, id)",
  },
}

local postgres = {
  driver = "luasql.postgres",
  schema = {
    [[CREATE TABLE IF NOT EXISTS tasks (
      id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      owner TEXT NOT NULL,
      title TEXT NOT NULL,
      priority TEXT,
      estimate DOUBLE PRECISION,
      tags TEXT NOT NULL,
      completed INTEGER NOT NULL DEFAULT 0,
      archived INTEGER NOT NULL DEFAULT 0,
      created_at BIGINT NOT NULL)]],
    "CREATE INDEX IF NOT EXISTS tasks_owner ON tasks (owner, id)",
  },
}

-- Runs a statement that returns rows and closes its cursor; returns the first row (a list)
-- or false when there is none, or nil, message.
local function first_row(conn, sql)
  local cur, err = conn:execute(sql)
  if not cur then
    return nil, err
  end
  if type(cur) ~= "userdata" then -- a row count: the statement returned no rows
    return false
  end
  local row = { cur:fetch() }
  cur:close()
  return row[1] ~= nil and row or false
end

local function exec(conn, sql)
  local res, err = conn:execute(sql)
  if not res then
    return nil, err
  end
  if type(res) == "userdata" then
    res:close()
    return 0
  end
  return res
end

function sqlite.connect(target)
  local driver = require(sqlite.driver)
  local env = driver.sqlite3()
  local conn, err = env:connect(target)
  if not conn then
    env:close()
    return nil, err
  end
  -- The busy timeout first: switching to WAL needs the lock too.
  for _, sql in ipairs({ "PRAGMA busy_timeout = 5000", "PRAGMA journal_mode = WAL" }) do
    local ok, perr = exec(conn, sql)
    if not ok then
      conn:close()
      env:close()
      return nil, perr
    end
  end
  return env, conn
end

function postgres.connect(target)
  local driver = require(postgres.driver)
  local env = driver.postgres()
  -- LuaSQL hands the source name to PQsetdbLogin as dbName, and libpq takes a dbName that is
  -- a connection URI (or holds an '=') as a whole connection string: so the URL's user,
  -- password, host, port, database and parameters (host=/socket/dir, sslmode, ...) all apply,
  -- percent-decoded by libpq itself.
  local conn, err = env:connect(target)
  if not conn then
    env:close()
    return nil, err
  end
  local ok, serr = exec(conn, "SET client_encoding TO 'UTF8'")
  if not ok then
    conn:close()
    env:close()
    return nil, serr
  end
  return env, conn
end

-- Creates the table if it is missing. Concurrent CREATE TABLE IF NOT EXISTS can fail on
-- PostgreSQL (two sessions insert the same catalog row), so it runs under an advisory lock.
function sqlite.migrate(conn)
  for _, sql in ipairs(sqlite.schema) do
    local ok, err = exec(conn, sql)
    if not ok then
      return nil, err
    end
  end
  return true
end

function postgres.migrate(conn)
  local ok, err = exec(conn, "BEGIN")
  if not ok then
    return nil, err
  end
  local steps = { "SELECT pg_advisory_xact_lock(7424889)" }
  for _, sql in ipairs(postgres.schema) do
    steps[#steps + 1] = sql
  end
  for _, sql in ipairs(steps) do
    ok, err = exec(conn, sql)
    if not ok then
      exec(conn, "ROLLBACK")
      return nil, err
    end
  end
  return exec(conn, "COMMIT")
end

function sqlite.insert(conn, sql)
  local ok, err = exec(conn, sql)
  if not ok then
    return nil, err
  end
  return conn:getlastautoid()
end

-- LuaSQL's SQLite driver steps a statement again when its cursor is first fetched, so
-- INSERT ... RETURNING would insert twice there; PostgreSQL runs it once.
function postgres.insert(conn, sql)
  local row, err = first_row(conn, sql .. " RETURNING id")
  if not row then
    return nil, err or "insert returned no id"
  end
  return row[1]
end

--------------------------------------------------------------------------------
-- Values

local function is_postgres_url(target)
  return target:find("^postgres://") ~= nil or target:find("^postgresql://") ~= nil
end
store.is_postgres_url = is_postgres_url

local Store = {}
Store.__index = Store
Store.__name = "tasks.Store"

-- A quoted SQL string literal; NUL cannot be stored (SQLite's escape would cut the text
-- there, PostgreSQL refuses it), so it is refused here.
local function quote(self, s)
  if s:find("\0", 1, true) then
    error("store: text must not contain NUL bytes", 3)
  end
  return "'" .. self.conn:escape(s) .. "'"
end

local function sql_number(n)
  if mtype(n) == "integer" then
    return format("%d", n)
  end
  if n ~= n or n == math.huge or n == -math.huge then
    error("store: estimate must be a finite number", 3)
  end
  return format("%.17g", n)
end

-- An id from a caller as an integer literal, or nil when it cannot name a row.
local function row_id(id)
  if type(id) ~= "string" then
    error("store: id must be a string, got " .. type(id), 3)
  end
  if not id:find("^%d+$") or #id > MAX_ID_DIGITS then
    return nil
  end
  return format("%d", tonumber(id))
end

local function check_owner(owner)
  if type(owner) ~= "string" or owner == "" then
    error("store: owner must be a non-empty string", 3)
  end
end

local function flag(v) -- 0/1 from SQLite (numbers) or PostgreSQL (strings)
  return tonumber(v) == 1
end

local function decode_tags(text)
  local ok, tags = pcall(json.decode, text)
  if not ok or type(tags) ~= "table" then
    return {}
  end
  return tags
end

local function encode_tags(tags)
  if #tags == 0 then
    return "[]" -- cjson writes an empty table as {}
  end
  local list = {}
  for i, tag in ipairs(tags) do
    if type(tag) ~= "string" then
      error("store: tags must be strings", 3)
    end
    list[i] = tag
  end
  return json.encode(list)
end

local function to_task(row)
  return {
    id = format("%d", tonumber(row[1])),
    title = row[2],
    priority = row[3],
    estimate = row[4] ~= nil and tonumber(row[4]) or nil,
    tags = decode_tags(row[5]),
    completed = flag(row[6]),
    archived = flag(row[7]),
    created = tonumber(row[8]),
  }
end

--------------------------------------------------------------------------------
-- The store

-- store.open(target): target is a file path (SQLite) or a postgres:// or postgresql:// URL.
-- Opens the connection and creates the table when it is missing. Returns the store, or nil,
-- message.
function store.open(target)
  if type(target) ~= "string" or target == "" then
    error("store.open: expected a file path or a postgresql:// URL", 2)
  end
  local dialect = is_postgres_url(target) and postgres or sqlite
  local env, conn = dialect.connect(target)
  if not env then
    return nil, conn
  end
  local ok, err = dialect.migrate(conn)
  if not ok then
    conn:close()
    env:close()
    return nil, err
  end
  return setmetatable({
    env = env,
    conn = conn,
    dialect = dialect,
    kind = dialect == postgres and "postgresql" or "sqlite",
  }, Store)
end

-- Inserts a task for `owner`; fields = { title, priority?, estimate?, tags? }. Returns the
-- new task, or nil, message.
function Store:create(owner, fields)
  check_owner(owner)
  if type(fields) ~= "table" or type(fields.title) ~= "string" then
    error("store:create: fields.title must be a string", 2)
  end
  local priority = fields.priority
  if priority ~= nil and type(priority) ~= "string" then
    error("store:create: fields.priority must be a string or nil", 2)
  end
  local estimate = fields.estimate
  if estimate ~= nil and type(estimate) ~= "number" then
    error("store:create: fields.estimate must be a number or nil", 2)
  end
  local tags = fields.tags or {}
  if type(tags) ~= "table" then
    error("store:create: fields.tags must be a list of strings", 2)
  end
  local now = os.time()
  local sql = "INSERT INTO tasks (owner, title, priority, estimate, tags, created_at) VALUES ("
    .. concat({
      quote(self, owner),
      quote(self, fields.title),
      priority and quote(self, priority) or "NULL",
      estimate and sql_number(estimate) or "NULL",
      quote(self, encode_tags(tags)),
      format("%d", now),
    }, ", ") .. ")"
  local id, err = self.dialect.insert(self.conn, sql)
  if not id then
    return nil, err
  end
  return to_task({ id, fields.title, priority, estimate, encode_tags(tags), 0, 0, now })
end

-- The owner's tasks in creation order; archived ones only when include_archived.
-- Returns a list, or nil, message.
function Store:list(owner, include_archived)
  check_owner(owner)
  local sql = "SELECT " .. COLUMNS .. " FROM tasks WHERE owner = " .. quote(self, owner)
  if not include_archived then
    sql = sql .. " AND archived = 0"
  end
  local cur, err = self.conn:execute(sql .. " ORDER BY id")
  if not cur then
    return nil, err
  end
  local tasks = {}
  local row = { cur:fetch() }
  while row[1] ~= nil do
    tasks[#tasks + 1] = to_task(row)
    row = { cur:fetch() }
  end
  cur:close()
  return tasks
end

-- The owner's tasks as tasks.list answers them (apps/tasks/store.lua's list_rows, which reads
-- them as the app's Task schema; here that shape is made in Lua and `_shape` is not needed):
-- list's tasks in the shape tasks.list gives them, an absent estimate as null and the tags and
-- the list marked as JSON arrays. Returns that list, or nil, message.
function Store:list_rows(_shape, owner, include_archived)
  local tasks, err = self:list(owner, include_archived)
  if not tasks then
    return nil, err
  end
  local answer = array({})
  for i, t in ipairs(tasks) do
    answer[i] = {
      id = t.id, title = t.title, priority = t.priority,
      estimate = t.estimate == nil and null or t.estimate, tags = array(t.tags),
      completed = t.completed, archived = t.archived, createdAt = t.created,
    }
  end
  return answer
end

-- Sets one column to 1 on the owner's task; true when there was such a task.
local function mark(self, owner, id, column)
  check_owner(owner)
  local n = row_id(id)
  if not n then
    return false
  end
  local count, err = exec(self.conn, "UPDATE tasks SET " .. column .. " = 1 WHERE id = " .. n
    .. " AND owner = " .. quote(self, owner))
  if not count then
    return nil, err
  end
  return tonumber(count) > 0
end

-- Marks the owner's task done. Returns true, false when the owner has no task with that id,
-- or nil, message.
function Store:complete(owner, id)
  return mark(self, owner, id, "completed")
end

-- Moves the owner's task out of the default list. Returns true, false, or nil, message.
function Store:archive(owner, id)
  return mark(self, owner, id, "archived")
end

function Store:close()
  if self.conn then
    self.conn:close()
    self.env:close()
    self.conn, self.env = nil, nil
  end
end

Store.__tostring = function(self)
  return "tasks.Store (" .. self.kind .. ")"
end

return store
