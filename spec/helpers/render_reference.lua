-- The reference renderer: clank.render as it was written in Lua (lua/clank/ui/render.lua and
-- lua/clank/ui/attributes.lua before the hot path moved into C, runtime/render/render.c), kept as
-- the oracle of spec/unit/render/render_c_spec.lua. Do not "fix" it: it is what the C must match, byte
-- for byte and error for error.
local json = require "clank.json"
local element = require "clank.ui.element"

-- attributes.lua ---------------------------------------------------------------------------

local type, pairs, next, error, tostring, getmetatable, setmetatable =
  type, pairs, next, error, tostring, getmetatable, setmetatable
local sort = table.sort

local A = {}

-- Semantic props and the attribute each one becomes.
local SEMANTIC = {
  agentId = "data-clank-id",
  agentLabel = "data-clank-label",
  agentDescription = "data-clank-description",
  agentAction = "data-clank-action",
  intent = "data-clank-intent",
}
A.SEMANTIC = SEMANTIC

-- JSX-style aliases.
local ALIAS = { className = "class", htmlFor = "for" }

-- Elements on which agentLabel is mirrored to aria-label.
local INTERACTIVE = { a = true, button = true, input = true, select = true, summary = true,
  textarea = true }
A.INTERACTIVE = INTERACTIVE

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
A.actionName = action_name

-- The scheme of a URL as a browser sees it: leading C0 controls and spaces stripped, tabs and
-- newlines removed, lower-cased. nil for a relative URL.
local function scheme(url)
  local s = url:gsub("^[%z\1-\32]+", ""):gsub("[\t\n\r]", "")
  local sch = s:match("^([A-Za-z][A-Za-z0-9+.%-]*):")
  return sch and sch:lower()
end

local function check_url(name, url)
  local sch = scheme(url)
  if sch == nil then return end
  local bad = sch == "javascript" or sch == "vbscript" or sch == "file"
  if sch == "data" then
    -- Images only, and not SVG (a document that can run script), as any browser reads the
    -- type: a C0 control or DEL in it is percent-encoded by the URL parser (no image type), and
    -- a tab or newline removed (WHATWG URL) or percent-encoded (Chromium): a control character
    -- anywhere in the type refuses it. Only spaces go.
    local raw = url:gsub("^[%z\1-\32]+", "")
    local mime = raw:sub(raw:find(":", 1, true) + 1):match("^[^;,]*"):lower()
    local control = mime:find("[%z\1-\31\127]") ~= nil
    mime = mime:gsub("^ +", "")
    bad = control or mime:find("^image/") == nil or mime:find("^image/ *svg") ~= nil
  end
  if bad then
    error("clank.render: unsafe URL scheme \"" .. sch .. ":\" in attribute " .. name, 0)
  end
end
A.checkUrl = check_url

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
A.EMPTY = EMPTY

-- attributes(el) -> names sorted (byte order) and name → value (true = bare), or EMPTY
-- (shared: never written to) for an element without attributes.
function A.attributes(el)
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

-- render.lua -------------------------------------------------------------------------------

local concat, pcall = table.concat, pcall
local is_element, is_raw = element.isElement, element.isRaw

local VOID = {
  area = true, base = true, br = true, col = true, embed = true, hr = true, img = true,
  input = true, link = true, meta = true, source = true, track = true, wbr = true,
}

local ESCAPES = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }
local find, gsub = string.find, string.gsub
local function escape(s)
  if not find(s, '[&<>"]') then return s end
  return (gsub(s, '[&<>"]', ESCAPES))
end

local M = { escape = escape, VOID = VOID }

-- The selected values of a select's value prop: a set of strings.
local function selected_set(v)
  local set = {}
  if type(v) == "table" and v ~= json.null then
    for _, x in ipairs(v) do set[type(x) == "number" and json.formatNumber(x) or x] = true end
  elseif type(v) == "string" then
    set[v] = true
  elseif type(v) == "number" then
    set[json.formatNumber(v)] = true
  end
  return set
end

local emit

