-- clank.cookies: sign/verify (SPEC §15 "Bodies"), HMAC-SHA256 under CLANK_SECRET.
local cookies = require "clank.cookies"
local core = require "clank.core"
local token = require "clank.live.token"

describe("clank.cookies", function()
  it("is exported from require 'clank'", function()
    assert.are.equal(cookies, require("clank").cookies)
  end)

  for _, value in ipairs({ "user:42", "", "a\0b;c=d \"é\"", string.rep("x", 3000) }) do
    it("round-trips " .. string.format("%q", value:sub(1, 20)), function()
      local signed = cookies.sign(value)
      assert.is_nil(signed:find('[%c%s",;\\\128-\255]'), "signed values are cookie-octets")
      assert.are.equal(value, cookies.verify(signed))
    end)
  end

  it("writes base64url(value) . base64url(HMAC-SHA256(secret, context .. value))", function()
    local signed = cookies.sign("hello")
    local b64, mac = signed:match("^([^.]*)%.([^.]*)$")
    assert.are.equal("aGVsbG8", b64) -- base64url("hello") without padding, by hand
    assert.are.equal(43, #mac) -- 32 bytes
  end)

  it("returns nil for a tampered value or mac", function()
    local signed = cookies.sign("user:42")
    local b64, mac = signed:match("^([^.]*)%.([^.]*)$")
    local other = token.encode64("user:43")
    assert.is_nil(cookies.verify(other .. "." .. mac))
    local flipped = mac:sub(1, 1) == "A" and "B" .. mac:sub(2) or "A" .. mac:sub(2)
    assert.is_nil(cookies.verify(b64 .. "." .. flipped))
    assert.is_nil(cookies.verify(b64 .. "." .. mac:sub(1, -2)))
    assert.is_nil(cookies.verify(signed .. "A"))
    assert.is_nil(cookies.verify(b64))
  end)

  it("returns nil for a value signed under another secret", function()
    local foreign = token.encode64("user:42") .. "."
      .. token.encode64(core.hmacSHA256("another secret", "clank.cookie\0user:42"))
    assert.is_nil(cookies.verify(foreign))
  end)

  it("returns nil for non-canonical base64url spellings and junk", function()
    for _, junk in ipairs({ "", ".", "..", "a.b.c", "!!.!!", "aGVsbG8=.x" }) do
      assert.is_nil(cookies.verify(junk))
    end
    -- "hello" (7 characters) and its 32-byte mac (43) both end in a character with 2 unused bits
    local signed = cookies.sign("hello")
    local b64, mac = signed:match("^([^.]*)%.([^.]*)$")
    assert.are.equal("aGVsbG8", b64)
    for _, other in ipairs({ "aGVsbG9", "aGVsbG-", "aGVsbG_", "aGVsbG8=" }) do
      assert.is_nil(cookies.verify(other .. "." .. mac), other)
    end
    local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    local last = alphabet:find(mac:sub(-1), 1, true) - 1
    assert.are.equal(0, last % 4) -- its unused bits are zero as signed
    for low = 1, 3 do
      local respelled = mac:sub(1, -2) .. alphabet:sub(last + low + 1, last + low + 1)
      assert.is_nil(cookies.verify(b64 .. "." .. respelled), respelled)
    end
    assert.is_nil(cookies.verify(nil))
    assert.is_nil(cookies.verify(42))
  end)

  it("raises at the caller for a value that is not a string", function()
    assert.has_error(function() cookies.sign(42) end,
      "clank.cookies.sign: value must be a string, got number")
  end)
end)
