-- clank.schema: validation (SPEC §3). Expected issues are written by hand from
-- the SPEC's table, never captured from the implementation.
local clank = require "clank"
local s = clank.schema
local json = clank.json
local null = clank.null

local function I(path, message, expected, received)
  return { path = path, message = message, expected = expected, received = received }
end

-- Runs safeParse and parse, and returns the issues (nil when valid).
local function issues_of(schema, value)
  local r = schema:safeParse(value)
  local ok, err = pcall(schema.parse, schema, value)
  assert.equal(r.success, ok)
  if r.success then
    assert.equal(value, r.data)
    assert.equal(value, err) -- parse returns the value itself
    return nil
  end
  assert.is_nil(r.data)
  assert.is_true(s.isValidationError(r.error))
  assert.is_true(s.isValidationError(err))
  assert.equal(#r.error.issues, #err.issues)
  assert.equal(tostring(r.error), tostring(err))
  return r.error.issues
end

local function check(cases)
  for _, c in ipairs(cases) do
    it(c[1], function()
      assert.same(c[4], issues_of(c[2], c[3]))
    end)
  end
end

local emoji = "\u{1F600}"

describe("clank.schema string", function()
  check {
    { "accepts a string", s.string(), "a", nil },
    { "accepts the empty string", s.string(), "", nil },
    { "rejects a number", s.string(), 1, { I({}, "Expected a string.", "string", 1) } },
    { "rejects nil", s.string(), nil, { I({}, "Expected a string.", "string", nil) } },
    { "rejects clank.null", s.string(), null, { I({}, "Expected a string.", "string", null) } },
    { "rejects a table", s.string(), {}, { I({}, "Expected a string.", "string", {}) } },
    { "counts é as one character (min)", s.string { min = 2 }, "é",
      { I({}, "Must contain at least 2 characters.") } },
    { "accepts two é for min 2", s.string { min = 2 }, "éé", nil },
    { "counts an emoji as one character", s.string { max = 1 }, emoji, nil },
    { "counts two emoji as two (character, singular, for 1)", s.string { max = 1 }, emoji .. emoji,
      { I({}, "Must contain at most 1 character.") } },
    { "says character, singular, for a bound of 1", s.string { min = 1 }, "",
      { I({}, "Must contain at least 1 character.") } },
    { "accepts exactly max", s.string { max = 3 }, "abc", nil },
    { "counts long mixed strings (30 code points)", s.string { max = 30 },
      string.rep("a", 20) .. "é" .. string.rep("b", 8) .. emoji, nil },
    { "counts long mixed strings (31 code points)", s.string { max = 30 },
      string.rep("a", 20) .. "é" .. string.rep("b", 9) .. emoji, { I({}, "Must contain at most 30 characters.") } },
    { "finds invalid UTF-8 after a long ASCII run", s.string(), string.rep("a", 17) .. "\xFF",
      { I({}, "Must be valid UTF-8.") } },
    { "finds a truncated sequence at the end", s.string(), string.rep("a", 16) .. "\xE2\x82",
      { I({}, "Must be valid UTF-8.") } },
    { "rejects a lone continuation byte", s.string(), "a\x80", { I({}, "Must be valid UTF-8.") } },
    { "rejects a truncated sequence", s.string(), "\xC3", { I({}, "Must be valid UTF-8.") } },
    { "rejects an overlong encoding", s.string(), "\xC0\xAF", { I({}, "Must be valid UTF-8.") } },
    { "rejects an encoded surrogate", s.string(), "\xED\xA0\x80", { I({}, "Must be valid UTF-8.") } },
    { "rejects code points above U+10FFFF", s.string(), "\xF4\x90\x80\x80",
      { I({}, "Must be valid UTF-8.") } },
    { "reports invalid UTF-8 before lengths", s.string { min = 5 }, "\xFF",
      { I({}, "Must be valid UTF-8.") } },
    -- the edges of RFC 3629's table of well-formed sequences
    { "accepts U+0800 (E0 A0 80) as one character", s.string { max = 1 }, "\xE0\xA0\x80", nil },
    { "accepts U+D7FF (ED 9F BF), the last before the surrogates", s.string { max = 1 }, "\xED\x9F\xBF", nil },
    { "accepts U+E000 (EE 80 80)", s.string { max = 1 }, "\xEE\x80\x80", nil },
    { "accepts U+10000 (F0 90 80 80)", s.string { max = 1 }, "\xF0\x90\x80\x80", nil },
    { "accepts U+10FFFF (F4 8F BF BF)", s.string { max = 1 }, "\xF4\x8F\xBF\xBF", nil },
    { "counts every length of sequence", s.string { max = 5 }, "a\xC3\xA9\xE6\x97\xA5" .. emoji .. "z", nil },
    { "counts every length of sequence (one over)", s.string { max = 4 }, "a\xC3\xA9\xE6\x97\xA5" .. emoji .. "z",
      { I({}, "Must contain at most 4 characters.") } },
    { "rejects an overlong three-byte sequence", s.string(), "\xE0\x9F\xBF", { I({}, "Must be valid UTF-8.") } },
    { "rejects an overlong four-byte sequence", s.string(), "\xF0\x8F\xBF\xBF", { I({}, "Must be valid UTF-8.") } },
    { "rejects a lead byte followed by ASCII", s.string(), "\xC3A", { I({}, "Must be valid UTF-8.") } },
    { "rejects a four-byte sequence cut short", s.string(), "ab\xF0\x9F\x98", { I({}, "Must be valid UTF-8.") } },
    { "rejects lead bytes above F4", s.string(), "\xF5\x80\x80\x80", { I({}, "Must be valid UTF-8.") } },
    { "accepts a pattern match", s.string { pattern = "^%d+$" }, "123", nil },
    { "rejects a pattern mismatch", s.string { pattern = "^%d+$" }, "12a",
      { I({}, "Must match ^%d+$.") } },
    { "matches unanchored like string.find", s.string { pattern = "%d" }, "ab3c", nil },
    { "checks the pattern after max", s.string { max = 2, pattern = "^%d+$" }, "abc",
      { I({}, "Must contain at most 2 characters.") } },
    { "uses Lua semantics for captures", s.string { pattern = "^(%a+)=(%d*)$" }, "ab=", nil },
    { "uses Lua semantics for -", s.string { pattern = "^a.-b$" }, "axxb", nil },
    { "does not validate format", s.string { format = "email" }, "not an email", nil },
    { "reports a pattern holding a NUL byte whole", s.string { pattern = "^a\0b$" }, "ab",
      { I({}, "Must match ^a\0b$.") } },
    { "accepts a long pattern (over 40 bytes)",
      s.string { pattern = "^" .. string.rep("[a-z]", 10) .. "$" }, "abcdefghij", nil },
    { "rejects with a long pattern", s.string { pattern = "^" .. string.rep("[a-z]", 10) .. "$" },
      "abc", { I({}, "Must match ^" .. string.rep("[a-z]", 10) .. "$.") } },
  }
end)

describe("clank.schema number", function()
  check {
    { "accepts an integer", s.number(), 1, nil },
    { "accepts a float", s.number(), 1.5, nil },
    { "rejects a numeric string", s.number(), "1", { I({}, "Expected a finite number.", "number", "1") } },
    { "rejects nil", s.number(), nil, { I({}, "Expected a finite number.", "number", nil) } },
    { "rejects infinity", s.number(), math.huge,
      { I({}, "Expected a finite number.", "number", math.huge) } },
    { "rejects -infinity", s.number(), -math.huge,
      { I({}, "Expected a finite number.", "number", -math.huge) } },
    { "accepts 2.0 as an integer", s.number { integer = true }, 2.0, nil },
    { "accepts 2 as an integer", s.number { integer = true }, 2, nil },
    { "rejects 2.5 as an integer", s.number { integer = true }, 2.5,
      { I({}, "Expected an integer.", "integer", 2.5) } },
    { "rejects below an integer min", s.number { min = 0 }, -1, { I({}, "Must be at least 0.") } },
    { "accepts the min itself", s.number { min = 0 }, 0, nil },
    { "accepts a float equal to an integer min", s.number { min = 3 }, 3.0, nil },
    { "formats a float min", s.number { min = 0.5 }, 0.25, { I({}, "Must be at least 0.5.") } },
    { "formats an integral float min without .0", s.number { min = 2.0 }, 1,
      { I({}, "Must be at least 2.") } },
    { "rejects above max", s.number { max = 10 }, 11, { I({}, "Must be at most 10.") } },
    { "formats a big max like ECMAScript", s.number { max = 1e21 }, 2e21,
      { I({}, "Must be at most 1e+21.") } },
    { "formats a tiny min like ECMAScript", s.number { min = 1e-7 }, 0,
      { I({}, "Must be at least 1e-7.") } },
    { "prints integer bounds exactly", s.number { max = math.maxinteger - 1 }, math.maxinteger,
      { I({}, "Must be at most 9223372036854775806.") } },
    { "reports only the integer issue first", s.number { integer = true, min = 3 }, 2.5,
      { I({}, "Expected an integer.", "integer", 2.5) } },
  }
  it("rejects NaN", function()
    local issues = issues_of(s.number(), 0 / 0)
    assert.equal(1, #issues)
    assert.equal("Expected a finite number.", issues[1].message)
    assert.equal("number", issues[1].expected)
    assert.is_true(issues[1].received ~= issues[1].received)
  end)
end)

describe("clank.schema boolean, literal, enum, unknown", function()
  check {
    { "accepts true", s.boolean(), true, nil },
    { "accepts false", s.boolean(), false, nil },
    { "rejects a string", s.boolean(), "true", { I({}, "Expected a boolean.", "boolean", "true") } },
    { "rejects nil", s.boolean(), nil, { I({}, "Expected a boolean.", "boolean", nil) } },
    { "accepts the literal string", s.literal("a"), "a", nil },
    { "rejects another string", s.literal("a"), "b", { I({}, 'Expected "a".', '"a"', "b") } },
    { "escapes the literal as JSON", s.literal('say "hi"\n'), "x",
      { I({}, 'Expected "say \\"hi\\"\\n".', '"say \\"hi\\"\\n"', "x") } },
    { "accepts the literal number", s.literal(3), 3, nil },
    { "accepts 3.0 for literal 3", s.literal(3), 3.0, nil },
    { "rejects another number", s.literal(3), 4, { I({}, "Expected 3.", "3", 4) } },
    { "rejects the string form of the number", s.literal(3), "3", { I({}, "Expected 3.", "3", "3") } },
    { "formats a float literal", s.literal(0.5), 1, { I({}, "Expected 0.5.", "0.5", 1) } },
    { "accepts the literal boolean", s.literal(true), true, nil },
    { "rejects the other boolean", s.literal(true), false, { I({}, "Expected true.", "true", false) } },
    { "accepts the null literal", s.literal(null), null, nil },
    { "rejects nil for the null literal", s.literal(null), nil, { I({}, "Expected null.", "null", nil) } },
    { "accepts an enum value", s.enum { "a", "b", "c" }, "b", nil },
    { "rejects another string", s.enum { "a", "b", "c" }, "d",
      { I({}, "Expected one of: a, b, c.", "enum", "d") } },
    { "rejects a non-string", s.enum { "a", "b", "c" }, 1,
      { I({}, "Expected one of: a, b, c.", "enum", 1) } },
    { "matches long enum values by bytes", s.enum { string.rep("v", 50) },
      string.rep("v", 25) .. string.rep("v", 25), nil },
    { "accepts anything as unknown", s.unknown(), { 1, "x" }, nil },
    { "accepts nil as unknown", s.unknown(), nil, nil },
  }
end)

describe("clank.schema array", function()
  local nums = s.array(s.number())
  check {
    { "accepts a sequence", nums, { 1, 2, 3 }, nil },
    { "accepts an empty unmarked table", nums, {}, nil },
    { "accepts a marked empty array", nums, json.array {}, nil },
    { "accepts a decoded array", nums, json.decode "[1,2]", nil },
    { "reports every item issue", nums, { 1, "x", 3, "y" },
      { I({ 2 }, "Expected a finite number.", "number", "x"), I({ 4 }, "Expected a finite number.", "number", "y") } },
    { "rejects a string", nums, "x", { I({}, "Expected an array.", "array", "x") } },
    { "rejects nil", nums, nil, { I({}, "Expected an array.", "array", nil) } },
    { "rejects a table with string keys", nums, { a = 1 }, { I({}, "Expected an array.", "array", { a = 1 }) } },
    { "rejects a sequence with extra keys", nums, { 1, a = 1 },
      { I({}, "Expected an array.", "array", { 1, a = 1 }) } },
    { "rejects a table with holes", nums, { [1] = 1, [3] = 3 },
      { I({}, "Expected an array.", "array", { [1] = 1, [3] = 3 }) } },
    { "rejects a table starting at 0", nums, { [0] = 1 }, { I({}, "Expected an array.", "array", { [0] = 1 }) } },
    { "checks min first and stops", s.array(s.number(), { min = 2 }), { "x" },
      { I({}, "Must contain at least 2 items.") } },
    { "checks max first and stops", s.array(s.number(), { max = 1 }), { "x", "y" },
      { I({}, "Must contain at most 1 item.") } },
    { "says item, singular, for a min of 1", s.array(s.number(), { min = 1 }), {},
      { I({}, "Must contain at least 1 item.") } },
    { "says items, plural, for a max of 0", s.array(s.number(), { max = 0 }), { 1 },
      { I({}, "Must contain at most 0 items.") } },
    { "accepts within bounds", s.array(s.number(), { min = 1, max = 2 }), { 1, 2 }, nil },
  }
end)

describe("clank.schema object", function()
  local ab = s.object { b = s.string(), a = s.string(), c = s.number() }
  check {
    { "accepts a matching table", s.object { a = s.string() }, { a = "x" }, nil },
    { "accepts the empty object", s.object {}, {}, nil },
    { "checks a missing key with its own schema", s.object { a = s.string() }, {},
      { I({ "a" }, "Expected a string.", "string", nil) } },
    { "rejects an unknown key when strict", s.object { a = s.string() }, { a = "x", b = 1 },
      { I({ "b" }, "Unknown property.") } },
    { "reports keys in byte order, then unknown keys in order", ab,
      { b = 1, a = 2, c = "x", z = 1, y = 2, B = 3 },
      { I({ "a" }, "Expected a string.", "string", 2), I({ "b" }, "Expected a string.", "string", 1),
        I({ "c" }, "Expected a finite number.", "number", "x"), I({ "B" }, "Unknown property."),
        I({ "y" }, "Unknown property."), I({ "z" }, "Unknown property.") } },
    { "rejects a string", s.object {}, "x", { I({}, "Expected an object.", "object", "x") } },
    { "rejects a sequence", s.object {}, { 1 }, { I({}, "Expected an object.", "object", { 1 }) } },
    { "rejects a mixed table", s.object { a = s.string() }, { "x", a = "x" },
      { I({}, "Expected an object.", "object", { "x", a = "x" }) } },
    { "rejects a decoded []", s.object {}, json.decode "[]", { I({}, "Expected an object.", "object", {}) } },
    { "accepts a decoded {}", s.object {}, json.decode "{}", nil },
    { "nests paths with 1-based indexes", s.object { tags = s.array(s.object { n = s.number() }) },
      { tags = { { n = 1 }, { n = "x" } } }, { I({ "tags", 2, "n" }, "Expected a finite number.", "number", "x") } },
  }

  it("keeps unknown keys with strict = false", function()
    local o = s.object({ a = s.string() }, { strict = false })
    local v = { a = "x", extra = { 1 } }
    assert.equal(v, o:parse(v))
    assert.same({ 1 }, o:parse(v).extra)
    -- unknown keys must still be strings
    assert.same({ I({}, "Expected an object.", "object", { a = "x", [1] = 2 }) }, issues_of(o, { a = "x", [1] = 2 }))
  end)

  it("matches a 60-byte property name by its bytes", function()
    local key = string.rep("k", 60)
    local o = s.object { [key] = s.number() }
    local built = string.rep("k", 30) .. string.rep("k", 30) -- another string object
    assert.is_nil(issues_of(o, { [built] = 1 }))
    assert.same({ I({ key }, "Expected a finite number.", "number", "x") }, issues_of(o, { [built] = "x" }))
    assert.same({ I({ key }, "Expected a finite number.", "number", nil) }, issues_of(o, {}))
    local other = string.rep("k", 59) .. "j"
    assert.same({ I({ key }, "Expected a finite number.", "number", nil), I({ other }, "Unknown property.") },
      issues_of(o, { [other] = 1 }))
  end)

  it("finds properties in a wide object", function()
    local shape, value = {}, {}
    for i = 1, 40 do
      shape["p" .. i] = s.number()
      value["p" .. i] = i
    end
    local o = s.object(shape)
    assert.is_nil(issues_of(o, value))
    value.p17 = "x"
    assert.same({ I({ "p17" }, "Expected a finite number.", "number", "x") }, issues_of(o, value))
  end)

  it("finds each of 64 properties by name, and no other name", function()
    local shape, value = {}, {}
    for i = 1, 64 do
      shape["k" .. i] = s.optional(s.number())
      value["k" .. i] = i
    end
    local o = s.object(shape)
    assert.is_nil(issues_of(o, value))
    -- names made at run time are the same strings; near misses are unknown, each reported
    local near = {}
    for i = 1, 64 do near[("k%d"):format(i)] = i end
    assert.is_nil(issues_of(o, near))
    local unknown, want = {}, {}
    for _, k in ipairs({ "K1", "k0", "k65", "k1 ", "k", "p1" }) do
      unknown[k] = 1
      want[#want + 1] = k
    end
    table.sort(want)
    local issues = issues_of(o, unknown)
    local got = {}
    for i, issue in ipairs(issues) do
      got[i] = issue.path[1]
      assert.equal("Unknown property.", issue.message)
    end
    table.sort(got)
    assert.same(want, got)
  end)

  it("checks every property of an object wider than 64", function()
    local shape, value = { opt = s.optional(s.number()) }, {}
    for i = 1, 70 do
      shape[("p%02d"):format(i)] = s.number()
      value[("p%02d"):format(i)] = i
    end
    local o = s.object(shape)
    assert.is_nil(issues_of(o, value))
    value.p70 = nil
    value.p69 = "x"
    assert.same({ I({ "p69" }, "Expected a finite number.", "number", "x"),
      I({ "p70" }, "Expected a finite number.", "number", nil) }, issues_of(o, value))
  end)
end)

describe("clank.schema optional and nullable", function()
  check {
    { "optional accepts nil", s.optional(s.string()), nil, nil },
    { "optional accepts the inner value", s.optional(s.string()), "x", nil },
    { "optional rejects clank.null", s.optional(s.string()), null,
      { I({}, "Expected a string.", "string", null) } },
    { "nullable accepts clank.null", s.nullable(s.string()), null, nil },
    { "nullable rejects nil", s.nullable(s.string()), nil, { I({}, "Expected a string.", "string", nil) } },
    { "an absent optional key is fine", s.object { p = s.optional(s.number()) }, {}, nil },
    { "an absent nullable key is checked", s.object { p = s.nullable(s.number()) }, {},
      { I({ "p" }, "Expected a finite number.", "number", nil) } },
    { "optional(nullable) takes both", s.object { p = s.optional(s.nullable(s.number())) }, { p = null }, nil },
  }
end)

describe("clank.schema union", function()
  local sn = s.union { s.string(), s.number() }
  check {
    { "accepts the first member", sn, "x", nil },
    { "accepts the second member", sn, 1, nil },
    { "reports one issue with every member's messages", sn, true,
      { I({}, "Did not match any union member (Expected a string.; Expected a finite number.).", "union", true) } },
    { "reports at the union's path", s.object { v = sn }, { v = {} },
      { I({ "v" }, "Did not match any union member (Expected a string.; Expected a finite number.).", "union", {}) } },
    { "lists every issue of every member, in order",
      s.union { s.object { a = s.string(), b = s.string() }, s.number { min = 3 } }, 1,
      { I({}, "Did not match any union member (Expected an object.; Must be at least 3.).", "union", 1) } },
    { "lists nested member issues without paths",
      s.union { s.object { a = s.string(), b = s.string() }, s.literal("x") }, {},
      { I({}, 'Did not match any union member (Expected a string.; Expected a string.; Expected "x".).',
          "union", {}) } },
    { "accepts nil when a member is optional", s.union { s.optional(s.string()), s.number() }, nil, nil },
  }
  it("takes the first member that parses", function()
    local u = s.union { s.object({ a = s.string() }, { strict = false }), s.object { a = s.string(), b = s.number() } }
    local v = { a = "x", b = 1 }
    assert.equal(v, u:parse(v))
  end)
end)

describe("clank.schema aggregation", function()
  it("collects at most 100 issues", function()
    local v = {}
    for i = 1, 150 do v[i] = i end
    local issues = issues_of(s.array(s.string()), v)
    assert.equal(100, #issues)
    assert.same({ 100 }, issues[100].path)
  end)

  local function nested(n, leaf)
    local sc = s.number()
    for _ = 1, n do sc = s.array(sc) end
    local v = leaf
    for _ = 1, n do v = { v } end
    return sc, v
  end

  it("accepts 64 nested arrays", function()
    local sc, v = nested(64, 1)
    assert.is_nil(issues_of(sc, v))
  end)

  it("reports nesting beyond 64", function()
    local sc, v = nested(65, 1)
    local path = {}
    for i = 1, 64 do path[i] = 1 end
    assert.same({ I(path, "Nested too deeply.") }, issues_of(sc, v))
  end)

  it("validates on every call (no caching by identity)", function()
    local o = s.object { a = s.number() }
    local v = { a = 1 }
    assert.equal(v, o:parse(v))
    v.a = "x"
    assert.is_false(o:safeParse(v).success)
  end)
end)

describe("clank.schema ValidationError", function()
  local o = s.object { title = s.string { min = 1 }, tags = s.array(s.string()) }

  it("raises a table whose tostring joins path: message with '; '", function()
    local ok, err = pcall(o.parse, o, { title = "", tags = { "a", 2 } })
    assert.is_false(ok)
    assert.equal("table", type(err))
    assert.equal("tags.2: Expected a string.; title: Must contain at least 1 character.", tostring(err))
    assert.equal(tostring(err), err.message)
  end)

  it("names the root 'value'", function()
    local ok, err = pcall(o.parse, o, "x")
    assert.is_false(ok)
    assert.equal("value: Expected an object.", tostring(err))
  end)

  it("shares one metatable exposed as s.ValidationError", function()
    local r = o:safeParse(1)
    assert.equal(s.ValidationError, getmetatable(r.error))
    assert.is_false(s.isValidationError({ issues = {} }))
    assert.is_false(s.isValidationError(nil))
  end)

  it("returns success and data from safeParse", function()
    local v = { title = "x", tags = {} }
    assert.same({ success = true, data = v }, o:safeParse(v))
    assert.equal(v, o:safeParse(v).data)
  end)

  it("renders issue lists as JSON arrays", function()
    local r = s.object { a = s.string() }:safeParse({ a = 1 })
    assert.equal('[{"expected":"string","message":"Expected a string.","path":["a"],"received":1}]',
      json.encode(r.error.issues))
    assert.equal('[]', json.encode(s.string():safeParse(1).error.issues[1].path))
  end)
end)

describe("clank.schema module", function()
  it("exposes null as clank.null", function()
    assert.equal(clank.null, s.null)
  end)

  it("tells schemas apart", function()
    assert.is_true(s.isSchema(s.string()))
    assert.is_true(s.isSchema(s.optional(s.number())))
    assert.is_false(s.isSchema({}))
    assert.is_false(s.isSchema(nil))
    assert.is_false(s.isSchema(io.stdout))
  end)

  it("treats a missing argument as nil", function()
    assert.is_nil(s.optional(s.string()):parse())
    assert.is_true(s.optional(s.string()):safeParse().success)
    assert.equal("value: Expected a string.", tostring(s.string():safeParse().error))
  end)

  it("refuses methods called on something else than a schema", function()
    local sc = s.string()
    assert.has_error(function() sc.parse({}, "x") end)
    assert.has_error(function() sc.safeParse(null, "x") end)
    assert.has_error(function() sc.toJSONSchema(io.stdout) end)
  end)

  it("keeps children alive after their builders' references are gone", function()
    local o = s.object { a = s.array(s.object { b = s.enum { "x" .. "y", string.rep("z", 45) } }) }
    collectgarbage()
    collectgarbage()
    assert.is_nil(issues_of(o, { a = { { b = "xy" }, { b = string.rep("z", 45) } } }))
    assert.same({ I({ "a", 1, "b" }, "Expected one of: xy, " .. string.rep("z", 45) .. ".", "enum", "q") },
      issues_of(o, { a = { { b = "q" } } }))
  end)
end)

describe("clank.schema resources", function()
  it("validates a valid value without allocating", function()
    local key = string.rep("k", 60)
    local sc = s.object {
      title = s.string { min = 1, max = 120, pattern = "^(%a+) (%d+)$" },
      [key] = s.union { s.number { integer = true }, s.literal(true) },
      priority = s.optional(s.enum { "low", "normal", "high" }),
      estimate = s.nullable(s.number { min = 0 }),
      tags = s.array(s.string(), { max = 10 }),
      rest = s.object({ any = s.unknown() }, { strict = false }),
    }
    local v = json.decode('{"title":"abc 12","priority":"low","estimate":null,"tags":["a","é"],"rest":{"x":1},"'
      .. key .. '":true}')
    for _ = 1, 10 do sc:parse(v) end -- warm up (Lua keeps its call frames)
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    for _ = 1, 1000 do sc:parse(v) end
    local after = collectgarbage("count")
    collectgarbage("restart")
    assert.equal(before, after)
  end)

  it("releases the registry entries of pattern schemas", function()
    -- the message; the compiled pattern lives in the schema's own memory
    local function count()
      local n = 0
      for _, v in pairs(debug.getregistry()) do
        if v == "Must match ^marker-pattern(%d+)$." then n = n + 1 end
      end
      return n
    end
    do
      local kept = {} -- luacheck: ignore 241 (only written: it holds the schemas alive for count())
      for i = 1, 50 do kept[i] = s.string { pattern = "^marker-pattern(%d+)$" } end
      assert.equal(50, count())
    end
    collectgarbage()
    collectgarbage()
    assert.equal(0, count())
  end)
end)
