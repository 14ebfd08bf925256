-- Accounts (issue 30) through the real clank-run: the endpoints over HTTP, the cookie's flags, a
-- new session at every sign-in, actions' auth on the bridge (401 before 428, roles), views for
-- signed-in users, request.user in routes, guessing limits shared by --workers 2, a sign-in
-- form posted from another site, a live page closed when its session ends, and
-- `clank-run users add`. Every expected status, code, message and header is written from the
-- issue's text.
local server = require "helpers.server"
local http = require "helpers.http"
local ws = require "helpers.websocket"
local json = require "cjson"

local FAST = { CLANK_PASSWORD_COST = "fast" } -- libsodium's minimum cost: sign-ins stay cheap

local function tmpdir()
  local p = assert(io.popen("mktemp -d /tmp/clank-auth.XXXXXX"))
  local dir = p:read("l")
  p:close()
  return dir
end

local function env(db, extra)
  local e = { ACCOUNTS_DB = db }
  for k, v in pairs(FAST) do e[k] = v end
  for k, v in pairs(extra or {}) do e[k] = v end
  return e
end

-- A JSON request; headers a map; returns status, decoded body (or the raw text), headers.
local function call(port, method, path, body, headers)
  local h = { ["Content-Type"] = "application/json" }
  for k, v in pairs(headers or {}) do h[k] = v end
  local res = assert(http.request(port, method, path, h, body and json.encode(body) or nil))
  local ok, decoded = pcall(json.decode, res.body)
  return res.status, ok and decoded or res.body, res.headers
end

-- The clank_session cookie a response sets ("" when it clears it), and the whole header.
local function session_cookie(headers)
  local header = headers["set-cookie"] or ""
  return header:match("clank_session=([^;]*)"), header
end

local function with_cookie(cookie, extra)
  local h = { Cookie = "clank_session=" .. cookie }
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

local function register(port, email, password)
  local status, body, headers = call(port, "POST", "/__clank/auth/register",
    { email = email, password = password or "correct horse" })
  assert.are.equal(201, status, json.encode(body))
  return (session_cookie(headers)), body.user
end

