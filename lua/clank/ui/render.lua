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

local function emit_children(out, children, selected, depth)
  for i = 1, #children do
    local c = children[i]
    if selected and is_element(c) and c.tag == "option" then
      emit(out, option_props(c, selected), depth + 1)
    elseif selected and is_element(c) and c.tag == "optgroup" then
      emit(out, c, depth + 1, selected)
    else
      emit(out, c, depth + 1)
    end
  end
end

function emit(out, node, depth, selected)
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
    for _, a in ipairs(attributes.attributes(node)) do
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
    if tag == "textarea" and value ~= nil and value ~= json.null then
      emit(out, value, depth + 1)
    elseif tag == "select" and value ~= nil then
      emit_children(out, node.children, selected_set(value), depth)
    else
      emit_children(out, node.children, selected, depth)
    end
    out[#out + 1] = "</" .. tag .. ">"
  elseif t == "table" and getmetatable(node) == nil then
    emit_children(out, node, nil, depth)
  elseif t == "table" and type(node.tree) == "function" then
    emit(out, node:tree(), depth + 1) -- a mounted view
  elseif node ~= nil and node ~= false and node ~= true then
    error("clank.render: cannot render a " .. t, 0)
  end
end

function M.render(node)
  local out = {}
  emit(out, node, 0)
  return concat(out)
end

return M
