-- How live views and the inspector keep and tell a handler's error: xpcall's handler adds a
-- traceback to a string error (tables keep their identity), and a line for the log names an
-- ActionError by its code.
local M = {}

function M.trace(err)
  if type(err) == "string" then return debug.traceback(err, 2) end
  return err
end

function M.describe(err)
  if type(err) == "table" and err.code and err.message then
    return tostring(err.code) .. ": " .. tostring(err.message)
  end
  return tostring(err)
end

return M
