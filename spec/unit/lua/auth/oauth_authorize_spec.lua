-- clank.auth's OAuth authorization endpoint (RFC 6749 §4.1.1–§4.1.2.1 as OAuth 2.1 has them,
-- PKCE RFC 7636, RFC 8252 §7.3, RFC 8707, RFC 9207): the error page for a client or redirect URI
-- that is not known good (never a redirect), the errors sent back to a good one, sign-in first,
-- the consent page and its one-time form. On SQLite, and on PostgreSQL when
-- CLANK_TEST_POSTGRES_URL is set.
local clank = require "clank"
local input = require "clank.auth.input"
local auth = require "clank.auth"
local H = require "helpers.auth"
local O = require "helpers.oauth"

local json = clank.json
local it_runs = H.it_runs

local MINUTE = 60000
local ISS = "iss=http%3A%2F%2Fapp.test"

teardown(H.removeAll)

describe("clank.auth OAuth authorize", function()
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

    local function error_page(r, status)
      assert.are.equal(status or 400, r.status, r.body)
      assert.is_nil(r.headers.location)
      assert.are.equal("text/html; charset=utf-8", r.headers["content-type"])
      assert.are.equal("no-store", r.headers["cache-control"])
      assert.truthy(r.body:find("<h1>This app cannot sign in here</h1>", 1, true), r.body)
    end

    local function pending_requests() return #db:query("SELECT hash FROM clank_oauth_requests") end

    describe("a client or redirect URI that is not known good", function()
      it_runs("is an error page, never a redirect", function()
        local cases = {
          { client_id = false }, { client_id = "" }, { client_id = "no-such-client" },
          { redirect_uri = false }, { redirect_uri = "" },
          -- one character off, each way
          { redirect_uri = O.REDIRECT .. "x" }, { redirect_uri = O.REDIRECT:sub(1, -2) },
          { redirect_uri = O.REDIRECT .. "/" }, { redirect_uri = "https://client.example/oauth/callbacK" },
          { redirect_uri = "https://client.exampl/oauth/callback" },
          { redirect_uri = O.REDIRECT .. "?next=https://evil.example" },
          { redirect_uri = O.REDIRECT .. "#x" },
          -- another site (an open redirect, if it went there)
          { redirect_uri = "https://evil.example/oauth/callback" },
          { redirect_uri = "https://client.example.evil.example/oauth/callback" },
          { redirect_uri = "https://client.example@evil.example/oauth/callback" },
          { redirect_uri = "//evil.example/oauth/callback" },
          -- https keeps its port: only loopback redirects may change it
          { redirect_uri = "https://client.example:8443/oauth/callback" },
          { redirect_uri = "http://client.example/oauth/callback" },
          -- a loopback one with another path, host or scheme
          { redirect_uri = "http://127.0.0.1:8123/callback/x" }, { redirect_uri = "http://127.0.0.1:8123/" },
          { redirect_uri = "http://localhost:8123/callback" }, { redirect_uri = "http://[::1]:8123/callback" },
          { redirect_uri = "https://127.0.0.1:8123/callback" },
        }
        for _, more in ipairs(cases) do
          -- the errors after these would redirect: they must not be reached
          more.response_type, more.code_challenge_method = "token", "plain"
          local r = O.authorize(a, O.query(client, more), cookie)
          error_page(r)
        end
        error_page(O.authorize(a, O.query(client, { redirect_uri = "https://evil.example/cb" })))
        assert.are.equal(0, pending_requests())
      end)

      it_runs("says why in words", function()
        local r = O.authorize(a, O.query("no-such-client"), cookie)
        assert.truthy(r.body:find("This client is not registered here.", 1, true))
        r = O.authorize(a, O.query(client, { redirect_uri = "https://evil.example/cb" }), cookie)
        assert.truthy(r.body:find("The request's redirect_uri is not one this client registered.", 1, true), r.body)
      end)
    end)

    describe("a loopback redirect URI", function()
      it_runs("may come back on another port (RFC 8252 §7.3)", function()
        for _, uri in ipairs { "http://127.0.0.1:51004/callback", "http://127.0.0.1/callback",
          "http://127.0.0.1:8123/callback" } do
          local code_page = O.authorize(a, O.query(client, { redirect_uri = uri }), cookie)
          assert.are.equal(200, code_page.status, uri)
          local r = O.decide(a, cookie, O.requestId(code_page))
          local base, params = O.location(r)
          assert.are.equal(uri, base)
          assert.is_string(params.code)
          assert.are.equal(200, O.token(a, O.exchange(client, params.code, { redirect_uri = uri })).status)
        end
      end)

      it_runs("on [::1] and localhost as registered", function()
        local loop = O.register(a, { redirect_uris = { "http://[::1]/cb", "http://localhost:1/cb" } })
        for _, uri in ipairs { "http://[::1]:3000/cb", "http://localhost:4000/cb" } do
          assert.are.equal(200, O.authorize(a, O.query(loop, { redirect_uri = uri }), cookie).status, uri)
        end
      end)
    end)

    describe("a request from a known client", function()
      -- the errors go back to the client (RFC 6749 §4.1.2.1) with state and iss (RFC 9207)
      local function sent_back(more, code)
        local r = O.authorize(a, O.query(client, more), cookie)
        assert.are.equal(303, r.status, r.body)
        local base, params = O.location(r)
        assert.are.equal(O.REDIRECT, base)
        assert.are.equal(code, params.error, r.headers.location)
        assert.is_string(params.error_description)
        assert.are.equal("st-123", params.state)
        assert.are.equal("http://app.test", params.iss)
        assert.is_nil(params.code)
        return r
      end

      it_runs("is sent back for a response type other than code", function()
        local r = sent_back({ response_type = "token" }, "unsupported_response_type")
        assert.are.equal("https://client.example/oauth/callback?error=unsupported_response_type&" ..
          "error_description=Only%20response_type%3Dcode%20is%20supported.&state=st-123&" .. ISS,
          r.headers.location)
        sent_back({ response_type = false }, "unsupported_response_type")
        sent_back({ response_type = "code token" }, "unsupported_response_type")
      end)

      it_runs("is sent back without PKCE, or with plain (invalid_request)", function()
        sent_back({ code_challenge = false }, "invalid_request")
        sent_back({ code_challenge = "" }, "invalid_request")
        sent_back({ code_challenge_method = "plain" }, "invalid_request")
        sent_back({ code_challenge_method = false }, "invalid_request") -- RFC 7636's default is plain
        sent_back({ code_challenge_method = "s256" }, "invalid_request")
        sent_back({ code_challenge = O.VERIFIER .. "x" }, "invalid_request") -- not a SHA-256
        sent_back({ code_challenge = O.CHALLENGE:sub(1, 42) .. "=" }, "invalid_request")
      end)

      it_runs("is sent back for scopes other than agent:read and agent:write", function()
        for _, scope in ipairs { "admin", "agent:read admin", "openid", "agent:*", "agent:read\tagent:write" } do
          sent_back({ scope = scope }, "invalid_scope")
        end
      end)

      it_runs("is sent back for a resource other than this MCP endpoint", function()
        for _, resource in ipairs { "https://app.test/__clank/mcp", "http://app.test/__clank/mcp/",
          "http://app.test/", "http://app.test", "http://evil.example/__clank/mcp", "" } do
          sent_back({ resource = resource }, "invalid_target")
        end
      end)

      it_runs("is sent back without a state when it came without one", function()
        local r = O.authorize(a, O.query(client, { state = false, response_type = "token" }), cookie)
        assert.are.equal("https://client.example/oauth/callback?error=unsupported_response_type&" ..
          "error_description=Only%20response_type%3Dcode%20is%20supported.&" .. ISS, r.headers.location)
      end)
    end)

    describe("a good request", function()
      it_runs("sends someone not signed in to sign in first, and back here after", function()
        local q = O.query(client)
        local r = O.authorize(a, q)
        assert.are.equal(303, r.status)
        local back = "/__clank/oauth/authorize?client_id=" .. client .. "&code_challenge=" .. O.CHALLENGE ..
          "&code_challenge_method=S256&redirect_uri=https%3A%2F%2Fclient.example%2Foauth%2Fcallback" ..
          "&resource=http%3A%2F%2Fapp.test%2F__clank%2Fmcp&response_type=code&scope=agent%3Aread&state=st-123"
        local base, params = O.location(r)
        assert.are.equal("/__clank/auth/login", base)
        assert.are.equal(back, params.next)
        assert.are.equal(back, input.next(params.next, nil)) -- the sign-in form takes it
        assert.are.equal(0, pending_requests())
        -- signing in with that next comes back to the request
        local login = O.post(a, "/__clank/auth/login", { form = { email = "ada@example.com",
          password = O.PASSWORD, next = params.next } })
        assert.are.equal(303, login.status)
        assert.are.equal(back, login.headers.location)
        local page = O.authorize(a, q, H.cookieOf(login))
        assert.are.equal(200, page.status)
        assert.is_string(O.requestId(page))
        -- the sign-in page carries it in its form
        local form = O.get(a, "/__clank/auth/login", { query = { next = params.next } })
        assert.truthy(form.body:find('value="' .. back:gsub("&", "&amp;") .. '"', 1, true), form.body)
      end)

      it_runs("takes no bearer token for a signed-in person", function()
        local token = json.decode(O.post(a, "/__clank/auth/tokens", { cookie = cookie, json = { name = "cli" } }).body)
          .token
        local r = O.get(a, "/__clank/oauth/authorize", { query = O.query(client),
          headers = { authorization = "Bearer " .. token } })
        assert.are.equal(303, r.status)
        assert.truthy(r.headers.location:find("^/__clank/auth/login%?next="))
      end)

      it_runs("shows the consent page: who asks, where the answer goes, what it may do", function()
        local r = O.authorize(a, O.query(client, { scope = "agent:write agent:read" }), cookie)
        assert.are.equal(200, r.status)
        assert.are.equal("text/html; charset=utf-8", r.headers["content-type"])
        assert.are.equal("no-store", r.headers["cache-control"])
        local csp = r.headers["content-security-policy"]
        assert.truthy(csp:find("form-action 'self' https://client.example", 1, true), csp)
        assert.truthy(csp:find("frame-ancestors 'none'", 1, true), csp)
        local body = r.body
        assert.truthy(body:find("<strong>Test Client</strong> wants to use your account.", 1, true), body)
        assert.is_nil(body:find("describes itself", 1, true)) -- a registered client: no document
        -- a box per scope asked, ticked, in the form: the person may grant less
        assert.truthy(body:find('<fieldset class="oauth-scopes"><legend>It will be able to:</legend>' ..
          '<input name="scope" type="hidden" value="">' ..
          '<label><input checked name="scope" type="checkbox" value="agent:read">Read your data (agent:read)</label>' ..
          '<label><input checked name="scope" type="checkbox" value="agent:write">Change your data (agent:write)' ..
          '</label></fieldset>', 1, true), body)
        assert.truthy(body:find("Signed in as ada@example.com. Your answer goes to <strong>client.example</strong>.",
          1, true), body)
        assert.truthy(body:find('<form action="/__clank/oauth/authorize" method="post">', 1, true), body)
        assert.truthy(body:find('<button name="decision" type="submit" value="approve">Approve</button>', 1, true))
        assert.truthy(body:find('value="deny">Deny</button>', 1, true))
        assert.is_nil(body:find('role="alert"', 1, true))
        -- the form carries the request id and nothing else of the request (the empty scope
        -- only tells a form with no box ticked from a POST without the field)
        local hidden = {}
        for tag in body:gmatch('<input[^>]* type="hidden"[^>]*>') do hidden[#hidden + 1] = tag end
        assert.are.same({ '<input name="request" type="hidden" value="' .. O.requestId(r) .. '">',
          '<input name="scope" type="hidden" value="">' }, hidden)
        local id = O.requestId(r)
        assert.are.equal(43, #id)
        assert.is_nil(body:find("st-123", 1, true))
        assert.is_nil(body:find(O.CHALLENGE, 1, true))
        assert.are.equal(1, pending_requests())
      end)

      it_runs("shows the read scope alone when none is asked for", function()
        local r = O.authorize(a, O.query(client, { scope = false }), cookie)
        local _, boxes = r.body:gsub('type="checkbox"', "")
        assert.are.equal(1, boxes)
        assert.truthy(r.body:find('<label><input checked name="scope" type="checkbox" value="agent:read">' ..
          "Read your data (agent:read)</label></fieldset>", 1, true), r.body)
      end)

      it_runs("shows the client's id when it has no name, and escapes names", function()
        local nameless = O.register(a, { redirect_uris = { O.REDIRECT } })
        local r = O.authorize(a, O.query(nameless), cookie)
        assert.truthy(r.body:find("<strong>" .. nameless .. "</strong> wants", 1, true))
        local evil = O.register(a, { redirect_uris = { "http://127.0.0.1/cb" }, client_name = "<b>Bank</b>" })
        r = O.authorize(a, O.query(evil, { redirect_uri = "http://127.0.0.1:9999/cb" }), cookie)
        assert.truthy(r.body:find("<strong>&lt;b&gt;Bank&lt;/b&gt;</strong>", 1, true), r.body)
        assert.truthy(r.body:find("<strong>127.0.0.1:9999</strong>", 1, true))
        assert.truthy(r.headers["content-security-policy"]:find("form-action 'self' http://127.0.0.1:9999", 1, true))
      end)
    end)

    describe("the consent form's answer", function()
      local function consent(more)
        local r = O.authorize(a, O.query(client, more), cookie)
        assert.are.equal(200, r.status, r.body)
        return O.requestId(r)
      end

      it_runs("Approve sends a code back, with state and iss, and makes the grant", function()
        local r = O.decide(a, cookie, consent())
        assert.are.equal(303, r.status)
        assert.are.equal("no-store", r.headers["cache-control"])
        local code = r.headers.location:match("^https://client%.example/oauth/callback%?code=([%w_-]+)" ..
          "&state=st%-123&" .. ISS:gsub("%%", "%%%%") .. "$")
        assert.is_string(code, r.headers.location)
        assert.are.equal(43, #code)
        local grant = db:one("SELECT user_id, client_id, client_name, scope FROM clank_oauth_grants")
        assert.are.same({ user_id = 1, client_id = client, client_name = "Test Client", scope = "agent:read" }, grant)
        assert.is_nil(db:one("SELECT hash FROM clank_oauth_codes WHERE hash = $1", code))
        assert.are.equal(1, #db:query("SELECT hash FROM clank_oauth_codes"))
        assert.are.equal(0, pending_requests())
      end)

      it_runs("Approve keeps the redirect URI's own query", function()
        local c2 = O.register(a, { redirect_uris = { "https://client.example/cb?tenant=7" } })
        local page = O.authorize(a, O.query(c2, { redirect_uri = "https://client.example/cb?tenant=7",
          state = "a b&c" }), cookie)
        local r = O.decide(a, cookie, O.requestId(page))
        assert.truthy(r.headers.location:find("^https://client%.example/cb%?tenant=7&code=[%w_-]+&state=a%%20b%%26c&" ..
          ISS:gsub("%%", "%%%%") .. "$"), r.headers.location)
      end)

      it_runs("Deny sends access_denied back, and makes no grant", function()
        local r = O.decide(a, cookie, consent(), "deny")
        assert.are.equal(303, r.status)
        assert.are.equal("https://client.example/oauth/callback?error=access_denied&" ..
          "error_description=The%20person%20denied%20access.&state=st-123&" .. ISS, r.headers.location)
        assert.is_nil(db:one("SELECT id FROM clank_oauth_grants"))
        assert.is_nil(db:one("SELECT hash FROM clank_oauth_codes"))
      end)

      it_runs("replayed is an error page, and gives no second code", function()
        local id = consent()
        assert.are.equal(303, O.decide(a, cookie, id).status)
        error_page(O.decide(a, cookie, id))
        error_page(O.decide(a, cookie, id, "deny"))
        assert.are.equal(1, #db:query("SELECT hash FROM clank_oauth_codes"))
      end)

      it_runs("by another signed-in person is an error page, and leaves it to its person", function()
        local id = consent()
        local eve = O.signIn(a, "eve@example.com")
        error_page(O.decide(a, eve, id))
        assert.is_nil(db:one("SELECT id FROM clank_oauth_grants"))
        assert.are.equal(303, O.decide(a, cookie, id).status)
        assert.are.same({ user_id = 1 }, db:one("SELECT user_id FROM clank_oauth_grants"))
      end)

      it_runs("by nobody, or cross-site, is refused", function()
        local id = consent()
        error_page(O.post(a, "/__clank/oauth/authorize", { form = { request = id, decision = "approve" } }), 401)
        local r = O.post(a, "/__clank/oauth/authorize", { cookie = cookie,
          form = { request = id, decision = "approve" }, headers = { ["sec-fetch-site"] = "cross-site" } })
        assert.are.equal(403, r.status)
        assert.is_nil(r.headers.location)
        assert.are.equal(303, O.decide(a, cookie, id).status)
      end)

      it_runs("after 10 minutes is an error page", function()
        local id = consent()
        clock.advance(10 * MINUTE)
        error_page(O.decide(a, cookie, id))
        local again = consent()
        clock.advance(10 * MINUTE - 1)
        assert.are.equal(303, O.decide(a, cookie, again).status)
      end)

      it_runs("is refused when it is not Approve or Deny, or names no request", function()
        local id = consent()
        error_page(O.decide(a, cookie, id, "maybe"))
        error_page(O.decide(a, cookie, "nope"))
        error_page(O.decide(a, cookie, id:sub(1, 42) .. (id:sub(-1) == "A" and "Q" or "A")))
        assert.are.equal(303, O.decide(a, cookie, id).status)
      end)

      -- the scopes of the grant, and of the tokens the code gives
      local function granted()
        return db:one("SELECT scope FROM clank_oauth_grants").scope
      end
      local function tokens_of(r)
        local _, params = O.location(r)
        local answer, body = O.token(a, O.exchange(client, params.code))
        assert.are.equal(200, answer.status, answer.body)
        return body.scope
      end
      local BOTH = "agent:read agent:write"

      it_runs("with a box unticked grants the ticked scopes only: the grant and its tokens", function()
        local r = O.decide(a, cookie, consent { scope = BOTH }, "approve", { "agent:read" })
        assert.are.equal(303, r.status, r.body)
        assert.are.equal("agent:read", granted())
        assert.are.equal("agent:read", tokens_of(r))
        -- as the page's boxes, in any order, and each box once or more
        r = O.decide(a, cookie, consent { scope = BOTH }, "approve", { "agent:write", "agent:read", "agent:write" })
        assert.are.equal(BOTH, granted())
        assert.are.equal(BOTH, tokens_of(r))
      end)

      it_runs("with a box unticked takes nothing from the grant: only its own tokens are less", function()
        O.decide(a, cookie, consent { scope = BOTH })
        local r = O.decide(a, cookie, consent { scope = BOTH }, "approve", { "agent:read" })
        assert.are.equal(BOTH, granted())
        assert.are.equal("agent:read", tokens_of(r))
      end)

      it_runs("with no box ticked shows the page again, with an error, and its request still open", function()
        local id = consent { scope = BOTH }
        local r = O.decide(a, cookie, id, "approve", {})
        assert.are.equal(422, r.status, r.body)
        assert.is_nil(r.headers.location)
        assert.are.equal("no-store", r.headers["cache-control"])
        assert.truthy(r.headers["content-security-policy"]:find("form-action 'self' https://client.example", 1, true))
        local body = r.body
        assert.truthy(body:find('<p class="error" role="alert">Choose at least one thing it may do, or Deny.</p>',
          1, true), body)
        assert.truthy(body:find("<strong>Test Client</strong> wants to use your account.", 1, true), body)
        assert.truthy(body:find("Your answer goes to <strong>client.example</strong>.", 1, true), body)
        -- the same boxes, none ticked, and the same request
        assert.truthy(body:find('<label><input name="scope" type="checkbox" value="agent:read">Read your data ' ..
          '(agent:read)</label><label><input name="scope" type="checkbox" value="agent:write">Change your data ' ..
          "(agent:write)</label>", 1, true), body)
        assert.are.equal(id, O.requestId(r))
        assert.is_nil(db:one("SELECT id FROM clank_oauth_grants"))
        assert.is_nil(db:one("SELECT hash FROM clank_oauth_codes"))
        assert.are.equal(1, pending_requests())
        -- an answer with a box ticked then goes through, once
        r = O.decide(a, cookie, id, "approve", { "agent:write" })
        assert.are.equal(303, r.status, r.body)
        assert.are.equal("agent:write", granted())
        assert.are.equal("agent:write", tokens_of(r))
        error_page(O.decide(a, cookie, id, "approve", { "agent:write" }))
      end)

      it_runs("with no box ticked, Deny is still a no", function()
        local r = O.decide(a, cookie, consent { scope = BOTH }, "deny", {})
        assert.are.equal(303, r.status)
        local _, params = O.location(r)
        assert.are.equal("access_denied", params.error)
        assert.is_nil(db:one("SELECT id FROM clank_oauth_grants"))
        assert.are.equal(0, pending_requests())
      end)

      it_runs("ignores a ticked scope that was not asked for", function()
        local r = O.decide(a, cookie, consent(), "approve", { "agent:read", "agent:write", "admin" })
        assert.are.equal(303, r.status, r.body)
        assert.are.equal("agent:read", granted())
        assert.are.equal("agent:read", tokens_of(r))
        -- ticking only what was not asked is ticking nothing
        local id = consent()
        assert.are.equal(422, O.decide(a, cookie, id, "approve", { "agent:write" }).status)
        assert.are.equal(422, O.decide(a, cookie, id, "approve", { "admin" }).status)
        assert.are.equal(1, pending_requests())
        assert.are.equal("agent:read", granted())
      end)

      it_runs("without a scope field at all grants all that was asked", function()
        local r = O.decide(a, cookie, consent { scope = BOTH })
        assert.are.equal(303, r.status, r.body)
        assert.are.equal(BOTH, granted())
        assert.are.equal(BOTH, tokens_of(r))
      end)

      it_runs("a second approval for the same client adds its scopes to its one grant", function()
        O.decide(a, cookie, consent())
        clock.advance(MINUTE)
        O.decide(a, cookie, consent { scope = "agent:write" })
        local rows = db:query("SELECT id, scope, created_at, updated_at FROM clank_oauth_grants")
        assert.are.same({ { id = 1, scope = "agent:read agent:write", created_at = H.START,
          updated_at = H.START + MINUTE } }, rows)
        -- asking for less again takes nothing away
        O.decide(a, cookie, consent { scope = "agent:read" })
        assert.are.equal("agent:read agent:write", db:one("SELECT scope FROM clank_oauth_grants").scope)
      end)
    end)

    describe("the next of sign-in", function()
      it_runs("never leads to another site", function()
        local cases = {
          { "//evil.example/x", "/" }, { "https://evil.example/", "/" }, { "/\\evil.example", "/" },
          { "http:evil.example", "/" }, { "javascript:alert(1)", "/" },
          { "/%0d%0aLocation: https://evil.example", "/" }, { "/x\r\nLocation: https://evil.example", "/" },
          { "/__clank/oauth/authorize?client_id=x", "/__clank/oauth/authorize?client_id=x" },
        }
        for _, case in ipairs(cases) do
          local r = O.post(a, "/__clank/auth/login", { form = { email = "ada@example.com",
            password = O.PASSWORD, next = case[1] } })
          assert.are.equal(303, r.status)
          assert.are.equal(case[2], r.headers.location, case[1])
        end
      end)
    end)
  end)
end)
