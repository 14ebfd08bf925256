-- clank.schema: builders check and copy their arguments (SPEC §3).
local clank = require "clank"
local s = clank.schema

local raised = require("helpers.errors").raised_message -- the error raised by f(...), as a string

describe("clank.schema builders", function()
  local cases = {
    { "string min negative", s.string, { { min = -1 } }, "s.string: option 'min' must be a non-negative integer" },
    { "string min fractional", s.string, { { min = 1.5 } }, "s.string: option 'min' must be a non-negative integer" },
    { "string min as a string", s.string, { { min = "1" } }, "s.string: option 'min' must be a non-negative integer" },
    { "string max negative", s.string, { { max = -2 } }, "s.string: option 'max' must be a non-negative integer" },
    { "string min > max", s.string, { { min = 3, max = 2 } },
      "s.string: option 'min' must not be greater than option 'max'" },
    { "string unknown option", s.string, { { minimum = 1 } }, "s.string: unknown option 'minimum'" },
    { "string positional option", s.string, { { 1 } }, "s.string: unknown option '1'" },
    { "string options not a table", s.string, { "x" }, "s.string: options must be a table" },
    { "string pattern not a string", s.string, { { pattern = 1 } }, "s.string: option 'pattern' must be a string" },
    { "string format not a string", s.string, { { format = true } }, "s.string: option 'format' must be a string" },
    { "string description not a string", s.string, { { description = {} } },
      "s.string: option 'description' must be a string" },
    { "pattern %b", s.string, { { pattern = "%b()" } },
      "s.string: option 'pattern' cannot be expressed in JSON Schema: %b has no ECMA-262 equivalent" },
    { "pattern %f", s.string, { { pattern = "%f[%w]%w+" } },
      "s.string: option 'pattern' cannot be expressed in JSON Schema: %f has no ECMA-262 equivalent" },
    { "pattern back-reference", s.string, { { pattern = "(a)%1" } },
      "s.string: option 'pattern' cannot be expressed in JSON Schema: back-references have no ECMA-262 equivalent" },
    { "pattern missing ]", s.string, { { pattern = "[a-z" } },
      "s.string: option 'pattern' cannot be expressed in JSON Schema: malformed pattern (missing ']')" },
    { "pattern ending with %", s.string, { { pattern = "a%" } },
      "s.string: option 'pattern' cannot be expressed in JSON Schema: malformed pattern (ends with '%')" },
    { "pattern unfinished capture", s.string, { { pattern = "(a" } },
      "s.string: option 'pattern' cannot be expressed in JSON Schema: unfinished capture" },
    { "pattern stray )", s.string, { { pattern = "a)" } },
      "s.string: option 'pattern' cannot be expressed in JSON Schema: invalid pattern capture" },
    { "pattern invalid UTF-8", s.string, { { pattern = "\xFF" } },
      "s.string: option 'pattern' cannot be expressed in JSON Schema: it is not valid UTF-8" },
    { "pattern with 33 captures", s.string, { { pattern = string.rep("()", 33) } },
      "s.string: option 'pattern' is too complex: more than 32 captures" },
    { "pattern with 256 items", s.string, { { pattern = "^" .. string.rep("%d", 256) .. "$" } },
      "s.string: option 'pattern' is too complex: more than 255 items (characters, classes or sets)" },
    { "number min not a number", s.number, { { min = "0" } }, "s.number: option 'min' must be a finite number" },
    { "number max infinite", s.number, { { max = math.huge } }, "s.number: option 'max' must be a finite number" },
    { "number min NaN", s.number, { { min = 0 / 0 } }, "s.number: option 'min' must be a finite number" },
    { "number integer not a boolean", s.number, { { integer = 1 } }, "s.number: option 'integer' must be a boolean" },
    { "number min > max", s.number, { { min = 5, max = 1.5 } },
      "s.number: option 'min' must not be greater than option 'max'" },
    { "number unknown option", s.number, { { int = true } }, "s.number: unknown option 'int'" },
    { "boolean unknown option", s.boolean, { { min = 1 } }, "s.boolean: unknown option 'min'" },
    { "unknown unknown option", s.unknown, { { strict = true } }, "s.unknown: unknown option 'strict'" },
    { "literal of a table", s.literal, { {} }, "s.literal: value must be a string, a number, a boolean or clank.null" },
    { "literal of nil", s.literal, { nil }, "s.literal: value must be a string, a number, a boolean or clank.null" },
    { "literal of NaN", s.literal, { 0 / 0 }, "s.literal: value must be finite" },
    { "literal unknown option", s.literal, { "a", { x = 1 } }, "s.literal: unknown option 'x'" },
    { "enum of nothing", s.enum, { {} }, "s.enum: values must be a non-empty list of strings" },
    { "enum not a table", s.enum, { "a" }, "s.enum: values must be a non-empty list of strings" },
    { "enum with a hole", s.enum, { { "a", nil, "c" } }, "s.enum: values must be a non-empty list of strings" },
    { "enum with a number", s.enum, { { "a", 1 } }, "s.enum: value 2 must be a string" },
    { "enum duplicate", s.enum, { { "a", "b", "a" } }, "s.enum: duplicate value 'a'" },
    { "enum unknown option", s.enum, { { "a" }, { strict = true } }, "s.enum: unknown option 'strict'" },
    { "array of a non-schema", s.array, { "x" }, "s.array: item is not a schema" },
    { "array min > max", s.array, { s.string(), { min = 2, max = 1 } },
      "s.array: option 'min' must not be greater than option 'max'" },
    { "array min negative", s.array, { s.string(), { min = -1 } },
      "s.array: option 'min' must be a non-negative integer" },
    { "array unknown option", s.array, { s.string(), { items = 1 } }, "s.array: unknown option 'items'" },
    { "object shape not a table", s.object, { "x" }, "s.object: shape must be a table" },
    { "object with a non-schema", s.object, { { a = s.string(), x = "string" } },
      "s.object: property 'x' is not a schema" },
    { "object with a plain table property", s.object, { { x = {} } }, "s.object: property 'x' is not a schema" },
    { "object with a numeric key", s.object, { { s.string() } }, "s.object: property keys must be strings (got 1)" },
    { "object strict not a boolean", s.object, { {}, { strict = "no" } },
      "s.object: option 'strict' must be a boolean" },
    { "object unknown option", s.object, { {}, { additionalProperties = true } },
      "s.object: unknown option 'additionalProperties'" },
    { "optional of a non-schema", s.optional, { "x" }, "s.optional: inner is not a schema" },
    { "nullable of nothing", s.nullable, {}, "s.nullable: inner is not a schema" },
    { "union of nothing", s.union, { {} }, "s.union: members must be a non-empty list of schemas" },
    { "union with a non-schema", s.union, { { s.string(), 1 } }, "s.union: member 2 is not a schema" },
    { "union unknown option", s.union, { { s.string() }, { strict = true } }, "s.union: unknown option 'strict'" },
  }
  for _, c in ipairs(cases) do
    it("refuses " .. c[1], function()
      local args = c[3]
      local err = raised(c[2], table.unpack(args, 1, args.n or #args))
      assert.truthy(err:find(c[4], 1, true), ("%q does not contain %q"):format(err, c[4]))
    end)
  end

  it("raises at the caller's line", function()
    local ok, err = pcall(function() return s.string { min = -1 } end)
    assert.is_false(ok)
    assert.truthy(err:find("schema_build_spec.lua:%d+: s%.string: option 'min'"))
  end)

  it("accepts integral floats as lengths", function()
    assert.is_true(s.string { min = 2.0 }:safeParse("ab").success)
    assert.equal(2, s.string { min = 2.0 }:toJSONSchema().minLength)
    assert.is_true(math.type(s.string { min = 2.0 }:toJSONSchema().minLength) == "integer")
  end)

  it("refuses schemas nested too deeply at build time", function()
    local sc = s.string()
    local ok, err = pcall(function()
      for _ = 1, 1000 do sc = s.optional(sc) end
    end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("s.optional: schemas nested deeper than", 1, true))
  end)
end)

describe("clank.schema argument copying", function()
  it("ignores later changes to options", function()
    local opts = { min = 1, max = 3, pattern = "^a" }
    local sc = s.string(opts)
    opts.min, opts.max, opts.pattern = 5, 10, "^b"
    assert.is_true(sc:safeParse("ab").success)
    assert.same({ type = "string", minLength = 1, maxLength = 3, pattern = "^a" }, sc:toJSONSchema())
  end)

  it("ignores later changes to a shape", function()
    local shape = { a = s.string() }
    local o = s.object(shape)
    shape.a = s.number()
    shape.b = s.number()
    assert.is_true(o:safeParse({ a = "x" }).success)
    assert.equal("Unknown property.", o:safeParse({ a = "x", b = 1 }).error.issues[1].message)
  end)

  it("ignores later changes to enum values and union members", function()
    local values = { "a", "b" }
    local e = s.enum(values)
    values[1] = "z"
    assert.is_true(e:safeParse("a").success)
    assert.is_false(e:safeParse("z").success)
    local members = { s.string() }
    local u = s.union(members)
    members[1] = s.number()
    assert.is_true(u:safeParse("x").success)
    assert.is_false(u:safeParse(1).success)
  end)

  it("ignores later changes to number options and descriptions", function()
    local opts = { min = 0, integer = true, description = "n" }
    local n = s.number(opts)
    opts.min, opts.integer, opts.description = 10, false, "changed"
    assert.is_true(n:safeParse(5).success)
    assert.is_false(n:safeParse(5.5).success)
    assert.equal("n", n:toJSONSchema().description)
  end)
end)
