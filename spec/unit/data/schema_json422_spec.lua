-- clank_schema_validate_json (schema.h): the error object of the 422 answer
-- (SPEC §5 step 9) written straight from the issues, without Lua tables.
-- The hand-written answers come from SPEC §3 and §5; the differential part
-- holds its bytes against what the bridge answers from the issue tables
-- (bridge.errorEnvelope, then clank.json's canonical encoder).
local clank = require "clank"
local bridge = require "clank.bridge"
local s = clank.schema
local json = clank.json
local null = clank.null

-- The spec-only entry point: true when valid, else the bytes.
local function answer(schema, value)
  return getmetatable(schema).__json422(schema, value)
end

-- What the bridge writes today for the same value, or true when valid.
local function reference(schema, value)
  local r = schema:safeParse(value)
  if r.success then return true end
  local e = bridge.errorEnvelope(r.error, {})
  return json.encode { code = e.code, details = e.details, message = e.message }
end

local CreateTask = s.object {
  title = s.string { min = 1, max = 120 },
  priority = s.optional(s.enum { "low", "normal", "high" }),
  estimate = s.nullable(s.number { min = 0 }),
  tags = s.array(s.string(), { max = 10 }),
}

describe("clank_schema_validate_json", function()
  it("leaves valid values alone", function()
    assert.is_true(answer(CreateTask, { title = "t", estimate = null, tags = json.array {} }))
    assert.is_true(answer(s.unknown(), nil))
    assert.is_true(answer(s.optional(s.string()), nil))

  end)

  it("writes the error object of the bench fixture", function()
    local v = json.decode('{"title":"","priority":"urgent","estimate":-1,"tags":[7],"extra":true}')
    assert.equal('{"code":"INVALID_INPUT","details":['
      .. '{"message":"Must be at least 0.","path":["estimate"]},'
      .. '{"expected":"enum","message":"Expected one of: low, normal, high.","path":["priority"]},'
      .. '{"expected":"string","message":"Expected a string.","path":["tags",0]},'
      .. '{"message":"Must contain at least 1 character.","path":["title"]},'
      .. '{"message":"Unknown property.","path":["extra"]}],'
      .. '"message":"estimate: Must be at least 0.; priority: Expected one of: low, normal, high.; '
      .. 'tags.0: Expected a string.; title: Must contain at least 1 character.; extra: Unknown property."}',
      answer(CreateTask, v))
  end)

  it("names the root 'value' and writes its path as []", function()
    assert.equal('{"code":"INVALID_INPUT","details":[{"expected":"object","message":"Expected an object.",'
      .. '"path":[]}],"message":"value: Expected an object."}', answer(CreateTask, json.decode("[]")))
  end)

  it("escapes keys and messages as clank.json does", function()
    local sc = s.object { ["a\"b"] = s.literal("q\"\n"), ["\u{e9}\t"] = s.number { max = 1.5 } }
    local v = { ["a\"b"] = 1, ["\u{e9}\t"] = 2, ["\1"] = true }
    assert.equal('{"code":"INVALID_INPUT","details":['
      .. '{"expected":"\\"q\\\\\\"\\\\n\\"","message":"Expected \\"q\\\\\\"\\\\n\\".","path":["a\\"b"]},'
      .. '{"message":"Must be at most 1.5.","path":["\u{e9}\\t"]},'
      .. '{"message":"Unknown property.","path":["\\u0001"]}],'
      .. '"message":"a\\"b: Expected \\"q\\\\\\"\\\\n\\".; \u{e9}\\t: Must be at most 1.5.; '
      .. '\\u0001: Unknown property."}', answer(sc, v))
  end)

  it("joins union members' messages into one issue", function()
    local u = s.object { v = s.union { s.string { min = 2 }, s.array(s.number(), { min = 1 }) } }
    assert.equal('{"code":"INVALID_INPUT","details":[{"expected":"union","message":'
      .. '"Did not match any union member (Must contain at least 2 characters.; Expected an array.).",'
      .. '"path":["v"]}],"message":"v: Did not match any union member (Must contain at least 2 characters.; '
      .. 'Expected an array.)."}', answer(u, { v = "x" }))
  end)

  it("fails without raising on text JSON cannot hold, as clank.json.encode refuses it", function()
    local v = { ["\255"] = 1 }
    assert.is_false(pcall(json.encode, bridge.errorEnvelope(s.object {}:safeParse(v).error, {})))
    local bytes, err = answer(s.object {}, v)
    assert.is_nil(bytes)
    assert.is_string(err)
  end)
end)

-- ---------------------------------------------------------------------------
-- Differential: the same bytes as the table path, for every issue kind.
-- ---------------------------------------------------------------------------

local function deep(n, leaf)
  local v = leaf
  for _ = 1, n do v = { a = v } end
  return v
end

local function deep_schema(n, leaf)
  local sc = leaf
  for _ = 1, n do sc = s.object { a = sc } end
  return sc
end

local long = string.rep("k", 50)
local Nested = s.object {
  name = s.string { min = 2, max = 4, pattern = "^%a+$" },
  code = s.string { pattern = "^[A-Z]%d%d$" },
  count = s.number { integer = true, min = -1, max = 2 ^ 53 },
  ratio = s.number { min = 0.25, max = 0.75 },
  flag = s.boolean(),
  kind = s.literal("k"),
  one = s.literal(1),
  yes = s.literal(true),
  none = s.literal(null),
  color = s.enum { "red", "green" },
  any = s.unknown(),
  maybe = s.optional(s.nullable(s.number())),
  list = s.array(s.object { id = s.number(), tags = s.array(s.string(), { min = 1, max = 2 }) },
    { max = 3 }),
  loose = s.object({ x = s.string() }, { strict = false }),
  either = s.union { s.literal("a"), s.object { b = s.union { s.number(), s.boolean() } } },
  [long] = s.optional(s.string()),
  ["\u{1F600}.key"] = s.optional(s.number()),
  [""] = s.optional(s.boolean()),
}

local Many = s.array(s.number(), { max = 500 })
-- More than 64 properties: past the first 64, values are looked up again.
local Wide = (function()
  local shape = {}
  for i = 1, 70 do
    shape[("p%02d"):format(i)] = i % 3 == 0 and s.optional(s.number { max = 5 }) or s.number { max = 5 }
  end
  return s.object(shape)
end)()
local function wide_value(bad)
  local v = {}
  for i = 1, 70 do
    if i % 5 ~= 0 then v[("p%02d"):format(i)] = (i % bad == 0) and 9 or 1 end
  end
  return v
end
local Deep = deep_schema(70, s.string())
local Deeper = s.array(deep_schema(3, s.array(s.string())))

local cases = {
  { CreateTask, 1 },
  { CreateTask, "x" },
  { CreateTask, json.array {} },
  { CreateTask, { 1, 2 } },
  { CreateTask, { title = 42, tags = "a,b", estimate = "soon", priority = 3 } },
  { CreateTask, { title = string.rep("x", 121), tags = { "a", 2, "\255" }, estimate = 0 / 0 } },
  { CreateTask, { title = "ok", tags = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 }, estimate = math.huge } },
  { CreateTask, { [1] = "x", title = "t", tags = {} } },
  { Nested, {} },
  { Nested, { name = "abcde", code = "a12", count = 1.5, ratio = 1, flag = "no", kind = "K", one = 2,
    yes = false, none = false, color = "blue", list = { { id = "1", tags = {} }, { tags = { 1, 2, 3 } } },
    loose = { x = 1, y = 2 }, either = { b = "x" }, [long] = 1, ["\u{1F600}.key"] = "x", [""] = 0,
    ["z\0z"] = 1, [long .. "z"] = 1, ["\127"] = 1, ["a\\b"] = 1 } },
  { Nested, { name = "1", code = "A1", count = -2, ratio = 0.1, list = { 1, 2, 3, 4 }, either = "b" } },
  { Nested, { name = "é", count = 2 ^ 60, ratio = 0.8, list = json.array {}, either = 1, loose = json.array {} } },
  { Many, (function()
    local t = json.array {}
    for i = 1, 300 do t[i] = tostring(i) end
    return t
  end)() },
  { s.object {}, (function()
    local t = {}
    for i = 1, 150 do t[("k%03d"):format(i)] = i end
    return t
  end)() },
  { Deep, deep(70, 1) },
  { Deep, deep(30, 1) },
  { Deeper, { deep(3, { "a", 1 }), deep(2, 1) } },
  { s.array(s.array(s.array(s.number()))), deep(80, 1) },
  { s.union { s.union { s.string(), s.number() }, s.object { a = s.union { s.boolean(), s.literal("z") } } },
    { a = 1 } },
  { s.union { s.string(), s.array(s.number()) }, (function()
    local t = json.array {}
    for i = 1, 120 do t[i] = "x" .. i end
    return t
  end)() },
  { s.nullable(s.string()), 1 },
  { Wide, wide_value(7) },
  { Wide, wide_value(1000) },
  { Wide, { p01 = 1, p66 = "x", p69 = 6, zz = 1 } },
  { s.enum { "a\"", "b\n" }, "c" },
  { s.string { pattern = "^\"" }, "x" },
}

