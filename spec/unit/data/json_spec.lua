-- clank.json: strict RFC 8259 decoding and canonical encoding (SPEC §5).
-- Every expected value and message below is written by hand from SPEC,
-- RFC 8259 and ECMA-262 (JSON.stringify), not captured from the module.
local json = require "clank.json"
local null = json.null

-- The first difference between two decoded values, or nil: numbers must have
-- the same subtype, tables the same array mark, keys and values.
local function diff(got, want, where)
  where = where or "value"
  if type(got) ~= type(want) then
    return ("%s: %s expected, got %s"):format(where, type(want), type(got))
  end
  if type(want) == "number" then
    if math.type(got) ~= math.type(want) then
      return ("%s: %s expected, got %s"):format(where, math.type(want), math.type(got))
    end
    if got ~= want and (got == got or want == want) then
      return ("%s: %.17g expected, got %.17g"):format(where, want, got)
    end
    if got == 0 and 1 / got ~= 1 / want then return where .. ": sign of zero differs" end
    return nil
  end
  if type(want) ~= "table" then
    if got ~= want then
      return ("%s: %q expected, got %q"):format(where, tostring(want), tostring(got))
    end
    return nil
  end
  if json.isArray(got) ~= json.isArray(want) then
    return where .. (json.isArray(want) and ": array expected" or ": object expected")
  end
  for k, v in pairs(want) do
    local d = diff(got[k], v, where .. "." .. tostring(k))
    if d then return d end
  end
  for k in pairs(got) do
    if want[k] == nil then return where .. ": unexpected key " .. tostring(k) end
  end
  return nil
end

local A = json.array

local function nest(n, inner)
  return ("["):rep(n) .. (inner or "") .. ("]"):rep(n)
end

