-- What the clank.auth specs share: a fresh database per test (an SQLite file in a temp folder,
-- or, when CLANK_TEST_POSTGRES_URL is set, a PostgreSQL schema of its own), a task to run in,
-- request tables made the way the runtime makes them (request.lua's methods), a clock the test
-- moves, and cheap password parameters.
local clank = require "clank"
local reqlib = require "clank.request"
local storage = require "helpers.storage"

local M = {}

-- libsodium's minimum cost: many hashes per spec, each a fraction of a millisecond.
M.CHEAP = { opslimit = 1, memlimit = 8192 }
M.START = 1700000000000 -- the clock's first reading (ms)

-- Runs fn() in a runtime task (an action's handler) and returns what it returns; what it
-- raises (a failed assertion too) is raised again here, as it is.
local runner = clank.defineAction {
  name = "spec.run", description = "Runs a function in a runtime task.",
  input = clank.schema.object {}, sideEffects = "read",
  handler = function(_, ctx)
    ctx.result = table.pack(pcall(ctx.fn))
    return {}
  end,
}
function M.run(fn)
  local ctx = { fn = fn }
  runner({}, ctx)
  local r = ctx.result
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

-- it_runs(name, fn): a test whose body runs in a task.
function M.it_runs(name, fn)
  require("busted").it(name, function() M.run(fn) end)
end

-- In a task: waits (up to 5 s) until check() is true.
function M.eventually(check)
  for _ = 1, 1000 do
    if check() then return end
    clank.sleep(5)
  end
  error("gave up waiting", 2)
end

-- request { method, path, headers, body, query, scheme, remoteAddress, json = value,
-- form = fields, cookie = value }: a request table with request.lua's methods. json and form
-- encode a body and set its content-type (a form field whose value is a list is sent once per
-- value, as checkboxes of one name are); cookie sets a clank_session cookie.
function M.request(r)
  local headers = {}
  for k, v in pairs(r.headers or {}) do headers[k:lower()] = v end
  local body = r.body
  if r.json ~= nil then
    body = clank.json.encode(r.json)
    headers["content-type"] = headers["content-type"] or "application/json"
  elseif r.form ~= nil then
    local parts = {}
    local function escape(s)
      return (tostring(s):gsub("[^%w%-._~]", function(c) return ("%%%02X"):format(c:byte()) end))
    end
    for k, v in pairs(r.form) do
      for _, one in ipairs(type(v) == "table" and v or { v }) do
        parts[#parts + 1] = escape(k) .. "=" .. escape(one)
      end
    end
    table.sort(parts)
    body = table.concat(parts, "&")
    headers["content-type"] = headers["content-type"] or "application/x-www-form-urlencoded"
  end
  if r.cookie then headers.cookie = "clank_session=" .. r.cookie end
  return setmetatable({
    method = r.method or "GET", path = r.path or "/", headers = headers, body = body or "",
    query = r.query or {}, scheme = r.scheme or "http", remoteAddress = r.remoteAddress,
  }, { __index = reqlib.index })
end

-- The clank_session value an answer's set-cookie line sets ("" when it clears it), or nil.
function M.cookieOf(answer)
  local line = answer.headers and answer.headers["set-cookie"]
  return line and line:match("^clank_session=([^;]*)")
end

-- The backends the specs run on: { name, pending?, fresh() → db, cleanup }.
local dir = os.tmpname()
os.remove(dir)
local serial = 0
local pg_url = storage.postgres_url

M.backends = {
  {
    name = "SQLite",
    fresh = function()
      os.execute("mkdir -p " .. dir)
      serial = serial + 1
      local path = ("%s/auth%d.db"):format(dir, serial)
      local db = clank.db.open(path)
      return db, function()
        db:close()
        storage.remove_db(path)
      end
    end,
  },
  {
    name = "PostgreSQL",
    pending = not pg_url and "CLANK_TEST_POSTGRES_URL is not set (./dev test starts a " ..
      "throwaway cluster and sets it)",
    -- a schema of its own per database: the specs run side by side on one cluster
    fresh = function()
      serial = serial + 1
      local schema = ("auth_%d_%d_%d"):format(os.time(), math.random(1, 1e9), serial)
      local admin = clank.db.open(pg_url)
      M.run(function() admin:exec("CREATE SCHEMA " .. schema) end)
      local db = clank.db.open(pg_url .. "&options=-csearch_path%3D" .. schema)
      return db, function()
        db:close()
        M.run(function() admin:exec("DROP SCHEMA " .. schema .. " CASCADE") end)
        admin:close()
      end
    end,
  },
}

function M.removeAll() os.execute("rm -rf " .. dir) end

-- each_backend(fn): describe(backend name, fn(fresh)) for each backend, pending without one.
function M.each_backend(fn)
  local busted = require "busted" -- the running busted's API
  for _, backend in ipairs(M.backends) do
    busted.describe("on " .. backend.name, function()
      if backend.pending then
        busted.it("needs its database", function() busted.pending(backend.pending) end)
        return
      end
      fn(backend.fresh)
    end)
  end
end

-- A clock the test moves: clock() reads it, clock.advance(ms) moves it.
function M.clock()
  local now = M.START
  return setmetatable({ advance = function(ms) now = now + ms end, set = function(t) now = t end },
    { __call = function() return now end })
end

return M
