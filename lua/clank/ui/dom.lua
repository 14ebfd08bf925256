-- Reading element trees the way the DOM would (SPEC §9): an index of a tree (parents, ids,
-- labels), text content, control values and form data. Shared by the surface.
local element = require "clank.ui.element"
local json = require "clank.json"

local type, ipairs, concat = type, ipairs, table.concat
local is_element, is_raw = element.isElement, element.isRaw

local M = {}

-- A prop as a string (numbers formatted), or nil.
local function str(v)
  if type(v) == "string" then return v end
  if type(v) == "number" then return json.formatNumber(v) end
  return nil
end
M.str = str

-- A boolean attribute is present: anything but nil, false and null.
local function present(v) return v ~= nil and v ~= false and v ~= json.null end
M.present = present

-- An aria state that is "true".
local function aria_true(v) return v == true or v == "true" end
M.ariaTrue = aria_true

local function input_type(el)
  return el.tag == "input" and (str(el.props.type) or "text"):lower() or nil
end
M.inputType = input_type

-- Removed from inspection with its subtree.
function M.skipped(el)
  local p = el.props
  return p.agentHidden == true or present(p.hidden) or aria_true(p["aria-hidden"])
    or input_type(el) == "hidden"
end

-- index(container) -> { parent = {el → parent}, byAgentId, byId, labelFor, all }
function M.index(container)
  local idx = { parent = {}, byAgentId = {}, byId = {}, labelFor = {}, all = {} }
  local function walk(el)
    for _, c in ipairs(el.children) do
      if is_element(c) then
        idx.parent[c] = el
        idx.all[#idx.all + 1] = c
        local p = c.props
        local agent_id, id = str(p.agentId), str(p.id)
        if agent_id and not idx.byAgentId[agent_id] then idx.byAgentId[agent_id] = c end
        if id and not idx.byId[id] then idx.byId[id] = c end
        local target = c.tag == "label" and (str(p["for"]) or str(p.htmlFor))
        if target and not idx.labelFor[target] then idx.labelFor[target] = c end
        walk(c)
      end
    end
  end
  walk(container)
  return idx
end

-- The element an agent means by id: agentId first, then id.
function M.find(idx, id)
  if type(id) ~= "string" then return nil end
  return idx.byAgentId[id] or idx.byId[id]
end

function M.ancestor(idx, el, tag)
  local p = idx.parent[el]
  while p do
    if p.tag == tag then return p end
    p = idx.parent[p]
  end
  return nil
end

-- Text content; skipped subtrees and a textarea's text (its value) are left out when visible.
local function text(el, visible, out)
  for _, c in ipairs(el.children) do
    local t = type(c)
    if t == "string" then out[#out + 1] = c
    elseif t == "number" then out[#out + 1] = json.formatNumber(c)
    elseif is_raw(c) then out[#out + 1] = (c.html:gsub("<[^>]*>", ""))
    elseif is_element(c) and not (visible and (M.skipped(c) or c.tag == "textarea")) then
      text(c, visible, out)
    end
  end
  return out
end
function M.text(el, visible) return concat(text(el, visible, {})) end

-- Options of a select (inside optgroups too), as { element, value }.
function M.options(el)
  local out = {}
  local function walk(node)
    for _, c in ipairs(node.children) do
      if is_element(c) then
        if c.tag == "option" then
          out[#out + 1] = { c, str(c.props.value) or M.text(c) }
        elseif c.tag == "optgroup" then
          walk(c)
        end
      end
    end
  end
  walk(el)
  return out
end

local function list_of(v)
  local out = json.array()
  for _, x in ipairs(v) do out[#out + 1] = str(x) end
  return out
end

-- The value a control holds (secret or not): a string, a list for select multiple, or nil.
function M.value(el)
  local p = el.props
  if el.tag == "select" then
    local multiple = present(p.multiple)
    if p.value ~= nil and p.value ~= json.null then
      if multiple then return type(p.value) == "table" and list_of(p.value) or json.array { str(p.value) } end
      return str(p.value) or ""
    end
    local opts, chosen = M.options(el), json.array()
    for _, o in ipairs(opts) do
      if present(o[1].props.selected) then chosen[#chosen + 1] = o[2] end
    end
    if multiple then return chosen end
    return chosen[1] or (opts[1] and opts[1][2]) or ""
  elseif el.tag == "textarea" then
    return str(p.value) or M.text(el)
  elseif el.tag == "input" then
    local ty = input_type(el)
    if ty == "checkbox" or ty == "radio" then return str(p.value) or "on" end
    return str(p.value) or ""
  end
  return nil
end

-- Secret controls: their value is never read out to an agent.
function M.secret(el)
  local ty = input_type(el)
  return ty == "password" or ty == "file" or el.props.format == "password"
end

local NOT_DATA = { submit = true, button = true, reset = true, image = true, file = true }

-- The data a form would submit: name → string, or a list for repeated names and select multiple.
function M.formData(form)
  local values = {}
  local function add(name, v)
    local cur = values[name]
    if cur == nil then
      values[name] = v
    else
      if not json.isArray(cur) then cur = json.array { cur }; values[name] = cur end
      if type(v) == "table" then
        for _, x in ipairs(v) do cur[#cur + 1] = x end
      else
        cur[#cur + 1] = v
      end
    end
  end
  local function walk(node)
    for _, c in ipairs(node.children) do
      if is_element(c) then
        local p = c.props
        local name = str(p.name)
        if name and not present(p.disabled) then
          local ty = input_type(c)
          if c.tag == "input" and not NOT_DATA[ty] then
            if ty == "checkbox" or ty == "radio" then
              if present(p.checked) then add(name, M.value(c)) end
            else
              add(name, M.value(c))
            end
          elseif c.tag == "select" or c.tag == "textarea" then
            add(name, M.value(c))
          end
        end
        walk(c)
      end
    end
  end
  walk(form)
  return values
end

return M
