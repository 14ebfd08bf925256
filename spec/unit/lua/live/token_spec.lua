-- clank.live.token: a view-session token (SPEC §11) has exactly one spelling, the one the server
-- issues. A session is found by its token's string, so a second spelling of the same bytes would
-- mount a second session of the same page, and "a second live connection closes the first"
-- (4409) would not hold for it.
local token = require "clank.live.token"

local ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

-- Every other spelling of s's last character that keeps its 6-bit value's high bits: the ones
-- with some of the unused low bits set (4 of them after 1 byte, 2 after 2 bytes).
local function respellings(s)
  local spare = ({ [2] = 4, [3] = 2 })[#s % 4]
  if not spare then return {} end
  local last = ALPHABET:find(s:sub(-1), 1, true) - 1
  local out = {}
  for low = 1, (1 << spare) - 1 do
    local v = last + low
    out[#out + 1] = s:sub(1, -2) .. ALPHABET:sub(v + 1, v + 1)
  end
  return out
end

describe("clank.live.token", function()
  describe("decode64", function()
    -- written by hand from RFC 4648 §10's vectors, in the URL alphabet without padding
    for _, case in ipairs({
      { "", "" }, { "Zg", "f" }, { "Zm8", "fo" }, { "Zm9v", "foo" }, { "Zm9vYg", "foob" },
      { "Zm9vYmE", "fooba" }, { "Zm9vYmFy", "foobar" }, { "-_8", "\251\255" },
    }) do
      it("decodes " .. case[1] .. " and encodes it back", function()
        assert.are.equal(case[2], token.decode64(case[1]))
        assert.are.equal(case[1], token.encode64(case[2]))
      end)
    end

    for _, bad in ipairs({
      "Zh", "Zp", "Zv", "Z_", -- "f" with unused bits set
      "Zm9", "Zm-", "Zm_", -- "fo" with unused bits set
      "Zg==", "Zm8=", "Zm9v=", -- padding
      "+_8", "-/8", -- the other alphabet
      "Z", "Zm9vY", -- a length no encoding has
      " Zg", "Zg\n", "Z.g", -- anything else
    }) do
      it("refuses " .. string.format("%q", bad), function()
        assert.is_nil(token.decode64(bad))
      end)
    end

    it("refuses every other spelling of bytes whose encoding has unused bits", function()
      for n = 1, 5 do
        local s = token.encode64(string.rep("\0", n - 1) .. "\255")
        local others = respellings(s)
        assert.are.equal(({ [1] = 15, [2] = 3, [3] = 0, [4] = 15, [5] = 3 })[n], #others)
        for _, other in ipairs(others) do
          assert.is_nil(token.decode64(other), other)
        end
      end
    end)
  end)

  describe("verify", function()
    local secret, now = "spec-secret", 1700000000

    -- A token whose last character has unused bits: its payload's length decides, so the
    -- props are padded until one has.
    local function token_with_spare_bits()
      for n = 0, 2 do
        local props = { pad = string.rep("x", n) }
        local id = token.sign(secret, "page", props, nil, now)
        if #id % 4 ~= 0 then return id, props end
      end
      error("no token of another length")
    end

    it("verifies the token as issued", function()
      local id, props = token_with_spare_bits()
      assert.are.same({ view = "page", props = props, time = now }, token.verify(secret, id, nil, now))
    end)

    it("finds any other spelling of the same bytes malformed", function()
      local id = token_with_spare_bits()
      local others = respellings(id)
      assert.is_true(#others >= 3)
      for _, other in ipairs(others) do
        assert.are.same({ nil, "malformed" }, { token.verify(secret, other, nil, now) })
      end
      for _, other in ipairs({ id .. "=", id .. "==", (id:gsub("-", "+"):gsub("_", "/")) }) do
        if other ~= id then
          assert.are.same({ nil, "malformed" }, { token.verify(secret, other, nil, now) })
        end
      end
    end)
  end)
end)
