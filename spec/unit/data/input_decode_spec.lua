-- An action's input decoded and validated in one pass (schema_decode.c): the bridge decodes
-- the body guided by the input schema and skips validating again what that pass found
-- valid. The answers must be what the two steps give one after the other (SPEC §5 steps 7-9,
-- §3 for the messages): hand-written bodies for each constraint, then a seeded random part
-- holding every answer against the plain path (clank.json.decode, then safeParse and the
-- 422 the bridge writes from its issues). The handler answers with a fingerprint of the
-- table it was given (types, integer or float, array marks, even the order pairs() walks
-- the keys in), so the guided decoder must build the very table the plain one builds.
local clank = require "clank"
local bridge = require "clank.bridge"
local answers = require "helpers.bridge"
local s = clank.schema
local json = clank.json
local null = clank.null

local HOST = "127.0.0.1:8080"

local ARRAY_MT = getmetatable(json.decode("[]"))

-- Every byte of the value and of the table holding it.
local function fingerprint(v)
  local t = type(v)
  if t == "table" then
    local parts = { getmetatable(v) == ARRAY_MT and "A{" or (getmetatable(v) and "?{" or "{") }
    for k, x in pairs(v) do
      parts[#parts + 1] = fingerprint(k) .. "=" .. fingerprint(x) .. ";"
    end
    return table.concat(parts) .. "}"
  elseif t == "number" then
    return math.type(v) == "integer" and ("i" .. v) or string.format("f%a", v)
  elseif t == "string" then
    return string.format("%q", v)
  elseif v == null then
    return "null"
  end
  return tostring(v)
end

-- Every constraint the one pass checks (a pattern too, with the validator's matcher), and
-- parts it leaves to the validator (literal, union, unknown).
local Input = s.object {
  title = s.string { min = 1, max = 5 },
  kind = s.optional(s.enum { "a", "bb", "\u{e9}t\u{e9}" }),
  n = s.nullable(s.number { min = -2, max = 2.5 }),
  i = s.optional(s.number { integer = true, min = 0, max = 9007199254740993 }),
  tags = s.optional(s.array(s.string { max = 3 }, { min = 1, max = 3 })),
  flag = s.optional(s.boolean()),
  nested = s.optional(s.object {
    x = s.number(),
    deep = s.optional(s.array(s.array(s.optional(s.nullable(s.number { integer = true }))))),
  }),
  loose = s.optional(s.object({ k = s.optional(s.string()) }, { strict = false })),
  any = s.optional(s.unknown()),
  lit = s.optional(s.literal("x")),
  u = s.optional(s.union { s.string { min = 2 }, s.number() }),
  pat = s.optional(s.string { pattern = "^%d+$" }),
}

local echo = clank.defineAction {
  name = "echo", description = "Answers with the fingerprint of its input.",
  input = Input, output = s.object { fp = s.string() },
  sideEffects = "none",
  handler = function(input) return { fp = fingerprint(input) } end,
}

local b = clank.createAgentBridge({ echo })

local function post(body, context)
  return b:handle({
    method = "POST", url = "/actions/echo", path = "/actions/echo", query = {}, scheme = "http",
    headers = { host = HOST, ["content-type"] = "application/json",
                ["content-length"] = tostring(#body) },
    body = body,
  }, context)
end

-- What the plain path answers for the decoded value v under schema: status and body.
local function answer_for(schema, v)
  local r = schema:safeParse(v)
  if r.success then
    return 200, '{"ok":true,"output":' .. json.encode { fp = fingerprint(v) } .. "}"
  end
  local e = bridge.errorEnvelope(r.error, {})
  return 422, '{"error":' .. json.encode { code = e.code, details = e.details, message = e.message }
    .. ',"ok":false}'
end

-- What the plain path answers: status and body.
local function reference(body)
  local v = json.decode(body)
  if v == nil then
    if not utf8.len(body) then
      return 400, answers.failure_body("INVALID_ENCODING", "Request body must be valid UTF-8.")
    end
    return 400, answers.failure_body("INVALID_JSON", "Request body is not valid JSON.")
  end
  return answer_for(Input, v)
end

local function same_as_reference(body)
  local res = post(body)
  local status, want = reference(body)
  assert.are.equal(status, res.status, body)
  assert.are.equal(want, res.body, body)
  return res
end

local function ok(body, fp)
  local res = post(body)
  assert.are.equal(200, res.status, body .. " -> " .. tostring(res.body))
  assert.are.equal('{"ok":true,"output":' .. json.encode { fp = fp } .. "}", res.body)
  same_as_reference(body)
end

-- A 422 with one issue: path as JSON text, the message, expected or nil.
local function invalid(body, path_json, path_text, message, expected)
  local res = post(body)
  local issue = (expected and ('{"expected":"' .. expected .. '",') or "{")
    .. '"message":"' .. message .. '","path":' .. path_json .. "}"
  answers.assert_failure(res, 422, "INVALID_INPUT", path_text .. ": " .. message, "[" .. issue .. "]")
  same_as_reference(body)
end

describe("an action's input decoded and checked in one pass", function()
  it("gives the handler the table the plain decoder builds", function()
    ok('{"title":"t","n":null}', fingerprint(json.decode('{"title":"t","n":null}')))
    local body = '{"n":2.5,"kind":"bb","tags":["ab","c"],"title":"\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}",'
      .. '"i":9007199254740993,"flag":false,"nested":{"x":-0,"deep":[[1,null],[]]},'
      .. '"loose":{"k":"v","zz":[1,{"a":{}}]},"any":{"q":[1.5e3,"x"]}}'
    local v = json.decode(body)
    assert.are.equal(2.5, v.n)
    assert.are.equal(9007199254740993, v.i)
    assert.are.equal("integer", math.type(v.i))
    assert.are.equal(ARRAY_MT, getmetatable(v.nested.deep[2]))
    ok(body, fingerprint(v))
    ok(' \n{ "title" : "x" , "n" : -2 }\t', fingerprint(json.decode('{"title":"x","n":-2}')))
  end)

  it("answers the same when a context function runs between decoding and validating", function()
    local calls = 0
    local function context()
      calls = calls + 1
      -- another body decoded meanwhile, valid or not, changes nothing for this one
      post(calls % 2 == 1 and '{"title":"t","n":null}' or '{"title":"","n":null}')
      return {}
    end
    local good, bad = '{"title":"ok","n":1}', '{"title":"toolong","n":1}'
    for _ = 1, 3 do
      local res = post(good, context)
      assert.are.equal(200, res.status)
      assert.are.equal(select(2, reference(good)), res.body)
      res = post(bad, context)
      assert.are.equal(422, res.status)
      assert.are.equal(select(2, reference(bad)), res.body)
    end
    assert.are.equal(6, calls)
  end)

  it("reads escapes in keys and values as the plain decoder does", function()
    ok('{"ti\\u0074le":"a\\"\\n","n":null,"kind":"\\u00e9t\\u00e9"}',
      fingerprint(json.decode('{"title":"a\\"\\n","n":null,"kind":"\\u00e9t\\u00e9"}')))
    -- "\ud83d\ude00" is one code point: five of them are not too many
    ok('{"title":"\\ud83d\\ude00\\ud83d\\ude00\\ud83d\\ude00\\ud83d\\ude00\\ud83d\\ude00","n":null}',
      fingerprint(json.decode('{"title":"' .. string.rep("\u{1F600}", 5) .. '","n":null}')))
  end)

  it("counts string lengths in code points", function()
    invalid('{"title":"","n":null}', '["title"]', "title", "Must contain at least 1 character.")
    invalid('{"title":"\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}","n":null}', '["title"]', "title",
      "Must contain at most 5 characters.")
    invalid('{"title":"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9","n":null}', '["title"]', "title",
      "Must contain at most 5 characters.")
    invalid('{"title":"abcdef","n":null}', '["title"]', "title", "Must contain at most 5 characters.")
    invalid('{"title":7,"n":null}', '["title"]', "title", "Expected a string.", "string")
  end)

  it("matches enums by their bytes", function()
    invalid('{"title":"t","n":null,"kind":"b"}', '["kind"]', "kind", "Expected one of: a, bb, \u{e9}t\u{e9}.", "enum")
    invalid('{"title":"t","n":null,"kind":"bbb"}', '["kind"]', "kind", "Expected one of: a, bb, \u{e9}t\u{e9}.", "enum")
    invalid('{"title":"t","n":null,"kind":null}', '["kind"]', "kind", "Expected one of: a, bb, \u{e9}t\u{e9}.", "enum")
  end)

  it("checks numbers at their bounds, integers and floats alike", function()
    ok('{"title":"t","n":-2.0}', fingerprint(json.decode('{"title":"t","n":-2.0}')))
    ok('{"title":"t","n":25e-1}', fingerprint(json.decode('{"title":"t","n":25e-1}')))
    ok('{"title":"t","n":null,"i":0}', fingerprint(json.decode('{"title":"t","n":null,"i":0}')))
    ok('{"title":"t","n":null,"i":2.0}', fingerprint(json.decode('{"title":"t","n":null,"i":2.0}')))
    invalid('{"title":"t","n":-2.0000001}', '["n"]', "n", "Must be at least -2.")
    invalid('{"title":"t","n":3}', '["n"]', "n", "Must be at most 2.5.")
    invalid('{"title":"t","n":"1"}', '["n"]', "n", "Expected a finite number.", "number")
    invalid('{"title":"t","n":null,"i":1.5}', '["i"]', "i", "Expected an integer.", "integer")
    invalid('{"title":"t","n":null,"i":-1}', '["i"]', "i", "Must be at least 0.")
    invalid('{"title":"t","n":null,"i":9007199254740994}', '["i"]', "i",
      "Must be at most 9007199254740993.")
  end)

  it("checks arrays' sizes and items", function()
    invalid('{"title":"t","n":null,"tags":[]}', '["tags"]', "tags", "Must contain at least 1 item.")
    invalid('{"title":"t","n":null,"tags":["a","b","c","d"]}', '["tags"]', "tags",
      "Must contain at most 3 items.")
    invalid('{"title":"t","n":null,"tags":["a","abcd"]}', '["tags",1]', "tags.1",
      "Must contain at most 3 characters.")
    invalid('{"title":"t","n":null,"tags":"a"}', '["tags"]', "tags", "Expected an array.", "array")
    -- an empty unmarked table is an array too (SPEC §3)
    invalid('{"title":"t","n":null,"tags":{}}', '["tags"]', "tags", "Must contain at least 1 item.")
    invalid('{"title":"t","n":null,"nested":{"x":1,"deep":[[1],[2.5]]}}', '["nested","deep",1,0]',
      "nested.deep.1.0", "Expected an integer.", "integer")
  end)

  it("reports missing, unknown and repeated keys as the validator does", function()
    invalid('{"n":null}', '["title"]', "title", "Expected a string.", "string")
    invalid('{"title":"t"}', '["n"]', "n", "Expected a finite number.", "number")
    invalid('{"title":"t","n":null,"extra":1}', '["extra"]', "extra", "Unknown property.")
    invalid('{"title":"t","n":null,"nested":{"x":1,"y":2}}', '["nested","y"]', "nested.y", "Unknown property.")
    -- the last of a repeated key wins, as with JSON.parse
    invalid('{"title":"t","n":null,"title":""}', '["title"]', "title", "Must contain at least 1 character.")
    ok('{"title":"","n":null,"title":"t"}', fingerprint(json.decode('{"title":"t","n":null}')))
    ok('{"title":"t","n":null,"loose":{"zz":1,"zz":[2]}}',
      fingerprint(json.decode('{"title":"t","n":null,"loose":{"zz":1,"zz":[2]}}')))
    invalid('[]', '[]', "value", "Expected an object.", "object")
  end)

  it("leaves literals and unions to the validator, and matches patterns as it does", function()
    ok('{"title":"t","n":null,"lit":"x","u":"ab","pat":"12"}',
      fingerprint(json.decode('{"title":"t","n":null,"lit":"x","u":"ab","pat":"12"}')))
    invalid('{"title":"t","n":null,"lit":"y"}', '["lit"]', "lit", 'Expected \\"x\\".', '\\"x\\"')
    invalid('{"title":"t","n":null,"pat":"1a"}', '["pat"]', "pat", "Must match ^%d+$.")
    invalid('{"title":"t","n":null,"u":"a"}', '["u"]', "u",
      "Did not match any union member (Must contain at least 2 characters.; Expected a finite number.).", "union")
  end)

  it("answers bodies that are not JSON exactly as before", function()
    local bad_json = answers.failure_body("INVALID_JSON", "Request body is not valid JSON.")
    local bad_utf8 = answers.failure_body("INVALID_ENCODING", "Request body must be valid UTF-8.")
    for _, body in ipairs {
      '{"title":"t","n":null', '{"title":"t","n":null}x', '{"title":"t","n":null},',
      '{"title":"t",,"n":null}', '{"title":"t","n":nul}', '{"title":"t\n","n":null}',
      '{"title":"\\x","n":null}', '{"title":"\\ud800","n":null}', '{"title":"\\udc00x","n":null}',
      '{"title":"t","n":01}', '{"title":"t","n":1.}', '{"title":"t","n":NaN}',
      '{"title":"t","n":1e400}', '{title:"t"}', '{"title":"t","tags":["a",]}',
      '{"title":"t","n":null,"any":' .. string.rep("[", 64) .. string.rep("]", 64) .. "}",
      '{"title":"t","n":null,"nested":{"x":1,"deep":' .. string.rep("[", 63) .. string.rep("]", 63) .. "}}",
    } do
      answers.assert_failure(post(body), 400, "INVALID_JSON", "Request body is not valid JSON.")
      assert.are.equal(bad_json, same_as_reference(body).body)
    end
    for _, body in ipairs { '{"title":"\255","n":null}', '{"ti\192\128tle":"t","n":null}',
                            '{"title":"\237\160\128","n":null}', '{"title":"t","n":null}\255' } do
      answers.assert_failure(post(body), 400, "INVALID_ENCODING", "Request body must be valid UTF-8.")
      assert.are.equal(bad_utf8, same_as_reference(body).body)
    end
    -- 63 levels below the root still decode (64 in all)
    same_as_reference('{"title":"t","n":null,"any":' .. string.rep("[", 63) .. string.rep("]", 63) .. "}")
  end)

  it("releases the strings objects and enums hold for it with their schemas", function()
    local function count()
      local n = 0
      for _, v in pairs(debug.getregistry()) do
        if type(v) == "table" and (v[1] == "marker-key" or v[1] == "marker-value") then n = n + 1 end
      end
      return n
    end
    do
      local kept = {} -- luacheck: ignore 241 (only written: it holds the schemas alive for count())
      for i = 1, 20 do
        kept[i] = s.object { ["marker-key"] = s.enum { "marker-value", "b" }, zz = s.number() }
      end
      assert.equal(40, count())
    end
    collectgarbage()
    collectgarbage()
    assert.equal(0, count())
  end)

  describe("on seeded random bodies", function()
    local rng_state
    local function rnd(n) -- a small LCG: the same bodies on every Lua
      rng_state = (rng_state * 1103515245 + 12345) % 2147483648
      return rng_state % n + 1
    end
    local function pick(list) return list[rnd(#list)] end

    local function ws() return pick { "", "", "", " ", "\n ", "\t" } end

    local function str_text(text)
      local out = {}
      for _, c in utf8.codes(text) do
        local ch = utf8.char(c)
        local r = rnd(10)
        if r == 1 then
          out[#out + 1] = c < 0x10000 and string.format("\\u%04x", c)
            or string.format("\\u%04x\\u%04x", 0xD800 + ((c - 0x10000) >> 10), 0xDC00 + ((c - 0x10000) & 0x3FF))
        elseif ch == '"' or ch == "\\" then
          out[#out + 1] = "\\" .. ch
        elseif ch == "\n" then
          out[#out + 1] = "\\n"
        else
          out[#out + 1] = ch
        end
      end
      return '"' .. table.concat(out) .. '"'
    end

    local function rstring(most)
      local chars = { "a", "b", "\u{e9}", "\u{1F600}", '"', "\\", "\n", "z", "1" }
      local t = {}
      for _ = 1, rnd((most or 6) + 1) - 1 do t[#t + 1] = pick(chars) end
      return table.concat(t)
    end

    local function rnumber()
      return pick { "0", "-0", "1", "-1", "2", "2.5", "2.50", "25e-1", "3", "-2", "-2.0", "-2.1",
        "1.5", "1e2", "9007199254740993", "9007199254740994", "-9223372036854775808",
        "9223372036854775808", "0.1", "1E-3", "12345678901234567890" }
    end

    local gen_any
    local good -- this body's values are picked to pass, mostly
    local function gen_for(kind, depth)
      if not good and rnd(8) == 1 then return gen_any(depth) end -- anything at all, now and then
      if good then
        if kind == "title" then return str_text(rstring(4) .. "t")
        elseif kind == "n" then
          return pick { "null", "0", "-2", "2.5", "-0", "1e0", "-1.5", "0.1", "1.23456789012345",
            "-1.99999999999999", "2.4999999999999999", "-0.0", "0.000000000000001", "2.50000000000000",
            "0.30000000000000004", "1.00000000000001" }
        elseif kind == "i" then return pick { "0", "1", "2.0", "9007199254740993", "1e2" }
        elseif kind == "lit" then return '"x"'
        elseif kind == "u" then return pick { '"ab"', "3" }
        elseif kind == "pat" then return '"12"'
        elseif kind == "tags" then
          local items = {}
          for _ = 1, rnd(3) do
            items[#items + 1] = ws() .. str_text(pick { "a", "", "\u{e9}\u{1F600}z" }) .. ws()
          end
          return "[" .. table.concat(items, ",") .. "]"
        end
      end
      if kind == "title" then return str_text(rstring())
      elseif kind == "kind" then return str_text(pick { "a", "bb", "\u{e9}t\u{e9}", "b", "" })
      elseif kind == "n" or kind == "i" or kind == "x" then
        return rnd(6) == 1 and "null" or rnumber()
      elseif kind == "tags" then
        local items = {}
        for _ = 1, rnd(5) - 1 do items[#items + 1] = ws() .. str_text(rstring()) .. ws() end
        return "[" .. table.concat(items, ",") .. "]"
      elseif kind == "flag" then return pick { "true", "false" }
      elseif kind == "nested" then
        local parts = { '"x":' .. rnumber() }
        if rnd(2) == 1 then
          local rows = {}
          for _ = 1, rnd(3) - 1 do
            local row = {}
            for _ = 1, rnd(3) - 1 do row[#row + 1] = pick { "1", "null", "2.0", "2.5", '"1"' } end
            rows[#rows + 1] = "[" .. table.concat(row, ",") .. "]"
          end
          parts[#parts + 1] = '"deep":[' .. table.concat(rows, ",") .. "]"
        end
        if rnd(6) == 1 then parts[#parts + 1] = '"y":1' end
        return "{" .. table.concat(parts, ",") .. "}"
      elseif kind == "loose" then
        return "{" .. (rnd(2) == 1 and '"k":' .. str_text(rstring()) or '"z":[1]') .. "}"
      elseif kind == "lit" then return pick { '"x"', '"y"' }
      elseif kind == "u" then return pick { '"ab"', '"a"', "3", "true" }
      elseif kind == "pat" then return pick { '"12"', '"1a"' }
      end
      return gen_any(depth)
    end

    function gen_any(depth)
      local r = rnd(depth > 2 and 5 or 7)
      if r == 1 then return "null"
      elseif r == 2 then return pick { "true", "false" }
      elseif r == 3 then return rnumber()
      elseif r <= 5 then return str_text(rstring())
      elseif r == 6 then
        local items = {}
        for _ = 1, rnd(3) - 1 do items[#items + 1] = gen_any(depth + 1) end
        return "[" .. table.concat(items, ",") .. "]"
      end
      local items = {}
      for _ = 1, rnd(3) - 1 do items[#items + 1] = str_text(rstring()) .. ":" .. gen_any(depth + 1) end
      return "{" .. table.concat(items, ",") .. "}"
    end

    local KEYS = { "title", "kind", "n", "i", "tags", "flag", "nested", "loose", "any", "lit", "u", "pat" }

    local function body()
      good = rnd(2) == 1
      local members = {}
      for _, k in ipairs(KEYS) do
        local p = (k == "title" or k == "n") and 12 or 3
        if rnd(p) > 1 then
          local key = rnd(12) == 1 and str_text(k) or ('"' .. k .. '"')
          members[#members + 1] = ws() .. key .. ws() .. ":" .. ws() .. gen_for(k, 1) .. ws()
        end
      end
      if rnd(good and 40 or 10) == 1 then members[#members + 1] = '"extra":1' end
      if rnd(10) == 1 and #members > 0 then members[#members + 1] = pick(members) end -- a repeat
      for i = #members, 2, -1 do -- any order
        local j = rnd(i)
        members[i], members[j] = members[j], members[i]
      end
      local text = ws() .. "{" .. table.concat(members, ",") .. "}" .. ws()
      local r = good and 0 or rnd(20)
      if r == 1 then -- cut short
        text = text:sub(1, rnd(#text))
      elseif r == 2 then -- a byte changed
        local at = rnd(#text)
        text = text:sub(1, at - 1) .. pick { "\255", ",", "}", "\0", "\\", "x" } .. text:sub(at + 1)
      end
      return text
    end

    it("answers as the plain path does", function()
      rng_state = 20261130
      local statuses = {}
      for _ = 1, 4000 do
        local res = same_as_reference(body())
        statuses[res.status] = (statuses[res.status] or 0) + 1
      end
      -- the bodies cover every kind of answer, valid ones too
      assert.is_true((statuses[200] or 0) > 300, "200: " .. tostring(statuses[200]))
      assert.is_true((statuses[422] or 0) > 300, "422: " .. tostring(statuses[422]))
      assert.is_true((statuses[400] or 0) > 30, "400: " .. tostring(statuses[400]))
    end)
  end)
end)

-- Keys and enum values are matched by their bytes, a word at a time when short: every length
-- from 1 to 20, with near misses (a byte changed first, in the middle, last; one byte more or
-- fewer), each body answered as the plain path answers it.
describe("an action's input keys and enum values matched at every length", function()
  local names, values, props = {}, {}, {}
  for len = 1, 20 do
    names[len] = string.rep("k", len - 1) .. string.char(96 + len)
    values[len] = string.rep("v", len - 1) .. string.char(64 + len)
  end
  for _, k in ipairs(names) do props[k] = s.optional(s.enum(values)) end
  local Keys = s.object(props)
  local kb = clank.createAgentBridge({ clank.defineAction {
    name = "keys", description = "Answers with the fingerprint of its input.",
    input = Keys, output = s.object { fp = s.string() }, sideEffects = "none",
    handler = function(input) return { fp = fingerprint(input) } end,
  } })

  local function answer(body)
    return kb:handle({
      method = "POST", url = "/actions/keys", path = "/actions/keys", query = {}, scheme = "http",
      headers = { host = HOST, ["content-type"] = "application/json",
                  ["content-length"] = tostring(#body) },
      body = body,
    })
  end

  local function expected(body)
    return answer_for(Keys, assert(json.decode(body)))
  end

  local function near(w)
    local out = { w, w .. "x" }
    if #w > 1 then out[#out + 1] = w:sub(1, -2) end
    for _, at in ipairs { 1, (#w + 1) // 2, #w } do out[#out + 1] = w:sub(1, at - 1) .. "Z" .. w:sub(at + 1) end
    return out
  end

  it("answers as the plain path does", function()
    local statuses = {}
    for i, k in ipairs(names) do
      for _, key in ipairs(near(k)) do
        for _, value in ipairs(near(values[(i * 7) % 20 + 1])) do
          local body = '{"' .. key .. '":"' .. value .. '","' .. names[21 - i] .. '":"' .. values[i] .. '"}'
          local res = answer(body)
          local status, want = expected(body)
          assert.are.equal(status, res.status, body)
          assert.are.equal(want, res.body, body)
          statuses[status] = (statuses[status] or 0) + 1
        end
      end
    end
    assert.is_true(statuses[200] >= 20) -- the exact key with the exact value, at each length
    assert.is_true(statuses[422] > 500)
  end)
end)
