-- clank.auth's OAuth clients whose client_id is the URL of their metadata document (OAuth
-- Client ID Metadata Documents), fetched with clank.fetch from a local Python server
-- (spec/helpers/client_metadata_server.py) with oauth.allowInsecureClientIds; every way a
-- document can be wrong is an error page at the authorization endpoint. On SQLite, and on
-- PostgreSQL when CLANK_TEST_POSTGRES_URL is set.
local clank = require "clank"
local socket = require "socket"
local auth = require "clank.auth"
local server = require "helpers.server"
local H = require "helpers.auth"
local O = require "helpers.oauth"

local json = clank.json
local it_runs = H.it_runs

local SECOND, MINUTE = 1000, 60000

-- The Python server, its stdin our pipe: it exits when the pipe closes.
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local pipe, port

setup(function()
  pipe = assert(io.popen("exec python3 " .. server.source_dir() .. "/spec/helpers/client_metadata_server.py > "
    .. dir .. "/port 2> " .. dir .. "/stderr", "w"))
  local deadline = socket.gettime() + 20
  repeat
    socket.sleep(0.02)
    local f = io.open(dir .. "/port")
    local line = f and f:read("l")
    if f then f:close() end
    port = line and line:match("^(%d+)$")
  until port or socket.gettime() > deadline
  assert(port, "the metadata server did not start")
end)

teardown(function()
  if pipe then pipe:close() end
  os.execute("rm -rf " .. dir)
  H.removeAll()
end)

local function url(path) return "http://127.0.0.1:" .. port .. path end

-- How many times the server was asked for path.
local function count(path)
  local res = assert(clank.fetch(url("/count" .. path)))
  return tonumber(res.body)
end

