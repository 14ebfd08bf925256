-- Changing a password, resetting a forgotten one by a link, and hashes made with old
-- parameters upgraded at sign-in. On SQLite, and on PostgreSQL when CLANK_TEST_POSTGRES_URL
-- is set.
local clank = require "clank"
local core = require "clank.core"
local token = require "clank.live.token"
local password = require "clank.password"
local auth = require "clank.auth"
local H = require "helpers.auth"

local json = clank.json
local it_runs, request = H.it_runs, H.request

local P = "/__clank/auth/"
local PASSWORD, NEW = "correct horse battery", "staple number two"
local HOUR = 3600000

local function hex(s) return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end
local function sorted(list)
  local copy = { table.unpack(list) }
  table.sort(copy)
  return copy
end

local function error_body(code, message)
  return json.encode { ok = false, error = { code = code, message = message } }
end

teardown(H.removeAll)

describe("clank.auth passwords", function()
  H.each_backend(function(fresh)
    local db, cleanup, clock, a, ended, sent
    before_each(function()
      db, cleanup = fresh()
      clock = H.clock()
      sent = {}
      a = auth { db = db, clock = clock, passwordParams = H.CHEAP,
        sendReset = function(user, url) sent[#sent + 1] = { user = user, url = url } end }
      ended = {}
      a.onEnded[1] = function(hashes, user_id) ended[#ended + 1] = { hashes = hashes, user = user_id } end
    end)
    after_each(function() cleanup() end)

    local function post(path, r)
      r.method, r.path = "POST", P .. path
      return a:handle(request(r))
    end
    local function get(path, r)
      r = r or {}
      r.method, r.path = "GET", P .. path
      return a:handle(request(r))
    end
    local function login(email, pw)
      return post("login", { json = { email = email, password = pw } })
    end
    local function me(cookie) return get("me", { cookie = cookie }).status end

    describe("a change", function()
      it_runs("ends every other session and keeps this browser in with a new cookie", function()
        local this = H.cookieOf(post("register", { json = { email = "ada@example.com", password = PASSWORD } }))
        local phone = H.cookieOf(login("ada@example.com", PASSWORD))
        local laptop = H.cookieOf(login("ada@example.com", PASSWORD))
        local bob = H.cookieOf(post("register", { json = { email = "bob@example.com", password = PASSWORD } }))
        clock.advance(5000)
        local r = post("password", { cookie = this, json = { current = PASSWORD, password = NEW } })
        assert.are.equal(200, r.status)
        assert.are.equal('{"ok":true,"user":{"email":"ada@example.com","id":1,"roles":[]}}', r.body)
        local fresh_cookie = H.cookieOf(r)
        assert.truthy(fresh_cookie and fresh_cookie ~= this)
        assert.are.equal(200, me(fresh_cookie))
        assert.are.equal(1, a:authenticate(request { cookie = fresh_cookie }).epoch)
        for _, old in ipairs { this, phone, laptop } do assert.are.equal(401, me(old)) end
        assert.are.equal(200, me(bob))
        assert.are.equal(1, #ended)
        assert.are.equal(1, ended[1].user)
        assert.are.same(sorted { hex(core.sha256(this)), hex(core.sha256(phone)), hex(core.sha256(laptop)) },
          sorted(ended[1].hashes))
        assert.are.equal(401, login("ada@example.com", PASSWORD).status)
        assert.are.equal(200, login("ada@example.com", NEW).status)
      end)

      it_runs("answers a form with 303 to next and the new cookie", function()
        local this = H.cookieOf(post("register", { json = { email = "ada@example.com", password = PASSWORD } }))
        local r = post("password", { cookie = this, form = { current = PASSWORD, password = NEW, next = "/settings" } })
        assert.are.equal(303, r.status)
        assert.are.equal("/settings", r.headers.location)
        assert.are.equal(200, me(H.cookieOf(r)))
      end)

      it_runs("refuses a wrong current password with 401, changing nothing", function()
        local this = H.cookieOf(post("register", { json = { email = "ada@example.com", password = PASSWORD } }))
        local r = post("password", { cookie = this, json = { current = "not it", password = NEW } })
        assert.are.equal(401, r.status)
        assert.are.equal(error_body("INVALID_CREDENTIALS", "Wrong password."), r.body)
        assert.is_nil(r.headers["set-cookie"])
        assert.are.equal(200, me(this))
        assert.are.equal(0, #ended)
        assert.are.equal(200, login("ada@example.com", PASSWORD).status)
      end)

      it_runs("refuses a new password that is too short, and no session", function()
        local this = H.cookieOf(post("register", { json = { email = "ada@example.com", password = PASSWORD } }))
        local r = post("password", { cookie = this, json = { current = PASSWORD, password = "short" } })
        assert.are.equal(422, r.status)
        assert.are.equal(error_body("INVALID_INPUT", "The password must be at least 8 characters."), r.body)
        r = post("password", { json = { current = PASSWORD, password = NEW } })
        assert.are.equal(401, r.status)
        assert.are.equal(error_body("UNAUTHORIZED", "Sign in first."), r.body)
      end)

      it_runs("serves its form to a session, and sends anyone else to sign in first", function()
        local this = H.cookieOf(post("register", { json = { email = "ada@example.com", password = PASSWORD } }))
        local r = get("password", { cookie = this })
        assert.are.equal(200, r.status)
        assert.truthy(r.body:find('autocomplete="current-password"', 1, true))
        assert.truthy(r.body:find('autocomplete="new-password"', 1, true))
        r = get("password")
        assert.are.equal(303, r.status)
        assert.are.equal("/__clank/auth/login?next=%2F__clank%2Fauth%2Fpassword", r.headers.location)
      end)
    end)

    describe("a reset", function()
      local function ask(email, more)
        local r = more or {}
        r.json = { email = email }
        r.headers = r.headers or { host = "app.test" }
        return post("reset", r)
      end
      -- Waits for the link sendReset is given (it runs in a task of its own) → its token.
      local function link(n)
        H.eventually(function() return #sent >= n end)
        return sent[n].url:match("%?token=([%w_-]+)$")
      end

      it_runs("answers the same whether or not the account exists, and sends a link to one that does", function()
        post("register", { json = { email = "ada@example.com", password = PASSWORD } })
        local known, unknown = ask("Ada@Example.com"), ask("nobody@example.com")
        assert.are.equal(200, known.status)
        assert.are.equal(known.status, unknown.status)
        assert.are.equal(known.body, unknown.body)
        assert.are.same(known.headers, unknown.headers)
        assert.are.equal('{"message":"If an account exists for that email, a link to choose a new password ' ..
          'was sent to it.","ok":true}', known.body)
        local tok = link(1)
        clank.sleep(20)
        assert.are.equal(1, #sent)
        assert.are.same({ id = 1, email = "ada@example.com", roles = {}, epoch = 0 }, sent[1].user)
        assert.are.equal("http://app.test/__clank/auth/reset?token=" .. tok, sent[1].url)
        assert.are.equal(43, #tok)
        -- stored hashed
        assert.are.equal(hex(core.sha256(tok)), db:one("SELECT hash FROM clank_resets").hash)
      end)

      it_runs("sets the password once, ending every session and bumping the epoch", function()
        local one = H.cookieOf(post("register", { json = { email = "ada@example.com", password = PASSWORD } }))
        local two = H.cookieOf(login("ada@example.com", PASSWORD))
        ask("ada@example.com")
        local tok = link(1)
        local page = get("reset", { query = { token = tok } })
        assert.are.equal(200, page.status)
        assert.truthy(page.body:find('<input name="token" type="hidden" value="' .. tok .. '">', 1, true))
        assert.truthy(page.body:find('autocomplete="new-password"', 1, true))

        local r = post("reset", { json = { token = tok, password = NEW } })
        assert.are.equal(200, r.status)
        assert.are.equal('{"ok":true}', r.body)
        assert.are.equal(401, me(one))
        assert.are.equal(401, me(two))
        assert.are.same({ { hashes = sorted { hex(core.sha256(one)), hex(core.sha256(two)) }, user = 1 } },
          { { hashes = sorted(ended[1].hashes), user = ended[1].user } })
        assert.are.equal(401, login("ada@example.com", PASSWORD).status)
        local signed = login("ada@example.com", NEW)
        assert.are.equal(200, signed.status)
        assert.are.equal(1, a:authenticate(request { cookie = H.cookieOf(signed) }).epoch)

        r = post("reset", { json = { token = tok, password = "a third password" } })
        assert.are.equal(400, r.status)
        assert.are.equal("INVALID_TOKEN", json.decode(r.body).error.code)
        assert.are.equal(400, get("reset", { query = { token = tok } }).status)
        assert.are.equal(200, login("ada@example.com", NEW).status)
      end)

      it_runs("answers a form with 303 to the sign-in page", function()
        post("register", { json = { email = "ada@example.com", password = PASSWORD } })
        local r = post("reset", { form = { email = "ada@example.com" }, headers = { host = "app.test" } })
        assert.are.equal(200, r.status)
        assert.truthy(r.body:find("<title>Check your email</title>", 1, true))
        r = post("reset", { form = { token = link(1), password = NEW } })
        assert.are.equal(303, r.status)
        assert.are.equal("/__clank/auth/login", r.headers.location)
      end)

      it_runs("refuses a link after an hour", function()
        post("register", { json = { email = "ada@example.com", password = PASSWORD } })
        ask("ada@example.com")
        local tok = link(1)
        clock.advance(HOUR)
        local r = post("reset", { json = { token = tok, password = NEW } })
        assert.are.equal(400, r.status)
        assert.are.equal(error_body("INVALID_TOKEN", "This reset link is not valid: it was used already, it " ..
          "expired, or it is wrong. Ask for a new one."), r.body)
        assert.are.equal(400, get("reset", { query = { token = tok } }).status)
        assert.are.equal(200, login("ada@example.com", PASSWORD).status)
      end)

      it_runs("refuses forged and malformed tokens, and a new password that is too short", function()
        post("register", { json = { email = "ada@example.com", password = PASSWORD } })
        ask("ada@example.com")
        local tok = link(1)
        for _, forged in ipairs { token.encode64(core.randomBytes(32)), "abc", "", "' OR 1=1 --", 42 } do
          local r = post("reset", { json = { token = forged, password = NEW } })
          assert.are.equal(400, r.status, tostring(forged))
          assert.are.equal("INVALID_TOKEN", json.decode(r.body).error.code)
        end
        local r = post("reset", { json = { token = tok, password = "short" } })
        assert.are.equal(422, r.status)
        r = post("reset", { json = { token = tok } })
        assert.are.equal(422, r.status)
        assert.are.equal(200, post("reset", { json = { token = tok, password = NEW } }).status)
      end)

      it_runs("makes the link from baseUrl when the app gives one", function()
        local b = auth { db = db, clock = clock, passwordParams = H.CHEAP, baseUrl = "https://app.example/",
          sendReset = function(user, url) sent[#sent + 1] = { user = user, url = url } end }
        b:addUser("ada@example.com", PASSWORD)
        b:handle(request { method = "POST", path = P .. "reset", json = { email = "ada@example.com" },
          headers = { host = "evil.example" } })
        local tok = link(1)
        assert.are.equal("https://app.example/__clank/auth/reset?token=" .. tok, sent[1].url)
      end)

      it_runs("logs the link when the app gives no sendReset", function()
        local log = stub(core, "log")
        local b = auth { db = db, clock = clock, passwordParams = H.CHEAP }
        local ok, err = pcall(function()
          b:addUser("ada@example.com", PASSWORD)
          b:handle(request { method = "POST", path = P .. "reset", json = { email = "ada@example.com" },
            headers = { host = "localhost:8080" } })
          H.eventually(function() return #log.calls > 0 end)
        end)
        core.log:revert()
        assert(ok, err)
        assert.are.equal("info", log.calls[1].vals[1])
        assert.truthy(log.calls[1].vals[2]:find("ada@example.com .*http://localhost:8080/__clank/auth/reset%?token="),
          log.calls[1].vals[2])
      end)
    end)

    describe("an old hash", function()
      it_runs("is replaced at sign-in by one with the current parameters", function()
        a:addUser("ada@example.com", PASSWORD)
        local before = db:one("SELECT password_hash FROM clank_users").password_hash
        assert.is_true(password.needsRehash(before))
        local current = auth { db = db, clock = clock }
        local r = current:handle(request { method = "POST", path = P .. "login",
          json = { email = "ada@example.com", password = PASSWORD } })
        assert.are.equal(200, r.status)
        local after = db:one("SELECT password_hash FROM clank_users").password_hash
        assert.are_not.equal(before, after)
        assert.is_false(password.needsRehash(after))
        assert.is_true(password.verify(after, PASSWORD))
        -- once upgraded, a sign-in leaves it
        current:handle(request { method = "POST", path = P .. "login",
          json = { email = "ada@example.com", password = PASSWORD } })
        assert.are.equal(after, db:one("SELECT password_hash FROM clank_users").password_hash)
      end)

      it_runs("is kept after a wrong password", function()
        a:addUser("ada@example.com", PASSWORD)
        local before = db:one("SELECT password_hash FROM clank_users").password_hash
        local current = auth { db = db, clock = clock }
        current:handle(request { method = "POST", path = P .. "login",
          json = { email = "ada@example.com", password = "wrong guess" } })
        assert.are.equal(before, db:one("SELECT password_hash FROM clank_users").password_hash)
      end)
    end)
  end)
end)
