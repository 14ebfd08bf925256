-- The HTML of OAuth: the consent page (a checkbox per scope asked, Approve or Deny: one plain
-- form), the grants page (the apps a person let in, each with a Revoke form) and the error page
-- of an authorization request that cannot go back to its client. Clank elements in clank.auth.pages's page (its
-- shell and style), with a few rules of their own.
local element = require "clank.ui.element"
local render = require "clank.ui.render"
local page = require "clank.live.page"
local base = require "clank.auth.pages"
local scopes = require "clank.auth.oauth.scopes"

local h, raw = element.h, element.raw
local type, ipairs, pairs, tostring, floor, date, concat = type, ipairs, pairs, tostring, math.floor, os.date,
  table.concat

local M = {}

M.AUTHORIZE = "/__clank/oauth/authorize"
M.GRANTS = base.PREFIX .. "grants"

local STYLE = raw [[<style>
.oauth-lead { font-size: 1.05rem; }
.oauth-scopes { margin: 0 0 1rem; padding: 0; border: 0; }
.oauth-scopes legend { margin: 0 0 .5rem; padding: 0; }
.oauth-scopes label { display: flex; align-items: center; gap: .5rem; margin: 0 0 .5rem; font-weight: 400; }
.oauth-scopes input { display: inline-block; width: auto; margin: 0; padding: 0; }
.oauth-note { color: #57606a; font-size: .9rem; }
button.oauth-deny { margin-top: .75rem; color: #1f2328; background: #fff; border: 1px solid #8c959f; }
button.oauth-deny:hover { background: #f3f4f6; }
.oauth-grant { padding: 1rem 0; border-top: 1px solid #d0d7de; }
.oauth-grant h2 { margin: 0 0 .25rem; font-size: 1.1rem; overflow-wrap: anywhere; }
.oauth-grant p { margin: 0 0 .25rem; }
.oauth-grant button { margin-top: .5rem; }
</style>]]

local DEFAULT_CSP = page.csp()

-- respond(status, title, node, csp) → the answer: HTML in the auth pages' shell, no-store.
local function respond(status, title, node, csp)
  return { status = status, headers = page.headers(csp or DEFAULT_CSP),
    body = base.document(title, render.render(h.div(nil, STYLE, node))) }
end

-- One checkbox per scope asked (name="scope"), ticked when ticked has it: the person may grant
-- less than was asked. An empty hidden scope comes first: a browser sends no field for a box
-- left unticked, and this one tells a form with none ticked from a POST without the field
-- (which is granted what was asked).
local function choices(asked, ticked)
  local on, out = {}, { h.input { type = "hidden", name = "scope", value = "" } }
  for _, name in ipairs(scopes.names(ticked)) do on[name] = true end
  for _, name in ipairs(scopes.names(asked)) do
    local box = h.input { type = "checkbox", name = "scope", value = name, checked = on[name] == true }
    out[#out + 1] = h.label(nil, box, scopes.label(name))
  end
  return h.fieldset({ className = "oauth-scopes" }, h.legend(nil, "It will be able to:"), out)
end

-- consent { clientName, clientHost?, redirectHost, redirectOrigin, scope, ticked?, error?, email,
-- request } → the page (status 200, or 422 with an error); clientHost is the host of a client
-- ID metadata document's URL; ticked (default: scope) the scopes whose boxes are ticked.
-- Its content security policy lets the form go to this site and, after the POST's 303, to the
-- client's redirect URI (Chromium applies form-action to the redirect too).
function M.consent(p)
  local node = h.div(nil,
    h.h1(nil, "Allow access?"),
    h.p({ className = "oauth-lead" }, h.strong(nil, p.clientName), " wants to use your account."),
    p.clientHost and h.p({ className = "oauth-note" }, "It describes itself at ", h.strong(nil, p.clientHost),
      ": its name is its own claim."),
    p.error and h.p({ className = "error", role = "alert" }, p.error),
    h.form({ method = "post", action = M.AUTHORIZE },
      h.input { type = "hidden", name = "request", value = p.request },
      choices(p.scope, p.ticked or p.scope),
      h.p({ className = "oauth-note" }, "Signed in as ", p.email, ". Your answer goes to ",
        h.strong(nil, p.redirectHost), "."),
      h.button({ type = "submit", name = "decision", value = "approve" }, "Approve"),
      h.button({ type = "submit", name = "decision", value = "deny", className = "oauth-deny" }, "Deny")))
  local csp = page.csp { ["form-action"] = { p.redirectOrigin } }
  return respond(p.error and 422 or 200, "Allow access?", node, csp)
end

local function when(ms)
  if type(ms) ~= "number" then return "never" end
  return date("!%Y-%m-%d %H:%M UTC", floor(ms / 1000))
end

-- grants(list) → the page of a person's grants: { id, clientName, scope, createdAt, lastUsed }.
function M.grants(grants)
  local items = {}
  for i, g in ipairs(grants) do
    items[i] = h.div({ className = "oauth-grant" },
      h.h2(nil, g.clientName),
      h.p(nil, "Can: ", concat(scopes.words(g.scope), ", ")),
      h.p({ className = "oauth-note" }, "Allowed " .. when(g.createdAt) .. ". Last used " ..
        when(g.lastUsed) .. "."),
      h.form({ method = "post", action = M.GRANTS },
        h.input { type = "hidden", name = "grant", value = tostring(g.id) },
        h.button({ type = "submit" }, "Revoke")))
  end
  local node = h.div(nil,
    h.h1(nil, "Connected apps"),
    #items == 0 and h.p(nil, "No app has access to your account.")
      or h.p(nil, "These apps can use your account until you revoke them."),
    items)
  return respond(200, "Connected apps", node)
end

-- problem(status, title, message) → an error page (it never sends anyone elsewhere).
function M.problem(status, title, message, headers)
  local answer = respond(status, title, h.div(nil, h.h1(nil, title), h.p({ className = "error", role = "alert" },
    message)))
  for k, v in pairs(headers or {}) do answer.headers[k] = v end
  return answer
end

return M
