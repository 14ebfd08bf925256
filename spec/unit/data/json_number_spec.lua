-- clank.json.formatNumber: integers exactly, floats as ECMAScript's
-- Number.prototype.toString (ECMA-262 Number::toString). Expected strings are
-- written from the standard: shortest round-trip digits, decimal notation for
-- 1e-7 < |x| < 1e21, "e+"/"e-" exponents otherwise.
local json = require "clank.json"

describe("clank.json.formatNumber", function()
  local cases = {
    -- floats: { value, ECMAScript string }
    { 0.1, "0.1" },
    { 0.1 + 0.2, "0.30000000000000004" },
    { 1 / 3, "0.3333333333333333" },
    { 1.5, "1.5" },
    { 0.3, "0.3" },
    { 2.675, "2.675" }, -- the double is 2.67499999999999982236431605997495353221893310546875
    { 1.005, "1.005" },
    { 9.95, "9.95" },
    { 123.456, "123.456" },
    { 0.001, "0.001" },
    { 0.000123, "0.000123" },
    { 1.1e-6, "0.0000011" },
    { 112589990684262.3, "112589990684262.3" }, -- x 10 just below 2^50
    { 1125899906842623.5, "1125899906842623.5" }, -- x 10 above it
    { 4503599627370495.5, "4503599627370495.5" }, -- 2^52 - 0.5: ulp 0.5
    { -1.5, "-1.5" },
    { 4.35, "4.35" },
    { 12345.678, "12345.678" },
    { 3.0, "3" },
    { -3.0, "-3" },
    { 100.0, "100" },
    { 0.0, "0" },
    { -0.0, "0" },
    { 1.0, "1" },
    { 10.0, "10" },
    { 99.0, "99" },
    { 1234567890.0, "1234567890" },
    { 1e15, "1000000000000000" },
    { 2.0 ^ 53 - 1, "9007199254740991" },
    { -(2.0 ^ 53 - 1), "-9007199254740991" },
    { 2.0 ^ 53, "9007199254740992" },
    { -(2.0 ^ 53), "-9007199254740992" },
    { 2.0 ^ 53 + 2, "9007199254740994" },
    { 2.0 ^ 60, "1152921504606847000" },
    { 2.0 ^ 63, "9223372036854776000" },
    { 1e20, "100000000000000000000" },
    { 123456789012345680000.0, "123456789012345680000" },
    { 1e21, "1e+21" },
    { -1e21, "-1e+21" },
    { 1.5e300, "1.5e+300" },
    { 1e308, "1e+308" },
    { 1.7976931348623157e308, "1.7976931348623157e+308" },
    { 0.000001, "0.000001" },
    { 0.0000015, "0.0000015" },
    { 1e-7, "1e-7" },
    { -1e-7, "-1e-7" },
    { 1.5e-7, "1.5e-7" },
    { 123e-20, "1.23e-18" },
    { 2.2250738585072014e-308, "2.2250738585072014e-308" },
    { 5e-324, "5e-324" },
    { 1.5e-323, "1.5e-323" },
    -- a power of two whose shortest digits lie on the wide side of its
    -- rounding interval (2^-1017; "%.17g" gives 7.1202363472230444e-307)
    { 2.0 ^ -1017, "7.120236347223045e-307" },
    { 0 / 0, "NaN" },
    { math.huge, "Infinity" },
    { -math.huge, "-Infinity" },
  }
  for _, c in ipairs(cases) do
    it(("prints the float %.17g as %s"):format(c[1], c[2]), function()
      assert.equal("float", math.type(c[1]))
      assert.equal(c[2], json.formatNumber(c[1]))
    end)
  end

  local integers = {
    { 0, "0" },
    { -1, "-1" },
    { 9007199254740993, "9007199254740993" },
    { math.maxinteger, "9223372036854775807" },
    { math.mininteger, "-9223372036854775808" },
  }
  for _, c in ipairs(integers) do
    it("prints the integer " .. c[2] .. " with all its digits", function()
      assert.equal("integer", math.type(c[1]))
      assert.equal(c[2], json.formatNumber(c[1]))
    end)
  end

  it("reads back every printed float as the same double", function()
    local seed = 12345
    local function rnd() -- a small LCG, so the run is reproducible
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed
    end
    for _ = 1, 2000 do
      local x = (rnd() / 2147483648 - 0.5) * 10.0 ^ (rnd() % 600 - 300)
      local s = json.formatNumber(x)
      assert.is_true(x == tonumber(s) + 0.0, s) -- integral text reads as an integer
    end
  end)

  -- A decimal of at most 15 significant digits reads as a double that no other
  -- decimal of 15 digits or fewer reads as (DBL_DIG), so its shortest digits are
  -- its own: the expected text is the decimal written, without trailing zeros.
  it("prints a decimal of up to 15 digits as written", function()
    local seed = 777
    local function rnd(n)
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed % n
    end
    for _ = 1, 3000 do
      local m = rnd(1000000) * 1000000000 + rnd(1000000000) -- up to 15 digits
      m = m // 10 ^ rnd(14) // 1
      local places = 1 + rnd(15)
      local digits = ("%0" .. (places + 1) .. "d"):format(m)
      local whole, fraction = digits:sub(1, -places - 1), digits:sub(-places)
      fraction = fraction:gsub("0+$", "")
      local x = tonumber(whole .. "." .. digits:sub(-places))
      if fraction ~= "" and x >= 1e-6 then
        local written = whole .. "." .. fraction
        if rnd(2) == 1 then
          x, written = -x, "-" .. written
        end
        assert.equal(written, json.formatNumber(x))
      end
    end
  end)

  -- Against the C library's printf, an independent oracle: the fewest digits
  -- of "%.*e" that read back, for doubles of every kind (any bit pattern,
  -- decimals of many places, binary fractions). ECMAScript's digits are those
  -- (unique at that count) but where the interval is lopsided (a power of two,
  -- the case above), where printf's nearest may need one more.
  it("prints the same shortest digits as printf finds", function()
    local function digits_of(s) -- "d.ddde±x" or ECMAScript's text -> "digits@exponent"
      s = s:gsub("^%-", "")
      local mantissa, exponent = s:match("^([%d.]+)e([+-]%d+)$")
      mantissa, exponent = mantissa or s, tonumber(exponent or 0)
      local whole, fraction = mantissa:match("^(%d*)%.?(%d*)$")
      local all = whole .. fraction
      local leading_zeros = #all - #all:gsub("^0+", "")
      return all:gsub("^0+", ""):gsub("0+$", "") .. "@" .. (exponent + #whole - leading_zeros)
    end
    local function printf_shortest(x)
      for p = 1, 17 do
        local s = ("%." .. (p - 1) .. "e"):format(x)
        if tonumber(s) == x then
          return digits_of(s)
        end
      end
    end
    local seed = 4242
    local function rnd()
      seed = seed * 6364136223846793005 + 1442695040888963407 -- wraps (LCG mod 2^64)
      return seed
    end
    local checked = 0
    for i = 1, 20000 do
      local r = rnd()
      local x
      if i % 3 == 0 then
        x = string.unpack("d", string.pack("i8", r))
      elseif i % 3 == 1 then
        x = (r >> 11) / 10.0 ^ ((r & 31) % 23)
      else
        x = (r >> 11) * 2.0 ^ -(r & 127)
      end
      if x == x and x ~= 0 and x ~= math.huge and x ~= -math.huge and x ~= math.floor(x) then
        checked = checked + 1
        assert.equal(printf_shortest(x), digits_of(json.formatNumber(x)), ("%.17g"):format(x))
      end
    end
    assert.is_true(checked > 10000)
  end)

  it("prints integral floats below 2^53 with the digits of the integer", function()
    local seed = 54321
    local function rnd()
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed
    end
    for _ = 1, 2000 do
      local x = math.floor((rnd() / 2147483648) * 2.0 ^ (rnd() % 54)) + 0.0
      if rnd() % 2 == 1 then x = -x end
      if x == 0 then x = 0.0 end
      assert.equal(("%d"):format(x), json.formatNumber(x))
    end
  end)

  it("rejects a non-number argument", function()
    assert.has_error(function() json.formatNumber("1") end)
    assert.has_error(function() json.formatNumber() end)
  end)
end)
