-- clank.app and loading `require "clank"` from plain lua5.4 (SPEC §1, §2).
local clank = require "clank"

describe("clank", function()
  it("loads from plain lua5.4 with the C modules from clank.so", function()
    assert.is_string(clank.version)
    assert.is_table(clank.json)
    assert.is_table(clank.schema)
    assert.is_function(clank.sleep)
  end)

  it("has a null that is truthy and not nil", function()
    assert.is_not_nil(clank.null)
    assert.is_truthy(clank.null)
  end)

  it("refuses to wait outside a handler coroutine", function()
    local ok, err = pcall(clank.sleep, 1)
    assert.is_false(ok)
    assert.matches("clank.sleep: cannot wait here (not in a handler coroutine)", err, 1, true)
    local co = coroutine.create(function() return clank.sleep(1) end)
    local resumed, cerr = coroutine.resume(co)
    assert.is_false(resumed)
    assert.matches("cannot wait here", cerr, 1, true)
  end)
end)

describe("clank.app", function()
  local function handler() return { status = 200 } end

  it("keeps the fields it was given", function()
    local app = clank.app { name = "x", routes = { ["GET /a"] = handler } }
    assert.equal("x", app.name)
    assert.equal(handler, app.routes["GET /a"])
    assert.equal("clank.App", getmetatable(app).__name)
  end)

  it("copies routes, so later changes to the definition change nothing", function()
    local routes = { ["GET /a"] = handler }
    local app = clank.app { routes = routes }
    routes["GET /b"] = handler
    assert.is_nil(app.routes["GET /b"])
  end)

  local refused = {
    { "an unknown field", { nmae = "x" }, "clank.app: unknown field 'nmae'" },
    { "a field of the wrong type", { name = 3 }, "clank.app: field 'name' must be a string, got number" },
    { "a route without a method", { routes = { ["/a"] = handler } }, "clank.app: route '/a' must be" },
    { "a lower-case method", { routes = { ["get /a"] = handler } }, "clank.app: route 'get /a' must be" },
    { "an unknown method", { routes = { ["FETCH /a"] = handler } }, "clank.app: route 'FETCH /a' must be" },
    { "a route that is not a function", { routes = { ["GET /a"] = "x" } },
      "clank.app: route 'GET /a' must be a function, got string" },
    { "GET /manifest", { routes = { ["GET /manifest"] = handler } },
      "clank.app: route 'GET /manifest' collides with the reserved path /manifest" },
    { "/.well-known/clank", { routes = { ["GET /.well-known/clank"] = handler } },
      "collides with the reserved path /.well-known/clank" },
    { "a path under /actions/", { routes = { ["POST /actions/x"] = handler } },
      "collides with the reserved path /actions/x" },
    { "a path under /__clank/", { routes = { ["GET /__clank/mcp"] = handler } },
      "collides with the reserved path /__clank/mcp" },
    { "a path under /views/", { routes = { ["GET /views/list"] = handler } },
      "collides with the reserved path /views/list" },
    { "GET / when the app has views", { views = { {} }, routes = { ["GET /"] = handler } },
      "collides with the reserved path /" },
    { "a pattern with an empty parameter name", { routes = { ["GET /a/:"] = handler } },
      "clank.app: route 'GET /a/:' is not a valid pattern: it has an empty parameter name" },
    { "a pattern with * before its last segment", { routes = { ["GET /a/*r/b"] = handler } },
      "clank.app: route 'GET /a/*r/b' is not a valid pattern: it has *r before its last segment" },
    { "a pattern naming a parameter twice", { routes = { ["GET /a/:x/:x"] = handler } },
      "clank.app: route 'GET /a/:x/:x' is not a valid pattern: it names the parameter 'x' twice" },
    { "two patterns of the same shape", { routes = { ["GET /a/:x"] = handler, ["GET /a/:y"] = handler } },
      "clank.app: routes 'GET /a/:x' and 'GET /a/:y' can never be told apart" },
    { "a pattern under /actions/", { routes = { ["POST /actions/:x"] = handler } },
      "clank.app: route 'POST /actions/:x' collides with the reserved path /actions/" },
    { "a pattern at / when the app has views", { views = { {} }, routes = { ["GET /:page"] = handler } },
      "clank.app: route 'GET /:page' collides with the reserved path /" },
    { "an origin with a path", { allowedOrigins = { "http://localhost:5173/x" } },
      "clank.app: allowedOrigins[1] must be an origin" },
    { "an origin without a scheme", { allowedOrigins = { "localhost:5173" } },
      "clank.app: allowedOrigins[1] must be an origin" },
    { "a non-positive actionTimeout", { actionTimeout = 0 }, "clank.app: actionTimeout must be a positive" },
    { "a bodyLimit over 64 MiB", { routes = { ["POST /u"] = { handler = handler, bodyLimit = 64 * 1024 * 1024 + 1 } } },
      "clank.app: route 'POST /u': bodyLimit must be an integer from 1 to 67108864 (64 MiB)" },
    { "a bodyLimit that is not an integer", { routes = { ["POST /u"] = { handler = handler, bodyLimit = 1.5 } } },
      "clank.app: route 'POST /u': bodyLimit must be an integer" },
    { "a route table without a handler", { routes = { ["POST /u"] = { bodyLimit = 10 } } },
      "clank.app: route 'POST /u': handler must be a function, got nil" },
    { "an unknown route field", { routes = { ["POST /u"] = { handler = handler, bodylimit = 10 } } },
      "clank.app: route 'POST /u': unknown field 'bodylimit'" },
    { "a crossSite that is not a boolean", { routes = { ["POST /u"] = { handler = handler, crossSite = "yes" } } },
      "clank.app: route 'POST /u': crossSite must be a boolean" },
  }
  for _, case in ipairs(refused) do
    it("refuses " .. case[1] .. ", naming it", function()
      local ok, err = pcall(clank.app, case[2])
      assert.is_false(ok)
      assert.matches(case[3], err, 1, true)
    end)
  end

  it("reports errors at the caller's line", function()
    -- not a tail call: `return clank.app {...}` leaves no caller frame to name
    local ok, err = pcall(function() local app = clank.app { bogus = 1 }; return app end)
    assert.is_false(ok)
    assert.matches("app_spec.lua:%d+: clank.app: unknown field 'bogus'", err)
  end)

  it("keeps a route given as { handler, bodyLimit, crossSite }", function()
    local route = { handler = handler, bodyLimit = 64 * 1024 * 1024, crossSite = true }
    local app = clank.app { routes = { ["POST /u"] = route } }
    assert.equal(route, app.routes["POST /u"])
  end)

  it("allows GET / when the app has no views", function()
    local app = clank.app { routes = { ["GET /"] = handler } }
    assert.equal(handler, app.routes["GET /"])
  end)
end)
