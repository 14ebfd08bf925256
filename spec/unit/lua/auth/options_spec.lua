-- clank.auth's options: what the call takes, what it refuses (naming the field, at the
-- caller's line), and the object it makes.
local clank = require "clank"
local auth = require "clank.auth"
local H = require "helpers.auth"

local function raised(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

teardown(H.removeAll)

describe("clank.auth", function()
  local db, cleanup
  before_each(function() db, cleanup = H.backends[1].fresh() end)
  after_each(function() cleanup() end)

  it("is require 'clank.auth' and clank.auth", function()
    assert.are.equal(auth, clank.auth)
    assert.is_function(auth.isAuth)
  end)

  it("makes a clank.Auth that isAuth tells apart", function()
    local a = auth { db = db }
    assert.is_true(auth.isAuth(a))
    assert.are.equal("clank.Auth", getmetatable(a).__name)
    assert.is_false(auth.isAuth({}))
    assert.is_false(auth.isAuth(nil))
    assert.is_false(auth.isAuth(db))
    assert.are.same({}, a.onEnded)
  end)

  it("fills in the documented defaults", function()
    local a = auth { db = db }
    assert.are.equal("open", a.registration)
    assert.are.equal(8, a.passwordMinLength)
    assert.are.equal(1024, a.passwordMaxBytes)
    assert.are.equal(14 * 86400000, a.sessionIdle)
    assert.are.equal(90 * 86400000, a.sessionLifetime)
    assert.are.same({ account = 10, address = 50, window = 900000 }, a.limits)
    local b = auth { db = db, limits = { account = 3 } }
    assert.are.same({ account = 3, address = 50, window = 900000 }, b.limits)
  end)

  it("opens a target string with clank.db.open", function()
    local path = os.tmpname()
    local a = auth { db = path }
    assert.are.equal("sqlite", a.db.kind)
    assert.are.equal(path, a.db.target)
    a.db:close()
    os.remove(path)
  end)

  it("raises at the caller's line, naming the field", function()
    local cases = {
      { nil, "expected a table of options, got nil" },
      { {}, "field 'db' is required" },
      { { db = 42 }, "field 'db' must be a clank.db database or a target" },
      { { db = "" }, "field 'db' must be a clank.db database or a target" },
      { { db = "mysql://x/y" }, "field 'db': " },
      { { db = db, registration = "maybe" }, "field 'registration' must be \"open\" or \"closed\"" },
      { { db = db, passwordMinLength = 0 }, "field 'passwordMinLength' must be a positive integer" },
      { { db = db, passwordMinLength = 2.5 }, "field 'passwordMinLength' must be a positive integer" },
      { { db = db, passwordMaxBytes = "1024" }, "field 'passwordMaxBytes' must be a positive integer" },
      { { db = db, passwordMinLength = 20, passwordMaxBytes = 10 },
        "field 'passwordMinLength' (20) is more than passwordMaxBytes (10)" },
      { { db = db, sessionIdle = -1 }, "field 'sessionIdle' must be a positive number of milliseconds" },
      { { db = db, sessionLifetime = 0 / 0 }, "field 'sessionLifetime' must be a positive number" },
      { { db = db, sendReset = "mail" }, "field 'sendReset' must be a function(user, url)" },
      { { db = db, limits = 5 }, "field 'limits' must be a table { account, address, window }" },
      { { db = db, limits = { account = 0 } }, "field 'limits' account must be a positive integer" },
      { { db = db, limits = { window = "1m" } }, "field 'limits' window must be a positive number" },
      { { db = db, limits = { tries = 3 } }, "field 'limits' has an unknown field 'tries'" },
      { { db = db, pages = { home = function() end } }, "field 'pages' has an unknown page 'home'" },
      { { db = db, pages = { login = "<form>" } }, "field 'pages' login must be a view or a function" },
      { { db = db, clock = 5 }, "field 'clock' must be a function" },
      { { db = db, baseUrl = "app.example" }, "field 'baseUrl' must be the origin" },
      { { db = db, baseUrl = "https://app.example/path" }, "field 'baseUrl' must be the origin" },
      { { db = db, colour = "blue" }, "unknown field 'colour'" },
    }
    for _, case in ipairs(cases) do
      local err = raised(function() local _ = auth(case[1]) end)
      assert.truthy(err:find("options_spec.lua:%d+: clank.auth: "), err)
      assert.truthy(err:find(case[2], 1, true), err)
    end
  end)

  it("takes a view, a function or a callable table as a page", function()
    local view = clank.defineView { name = "login", render = function() return clank.h.p() end }
    local callable = setmetatable({}, { __call = function() return clank.h.p() end })
    local a = auth { db = db, pages = { login = view, register = function() end, reset = callable } }
    assert.are.equal(view, a.pages.login)
  end)
end)
