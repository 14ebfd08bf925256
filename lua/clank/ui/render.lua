-- render(node) -> HTML (SPEC §8). Text and attribute values are escaped; raw nodes are the only
-- way to emit markup. No whitespace is added between nodes.
local element = require "clank.ui.element"
local attributes = require "clank.ui.attributes"
local json = require "clank.json"

local type, error, concat = type, error, table.concat
local is_element, is_raw = element.isElement, element.isRaw

local VOID = {
  area = true, base = true, br = true, col = true, embed = true, hr = true, img = true,
  input = true, link = true, meta = true, source = true, track = true, wbr = true,
}

local ESCAPES = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }
local function escape(s) return (s:gsub('[&<>"]', ESCAPES)) end

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
local function child_key(prefix, n)
  if prefix then return prefix .. "." .. n end
  return tostring(n)
end
M.childKey = child_key

-- A tr directly under a table is written inside the tbody an HTML parser would imply, so the
-- browser's tree matches the server's; keys still count the server's children.
local function emit_children(out, children, selected, depth, live, prefix, in_table)
  local n, tbody = 0, false
  for i = 1, #children do
    local c = children[i]
    local key
    if is_element(c) then
      key = live and child_key(prefix, n)
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
      emit(out, option_props(c, selected), depth + 1, nil, live, key)
    elseif selected and is_element(c) and c.tag == "optgroup" then
      emit(out, c, depth + 1, selected, live, key)
    else
      emit(out, c, depth + 1, nil, live, key)
    end
  end
  if tbody then out[#out + 1] = "</tbody>" end
end

-- The live attributes of an element (SPEC §11): data-clank-on (the events it handles),
-- data-clank-key, and data-clank-confirm when its agentAction requires confirmation.
local function live_attributes(node, live, key)
  local events = {}
  for k, v in pairs(node.props) do
    if type(v) == "function" and type(k) == "string" and k:find("^on[A-Z]") then
      events[#events + 1] = k:sub(3):lower()
    end
  end
  local extra = {}
  if #events > 0 then
    table.sort(events)
    extra[#extra + 1] = { "data-clank-on", concat(events, " ") }
    extra[#extra + 1] = { "data-clank-key", key }
  end
  local action = node.props.agentAction
  if action ~= nil and action ~= false then
    if type(action) == "string" then action = live.actions and live.actions[action] end
    local ok, required = pcall(function() return action:requiresConfirmation() end)
    if ok and required then
      extra[#extra + 1] = { "data-clank-confirm",
        tostring(action.description) .. " (" .. tostring(action.sideEffects) .. ")" }
    end
  end
  return extra
end

function emit(out, node, depth, selected, live, key)
  if depth > 200 then error("clank.render: elements nested too deeply", 0) end
  local t = type(node)
  if t == "string" then
    out[#out + 1] = escape(node)
  elseif t == "number" then
    out[#out + 1] = json.formatNumber(node)
  elseif is_raw(node) then
    out[#out + 1] = node.html
  elseif type(node) == "table" and node.tag then
    local tag = node.tag
    if not element.validTag(tag) then error("clank.render: invalid tag name: " .. tostring(tag), 0) end
    out[#out + 1] = "<" .. tag
    local attrs = attributes.attributes(node)
    if live then
      local extra = live_attributes(node, live, key or "0")
      if #extra > 0 then
        for _, a in ipairs(attrs) do
          for _, x in ipairs(extra) do
            if a[1] == x[1] then error("clank.render: attribute " .. a[1] .. " given twice", 0) end
          end
        end
        for _, x in ipairs(extra) do attrs[#attrs + 1] = x end
        table.sort(attrs, function(a, b) return a[1] < b[1] end)
      end
    end
    for _, a in ipairs(attrs) do
      if a[2] == true then
        out[#out + 1] = " " .. a[1]
      else
        out[#out + 1] = " " .. a[1] .. '="' .. escape(a[2]) .. '"'
      end
    end
    out[#out + 1] = ">"
    if VOID[tag:lower()] then
      if #node.children > 0 then error("clank.render: <" .. tag .. "> cannot have children", 0) end
      return
    end
    local value = node.props.value
    local prefix = live and (key or "0")
    if tag == "textarea" and value ~= nil and value ~= json.null then
      emit(out, value, depth + 1)
    elseif tag == "select" and value ~= nil then
      emit_children(out, node.children, selected_set(value), depth, live, prefix)
    else
      emit_children(out, node.children, selected, depth, live, prefix, tag:lower() == "table")
    end
    out[#out + 1] = "</" .. tag .. ">"
  elseif t == "table" and getmetatable(node) == nil then
    emit_children(out, node, nil, depth, live, nil)
  elseif t == "table" and type(node.tree) == "function" then
    emit(out, node:tree(), depth + 1, nil, live, key) -- a mounted view
  elseif node ~= nil and node ~= false and node ~= true then
    error("clank.render: cannot render a " .. t, 0)
  end
end

-- render(node) -> HTML. render(node, { live = true, actions = { name → action } }) also writes
-- the live attributes; keys start at the node ("0", or "0", "1", ... for a list).
function M.render(node, options)
  local out = {}
  local live = options and options.live and options or nil
  emit(out, node, 0, nil, live, nil)
  return concat(out)
end

return M
