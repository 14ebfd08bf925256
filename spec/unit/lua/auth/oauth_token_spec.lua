-- clank.auth's OAuth token endpoint (RFC 6749 §4.1.3, §5, §6; PKCE RFC 7636; rotation and
-- reuse OAuth 2.1 §4.3.1, RFC 9700 §4.14), revocation (RFC 7009) and the access tokens
-- authenticate takes, through auth:handle and auth:authenticate with request tables as the
-- runtime makes them. On SQLite, and on PostgreSQL when CLANK_TEST_POSTGRES_URL is set.
local clank = require "clank"
local core = require "clank.core"
local live_token = require "clank.live.token"
local auth = require "clank.auth"
local H = require "helpers.auth"
local O = require "helpers.oauth"

local json = clank.json
local it_runs = H.it_runs

local SECOND, MINUTE, HOUR = 1000, 60000, 3600000

local function hex(s) return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end

teardown(H.removeAll)

describe("clank.auth OAuth tokens", function()
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

    local function tokens(more, scope)
      local code = O.code(a, cookie, client, { scope = scope })
      local r, body = O.token(a, O.exchange(client, code, more))
      assert.are.equal(200, r.status, r.body)
      return body
    end

    local function assert_error(r, body, status, code)
      assert.are.equal(status, r.status, r.body)
      assert.are.equal(code, body.error)
      assert.is_string(body.error_description)
      assert.are.equal("application/json", r.headers["content-type"])
      assert.are.equal("no-store", r.headers["cache-control"])
      assert.are.equal("*", r.headers["access-control-allow-origin"])
    end

    describe("an authorization code", function()
      it_runs("gives an access token, a refresh token and the scope", function()
        local code = O.code(a, cookie, client)
        local r, body = O.token(a, O.exchange(client, code))
        assert.are.equal(200, r.status, r.body)
        assert.are.equal("application/json", r.headers["content-type"])
        assert.are.equal("no-store", r.headers["cache-control"])
        assert.are.equal("*", r.headers["access-control-allow-origin"])
        assert.are.same({ "access_token", "expires_in", "refresh_token", "scope", "token_type" },
          (function()
            local keys = {}
            for k in pairs(body) do keys[#keys + 1] = k end
            table.sort(keys)
            return keys
          end)())
        assert.are.equal("Bearer", body.token_type)
        assert.are.equal(3600, body.expires_in)
        assert.are.equal("agent:read", body.scope)
        assert.truthy(body.access_token:find("^clank_at_[%w_-]+$"), body.access_token)
        assert.are.equal(9 + 43, #body.access_token)
        assert.truthy(body.refresh_token:find("^clank_rt_[%w_-]+$"), body.refresh_token)
        assert.are.equal(9 + 43, #body.refresh_token)
        -- stored as SHA-256 hex, never as they are
        local rows = db:query("SELECT hash, kind FROM clank_oauth_tokens ORDER BY kind")
        assert.are.equal(2, #rows)
        assert.are.same({ hash = hex(core.sha256(body.access_token)), kind = "access" }, rows[1])
        assert.are.same({ hash = hex(core.sha256(body.refresh_token)), kind = "refresh" }, rows[2])
        assert.is_nil(db:one("SELECT hash FROM clank_oauth_codes WHERE hash = $1", code))
      end)

      it_runs("gives an access token that authenticates on the MCP endpoint", function()
        local body = tokens()
        local user, credential = O.bearer(a, body.access_token)
        assert.are.same({ id = 1, email = "ada@example.com", roles = {}, epoch = 0 }, user)
        assert.are.same({ kind = "oauth", grantId = 1, clientId = client, clientName = "Test Client",
          scope = "read", scopes = "agent:read" }, credential)
      end)

      it_runs("with agent:write gives a credential of scope write", function()
        local body = tokens(nil, "agent:write agent:read")
        assert.are.equal("agent:read agent:write", body.scope)
        local _, credential = O.bearer(a, body.access_token)
        assert.are.equal("write", credential.scope)
        assert.are.equal("agent:read agent:write", credential.scopes)
      end)

      it_runs("may leave out resource (it is the code's)", function()
        local code = O.code(a, cookie, client)
        local r = O.token(a, O.exchange(client, code, { resource = false }))
        assert.are.equal(200, r.status, r.body)
      end)

      it_runs("is refused without a code_verifier, and then still works with it", function()
        local code = O.code(a, cookie, client)
        local r, body = O.token(a, O.exchange(client, code, { code_verifier = false }))
        assert_error(r, body, 400, "invalid_request")
        assert.is_nil(db:one("SELECT hash FROM clank_oauth_tokens"))
        r = O.token(a, O.exchange(client, code))
        assert.are.equal(200, r.status, r.body)
      end)

      it_runs("is refused with a wrong code_verifier (invalid_grant), issuing nothing", function()
        local code = O.code(a, cookie, client)
        -- well-formed, 43 characters, not the one of the challenge
        local wrong = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXK"
        local r, body = O.token(a, O.exchange(client, code, { code_verifier = wrong }))
        assert_error(r, body, 400, "invalid_grant")
        -- the challenge itself is no verifier either (what a client using plain would send)
        r, body = O.token(a, O.exchange(client, code, { code_verifier = O.CHALLENGE }))
        assert_error(r, body, 400, "invalid_grant")
        assert.is_nil(db:one("SELECT hash FROM clank_oauth_tokens"))
      end)

      it_runs("is refused with a verifier outside RFC 7636's length and alphabet", function()
        local code = O.code(a, cookie, client)
        for _, verifier in ipairs { ("a"):rep(42), ("a"):rep(129), O.VERIFIER:sub(1, 42) .. "+",
          O.VERIFIER:sub(1, 42) .. "=", O.VERIFIER:sub(1, 42) .. " " } do
          local r, body = O.token(a, O.exchange(client, code, { code_verifier = verifier }))
          assert_error(r, body, 400, "invalid_request")
        end
        -- 128 characters is in, and just not the one
        local r, body = O.token(a, O.exchange(client, code, { code_verifier = ("a"):rep(128) }))
        assert_error(r, body, 400, "invalid_grant")
      end)

      it_runs("used twice is invalid_grant, and revokes what the first use gave", function()
        local code = O.code(a, cookie, client)
        local r, first = O.token(a, O.exchange(client, code))
        assert.are.equal(200, r.status)
        assert.is_table(O.bearer(a, first.access_token))
        local body
        r, body = O.token(a, O.exchange(client, code))
        assert_error(r, body, 400, "invalid_grant")
        assert.is_nil(O.bearer(a, first.access_token))
        r, body = O.token(a, { grant_type = "refresh_token", refresh_token = first.refresh_token,
          client_id = client })
        assert_error(r, body, 400, "invalid_grant")
        assert.is_nil(db:one("SELECT hash FROM clank_oauth_tokens"))
        assert.is_nil(db:one("SELECT id FROM clank_oauth_grants"))
      end)

      it_runs("expires after 60 seconds", function()
        local code = O.code(a, cookie, client)
        clock.advance(60 * SECOND)
        local r, body = O.token(a, O.exchange(client, code))
        assert_error(r, body, 400, "invalid_grant")
        local fresh_code = O.code(a, cookie, client)
        clock.advance(59 * SECOND)
        r = O.token(a, O.exchange(client, fresh_code))
        assert.are.equal(200, r.status, r.body)
      end)

      it_runs("is refused for another redirect_uri, client or resource", function()
        local other = O.register(a, { redirect_uris = { O.REDIRECT } })
        local code = O.code(a, cookie, client)
        local cases = {
          { { redirect_uri = O.REDIRECT .. "x" }, "invalid_grant" },
          { { redirect_uri = O.LOOPBACK }, "invalid_grant" },
          { { client_id = other }, "invalid_grant" },
          { { resource = "http://app.test/__clank/mcp/" }, "invalid_target" },
          { { resource = "http://other.test/__clank/mcp" }, "invalid_target" },
          { { redirect_uri = false }, "invalid_request" },
          { { client_id = false }, "invalid_request" },
          { { code = false }, "invalid_request" },
          { { code = "nope" }, "invalid_grant" },
          { { code = live_token.encode64(core.randomBytes(32)) }, "invalid_grant" },
        }
        for _, case in ipairs(cases) do
          local r, body = O.token(a, O.exchange(client, code, case[1]))
          assert_error(r, body, 400, case[2])
        end
        assert.are.equal(200, O.token(a, O.exchange(client, code)).status)
      end)
    end)

    describe("the endpoint", function()
      it_runs("takes only forms, known grant types and no client credentials", function()
        local code = O.code(a, cookie, client)
        local r = O.post(a, "/__clank/oauth/token", { json = O.exchange(client, code) })
        assert_error(r, json.decode(r.body), 400, "invalid_request")
        local body
        r, body = O.token(a, { grant_type = "password", username = "ada@example.com", password = O.PASSWORD })
        assert_error(r, body, 400, "unsupported_grant_type")
        r, body = O.token(a, { grant_type = "client_credentials" })
        assert_error(r, body, 400, "unsupported_grant_type")
        r, body = O.token(a, { code = code })
        assert_error(r, body, 400, "invalid_request")
        r, body = O.token(a, O.exchange(client, code, { client_secret = "s3cret" }))
        assert_error(r, body, 401, "invalid_client")
        r = O.post(a, "/__clank/oauth/token", { form = O.exchange(client, code),
          headers = { authorization = "Basic " .. live_token.encode64(client .. ":x") } })
        assert_error(r, json.decode(r.body), 401, "invalid_client")
        assert.are.equal(200, O.token(a, O.exchange(client, code)).status)
      end)

      it_runs("answers GET with 405 and OPTIONS with a CORS preflight", function()
        local r = O.get(a, "/__clank/oauth/token")
        assert.are.equal(405, r.status)
        assert.are.equal("POST, OPTIONS", r.headers.allow)
        r = a:handle(O.request { method = "OPTIONS", path = "/__clank/oauth/token",
          headers = { origin = "https://inspector.example", ["access-control-request-method"] = "POST" } })
        assert.are.equal(204, r.status)
        assert.are.equal("*", r.headers["access-control-allow-origin"])
        assert.are.equal("POST, OPTIONS", r.headers["access-control-allow-methods"])
        assert.are.equal("authorization, content-type, mcp-protocol-version",
          r.headers["access-control-allow-headers"])
      end)

      it_runs("takes a cross-site POST (browser-based clients, no cookies)", function()
        local code = O.code(a, cookie, client)
        local r = O.post(a, "/__clank/oauth/token", { form = O.exchange(client, code),
          headers = { ["sec-fetch-site"] = "cross-site", origin = "https://inspector.example" } })
        assert.are.equal(200, r.status, r.body)
      end)
    end)

    describe("a refresh token", function()
      local function refresh(value, more)
        local f = { grant_type = "refresh_token", refresh_token = value, client_id = client }
        for k, v in pairs(more or {}) do f[k] = v or nil end
        return O.token(a, f)
      end

      it_runs("gives a new pair, and the old access token keeps its hour", function()
        local first = tokens()
        clock.advance(10 * MINUTE)
        local r, second = refresh(first.refresh_token)
        assert.are.equal(200, r.status, r.body)
        assert.are.equal("no-store", r.headers["cache-control"])
        assert.are.equal("Bearer", second.token_type)
        assert.are.equal(3600, second.expires_in)
        assert.are.equal("agent:read", second.scope)
        assert.are_not.equal(first.access_token, second.access_token)
        assert.are_not.equal(first.refresh_token, second.refresh_token)
        assert.truthy(second.access_token:find("^clank_at_[%w_-]+$"))
        assert.truthy(second.refresh_token:find("^clank_rt_[%w_-]+$"))
        assert.is_table(O.bearer(a, second.access_token))
        assert.is_table(O.bearer(a, first.access_token))
        clock.advance(50 * MINUTE)
        assert.is_nil(O.bearer(a, first.access_token)) -- its hour is over
        assert.is_table(O.bearer(a, second.access_token))
        r = refresh(second.refresh_token)
        assert.are.equal(200, r.status, r.body)
      end)

      it_runs("reused within 60 seconds answers the same new pair", function()
        local first = tokens()
        local r, second = refresh(first.refresh_token)
        assert.are.equal(200, r.status)
        clock.advance(30 * SECOND)
        local again
        r, again = refresh(first.refresh_token)
        assert.are.equal(200, r.status, r.body)
        assert.are.equal(second.access_token, again.access_token)
        assert.are.equal(second.refresh_token, again.refresh_token)
        assert.are.equal(3570, again.expires_in)
        assert.are.equal("agent:read", again.scope)
        clock.advance(30 * SECOND) -- 60 s exactly: still the window
        r, again = refresh(first.refresh_token)
        assert.are.equal(200, r.status, r.body)
        assert.are.equal(second.refresh_token, again.refresh_token)
        -- the pair works, and the new refresh token goes on
        assert.is_table(O.bearer(a, second.access_token))
        r = refresh(second.refresh_token)
        assert.are.equal(200, r.status, r.body)
      end)

      it_runs("reused after 60 seconds is invalid_grant and revokes the grant", function()
        local first = tokens()
        local r, second = refresh(first.refresh_token)
        assert.are.equal(200, r.status)
        clock.advance(60 * SECOND + 1)
        local body
        r, body = refresh(first.refresh_token)
        assert_error(r, body, 400, "invalid_grant")
        assert.is_nil(O.bearer(a, second.access_token))
        assert.is_nil(O.bearer(a, first.access_token))
        r, body = refresh(second.refresh_token)
        assert_error(r, body, 400, "invalid_grant")
        assert.is_nil(db:one("SELECT id FROM clank_oauth_grants"))
        assert.is_nil(db:one("SELECT hash FROM clank_oauth_tokens"))
      end)

      it_runs("is refused for another client, a bad token, or an access token", function()
        local first = tokens()
        local other = O.register(a, { redirect_uris = { O.REDIRECT } })
        local cases = {
          { { client_id = other }, "invalid_grant" },
          { { client_id = false }, "invalid_request" },
          { { refresh_token = false }, "invalid_request" },
          { { refresh_token = first.access_token }, "invalid_grant" },
          { { refresh_token = "clank_rt_" .. live_token.encode64(core.randomBytes(32)) }, "invalid_grant" },
          { { refresh_token = first.refresh_token .. "x" }, "invalid_grant" },
          { { scope = "agent:write" }, "invalid_scope" },
          { { scope = "admin" }, "invalid_scope" },
          { { resource = "http://other.test/__clank/mcp" }, "invalid_target" },
        }
        for _, case in ipairs(cases) do
          local r, body = refresh(first.refresh_token, case[1])
          assert_error(r, body, 400, case[2])
        end
        local r = refresh(first.refresh_token)
        assert.are.equal(200, r.status, r.body)
      end)

      it_runs("may ask for less scope than the grant's", function()
        local first = tokens(nil, "agent:read agent:write")
        local r, second = refresh(first.refresh_token, { scope = "agent:read" })
        assert.are.equal(200, r.status, r.body)
        assert.are.equal("agent:read", second.scope)
        local _, credential = O.bearer(a, second.access_token)
        assert.are.equal("read", credential.scope)
      end)

      it_runs("expires after 30 days unused", function()
        local first = tokens()
        clock.advance(30 * 24 * HOUR)
        local r, body = refresh(first.refresh_token)
        assert_error(r, body, 400, "invalid_grant")
      end)
    end)

    describe("revocation", function()
      local function revoke(fields)
        return O.post(a, "/__clank/oauth/revoke", { form = fields })
      end

      it_runs("of an access token ends it alone", function()
        local body = tokens()
        local r = revoke { token = body.access_token, token_type_hint = "access_token" }
        assert.are.equal(200, r.status)
        assert.are.equal("*", r.headers["access-control-allow-origin"])
        assert.is_nil(O.bearer(a, body.access_token))
        local refreshed = O.token(a, { grant_type = "refresh_token", refresh_token = body.refresh_token,
          client_id = client })
        assert.are.equal(200, refreshed.status)
      end)

      it_runs("of a refresh token ends its grant's tokens", function()
        local body = tokens()
        local r = revoke { token = body.refresh_token, client_id = client }
        assert.are.equal(200, r.status)
        assert.is_nil(O.bearer(a, body.access_token))
        local refreshed, err = O.token(a, { grant_type = "refresh_token", refresh_token = body.refresh_token,
          client_id = client })
        assert_error(refreshed, err, 400, "invalid_grant")
      end)

      it_runs("answers 200 for anything, and revokes nothing for another client", function()
        local body = tokens()
        local other = O.register(a, { redirect_uris = { O.REDIRECT } })
        for _, fields in ipairs {
          { token = "nope" }, { token = "clank_at_" .. live_token.encode64(core.randomBytes(32)) },
          { token = body.access_token, client_id = other }, { token = body.refresh_token, client_id = other },
        } do
          assert.are.equal(200, revoke(fields).status)
        end
        assert.is_table(O.bearer(a, body.access_token))
        local r = revoke {}
        assert.are.equal(400, r.status)
        assert.are.equal("invalid_request", json.decode(r.body).error)
      end)
    end)

    describe("authenticate with an access token", function()
      it_runs("is nobody for another resource: another origin or path", function()
        local body = tokens()
        assert.is_table(O.bearer(a, body.access_token))
        assert.is_nil(O.bearer(a, body.access_token, "/__clank/mcp", "other.test"))
        assert.is_nil(O.bearer(a, body.access_token, "/__clank/mcp", "app.test:8080"))
        assert.is_nil(O.bearer(a, body.access_token, "/actions/list"))
        assert.is_nil(O.bearer(a, body.access_token, "/__clank/auth/me"))
        assert.is_nil(O.bearer(a, body.access_token, "/__clank/mcp/"))
        local me = O.get(a, "/__clank/auth/me", { headers = { authorization = "Bearer " .. body.access_token } })
        assert.are.equal(401, me.status)
        -- https://app.test is another origin than http://app.test
        assert.is_nil(a:authenticate(O.request { path = "/__clank/mcp", scheme = "https",
          headers = { authorization = "Bearer " .. body.access_token } }))
      end)

      it_runs("is for baseUrl's resource when the app gives one", function()
        a = auth { db = db, clock = clock, passwordParams = H.CHEAP, baseUrl = "https://tasks.example" }
        local code = O.code(a, cookie, client, { resource = "https://tasks.example/__clank/mcp" })
        local r, body = O.token(a, O.exchange(client, code, { resource = "https://tasks.example/__clank/mcp" }))
        assert.are.equal(200, r.status, r.body)
        assert.is_table(O.bearer(a, body.access_token))
        assert.is_table(O.bearer(a, body.access_token, "/__clank/mcp", "anything.test"))
      end)

      it_runs("is nobody once the grant is revoked, or the token expired", function()
        local body = tokens()
        clock.advance(10 * MINUTE)
        local second = tokens() -- the same grant: (person, client)
        clock.advance(50 * MINUTE - 1)
        assert.is_table(O.bearer(a, body.access_token))
        clock.advance(1)
        assert.is_nil(O.bearer(a, body.access_token))
        assert.is_table(O.bearer(a, second.access_token))
        local r = O.post(a, "/__clank/auth/grants", { cookie = cookie, json = { grant = 1 } })
        assert.are.equal(200, r.status, r.body)
        assert.is_nil(O.bearer(a, second.access_token))
      end)

      it_runs("is nobody for a forged or malformed one; personal tokens still work", function()
        local body = tokens()
        local t = body.access_token
        local last = t:sub(-1) == "A" and "Q" or "A"
        for _, value in ipairs { t:sub(1, -2) .. last, t .. "A", t:sub(1, -2), "clank_at_",
          "clank_at_" .. ("A"):rep(43), body.refresh_token } do
          assert.is_nil(O.bearer(a, value), value)
        end
        local personal = json.decode(O.post(a, "/__clank/auth/tokens", { cookie = cookie,
          json = { name = "cli" } }).body).token
        local user, credential = O.bearer(a, personal, "/actions/list")
        assert.are.equal("ada@example.com", user.email)
        assert.are.equal("token", credential.kind)
        assert.is_table(a:authenticate(O.request { cookie = cookie }))
      end)

      it_runs("writes the grant's last_used at most once a minute", function()
        local body = tokens()
        local function last_used() return db:one("SELECT last_used FROM clank_oauth_grants").last_used end
        assert.are.equal(json.null, last_used())
        assert.is_table(O.bearer(a, body.access_token))
        assert.are.equal(H.START, last_used())
        clock.advance(59 * SECOND)
        assert.is_table(O.bearer(a, body.access_token))
        assert.are.equal(H.START, last_used())
        clock.advance(SECOND)
        assert.is_table(O.bearer(a, body.access_token))
        assert.are.equal(H.START + MINUTE, last_used())
      end)

      it_runs("is nobody when OAuth is off", function()
        local body = tokens()
        local off = auth { db = db, clock = clock, passwordParams = H.CHEAP, oauth = false }
        assert.is_nil(O.bearer(off, body.access_token))
      end)
    end)
  end)
end)
