-- render(node) -> HTML (SPEC §8, §11). Text and attribute values are escaped; raw nodes are the
-- only way to emit markup. No whitespace is added between nodes. The walk is in C
-- (runtime/render/render.c, clank.render_core); this module keeps the API and gives the C, once,
-- the element and raw metatables and the Lua helpers for the rare cases.
local element = require "clank.ui.element"
local attributes = require "clank.ui.attributes"
local core = require "clank.render_core"

local type, pcall, tostring, getmetatable = type, pcall, tostring, getmetatable

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

-- Positional keys (live renders): the element's index among its parent's element children,
-- joined with dots from the view's top ("0", "0.2.1"). clank.live finds elements the same way.
local function child_key(prefix, n)
  if prefix then return prefix .. "." .. n end
  return tostring(n)
end
M.childKey = child_key

local function requires_confirmation(action) return action:requiresConfirmation() end

-- data-clank-confirm (SPEC §11) of an element whose agentAction is action (an action, or a name
-- looked up in actions, the live render's actions): the text the person confirms, or nil when
-- the action needs no confirmation.
local function confirm(action, actions)
  if type(action) == "string" then action = actions and actions[action] end
  local ok, required = pcall(requires_confirmation, action)
  if ok and required then
    return tostring(action.description) .. " (" .. tostring(action.sideEffects) .. ")"
  end
end

local render_tree = core.renderer {
  element = getmetatable(element.h.div()),
  raw = getmetatable(element.raw("")),
  actionName = attributes.actionName,
  confirm = confirm,
  valueError = attributes.valueError,
}

-- render(node) -> HTML. render(node, { live = true, actions = { name → action } }) also writes
-- the live attributes; keys start at the node ("0", or "0", "1", ... for a list). With
-- fragments (a table with weak keys, one per page) and outputs (a set of elements whose HTML
-- does not change: clank.ui.memo's), the HTML of each of those elements is kept in fragments
-- and written from there while it stays at the same place in the tree. With into (an Html
-- buffer, clank.render_core.htmlBuffer), the HTML is written there and into is returned.
-- With at (a fragment's place, "path depth"), node, a component's tree, is written alone as it
-- would be there (its HTML kept in fragments) → its HTML, or nil when it would not be there.
function M.render(node, options)
  if options and options.live then
    return render_tree(node, true, options.actions, options.fragments, options.outputs, options.into,
      options.at)
  end
  return render_tree(node, false)
end

return M
