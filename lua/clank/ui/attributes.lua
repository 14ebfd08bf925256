-- From element props to HTML attributes (SPEC §8): semantic props, event handlers, URL checks
-- and the attribute order. The rules run in C, in the render walk (runtime/render/render.c); what
-- stays here is what Lua code shares with it: the semantic props, the interactive elements,
-- an action's name and the error for a value no attribute can take.
local type, pcall, error, getmetatable = type, pcall, error, getmetatable

local M = {}

-- Semantic props and the attribute each one becomes.
M.SEMANTIC = {
  agentId = "data-clank-id",
  agentLabel = "data-clank-label",
  agentDescription = "data-clank-description",
  agentAction = "data-clank-action",
  intent = "data-clank-intent",
}

-- Elements on which agentLabel is mirrored to aria-label.
M.INTERACTIVE = { a = true, button = true, input = true, select = true, summary = true,
  textarea = true }

-- An action (anything with a string .name) or a name.
local function action_name(v)
  if type(v) == "string" then return v end
  local ok, name = pcall(function() return v.name end)
  if ok and type(name) == "string" then return name end
  error("clank.render: agentAction must be an action or its name", 0)
end
M.actionName = action_name

-- Raises for the value v of the attribute name that no attribute can take (a table, a
-- function, ...): strings, numbers, booleans and clank.null are the values.
function M.valueError(name, v)
  error("clank.render: attribute " .. name .. " cannot take a " ..
    ((getmetatable(v) and getmetatable(v).__name) or type(v)), 0)
end

return M
