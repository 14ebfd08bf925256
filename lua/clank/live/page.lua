-- The HTML page of a view (SPEC §11): GET / and GET /views/:name. The view is loaded,
-- rendered and dropped; the page carries the session token and the client script.
local render = require "clank.ui.render"

local type, ipairs, pairs, error, pcall, concat, sort = type, ipairs, pairs, error, pcall,
  table.concat, table.sort
local escape = render.escape

local M = {}

-- The default policy, in this order; app.page.csp extends each directive.
local CSP = {
  { "default-src", "'self'" },
  { "script-src", "'self'" },
  { "style-src", "'self' 'unsafe-inline'" },
  { "img-src", "'self' data:" },
  { "connect-src", "'self'" },
  { "frame-ancestors", "'none'" },
  { "base-uri", "'none'" },
  { "form-action", "'self'" },
}

-- csp(extensions) → the header value; raises (level 3) on a bad extension.
function M.csp(ext)
  ext = ext or {}
  if type(ext) ~= "table" then error("clank.app: page.csp must be a table", 3) end
  local function sources(name)
    local list = ext[name]
    if list == nil then return nil end
    if type(list) == "string" then list = { list } end
    if type(list) ~= "table" then error("clank.app: page.csp[\"" .. name .. "\"] must be a list of sources", 4) end
    for _, src in ipairs(list) do
      if type(src) ~= "string" or src == "" or src:find("[;,%c]") then
        error("clank.app: page.csp[\"" .. name .. "\"] has a bad source: " .. tostring(src), 4)
      end
    end
    return concat(list, " ")
  end
  local out, known = {}, {}
  for _, d in ipairs(CSP) do
    known[d[1]] = true
    local more = sources(d[1])
    local value = d[2]
    if more then value = value == "'none'" and more or value .. " " .. more end
    out[#out + 1] = d[1] .. " " .. value
  end
  local extra = {}
  for name in pairs(ext) do
    if type(name) ~= "string" or not name:find("^[a-z][a-z%-]*$") then
      error("clank.app: page.csp has a bad directive name: " .. tostring(name), 3)
    end
    if not known[name] then extra[#extra + 1] = name end
  end
  sort(extra)
  for _, name in ipairs(extra) do out[#out + 1] = name .. " " .. sources(name) end
  return concat(out, "; ")
end

-- The client script's URL (content-hashed by clank.core when it can).
function M.scriptPath()
  local ok, core = pcall(require, "clank.core")
  if ok and type(core.clientScript) == "function" then
    local got, path = pcall(core.clientScript)
    if got and type(path) == "string" then return path end
  end
  return "/__clank/client.js"
end

function M.headers(csp)
  return {
    ["content-type"] = "text/html; charset=utf-8",
    ["cache-control"] = "no-store",
    ["content-security-policy"] = csp,
    ["referrer-policy"] = "same-origin",
  }
end

-- style: a <style> element before the app's stylesheets (which may restyle what it styles), or nil.
local function head(title, page, style)
  local out = { '<!doctype html><html lang="', escape(page.lang or "en"), '"><head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    "<title>", escape(title), "</title>", style }
  for _, href in ipairs(page.stylesheets or {}) do
    out[#out + 1] = '<link rel="stylesheet" href="' .. escape(href) .. '">'
  end
  out[#out + 1] = "</head>"
  return concat(out)
end

-- html(title, page, id, inner, script) → the page of a view
function M.html(title, page, id, inner, script)
  return concat {
    head(title, page),
    '<body><div data-clank-root data-clank-session="', escape(id), '">', inner, "</div>",
    '<script src="', escape(script), '" defer></script></body></html>',
  }
end

-- An error page's own look, plain and readable without the app's stylesheets (style-src allows
-- inline styles).
local ERROR_STYLE = "<style>body{font:16px/1.5 system-ui,sans-serif;color:#1f2328;"
  .. "max-width:36rem;margin:12vh auto;padding:0 1.25rem}h1{font-size:1.5rem;margin:0 0 .5rem}"
  .. "ul{padding:0;list-style:none;color:#59636e}</style>"

-- An error page: a heading and the lines under it.
function M.errorPage(status, title, lines, page, csp)
  local out = { head(title, page or {}, ERROR_STYLE), "<body><h1>", escape(title), "</h1>" }
  if lines and #lines > 0 then
    out[#out + 1] = "<ul>"
    for _, line in ipairs(lines) do out[#out + 1] = "<li>" .. escape(line) .. "</li>" end
    out[#out + 1] = "</ul>"
  end
  out[#out + 1] = "</body></html>"
  return { status = status, headers = M.headers(csp), body = concat(out) }
end

return M