describe("accounts over HTTP", function()
  local dir = tmpdir()
  local s = server.for_describe(server.fixture("accounts"), { env = env(dir .. "/a.db") })

  teardown(function() os.execute("rm -rf " .. dir) end)

  it("registers, signs in and out, with the cookie's flags", function()
    local status, body, headers = call(s.port, "POST", "/__clank/auth/register",
      { email = "Ann@Example.com", password = "correct horse" })
    assert.are.equal(201, status)
    assert.are.equal("ann@example.com", body.user.email) -- lower-cased
    assert.is_true(body.ok)
    assert.are.same({}, body.user.roles)
    local cookie, header = session_cookie(headers)
    assert.are.equal(43, #cookie) -- 256 bits in base64url
    assert.truthy(header:find("HttpOnly", 1, true))
    assert.truthy(header:find("SameSite=Lax", 1, true))
    assert.truthy(header:find("Path=/", 1, true))
    assert.falsy(header:find("Secure", 1, true)) -- plain http here
    assert.are.equal("no-store", headers["cache-control"])

    status, body = call(s.port, "GET", "/__clank/auth/me", nil, with_cookie(cookie))
    assert.are.equal(200, status)
    assert.are.equal("ann@example.com", body.user.email)

    assert.are.equal(200, (call(s.port, "POST", "/__clank/auth/logout", {}, with_cookie(cookie))))
    status, body = call(s.port, "GET", "/__clank/auth/me", nil, with_cookie(cookie))
    assert.are.equal(401, status)
    assert.are.equal("UNAUTHORIZED", body.error.code)
  end)

  it("gives a new session at every sign-in and drops the one the request came with", function()
    local first = register(s.port, "fix@example.com")
    local status, _, headers = call(s.port, "POST", "/__clank/auth/login",
      { email = "fix@example.com", password = "correct horse" }, with_cookie(first))
    assert.are.equal(200, status)
    local second = session_cookie(headers)
    assert.are_not.equal(first, second)
    assert.are.equal(401, (call(s.port, "GET", "/__clank/auth/me", nil, with_cookie(first))))
    assert.are.equal(200, (call(s.port, "GET", "/__clank/auth/me", nil, with_cookie(second))))
  end)

  it("answers a wrong password and an unknown email alike, and signs no one in", function()
    register(s.port, "known@example.com")
    local s1, b1, h1 = call(s.port, "POST", "/__clank/auth/login",
      { email = "known@example.com", password = "wrong password" })
    local s2, b2, h2 = call(s.port, "POST", "/__clank/auth/login",
      { email = "nobody@example.com", password = "wrong password" })
    assert.are.equal(401, s1)
    assert.are.equal(s1, s2)
    assert.are.same(b1, b2)
    assert.are.same({ ok = false, error = { code = "INVALID_CREDENTIALS", message = "Wrong email or password." } }, b1)
    assert.is_nil(session_cookie(h1))
    assert.is_nil(session_cookie(h2))
  end)

  it("refuses forged cookies, empty and 1,025-byte passwords, and SQL in every field", function()
    for _, forged in ipairs { "x", string.rep("A", 43), "' OR 1=1 --", "" } do
      assert.are.equal(401, (call(s.port, "GET", "/__clank/auth/me", nil, with_cookie(forged))))
    end
    local status, body = call(s.port, "POST", "/__clank/auth/register",
      { email = "empty@example.com", password = "" })
    assert.are.equal(422, status)
    assert.are.equal("INVALID_INPUT", body.error.code)
    status = call(s.port, "POST", "/__clank/auth/register",
      { email = "long@example.com", password = string.rep("p", 1025) })
    assert.are.equal(422, status)
    assert.are.equal(201, (call(s.port, "POST", "/__clank/auth/register",
      { email = "max@example.com", password = string.rep("p", 1024) })))
    status = call(s.port, "POST", "/__clank/auth/register",
      { email = "x'; DROP TABLE clank_users; --@example.com", password = "correct horse" })
    assert.are.equal(422, status) -- not an email
    local cookie = register(s.port, "o'brien@example.com", "pass'; DELETE FROM clank_sessions; --")
    assert.are.equal(200, (call(s.port, "GET", "/__clank/auth/me", nil, with_cookie(cookie))))
    status = call(s.port, "POST", "/__clank/auth/login",
      { email = "o'brien@example.com", password = "pass'; DELETE FROM clank_sessions; --" })
    assert.are.equal(200, status)
  end)

  it("holds actions to their auth: 401 before 428 and the input, roles, public", function()
    local status, body, headers = call(s.port, "POST", "/actions/notes.list", {})
    assert.are.equal(401, status)
    assert.are.same({ ok = false, error = { code = "UNAUTHORIZED", message = "Sign in to call this action." } },
      body)
    assert.are.equal('Bearer realm="accounts"', headers["www-authenticate"])
    -- notes.clear is destructive (confirmation always): not signed in is still 401
    assert.are.equal(401, (call(s.port, "POST", "/actions/notes.clear", {})))
    assert.are.equal(401, (call(s.port, "POST", "/actions/notes.add", { text = 5 })))

    local cookie = register(s.port, "actor@example.com")
    local mine = with_cookie(cookie)
    assert.are.equal(428, (call(s.port, "POST", "/actions/notes.clear", {}, mine)))
    assert.are.equal(422, (call(s.port, "POST", "/actions/notes.add", { text = 5 }, mine)))
    assert.are.equal(200, (call(s.port, "POST", "/actions/notes.add", { text = "hi" }, mine)))
    assert.are.same({ ok = true, output = { notes = { "hi" } } },
      select(2, call(s.port, "POST", "/actions/notes.list", {}, mine)))
    status, body = call(s.port, "POST", "/actions/admin.stats", {}, mine)
    assert.are.equal(403, status)
    assert.are.equal("FORBIDDEN", body.error.code)
    assert.are.same({ ok = true, output = { signedIn = false } },
      select(2, call(s.port, "POST", "/actions/ping", {})))
    assert.are.same({ ok = true, output = { signedIn = true } },
      select(2, call(s.port, "POST", "/actions/ping", {}, mine)))
  end)

  it("keeps each person's data apart", function()
    local ann = with_cookie((register(s.port, "ann2@example.com")))
    local bob = with_cookie((register(s.port, "bob2@example.com")))
    call(s.port, "POST", "/actions/notes.add", { text = "ann's" }, ann)
    local _, body = call(s.port, "POST", "/actions/notes.list", {}, bob)
    assert.are.same({ ok = true, output = { notes = {} } }, body)
  end)

  it("shows each action's auth in the manifest", function()
    local _, manifest = call(s.port, "GET", "/manifest")
    local by = {}
    for _, a in ipairs(manifest.actions) do by[a.name] = a.auth end
    assert.are.same({ ["notes.add"] = "user", ["notes.list"] = "user", ["notes.clear"] = "user",
      ["admin.stats"] = { roles = { "admin" } }, ping = "public" }, by)
  end)

  it("sends a visitor who is not signed in from a user's view to the sign-in page", function()
    local res = assert(http.get(s.port, "/views/notes"))
    assert.are.equal(303, res.status)
    assert.are.equal("/__clank/auth/login?next=%2Fviews%2Fnotes", res.headers.location)
    local cookie = register(s.port, "viewer@example.com")
    res = assert(http.get(s.port, "/views/notes", { Cookie = "clank_session=" .. cookie }))
    assert.are.equal(200, res.status)
    assert.truthy(res.body:find("viewer@example.com", 1, true))
    assert.are.equal(200, assert(http.get(s.port, "/")).status) -- a public view
    res = assert(http.get(s.port, "/__clank/auth/login?next=%2Fviews%2Fnotes"))
    assert.are.equal(200, res.status)
    assert.truthy(res.headers["content-type"]:find("text/html", 1, true))
  end)

  it("gives routes ctx.user and request.user", function()
    local cookie = register(s.port, "router@example.com")
    local _, body = call(s.port, "GET", "/whoami", nil, with_cookie(cookie))
    assert.are.same({ user = "router@example.com", request = "router@example.com" }, body)
    _, body = call(s.port, "GET", "/whoami")
    assert.are.same({ user = json.null, request = json.null }, body)
  end)

  it("refuses a sign-in form posted from another site (the origin rule)", function()
    register(s.port, "csrf@example.com")
    local form = "email=csrf%40example.com&password=correct+horse"
    for _, h in ipairs {
      { Origin = "http://evil.example", ["Content-Type"] = "application/x-www-form-urlencoded" },
      { ["Sec-Fetch-Site"] = "cross-site", ["Content-Type"] = "application/x-www-form-urlencoded" },
    } do
      local res = assert(http.request(s.port, "POST", "/__clank/auth/login", h, form))
      assert.are.equal(403, res.status)
      assert.is_nil(session_cookie(res.headers))
    end
    -- the same form from the app's own page signs in and goes to next
    local res = assert(http.request(s.port, "POST", "/__clank/auth/login", {
      Origin = "http://127.0.0.1:" .. s.port, Host = "127.0.0.1:" .. s.port,
      ["Content-Type"] = "application/x-www-form-urlencoded" }, form .. "&next=%2Fviews%2Fnotes"))
    assert.are.equal(303, res.status)
    assert.are.equal("/views/notes", res.headers.location)
    assert.is_string(session_cookie(res.headers))
  end)

  it("ignores a token in the query string and revokes tokens at once", function()
    local cookie = register(s.port, "tok@example.com")
    local status, body = call(s.port, "POST", "/__clank/auth/tokens", { name = "agent", scope = "read" },
      with_cookie(cookie))
    assert.are.equal(201, status)
    local token = body.token
    assert.are.equal(200, (call(s.port, "POST", "/actions/notes.list", {}, { Authorization = "Bearer " .. token })))
    assert.are.equal(401, (call(s.port, "POST", "/actions/notes.list?access_token=" .. token, {})))
    assert.are.equal(403, (call(s.port, "POST", "/actions/notes.add", { text = "x" },
      { Authorization = "Bearer " .. token })))
    local res = assert(http.request(s.port, "DELETE", ("/__clank/auth/tokens/%d"):format(body.id),
      { Cookie = "clank_session=" .. cookie }))
    assert.are.equal(204, res.status)
    assert.are.equal(401, (call(s.port, "POST", "/actions/notes.list", {}, { Authorization = "Bearer " .. token })))
  end)

  it("closes a live page with 4401 when its session ends", function()
    local cookie = register(s.port, "live@example.com")
    local page = assert(http.get(s.port, "/views/notes", { Cookie = "clank_session=" .. cookie }))
    local id = assert(page.body:match('data%-clank%-session="([^"]+)"'))
    local origin = "http://127.0.0.1:" .. s.port
    local live = assert(ws.connect(s.port, "/__clank/sessions/" .. id .. "/live",
      { Host = "127.0.0.1:" .. s.port, Origin = origin, Cookie = "clank_session=" .. cookie }))
    assert.are.equal("html", assert(live:next_json()).t)
    assert.are.equal(200, (call(s.port, "POST", "/__clank/auth/logout", {}, with_cookie(cookie))))
    assert.are.equal(4401, live:close_code(5))
  end)
end)

describe("accounts across --workers 2", function()
  local dir = tmpdir()
  local s = server.for_describe(server.fixture("accounts"),
    { env = env(dir .. "/w.db"), args = { "--workers", "2" } })

  teardown(function() os.execute("rm -rf " .. dir) end)

  it("limits guessing per account whichever worker answers: the 11th failure is 429", function()
    register(s.port, "target@example.com")
    for i = 1, 10 do
      local status = call(s.port, "POST", "/__clank/auth/login",
        { email = "target@example.com", password = "guess " .. i })
      assert.are.equal(401, status, "attempt " .. i)
    end
    local status, body, headers = call(s.port, "POST", "/__clank/auth/login",
      { email = "target@example.com", password = "correct horse" })
    assert.are.equal(429, status)
    assert.are.equal("RATE_LIMITED", body.error.code)
    local wait = tonumber(headers["retry-after"])
    assert.is_true(wait ~= nil and wait > 0 and wait <= 900, tostring(headers["retry-after"]))
  end)

  it("limits guessing per address across accounts: the 51st failure is 429", function()
    -- this address failed 10 times above (the refused 11th is no failure): 40 more reach 50
    for i = 1, 40 do
      local status = call(s.port, "POST", "/__clank/auth/login",
        { email = "spray" .. i .. "@example.com", password = "guess" })
      assert.are.equal(401, status, "attempt " .. i)
    end
    local status, body = call(s.port, "POST", "/__clank/auth/login",
      { email = "spray41@example.com", password = "guess" })
    assert.are.equal(429, status)
    assert.are.equal("RATE_LIMITED", body.error.code)
  end)
end)

describe("accounts behind a proxy (--public-origin)", function()
  local dir = tmpdir()
  local s = server.for_describe(server.fixture("accounts"),
    { env = env(dir .. "/p.db"), args = { "--public-origin", "https://app.example" } })

  teardown(function() os.execute("rm -rf " .. dir) end)

  it("does not lock everyone out through the proxy's address; the account limit holds", function()
    -- every client of a proxy on this machine comes from 127.0.0.1: no limit per address there
    for i = 1, 55 do
      local status = call(s.port, "POST", "/__clank/auth/login",
        { email = "many" .. i .. "@example.com", password = "guess" }, { Host = "app.example" })
      assert.are.equal(401, status, "attempt " .. i)
    end
    for i = 1, 10 do
      call(s.port, "POST", "/__clank/auth/login", { email = "one@example.com", password = "guess " .. i },
        { Host = "app.example" })
    end
    assert.are.equal(429, (call(s.port, "POST", "/__clank/auth/login",
      { email = "one@example.com", password = "guess" }, { Host = "app.example" })))
  end)
end)

describe("clank-run users add", function()
  local dir = tmpdir()
  teardown(function() os.execute("rm -rf " .. dir) end)

  it("adds an account with roles to an app whose registration is closed", function()
    local db = dir .. "/u.db"
    local app_dir = server.source_dir() .. "/spec/fixtures/apps/accounts"
    local e = env(db, { ACCOUNTS_REGISTRATION = "closed" })
    local code, out, err = server.run({ "users", "add", "root@example.com", "--role", "admin",
      "--app", app_dir }, { env = e, stdin = "correct horse\n" })
    assert.are.equal(0, code, err)
    assert.truthy(out:find("added root@example.com", 1, true), out)
    local _
    code, _, err = server.run({ "users", "add", "root@example.com", "--app", app_dir },
      { env = e, stdin = "correct horse\n" })
    assert.are.equal(1, code)
    assert.truthy(err:find("clank-run users:", 1, true), err)
    code = server.run({ "users", "remove", "x@example.com", "--app", app_dir }, { env = e })
    assert.are.equal(1, code)

    local s = server.start(server.fixture("accounts"), { env = e })
    local status, body = call(s.port, "POST", "/__clank/auth/register",
      { email = "new@example.com", password = "correct horse" })
    assert.are.equal(403, status)
    assert.are.equal("REGISTRATION_CLOSED", body.error.code)
    local _, _, headers = call(s.port, "POST", "/__clank/auth/login",
      { email = "root@example.com", password = "correct horse" })
    local cookie = session_cookie(headers)
    status, body = call(s.port, "POST", "/actions/admin.stats", {}, with_cookie(cookie))
    assert.are.equal(200, status, json.encode(body))
    assert.are.equal(0, s:stop())
  end)
end)
