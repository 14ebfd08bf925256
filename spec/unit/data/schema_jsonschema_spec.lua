-- clank.schema: schema:toJSONSchema() and Lua pattern translation (SPEC §3),
-- and the C view of schemas that guides clank.json.encode.
local clank = require "clank"
local s = clank.schema
local json = clank.json
local null = clank.null

describe("clank.schema toJSONSchema", function()
  local cases = {
    { "a plain string", s.string(), { type = "string" } },
    { "a string with every option",
      s.string { min = 1, max = 5, pattern = "^%d+$", format = "numeric", description = "d" },
      { type = "string", minLength = 1, maxLength = 5, pattern = "^[0-9]+$", format = "numeric", description = "d" } },
    { "a number", s.number(), { type = "number" } },
    { "an integer with bounds", s.number { integer = true, min = 0, max = 9.5, description = "n" },
      { type = "integer", minimum = 0, maximum = 9.5, description = "n" } },
    { "a boolean", s.boolean { description = "b" }, { type = "boolean", description = "b" } },
    { "a string literal", s.literal("a"), { const = "a" } },
    { "a number literal", s.literal(3, { description = "three" }), { const = 3, description = "three" } },
    { "a boolean literal", s.literal(false), { const = false } },
    { "a null literal", s.literal(null), { const = null } },
    { "an enum", s.enum({ "b", "a" }, { description = "e" }),
      { type = "string", enum = { "b", "a" }, description = "e" } },
    { "unknown", s.unknown(), {} },
    { "unknown with a description", s.unknown { description = "u" }, { description = "u" } },
    { "an array", s.array(s.number(), { min = 1, max = 2, description = "a" }),
      { type = "array", items = { type = "number" }, minItems = 1, maxItems = 2, description = "a" } },
    { "an empty object", s.object {},
      { type = "object", properties = {}, required = {}, additionalProperties = false } },
    { "a loose object", s.object({ a = s.optional(s.string()) }, { strict = false, description = "o" }),
      { type = "object", properties = { a = { type = "string" } }, required = {}, additionalProperties = true,
        description = "o" } },
    { "optional as its inner schema", s.optional(s.number()), { type = "number" } },
    { "nullable as anyOf", s.nullable(s.string()), { anyOf = { { type = "string" }, { type = "null" } } } },
    { "a union", s.union({ s.string(), s.boolean() }, { description = "u" }),
      { anyOf = { { type = "string" }, { type = "boolean" } }, description = "u" } },
  }
  for _, c in ipairs(cases) do
    it("writes " .. c[1], function()
      assert.same(c[3], c[2]:toJSONSchema())
    end)
  end

  it("returns a fresh table on each call", function()
    local sc = s.object { a = s.string() }
    local a, b = sc:toJSONSchema(), sc:toJSONSchema()
    assert.are_not.equal(a, b)
    a.properties.a.type = "changed"
    assert.equal("string", sc:toJSONSchema().properties.a.type)
  end)

  it("sorts required and leaves optional keys out", function()
    local sc = s.object { z = s.string(), a = s.string(), m = s.optional(s.string()), b = s.nullable(s.string()),
      u = s.unknown(), o = s.nullable(s.optional(s.string())) }
    assert.same({ "a", "b", "u", "z" }, sc:toJSONSchema().required)
  end)

  it("marks required, enum and anyOf as JSON arrays, even empty", function()
    assert.equal('{"additionalProperties":false,"properties":{},"required":[],"type":"object"}',
      json.encode(s.object {}:toJSONSchema()))
    assert.is_true(json.isArray(s.enum { "a" }:toJSONSchema().enum))
    assert.is_true(json.isArray(s.union { s.string() }:toJSONSchema().anyOf))
    assert.is_true(json.isArray(s.nullable(s.string()):toJSONSchema().anyOf))
  end)

  it("writes the seed's CreateTask as canonical JSON", function()
    local CreateTask = s.object {
      title = s.string { min = 1, max = 120, description = "Short task title" },
      priority = s.optional(s.enum { "low", "normal", "high" }),
      estimate = s.nullable(s.number { min = 0 }),
      tags = s.array(s.string(), { max = 10 }),
    }
    assert.equal('{"additionalProperties":false,"properties":{'
      .. '"estimate":{"anyOf":[{"minimum":0,"type":"number"},{"type":"null"}]},'
      .. '"priority":{"enum":["low","normal","high"],"type":"string"},'
      .. '"tags":{"items":{"type":"string"},"maxItems":10,"type":"array"},'
      .. '"title":{"description":"Short task title","maxLength":120,"minLength":1,"type":"string"}},'
      .. '"required":["estimate","tags","title"],"type":"object"}',
      json.encode(CreateTask:toJSONSchema()))
  end)
end)

