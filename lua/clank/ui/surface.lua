-- createAgentSurface(root) (SPEC §9): inspect() lists what an agent can see; activate(id) and
-- input(id, value) operate the controls as the DOM would, running the elements' handlers.
-- State lives in the element props (value, checked); a mounted view re-renders on its own.
local element = require "clank.ui.element"
local dom = require "clank.ui.dom"
local attributes = require "clank.ui.attributes"
local json = require "clank.json"

local type, pairs, ipairs, error, concat = type, pairs, ipairs, error, table.concat
local getmetatable, setmetatable, pcall = getmetatable, setmetatable, pcall
local is_element = element.isElement
local str, present, aria_true, input_type = dom.str, dom.present, dom.ariaTrue, dom.inputType

local MAX_LABEL = 160

local KEPT_TAGS = { a = true, button = true, input = true, select = true, textarea = true,
  summary = true }
local CONTROLS = { input = true, select = true, textarea = true }
local INPUT_ROLES = { checkbox = "checkbox", radio = "radio", range = "slider",
  button = "button", submit = "button", reset = "button" }

local function implicit_role(el)
  local tag, p = el.tag, el.props
  if tag == "button" or tag == "summary" then return "button" end
  if tag == "a" then return present(p.href) and "link" or nil end
  if tag == "select" then return present(p.multiple) and "listbox" or "combobox" end
  if tag == "textarea" then return "textbox" end
  if tag == "input" then return INPUT_ROLES[input_type(el)] or "textbox" end
  return nil
end

local function role_of(el) return str(el.props.role) or implicit_role(el) end

local function kept(el)
  local p = el.props
  return str(p.agentId) ~= nil or str(p.id) ~= nil or role_of(el) ~= nil or KEPT_TAGS[el.tag]
    or present(p.intent) or present(p.agentAction)
end

-- Whitespace collapsed; nil when nothing is left.
local function collapse(s)
  if not s then return nil end
  s = s:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
  return s ~= "" and s or nil
end

local function cut(s)
  local ok, stop = pcall(utf8.offset, s, MAX_LABEL + 1)
  if ok then
    if stop and stop <= #s then return s:sub(1, stop - 1) end
    return s
  end
  return s:sub(1, MAX_LABEL) -- not UTF-8: bytes
end

