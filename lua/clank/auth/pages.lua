-- The HTML pages of clank.auth: plain forms that work without JavaScript, made of Clank
-- elements and rendered into a small page of their own (a centered card, its style inline,
-- the live pages' content security policy). An app replaces any of them with
-- `pages = { <name> = view or function(props) → element }`; props are
-- { error?, email?, next, registration = "open"|"closed", token?, passwordMinLength }.
local element = require "clank.ui.element"
local render = require "clank.ui.render"
local page = require "clank.live.page"

local h = element.h
local concat, format, gsub, byte, pairs = table.concat, string.format, string.gsub, string.byte, pairs
local escape = render.escape

local M = {}

M.PREFIX = "/__clank/auth/"

local STYLE = [[
*, *::before, *::after { box-sizing: border-box; }
body {
  margin: 0; min-height: 100vh; display: flex; align-items: center; justify-content: center;
  background: #f3f4f6; color: #1f2328;
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
main {
  width: 100%; max-width: 24rem; margin: 2rem 1rem; padding: 2rem;
  background: #fff; border: 1px solid #d0d7de; border-radius: 8px;
}
h1 { margin: 0 0 1.5rem; font-size: 1.5rem; text-align: center; }
p { margin: 0 0 1rem; }
label { display: block; margin: 0 0 1rem; font-weight: 600; }
input {
  display: block; width: 100%; margin-top: .25rem; padding: .5rem .75rem;
  font: inherit; font-weight: 400; border: 1px solid #8c959f; border-radius: 6px;
}
input:focus { outline: 2px solid #0969da; outline-offset: 1px; border-color: #0969da; }
button:focus-visible, a:focus-visible { outline: 2px solid #0969da; outline-offset: 2px; }
button {
  display: block; width: 100%; margin-top: 1.5rem; padding: .6rem;
  font: inherit; font-weight: 600; color: #fff; background: #1f6feb;
  border: 0; border-radius: 6px; cursor: pointer;
}
button:hover { background: #1158c7; }
.error {
  padding: .75rem; color: #82071e; background: #ffebe9;
  border: 1px solid #ff8182; border-radius: 6px;
}
.hint { margin: -.75rem 0 1rem; font-size: .875rem; color: #59636e; }
nav { margin-top: 1.5rem; text-align: center; font-size: .9rem; }
nav a { display: inline-block; margin: .25rem .5rem; color: #0969da; white-space: nowrap; }
]]

-- ---- the default pages ----

local function path(name, next)
  if next == nil or next == "/" then return M.PREFIX .. name end
  return M.PREFIX .. name .. "?next=" .. gsub(next, "[^%w%-._~/]", function(c)
    return format("%%%02X", byte(c))
  end)
end

-- The form's error, above it; every field names it as its description (aria-describedby), so
-- the field focused when the page comes back reads it too.
local ERROR_ID = "auth-error"

local function error_line(props)
  if props.error then return h.p({ className = "error", id = ERROR_ID, role = "alert" }, props.error) end
end

-- aria-describedby: the error when there is one, then the field's hint.
local function described(props, hint)
  local ids = {}
  if props.error then ids[#ids + 1] = ERROR_ID end
  ids[#ids + 1] = hint
  return #ids > 0 and concat(ids, " ") or nil
end

local function email_field(props)
  return h.label(nil, "Email", h.input { type = "email", name = "email", value = props.email or "",
    autocomplete = "email", required = true, maxlength = 254, autofocus = props.email == nil,
    ["aria-describedby"] = described(props) })
end

local function password_field(props, label, name, autocomplete, autofocus)
  return h.label(nil, label, h.input { type = "password", name = name, autocomplete = autocomplete,
    required = true, autofocus = autofocus, ["aria-describedby"] = described(props) })
end

-- A password to set (its field and its hint, a list): the rule said under it before anyone
-- breaks it, and checked by the browser too (minlength counts UTF-16 units, never fewer than
-- the server's characters).
local HINT_ID = "password-hint"

local function new_password_field(props, label, autofocus)
  local min = props.passwordMinLength
  return {
    h.label(nil, label, h.input { type = "password", name = "password",
      autocomplete = "new-password", required = true, autofocus = autofocus, minlength = min,
      ["aria-describedby"] = described(props, min and HINT_ID) }),
    min and h.p({ className = "hint", id = HINT_ID },
      format("At least %d %s.", min, min == 1 and "character" or "characters")),
  }
end

local function form(name, props, ...)
  local go = props.next ~= "/" and props.next or nil
  return h.form({ method = "post", action = M.PREFIX .. name },
    go and h.input { type = "hidden", name = "next", value = go }, ...)
end

local function links(props, ...)
  local out = {}
  for _, name in ipairs { ... } do
    if name == "login" then
      out[#out + 1] = h.a({ href = path("login", props.next) }, "Sign in")
    elseif name == "register" and props.registration ~= "closed" then
      out[#out + 1] = h.a({ href = path("register", props.next) }, "Create an account")
    elseif name == "reset" then
      out[#out + 1] = h.a({ href = path("reset", props.next) }, "Forgot your password?")
    end
  end
  return h.nav(nil, out)
end

local DEFAULT = {}

function DEFAULT.login(props)
  return h.div(nil,
    h.h1(nil, "Sign in"),
    error_line(props),
    form("login", props,
      email_field(props),
      password_field(props, "Password", "password", "current-password", props.email ~= nil),
      h.button({ type = "submit" }, "Sign in")),
    links(props, "register", "reset"))
end

function DEFAULT.register(props)
  if props.registration == "closed" then
    return h.div(nil,
      h.h1(nil, "Create an account"),
      h.p({ className = "error", role = "alert" }, props.error or "Registration is closed."),
      links(props, "login"))
  end
  return h.div(nil,
    h.h1(nil, "Create an account"),
    error_line(props),
    form("register", props,
      email_field(props),
      new_password_field(props, "Password", props.email ~= nil),
      h.button({ type = "submit" }, "Create account")),
    links(props, "login"))
end

function DEFAULT.reset(props)
  return h.div(nil,
    h.h1(nil, "Reset your password"),
    error_line(props),
    h.p(nil, "Enter your account's email and we will send you a link to choose a new password."),
    form("reset", props,
      email_field(props),
      h.button({ type = "submit" }, "Send the link")),
    links(props, "login", "register"))
end

function DEFAULT.newPassword(props)
  return h.div(nil,
    h.h1(nil, "Choose a new password"),
    error_line(props),
    form("reset", props,
      h.input { type = "hidden", name = "token", value = props.token or "" },
      new_password_field(props, "New password", true),
      h.button({ type = "submit" }, "Set the password")),
    links(props, "login"))
end

function DEFAULT.resetSent(props)
  return h.div(nil,
    h.h1(nil, "Check your email"),
    h.p(nil, "If an account exists for that email, we sent it a link to choose a new password. " ..
      "The link works once, for an hour."),
    links(props, "login"))
end

function DEFAULT.password(props)
  return h.div(nil,
    h.h1(nil, "Change your password"),
    error_line(props),
    form("password", props,
      password_field(props, "Current password", "current", "current-password", true),
      new_password_field(props, "New password", false),
      h.button({ type = "submit" }, "Change password")))
end

M.DEFAULT = DEFAULT

M.TITLES = {
  login = "Sign in", register = "Create an account", reset = "Reset your password",
  newPassword = "Choose a new password", resetSent = "Check your email",
  password = "Change your password",
}

-- ---- the page around them ----

local CSP = page.csp()

function M.document(title, inner)
  return concat {
    '<!doctype html><html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="robots" content="noindex">',
    "<title>", escape(title), "</title><style>", STYLE, "</style></head><body><main>",
    inner, "</main></body></html>",
  }
end

-- respond(status, title, inner, headers?) → the answer: HTML, no-store, the policy.
local function respond(status, title, inner, more)
  local headers = page.headers(CSP)
  for k, v in pairs(more or {}) do headers[k] = v end
  return { status = status, headers = headers, body = M.document(title, inner) }
end

-- show(auth, name, props, status, headers?) → the page name (the app's, else the default).
function M.show(auth, name, props, status, headers)
  local view = auth.pages[name] or DEFAULT[name]
  props.passwordMinLength = auth.passwordMinLength
  return respond(status, M.TITLES[name], render.render(view(props)), headers)
end

-- problem(status, message, headers?) → a page for what no form shows (404, 405, 500).
function M.problem(status, title, message, headers)
  local inner = render.render(h.div(nil, h.h1(nil, title), h.p(nil, message),
    h.nav(nil, h.a({ href = M.PREFIX .. "login" }, "Sign in"))))
  return respond(status, title, inner, headers)
end

return M
