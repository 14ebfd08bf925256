-- What the agent bridge answers (SPEC §5, with §3 for messages), written out for the specs
-- that check it in process (spec/unit/agent/bridge_spec) and over HTTP (spec/functional/*):
-- the expected bodies, byte for byte, and the checks every answer of one kind passes.
local assert = require "luassert"
local json = require "dkjson"

local bridge = {}

-- The `"error":{...}` member of a failure, keys in canonical order; details_json is JSON text.
function bridge.error_member(code, message, details_json)
  return '"error":{"code":"' .. code .. '",'
    .. (details_json and ('"details":' .. details_json .. ",") or "")
    .. '"message":"' .. message .. '"}'
end

-- The body of a failure: {"error":{...},"ok":false}.
function bridge.failure_body(code, message, details_json)
  return "{" .. bridge.error_member(code, message, details_json) .. ',"ok":false}'
end

function bridge.assert_json_type(res)
  local ct = res.headers["content-type"]
  assert.is_string(ct, "no content-type")
  assert.truthy(ct:lower():find("^application/json"), "content-type: " .. ct)
end

-- Status, exact body, cache-control: no-store and a JSON content type.
function bridge.assert_failure(res, status, code, message, details_json)
  assert.are.equal(status, res.status, "body: " .. tostring(res.body))
  assert.are.equal(bridge.failure_body(code, message, details_json), res.body)
  assert.are.equal("no-store", res.headers["cache-control"])
  bridge.assert_json_type(res)
end

-- 200 with {"ok":true,"output":<output_json>} and a JSON content type.
function bridge.assert_ok(res, output_json)
  assert.are.equal(200, res.status, "body: " .. tostring(res.body))
  assert.are.equal('{"ok":true,"output":' .. output_json .. "}", res.body)
  bridge.assert_json_type(res)
end

-- SHA-256 of data as lowercase hex, by sha256sum (independent of the runtime's own).
-- The output of a 200 {"ok":true,"output":...}, decoded, for specs that check it field by field.
function bridge.output(res)
  assert.are.equal(200, res.status, "body: " .. tostring(res.body))
  local doc = assert(json.decode(res.body))
  assert.is_true(doc.ok)
  return doc.output
end

function bridge.sha256_hex(data)
  local path = os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
  local p = assert(io.popen("sha256sum '" .. path .. "'"))
  local out = p:read("a")
  p:close()
  os.remove(path)
  return assert(out:match("^(%x+)"))
end

-- The manifest's ETag: the first 16 hex digits of its SHA-256, quoted.
function bridge.etag(manifest)
  return '"' .. bridge.sha256_hex(manifest):sub(1, 16) .. '"'
end

return bridge
