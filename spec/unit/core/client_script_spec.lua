-- The browser client embedded into the binary (SPEC §11): clank.core.clientScript().
local core = require "clank.core"

local function hex(bytes)
  return (bytes:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

describe("clank.core.clientScript", function()
  local path, body = core.clientScript()

  it("names a content-hashed URL under /__clank/", function()
    assert.is_string(path)
    assert.is_truthy(path:match("^/__clank/client%.%x+%.js$"), path)
    assert.are.equal(16, #path:match("^/__clank/client%.(%x+)%.js$"))
  end)

  it("hashes the bytes it serves: the URL's 16 hex digits start their SHA-256", function()
    local hash = path:match("^/__clank/client%.(%x+)%.js$")
    assert.are.equal(hash, hex(core.sha256(body)):sub(1, 16))
  end)

  -- 32 KiB, not 24 since diffs on the wire: applying them needs room that a minifier would
  -- otherwise have to make, and a build step that needs one more npm package.
  it("serves under 32 KiB, morphdom included", function()
    assert.is_true(#body > 0)
    assert.is_true(#body < 32 * 1024, ("the client is %d bytes"):format(#body))
    assert.is_truthy(body:find("morphdom", 1, true))
    assert.is_truthy(body:find("createAgentSurface", 1, true))
  end)

  it("runs under script-src 'self': no eval, no new Function, no inline handlers", function()
    assert.is_nil(body:find("eval(", 1, true))
    assert.is_nil(body:find("new Function", 1, true))
    assert.is_nil(body:find("setAttribute(\"on", 1, true))
  end)

  it("keeps no whole-line // comments (stripped by the embed)", function()
    assert.is_nil(body:find("\n[ \t]*//"))
  end)
end)
