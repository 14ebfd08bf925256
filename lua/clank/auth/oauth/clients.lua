-- Who a client is: one registered here (RFC 7591 dynamic registration, POST
-- /__clank/oauth/register, kept in clank_oauth_clients), or one whose client_id is the https
-- URL of its metadata document (OAuth Client ID Metadata Documents), fetched with clank.fetch
-- and kept in memory, per Auth, for a few minutes.
--
--   resolve(auth, clientId) → { id, name?, redirectUris }, or nil and why (for a person).
--   register(c) → the endpoint's answer.
local core = require "clank.core"
local fetch = require "clank.fetch"
local json = require "clank.json"
local reqlib = require "clank.request"
local input = require "clank.auth.input"
local limits = require "clank.auth.limits"
local answers = require "clank.auth.oauth.answers"
local secrets = require "clank.auth.oauth.secrets"
local store = require "clank.auth.oauth.store"
local urls = require "clank.auth.oauth.urls"

local type, ipairs, pairs, pcall, tostring = type, ipairs, pairs, pcall, tostring
local floor, format, byte, gsub, concat = math.floor, string.format, string.byte, string.gsub, table.concat

local M = {}

M.MAX_BODY = 16 * 1024 -- bytes of a registration
M.MAX_REDIRECT_URIS = 10
M.FETCH_TIMEOUT = 5000 -- ms
M.MAX_DOCUMENT = 64 * 1024 -- bytes
M.CACHE_FOR = 5 * 60000 -- ms a document is kept
M.FAILURE_FOR = 30000 -- ms a failure is kept
M.CACHE_SIZE = 256 -- documents (and failures) per Auth

-- ---- the metadata both kinds have ----

local function is_list(v) return type(v) == "table" and json.isArray(v) end

local function string_list(v)
  if not is_list(v) then return nil end
  for _, s in ipairs(v) do
    if type(s) ~= "string" then return nil end
  end
  return v
end

