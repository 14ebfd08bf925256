-- clank.auth's endpoints through auth:handle with request tables as the runtime makes them:
-- registration, sign-in, sign-out and me; cookies; JSON and HTML answers; input that is
-- refused; errors that must not escape. On SQLite, and on PostgreSQL when
-- CLANK_TEST_POSTGRES_URL is set.
local clank = require "clank"
local core = require "clank.core"
local password = require "clank.password"
local auth = require "clank.auth"
local H = require "helpers.auth"

local json = clank.json
local it_runs, request = H.it_runs, H.request

local P = "/__clank/auth/"
local PASSWORD = "correct horse battery"

local function hex(s) return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end

local function post(a, path, r)
  r.method, r.path = "POST", P .. path
  return a:handle(request(r))
end

local function get(a, path, r)
  r = r or {}
  r.method, r.path = r.method or "GET", P .. path
  return a:handle(request(r))
end

local function error_body(code, message)
  return json.encode { ok = false, error = { code = code, message = message } }
end

local function user_body(id, email)
  return '{"ok":true,"user":{"email":"' .. email .. '","id":' .. id .. ',"roles":[]}}'
end

teardown(H.removeAll)

describe("clank.auth handle", function()
  H.each_backend(function(fresh)
    local db, cleanup, clock, a
    before_each(function()
      db, cleanup = fresh()
      clock = H.clock()
      a = auth { db = db, clock = clock, passwordParams = H.CHEAP }
    end)
    after_each(function() cleanup() end)

    local function register(email, pw, more)
      local r = more or {}
      r.json = { email = email, password = pw or PASSWORD }
      return post(a, "register", r)
    end

    local function login(email, pw, more)
      local r = more or {}
      r.json = { email = email, password = pw or PASSWORD }
      return post(a, "login", r)
    end

    describe("in JSON", function()
      it_runs("registers, answers me, signs out and signs in again", function()
        local r = register(" Ada@Example.COM ")
        assert.are.equal(201, r.status)
        assert.are.equal(user_body(1, "ada@example.com"), r.body)
        assert.are.equal("application/json", r.headers["content-type"])
        assert.are.equal("no-store", r.headers["cache-control"])
        local cookie = H.cookieOf(r)
        assert.truthy(cookie and #cookie == 43, r.headers["set-cookie"])

        r = get(a, "me", { cookie = cookie })
        assert.are.equal(200, r.status)
        assert.are.equal(user_body(1, "ada@example.com"), r.body)
        assert.are.equal("no-store", r.headers["cache-control"])

        r = post(a, "logout", { cookie = cookie, json = {} })
        assert.are.equal(200, r.status)
        assert.are.equal('{"ok":true}', r.body)
        assert.are.equal("clank_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax", r.headers["set-cookie"])

        r = get(a, "me", { cookie = cookie })
        assert.are.equal(401, r.status)
        assert.are.equal(error_body("UNAUTHORIZED", "Sign in first."), r.body)

        r = login("ADA@example.com")
        assert.are.equal(200, r.status)
        assert.are.equal(user_body(1, "ada@example.com"), r.body)
        local again = H.cookieOf(r)
        assert.are.equal(200, get(a, "me", { cookie = again }).status)
      end)

      it_runs("answers me for a bearer token, and 401 without anything", function()
        local cookie = H.cookieOf(register("ada@example.com"))
        local token = json.decode(post(a, "tokens", { cookie = cookie, json = { name = "cli" } }).body).token
        local r = get(a, "me", { headers = { authorization = "Bearer " .. token } })
        assert.are.equal(200, r.status)
        assert.are.equal(user_body(1, "ada@example.com"), r.body)
        r = get(a, "me", {})
        assert.are.equal(401, r.status)
        assert.are.equal(error_body("UNAUTHORIZED", "Sign in first."), r.body)
      end)

      it_runs("answers JSON when accept asks for it, even to a form body", function()
        register("ada@example.com")
        local r = post(a, "login", { form = { email = "ada@example.com", password = "nope" },
          headers = { accept = "text/html;q=0.5, application/json" } })
        assert.are.equal(401, r.status)
        assert.are.equal(error_body("INVALID_CREDENTIALS", "Wrong email or password."), r.body)
      end)
    end)

    describe("the session cookie", function()
      it_runs("is HttpOnly, SameSite=Lax, Path=/, for the session's lifetime", function()
        local r = register("ada@example.com")
        local cookie = H.cookieOf(r)
        assert.truthy(cookie:find("^[%w_-]+$"), cookie)
        assert.are.equal("clank_session=" .. cookie .. "; Path=/; Max-Age=7776000; HttpOnly; SameSite=Lax",
          r.headers["set-cookie"])
        local short = auth { db = db, clock = clock, passwordParams = H.CHEAP, sessionLifetime = 3600500 }
        r = post(short, "login", { json = { email = "ada@example.com", password = PASSWORD } })
        assert.truthy(r.headers["set-cookie"]:find("; Max-Age=3600;", 1, true), r.headers["set-cookie"])
      end)

      it_runs("is Secure over https", function()
        local r = register("ada@example.com", nil, { scheme = "https" })
        assert.are.equal("clank_session=" .. H.cookieOf(r) ..
          "; Path=/; Max-Age=7776000; HttpOnly; SameSite=Lax; Secure", r.headers["set-cookie"])
        r = post(a, "logout", { scheme = "https", cookie = H.cookieOf(r), json = {} })
        assert.are.equal("clank_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax; Secure",
          r.headers["set-cookie"])
      end)

      it_runs("is a new id at each sign-in; the one the request came with ends", function()
        local ended = {}
        a.onEnded[1] = function(hashes, user_id) ended[#ended + 1] = { hashes = hashes, user = user_id } end
        local first = H.cookieOf(register("ada@example.com"))
        local second = H.cookieOf(login("ada@example.com", nil, { cookie = first }))
        local third = H.cookieOf(login("ada@example.com"))
        assert.are_not.equal(first, second)
        assert.are_not.equal(second, third)
        assert.are.equal(401, get(a, "me", { cookie = first }).status)
        assert.are.equal(200, get(a, "me", { cookie = second }).status)
        assert.are.equal(200, get(a, "me", { cookie = third }).status)
        assert.are.same({ { hashes = { hex(core.sha256(first)) }, user = 1 } }, ended)
      end)
    end)

    describe("a failed sign-in", function()
      it_runs("is the same answer for a wrong password and an unknown email", function()
        register("ada@example.com")
        local wrong = login("ada@example.com", "not the password")
        local unknown = login("nobody@example.com", "not the password")
        assert.are.equal(401, wrong.status)
        assert.are.equal(401, unknown.status)
        assert.are.equal(error_body("INVALID_CREDENTIALS", "Wrong email or password."), wrong.body)
        assert.are.equal(wrong.body, unknown.body)
        assert.are.same(wrong.headers, unknown.headers)
        assert.is_nil(wrong.headers["set-cookie"])
      end)

      it_runs("verifies a password for an unknown email too, against a hash of the same cost", function()
        register("ada@example.com")
        local verify = spy.on(password, "verify")
        local ok = pcall(function()
          login("nobody@example.com", "guess")
          login("ada@example.com", "guess")
        end)
        password.verify:revert()
        assert.is_true(ok)
        assert.spy(verify).was.called(2)
        local dummy, real = verify.calls[1].vals[1], verify.calls[2].vals[1]
        assert.are_not.equal(dummy, real)
        -- the same parameters: the same "$argon2id$v=19$m=...,t=...,p=...$" head
        assert.are.equal(real:match("^(%$argon2id%$[^$]*%$[^$]*%$)"), dummy:match("^(%$argon2id%$[^$]*%$[^$]*%$)"))
      end)
      it_runs("makes its dummy hash before the first verify, for a known email too", function()
        a:addUser("ada@example.com", PASSWORD)
        local hash = spy.on(password, "hash")
        local ok = pcall(function()
          login("ada@example.com", "guess")
          login("ada@example.com", "guess")
          login("nobody@example.com", "guess")
        end)
        password.hash:revert()
        assert.is_true(ok)
        assert.spy(hash).was.called(1) -- the dummy's, once, at the first sign-in
      end)
    end)

    describe("input", function()
      it_runs("refuses empty and over-long passwords with 422 before hashing anything", function()
        local hash, verify = spy.on(password, "hash"), spy.on(password, "verify")
        local answers = {}
        local ok, err = pcall(function()
          for _, pw in ipairs { "", ("x"):rep(1025) } do
            answers[#answers + 1] = register("ada@example.com", pw)
            answers[#answers + 1] = login("ada@example.com", pw)
          end
        end)
        password.hash:revert()
        password.verify:revert()
        assert(ok, err)
        assert.spy(hash).was_not_called()
        assert.spy(verify).was_not_called()
        assert.are.equal(error_body("INVALID_INPUT", "Enter a password."), answers[1].body)
        assert.are.equal(error_body("INVALID_INPUT", "Enter your password."), answers[2].body)
        assert.are.equal(error_body("INVALID_INPUT", "The password must be at most 1024 bytes."), answers[3].body)
        assert.are.equal(error_body("INVALID_INPUT", "The password must be at most 1024 bytes."), answers[4].body)
        for _, r in ipairs(answers) do assert.are.equal(422, r.status) end
      end)

      it_runs("counts a new password's characters, not its bytes, and wants valid UTF-8", function()
        local cases = {
          { "seven77", 422, "The password must be at least 8 characters." },
          { ("é"):rep(7), 422, "The password must be at least 8 characters." },
          { ("\255"):rep(8), 422, "The password must be valid UTF-8 text." },
          { ("é"):rep(8), 201 },
          { ("x"):rep(1024), 201 },
        }
        for i, case in ipairs(cases) do
          -- a form body: JSON cannot carry bytes that are not UTF-8
          local r = post(a, "register", { form = { email = "user" .. i .. "@example.com", password = case[1] },
            headers = { accept = "application/json" } })
          assert.are.equal(case[2], r.status, case[1])
          if case[3] then assert.are.equal(error_body("INVALID_INPUT", case[3]), r.body) end
        end
        assert.are.equal(200, login("user4@example.com", ("é"):rep(8)).status)
      end)

      it_runs("refuses malformed emails with 422", function()
        local valid = "Enter a valid email address, like name@example.com."
        local cases = {
          { "", "Enter your email address." },
          { "   ", "Enter your email address." },
          { 42, "The email address must be text." },
          { ("a"):rep(243) .. "@example.com", "The email address must be at most 254 bytes." },
          { "ada", valid }, { "ada@", valid }, { "@example.com", valid }, { "ada@example", valid },
          { "a b@example.com", valid }, { "ada@@example.com", valid }, { "ada@ex@ample.com", valid },
          { "ada@.example.com", valid }, { "ada@example.com.", valid }, { "ada@example..com", valid },
          { "ada\n@example.com", valid }, { "ada\0@example.com", valid }, { "\255@example.com", valid },
        }
        local function send(path, email)
          if type(email) ~= "string" then return post(a, path, { json = { email = email, password = PASSWORD } }) end
          -- a form body: JSON cannot carry bytes that are not UTF-8
          return post(a, path, { form = { email = email, password = PASSWORD },
            headers = { accept = "application/json" } })
        end
        for _, case in ipairs(cases) do
          local r = send("register", case[1])
          assert.are.equal(422, r.status, tostring(case[1]))
          assert.are.equal(error_body("INVALID_INPUT", case[2]), r.body)
          r = send("login", case[1])
          assert.are.equal(422, r.status, tostring(case[1]))
        end
        -- 254 bytes is the most
        assert.are.equal(201, register(("a"):rep(242) .. "@example.com").status)
      end)

      it_runs("answers malformed JSON with 400, a body that is not an object with 422", function()
        local r = post(a, "login", { body = "{\"email\":", headers = { ["content-type"] = "application/json" } })
        assert.are.equal(400, r.status)
        assert.are.equal("INVALID_JSON", json.decode(r.body).error.code)
        for _, body in ipairs { "[1, 2]", "\"ada\"", "null", "7" } do
          r = post(a, "register", { body = body, headers = { ["content-type"] = "application/json" } })
          assert.are.equal(422, r.status, body)
          assert.are.equal(error_body("INVALID_INPUT", "The body must be a JSON object."), r.body)
        end
      end)

      it_runs("ignores fields it does not know", function()
        local r = post(a, "register", { json = { email = "ada@example.com", password = PASSWORD,
          roles = { "admin" }, id = 99, extra = { nested = true } } })
        assert.are.equal(201, r.status)
        assert.are.equal(user_body(1, "ada@example.com"), r.body)
      end)

      it_runs("keeps SQL metacharacters as data", function()
        local email = "robert');drop--table\"clank_users@example.com"
        local pw = "' OR '1'='1\"; DROP TABLE clank_users; --"
        local r = register(email, pw)
        assert.are.equal(201, r.status)
        assert.are.equal(email:lower(), json.decode(r.body).user.email)
        assert.are.equal(200, login(email, pw).status)
        assert.are.equal(401, login(email, "' OR '1'='1").status)
        assert.are.equal(401, login("x'or'1'='1'--@example.com", pw).status)
        assert.are.equal(1, db:one("SELECT count(*) AS n FROM clank_users").n)
      end)
    end)

    describe("registration", function()
      it_runs("answers 409 EMAIL_TAKEN for an email that has an account, whatever its case", function()
        register("ada@example.com")
        local r = register("ADA@example.com", "another password")
        assert.are.equal(409, r.status)
        assert.are.equal(error_body("EMAIL_TAKEN", "An account with this email already exists."), r.body)
      end)

      it_runs("answers 403 when closed; addUser still makes users, who sign in", function()
        local closed = auth { db = db, clock = clock, passwordParams = H.CHEAP, registration = "closed" }
        local r = post(closed, "register", { json = { email = "ada@example.com", password = PASSWORD } })
        assert.are.equal(403, r.status)
        assert.are.equal(error_body("REGISTRATION_CLOSED", "Registration is closed."), r.body)
        r = get(closed, "register")
        assert.are.equal(200, r.status)
        assert.truthy(r.body:find("Registration is closed.", 1, true))
        assert.is_nil(r.body:find("<form", 1, true))

        local user = closed:addUser("Bob@Example.com", PASSWORD, { "admin" })
        assert.are.same({ id = 1, email = "bob@example.com", roles = { "admin" }, epoch = 0 }, user)
        assert.is_true(json.isArray(user.roles))
        r = post(closed, "login", { json = { email = "bob@example.com", password = PASSWORD } })
        assert.are.equal(200, r.status)
        assert.are.equal('{"ok":true,"user":{"email":"bob@example.com","id":1,"roles":["admin"]}}', r.body)
      end)

      it_runs("addUser raises for a bad email, a bad password or a taken email", function()
        local function raised(...)
          local ok, err = pcall(a.addUser, a, ...)
          assert.is_false(ok)
          return tostring(err)
        end
        assert.truthy(raised("nope", PASSWORD):find("clank.auth.addUser: Enter a valid email address", 1, true))
        assert.truthy(raised("ada@example.com", "short"):find("at least 8 characters", 1, true))
        assert.truthy(raised("ada@example.com", PASSWORD, { 7 }):find("roles must be a list", 1, true))
        a:addUser("ada@example.com", PASSWORD)
        assert.truthy(raised("Ada@example.com", PASSWORD):find(
          "clank.auth.addUser: ada@example.com: An account with this email already exists.", 1, true))
      end)
    end)

    describe("routing", function()
      it_runs("answers 404 NOT_FOUND off its paths, 405 with allow for a wrong method", function()
        local r = get(a, "nothing", { headers = { accept = "application/json" } })
        assert.are.equal(404, r.status)
        assert.are.equal("NOT_FOUND", json.decode(r.body).error.code)
        assert.are.equal(404, get(a, "tokens/abc").status)
        assert.are.equal(404, get(a, "login/").status)
        local cases = { { "GET", "logout", "POST" }, { "DELETE", "login", "GET, POST" },
          { "PUT", "tokens", "GET, POST" }, { "POST", "me", "GET" }, { "GET", "tokens/1", "DELETE" } }
        for _, case in ipairs(cases) do
          r = get(a, case[2], { method = case[1], headers = { accept = "application/json" } })
          assert.are.equal(405, r.status, case[1] .. " " .. case[2])
          assert.are.equal(case[3], r.headers.allow)
          assert.are.equal("METHOD_NOT_ALLOWED", json.decode(r.body).error.code)
        end
      end)

      it_runs("refuses a cross-site post", function()
        local r = post(a, "login", { json = { email = "ada@example.com", password = PASSWORD },
          headers = { ["sec-fetch-site"] = "cross-site" } })
        assert.are.equal(403, r.status)
        assert.are.equal("CROSS_SITE", json.decode(r.body).error.code)
      end)
    end)

    describe("HTML", function()
      it_runs("serves the sign-in form as a page of its own", function()
        local r = get(a, "login")
        assert.are.equal(200, r.status)
        assert.are.equal("text/html; charset=utf-8", r.headers["content-type"])
        assert.are.equal("no-store", r.headers["cache-control"])
        assert.truthy(r.headers["content-security-policy"]:find("default-src 'self'", 1, true))
        local body = r.body
        assert.are.equal("<!doctype html>", body:sub(1, 15))
        assert.truthy(body:find("<title>Sign in</title>", 1, true))
        assert.truthy(body:find("<style>", 1, true))
        assert.truthy(body:find('<form action="/__clank/auth/login" method="post">', 1, true))
        assert.truthy(body:find('autocomplete="email"', 1, true))
        assert.truthy(body:find('autocomplete="current-password"', 1, true))
        assert.truthy(body:find('href="/__clank/auth/register"', 1, true))
        assert.truthy(body:find('href="/__clank/auth/reset"', 1, true))
        assert.is_nil(body:find("<script", 1, true))
      end)

      it_runs("serves the registration and reset forms", function()
        local body = get(a, "register").body
        assert.truthy(body:find("<title>Create an account</title>", 1, true))
        assert.truthy(body:find('<form action="/__clank/auth/register" method="post">', 1, true))
        assert.truthy(body:find('autocomplete="new-password"', 1, true))
        assert.truthy(body:find('href="/__clank/auth/login"', 1, true))
        -- the password's rule under its field, before anyone breaks it, and for the browser
        assert.truthy(body:find('aria-describedby="password-hint"', 1, true))
        assert.truthy(body:find('minlength="8"', 1, true))
        assert.truthy(body:find('<p class="hint" id="password-hint">At least 8 characters.</p>', 1, true))
        body = get(a, "reset", { query = { next = "/after" } }).body
        assert.truthy(body:find("<title>Reset your password</title>", 1, true))
        assert.truthy(body:find('<input name="next" type="hidden" value="/after">', 1, true))
        assert.truthy(body:find('href="/__clank/auth/login?next=/after"', 1, true))
      end)

      it_runs("answers a form post with 303 to next and its cookie", function()
        local r = post(a, "register", { form = { email = "ada@example.com", password = PASSWORD,
          next = "/welcome?tab=1" } })
        assert.are.equal(303, r.status)
        assert.are.equal("/welcome?tab=1", r.headers.location)
        assert.truthy(H.cookieOf(r))
        r = post(a, "login", { form = { email = "ada@example.com", password = PASSWORD },
          query = { next = "/from-query" } })
        assert.are.equal(303, r.status)
        assert.are.equal("/from-query", r.headers.location)
        r = post(a, "logout", { cookie = H.cookieOf(r), form = {} })
        assert.are.equal(303, r.status)
        assert.are.equal("/", r.headers.location)
        assert.are.equal("clank_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax", r.headers["set-cookie"])
      end)

      it_runs("goes next only to a path of this site", function()
        register("ada@example.com")
        for _, next in ipairs { "//evil.example/x", "https://evil.example/", "/\\evil.example",
            "evil", "/a b", "/a\nb", "" } do
          local r = post(a, "login", { form = { email = "ada@example.com", password = PASSWORD, next = next } })
          assert.are.equal(303, r.status)
          assert.are.equal("/", r.headers.location, next)
        end
      end)

      it_runs("shows a failed form again with the message and the email, never the password", function()
        register("ada@example.com")
        local r = post(a, "login", { form = { email = "ada@example.com", password = "s3cret-guess<>" } })
        assert.are.equal(401, r.status)
        assert.are.equal("text/html; charset=utf-8", r.headers["content-type"])
        assert.truthy(r.body:find('<p class="error" id="auth-error" role="alert">Wrong email or password.</p>',
          1, true))
        assert.truthy(r.body:find('value="ada@example.com"', 1, true))
        assert.is_nil(r.body:find("s3cret", 1, true))
        -- each field is described by the message, the one focused (the password) too
        local _, described = r.body:gsub('aria%-describedby="auth%-error"', "")
        assert.are.equal(2, described)
        r = post(a, "register", { form = { email = "<b>x</b>", password = "pw" } })
        assert.are.equal(422, r.status)
        assert.truthy(r.body:find('aria-describedby="auth-error password-hint"', 1, true))
        assert.truthy(r.body:find('value="&lt;b&gt;x&lt;/b&gt;"', 1, true))
        assert.is_nil(r.body:find("<b>x", 1, true))
      end)

      it_runs("shows the app's pages instead: functions and views, with their props", function()
        local seen = {}
        local custom = auth { db = db, clock = clock, passwordParams = H.CHEAP, registration = "closed",
          pages = {
            login = function(props)
              seen[#seen + 1] = props
              return clank.h.p({ id = "custom" }, "error: ", props.error or "none")
            end,
            reset = clank.defineView { name = "reset", render = function(props)
              return clank.h.p(nil, "view for ", props.next)
            end },
          } }
        local r = get(custom, "login", { query = { next = "/n" } })
        assert.are.equal(200, r.status)
        assert.truthy(r.body:find('<main><p id="custom">error: none</p></main>', 1, true))
        assert.truthy(r.body:find("<title>Sign in</title>", 1, true))
        r = post(custom, "login", { form = { email = "x@example.com", password = "guess", next = "/n" } })
        assert.are.equal(401, r.status)
        assert.truthy(r.body:find("error: Wrong email or password.", 1, true))
        assert.are.same({ next = "/n", registration = "closed", passwordMinLength = 8 }, seen[1])
        assert.are.same({ next = "/n", registration = "closed", error = "Wrong email or password.",
          email = "x@example.com", passwordMinLength = 8 }, seen[2])
        assert.truthy(get(custom, "reset").body:find("<p>view for /</p>", 1, true))
      end)
    end)

    describe("failures", function()
      it_runs("answers a page that raises with 500 and one log line", function()
        local log = stub(core, "log")
        local broken = auth { db = db, passwordParams = H.CHEAP, pages = { login = function() error("boom") end } }
        local ok, r = pcall(get, broken, "login")
        core.log:revert()
        assert(ok, r)
        assert.are.equal(500, r.status)
        assert.are.equal("text/html; charset=utf-8", r.headers["content-type"])
        assert.spy(log).was.called(1)
        assert.are.equal("error", log.calls[1].vals[1])
        assert.truthy(log.calls[1].vals[2]:find("GET /__clank/auth/login failed: .*boom"), log.calls[1].vals[2])
      end)

      it_runs("answers 500 INTERNAL in JSON when the database fails", function()
        register("ada@example.com")
        local log = stub(core, "log")
        db:close()
        local ok, r = pcall(login, "ada@example.com")
        core.log:revert()
        assert(ok, r)
        assert.are.equal(500, r.status)
        assert.are.equal(error_body("INTERNAL", "Something went wrong on our side. Try again in a moment."),
          r.body)
        assert.spy(log).was.called(1)
      end)
    end)
  end)
end)
