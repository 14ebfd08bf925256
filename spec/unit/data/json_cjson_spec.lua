-- clank.json against lua-cjson (Debian's `cjson`) as a test oracle: for
-- documents both accept, the decoded values must be equal up to number
-- subtype (numbers compare with ==), with cjson.null standing for clank.null;
-- cjson cannot tell [] from {}, so array marks are not compared. Our encoder's
-- output must read back through cjson as the same value.
local json = require "clank.json"
local has_cjson, cjson = pcall(require, "cjson")

local function same(a, b, where)
  where = where or "value"
  if (a == json.null or a == (cjson and cjson.null)) and (b == json.null or b == cjson.null) then
    return nil
  end
  if type(a) ~= type(b) then return ("%s: %s vs %s"):format(where, type(a), type(b)) end
  if type(a) == "number" then
    -- cjson reads every number as a double: compare integers as doubles too
    if math.type(a) ~= math.type(b) then a, b = a + 0.0, b + 0.0 end
    if a ~= b then return ("%s: %.17g vs %.17g"):format(where, a, b) end
    return nil
  end
  if type(a) ~= "table" then
    if a ~= b then return ("%s: %q vs %q"):format(where, tostring(a), tostring(b)) end
    return nil
  end
  for k, v in pairs(a) do
    local d = same(v, b[k], where .. "." .. tostring(k))
    if d then return d end
  end
  for k in pairs(b) do
    if a[k] == nil then return where .. ": key only on the right: " .. tostring(k) end
  end
  return nil
end

local documents = {
  "0", "-0", "1", "-1", "42", "3.14159", "-2.5e-3", "1E10", "6.02e+23", "1e-300",
  "123456789", "9007199254740993", "9223372036854775807", "-9223372036854775808",
  "0.1", "0.30000000000000004", "1.7976931348623157e308", "5e-324",
  "true", "false", "null",
  '""', '"hello"', '"with \\"quotes\\""', '"back\\\\slash"', '"\\/"', '"\\b\\f\\n\\r\\t"',
  '"\\u0041\\u00e9\\u20ac"', '"\\ud83d\\ude00"', '"\\uD834\\uDD1E"', '"h\xc3\xa9llo w\xc3\xb6rld"',
  '"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"', '"\xf0\x9f\x8e\x89"', '"\\u0000"', '"\x7f"',
  "[]", "{}", "[[]]", "[{}]", '{"a":[]}', '{"a":{}}',
  "[1,2,3]", '["a","b","c"]', "[true,false,null]", "[null,null]", "[[1,2],[3,[4,[5]]]]",
  '{"a":1}', '{"a":1,"b":2,"c":3}', '{"z":1,"a":2,"m":3}', '{"a":1,"a":2}',
  '{"nested":{"deeper":{"deepest":[1,{"x":null}]}}}',
  '{"":""}', '{"key with spaces":"value with spaces"}', '{"\\u00e9":"\\u00e9"}',
  ' \t\r\n{ "a" : [ 1 , 2 ] , "b" : { } } \n',
  '{"id":"123e4567-e89b-12d3-a456-426614174000","title":"Buy milk","done":false,'
    .. '"tags":["home","urgent"],"due":null,"priority":2,"score":0.75}',
  '{"ok":true,"output":{"items":[{"id":1,"name":"one"},{"id":2,"name":"two"}],"total":2}}',
  '{"ok":false,"error":{"code":"INVALID_INPUT","message":"title: Expected a string.",'
    .. '"details":[{"path":["title"],"message":"Expected a string.","expected":"string"}]}}',
  '[-1e-7,1e21,1e-7,123e-20,-0.0,0.5,100,1e2]',
  "[" .. ("[1,"):rep(30) .. "1" .. ("]"):rep(30) .. "]",
}

-- Random documents from a reproducible generator, written by this spec's own
-- little serializer (so neither decoder under test wrote them).
local function rnd(n) return math.random(0, n - 1) end

local function gen_string()
  local parts = {}
  for i = 1, rnd(12) do
    local r = rnd(10)
    if r < 5 then
      parts[i] = string.char(32 + rnd(95)):gsub('[\\"]', "\\%0")
    elseif r == 5 then
      parts[i] = ({ "\\n", "\\t", "\\\\", '\\"', "\\/", "\\u0001", "\\u001F" })[rnd(7) + 1]
    elseif r == 6 then
      parts[i] = ("\\u%04x"):format(0x20 + rnd(0xD7FF - 0x20))
    elseif r == 7 then
      local c = 0x10000 + rnd(0x100000) - 0x10000
      parts[i] = ("\\u%04x\\u%04x"):format(0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF))
    else
      parts[i] = utf8.char(0x80 + rnd(0x10FFFF - 0x80 - 0x800))
        :gsub("^\xed[\xa0-\xbf].", "\xe2\x82\xac") -- no UTF-8-encoded surrogates
    end
  end
  return '"' .. table.concat(parts) .. '"'
end

local function gen_number()
  local r = rnd(4)
  if r == 0 then return tostring(rnd(2000000) - 1000000) end
  if r == 1 then return ("%d.%d"):format(rnd(1000) - 500, rnd(100000)) end
  if r == 2 then return ("%de%d"):format(rnd(1000), rnd(600) - 300) end
  return ("%.17g"):format((rnd(2147483647) - 1073741823) / 1073741823 * 10.0 ^ (rnd(40) - 20))
end

local function gen(depth)
  local r = rnd(depth > 3 and 5 or 8)
  if r == 0 then return ({ "true", "false", "null" })[rnd(3) + 1] end
  if r == 1 or r == 2 then return gen_number() end
  if r == 3 or r == 4 then return gen_string() end
  local parts = {}
  if r == 5 or r == 6 then
    for i = 1, rnd(6) do parts[i] = gen(depth + 1) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  for i = 1, rnd(6) do parts[i] = gen_string() .. ":" .. gen(depth + 1) end
  return "{" .. table.concat(parts, ",") .. "}"
end

describe("clank.json", function()
  describe("against lua-cjson", function()
    if not has_cjson then
      it("needs lua-cjson", function() pending("lua-cjson (cjson) is not installed") end)
      return
    end

    it("has at least 50 hand-written documents", function()
      assert.is_true(#documents >= 50)
    end)

    local function check(doc)
      local ok, want = pcall(cjson.decode, doc)
      assert.is_true(ok, "cjson rejects " .. doc)
      local got, err = json.decode(doc)
      assert.is_nil(err, err)
      local d = same(got, want)
      assert.is_nil(d, d)
      -- our canonical output means the same to cjson
      local back = cjson.decode(json.encode(got))
      d = same(back, want)
      assert.is_nil(d, d)
    end

    for _, doc in ipairs(documents) do
      it("decodes " .. doc:sub(1, 40):gsub("[%c\128-\255]", "?") .. " as cjson does", function()
        check(doc)
      end)
    end

    it("decodes 500 random documents as cjson does", function()
      math.randomseed(20260101) -- reproducible
      for _ = 1, 500 do check(gen(0)) end
    end)

    it("rejects what cjson accepts but RFC 8259 does not", function()
      for _, doc in ipairs { "0x10", "[NaN]", "[Infinity]", "[-inf]", "[01]", "[1e400]" } do
        assert.is_true((pcall(cjson.decode, doc)), "cjson accepts " .. doc)
        assert.is_nil((json.decode(doc)))
      end
    end)
  end)
end)
