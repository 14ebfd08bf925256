-- From element props to HTML attributes (SPEC §8): semantic props, event handlers, URL
-- checks and the attribute order. One function, attributes(el), used by render.
local json = require "clank.json"
local element = require "clank.ui.element"

local type, pairs, next, error, tostring, getmetatable, setmetatable =
  type, pairs, next, error, tostring, getmetatable, setmetatable
local sort = table.sort

local M = {}

-- Semantic props and the attribute each one becomes.
local SEMANTIC = {
  agentId = "data-clank-id",
  agentLabel = "data-clank-label",
  agentDescription = "data-clank-description",
  agentAction = "data-clank-action",
  intent = "data-clank-intent",
}
M.SEMANTIC = SEMANTIC

-- JSX-style aliases.
local ALIAS = { className = "class", htmlFor = "for" }

-- Elements on which agentLabel is mirrored to aria-label.
local INTERACTIVE = { a = true, button = true, input = true, select = true, summary = true,
  textarea = true }
M.INTERACTIVE = INTERACTIVE

-- Attributes holding a URL.
local URL_ATTRS = {
  action = true, background = true, cite = true, codebase = true, data = true,
  formaction = true, href = true, icon = true, longdesc = true, manifest = true,
  poster = true, profile = true, src = true, usemap = true, ["xlink:href"] = true,
}

-- An action (anything with a string .name) or a name.
local function action_name(v)
  if type(v) == "string" then return v end
  local ok, name = pcall(function() return v.name end)
  if ok and type(name) == "string" then return name end
  error("clank.render: agentAction must be an action or its name", 0)
end
M.actionName = action_name

-- The scheme of a URL as a browser sees it: leading C0 controls and spaces stripped, tabs and
-- newlines removed anywhere, lower-cased. nil for a relative URL.
local function scheme(url)
  local s = url:gsub("^[%z\1-\32]+", ""):gsub("[\t\n\r]", "")
  local sch = s:match("^([A-Za-z][A-Za-z0-9+.%-]*):")
  return sch and sch:lower(), s
end

local function check_url(name, url)
  local sch, s = scheme(url)
  if sch == nil then return end
  local bad = sch == "javascript" or sch == "vbscript" or sch == "file"
  if sch == "data" then
    -- Images only, and not SVG (a document that can run script).
    local mime = s:sub(6):match("^[^;,]*"):lower():gsub("%s", "")
    bad = mime:find("^image/") == nil or mime:find("^image/svg") ~= nil
  end
  if bad then
    error("clank.render: unsafe URL scheme \"" .. sch .. ":\" in attribute " .. name, 0)
  end
end
M.checkUrl = check_url

-- HTML attribute names: no spaces, quotes, '>', '/', '=' or controls.
local function valid_name(name)
  return name:find("^[A-Za-z_:][A-Za-z0-9_:.%-]*$") ~= nil
end

-- One attribute value as a string, true (bare), or nil (omitted).
local function value_of(name, v)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then return json.formatNumber(v) end
  if t == "boolean" then
    -- aria-* take the words; a bare aria-invalid would mean "".
    if name:find("^aria%-") then return tostring(v) end
    return v or nil
  end
  if v == json.null then return nil end
  error("clank.render: attribute " .. name .. " cannot take a " ..
    ((getmetatable(v) and getmetatable(v).__name) or t), 0)
end

-- Names seen valid: they repeat a lot. Bounded, since an app may make names up.
local NAME_OK, name_count = {}, 0

local function put(out, name, v)
  if not NAME_OK[name] then
    if not valid_name(name) then error("clank.render: invalid attribute name: " .. name, 0) end
    if name_count >= 4096 then NAME_OK, name_count = {}, 0 end
    NAME_OK[name] = true
    name_count = name_count + 1
  end
  local value = value_of(name, v)
  if value == nil then return end
  if value ~= true and URL_ATTRS[name:lower()] then check_url(name, value) end
  if out[name] ~= nil then error("clank.render: attribute " .. name .. " given twice", 0) end
  out[name] = value
end

local EMPTY = setmetatable({}, { __newindex = function() error("attributes: the empty list is shared", 2) end })
M.EMPTY = EMPTY

-- attributes(el) -> names sorted (byte order) and name → value (true = bare), or EMPTY
-- (shared: never written to) for an element without attributes.
function M.attributes(el)
  local props, tag = el.props, el.tag
  if next(props) == nil then return EMPTY, EMPTY end
  local out = {}
  for k, v in pairs(props) do
    if type(k) ~= "string" then
      error("clank.render: prop names must be strings (got " .. type(k) .. ")", 0)
    end
    local first = k:byte(1)
    if (first == 111 or first == 79) and k:find("^[Oo][Nn]") then -- on*
      if not (k:find("^on[A-Z]") and type(v) == "function") then
        error("clank.render: prop " .. k
          .. " is not allowed (event handlers are functions named on<Event>)", 0)
      end
    elseif SEMANTIC[k] then
      if v ~= nil and v ~= false then
        put(out, SEMANTIC[k], k == "agentAction" and action_name(v) or v)
      end
    elseif k == "agentHidden" then
      if v == true then put(out, "data-clank-hidden", "true") end
    elseif k == "srcdoc" or k:lower() == "srcdoc" then
      -- a document in an attribute: markup, so only from clank.raw
      if not element.isRaw(v) then error("clank.render: srcdoc takes clank.raw(html) only", 0) end
      put(out, k, v.html)
    elseif k == "format" and v == "password" then
      put(out, "data-clank-secret", "true")
    elseif not (k == "value" and (tag == "select" or tag == "textarea")) then
      put(out, ALIAS[k] or k, v) -- (a select's or textarea's value: options or text, in render)
    end
  end
  if INTERACTIVE[tag] and props.agentLabel ~= nil and props["aria-label"] == nil then
    put(out, "aria-label", props.agentLabel)
  end
  local names = {}
  for name in pairs(out) do names[#names + 1] = name end
  if #names > 1 then sort(names) end
  return names, out
end

return M
