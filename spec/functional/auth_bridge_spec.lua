-- API tokens on the agent bridge (issue 30), against the real clank-run serving the accounts
-- fixture with --workers 2: a token comes in `authorization: Bearer` only (never in the query
-- string), a read token calls only actions that do not write, and a revoked token is refused
-- at once by every worker, on connections that used it a moment before too (each worker looks
-- the token up in the shared database on every request; nothing is kept between requests).
local server = require "helpers.server"
local http = require "helpers.http"
local bridge = require "helpers.bridge"
local storage = require "helpers.storage"
local cjson = require "cjson"

local JSON = { ["content-type"] = "application/json" }
local READ_ONLY = "This token may call only actions that do not write."
local SIGN_IN = "Sign in to call this action."
local WORKERS = 2
local CONNECTIONS = 6 -- kept open, at least one on each worker
local MAX_CONNECTIONS = 64 -- the kernel's spread gets both workers long before this

local function count(set)
  local n = 0
  for _ in pairs(set) do n = n + 1 end
  return n
end

local function with(headers, extra)
  local out = {}
  for k, v in pairs(headers) do out[k] = v end
  for k, v in pairs(extra or {}) do out[k] = v end
  return out
end

local function bearer(token) return with(JSON, { authorization = "Bearer " .. token }) end

-- One request on an open (keep-alive) connection → the response.
local function on(conn, method, path, headers, body)
  assert(conn:send(http.build(method, path, headers, body)))
  return assert(conn:read_response({ method = method }))
end

-- Registers email → its clank_session cookie.
local function sign_up(port, email)
  local res = assert(http.request(port, "POST", "/__clank/auth/register", JSON,
    cjson.encode { email = email, password = "a long password" }))
  assert.are.equal(201, res.status, res.body)
  return assert(res.headers["set-cookie"]:match("^clank_session=([^;]+)"))
end

-- A new API token of the person signed in with cookie → token, id.
local function new_token(port, cookie, name, scope)
  local res = assert(http.request(port, "POST", "/__clank/auth/tokens",
    with(JSON, { cookie = "clank_session=" .. cookie }), cjson.encode { name = name, scope = scope }))
  assert.are.equal(201, res.status, res.body)
  local doc = cjson.decode(res.body)
  return doc.token, math.tointeger(doc.id) -- cjson decodes numbers as floats
end

local function revoke(port, cookie, id)
  local res = assert(http.request(port, "DELETE", "/__clank/auth/tokens/" .. id,
    { cookie = "clank_session=" .. cookie }))
  assert.are.equal(204, res.status, res.body)
end

-- A 401 of the bridge: the failure, and the challenge naming the app.
local function assert_unauthorized(res)
  bridge.assert_failure(res, 401, "UNAUTHORIZED", SIGN_IN)
  assert.are.equal('Bearer realm="accounts"', res.headers["www-authenticate"])
end

describe("clank.auth's API tokens on the bridge (--workers 2)", function()
  local db, remove_db = storage.backends[1].fresh()
  local s = server.for_describe(server.fixture("accounts"), {
    args = { "--workers", tostring(WORKERS) },
    env = { ACCOUNTS_DB = db, CLANK_PASSWORD_COST = "fast" },
  })
  teardown(remove_db)

  local function call(name, headers, body, query)
    return assert(http.request(s.port, "POST", "/actions/" .. name .. (query or ""), headers, body or "{}"))
  end

  -- Ann, with one note
  local cookie
  setup(function()
    cookie = sign_up(s.port, "ann@example.com")
    local writer = new_token(s.port, cookie, "setup", "write")
    bridge.assert_ok(call("notes.add", bearer(writer), '{"text":"first"}'), '{"added":true}')
  end)

  it("lets a read token call an action that reads, and refuses the ones that write (403)", function()
    local bob = sign_up(s.port, "bob@example.com")
    local reader = new_token(s.port, bob, "reader", "read")
    local writer = new_token(s.port, bob, "writer", "write")

    bridge.assert_failure(call("notes.add", bearer(reader), '{"text":"through a reader"}'),
      403, "FORBIDDEN", READ_ONLY)
    -- destructive, and asking for confirmation: the token's scope refuses it first
    bridge.assert_failure(call("notes.clear", bearer(reader)), 403, "FORBIDDEN", READ_ONLY)
    bridge.assert_ok(call("notes.list", bearer(reader)), '{"notes":[]}')

    bridge.assert_ok(call("notes.add", bearer(writer), '{"text":"by bob"}'), '{"added":true}')
    bridge.assert_ok(call("notes.list", bearer(reader)), '{"notes":["by bob"]}')
    -- an action anyone may call does not care about the scope
    bridge.assert_ok(call("ping", bearer(reader)), '{"signedIn":true}')
  end)

  it("ignores a token in the query string (401)", function()
    local reader = new_token(s.port, cookie, "in the address", "read")
    assert_unauthorized(call("notes.list", JSON, nil, "?access_token=" .. reader))
    assert_unauthorized(call("notes.list", JSON, nil, "?token=" .. reader))
    -- nor anything else than a bearer: the header is read alone, so a cookie does not help it
    assert_unauthorized(call("notes.list", with(JSON, { authorization = "Token " .. reader,
      cookie = "clank_session=" .. cookie })))
    -- the same token, where it belongs
    bridge.assert_ok(call("notes.list", bearer(reader)), '{"notes":["first"]}')
  end)

  it("refuses a revoked token at once on every worker", function()
    local token, id = new_token(s.port, cookie, "soon revoked", "read")
    -- connections kept open until both workers hold some (the kernel spreads connections,
    -- not requests), each having used the token
    local conns, pids = {}, {}
    while #conns < MAX_CONNECTIONS and (#conns < CONNECTIONS or count(pids) < WORKERS) do
      local conn = assert(http.connect(s.port))
      local res = on(conn, "GET", "/pid")
      assert.are.equal(200, res.status, res.body)
      pids[res.body] = true
      conns[#conns + 1] = conn
      bridge.assert_ok(on(conn, "POST", "/actions/notes.list", bearer(token), "{}"), '{"notes":["first"]}')
    end
    assert.are.equal(WORKERS, count(pids), "the workers that answered " .. #conns .. " connections")

    revoke(s.port, cookie, id)
    for _, conn in ipairs(conns) do
      assert_unauthorized(on(conn, "POST", "/actions/notes.list", bearer(token), "{}"))
      conn:close()
    end
    for _ = 1, CONNECTIONS do -- and on new connections
      assert_unauthorized(call("notes.list", bearer(token)))
    end
  end)
end)
