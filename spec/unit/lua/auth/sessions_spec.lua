-- auth:authenticate and the credentials it reads: session cookies (forged, expired, ended)
-- and API tokens (created, listed, used with their scope, revoked). On SQLite, and on
-- PostgreSQL when CLANK_TEST_POSTGRES_URL is set.
local clank = require "clank"
local core = require "clank.core"
local token = require "clank.live.token"
local auth = require "clank.auth"
local H = require "helpers.auth"

local json = clank.json
local it_runs, request = H.it_runs, H.request

local P = "/__clank/auth/"
local PASSWORD = "correct horse battery"
local MINUTE, HOUR = 60000, 3600000

local function hex(s) return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end

teardown(H.removeAll)

describe("clank.auth authenticate", function()
  H.each_backend(function(fresh)
    local db, cleanup, clock, a
    local function make(opts)
      opts = opts or {}
      opts.db, opts.clock, opts.passwordParams = db, clock, H.CHEAP
      return auth(opts)
    end
    before_each(function()
      db, cleanup = fresh()
      clock = H.clock()
      a = make()
    end)
    after_each(function() cleanup() end)

    local function post(path, r)
      r.method, r.path = "POST", P .. path
      return a:handle(request(r))
    end

    -- Signs email in (registering it the first time) → the session cookie's value.
    local function sign_in(email)
      local r = post("login", { json = { email = email, password = PASSWORD } })
      if r.status == 401 then r = post("register", { json = { email = email, password = PASSWORD } }) end
      return assert(H.cookieOf(r), r.body)
    end

    local function by_cookie(cookie) return a:authenticate(request { cookie = cookie }) end
    local function by_header(value) return a:authenticate(request { headers = { authorization = value } }) end

    describe("a session cookie", function()
      it_runs("gives the user and the session's hash", function()
        local cookie = sign_in("ada@example.com")
        local user, credential = by_cookie(cookie)
        assert.are.same({ id = 1, email = "ada@example.com", roles = {}, epoch = 0 }, user)
        assert.is_true(json.isArray(user.roles))
        assert.are.equal("[]", json.encode(user.roles))
        assert.are.same({ kind = "session", hash = hex(core.sha256(cookie)) }, credential)
      end)

      it_runs("is looked up once per request", function()
        local cookie = sign_in("ada@example.com")
        local r = request { cookie = cookie }
        local one = spy.on(db, "one")
        local u1 = a:authenticate(r)
        local u2 = a:authenticate(r)
        local nobody = request {}
        a:authenticate(nobody)
        a:authenticate(nobody)
        db.one:revert()
        assert.are.equal(u1, u2)
        assert.spy(one).was.called(1)
      end)

      it_runs("is nobody when forged, malformed or unknown", function()
        local cookie = sign_in("ada@example.com")
        local last = cookie:sub(-1) == "A" and "Q" or "A"
        local cases = {
          token.encode64(core.randomBytes(32)), -- well-formed, never issued
          cookie:sub(1, -2) .. last, -- one character changed
          cookie .. "A", cookie:sub(1, 42), "", "abc", ("A"):rep(43), "clank_" .. cookie,
          "'; DELETE FROM clank_sessions; --",
        }
        for _, value in ipairs(cases) do
          assert.is_nil(by_cookie(value), value)
        end
        assert.is_table(by_cookie(cookie))
      end)

      it_runs("ends after sessionIdle without a request, and stays ended", function()
        a = make { sessionIdle = HOUR }
        local ended = {}
        a.onEnded[1] = function(hashes, user_id) ended[#ended + 1] = { hashes, user_id } end
        local cookie = sign_in("ada@example.com")
        clock.advance(HOUR)
        assert.is_table(by_cookie(cookie)) -- an hour exactly: still in
        clock.advance(HOUR + 1)
        assert.is_nil(by_cookie(cookie))
        assert.are.same({ { { hex(core.sha256(cookie)) }, 1 } }, ended)
        assert.is_nil(db:one("SELECT hash FROM clank_sessions"))
        clock.set(H.START)
        assert.is_nil(by_cookie(cookie))
      end)

      it_runs("stays alive while used, writing last_seen at most once a minute", function()
        a = make { sessionIdle = 10 * MINUTE }
        local cookie = sign_in("ada@example.com")
        local function last_seen() return db:one("SELECT last_seen FROM clank_sessions").last_seen end
        clock.advance(30000)
        assert.is_table(by_cookie(cookie))
        assert.are.equal(H.START, last_seen())
        clock.advance(30000)
        assert.is_table(by_cookie(cookie))
        assert.are.equal(H.START + MINUTE, last_seen())
        clock.advance(9 * MINUTE + 30000) -- 10.5 minutes after sign-in, 9.5 after last_seen
        assert.is_table(by_cookie(cookie))
        assert.are.equal(H.START + 10 * MINUTE + 30000, last_seen())
      end)

      it_runs("ends after sessionLifetime however much it is used", function()
        a = make { sessionIdle = 24 * HOUR, sessionLifetime = HOUR }
        local cookie = sign_in("ada@example.com")
        for _ = 1, 4 do
          clock.advance(15 * MINUTE)
          assert.is_table(by_cookie(cookie))
        end
        clock.advance(1)
        assert.is_nil(by_cookie(cookie))
      end)

      it_runs("ends at sign-out, and no other session with it", function()
        local ended = {}
        a.onEnded[1] = function(hashes, user_id) ended[#ended + 1] = { hashes, user_id } end
        local one, two = sign_in("ada@example.com"), sign_in("ada@example.com")
        post("logout", { cookie = one, json = {} })
        assert.is_nil(by_cookie(one))
        assert.is_table(by_cookie(two))
        assert.are.same({ { { hex(core.sha256(one)) }, 1 } }, ended)
      end)
    end)

    describe("endSessions", function()
      it_runs("ends all but one, keeping the epoch; then all, bumping it", function()
        local ended = {}
        a.onEnded[1] = function(hashes, user_id) ended[#ended + 1] = { hashes, user_id } end
        local keep, other = sign_in("ada@example.com"), sign_in("ada@example.com")
        local bob = sign_in("bob@example.com")
        local kept = hex(core.sha256(keep))
        assert.are.same({ hex(core.sha256(other)) }, a:endSessions(1, kept))
        assert.is_nil(by_cookie(other))
        local user = by_cookie(keep)
        assert.are.equal(0, user.epoch)
        assert.are.same({ kept }, a:endSessions(1))
        assert.is_nil(a:authenticate(request { cookie = keep }))
        assert.is_table(by_cookie(bob))
        assert.are.same({ { { hex(core.sha256(other)) }, 1 }, { { kept }, 1 } }, ended)
        local again = sign_in("ada@example.com")
        assert.are.equal(1, by_cookie(again).epoch)
        assert.are.same({ hex(core.sha256(bob)) }, a:endSessions(2, "no such hash"))
        assert.is_nil(by_cookie(bob))
      end)

      it_runs("logs what an onEnded function raises and calls the next", function()
        local log = stub(core, "log")
        local called = {}
        a.onEnded[1] = function() error("listener broke") end
        a.onEnded[2] = function(hashes) called[#called + 1] = hashes end
        local cookie = sign_in("ada@example.com")
        local ok, r = pcall(post, "logout", { cookie = cookie, json = {} })
        core.log:revert()
        assert(ok, r)
        assert.are.equal(200, r.status)
        assert.are.same({ { hex(core.sha256(cookie)) } }, called)
        assert.spy(log).was.called(1)
        assert.truthy(log.calls[1].vals[2]:find("onEnded function failed: .*listener broke"))
      end)

      it_runs("raises for a user id that is not an integer", function()
        assert.has_error(function() a:endSessions("1") end, "clank.auth.endSessions: userId must be an integer")
      end)
    end)

    describe("an API token", function()
      local function create(cookie, body)
        return post("tokens", { cookie = cookie, json = body })
      end
      local function list(cookie)
        return a:handle(request { method = "GET", path = P .. "tokens", cookie = cookie })
      end

      it_runs("is shown once when made, and listed without its secret", function()
        local cookie = sign_in("ada@example.com")
        local r = create(cookie, { name = "ci", scope = "write" })
        assert.are.equal(201, r.status)
        assert.are.equal("no-store", r.headers["cache-control"])
        local made = json.decode(r.body)
        assert.is_true(made.ok)
        assert.are.equal(1, made.id)
        assert.truthy(made.token:find("^clank_[%w_-]+$") and #made.token == 49, made.token)
        r = list(cookie)
        assert.are.equal(200, r.status)
        assert.are.equal('{"ok":true,"tokens":[{"createdAt":' .. H.START ..
          ',"id":1,"lastUsed":null,"name":"ci","scope":"write"}]}', r.body)
        assert.is_nil(r.body:find(made.token:sub(7), 1, true))
        assert.is_nil(db:one("SELECT id FROM clank_tokens WHERE hash = $1", made.token))
      end)

      it_runs("signs its requests in with its scope; read is the default", function()
        local cookie = sign_in("ada@example.com")
        local write = json.decode(create(cookie, { name = "deploy", scope = "write" }).body)
        local read = json.decode(create(cookie, { name = "dashboard" }).body)
        local user, credential = by_header("Bearer " .. write.token)
        assert.are.same({ id = 1, email = "ada@example.com", roles = {}, epoch = 0 }, user)
        assert.are.same({ kind = "token", id = write.id, scope = "write" }, credential)
        user, credential = by_header("bearer   " .. read.token .. " ")
        assert.are.equal(1, user.id)
        assert.are.same({ kind = "token", id = read.id, scope = "read" }, credential)
      end)

      it_runs("is read first: a bad authorization header is nobody, the cookie is not looked at", function()
        local cookie = sign_in("ada@example.com")
        for _, value in ipairs { "Bearer nope", "Bearer clank_" .. token.encode64(core.randomBytes(32)),
            "Basic YWRhOnB3", "Bearer", "" } do
          assert.is_nil(a:authenticate(request { cookie = cookie, headers = { authorization = value } }), value)
        end
      end)

      it_runs("is not read from the query string", function()
        local cookie = sign_in("ada@example.com")
        local made = json.decode(create(cookie, { name = "x" }).body)
        assert.is_nil(a:authenticate(request { query = { token = made.token, access_token = made.token,
          authorization = "Bearer " .. made.token } }))
      end)

      it_runs("writes last_used at most once a minute", function()
        local cookie = sign_in("ada@example.com")
        local made = json.decode(create(cookie, { name = "x" }).body)
        local function last_used() return db:one("SELECT last_used FROM clank_tokens").last_used end
        assert.are.equal(clank.null, last_used())
        clock.advance(1000)
        by_header("Bearer " .. made.token)
        assert.are.equal(H.START + 1000, last_used())
        clock.advance(30000)
        by_header("Bearer " .. made.token)
        assert.are.equal(H.START + 1000, last_used())
        clock.advance(30000)
        by_header("Bearer " .. made.token)
        assert.are.equal(H.START + 61000, last_used())
      end)

      it_runs("is revoked by its owner at once; another user's id is 404", function()
        local ada, bob = sign_in("ada@example.com"), sign_in("bob@example.com")
        local made = json.decode(create(ada, { name = "x" }).body)
        local r = a:handle(request { method = "DELETE", path = P .. "tokens/" .. made.id, cookie = bob })
        assert.are.equal(404, r.status)
        assert.are.equal('{"error":{"code":"NOT_FOUND","message":"No such token."},"ok":false}', r.body)
        assert.is_table(by_header("Bearer " .. made.token))
        r = a:handle(request { method = "DELETE", path = P .. "tokens/" .. made.id, cookie = ada })
        assert.are.equal(204, r.status)
        assert.are.equal("", r.body)
        assert.is_nil(by_header("Bearer " .. made.token))
        r = a:handle(request { method = "DELETE", path = P .. "tokens/" .. made.id, cookie = ada })
        assert.are.equal(404, r.status)
        r = a:handle(request { method = "DELETE", path = P .. "tokens/99999999999999999999", cookie = ada })
        assert.are.equal(404, r.status)
      end)

      it_runs("needs a signed-in session: not a token, not nobody", function()
        local cookie = sign_in("ada@example.com")
        local made = json.decode(create(cookie, { name = "x", scope = "write" }).body)
        local unauthorized = '{"error":{"code":"UNAUTHORIZED","message":"Sign in first."},"ok":false}'
        for _, r in ipairs {
          create(nil, { name = "y" }),
          post("tokens", { headers = { authorization = "Bearer " .. made.token }, json = { name = "y" } }),
          list(nil),
          a:handle(request { method = "GET", path = P .. "tokens",
            headers = { authorization = "Bearer " .. made.token } }),
          a:handle(request { method = "DELETE", path = P .. "tokens/1" }),
        } do
          assert.are.equal(401, r.status)
          assert.are.equal(unauthorized, r.body)
        end
      end)

      it_runs("refuses a missing or long name and an unknown scope with 422", function()
        local cookie = sign_in("ada@example.com")
        local cases = {
          { {}, "Give the token a name." },
          { { name = "  " }, "Give the token a name." },
          { { name = ("n"):rep(101) }, "The token's name must be at most 100 characters." },
          { { name = "a\tb" }, "The token's name must be text without control characters." },
          { { name = "x", scope = "admin" }, "The token's scope must be \"read\" or \"write\"." },
        }
        for _, case in ipairs(cases) do
          local r = create(cookie, case[1])
          assert.are.equal(422, r.status)
          assert.are.equal(json.encode { ok = false, error = { code = "INVALID_INPUT", message = case[2] } }, r.body)
        end
        assert.are.equal(201, create(cookie, { name = ("n"):rep(100) }).status)
      end)

      it_runs("keeps SQL metacharacters in a name as data", function()
        local cookie = sign_in("ada@example.com")
        local name = "x'); DELETE FROM clank_tokens; --\"é"
        assert.are.equal(201, create(cookie, { name = name }).status)
        assert.are.equal(name, json.decode(list(cookie).body).tokens[1].name)
      end)
    end)
  end)
end)
