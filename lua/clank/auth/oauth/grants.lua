-- The grants page (/__clank/auth/grants): the apps a signed-in person let in, each with a
-- Revoke button (a plain form POST; 303 back to the page). In JSON too (accept or a JSON
-- body): GET → { ok, grants }, POST { grant } → { ok }. Revoking deletes the grant with its
-- codes and tokens: the next request with any of them, on any worker, finds nothing.
local json = require "clank.json"
local reqlib = require "clank.request"
local base = require "clank.auth.pages"
local answers = require "clank.auth.oauth.answers"
local pages = require "clank.auth.oauth.pages"
local store = require "clank.auth.oauth.store"
local urls = require "clank.auth.oauth.urls"

local type, ipairs, tonumber, tointeger = type, ipairs, tonumber, math.tointeger

local M = {}

local function fail(c, status, code, message)
  if c.json then return answers.json(status, { ok = false, error = { code = code, message = message } }) end
  return pages.problem(status, status == 404 and "Not found" or "Something went wrong", message)
end

local function number_or_null(v) return type(v) == "number" and v or json.null end

-- The signed-in person's grants, as the JSON and the page show them.
local function list(c, user)
  local out = json.array()
  for i, row in ipairs(store.grantsOf(c.auth.db, user.id)) do
    out[i] = {
      id = tointeger(row.id) or row.id, clientId = row.client_id,
      clientName = type(row.client_name) == "string" and row.client_name or row.client_id,
      scope = row.scope, createdAt = row.created_at, updatedAt = row.updated_at,
      lastUsed = number_or_null(row.last_used),
    }
  end
  return out
end

local function to_login(c)
  if c.json then return fail(c, 401, "UNAUTHORIZED", "Sign in first.") end
  return answers.redirect(base.PREFIX .. "login?next=" .. urls.encode(pages.GRANTS))
end

function M.show(c)
  local user = c.signedIn()
  if not user then return to_login(c) end
  local grants = list(c, user)
  if c.json then return answers.json(200, { ok = true, grants = grants }) end
  return pages.grants(grants)
end

function M.revoke(c)
  local user = c.signedIn()
  if not user then return fail(c, 401, "UNAUTHORIZED", "Sign in first.") end
  local request = c.request
  local body
  if reqlib.mediaType(type(request.headers) == "table" and request.headers["content-type"] or "")
      == "application/json" then
    body = reqlib.json(request)
  else
    body = reqlib.form(request)
  end
  local given = type(body) == "table" and body.grant
  local id = (type(given) == "number" or (type(given) == "string" and #given <= 18))
    and tointeger(tonumber(given))
  if not id then return fail(c, 422, "INVALID_INPUT", "Name the grant to revoke.") end
  local auth = c.auth
  local revoked = auth.db:transaction(function(tx) return store.deleteGrant(tx, id, user.id) end)
  if not revoked then return fail(c, 404, "NOT_FOUND", "No such grant.") end
  if c.json then return answers.json(200, { ok = true }) end
  return answers.redirect(pages.GRANTS)
end

return M