-- metadata(doc) → the fields kept { redirect_uris, client_name?, grant_types, response_types,
-- token_endpoint_auth_method, scope? }, or nil, error code, description (every problem, no
-- final period).
local function metadata(doc)
  local uri_problems, problems = {}, {}
  local uris = doc.redirect_uris
  if not is_list(uris) or #uris == 0 then
    uri_problems[1] = "redirect_uris must be a non-empty list of URIs"
  elseif #uris > M.MAX_REDIRECT_URIS then
    uri_problems[1] = "redirect_uris may have at most " .. M.MAX_REDIRECT_URIS .. " URIs"
  else
    for i, uri in ipairs(uris) do
      local wrong = type(uri) ~= "string" and "must be a string" or urls.redirectProblem(uri)
      if wrong then uri_problems[#uri_problems + 1] = format("redirect_uris[%d] %s", i, wrong) end
    end
  end
  local name = doc.client_name
  if name ~= nil then
    name = input.tokenName(name)
    if not name then problems[#problems + 1] = "client_name must be 1 to 100 characters of text" end
  end
  local grant_types = doc.grant_types
  if grant_types == nil then
    grant_types = { "authorization_code", "refresh_token" }
  elseif not string_list(grant_types) then
    problems[#problems + 1] = "grant_types must be a list of strings"
  else
    local has_code = false
    for _, g in ipairs(grant_types) do
      if g == "authorization_code" then has_code = true
      elseif g ~= "refresh_token" then
        problems[#problems + 1] = "grant_types may only be authorization_code and refresh_token"
      end
    end
    if not has_code then problems[#problems + 1] = "grant_types must have authorization_code" end
  end
  local response_types = doc.response_types
  if response_types == nil then
    response_types = { "code" }
  elseif not string_list(response_types) or #response_types ~= 1 or response_types[1] ~= "code" then
    problems[#problems + 1] = 'response_types may only be ["code"]'
  end
  local method = doc.token_endpoint_auth_method
  if method ~= nil and method ~= "none" then
    problems[#problems + 1] = 'token_endpoint_auth_method must be "none" (public clients only)'
  end
  local scope = doc.scope
  if scope ~= nil and type(scope) ~= "string" then problems[#problems + 1] = "scope must be a string" end
  if #uri_problems > 0 then
    for _, p in ipairs(problems) do uri_problems[#uri_problems + 1] = p end
    return nil, "invalid_redirect_uri", concat(uri_problems, "; ")
  end
  if #problems > 0 then return nil, "invalid_client_metadata", concat(problems, "; ") end
  local copy = {}
  for i, uri in ipairs(uris) do copy[i] = uri end
  return {
    redirect_uris = json.array(copy), client_name = name,
    grant_types = json.array(grant_types), response_types = json.array(response_types),
    token_endpoint_auth_method = "none", scope = scope,
  }
end

-- ---- dynamic registration ----

local function hex(s) return (gsub(s, ".", function(ch) return format("%02x", byte(ch)) end)) end

-- Registrations per client address are counted with the guessing limits (address, window).
local function limit_keys(c)
  local address = c.request.remoteAddress
  if address == nil or address == "" then return nil end
  return { { key = "oauthRegister:address:" .. hex(core.sha256(tostring(address))),
    max = c.auth.limits.address } }
end

function M.register(c)
  local auth, request = c.auth, c.request
  local body = type(request.body) == "string" and request.body or ""
  if #body > M.MAX_BODY then
    return answers.error(400, "invalid_client_metadata", "The registration is larger than " ..
      M.MAX_BODY // 1024 .. " KiB.", true)
  end
  local headers = type(request.headers) == "table" and request.headers or {}
  if reqlib.mediaType(headers["content-type"] or "") ~= "application/json" then
    return answers.error(400, "invalid_client_metadata", "The registration must be a JSON object " ..
      "(content-type: application/json).", true)
  end
  local doc = json.decode(body)
  if type(doc) ~= "table" or json.isArray(doc) then
    return answers.error(400, "invalid_client_metadata", "The registration must be a JSON object.", true)
  end
  local meta, code, description = metadata(doc)
  if not meta then return answers.error(400, code, description .. ".", true) end
  local now = auth.clock()
  local keys = limit_keys(c)
  if keys then
    local wait = limits.check(auth.db, keys, now, auth.limits.window)
    if wait then
      return answers.error(429, "too_many_requests", "Too many registrations from this address. " ..
        "Try again in " .. wait .. " seconds.", true, { ["retry-after"] = tostring(wait) })
    end
    limits.count(auth.db, keys, now, auth.limits.window)
  end
  local id = secrets.clientId()
  store.insertClient(auth.db, id, meta.client_name, json.encode(meta.redirect_uris), json.encode(meta), now)
  local out = { client_id = id, client_id_issued_at = floor(now / 1000) }
  for k, v in pairs(meta) do out[k] = v end
  return answers.json(201, out, true)
end

-- ---- client ID metadata documents ----

-- The per-Auth cache: url → { until, client } or { until, problem }.
local function cache_of(auth)
  local o = auth.oauth
  o.documents = o.documents or { entries = {}, count = 0 }
  return o.documents
end

local function remember(auth, url, entry, now)
  local cache = cache_of(auth)
  local entries = cache.entries
  if entries[url] == nil and cache.count >= M.CACHE_SIZE then
    for k, e in pairs(entries) do -- expired ones first; else the one that expires first
      if e.expires <= now then entries[k], cache.count = nil, cache.count - 1 end
    end
    if cache.count >= M.CACHE_SIZE then
      local first, at = nil, math.huge
      for k, e in pairs(entries) do
        if e.expires < at then first, at = k, e.expires end
      end
      entries[first], cache.count = nil, cache.count - 1
    end
  end
  if entries[url] == nil then cache.count = cache.count + 1 end
  entries[url] = entry
end

local FETCH_FAILED = {
  timeout = "did not answer within " .. M.FETCH_TIMEOUT // 1000 .. " seconds",
  too_large = "is larger than " .. M.MAX_DOCUMENT // 1024 .. " KiB",
}

-- The document at url → the client, or nil, why and whether to remember that (not when the
-- request that asked went away: the document may be fine).
local function fetch_document(url)
  local ok, res, err = pcall(fetch, url, { headers = { accept = "application/json" },
    timeout = M.FETCH_TIMEOUT, maxBytes = M.MAX_DOCUMENT })
  if not ok then return nil, "could not be fetched", true end
  if not res then
    local kind = type(err) == "table" and err.kind or "error"
    return nil, FETCH_FAILED[kind] or "could not be fetched (" .. tostring(kind) .. ")", kind ~= "aborted"
  end
  if res.status >= 300 and res.status < 400 then return nil, "answered with a redirect" end
  if res.status ~= 200 then return nil, "answered with status " .. res.status end
  local decoded, doc = pcall(json.decode, res.body)
  if not decoded or type(doc) ~= "table" or json.isArray(doc) then
    return nil, "is not a JSON object"
  end
  if doc.client_id ~= url then return nil, "has a client_id that is not its own URL" end
  local meta, _, description = metadata(doc)
  if not meta then return nil, "is not valid: " .. description end
  return { id = url, name = meta.client_name, redirectUris = meta.redirect_uris }
end

local function by_document(auth, url)
  local wrong = urls.clientIdProblem(url, auth.oauth.allowInsecureClientIds)
  if wrong then return nil, "The client's id " .. wrong .. "." end
  local now = auth.clock()
  local entry = cache_of(auth).entries[url]
  if not entry or entry.expires <= now then
    local client, problem, keep = fetch_document(url)
    now = auth.clock()
    entry = client and { expires = now + M.CACHE_FOR, client = client }
      or { expires = now + M.FAILURE_FOR, problem = problem }
    if client or keep ~= false then remember(auth, url, entry, now) end
  end
  if entry.client then return entry.client end
  return nil, "The client's metadata document " .. entry.problem .. "."
end

-- resolve(auth, clientId) → the client, or nil and a sentence for the error page.
function M.resolve(auth, client_id)
  if type(client_id) ~= "string" or client_id == "" then return nil, "The request names no client." end
  if urls.isClientIdUrl(client_id) then return by_document(auth, client_id) end
  if #client_id > 200 then return nil, "This client is not registered here." end
  local row = store.client(auth.db, client_id)
  if not row then return nil, "This client is not registered here." end
  local uris = json.decode(row.redirect_uris)
  return { id = row.id, name = type(row.name) == "string" and row.name or nil,
    redirectUris = type(uris) == "table" and uris or {} }
end

return M