describe("clank.json", function()
  describe("decode", function()
    local accepts = {
      -- { JSON text, expected Lua value }
      { "0", 0 },
      { "-0", 0 },
      { "1", 1 },
      { "-1", -1 },
      { "123", 123 },
      { "1.5", 1.5 },
      { "-0.5", -0.5 },
      { "-0.0", -0.0 },
      { "1e2", 100.0 },
      { "1E2", 100.0 },
      { "1e+2", 100.0 },
      { "1e-2", 0.01 },
      { "10.0e-1", 1.0 },
      { "0e0", 0.0 },
      { "1e-400", 0.0 },
      { "9223372036854775807", math.maxinteger },
      { "-9223372036854775808", math.mininteger },
      { "9223372036854775808", 2.0 ^ 63 },
      { "-9223372036854775809", -(2.0 ^ 63) },
      { "18446744073709551616", 2.0 ^ 64 },
      { "1" .. ("0"):rep(300), 1e300 },
      { "0." .. ("0"):rep(299) .. "1", 1e-300 },
      { "1." .. ("0"):rep(1000) .. "e1", 10.0 },
      { "1e-99999999999999999999", 0.0 },
      { "true", true },
      { "false", false },
      { "null", null },
      { '""', "" },
      { '"abc"', "abc" },
      { [["\"\\\/\b\f\n\r\t"]], "\"\\/\b\f\n\r\t" },
      { [["\u0041"]], "A" },
      { [["\u00e9"]], "\xc3\xa9" },
      { [["\u20AC"]], "\xe2\x82\xac" },
      { [["\u0000"]], "\0" },
      { [["\uFFFF"]], "\xef\xbf\xbf" },
      { [["\ud83d\ude00"]], "\xf0\x9f\x98\x80" },
      { [["\uD834\uDD1E"]], "\xf0\x9d\x84\x9e" },
      { [["\uDBFF\uDFFF"]], "\xf4\x8f\xbf\xbf" },
      { [["a\u0041b\\c"]], "aAb\\c" },
      { '"h\xc3\xa9"', "h\xc3\xa9" },
      { '"\xf0\x9f\x98\x80"', "\xf0\x9f\x98\x80" },
      { '"\xf4\x8f\xbf\xbf"', "\xf4\x8f\xbf\xbf" },
      { '"\xed\x9f\xbf"', "\xed\x9f\xbf" }, -- U+D7FF, just below the surrogates
      { '"\xee\x80\x80"', "\xee\x80\x80" }, -- U+E000, just above them
      { '"\x7f"', "\x7f" },                 -- DEL is not a control character in JSON
      { "[]", A {} },
      { "{}", {} },
      { "[null]", A { null } },
      { "[1,[2,[]],{}]", A { 1, A { 2, A {} }, {} } },
      { '{"a":1,"b":[true,false]}', { a = 1, b = A { true, false } } },
      { '{"a":1,"a":2}', { a = 2 } },
      { '{"":1}', { [""] = 1 } },
      { '{"a\\u0000b":1}', { ["a\0b"] = 1 } },
      { ' \t\r\n[ 1 , 2 ]\n ', A { 1, 2 } },
      { ' { "a" : { } } ', { a = {} } },
    }
    for _, c in ipairs(accepts) do
      it("accepts " .. c[1]:sub(1, 40):gsub("[%c\128-\255]", function(ch)
        return ("\\x%02x"):format(ch:byte())
      end), function()
        local v, err = json.decode(c[1])
        assert.is_nil(err)
        local d = diff(v, c[2])
        assert.is_nil(d, d)
      end)
    end

    it("accepts 64 levels of nesting", function()
      local v = assert(json.decode(nest(64)))
      for _ = 1, 63 do v = v[1] end
      assert.is_nil(diff(v, A {}))
      assert.truthy(json.decode(('{"a":'):rep(64) .. "1" .. ("}"):rep(64)))
    end)

    local rejects = {
      -- { JSON text, exact message }
      { "", "unexpected end of input at byte 1" },
      { "   ", "unexpected end of input at byte 4" },
      { "01", "leading zero in number at byte 2" },
      { "-01", "leading zero in number at byte 3" },
      { "[00]", "leading zero in number at byte 3" },
      { "1.", "digit expected after the decimal point at byte 3" },
      { "1.e5", "digit expected after the decimal point at byte 3" },
      { ".5", "unexpected character at byte 1" },
      { "-", "unexpected end of input at byte 2" },
      { "-a", "invalid number at byte 2" },
      { "1e", "digit expected in the exponent at byte 3" },
      { "1e+", "digit expected in the exponent at byte 4" },
      { "+1", "unexpected character at byte 1" },
      { "NaN", "unexpected character at byte 1" },
      { "Infinity", "unexpected character at byte 1" },
      { "-Infinity", "invalid number at byte 2" },
      { "1e400", "number out of range at byte 1" },
      { "[-1e400]", "number out of range at byte 2" },
      { "1" .. ("0"):rep(400), "number out of range at byte 1" },
      { "1e99999999999999999999", "number out of range at byte 1" },
      { "0x10", "unexpected character after the value at byte 2" },
      { "1.5e3.2", "unexpected character after the value at byte 6" },
      { "[1,]", "unexpected character at byte 4" },
      { '{"a":1,}', "unexpected character at byte 8" },
      { "[,1]", "unexpected character at byte 2" },
      { "[1 2]", "unexpected character at byte 4" },
      { "[1,2", "unexpected end of input at byte 5" },
      { "[", "unexpected end of input at byte 2" },
      { "{'a':1}", "unexpected character at byte 2" },
      { "'a'", "unexpected character at byte 1" },
      { '{"a" 1}', "unexpected character at byte 6" },
      { "{1:2}", "unexpected character at byte 2" },
      { '{"a":}', "unexpected character at byte 6" },
      { "tru", "unexpected end of input at byte 4" },
      { "trUe", "unexpected character at byte 3" },
      { "nul", "unexpected end of input at byte 4" },
      { "True", "unexpected character at byte 1" },
      { '"a\tb"', "control character in string at byte 3" },
      { '"a\nb"', "control character in string at byte 3" },
      { '"a\0b"', "control character in string at byte 3" },
      { '"abc', "unterminated string at byte 5" },
      { '"\\"', "unterminated string at byte 4" },
      { '"\\', "unterminated string at byte 3" },
      { [["\x41"]], "invalid escape at byte 2" },
      { [["\'"]], "invalid escape at byte 2" },
      { [["\u12G4"]], "invalid \\u escape at byte 2" },
      { [["\u00"]], "invalid \\u escape at byte 2" },
      { [["\ud800"]], "lone surrogate escape at byte 2" },
      { [["\uDBFF x"]], "lone surrogate escape at byte 2" },
      { [["\udc00"]], "lone surrogate escape at byte 2" },
      { [["\ud800\u0041"]], "lone surrogate escape at byte 2" },
      { [["\ud800\ud800"]], "lone surrogate escape at byte 2" },
      { [["ab\ude00\ud83d"]], "lone surrogate escape at byte 4" },
      { '"\xff"', "invalid UTF-8 at byte 2" },
      { '"a\x80"', "invalid UTF-8 at byte 3" },
      { '"\xc3"', "invalid UTF-8 at byte 2" },               -- truncated sequence
      { '"\xc0\xaf"', "invalid UTF-8 at byte 2" },           -- overlong "/"
      { '"\xe0\x80\xaf"', "invalid UTF-8 at byte 2" },       -- overlong, 3 bytes
      { '"\xf0\x80\x80\xaf"', "invalid UTF-8 at byte 2" },   -- overlong, 4 bytes
      { '"\xed\xa0\x80"', "invalid UTF-8 at byte 2" },       -- U+D800 in UTF-8
      { '"\xed\xa0\xbd\xed\xb8\x80"', "invalid UTF-8 at byte 2" }, -- CESU-8 pair
      { '"\xf4\x90\x80\x80"', "invalid UTF-8 at byte 2" },   -- U+110000
      { '"\xf8\x88\x80\x80\x80"', "invalid UTF-8 at byte 2" },
      { '"\xe2\x82"', "invalid UTF-8 at byte 2" },
      { "\xef\xbb\xbf1", "unexpected character at byte 1" }, -- a BOM is not whitespace
      { "\f1", "unexpected character at byte 1" },
      { "\v1", "unexpected character at byte 1" },
      { "\xc2\xa01", "unexpected character at byte 1" },     -- no-break space
      { "\0", "unexpected character at byte 1" },
      { "[1] x", "unexpected character after the value at byte 5" },
      { "1 2", "unexpected character after the value at byte 3" },
      { "{}{}", "unexpected character after the value at byte 3" },
      { "null\0", "unexpected character after the value at byte 5" },
      { nest(65), "nested too deeply at byte 65" },
      { ('{"a":'):rep(65) .. "1" .. ("}"):rep(65), "nested too deeply at byte 321" },
    }
    for _, c in ipairs(rejects) do
      it("rejects " .. c[1]:sub(1, 24):gsub("[%c\128-\255]", function(ch)
        return ("\\x%02x"):format(ch:byte())
      end) .. " with " .. c[2], function()
        local v, err = json.decode(c[1])
        assert.is_nil(v)
        assert.equal(c[2], err)
      end)
    end

    it("makes integers of integer literals and floats of the rest", function()
      assert.equal("integer", math.type(json.decode("42")))
      assert.equal("integer", math.type(json.decode("9223372036854775807")))
      assert.equal("integer", math.type(json.decode("-9223372036854775808")))
      assert.equal("float", math.type(json.decode("9223372036854775808")))
      assert.equal("float", math.type(json.decode("42.0")))
      assert.equal("float", math.type(json.decode("42e0")))
    end)

    it("keeps [] and {} apart", function()
      local v = json.decode('{"a":[],"b":{}}')
      assert.is_true(json.isArray(v.a))
      assert.is_false(json.isArray(v.b))
      assert.is_false(json.isArray(v))
    end)

    it("rejects a non-string argument by raising", function()
      assert.has_error(function() json.decode(1) end)
      assert.has_error(function() json.decode() end)
      assert.has_error(function() json.decode({}) end)
    end)

    it("does not stop at an embedded NUL in the input", function()
      local v, err = json.decode('"a"\0')
      assert.is_nil(v)
      assert.equal("unexpected character after the value at byte 4", err)
    end)

    it("never raises on malformed input, only answers nil and a message", function()
      local base = '{"a":[1,-2.5e3,true,false,null,"x\\u00e9\\ud83d\\ude00\\n"],"b":{"c":"\xc3\xa9"}}'
      assert.truthy(json.decode(base))
      math.randomseed(42) -- reproducible
      local rejected = 0
      for _ = 1, 5000 do
        local bytes = { base:byte(1, -1) }
        for _ = 1, math.random(1, 4) do
          local i = math.random(1, #bytes)
          local r = math.random(3)
          if r == 1 then bytes[i] = math.random(0, 255)
          elseif r == 2 then table.remove(bytes, i)
          else table.insert(bytes, i, math.random(0, 255)) end
        end
        local doc = string.char(table.unpack(bytes))
        local ok, v, err = pcall(json.decode, doc)
        assert.is_true(ok, v)
        if v == nil then
          rejected = rejected + 1
          assert.truthy(err:find(" at byte %d+$"), err)
        end
      end
      assert.is_true(rejected > 1000)
    end)

    it("decodes long strings and long documents", function()
      local s = ("x"):rep(100000)
      assert.equal(s, json.decode('"' .. s .. '"'))
      local esc = ("\\n"):rep(50000)
      assert.equal(("\n"):rep(50000), json.decode('"' .. esc .. '"'))
      local items = {}
      for i = 1, 10000 do items[i] = tostring(i) end
      local v = json.decode("[" .. table.concat(items, ",") .. "]")
      assert.equal(10000, #v)
      assert.equal(10000, v[10000])
    end)
  end)

  describe("encode", function()
    local cases = {
      -- { description, Lua value, canonical JSON }
      { "an integer", 1, "1" },
      { "the largest integer", math.maxinteger, "9223372036854775807" },
      { "the smallest integer", math.mininteger, "-9223372036854775808" },
      { "an integral float without .0", 1.0, "1" },
      { "negative zero as 0", -0.0, "0" },
      { "0.1", 0.1, "0.1" },
      { "2^53", 2.0 ^ 53, "9007199254740992" },
      { "1e21", 1e21, "1e+21" },
      { "1e-7", 1e-7, "1e-7" },
      { "5e-324", 5e-324, "5e-324" },
      { "true", true, "true" },
      { "false", false, "false" },
      { "clank.null", null, "null" },
      { "a string", "x", '"x"' },
      { "quotes, backslashes and short escapes", "\"\\\b\f\n\r\t", [["\"\\\b\f\n\r\t"]] },
      { "other control characters as lowercase \\u00XX", "\0\1\x1a\x1f", [["\u0000\u0001\u001a\u001f"]] },
      { "/ DEL and non-ASCII unescaped", "/\x7f\xc3\xa9\xf0\x9f\x98\x80", '"/\x7f\xc3\xa9\xf0\x9f\x98\x80"' },
      { "an empty table as {}", {}, "{}" },
      { "a marked empty table as []", A {}, "[]" },
      { "a sequence as an array", { 1, "a", true }, '[1,"a",true]' },
      { "a marked array", A { 1, 2 }, "[1,2]" },
      { "nested arrays", { { 1, 2 }, A {}, { {} } }, "[[1,2],[],[{}]]" },
      { "objects with sorted keys", { b = 1, a = 2, c = { z = 1, y = A {} } },
        '{"a":2,"b":1,"c":{"y":[],"z":1}}' },
      { "keys in byte order", { B = 1, a = 2, aa = 3, ["\xc3\xa9"] = 4, [""] = 5, ["a\0"] = 6 },
        '{"":5,"B":1,"a":2,"a\\u0000":6,"aa":3,"\xc3\xa9":4}' },
      { "escaped keys", { ['a"b'] = 1 }, '{"a\\"b":1}' },
      { "null inside containers", { a = null, b = A { null } }, '{"a":null,"b":[null]}' },
      { "long keys", { [("k"):rep(100) .. "2"] = 2, [("k"):rep(100) .. "1"] = 1 },
        '{"' .. ("k"):rep(100) .. '1":1,"' .. ("k"):rep(100) .. '2":2}' },
      -- up to 8 keys are sorted with their values kept aside, more through a list
      { "8 keys, each with its own value", { h = 8, g = 7, f = 6, e = 5, d = 4, c = 3, b = 2, a = { 1 } },
        '{"a":[1],"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8}' },
      { "9 keys, each with its own value",
        { i = "9", h = 8, g = 7, f = 6, e = 5, d = 4, c = 3, b = { x = 2 }, a = 1 },
        '{"a":1,"b":{"x":2},"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":"9"}' },
      { "objects of few and many keys nested in each other",
        { k = { b = 2, a = 1 }, j = 10, i = 9, h = 8, g = 7, f = 6, e = 5, d = 4, c = 3,
          b = { z = { y = 1, x = 2, w = 3, v = 4, u = 5, t = 6, s = 7, r = 8, q = 9 } }, a = 0 },
        '{"a":0,"b":{"z":{"q":9,"r":8,"s":7,"t":6,"u":5,"v":4,"w":3,"x":2,"y":1}},"c":3,"d":4,'
          .. '"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":{"a":1,"b":2}}' },
    }
    for _, c in ipairs(cases) do
      it("writes " .. c[1], function()
        assert.equal(c[3], json.encode(c[2]))
      end)
    end

    it("gives the same bytes whatever order the keys were set in", function()
      local a, b = {}, {}
      for i = 1, 200 do a["k" .. i] = i end
      for i = 200, 1, -1 do b["k" .. i] = i end
      assert.equal(json.encode(a), json.encode(b))
      assert.equal(json.encode(a), json.encode(a))
      assert.truthy(json.encode(a):find('^{"k1":1,"k10":10,"k100":100,"k101":101,'))
    end)

    it("writes 64 levels of nesting", function()
      local v = A {}
      for _ = 1, 63 do v = { v } end
      assert.equal(nest(64), json.encode(v))
    end)

    it("round-trips canonical documents byte for byte", function()
      for _, s in ipairs {
        "[]", "{}", '{"a":[],"b":{}}', "[0.1,9007199254740992,9223372036854775807,1e+21,1e-7,1e+308,5e-324]",
        '{"":null,"a":[true,false,null],"b":"\\u0000\\n\\"\\\\"}', "[[[[]]]]", '[-1,-0.5,1.5e-7]',
      } do
        assert.equal(s, json.encode(assert(json.decode(s))))
      end
    end)

    it("round-trips numbers to equal values", function()
      for _, x in ipairs { 0.1, 2.0 ^ 53, math.maxinteger, math.mininteger, -0.0, 1e21, 1e-7, 1e308,
        5e-324, 1 / 3, 2.0 ^ 63 } do
        assert.equal(x, json.decode(json.encode(x)))
      end
      assert.equal("integer", math.type(json.decode(json.encode(math.maxinteger))))
    end)

    local errors = {
      -- { what, thunk producing the value, exact message }
      { "a function", function() return print end, "clank.json.encode: cannot encode a function" },
      { "a function inside a list", function() return { tags = { "a", print } } end,
        "clank.json.encode: cannot encode a function at tags[2]" },
      { "a thread", function() return { co = coroutine.create(print) } end,
        "clank.json.encode: cannot encode a thread at co" },
      { "a userdata", function() return { f = io.stdout } end,
        "clank.json.encode: cannot encode a userdata at f" },
      { "nil", function() return nil end, "clank.json.encode: cannot encode nil" },
      { "NaN", function() return { n = 0 / 0 } end,
        "clank.json.encode: cannot encode a non-finite number (NaN) at n" },
      { "Infinity", function() return A { 1, math.huge } end,
        "clank.json.encode: cannot encode a non-finite number (Infinity) at [2]" },
      { "-Infinity", function() return -math.huge end,
        "clank.json.encode: cannot encode a non-finite number (-Infinity)" },
      { "a cycle", function() local t = {} t.self = t return t end,
        "clank.json.encode: cannot encode a table that contains itself at self" },
      { "a deeper cycle", function() local t = { a = { 1 } } t.a[2] = t return t end,
        "clank.json.encode: cannot encode a table that contains itself at a[2]" },
      { "mixed keys", function() return { 1, x = 2 } end,
        "clank.json.encode: cannot encode a table with both string and non-string keys" },
      { "mixed keys, more than 8 of them", function()
          return { 1, a = 1, b = 2, c = 3, d = 4, e = 5, f = 6, g = 7, h = 8, i = 9 }
        end,
        "clank.json.encode: cannot encode a table with both string and non-string keys" },
      { "a bad value after 8 keys", function()
          return { a = 1, b = 2, c = 3, d = 4, e = 5, f = 6, g = 7, h = 8, i = { print } }
        end,
        "clank.json.encode: cannot encode a function at i[1]" },
      { "a float key", function() return { [1.5] = 1 } end,
        "clank.json.encode: cannot encode a table with a number key" },
      { "a boolean key", function() return { o = { [true] = 1 } } end,
        "clank.json.encode: cannot encode a table with a boolean key at o" },
      { "a table key", function() return { [{}] = 1 } end,
        "clank.json.encode: cannot encode a table with a table key" },
      { "integer keys that are not 1..n", function() return { [2] = 1 } end,
        "clank.json.encode: cannot encode a table whose integer keys are not 1..n" },
      { "a sequence with a hole", function() return { 1, nil, 3 } end,
        "clank.json.encode: cannot encode a table whose integer keys are not 1..n" },
      { "a string key in a marked array", function() return A { 1, x = 2 } end,
        "clank.json.encode: cannot encode an array with a key that is not 1..n" },
      { "a hole in a marked array", function() local a = A {} a[1] = 1 a[3] = 3 return a end,
        "clank.json.encode: cannot encode a sparse array (missing items)" },
      { "a string that is not UTF-8", function() return { s = { "ok", "\xff" } } end,
        "clank.json.encode: cannot encode a string that is not valid UTF-8 at s[2]" },
      { "a surrogate in UTF-8", function() return "\xed\xa0\x80" end,
        "clank.json.encode: cannot encode a string that is not valid UTF-8" },
      { "an overlong UTF-8 string", function() return "\xc0\xaf" end,
        "clank.json.encode: cannot encode a string that is not valid UTF-8" },
      { "a key that is not UTF-8", function() return { a = { ["\xff"] = 1 } } end,
        'clank.json.encode: cannot encode a key that is not valid UTF-8 at a["\xff"]' },
      { "a path through odd keys", function() return { a = { ["b c"] = { x = { print } } } } end,
        'clank.json.encode: cannot encode a function at a["b c"].x[1]' },
      { "65 levels of nesting", function()
          local v = A {}
          for _ = 1, 64 do v = { v } end
          return v
        end,
        "clank.json.encode: cannot encode a value nested more than 64 deep at " .. ("[1]"):rep(64) },
    }
    for _, c in ipairs(errors) do
      it("rejects " .. c[1], function()
        local ok, err = pcall(json.encode, c[2]())
        assert.is_false(ok)
        assert.equal(c[3], err)
      end)
    end

    it("rejects a missing argument", function()
      assert.has_error(function() json.encode() end)
    end)

    it("stays usable after an error part-way through", function()
      for _ = 1, 100 do
        assert.is_false(pcall(json.encode, { a = ("x"):rep(1000), b = print }))
      end
      assert.equal('{"a":1}', json.encode({ a = 1 }))
    end)

    it("writes an empty table as [] where the schema says array", function()
      local ok, s = pcall(require, "clank.schema")
      if not (ok and type(s.array) == "function" and type(s.object) == "function") then
        pending("needs the clank.schema builders")
        return
      end
      local schema = s.object {
        tags = s.array(s.string()),
        meta = s.object({}, { strict = false }),
        maybe = s.optional(s.array(s.number())),
        null = s.nullable(s.array(s.number())),
        grid = s.array(s.array(s.number())),
      }
      local value = { tags = {}, meta = {}, maybe = {}, null = {}, grid = { {}, {} } }
      assert.equal('{"grid":[[],[]],"maybe":[],"meta":{},"null":[],"tags":[]}',
        json.encode(value, schema))
      assert.equal('{"grid":[{},{}],"maybe":{},"meta":{},"null":{},"tags":{}}', json.encode(value))
      -- guidance reaches through optional/nullable objects and array items
      local rows = s.optional(s.array(s.nullable(s.object { xs = s.array(s.number()), o = s.unknown() })))
      assert.equal('[{"o":{},"xs":[]},{"o":[],"xs":[1]}]',
        json.encode({ { xs = {}, o = {} }, { xs = { 1 }, o = json.array() } }, rows))
      -- a schema never turns a non-empty table or a marked array into something else
      assert.equal('{"a":1}', json.encode({ a = 1 }, s.array(s.number())))
      assert.equal("[]", json.encode(json.array(), s.object {}))
      assert.equal("{}", json.encode({}, s.union { s.array(s.number()), s.string() }))
    end)

    it("rejects a second argument that is not a schema", function()
      assert.has_error(function() json.encode({}, {}) end)
      assert.has_error(function() json.encode({}, "array") end)
      assert.equal("{}", json.encode({}, nil))
    end)
  end)

  describe("module", function()
    it("marks tables with array() and returns them", function()
      local t = {}
      assert.equal(t, json.array(t))
      assert.is_true(json.isArray(t))
      assert.is_true(json.isArray(json.array()))
      assert.is_false(json.isArray({}))
      assert.is_false(json.isArray("[]"))
      assert.is_false(json.isArray(nil))
      assert.has_error(function() json.array(1) end)
    end)

    it("exposes clank.null as json.null", function()
      assert.equal(null, json.decode("null"))
      assert.equal(require("clank").null, json.null)
      assert.truthy(json.null)
    end)
  end)
end)
