-- clank.auth's OAuth dynamic client registration (RFC 7591, POST /__clank/oauth/register):
-- what it keeps and answers, the metadata it refuses and with which error (§3.2.2), its limits.
-- On SQLite, and on PostgreSQL when CLANK_TEST_POSTGRES_URL is set.
local clank = require "clank"
local auth = require "clank.auth"
local H = require "helpers.auth"
local O = require "helpers.oauth"

local json = clank.json
local it_runs = H.it_runs

teardown(H.removeAll)

describe("clank.auth OAuth registration", function()
  H.each_backend(function(fresh)
    local db, cleanup, a
    before_each(function()
      db, cleanup = fresh()
      a = auth { db = db, clock = H.clock(), passwordParams = H.CHEAP }
    end)
    after_each(function() cleanup() end)

    local function register(body, r)
      r = r or {}
      r.json = body
      local answer = O.post(a, "/__clank/oauth/register", r)
      return answer, json.decode(answer.body)
    end

    local function refused(answer, body, code)
      assert.are.equal(400, answer.status, answer.body)
      assert.are.equal(code, body.error, answer.body)
      assert.is_string(body.error_description)
      assert.are.equal("*", answer.headers["access-control-allow-origin"])
      assert.is_nil(db:one("SELECT id FROM clank_oauth_clients"))
    end

    it_runs("registers a public client and answers its metadata (201)", function()
      local r, body = register { redirect_uris = { O.REDIRECT, "http://127.0.0.1/callback" },
        client_name = "Claude", client_uri = "https://claude.example", logo_uri = "https://x.example/l.png" }
      assert.are.equal(201, r.status, r.body)
      assert.are.equal("application/json", r.headers["content-type"])
      assert.are.equal("no-store", r.headers["cache-control"])
      assert.are.equal("*", r.headers["access-control-allow-origin"])
      assert.truthy(body.client_id:find("^[%w_-]+$") and #body.client_id == 24, body.client_id)
      assert.are.same({
        client_id = body.client_id,
        client_id_issued_at = 1700000000, -- the clock's START, in seconds
        redirect_uris = { "https://client.example/oauth/callback", "http://127.0.0.1/callback" },
        client_name = "Claude",
        grant_types = { "authorization_code", "refresh_token" },
        response_types = { "code" },
        token_endpoint_auth_method = "none",
      }, body)
      local row = db:one("SELECT id, name, redirect_uris FROM clank_oauth_clients")
      assert.are.same({ id = body.client_id, name = "Claude",
        redirect_uris = '["https://client.example/oauth/callback","http://127.0.0.1/callback"]' }, row)
    end)

    it_runs("keeps what the client says of grant types, response types, method and scope", function()
      local r, body = register { redirect_uris = { O.REDIRECT }, grant_types = { "authorization_code" },
        response_types = { "code" }, token_endpoint_auth_method = "none", scope = "agent:read agent:write" }
      assert.are.equal(201, r.status, r.body)
      assert.are.same({ "authorization_code" }, body.grant_types)
      assert.are.equal("agent:read agent:write", body.scope)
      assert.is_nil(body.client_name)
    end)

    it_runs("gives each registration its own id", function()
      local _, one = register { redirect_uris = { O.REDIRECT } }
      local _, two = register { redirect_uris = { O.REDIRECT } }
      assert.are_not.equal(one.client_id, two.client_id)
    end)

    it_runs("takes https and loopback http redirect URIs, ten at most", function()
      local uris = { "https://a.example/cb", "https://a.example:8443/cb?x=1", "http://127.0.0.1/cb",
        "http://127.0.0.1:33418/cb", "http://[::1]/cb", "http://[::1]:9/cb", "http://localhost/cb",
        "http://localhost:3000/oauth/callback", "https://b.example", "https://c.example/" }
      local r = register { redirect_uris = uris }
      assert.are.equal(201, r.status, r.body)
    end)

    it_runs("refuses bad redirect URIs with invalid_redirect_uri", function()
      local uris = {}
      for i = 1, 11 do uris[i] = "https://a.example/" .. i end
      for _, bad in ipairs {
        {}, -- none
        { "https://a.example/cb", "http://a.example/cb" }, -- http that is not loopback
        { "http://127.0.0.2/cb" }, { "http://localhost.evil.example/cb" }, { "http://[::2]/cb" },
        { "https://a.example/cb#frag" }, { "https://user:pw@a.example/cb" }, { "https://user@a.example/cb" },
        { "/relative/cb" }, { "a.example/cb" }, { "javascript:alert(1)" }, { "com.example.app:/cb" },
        { "ftp://a.example/cb" }, { "https://a.example/c b" }, { "https://a.example/cb\n" },
        { "https:///cb" }, { "https://a.example:99999/cb" }, { 42 }, { json.null },
        { "https://a.example/" .. ("x"):rep(2000) },
        uris, -- eleven
      } do
        local r, body = register { redirect_uris = bad }
        refused(r, body, "invalid_redirect_uri")
      end
      for _, bad in ipairs { "https://a.example/cb", json.null, 1 } do
        local r, body = register { redirect_uris = bad }
        refused(r, body, "invalid_redirect_uri")
      end
      local r, body = register { client_name = "No URIs" }
      refused(r, body, "invalid_redirect_uri")
    end)

    it_runs("refuses other metadata it does not support with invalid_client_metadata", function()
      local good = { O.REDIRECT }
      for _, bad in ipairs {
        { token_endpoint_auth_method = "client_secret_basic" },
        { token_endpoint_auth_method = "private_key_jwt" },
        { grant_types = { "authorization_code", "implicit" } },
        { grant_types = { "refresh_token" } },
        { grant_types = { "client_credentials" } },
        { grant_types = "authorization_code" },
        { response_types = { "token" } },
        { response_types = { "code", "token" } },
        { client_name = "" }, { client_name = ("n"):rep(101) }, { client_name = 7 }, { client_name = "a\nb" },
        { scope = 1 },
      } do
        bad.redirect_uris = good
        local r, body = register(bad)
        refused(r, body, "invalid_client_metadata")
      end
    end)

    it_runs("names every problem, and the redirect URI's error first", function()
      local r, body = register { redirect_uris = { "http://a.example/cb" }, token_endpoint_auth_method = "x",
        response_types = { "token" } }
      refused(r, body, "invalid_redirect_uri")
      assert.are.equal("redirect_uris[1] must be https, or http to 127.0.0.1, [::1] or localhost; " ..
        'response_types may only be ["code"]; token_endpoint_auth_method must be "none" (public clients only).',
        body.error_description)
    end)

    it_runs("refuses a body that is not a JSON object, or larger than 16 KiB", function()
      local r = O.post(a, "/__clank/oauth/register", { body = "{",
        headers = { ["content-type"] = "application/json" } })
      refused(r, json.decode(r.body), "invalid_client_metadata")
      r = O.post(a, "/__clank/oauth/register", { json = { O.REDIRECT } })
      refused(r, json.decode(r.body), "invalid_client_metadata")
      r = O.post(a, "/__clank/oauth/register", { form = { redirect_uris = O.REDIRECT } })
      refused(r, json.decode(r.body), "invalid_client_metadata")
      local big = { redirect_uris = { O.REDIRECT }, client_uri = "https://a.example/" .. ("x"):rep(16 * 1024) }
      r = O.post(a, "/__clank/oauth/register", { json = big })
      refused(r, json.decode(r.body), "invalid_client_metadata")
      assert.are.equal("The registration is larger than 16 KiB.", json.decode(r.body).error_description)
    end)

    it_runs("counts registrations per address with the guessing limits", function()
      a = auth { db = db, clock = H.clock(), passwordParams = H.CHEAP, limits = { address = 2 } }
      local function from(address)
        return O.post(a, "/__clank/oauth/register", { json = { redirect_uris = { O.REDIRECT } },
          remoteAddress = address })
      end
      assert.are.equal(201, from("192.0.2.1").status)
      assert.are.equal(201, from("192.0.2.1").status)
      local r = from("192.0.2.1")
      assert.are.equal(429, r.status)
      assert.are.equal("900", r.headers["retry-after"])
      assert.are.equal("*", r.headers["access-control-allow-origin"])
      assert.are.equal(201, from("192.0.2.2").status)
    end)

    it_runs("answers a CORS preflight and takes a cross-site POST", function()
      local r = a:handle(O.request { method = "OPTIONS", path = "/__clank/oauth/register" })
      assert.are.equal(204, r.status)
      assert.are.equal("POST, OPTIONS", r.headers["access-control-allow-methods"])
      r = register({ redirect_uris = { O.REDIRECT } }, { headers = { ["sec-fetch-site"] = "cross-site" } })
      assert.are.equal(201, r.status)
    end)
  end)
end)
