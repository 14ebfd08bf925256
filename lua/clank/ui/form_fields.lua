-- Fields of a form from its object schema (SPEC §10): names, required, suggested controls and
-- the clank-form/1 manifest. Schemas are read only through toJSONSchema().
local json = require "clank.json"
local schema = require "clank.schema"

local type, pairs, ipairs, error, tostring, sort, next =
  type, pairs, ipairs, error, tostring, table.sort, next

local M = {}

local FORBIDDEN = { __proto__ = true, prototype = true, constructor = true, _form = true }

local function is_null_schema(js)
  return type(js) == "table" and js.type == "null" and next(js, next(js)) == nil
end

-- nullable(x) is { anyOf = { x, { type = "null" } } }: returns x and true.
local function unwrap(js)
  local any = js.anyOf
  if type(any) == "table" and #any == 2 then
    if is_null_schema(any[2]) then return any[1], true end
    if is_null_schema(any[1]) then return any[2], true end
  end
  return js, false
end

-- control(js) -> control, multiple?
local function control(js)
  local inner = unwrap(js)
  local t = inner.type
  if t == "boolean" or type(inner.const) == "boolean" then return "checkbox" end
  if t == "number" or t == "integer" then return "number" end
  if type(inner.enum) == "table" then return "select" end
  if t == "string" and inner.format == "password" then return "password" end
  if t == "array" then
    local items = type(inner.items) == "table" and unwrap(inner.items) or {}
    if type(items.enum) == "table" then return "select", true end
    return "list"
  end
  return "text"
end

-- describe(id, schema, order) -> manifest, fields (in order: { name, required, control,
-- multiple, nullable, label, enum, itemType }), known (name → field, every property)
function M.describe(id, s, order)
  if not schema.isSchema(s) then error("clank.createForm: schema must be a schema", 3) end
  local js = s:toJSONSchema()
  if js.type ~= "object" or type(js.properties) ~= "table" then
    error("clank.createForm: schema must be an object schema", 3)
  end
  local required = {}
  for _, name in ipairs(js.required or {}) do required[name] = true end
  local names = {}
  for name in pairs(js.properties) do
    if FORBIDDEN[name] then error("clank.createForm: field name " .. name .. " is not allowed", 3) end
    names[#names + 1] = name
  end
  sort(names)
  if order ~= nil then
    if type(order) ~= "table" then error("clank.createForm: fields must be a list of names", 3) end
    local seen = {}
    for _, name in ipairs(order) do
      if FORBIDDEN[name] then error("clank.createForm: field name " .. tostring(name) .. " is not allowed", 3) end
      if js.properties[name] == nil then
        error("clank.createForm: unknown field " .. tostring(name), 3)
      end
      if seen[name] then error("clank.createForm: field " .. name .. " listed twice", 3) end
      seen[name] = true
    end
  end
  local fresh = s:toJSONSchema().properties -- field schemas apart from manifest.schema
  local known, fields, entries = {}, {}, json.array()
  for _, name in ipairs(names) do
    local prop = js.properties[name]
    local inner, nullable = unwrap(prop)
    local ctl, multiple = control(prop)
    local items = inner.type == "array" and type(inner.items) == "table" and unwrap(inner.items) or nil
    known[name] = {
      name = name, required = required[name] == true, control = ctl, multiple = multiple,
      nullable = nullable, label = inner.description or prop.description or name,
      enum = ctl == "select" and (multiple and items.enum or inner.enum) or nil,
      itemType = items and items.type or nil,
      -- a text field's maxLength: rendered as maxlength, which the live channel enforces too
      maxLength = inner.type == "string" and math.type(inner.maxLength) == "integer" and inner.maxLength or nil,
    }
  end
  for _, name in ipairs(order or names) do
    local f = known[name]
    fields[#fields + 1] = f
    entries[#entries + 1] = { name = name, required = f.required, control = f.control,
      multiple = f.multiple, schema = fresh[name] }
  end
  local manifest = { protocol = "clank-form/1", id = id, fields = entries, schema = js }
  return manifest, fields, known
end

return M
