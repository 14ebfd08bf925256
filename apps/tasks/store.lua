-- Storage for the tasks app, through clank.db (SPEC §12): SQLite (a file) or PostgreSQL (a URL).
--
--   local store = require "store"
--   local db = assert(store.open("/path/to/tasks.db"))        -- or "postgresql:///db?host=/sock"
--   local task = db:create("alice", { title = "Ship", priority = "high",
--                                     estimate = 2, tags = { "docs" }, remindAt = ms? })
--   db:list("alice", include_archived)  --> { task, ... } in creation order
--   db:list_rows(Task, "alice", include_archived)  --> the same, read as tasks.list answers them
--   db:complete("alice", task.id)       --> true, or false when alice has no such task
--   db:archive("alice", task.id)        --> true, or false
--   db:remind("alice", task.id, ms)     --> true, or false (no such task, or done or archived)
--   db:archive_done(before)             --> the owners of the tasks it archived
--   db:transaction(function(tx) ... tx:create(...) ... end)  --> what fn returns
--   db:close()
--
-- Every call waits in the calling runtime coroutine (a handler, a view's load or event) and
-- never blocks the loop; a call whose request times out or is aborted is cancelled and raises
-- what clank.db raises (ActionError TIMEOUT, or the abort reason).
--
-- A task is { id (string), title, priority?, estimate?, tags = {...}, completed, archived,
-- created (seconds since the epoch), remindAt?, remindedAt? (milliseconds since the epoch) };
-- absent priority, estimate and reminder times are nil. store.open returns
-- nil, message when the database cannot be opened or its tables made; a failing query raises
-- clank.db's error ({ code = SQLSTATE or SQLite's code, message }); bad arguments raise at the
-- caller. Values are bound as $1..$n parameters, never spliced into SQL.
local clank = require "clank"
local cjson = require "cjson"

local type, error, tonumber, ipairs, pcall, setmetatable, tostring = type, error, tonumber, ipairs,
  pcall, setmetatable, tostring
local format, math_type = string.format, math.type
local null = clank.null
local array = clank.json.array

local json = cjson.new() -- a private instance: its settings never leak into the app's cjson
local json_decode = json.decode
local decode_strict = clank.json.decode

local store = {}

-- The largest id accepted from callers: 18 digits always fit a 64-bit integer.
local MAX_ID_DIGITS = 18