describe("clank.auth OAuth client ID metadata documents", function()
  H.each_backend(function(fresh)
    local db, cleanup, clock, a, cookie
    before_each(function()
      db, cleanup = fresh()
      clock = H.clock()
      a = auth { db = db, clock = clock, passwordParams = H.CHEAP, oauth = { allowInsecureClientIds = true } }
      H.run(function() cookie = O.signIn(a, "ada@example.com") end)
    end)
    after_each(function() cleanup() end)

    local function error_page(r, message)
      assert.are.equal(400, r.status, r.body)
      assert.is_nil(r.headers.location)
      assert.are.equal("text/html; charset=utf-8", r.headers["content-type"])
      assert.truthy(r.body:find(message, 1, true), r.body)
    end

    local function authorize(client_id, more)
      -- what comes after the client would redirect: it must not be reached
      local q = O.query(client_id, more)
      return O.authorize(a, q, cookie)
    end

    it_runs("lets a client in by its document: its name, its redirect URIs, the whole flow", function()
      local id = url("/good.json")
      local r = authorize(id)
      assert.are.equal(200, r.status, r.body)
      assert.truthy(r.body:find("<strong>Metadata Client</strong> wants to use your account.", 1, true), r.body)
      assert.truthy(r.body:find("It describes itself at <strong>127.0.0.1:" .. port .. "</strong>: its name is " ..
        "its own claim.", 1, true), r.body)
      r = O.decide(a, cookie, O.requestId(r))
      local _, params = O.location(r)
      local answer, body = O.token(a, O.exchange(id, params.code))
      assert.are.equal(200, answer.status, answer.body)
      local _, credential = O.bearer(a, body.access_token)
      assert.are.same({ kind = "oauth", grantId = 1, clientId = id, clientName = "Metadata Client",
        scope = "read", scopes = "agent:read" }, credential)
      -- its loopback redirect URI on another port too
      assert.are.equal(200, authorize(id, { redirect_uri = "http://127.0.0.1:40000/callback" }).status)
    end)

    it_runs("asks for it as application/json", function()
      assert.are.equal(200, authorize(url("/accept.json")).status)
    end)

    it_runs("shows the URL when the document has no name", function()
      local r = authorize(url("/nameless.json"))
      assert.are.equal(200, r.status, r.body)
      assert.truthy(r.body:find("<strong>" .. url("/nameless.json") .. "</strong> wants", 1, true), r.body)
    end)

    it_runs("refuses a redirect URI the document does not list", function()
      error_page(authorize(url("/good.json"), { redirect_uri = "https://evil.example/oauth/callback" }),
        "The request's redirect_uri is not one this client registered.")
    end)

    it_runs("refuses a document that is not right, each in words", function()
      local cases = {
        { "/redirect.json", "The client's metadata document answered with a redirect." },
        { "/not-json", "The client's metadata document is not a JSON object." },
        { "/array.json", "The client's metadata document is not a JSON object." },
        { "/mismatch.json", "The client's metadata document has a client_id that is not its own URL." },
        { "/huge.json", "The client's metadata document is larger than 64 KiB." },
        { "/missing.json", "The client's metadata document answered with status 404." },
        { "/no-redirects.json", "The client's metadata document is not valid: redirect_uris must be a " ..
          "non-empty list of URIs." },
        { "/secret.json", "The client's metadata document is not valid: token_endpoint_auth_method must be " ..
          "&quot;none&quot; (public clients only)." },
      }
      local good = count("/good.json")
      for _, case in ipairs(cases) do
        error_page(authorize(url(case[1])), case[2])
      end
      assert.are.equal(good, count("/good.json")) -- the redirect was not followed
      assert.are.equal(0, #db:query("SELECT hash FROM clank_oauth_requests"))
    end)

    it_runs("gives up on a document that takes more than 5 seconds", function()
      local started = socket.gettime()
      error_page(authorize(url("/slow.json")), "The client's metadata document did not answer within 5 seconds.")
      local took = socket.gettime() - started
      assert.truthy(took >= 4.9 and took < 7.5, took)
    end)

    it_runs("refuses an http URL unless allowInsecureClientIds, without fetching it", function()
      a = auth { db = db, clock = clock, passwordParams = H.CHEAP }
      local before = count("/good.json")
      error_page(authorize(url("/good.json")), "The client's id must be an https URL.")
      assert.are.equal(before, count("/good.json"))
    end)

    it_runs("refuses client id URLs of the wrong shape, or of this machine or a private network", function()
      a = auth { db = db, clock = clock, passwordParams = H.CHEAP }
      local cases = {
        { "https://client.example", "The client's id must have a path." },
        { "https://client.example/", "The client's id must have a path." },
        { "https://client.example/a#b", "The client's id has a fragment." },
        { "https://me:pw@client.example/a", "The client's id has a user name or password." },
        { "https://client.example/a/../b", "The client's id must not have . or .. segments." },
        { "https://client.example/./b", "The client's id must not have . or .. segments." },
        { "ftp://client.example/a", "The client's id is not an http or https URL." },
        { "https://127.0.0.1/client.json", "The client's id must not name this machine or a private network." },
        { "https://localhost/client.json", "The client's id must not name this machine or a private network." },
        { "https://app.localhost/client.json", "The client's id must not name this machine or a private network." },
        { "https://10.1.2.3/client.json", "The client's id must not name this machine or a private network." },
        { "https://192.168.0.1/client.json", "The client's id must not name this machine or a private network." },
        { "https://172.16.0.1/client.json", "The client's id must not name this machine or a private network." },
        { "https://169.254.169.254/latest", "The client's id must not name this machine or a private network." },
        { "https://[::1]/client.json", "The client's id must not name this machine or a private network." },
      }
      for _, case in ipairs(cases) do
        error_page(authorize(case[1]), case[2])
      end
    end)

    it_runs("keeps a document for 5 minutes", function()
      local id = url("/again.json")
      local before = count("/again.json")
      assert.are.equal(200, authorize(id).status)
      assert.are.equal(200, authorize(id).status)
      assert.are.equal(before + 1, count("/again.json"))
      clock.advance(5 * MINUTE - 1)
      assert.are.equal(200, authorize(id).status)
      assert.are.equal(before + 1, count("/again.json"))
      clock.advance(1)
      assert.are.equal(200, authorize(id).status)
      assert.are.equal(before + 2, count("/again.json"))
    end)

    it_runs("keeps a failure for 30 seconds", function()
      local id = url("/mismatch.json")
      local before = count("/mismatch.json")
      error_page(authorize(id), "not its own URL")
      clock.advance(30 * SECOND - 1)
      error_page(authorize(id), "not its own URL")
      assert.are.equal(before + 1, count("/mismatch.json"))
      clock.advance(1)
      error_page(authorize(id), "not its own URL")
      assert.are.equal(before + 2, count("/mismatch.json"))
    end)

    it_runs("keeps 256 documents at most", function()
      for i = 1, 257 do
        clock.advance(1) -- the first to expire goes first
        assert.are.equal(200, authorize(url("/many.json?n=" .. i)).status)
      end
      local cache = a.oauth.documents
      assert.are.equal(256, cache.count)
      assert.is_nil(cache.entries[url("/many.json?n=1")])
      assert.is_table(cache.entries[url("/many.json?n=2")])
      assert.is_table(cache.entries[url("/many.json?n=257")])
    end)

    it_runs("is a client apart from registered ones: registration gives no URL ids", function()
      local registered = O.register(a)
      assert.is_nil(registered:find(":", 1, true))
      local r = O.post(a, "/__clank/oauth/register", { json = { redirect_uris = { O.REDIRECT },
        client_id = url("/good.json") } })
      assert.are_not.equal(url("/good.json"), json.decode(r.body).client_id)
    end)
  end)
end)
