-- clank.auth's OAuth discovery: the protected resource metadata (RFC 9728) of the MCP endpoint
-- and the authorization server metadata (RFC 8414, also at /.well-known/openid-configuration),
-- their CORS, the origin they name, and the WWW-Authenticate challenge. Every expected document
-- is written out by hand from the RFCs and issue 31.
local clank = require "clank"
local auth = require "clank.auth"
local H = require "helpers.auth"
local O = require "helpers.oauth"

local json = clank.json
local it_runs = H.it_runs

local RESOURCE_DOC = {
  resource = "http://app.test/__clank/mcp",
  authorization_servers = { "http://app.test" },
  scopes_supported = { "agent:read", "agent:write" },
  bearer_methods_supported = { "header" },
}

local SERVER_DOC = {
  issuer = "http://app.test",
  authorization_endpoint = "http://app.test/__clank/oauth/authorize",
  token_endpoint = "http://app.test/__clank/oauth/token",
  revocation_endpoint = "http://app.test/__clank/oauth/revoke",
  registration_endpoint = "http://app.test/__clank/oauth/register",
  scopes_supported = { "agent:read", "agent:write" },
  response_types_supported = { "code" },
  grant_types_supported = { "authorization_code", "refresh_token" },
  code_challenge_methods_supported = { "S256" },
  token_endpoint_auth_methods_supported = { "none" },
  revocation_endpoint_auth_methods_supported = { "none" },
  authorization_response_iss_parameter_supported = true,
  client_id_metadata_document_supported = true,
}

teardown(H.removeAll)

