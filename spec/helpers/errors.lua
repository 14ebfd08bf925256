-- Errors raised on purpose, for the unit specs of Lua-facing APIs.
local assert = require "luassert"

local errors = {}

-- Runs f(...) and returns the error it raised (fails the test when it does not raise).
function errors.raised(f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return err
end

-- The same, with the error as a string (for matching messages).
function errors.raised_message(f, ...)
  return tostring(errors.raised(f, ...))
end

return errors