--------------------------------------------------------------------------------
-- The schema: clank.db's migrations, applied once each, in order, under a lock (so workers
-- starting together do not race). The first two are what this store created before it had
-- migrations, so a database made then is taken over as it is. A migration's text is never edited
-- (its checksum is recorded): a change is a new one at the end.
--
-- 3–7 (reminders and the nightly archive): completed_at (seconds, like created_at), remind_at and
-- reminded_at (milliseconds, like the jobs' times). A task completed before completed_at existed
-- counts as completed when the column was added, so the nightly archive takes it 30 days later.

local MIGRATIONS = {
  sqlite = {
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
    "ALTER TABLE tasks ADD COLUMN completed_at INTEGER",
    "UPDATE tasks SET completed_at = CAST(strftime('%s', 'now') AS INTEGER) WHERE completed = 1",
    "ALTER TABLE tasks ADD COLUMN remind_at INTEGER",
    "ALTER TABLE tasks ADD COLUMN reminded_at INTEGER",
    "CREATE INDEX tasks_completed ON tasks (completed_at) WHERE completed = 1 AND archived = 0",
  },
  postgresql = {
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
    "ALTER TABLE tasks ADD COLUMN completed_at BIGINT",
    "UPDATE tasks SET completed_at = CAST(extract(epoch FROM now()) AS BIGINT) WHERE completed = 1",
    "ALTER TABLE tasks ADD COLUMN remind_at BIGINT",
    "ALTER TABLE tasks ADD COLUMN reminded_at BIGINT",
    "CREATE INDEX tasks_completed ON tasks (completed_at) WHERE completed = 1 AND archived = 0",
  },
}

-- The statements: the same text on both databases.
local COLUMNS = "id, title, priority, estimate, tags, completed, archived, created_at, remind_at, reminded_at"
local OUTPUT_COLUMNS = "id, title, priority, estimate, tags, completed, archived,"
  .. ' created_at AS "createdAt", remind_at AS "remindAt", reminded_at AS "remindedAt"'
local SQL = {
  insert = "INSERT INTO tasks (owner, title, priority, estimate, tags, created_at, remind_at)"
    .. " VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
  list = "SELECT " .. COLUMNS .. " FROM tasks WHERE owner = $1 AND archived = 0 ORDER BY id",
  list_all = "SELECT " .. COLUMNS .. " FROM tasks WHERE owner = $1 ORDER BY id",
  -- Store:list_rows's: the times under the answer's names. The id stays an integer: the Task
  -- schema's s.string() reads it as its digits, what list's format("%d") makes, without a
  -- cast in the database.
  list_rows = "SELECT " .. OUTPUT_COLUMNS .. " FROM tasks WHERE owner = $1 AND archived = 0"
    .. " ORDER BY tasks.id",
  list_all_rows = "SELECT " .. OUTPUT_COLUMNS .. " FROM tasks WHERE owner = $1 ORDER BY tasks.id",
  -- completing again keeps the first completion's time
  complete = "UPDATE tasks SET completed = 1, completed_at = COALESCE(completed_at, $3)"
    .. " WHERE id = $1 AND owner = $2",
  archive = "UPDATE tasks SET archived = 1 WHERE id = $1 AND owner = $2",
  remind = "UPDATE tasks SET reminded_at = $3 WHERE id = $1 AND owner = $2 AND completed = 0"
    .. " AND archived = 0",
  archive_done = "UPDATE tasks SET archived = 1 WHERE completed = 1 AND archived = 0"
    .. " AND completed_at < $1 RETURNING owner",
}

--------------------------------------------------------------------------------
-- Values

local function is_postgres_url(target)
  return target:find("^postgres://") ~= nil or target:find("^postgresql://") ~= nil
end
store.is_postgres_url = is_postgres_url

local Store = {}
Store.__index = Store
Store.__name = "tasks.Store"

-- NUL cannot be stored as text (PostgreSQL refuses it; clank.db would bind it as a blob), so
-- it is refused here, on both databases alike.
local function text(s)
  if s:find("\0", 1, true) then
    error("store: text must not contain NUL bytes", 3)
  end
  return s
end

-- An id from a caller as an integer, or nil when it cannot name a row.
local function row_id(id)
  if type(id) ~= "string" then
    error("store: id must be a string, got " .. type(id), 3)
  end
  if not id:find("^%d+$") or #id > MAX_ID_DIGITS then
    return nil
  end
  return tonumber(id)
end

local function check_owner(owner)
  if type(owner) ~= "string" or owner == "" then
    error("store: owner must be a non-empty string", 3)
  end
end

-- The tags stored as text s, as cjson decodes them, marked as an array: a table (an array,
-- unless someone stored an object), or {} when s is not JSON or not an array or object. A task
-- without tags is stored as "[]": that one is answered without a decoder. A non-empty array of
-- strings (what this store writes) is decoded by clank.json, for about half of cjson's cost (no
-- pcall, no buffer allocated per call): it takes less than cjson does, and gives the same
-- strings where both take a text. Any other text is cjson's (whose null, numbers and nesting
-- are not clank.json's). (A decoder in Lua, a string.match per tag, costs twice what cjson does.)
local function decode_tags(s)
  if s == "[]" then
    return array({})
  end
  local tags = decode_strict(s)
  if type(tags) == "table" and tags[1] ~= nil then -- an array: an object's keys are strings
    local n = #tags
    while n > 0 and type(tags[n]) == "string" do
      n = n - 1
    end
    if n == 0 then
      return tags -- marked as an array
    end
  end
  local ok
  ok, tags = pcall(json_decode, s)
  if not ok or type(tags) ~= "table" then
    return array({})
  end
  return array(tags)
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
    list[i] = text(tag)
  end
  return json.encode(list)
end

local function present(v)
  if v == null then
    return nil
  end
  return v
end

local function to_task(row)
  local estimate = present(row.estimate)
  return {
    id = format("%d", row.id),
    title = row.title,
    priority = present(row.priority),
    estimate = estimate ~= nil and tonumber(estimate) or nil,
    tags = decode_tags(row.tags),
    completed = row.completed == 1,
    archived = row.archived == 1,
    created = row.created_at,
    remindAt = present(row.remind_at),
    remindedAt = present(row.reminded_at),
  }
end

-- The message of an error from clank.db (a table with .message), or of anything else.
local function message_of(err)
  if type(err) == "table" and type(err.message) == "string" then
    return err.message
  end
  return tostring(err)
end

--------------------------------------------------------------------------------
-- The store

-- store.open(target, opts): target is a file path (SQLite) or a postgres:// or postgresql://
-- URL; opts go to clank.db.open ({ pool, timeout }). Applies the migrations (the first use of
-- the database: this waits). Returns the store, or nil, message when the target is not valid or
-- the database cannot be reached or migrated. A timeout or abort of the calling request raises.
function store.open(target, opts)
  if type(target) ~= "string" or target == "" then
    error("store.open: expected a file path or a postgresql:// URL", 2)
  end
  local kind = is_postgres_url(target) and "postgresql" or "sqlite"
  local ok, db = pcall(clank.db.open, target, opts)
  if not ok then
    return nil, message_of(db)
  end
  local migrated, err = pcall(db.migrate, db, MIGRATIONS[kind])
  if not migrated then
    db:close()
    -- the caller's own timeout or abort (an ActionError) is not the database's failure
    if not clank.db.isError(err) then
      error(err, 0)
    end
    return nil, message_of(err)
  end
  return setmetatable({ db = db, kind = kind }, Store)
end