describe("clank.auth OAuth metadata", function()
  H.each_backend(function(fresh)
    local db, cleanup, a
    before_each(function()
      db, cleanup = fresh()
      a = auth { db = db, clock = H.clock(), passwordParams = H.CHEAP }
    end)
    after_each(function() cleanup() end)

    local function doc(path, r)
      local answer = O.get(a, path, r)
      assert.are.equal(200, answer.status, answer.body)
      assert.are.equal("application/json", answer.headers["content-type"])
      assert.are.equal("*", answer.headers["access-control-allow-origin"])
      return json.decode(answer.body), answer
    end

    it_runs("serves the protected resource's at both RFC 9728 addresses", function()
      assert.are.same(RESOURCE_DOC, doc("/.well-known/oauth-protected-resource/__clank/mcp"))
      assert.are.same(RESOURCE_DOC, doc("/.well-known/oauth-protected-resource"))
    end)

    it_runs("serves the authorization server's at RFC 8414's and OpenID's addresses", function()
      assert.are.same(SERVER_DOC, doc("/.well-known/oauth-authorization-server"))
      assert.are.same(SERVER_DOC, doc("/.well-known/openid-configuration"))
    end)

    it_runs("writes the lists as JSON arrays and the flags as true", function()
      local _, answer = doc("/.well-known/oauth-protected-resource")
      assert.are.equal('{"authorization_servers":["http://app.test"],"bearer_methods_supported":["header"],' ..
        '"resource":"http://app.test/__clank/mcp","scopes_supported":["agent:read","agent:write"]}', answer.body)
      _, answer = doc("/.well-known/oauth-authorization-server")
      assert.truthy(answer.body:find('"code_challenge_methods_supported":["S256"]', 1, true), answer.body)
      assert.truthy(answer.body:find('"authorization_response_iss_parameter_supported":true', 1, true))
    end)

    it_runs("names the origin of the request: its scheme and Host", function()
      local d = doc("/.well-known/oauth-authorization-server", { scheme = "https",
        headers = { host = "Tasks.Example:8443" } })
      assert.are.equal("https://tasks.example:8443", d.issuer)
      assert.are.equal("https://tasks.example:8443/__clank/oauth/token", d.token_endpoint)
      d = doc("/.well-known/oauth-protected-resource", { headers = { host = "[::1]:8080" } })
      assert.are.equal("http://[::1]:8080/__clank/mcp", d.resource)
      assert.are.same({ "http://[::1]:8080" }, d.authorization_servers)
    end)

    it_runs("names baseUrl when the app gives one, whatever the Host", function()
      a = auth { db = db, passwordParams = H.CHEAP, baseUrl = "https://tasks.example/" }
      local d = doc("/.well-known/oauth-authorization-server", { headers = { host = "evil.test" } })
      assert.are.equal("https://tasks.example", d.issuer)
      assert.are.equal("https://tasks.example/__clank/oauth/authorize", d.authorization_endpoint)
      d = doc("/.well-known/oauth-protected-resource/__clank/mcp", { headers = { host = "evil.test" } })
      assert.are.equal("https://tasks.example/__clank/mcp", d.resource)
      assert.are.same({ "https://tasks.example" }, d.authorization_servers)
    end)

    it_runs("names the resource when oauth.resourceName is given", function()
      a = auth { db = db, passwordParams = H.CHEAP, oauth = { resourceName = "Tasks" } }
      local want = {}
      for k, v in pairs(RESOURCE_DOC) do want[k] = v end
      want.resource_name = "Tasks"
      assert.are.same(want, doc("/.well-known/oauth-protected-resource"))
    end)

    it_runs("refuses a Host that is not a host name", function()
      for _, host in ipairs { "evil.test/path", "a b", "evil.test@x", "" } do
        local r = O.get(a, "/.well-known/oauth-authorization-server", { headers = { host = host } })
        assert.are.equal(400, r.status, host)
        assert.are.equal("invalid_request", json.decode(r.body).error)
      end
    end)

    it_runs("answers a CORS preflight, and 405 to a POST", function()
      for _, path in ipairs { "/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration", "/.well-known/oauth-protected-resource/__clank/mcp" } do
        local r = a:handle(O.request { method = "OPTIONS", path = path,
          headers = { origin = "https://inspector.example",
            ["access-control-request-headers"] = "mcp-protocol-version" } })
        assert.are.equal(204, r.status, path)
        assert.are.same({
          ["access-control-allow-origin"] = "*",
          ["access-control-allow-methods"] = "GET, OPTIONS",
          ["access-control-allow-headers"] = "authorization, content-type, mcp-protocol-version",
          ["access-control-max-age"] = "86400",
        }, r.headers)
        r = O.post(a, path, { json = {} })
        assert.are.equal(405, r.status)
        assert.are.equal("GET, OPTIONS", r.headers.allow)
      end
    end)

    it_runs("leaves the other /.well-known paths and /__clank/auth/ to the rest", function()
      assert.is_true(a:handles("/.well-known/oauth-authorization-server"))
      assert.is_true(a:handles("/__clank/oauth/token"))
      assert.is_true(a:handles("/__clank/oauth/anything"))
      assert.is_true(a:handles("/__clank/auth/grants"))
      assert.is_true(a:handles("/__clank/auth/login"))
      assert.is_false(a:handles("/.well-known/clank"))
      assert.is_false(a:handles("/__clank/mcp"))
      assert.are.equal(404, O.get(a, "/__clank/oauth/nothing").status)
    end)

    it_runs("is all gone with oauth = false", function()
      a = auth { db = db, passwordParams = H.CHEAP, oauth = false }
      assert.is_false(a:handles("/.well-known/oauth-authorization-server"))
      assert.is_false(a:handles("/__clank/oauth/token"))
      assert.is_true(a:handles("/__clank/auth/login"))
      assert.are.equal(404, O.get(a, "/__clank/auth/grants").status)
      assert.is_nil(a:oauthChallenge(O.request {}))
    end)

    describe("the challenge", function()
      it_runs("points at the protected resource's metadata (RFC 9728 §5.1)", function()
        assert.are.equal('Bearer resource_metadata="http://app.test/.well-known/oauth-protected-resource' ..
          '/__clank/mcp", scope="agent:read"', a:oauthChallenge(O.request { path = "/__clank/mcp" }))
      end)

      it_runs("says insufficient_scope with the scope needed (RFC 6750 §3.1)", function()
        assert.are.equal('Bearer resource_metadata="http://app.test/.well-known/oauth-protected-resource' ..
          '/__clank/mcp", error="insufficient_scope", error_description="This tool changes data.", ' ..
          'scope="agent:read agent:write"', a:oauthChallenge(O.request { path = "/__clank/mcp" },
          { error = "insufficient_scope", description = "This tool changes data.", scope = "agent:read agent:write" }))
      end)

      it_runs("is nil for a Host that is not a host name", function()
        assert.is_nil(a:oauthChallenge(O.request { headers = { host = "a/b" } }))
      end)
    end)
  end)
end)

describe("clank.auth's oauth option", function()
  local db, cleanup
  before_each(function() db, cleanup = H.backends[1].fresh() end)
  after_each(function() cleanup() end)

  local function raised(opts)
    local ok, err = pcall(auth, opts)
    assert.is_false(ok)
    return tostring(err)
  end

  it("takes false, a resourceName and allowInsecureClientIds", function()
    assert.is_false(auth({ db = db, oauth = false }).oauth)
    assert.are.same({ resourceName = "Tasks", allowInsecureClientIds = false },
      auth({ db = db, oauth = { resourceName = "Tasks" } }).oauth)
    assert.are.same({ allowInsecureClientIds = true },
      auth({ db = db, oauth = { allowInsecureClientIds = true } }).oauth)
    assert.are.same({ allowInsecureClientIds = false }, auth({ db = db }).oauth)
  end)

  it("refuses anything else, naming the field", function()
    assert.truthy(raised { db = db, oauth = true }:find("field 'oauth' must be false or a table", 1, true))
    assert.truthy(raised { db = db, oauth = { resourceName = "" } }:find("resourceName must be a non-empty string",
      1, true))
    assert.truthy(raised { db = db, oauth = { allowInsecureClientIds = "yes" } }:find(
      "allowInsecureClientIds must be a boolean", 1, true))
    assert.truthy(raised { db = db, oauth = { issuer = "x" } }:find("has an unknown field 'issuer'", 1, true))
  end)
end)