describe("clank.schema pattern translation", function()
  local cases = {
    { "%d", "[0-9]" },
    { "^%a+$", "^[A-Za-z]+$" },
    { "%l%u", "[a-z][A-Z]" },
    { "%w", "[0-9A-Za-z]" },
    { "%x", "[0-9A-Fa-f]" },
    { "%s", "[\\t-\\r ]" },
    { "%p", "[!-\\/:-@\\[-`{-~]" },
    { "%c", "[\\x00-\\x1F\\x7F]" },
    { "%g", "[!-~]" },
    { "%D", "[^0-9]" },
    { "%A%L%U%W%X%P%C", "[^A-Za-z][^a-z][^A-Z][^0-9A-Za-z][^0-9A-Fa-f][^!-\\/:-@\\[-`{-~][^\\x00-\\x1F\\x7F]" },
    { "%S+", "[^\\t-\\r ]+" },
    { "%z%Z[%z][a%Z]", "[\\x00][^\\x00][\\x00](?:[a]|[^\\x00])" },
    { "a-", "a*?" },
    { "a*b+c?", "a*b+c?" },
    { "%.", "\\." },
    { "%%", "%" },
    { "%-%+", "-\\+" },
    { ".", "[\\s\\S]" },
    { "^abc$", "^abc$" },
    { "a^b$c", "a\\^b\\$c" },
    { "*a", "\\*a" },
    { "a+?", "a+\\?" },
    { "{x}|y", "\\{x\\}\\|y" },
    { "[%d_]", "[0-9_]" },
    { "[^%s]", "[^\\t-\\r ]" },
    { "[a-z%-]", "[a-z\\-]" },
    { "[]]", "[\\]]" },
    { "[^]a]", "[^\\]a]" },
    { "[a-]", "[a\\-]" },
    { "[%]]", "[\\]]" },
    { "[\\^]", "[\\\\\\^]" },
    { "[%D]", "(?:[^0-9])" },
    { "[x%D]", "(?:[x]|[^0-9])" },
    { "[^x%D]", "(?:(?![x])[0-9])" },
    { "[^%D%U]", "(?:(?=[0-9])[A-Z])" },
    { "(%d+)-(%d+)", "([0-9]+)-([0-9]+)" },
    { "()a", "()a" },
    { "a\tb", "a\\x09b" },
    { "a\0b", "a\\x00b" },
    { "[z-ab]", "[b]" },
    { "[a-%d]", "[d]" },
    { "é+", "é+" },
  }
  for _, c in ipairs(cases) do
    it(("translates %q"):format(c[1]), function()
      assert.equal(c[2], s.string { pattern = c[1] }:toJSONSchema().pattern)
    end)
  end

  -- Lua semantics on the validation side, for the same patterns.
  local matches = {
    { "[^x%D]", "5", true }, { "[^x%D]", "x", false }, { "^[x%D]$", "x", true }, { "^[x%D]$", "5", false },
    { "^a-b", "aaab", true }, { "^.$", "\n", true }, { "^%p+$", "!?", true }, { "^%S+$", "a b", false },
    { "^()a(b)$", "ab", true }, { "^[]]$", "]", true }, { "^[z-ab]$", "b", true }, { "^[z-ab]$", "m", false },
    { "^[a-%d]$", "d", true }, { "^[a-%d]$", "b", false },
    { "^%z$", "\0", true }, { "^%z$", "z", false }, { "^%Z$", "z", true }, { "^%Z$", "\0", false },
    -- what parentheses keep literal stays literal once captures are dropped
    { "^(a)*$", "a*", true }, { "^(a)*$", "aa", false }, { "a()-", "a-", true }, { "a()-", "b", false },
    { "(^a)", "x^a", true }, { "(^a)", "ab", false }, { "(a$)b", "a$b", true },
  }
  for _, m in ipairs(matches) do
    it(("matches %q against %q like string.find"):format(m[2], m[1]), function()
      assert.equal(m[3], string.find(m[2], m[1]) ~= nil)
      assert.equal(m[3], s.string { pattern = m[1] }:safeParse(m[2]).success)
    end)
  end
end)