-- Inserts a task for `owner`; fields = { title, priority?, estimate?, tags? }. Returns the
-- new task.
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
  if estimate ~= nil and (estimate ~= estimate or estimate == math.huge or estimate == -math.huge) then
    error("store: estimate must be a finite number", 2)
  end
  local tags = fields.tags or {}
  if type(tags) ~= "table" then
    error("store:create: fields.tags must be a list of strings", 2)
  end
  local remind_at = fields.remindAt
  if remind_at ~= nil and math_type(remind_at) ~= "integer" then
    error("store:create: fields.remindAt must be an integer (milliseconds since the epoch) or nil", 2)
  end
  local title = text(fields.title)
  if priority ~= nil then
    text(priority)
  end
  text(owner)
  local tags_json = encode_tags(tags)
  local now = os.time()
  local row = self.db:one(SQL.insert, owner, title, priority == nil and null or priority,
    estimate == nil and null or estimate, tags_json, now, remind_at == nil and null or remind_at)
  return to_task({
    id = row.id, title = title, priority = priority, estimate = estimate, tags = tags_json,
    completed = 0, archived = 0, created_at = now, remind_at = remind_at,
  })
end

-- The owner's tasks in creation order; archived ones only when include_archived.
function Store:list(owner, include_archived)
  check_owner(owner)
  local rows = self.db:query(include_archived and SQL.list_all or SQL.list, text(owner))
  local tasks = {}
  for i, row in ipairs(rows) do
    tasks[i] = to_task(row)
  end
  return tasks
end

-- The owner's tasks as app.lua's tasks.list answers them, each read as `shape` (its Task
-- schema) reads a row (clank.db's queryAs): a list the action's answer writes straight from the
-- database's result. The columns carry the answer's names; the database gives the rest of the
-- shape: NULL leaves priority, remindAt and remindedAt out and makes estimate null, 0 and 1 are
-- completed's and archived's false and true, and the tags' text is decoded as JSON. A row this
-- store did not write, whose tags are not a JSON array of strings, makes the answer fail (the
-- log names the row and field) where list, for pages, reads such tags as cjson does.
function Store:list_rows(shape, owner, include_archived)
  check_owner(owner)
  local sql = include_archived and SQL.list_all_rows or SQL.list_rows
  return self.db:queryAs(shape, sql, text(owner))
end

-- Runs statement ($1 the id, $2 the owner, $3 `value`) on the owner's task; true when it
-- changed a row.
local function mark(self, owner, id, statement, value)
  check_owner(owner)
  local n = row_id(id)
  if not n then
    return false
  end
  if value == nil then
    return self.db:exec(statement, n, text(owner)).changes > 0
  end
  return self.db:exec(statement, n, text(owner), value).changes > 0
end

-- Marks the owner's task done, at os.time() the first time. Returns true, or false when the
-- owner has no task with that id.
function Store:complete(owner, id)
  return mark(self, owner, id, SQL.complete, os.time())
end

-- Moves the owner's task out of the default list. Returns true, or false.
function Store:archive(owner, id)
  return mark(self, owner, id, SQL.archive)
end

-- Records that the owner's task's reminder fired at `at` (milliseconds since the epoch). Returns
-- true, or false when there is no such task or it is done or archived (then nothing changes).
function Store:remind(owner, id, at)
  if math_type(at) ~= "integer" then
    error("store:remind: at must be an integer (milliseconds since the epoch)", 2)
  end
  return mark(self, owner, id, SQL.remind, at)
end

-- Archives every task, whoever's, completed before `before` (seconds since the epoch). Returns
-- the owners of the tasks it archived, each once, in no particular order.
function Store:archive_done(before)
  if math_type(before) ~= "integer" then
    error("store:archive_done: before must be an integer (seconds since the epoch)", 2)
  end
  local owners, seen = {}, {}
  for _, row in ipairs(self.db:query(SQL.archive_done, before)) do
    if not seen[row.owner] then
      seen[row.owner] = true
      owners[#owners + 1] = row.owner
    end
  end
  return owners
end

-- fn(tx) with tx a store whose every call runs in one transaction of the database: committed
-- when fn returns (its results returned), rolled back when it raises (the error raised again).
-- What else runs on the same database inside fn joins that transaction (clank.db by target): a
-- job enqueued there (issue 32) exists exactly when the transaction's writes do. Calls on this
-- store (self) inside fn would take a second connection: on SQLite they would wait for the
-- transaction's write lock, so fn uses tx only.
function Store:transaction(fn)
  if type(fn) ~= "function" then
    error("store:transaction: expected a function", 2)
  end
  if self.tx then
    error("store:transaction: already in a transaction", 2)
  end
  return self.db:transaction(function(tx)
    return fn(setmetatable({ db = tx, kind = self.kind, tx = true }, Store))
  end)
end

-- Lets go of the database (clank.db keeps the pool while another store or generation uses it);
-- a transaction's store leaves that to its transaction.
function Store:close()
  if self.db and not self.tx then
    self.db:close()
  end
  self.db = nil
end

Store.__tostring = function(self)
  return "tasks.Store (" .. self.kind .. (self.tx and ", in a transaction" or "") .. ")"
end

return store
