-- render(node) -> HTML (SPEC §8). Text and attribute values are escaped; raw nodes are the only
-- way to emit markup. No whitespace is added between nodes.
local element = require "clank.ui.element"
local attributes = require "clank.ui.attributes"
local json = require "clank.json"

local type, error, concat, sort, pairs, pcall, tostring, getmetatable =
  type, error, table.concat, table.sort, pairs, pcall, tostring, getmetatable
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
    local names, values = attributes.attributes(node)
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
