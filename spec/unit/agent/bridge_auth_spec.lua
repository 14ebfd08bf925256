-- Who may call an action (issue 30) in process: defineAction's auth, the bridge's check once the
-- context is known (401 before 428, roles, a read token's scope), the manifest's auth, and
-- bridge:allows. Expected statuses, codes, messages and headers are written from the issue.
local clank = require "clank"
local json = require "clank.json"
local s = clank.schema

local HOST = "127.0.0.1:8080"

local function post(name, headers, body)
  local h = { host = HOST, ["content-type"] = "application/json" }
  for k, v in pairs(headers or {}) do h[k] = v end
  body = body or "{}"
  h["content-length"] = tostring(#body)
  return { method = "POST", url = "/actions/" .. name, path = "/actions/" .. name, query = {},
           headers = h, body = body, scheme = "http" }
end

local function action(def)
  def.description = def.description or "An action."
  def.input = def.input or s.object {}
  def.handler = def.handler or function(_, ctx) return { who = ctx.user and ctx.user.id or 0 } end
  return clank.defineAction(def)
end

local list = action { name = "notes.list", sideEffects = "read" }
local add = action { name = "notes.add", sideEffects = "write", confirmation = "never" }
local remove = action { name = "notes.remove", sideEffects = "destructive" } -- confirmation: always
local health = action { name = "health", sideEffects = "none", auth = "public" }
local purge = action { name = "admin.purge", sideEffects = "write", confirmation = "never",
  auth = { roles = { "admin", "owner" } } }

local function app_bridge(auth)
  return clank.createAgentBridge({ list, add, remove, health, purge },
    { name = "Notes \"beta\"", auth = auth })
end

local ANN = { user = { id = 7, email = "ann@example.com", roles = json.array {} },
  credential = { kind = "session" } }
local ADMIN = { user = { id = 8, email = "root@example.com", roles = json.array { "owner" } },
  credential = { kind = "session" } }
local READ_TOKEN = { user = ANN.user, credential = { kind = "token", scope = "read" } }
local WRITE_TOKEN = { user = ANN.user, credential = { kind = "token", scope = "write" } }

local function call(bridge, name, context, headers, body)
  local res = bridge:handle(post(name, headers, body), context)
  return res.status, json.decode(res.body), res.headers
end

describe("defineAction's auth", function()
  it("takes public, user and { roles = {...} } and shows what was given", function()
    assert.are.equal("public", health.auth)
    assert.are.same({ "admin", "owner" }, purge.auth.roles)
    assert.is_nil(list.auth)
    assert.are.equal("public", health.manifest.auth)
    assert.is_nil(list.manifest.auth)
  end)

  it("refuses anything else, naming the field", function()
    for _, bad in ipairs { "admin", 1, true, {}, { roles = {} }, { roles = { "" } },
                           { roles = { 1 } }, { role = { "a" } }, { roles = { "a" }, other = 1 } } do
      local ok, err = pcall(action, { name = "x", auth = bad })
      assert.is_false(ok)
      assert.matches("'auth", tostring(err))
    end
  end)
end)

describe("a bridge for an app with accounts", function()
  local bridge = app_bridge(true)

  it("answers 401 UNAUTHORIZED with www-authenticate to a caller not signed in", function()
    local status, body, headers = call(bridge, "notes.list", {})
    assert.are.equal(401, status)
    assert.are.same({ ok = false, error = { code = "UNAUTHORIZED",
      message = "Sign in to call this action." } }, body)
    assert.are.equal('Bearer realm="Notes \\"beta\\""', headers["www-authenticate"])
    assert.are.equal("no-store", headers["cache-control"])
  end)

  it("asks for authentication before confirmation: 401, not 428", function()
    assert.are.equal(401, (call(bridge, "notes.remove", {})))
    assert.are.equal(401, (call(bridge, "notes.remove", function() return { user = false } end)))
  end)

  it("asks a signed-in user for confirmation, then runs", function()
    local status, body = call(bridge, "notes.remove", ANN)
    assert.are.equal(428, status)
    assert.are.equal("CONFIRMATION_REQUIRED", body.error.code)
    status, body = call(bridge, "notes.remove", ANN, { ["x-clank-confirmation"] = "confirmed" })
    assert.are.equal(200, status)
    assert.are.same({ ok = true, output = { who = 7 } }, body)
  end)

  it("checks the user before the input", function()
    assert.are.equal(401, (call(bridge, "notes.add", {}, nil, "[1]")))
  end)

  it("lets anyone call a public action", function()
    assert.are.same({ ok = true, output = { who = 0 } }, select(2, call(bridge, "health", {})))
  end)

  it("needs one of the roles an action names: 403 FORBIDDEN without", function()
    local status, body = call(bridge, "admin.purge", ANN)
    assert.are.equal(403, status)
    assert.are.same({ ok = false, error = { code = "FORBIDDEN", message = "Action is not authorized." } },
      body)
    assert.are.equal(200, (call(bridge, "admin.purge", ADMIN)))
    assert.are.equal(401, (call(bridge, "admin.purge", {})))
  end)

  it("lets a read token call only actions that do not write", function()
    assert.are.equal(200, (call(bridge, "notes.list", READ_TOKEN)))
    local status, body = call(bridge, "notes.add", READ_TOKEN)
    assert.are.equal(403, status)
    assert.are.equal("FORBIDDEN", body.error.code)
    assert.are.equal(200, (call(bridge, "notes.add", WRITE_TOKEN)))
  end)

  it("shows each action's auth in the manifest, \"user\" where the action says nothing", function()
    local by = {}
    for _, m in ipairs(bridge:manifest().actions) do by[m.name] = m.auth end
    assert.are.same({ ["notes.list"] = "user", ["notes.add"] = "user", ["notes.remove"] = "user",
      health = "public", ["admin.purge"] = { roles = { "admin", "owner" } } }, by)
    assert.is_nil(list.manifest.auth) -- the action's own manifest is left as defined
  end)

  it("gives clank.mcp the same check through allows", function()
    assert.are.same({ false, 401, "UNAUTHORIZED", "Sign in to call this action." },
      { bridge:allows(list, {}) })
    assert.is_true(bridge:allows(list, ANN))
    assert.are.same({ false, 403, "FORBIDDEN", "This token may call only actions that do not write." },
      { bridge:allows(add, READ_TOKEN) })
    assert.are.equal(428, select(2, bridge:allows(remove, ANN)))
    assert.is_true(bridge:allows(remove, ANN, true))
  end)
end)

describe("a bridge for an app without accounts", function()
  local bridge = app_bridge(false)

  it("runs actions that say nothing for anyone, and keeps 428 before the body", function()
    assert.are.equal(200, (call(bridge, "notes.list", {})))
    assert.are.equal(428, (call(bridge, "notes.remove", {})))
    local by = {}
    for _, m in ipairs(bridge:manifest().actions) do by[m.name] = m.auth or "none" end
    assert.are.equal("none", by["notes.list"])
    assert.are.equal("public", by.health)
  end)

  it("still holds an action that asks for a user to the app context's user", function()
    assert.are.equal(401, (call(bridge, "admin.purge", {})))
    assert.are.equal(403, (call(bridge, "admin.purge", ANN)))
    assert.are.equal(200, (call(bridge, "admin.purge", ADMIN)))
  end)
end)
