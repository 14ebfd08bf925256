-- How live views and the inspector keep and tell a handler's error: xpcall's handler adds a
-- traceback to a string error (tables keep their identity), a line for the log names an
-- ActionError by its code, and report() reads an error's text into what a page in development
-- shows (SPEC §11, the dev-error frame): the message, its file:line and the frames, the app's
-- told apart from the runtime's.
local json = require "clank.json"
local memo = require "clank.ui.memo"

local type, tostring, tonumber, ipairs = type, tostring, tonumber, ipairs

local M = {}

-- A string error gets the traceback of where it was raised: a render's, kept by clank.ui.memo
-- where it raised (the effect that ran the render raised it again from its own frames), else
-- the stack of the caller.
function M.trace(err)
  if type(err) == "string" then return memo.traceback(err, 2) end
  return err
end

function M.describe(err)
  if type(err) == "table" and err.code and err.message then
    return tostring(err.code) .. ": " .. tostring(err.message)
  end
  return tostring(err)
end

-- The folder the runtime's Lua modules are loaded from, as chunk names spell it ("" when this
-- file was not loaded from a file).
local RUNTIME = debug.getinfo(1, "S").source:match("^@(.*/)clank/live/errors%.lua$") or ""

-- Whether a traceback's file is one of the runtime's. Lua shortens a long name to "..." and its
-- end: the runtime's then when that end begins with the end of the runtime's folder (8
-- characters at least) followed by clank/.
local function runtime_file(file)
  if RUNTIME == "" then return false end
  if file:sub(1, #RUNTIME) == RUNTIME then return true end
  if file:sub(1, 3) ~= "..." then return false end
  local tail = file:sub(4)
  for k = #RUNTIME, 8, -1 do
    if tail:sub(1, k) == RUNTIME:sub(-k) and tail:sub(k + 1, k + 6) == "clank/" then return true end
  end
  return false
end

-- Frames that say nothing about where an error came from (runtime/util/log.c drops the same
-- from the log): the C function every protected call starts from, and the standard functions
-- that raise or catch.
local NOISE = { ["?"] = true, ["function 'error'"] = true, ["function 'assert'"] = true,
  ["function 'pcall'"] = true, ["function 'xpcall'"] = true }

-- One line of a traceback → { file?, line?, name, app } | nil (noise).
local function frame(text)
  text = text:gsub("^\t", "")
  local file, line, name = text:match("^(.-):(%d+): in (.*)$")
  if not file then file, name = text:match("^(.-): in (.*)$") end
  if not file then return { name = text, app = false } end -- (...tail calls...), skipped levels
  if file == "[C]" and NOISE[name] then return nil end
  return { file = file, line = tonumber(line), name = name,
    app = file ~= "[C]" and not runtime_file(file) }
end

-- The message of an error and its frames, as a page in development shows them:
-- { message, file?, line?, frames = { { file?, line?, name, app }, ... } }. file:line is where
-- the message says it was raised, else the first of the app's frames (error(msg, 0), a table).
function M.report(err)
  local text = type(err) == "string" and err or M.describe(err)
  local head, trace = text:match("^(.-)\nstack traceback:\n(.*)$")
  head = head or text
  local frames = {}
  for line in (trace or ""):gmatch("[^\n]+") do
    local f = frame(line)
    if f then frames[#frames + 1] = f end
  end
  local file, line, message = head:match("^([^\n]-):(%d+): (.*)$")
  if not file then
    message = head
    for _, f in ipairs(frames) do
      if f.app and f.line then
        file, line = f.file, f.line
        break
      end
    end
  end
  return { message = message, file = file, line = tonumber(line), frames = json.array(frames) }
end

M.runtimeFile = runtime_file

return M