-- An option under a select with a value prop: selected exactly when its value is chosen.
local function option_props(el, selected)
  local props = {}
  for k, v in pairs(el.props) do props[k] = v end
  local value = props.value
  if value == nil then
    -- without a value attribute the option's value is its text
    local parts = {}
    for _, c in ipairs(el.children) do
      if type(c) == "string" then parts[#parts + 1] = c
      elseif type(c) == "number" then parts[#parts + 1] = json.formatNumber(c) end
    end
    value = concat(parts)
  elseif type(value) == "number" then
    value = json.formatNumber(value)
  end
  props.selected = selected[value] == true
  return { tag = el.tag, props = props, children = el.children }
end

-- Positional keys (live renders): the element's index among its parent's element children,
-- joined with dots from the view's top ("0", "0.2.1"). clank.live finds elements the same way.
-- A render keeps the path of indexes to the element being written (live.path up to
-- live.level) and makes the key string only for the elements that carry one.
local function child_key(prefix, n)
  if prefix then return prefix .. "." .. n end
  return tostring(n)
end
M.childKey = child_key

local function key_of(live) return concat(live.path, ".", 1, live.level) end

-- A tr directly under a table is written inside the tbody an HTML parser would imply, so the
-- browser's tree matches the server's; keys still count the server's children.
local function emit_children(out, children, selected, depth, live, in_table)
  local n, tbody = 0, false
  local level
  if live then
    level = live.level + 1
    live.level = level
  end
  for i = 1, #children do
    local c = children[i]
    if is_element(c) then
      if live then live.path[level] = n end
      n = n + 1
      if in_table then
        local tr = c.tag:lower() == "tr"
        if tr and not tbody then
          out[#out + 1] = "<tbody>"
          tbody = true
        elseif not tr and tbody then
          out[#out + 1] = "</tbody>"
          tbody = false
        end
      end
    end
    if selected and is_element(c) and c.tag == "option" then
      emit(out, option_props(c, selected), depth + 1, nil, live)
    elseif selected and is_element(c) and c.tag == "optgroup" then
      emit(out, c, depth + 1, selected, live)
    else
      emit(out, c, depth + 1, nil, live)
    end
    if live then live.level = level end
  end
  if live then live.level = level - 1 end
  if tbody then out[#out + 1] = "</tbody>" end
end

local function requires_confirmation(action) return action:requiresConfirmation() end

-- The live attributes of an element (SPEC §11): data-clank-on (the events it handles, with
-- data-clank-key) and data-clank-confirm when its agentAction requires confirmation. Returns
-- the on and confirm values (nil when absent).
local function live_attributes(node, live)
  local props = node.props
  local on
  for k, v in pairs(props) do
    if type(v) == "function" and type(k) == "string" and find(k, "^on[A-Z]") then
      local name = k:sub(3):lower()
      if on == nil then on = name
      elseif type(on) == "string" then on = { on, name }
      else on[#on + 1] = name end
    end
  end
  if type(on) == "table" then
    sort(on)
    on = concat(on, " ")
  end
  local confirm
  local action = props.agentAction
  if action ~= nil and action ~= false then
    if type(action) == "string" then action = live.actions and live.actions[action] end
    local ok, required = pcall(requires_confirmation, action)
    if ok and required then
      confirm = tostring(action.description) .. " (" .. tostring(action.sideEffects) .. ")"
    end
  end
  return on, confirm
end

local function write_attribute(out, n, name, v)
  n = n + 1; out[n] = " "
  n = n + 1; out[n] = name
  if v ~= true then
    n = n + 1; out[n] = '="'
    n = n + 1; out[n] = escape(v)
    n = n + 1; out[n] = '"'
  end
  return n
end

local valid_tags = {} -- tag names seen valid, bounded like attribute names
local tag_count = 0

function emit(out, node, depth, selected, live)
  if depth > 200 then error("clank.render: elements nested too deeply", 0) end
  local t = type(node)
  if t == "string" then
    out[#out + 1] = escape(node)
  elseif t == "number" then
    out[#out + 1] = json.formatNumber(node)
  elseif is_raw(node) then
    out[#out + 1] = node.html
  elseif t == "table" and node.tag then
    local tag = node.tag
    if not valid_tags[tag] then
      if not element.validTag(tag) then error("clank.render: invalid tag name: " .. tostring(tag), 0) end
      if tag_count >= 1024 then valid_tags, tag_count = {}, 0 end
      valid_tags[tag] = true
      tag_count = tag_count + 1
    end
    local names, values = A.attributes(node)
    local n = #out
    n = n + 1; out[n] = "<"
    n = n + 1; out[n] = tag
    local on, confirm
    if live then on, confirm = live_attributes(node, live) end
    if on or confirm then
      -- the live attributes merged into the sorted list (they sort as confirm < key < on)
      local extra = {}
      if confirm then extra[#extra + 1] = "data-clank-confirm" end
      if on then
        extra[#extra + 1] = "data-clank-key"
        extra[#extra + 1] = "data-clank-on"
      end
      local extra_values = { ["data-clank-confirm"] = confirm, ["data-clank-on"] = on,
        ["data-clank-key"] = on and key_of(live) }
      local i, j = 1, 1
      while i <= #names or j <= #extra do
        local a, b = names[i], extra[j]
        if b and values[b] ~= nil then error("clank.render: attribute " .. b .. " given twice", 0) end
        if a and (not b or a < b) then
          n = write_attribute(out, n, a, values[a])
          i = i + 1
        else
          n = write_attribute(out, n, b, extra_values[b])
          j = j + 1
        end
      end
    else
      for i = 1, #names do
        local name = names[i]
        n = write_attribute(out, n, name, values[name])
      end
    end
    n = n + 1; out[n] = ">"
    local lower = tag:lower()
    if VOID[lower] then
      if #node.children > 0 then error("clank.render: <" .. tag .. "> cannot have children", 0) end
      return
    end
    local value = node.props.value
    if tag == "textarea" and value ~= nil and value ~= json.null then
      emit(out, value, depth + 1)
    elseif tag == "select" and value ~= nil then
      emit_children(out, node.children, selected_set(value), depth, live)
    else
      emit_children(out, node.children, selected, depth, live, lower == "table")
    end
    n = #out
    n = n + 1; out[n] = "</"
    n = n + 1; out[n] = tag
    n = n + 1; out[n] = ">"
  elseif t == "table" and getmetatable(node) == nil then
    emit_children(out, node, nil, depth, live)
  elseif t == "table" and type(node.tree) == "function" then
    emit(out, node:tree(), depth + 1, nil, live) -- a mounted view
  elseif node ~= nil and node ~= false and node ~= true then
    error("clank.render: cannot render a " .. t, 0)
  end
end

-- render(node) -> HTML. render(node, { live = true, actions = { name → action } }) also writes
-- the live attributes; keys start at the node ("0", or "0", "1", ... for a list).
function M.render(node, options)
  local out = {}
  local live
  if options and options.live then
    live = { actions = options.actions, path = { 0 }, level = 0 }
    if is_element(node) or (type(node) == "table" and type(node.tree) == "function") then
      live.level = 1 -- a single top element is "0"; a list's elements are "0", "1", ...
    end
  end
  emit(out, node, 0, nil, live)
  return concat(out)
end

return M