describe("clank.schema seen from C (schema-guided clank.json.encode)", function()
  local CreateTask = s.object {
    title = s.string(),
    priority = s.optional(s.enum { "low", "normal", "high" }),
    estimate = s.nullable(s.number { min = 0 }),
    tags = s.array(s.string(), { max = 10 }),
  }

  it("encodes an empty table as [] where the schema says array", function()
    assert.equal('{"estimate":null,"tags":[],"title":"t"}',
      json.encode({ title = "t", estimate = null, tags = {} }, CreateTask))
  end)

  it("unwraps optional and nullable arrays and follows items", function()
    local sc = s.object { a = s.optional(s.nullable(s.array(s.array(s.string())))), b = s.object {} }
    assert.equal('{"a":[[]],"b":{}}', json.encode({ a = { {} }, b = {} }, sc))
  end)

  it("finds long property names", function()
    local key = string.rep("k", 60)
    local sc = s.object { [key] = s.array(s.number()) }
    assert.equal('{"' .. key .. '":[]}', json.encode({ [key] = {} }, sc))
  end)
end)

describe("clank.schema pattern translation against a real ECMA-262 engine", function()
  -- Random Lua patterns: each translation must compile as a regex (with and
  -- without the u flag) and match ASCII subjects exactly as string.find does.
  local node = io.popen("command -v node 2>/dev/null"):read("l")

  it("agrees with string.find on random patterns (node)", function()
    if not node or node == "" then
      pending("node is not installed")
      return
    end
    math.randomseed(20261130)
    local atoms = { "a", "b", "%d", "%a", "%s", "%p", "%w", "%x", "%u", "%l", "%c", "%D", "%A", "%S", "%W", ".",
      "%.", "%%", "%-", "[ab]", "[^ab]", "[%d_]", "[^%s]", "[a-c]", "[x%D]", "[^x%D]", "[%a%d]", "[]]", "[^]a]", "[a-]",
      "[%]]", "[z-ab]", "%z", "%Z", "-", "*", "?", "+", "{", "}", "|", "/", "\\", "^", "$", "\t", "1" }
    local quants = { "", "", "", "*", "+", "?", "-" }
    local chars = { "a", "b", "c", "x", "z", "1", "5", "_", " ", "\t", "\n", ".", "%", "-", "]", "^", "$", "*", "?",
      "{", "|", "/", "\\", "A", "Z", "!", "~" }
    local cases = {}
    while #cases < 300 do
      local t, open = {}, 0
      if math.random() < 0.3 then t[#t + 1] = "^" end
      for _ = 1, math.random(1, 4) do
        if math.random() < 0.1 then t[#t + 1] = "("; open = open + 1 end
        t[#t + 1] = atoms[math.random(#atoms)] .. quants[math.random(#quants)]
        if open > 0 and math.random() < 0.3 then t[#t + 1] = ")"; open = open - 1 end
      end
      t[#t + 1] = string.rep(")", open)
      if math.random() < 0.3 then t[#t + 1] = "$" end
      local p = table.concat(t)
      local ok, sc = pcall(s.string, { pattern = p })
      if ok then
        local subjects = {}
        for j = 1, 20 do
          local w = {}
          for k = 1, math.random(0, 6) do w[k] = chars[math.random(#chars)] end
          local subject = table.concat(w)
          local found = string.find(subject, p) ~= nil
          assert.equal(found, sc:safeParse(subject).success, ("pattern %q, subject %q"):format(p, subject))
          subjects[j] = { subject, found }
        end
        cases[#cases + 1] = { p, sc:toJSONSchema().pattern, subjects }
      end
    end
    local file = os.tmpname()
    local f = assert(io.open(file, "w"))
    f:write(json.encode(cases))
    f:close()
    local script = [[
      const cases = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));
      const bad = [];
      for (const flags of ['', 'u'])
        for (const [p, re, subjects] of cases) {
          let r;
          try { r = new RegExp(re, flags); } catch (e) { bad.push(p + ' -> ' + re + ': ' + e.message); continue; }
          for (const [s, found] of subjects)
            if (r.test(s) !== found) bad.push(JSON.stringify(p) + ' -> ' + re + ' on ' + JSON.stringify(s));
        }
      console.log(bad.length ? bad.slice(0, 5).join('\n') : 'ok');
    ]]
    local js = os.tmpname()
    f = assert(io.open(js, "w"))
    f:write(script)
    f:close()
    local out = io.popen(("'%s' '%s' '%s'"):format(node, js, file)):read("a")
    os.remove(file)
    os.remove(js)
    assert.equal("ok\n", out)
  end)
end)
