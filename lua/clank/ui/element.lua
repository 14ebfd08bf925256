-- Elements (SPEC §8): h(tag, props, ...children), h.<tag>(props, ...children) and raw(html).
-- An element is { tag, props, children }: props is a fresh table (the surface writes state
-- into it), children a flat list of strings, numbers, elements and raw nodes.
local select, type, pairs, rawset, setmetatable, getmetatable, error, tostring =
  select, type, pairs, rawset, setmetatable, getmetatable, error, tostring

local ELEMENT = { __name = "clank.Element" }
local RAW = { __name = "clank.Raw" }

local M = {}

local function is_element(x) return getmetatable(x) == ELEMENT end
local function is_raw(x) return getmetatable(x) == RAW end
M.isElement = is_element
M.isRaw = is_raw

-- Tag names: a letter, then letters, digits and dashes (custom elements).
local function valid_tag(tag)
  return type(tag) == "string" and tag:find("^[A-Za-z][A-Za-z0-9%-]*$") ~= nil
end
M.validTag = valid_tag

-- Appends child (and nested lists, depth first) to out; nil, false and true are skipped.
local function add_child(out, child, depth)
  local t = type(child)
  if child == nil or t == "boolean" then return end
  if t == "string" or t == "number" or is_element(child) or is_raw(child) then
    out[#out + 1] = child
  elseif t == "table" and getmetatable(child) == nil then
    if depth > 64 then error("clank.h: children nested too deeply", depth + 2) end
    for i = 1, #child do add_child(out, child[i], depth + 1) end
  else
    error("clank.h: a child must be a string, a number, an element or a list (got " ..
      (getmetatable(child) and getmetatable(child).__name or t) .. ")", depth + 2)
  end
end

local function is_callable(x)
  if type(x) == "function" then return true end
  local mt = getmetatable(x)
  return mt ~= nil and type(mt) == "table" and mt.__call ~= nil
end

-- The builder of a tag known to be valid: make(tag)(props, ...children) makes the element in C
-- (runtime/render/element.c), by the rules of add_child above.
local make = require("clank.render_core").elementMaker(ELEMENT, RAW)

local function h(tag, props, ...)
  -- A component (a function or a view): it receives its children in props.children.
  if type(tag) ~= "string" and is_callable(tag) then
    if props ~= nil and (type(props) ~= "table" or getmetatable(props) ~= nil) then
      error("clank.h: props must be nil or a plain table (not an element, not " .. type(props) .. ")", 2)
    end
    local copy = {}
    for k, v in pairs(props or copy) do
      if type(k) ~= "string" then
        error("clank.h: prop names must be strings (children go after the props)", 2)
      end
      copy[k] = v
    end
    local children = {}
    if copy.children ~= nil then add_child(children, copy.children, 1) end
    for i = 1, select("#", ...) do add_child(children, (select(i, ...)), 1) end
    copy.children = children
    return tag(copy)
  end
  if not valid_tag(tag) then
    error("clank.h: invalid tag name: " .. tostring(tag), 2)
  end
  return M.h[tag](props, ...)
end

M.h = setmetatable({}, {
  __call = function(_, ...) return h(...) end,
  -- h.button(props, ...) is h("button", props, ...)
  __index = function(self, tag)
    if not valid_tag(tag) then error("clank.h: invalid tag name: " .. tostring(tag), 2) end
    local f = make(tag)
    rawset(self, tag, f)
    return f
  end,
})

function M.raw(html)
  if type(html) ~= "string" then error("clank.raw: expected a string", 2) end
  return setmetatable({ html = html }, RAW)
end

return M