describe("clank_schema_validate_json against the table path", function()
  for i, c in ipairs(cases) do
    it("case " .. i, function()
      local want = reference(c[1], c[2])
      assert.is_string(want) -- every case is invalid
      assert.equal(want, answer(c[1], c[2]))
    end)
  end

  it("leaves a valid object of more than 64 properties alone", function()
    local wide = {}
    for i = 1, 70 do wide[("p%02d"):format(i)] = 5 end
    assert.is_true(answer(Wide, wide))
    wide.p03, wide.p69 = nil, nil -- optional
    assert.is_true(answer(Wide, wide))
    assert.is_true(Wide:safeParse(wide).success)
  end)

  it("caps the list at 100 issues, as the tables do", function()
    local bytes = answer(Many, cases[13][2])
    local _, n = bytes:gsub("Expected a finite number%.", "")
    assert.equal(200, n) -- 100 in details, 100 in the message
  end)

  it("agrees on seeded random values (bounded)", function()
    math.randomseed(15)
    local keys = { "name", "code", "count", "ratio", "flag", "kind", "color", "list", "loose", "either",
      "maybe", "none", "yes", "one", "any", "x", "\u{e9}", "\n", long, "" }
    local function random_value(depth)
      local r = math.random(12)
      if r == 1 then return math.random(-3, 3) end
      if r == 2 then return math.random() * 2 end
      if r == 3 then return ({ "a", "ab", "abcde", "A12", "k", "red", "\u{1F600}", "\255" })[math.random(8)] end
      if r == 4 then return math.random(2) == 1 end
      if r == 5 then return null end
      if r == 6 then return nil end
      if depth > 3 then return "leaf" end
      local t = math.random(2) == 1 and json.array {} or {}
      if r <= 9 then
        for k = 1, math.random(0, 4) do t[k] = random_value(depth + 1) end
      else
        for _ = 1, math.random(0, 6) do t[keys[math.random(#keys)]] = random_value(depth + 1) end
      end
      return t
    end
    local schemas = { Nested, CreateTask, Deeper, s.array(Nested), s.union { Nested, s.array(s.string()) } }
    local compared = 0
    for _ = 1, 3000 do
      local sc, v = schemas[math.random(#schemas)], random_value(0)
      local ok, want = pcall(reference, sc, v)
      if ok then
        assert.equal(want, answer(sc, v))
        compared = compared + 1
      else -- text JSON cannot hold (a "\255" key): both refuse it
        assert.is_nil((answer(sc, v)))
      end
    end
    assert.is_true(compared > 2000)
  end)
end)