local function label_of(el, idx)
  local p = el.props
  local label = collapse(str(p.agentLabel)) or collapse(str(p["aria-label"]))
  if not label and str(p["aria-labelledby"]) then
    local parts = {}
    for ref in str(p["aria-labelledby"]):gmatch("%S+") do
      local target = idx.byId[ref]
      parts[#parts + 1] = target and collapse(dom.text(target, false)) or nil
    end
    label = collapse(concat(parts, " "))
  end
  if not label and str(p.id) and idx.labelFor[str(p.id)] then
    label = collapse(dom.text(idx.labelFor[str(p.id)], true))
  end
  if not label then
    local enclosing = dom.ancestor(idx, el, "label")
    if enclosing then label = collapse(dom.text(enclosing, true)) end
  end
  label = label or collapse(str(p.placeholder)) or collapse(str(p.title))
  if not label and not CONTROLS[el.tag] then label = collapse(dom.text(el, true)) end
  return label and cut(label)
end

local function node_of(el, idx)
  local p, tag = el.props, el.tag
  local ty = input_type(el)
  local role = role_of(el)
  local node = {
    id = str(p.agentId) or str(p.id),
    tag = tag,
    role = role,
    label = label_of(el, idx),
    description = str(p.agentDescription),
    intent = str(p.intent),
    action = present(p.agentAction) and attributes.actionName(p.agentAction) or nil,
    name = str(p.name),
    type = str(p.type),
    placeholder = str(p.placeholder),
    href = tag == "a" and str(p.href) or nil,
  }
  if present(p.disabled) or aria_true(p["aria-disabled"]) then node.disabled = true end
  if present(p.readonly) or present(p.readOnly) or aria_true(p["aria-readonly"]) then
    node.readonly = true
  end
  if present(p.required) or aria_true(p["aria-required"]) then node.required = true end
  if aria_true(p["aria-invalid"]) then node.invalid = true end
  local expanded = p["aria-expanded"]
  if aria_true(expanded) then node.expanded = true
  elseif expanded == false or expanded == "false" then node.expanded = false end
  if ty == "checkbox" or ty == "radio" then
    node.checked = present(p.checked)
  elseif role == "checkbox" or role == "radio" then
    node.checked = aria_true(p["aria-checked"])
  end
  if tag == "select" and present(p.multiple) then node.multiple = true end
  if CONTROLS[tag] and not dom.secret(el) then
    local value = dom.value(el)
    if ty == "checkbox" or ty == "radio" then value = str(p.value) end
    if type(value) == "table" or (value and value ~= "") then node.value = value end
  end
  return node
end

local collect

-- Appends the node of element c to out: a kept element with its own fields, any other only as a
-- wrapper of kept children ({ tag, children }), or nothing when it has none.
local function add(c, idx, out)
  local node = kept(c) and node_of(c, idx) or nil
  local kids = collect(c, idx, json.array())
  if #kids > 0 then
    node = node or { tag = c.tag }
    node.children = kids
  end
  out[#out + 1] = node
end

-- The nodes of el's children, appended to out. The tr children of a table are listed inside the
-- tbody an HTML parser implies around each run of them, which the renderer writes, so that the
-- browser's surface over the DOM lists the same wrappers.
function collect(el, idx, out)
  local in_table, rows = el.tag:lower() == "table", nil
  local function end_rows()
    if rows and #rows > 0 then out[#out + 1] = { tag = "tbody", children = rows } end
    rows = nil
  end
  for _, c in ipairs(el.children) do
    if is_element(c) then
      if in_table and c.tag:lower() == "tr" then rows = rows or json.array()
      elseif in_table then end_rows() end
      if not dom.skipped(c) then add(c, idx, rows or out) end
    end
  end
  end_rows()
  return out
end

-- The element whose children are listed: the tree's root, or for a mounted view a container
-- holding its tree (as the page element a browser surface starts from).
local function container_of(root)
  if is_element(root) then return root end
  local tree = root:tree()
  local children = {}
  if is_element(tree) then children[1] = tree
  elseif type(tree) == "table" then for i, c in ipairs(tree) do children[i] = c end end
  return { tag = "#root", props = {}, children = children }
end

local function target_of(el)
  local p = el.props
  return { id = str(p.agentId) or str(p.id), name = str(p.name), tag = el.tag }
end

local function event(el, kind)
  local ev = { type = kind, target = target_of(el) }
  local ty = input_type(el)
  if ty == "checkbox" or ty == "radio" then
    ev.checked = present(el.props.checked)
  elseif CONTROLS[el.tag] then
    ev.value = dom.value(el)
  end
  return ev
end

-- A handler gets the event, and the ctx of the request it runs for when one is bound (a
-- surface call or a live event served by clank.live).
local function call(handler, ev)
  if type(handler) == "function" then handler(ev, require("clank.runner").currentRequest()) end
end

-- Checking a radio unchecks the others of its name in the same form (or the whole tree).
local function check_radio(idx, el)
  local name = str(el.props.name)
  local scope = dom.ancestor(idx, el, "form")
  for _, other in ipairs(idx.all) do
    if other ~= el and name and input_type(other) == "radio" and str(other.props.name) == name
      and dom.ancestor(idx, other, "form") == scope then
      other.props.checked = false
    end
  end
  el.props.checked = true
end

local function inert(el)
  local p = el.props
  return present(p.disabled) or aria_true(p["aria-disabled"])
end

local function is_submit(el)
  local ty = str(el.props.type)
  ty = ty and ty:lower()
  if el.tag == "button" then return ty == nil or ty == "submit" end
  return el.tag == "input" and (ty == "submit" or ty == "image")
end

local function is_list(v)
  if type(v) ~= "table" or (getmetatable(v) ~= nil and not json.isArray(v)) then return false end
  local n = 0
  for _ in pairs(v) do n = n + 1 end
  if n ~= #v then return false end
  for _, x in ipairs(v) do if type(x) ~= "string" then return false end end
  return true
end

local function option_values(el)
  local set, any = {}, false
  for _, o in ipairs(dom.options(el)) do set[o[2]] = true; any = true end
  return any and set or nil
end

local NOT_TYPABLE = { file = true, hidden = true, submit = true, button = true, reset = true,
  image = true }

local Surface = {}
Surface.__index = Surface

function Surface:inspect()
  local container = container_of(self.root)
  return collect(container, dom.index(container), json.array())
end

function Surface:activate(id)
  local container = container_of(self.root)
  local idx = dom.index(container)
  local el = dom.find(idx, id)
  if not el or inert(el) then return false end
  local ty = input_type(el)
  local form = is_submit(el) and dom.ancestor(idx, el, "form") or nil
  local toggled = false
  if ty == "checkbox" then
    el.props.checked = not present(el.props.checked)
    toggled = true
  elseif ty == "radio" and not present(el.props.checked) then
    check_radio(idx, el)
    toggled = true
  end
  call(el.props.onClick, event(el, "click"))
  if toggled then
    call(el.props.onInput, event(el, "input"))
    call(el.props.onChange, event(el, "change"))
  end
  if form and not inert(form) then
    call(form.props.onSubmit, { type = "submit", values = dom.formData(form), target = target_of(form) })
  end
  return true
end

function Surface:input(id, value)
  local container = container_of(self.root)
  local idx = dom.index(container)
  local el = dom.find(idx, id)
  if not el or not CONTROLS[el.tag] or inert(el) then return false end
  local p = el.props
  if present(p.readonly) or present(p.readOnly) or aria_true(p["aria-readonly"]) then return false end
  local ty = input_type(el)
  if NOT_TYPABLE[ty] then return false end
  if ty == "checkbox" or ty == "radio" then
    if type(value) ~= "boolean" then return false end
    if ty == "radio" and value then check_radio(idx, el) else p.checked = value end
  elseif el.tag == "select" and present(p.multiple) then
    if not is_list(value) then return false end
    local known = option_values(el)
    for _, v in ipairs(value) do if known and not known[v] then return false end end
    local copy = json.array()
    for i, v in ipairs(value) do copy[i] = v end
    p.value = copy
  else
    if type(value) ~= "string" then return false end
    if el.tag == "select" then
      local known = option_values(el)
      if known and not known[value] then return false end
    end
    p.value = value
  end
  call(p.onInput, event(el, "input"))
  call(p.onChange, event(el, "change"))
  return true
end

local M = {}

function M.createAgentSurface(root)
  local ok = is_element(root) or (type(root) == "table" and type(root.tree) == "function")
  if not ok then
    error("clank.createAgentSurface: expected an element tree or a mounted view", 2)
  end
  return setmetatable({ root = root }, Surface)
end

return M
