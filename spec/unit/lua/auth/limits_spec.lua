-- Guessing limits: sign-in failures per account and per client address, reset requests the
-- same way, counted in the database (so every worker sees them), answered 429 with
-- retry-after before any password is verified. On SQLite, and on PostgreSQL when
-- CLANK_TEST_POSTGRES_URL is set.
local clank = require "clank"
local password = require "clank.password"
local auth = require "clank.auth"
local H = require "helpers.auth"

local json = clank.json
local it_runs, request = H.it_runs, H.request

local P = "/__clank/auth/"
local PASSWORD = "correct horse battery"
local WINDOW = 15 * 60000

local function limited(seconds)
  return json.encode { ok = false, error = { code = "RATE_LIMITED",
    message = "Too many attempts. Try again in " .. seconds .. " seconds." } }
end

teardown(H.removeAll)

describe("clank.auth limits", function()
  H.each_backend(function(fresh)
    local db, cleanup, clock, a
    before_each(function()
      db, cleanup = fresh()
      clock = H.clock()
      a = auth { db = db, clock = clock, passwordParams = H.CHEAP, sendReset = function() end }
    end)
    after_each(function() cleanup() end)

    local function login(email, pw, address, on)
      return (on or a):handle(request { method = "POST", path = P .. "login", remoteAddress = address,
        json = { email = email, password = pw } })
    end

    -- n failures for email, one a second, each from an address of its own.
    local function fail(n, email, on)
      for i = 1, n do
        local r = login(email, "wrong guess", "198.51.100." .. i, on)
        assert.are.equal(401, r.status, "failure " .. i)
        clock.advance(1000)
      end
    end

    it_runs("refuses the 11th try for an account with 429 and retry-after, before verifying", function()
      a:addUser("ada@example.com", PASSWORD)
      fail(10, "ada@example.com") -- at START .. START + 9 s; now START + 10 s
      local verify = spy.on(password, "verify")
      local ok, r = pcall(login, "ada@example.com", PASSWORD, "203.0.113.1")
      password.verify:revert()
      assert(ok, r)
      assert.spy(verify).was_not_called()
      assert.are.equal(429, r.status)
      -- the oldest failure (START) leaves the window at START + 15 min: 890 s from now
      assert.are.equal("890", r.headers["retry-after"])
      assert.are.equal(limited(890), r.body)
      assert.is_nil(r.headers["set-cookie"])

      clock.advance(889000)
      assert.are.equal(429, login("ada@example.com", PASSWORD).status)
      clock.advance(1000) -- the oldest is out: 9 in the window
      assert.are.equal(200, login("ada@example.com", PASSWORD).status)
    end)

    it_runs("limits an account that does not exist the same way", function()
      a:addUser("ada@example.com", PASSWORD)
      fail(10, "ada@example.com")
      fail(10, "nobody@example.com")
      local known, unknown = login("ada@example.com", "x"), login("nobody@example.com", "x")
      assert.are.equal(429, known.status)
      assert.are.equal(429, unknown.status)
      -- ada's oldest at START, now START + 20 s; nobody's oldest at START + 10 s
      assert.are.equal(limited(880), known.body)
      assert.are.equal(limited(890), unknown.body)
    end)

    it_runs("shows the form again with 429 and retry-after to a browser", function()
      fail(10, "ada@example.com")
      local r = a:handle(request { method = "POST", path = P .. "login",
        form = { email = "ada@example.com", password = "x" } })
      assert.are.equal(429, r.status)
      assert.are.equal("890", r.headers["retry-after"])
      assert.are.equal("text/html; charset=utf-8", r.headers["content-type"])
      assert.truthy(r.body:find("Too many attempts. Try again in 890 seconds.", 1, true))
      assert.truthy(r.body:find('value="ada@example.com"', 1, true))
    end)

    it_runs("refuses the 51st failure from one address, across accounts", function()
      for i = 1, 50 do
        assert.are.equal(401, login("user" .. i .. "@example.com", "wrong", "203.0.113.9").status, i)
      end
      local r = login("user51@example.com", "wrong", "203.0.113.9")
      assert.are.equal(429, r.status)
      assert.are.equal("900", r.headers["retry-after"])
      a:addUser("ada@example.com", PASSWORD)
      assert.are.equal(429, login("ada@example.com", PASSWORD, "203.0.113.9").status)
      -- another address, and no address (a test's request): the account limit alone
      assert.are.equal(401, login("user51@example.com", "wrong", "203.0.113.10").status)
      assert.are.equal(200, login("ada@example.com", PASSWORD, nil).status)
    end)

    it_runs("holds against 1,000 sign-ins from one address and from many against one account", function()
      a:addUser("ada@example.com", PASSWORD)
      local refused = 0
      for i = 1, 1000 do -- one address, many accounts, then ada's right password
        local r = login("spray" .. i .. "@example.com", "wrong", "203.0.113.20")
        if r.status == 429 then refused = refused + 1 else assert.are.equal(401, r.status) end
      end
      assert.are.equal(950, refused)
      assert.are.equal(429, login("ada@example.com", PASSWORD, "203.0.113.20").status)
      refused = 0
      for i = 1, 1000 do -- many addresses, one account
        local r = login("ada@example.com", "guess " .. i, "198.18." .. (i // 250) .. "." .. (i % 250))
        if r.status == 429 then refused = refused + 1 else assert.are.equal(401, r.status) end
      end
      assert.are.equal(990, refused)
      local r = login("ada@example.com", PASSWORD, "192.0.2.99")
      assert.are.equal(429, r.status)
      assert.is_nil(r.headers["set-cookie"])
    end)

    it_runs("forgets an account's failures when it signs in", function()
      a:addUser("ada@example.com", PASSWORD)
      fail(9, "ada@example.com")
      assert.are.equal(200, login("ada@example.com", PASSWORD, "192.0.2.1").status)
      fail(10, "ada@example.com")
      assert.are.equal(429, login("ada@example.com", PASSWORD, "192.0.2.1").status)
    end)

    it_runs("counts across Auth objects on one database, as workers do", function()
      a:addUser("ada@example.com", PASSWORD)
      local other = auth { db = db, clock = clock, passwordParams = H.CHEAP }
      fail(5, "ada@example.com", a)
      fail(5, "ada@example.com", other)
      assert.are.equal(429, login("ada@example.com", PASSWORD, nil, a).status)
      assert.are.equal(429, login("ada@example.com", PASSWORD, nil, other).status)
    end)

    it_runs("takes its numbers from the limits option", function()
      local strict = auth { db = db, clock = clock, passwordParams = H.CHEAP,
        limits = { account = 2, address = 3, window = 60000 } }
      strict:addUser("ada@example.com", PASSWORD)
      fail(2, "ada@example.com", strict)
      local r = login("ada@example.com", PASSWORD, nil, strict)
      assert.are.equal(429, r.status)
      assert.are.equal("58", r.headers["retry-after"]) -- oldest at START, now START + 2 s
      clock.advance(58000)
      assert.are.equal(200, login("ada@example.com", PASSWORD, nil, strict).status)
    end)

    it_runs("limits reset requests per account, whether it exists or not", function()
      a:addUser("ada@example.com", PASSWORD)
      local function ask(email, address)
        return a:handle(request { method = "POST", path = P .. "reset", remoteAddress = address,
          json = { email = email } })
      end
      for i = 1, 10 do
        assert.are.equal(200, ask("ada@example.com", "198.51.100." .. i).status)
        assert.are.equal(200, ask("nobody@example.com", "198.51.100." .. i).status)
        clock.advance(1000)
      end
      local known, unknown = ask("ada@example.com", "192.0.2.7"), ask("nobody@example.com", "192.0.2.7")
      assert.are.equal(429, known.status)
      assert.are.equal("890", known.headers["retry-after"])
      assert.are.equal(known.body, unknown.body)
      -- sign-in failures are counted apart
      assert.are.equal(200, login("ada@example.com", PASSWORD).status)
    end)

    it_runs("limits reset requests per address", function()
      for i = 1, 50 do
        assert.are.equal(200, a:handle(request { method = "POST", path = P .. "reset", remoteAddress = "192.0.2.8",
          json = { email = "user" .. i .. "@example.com" } }).status)
      end
      local r = a:handle(request { method = "POST", path = P .. "reset", remoteAddress = "192.0.2.8",
        json = { email = "user51@example.com" } })
      assert.are.equal(429, r.status)
    end)

    it_runs("drops counted attempts once they leave the window", function()
      fail(3, "ada@example.com")
      clock.advance(WINDOW)
      fail(1, "bob@example.com")
      -- one row per failure for the account and one for the address: only bob's are left
      assert.are.equal(2, db:one("SELECT count(*) AS n FROM clank_attempts").n)
    end)
  end)
end)
