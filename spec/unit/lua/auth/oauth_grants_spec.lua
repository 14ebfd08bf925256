-- clank.auth's grants page (/__clank/auth/grants): the apps a signed-in person let in, in HTML
-- and JSON, and revoking one (a form's 303, or JSON), which ends its tokens at once. On SQLite,
-- and on PostgreSQL when CLANK_TEST_POSTGRES_URL is set.
local clank = require "clank"
local auth = require "clank.auth"
local H = require "helpers.auth"
local O = require "helpers.oauth"

local json = clank.json
local it_runs = H.it_runs

local MINUTE = 60000
local PATH = "/__clank/auth/grants"

teardown(H.removeAll)

describe("clank.auth OAuth grants page", function()
  H.each_backend(function(fresh)
    local db, cleanup, clock, a, cookie, client
    before_each(function()
      db, cleanup = fresh()
      clock = H.clock()
      a = auth { db = db, clock = clock, passwordParams = H.CHEAP }
      H.run(function()
        cookie = O.signIn(a, "ada@example.com")
        client = O.register(a)
      end)
    end)
    after_each(function() cleanup() end)

    -- A grant for the client, as cookie's person → the token answer.
    local function connect(who, c, scope)
      local code = O.code(a, who or cookie, c or client, { scope = scope })
      local r, body = O.token(a, O.exchange(c or client, code))
      assert.are.equal(200, r.status, r.body)
      return body
    end

    local function list(who)
      local r = O.get(a, PATH, { cookie = who or cookie, headers = { accept = "application/json" } })
      assert.are.equal(200, r.status, r.body)
      assert.are.equal("no-store", r.headers["cache-control"])
      return json.decode(r.body), r
    end

    it_runs("sends someone not signed in to sign in first (401 in JSON)", function()
      local r = O.get(a, PATH)
      assert.are.equal(303, r.status)
      assert.are.equal("/__clank/auth/login?next=%2F__clank%2Fauth%2Fgrants", r.headers.location)
      r = O.get(a, PATH, { headers = { accept = "application/json" } })
      assert.are.equal(401, r.status)
      assert.are.equal('{"error":{"code":"UNAUTHORIZED","message":"Sign in first."},"ok":false}', r.body)
      -- a personal token is no sign-in here
      local token = json.decode(O.post(a, "/__clank/auth/tokens", { cookie = cookie, json = { name = "cli" } }).body)
        .token
      r = O.get(a, PATH, { headers = { accept = "application/json", authorization = "Bearer " .. token } })
      assert.are.equal(401, r.status)
    end)

    it_runs("lists nothing before any app is let in", function()
      local r = O.get(a, PATH, { cookie = cookie })
      assert.are.equal(200, r.status)
      assert.are.equal("text/html; charset=utf-8", r.headers["content-type"])
      assert.truthy(r.body:find("<h1>Connected apps</h1><p>No app has access to your account.</p>", 1, true), r.body)
      local body = list()
      assert.are.equal('{"grants":[],"ok":true}', json.encode(body))
    end)

    it_runs("lists the person's grants in JSON, with when they were made and last used", function()
      local tokens = connect()
      local other = O.register(a, { redirect_uris = { O.REDIRECT } })
      clock.advance(MINUTE)
      connect(nil, other, "agent:read agent:write")
      connect(O.signIn(a, "eve@example.com"), client) -- someone else's: not listed
      clock.advance(MINUTE)
      assert.is_table(O.bearer(a, tokens.access_token))
      assert.are.same({ ok = true, grants = {
        { id = 1, clientId = client, clientName = "Test Client", scope = "agent:read",
          createdAt = H.START, updatedAt = H.START, lastUsed = H.START + 2 * MINUTE },
        { id = 2, clientId = other, clientName = other, scope = "agent:read agent:write",
          createdAt = H.START + MINUTE, updatedAt = H.START + MINUTE, lastUsed = json.null },
      } }, list())
    end)

    it_runs("shows each grant with its scopes, dates and a Revoke form", function()
      connect(nil, nil, "agent:read agent:write")
      clock.advance(90 * MINUTE)
      local r = O.get(a, PATH, { cookie = cookie })
      assert.are.equal(200, r.status)
      local body = r.body
      assert.truthy(body:find("<h1>Connected apps</h1><p>These apps can use your account until you revoke them.</p>",
        1, true), body)
      assert.truthy(body:find('<div class="oauth-grant"><h2>Test Client</h2>' ..
        "<p>Can: Read your data (agent:read), Change your data (agent:write)</p>" ..
        '<p class="oauth-note">Allowed 2023-11-14 22:13 UTC. Last used never.</p>' ..
        '<form action="/__clank/auth/grants" method="post"><input name="grant" type="hidden" value="1">' ..
        '<button type="submit">Revoke</button></form></div>', 1, true), body)
      local csp = r.headers["content-security-policy"]
      assert.truthy(csp:find("form%-action 'self'$"), csp)
    end)

    it_runs("revokes a grant from its form: 303 back, and its tokens are dead at once", function()
      local tokens = connect()
      assert.is_table(O.bearer(a, tokens.access_token))
      local r = O.post(a, PATH, { cookie = cookie, form = { grant = "1" } })
      assert.are.equal(303, r.status)
      assert.are.equal(PATH, r.headers.location)
      assert.is_nil(O.bearer(a, tokens.access_token))
      local refreshed, err = O.token(a, { grant_type = "refresh_token", refresh_token = tokens.refresh_token,
        client_id = client })
      assert.are.equal(400, refreshed.status)
      assert.are.equal("invalid_grant", err.error)
      assert.are.equal('{"grants":[],"ok":true}', json.encode((list())))
      assert.is_nil(db:one("SELECT hash FROM clank_oauth_tokens"))
      assert.is_nil(db:one("SELECT hash FROM clank_oauth_codes"))
    end)

    it_runs("revokes in JSON, and a code not yet exchanged dies with its grant", function()
      local code = O.code(a, cookie, client)
      local r = O.post(a, PATH, { cookie = cookie, json = { grant = 1 } })
      assert.are.equal(200, r.status)
      assert.are.equal('{"ok":true}', r.body)
      local answer, err = O.token(a, O.exchange(client, code))
      assert.are.equal(400, answer.status)
      assert.are.equal("invalid_grant", err.error)
    end)

    it_runs("another Auth on the same database (another worker) sees the revocation", function()
      local tokens = connect()
      local worker = auth { db = db, clock = clock, passwordParams = H.CHEAP }
      assert.is_table(O.bearer(worker, tokens.access_token))
      assert.are.equal(303, O.post(a, PATH, { cookie = cookie, form = { grant = "1" } }).status)
      assert.is_nil(O.bearer(worker, tokens.access_token))
    end)

    it_runs("cannot revoke someone else's grant, or one that is not there", function()
      local tokens = connect()
      local eve = O.signIn(a, "eve@example.com")
      local r = O.post(a, PATH, { cookie = eve, json = { grant = 1 } })
      assert.are.equal(404, r.status)
      assert.are.equal('{"error":{"code":"NOT_FOUND","message":"No such grant."},"ok":false}', r.body)
      r = O.post(a, PATH, { cookie = eve, form = { grant = "1" } })
      assert.are.equal(404, r.status)
      assert.are.equal("text/html; charset=utf-8", r.headers["content-type"])
      assert.is_table(O.bearer(a, tokens.access_token))
      for _, bad in ipairs { "x", "", "1.5", ("9"):rep(19) } do
        r = O.post(a, PATH, { cookie = cookie, json = { grant = bad } })
        assert.are.equal(422, r.status, bad)
      end
      assert.are.equal(404, O.post(a, PATH, { cookie = cookie, json = { grant = 99 } }).status)
      assert.are.equal(401, O.post(a, PATH, { json = { grant = 1 } }).status)
      assert.is_table(O.bearer(a, tokens.access_token))
    end)

    it_runs("refuses a cross-site POST", function()
      local tokens = connect()
      local r = O.post(a, PATH, { cookie = cookie, form = { grant = "1" },
        headers = { ["sec-fetch-site"] = "cross-site" } })
      assert.are.equal(403, r.status)
      assert.is_table(O.bearer(a, tokens.access_token))
    end)
  end)
end)
