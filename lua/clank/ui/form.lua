-- createForm (SPEC §10): a controller over an object schema with per-field value and error
-- signals, validation mapped to fields, and submit through an action runner.
local json = require "clank.json"
local form_fields = require "clank.ui.form_fields"
local form_view = require "clank.ui.form_view"

local type, pairs, ipairs, error, tostring, tonumber, setmetatable, concat, pcall =
  type, pairs, ipairs, error, tostring, tonumber, setmetatable, table.concat, pcall

local M = {}

local OPTIONS = { id = true, schema = true, action = true, initial = true, fields = true,
  label = true, submitLabel = true, pendingLabel = true, onSubmit = true }

local Form = { __name = "clank.Form" }
Form.__index = Form

local function signals()
  return require "clank.signal"
end

-- Number fields take text: empty → absent (null when nullable), decimal → number, else kept
-- (validation then says it is not a number). List fields take text one item per line.
local function coerce(field, v)
  if type(v) ~= "string" then return v end
  if field.control == "number" then
    local s = v:match("^%s*(.-)%s*$")
    if s == "" then return field.nullable and json.null or nil end
    if s:find("^[+-]?[%d.]+[eE]?[+-]?%d*$") then return tonumber(s) or v end
    return v
  elseif field.control == "list" then
    local out = json.array()
    for line in v:gmatch("[^\r\n]+") do
      line = line:match("^%s*(.-)%s*$")
      if line ~= "" then
        local number = (field.itemType == "number" or field.itemType == "integer") and tonumber(line)
        out[#out + 1] = number or line
      end
    end
    return out
  elseif field.control == "select" and v == "" and not field.multiple then
    return field.nullable and json.null or nil
  end
  return v
end
M.coerce = coerce

local function default(field)
  if field.control == "checkbox" then return false end
  if field.control == "list" or field.multiple then return json.array() end
  if field.nullable then return json.null end
  return nil
end

local function field_of(self, name, level)
  local f = type(name) == "string" and self.fields[name]
  if not f then error("form " .. self.id .. ": unknown field " .. tostring(name), level + 1) end
  return f
end

function Form:set(name, v)
  local f = field_of(self, name, 2)
  local signal = signals()
  signal.batch(function()
    f.value.value = coerce(f.info, v)
    f.error.value = nil
    self.formError.value = nil
  end)
end

function Form:get(name)
  return field_of(self, name, 2).value.value
end

-- The current values, one key per field that holds one.
function Form:values()
  local out = {}
  for name, f in pairs(self.fields) do out[name] = f.value.value end
  return out
end

-- A required field (rendered `required`: a nullable one's empty is null) left empty: never set,
-- or its control cleared (text, number, select).
local function left_empty(f)
  local v, info = f.value.value, f.info
  return info.required and not info.nullable and (v == nil or v == "")
end

-- Messages by field name ("_form" for the rest), joined with "; ". A required field left empty
-- says so ("Required.") instead of what its schema says of a missing value ("Expected a
-- string."): the schema speaks to programs, this to the person at the form.
local function apply_issues(self, issues)
  local by = {}
  for _, issue in ipairs(issues or {}) do
    local first = issue.path and issue.path[1]
    local f = type(first) == "string" and self.fields[first]
    local key = f and first or "_form"
    if f and left_empty(f) then
      by[key] = { "Required." } -- once, whatever else the schema says of nothing
    else
      by[key] = by[key] or {}
      by[key][#by[key] + 1] = issue.message
    end
  end
  signals().batch(function()
    for name, f in pairs(self.fields) do
      f.error.value = by[name] and concat(by[name], "; ") or nil
    end
    self.formError.value = by._form and concat(by._form, "; ") or nil
  end)
end

-- validate() -> true, data | false, ValidationError; sets every field's error.
function Form:validate()
  local result = self.schema:safeParse(self:values())
  apply_issues(self, not result.success and result.error.issues or nil)
  if result.success then return true, result.data end
  return false, result.error
end

-- submit() -> the action's output, or nil (invalid, or the action failed: see form.error).
function Form:submit()
  local ok, data = self:validate()
  if not ok then return nil end
  if not self.runner then
    self.data.value = data
    return data
  end
  local output = self.runner:run(data)
  local err = self.runner.error.value
  if output == nil and err ~= nil then
    if type(err) == "table" and type(err.issues) == "table" then
      apply_issues(self, err.issues)
    else
      local clank = require "clank"
      self.formError.value = clank.isActionError(err) and err.message or "The action failed."
    end
  end
  return output
end

-- reset() → every field back to its initial value, no errors.
function Form:reset()
  signals().batch(function()
    for name, f in pairs(self.fields) do
      local v = self.initial[name]
      if v == nil then v = default(f.info) end
      f.value.value = v
      f.error.value = nil
    end
    self.formError.value = nil
  end)
end

function Form:render()
  return form_view.render(self)
end

function M.createForm(opts)
  if type(opts) ~= "table" then error("clank.createForm: expected a table", 2) end
  for k in pairs(opts) do
    if not OPTIONS[k] then error("clank.createForm: unknown option " .. tostring(k), 2) end
  end
  local id = opts.id
  if type(id) ~= "string" or not id:find("^[A-Za-z0-9][A-Za-z0-9_.%-]*$") then
    error("clank.createForm: id must be letters, digits, _ . and - (starting with a letter or digit)", 2)
  end
  if opts.initial ~= nil and type(opts.initial) ~= "table" then
    error("clank.createForm: initial must be a table", 2)
  end
  local manifest, order, known = form_fields.describe(id, opts.schema, opts.fields)
  for k in pairs(opts.initial or {}) do
    if not known[k] then error("clank.createForm: initial value for unknown field " .. tostring(k), 2) end
  end
  for _, k in ipairs({ "label", "submitLabel", "pendingLabel" }) do
    if opts[k] ~= nil and type(opts[k]) ~= "string" then error("clank.createForm: " .. k .. " must be a string", 2) end
  end
  if opts.onSubmit ~= nil and type(opts.onSubmit) ~= "function" then
    error("clank.createForm: onSubmit must be a function", 2)
  end
  local signal = signals()
  local initial = {}
  for k, v in pairs(opts.initial or {}) do initial[k] = v end
  local self = setmetatable({
    id = id, manifest = manifest, schema = opts.schema, order = order, fields = {},
    formError = signal.signal(nil), initial = initial,
    -- the submit button's words, and what a submit event does (default: submit())
    submitLabel = opts.submitLabel or "Submit", pendingLabel = opts.pendingLabel or "Saving\u{2026}",
    onSubmit = opts.onSubmit,
    -- the form's own name (its aria-label), so that a surface (SPEC §9) does not take its text
    -- content, every control's run together: the label given, else the submit button's words
    -- when given, else the action's description (below), else the default button's words
    label = opts.label or opts.submitLabel,
  }, Form)
  for name, info in pairs(known) do
    local v = opts.initial and opts.initial[name]
    if v == nil then v = default(info) end
    self.fields[name] = { info = info, value = signal.signal(v), error = signal.signal(nil) }
  end
  if opts.action ~= nil then
    local clank = require "clank"
    local named, name = pcall(function() return opts.action.name end)
    if named and type(name) == "string" then self.action = opts.action end
    if not self.label and self.action then self.label = self.action.description end
    self.runner = clank.actionRunner(opts.action)
    self.pending, self.data, self.error = self.runner.pending, self.runner.data, self.runner.error
  else
    self.pending, self.data, self.error = signal.signal(false), signal.signal(nil), signal.signal(nil)
  end
  self.label = self.label or self.submitLabel
  return self
end

return M
