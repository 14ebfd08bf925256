-- An action's output through the bridge (SPEC §4: output:parse after the handler, a failure is
-- ACTION_FAILED 500 with its issues in the log only; §5 step 8: 200 {"ok":true,"output":...} in
-- canonical JSON). Outputs valid and invalid in each way the schema language allows; every
-- expected body and log message is written by hand from the SPEC. Then many generated outputs,
-- each answered as the general path (schema:parse, clank.json.encode) says.
local server = require "helpers.server"
local http = require "helpers.http"

local FAILED = '{"error":{"code":"ACTION_FAILED","message":"The action failed."},"ok":false}'
local LONG = string.rep("k", 48)

-- {"w01":1,...} up to n
local function wide_all(n)
  local parts = {}
  for i = 1, n do parts[i] = ('"w%02d":%d'):format(i, i) end
  return "{" .. table.concat(parts, ",") .. "}"
end

local function post(conn, name, body)
  local req = http.build("POST", "/actions/" .. name, { { "Content-Type", "application/json" } }, body)
  assert(conn:send(req))
  return assert(conn:read_response())
end

-- { action, case, output as JSON } answered 200
local valid = {
  { "obj", "minimal", '{"created":true,"id":"t1"}' },
  { "obj", "full", '{"any":"whatever","count":7,"created":false,"id":"t2","items":[{"n":1},{"n":-2.25}],'
    .. '"kind":"b","' .. LONG .. '":"long","nested":{"deep":{"flag":true},"list":["p","q"]},'
    .. '"none":null,"note":"héllo","one":1,"ratio":0.5,"tag":"x","yes":true}' },
  { "obj", "numbers", '{"count":3,"created":true,"id":"n","ratio":0.1}' },
  { "obj", "big", '{"count":100,"created":true,"id":"n","ratio":1e+308}' },
  { "obj", "tiny", '{"count":0,"created":true,"id":"n","ratio":5e-324}' },
  { "obj", "negzero", '{"created":true,"id":"n","ratio":0}' },
  { "obj", "twopow", '{"created":true,"id":"n","ratio":9007199254740992}' },
  { "obj", "maxint", '{"any":9223372036854775807,"created":true,"id":"n"}' },
  { "obj", "minint", '{"any":-9223372036854775808,"created":true,"id":"n"}' },
  { "obj", "escapes", '{"created":true,"id":"q\\"b\\\\s/\\n\\r\\t\\b\\f\\u0001\\u001f"}' },
  { "obj", "unicode", '{"created":true,"id":"é€𝄞 日本"}' },
  { "obj", "nullnote", '{"created":true,"id":"n","note":null}' },
  { "obj", "emptylist", '{"created":true,"id":"n","nested":{"list":[]}}' },
  { "obj", "markedlist", '{"created":true,"id":"n","nested":{"list":["m"]}}' },
  { "obj", "emptymarked", '{"created":true,"id":"n","nested":{"list":[]}}' },
  { "obj", "anytable", '{"any":{"a":{},"b":[1,2]},"created":true,"id":"n"}' },
  { "obj", "anynull", '{"any":null,"created":true,"id":"n"}' },
  { "obj", "metatable", '{"created":true,"id":"m"}' },
  { "free", "table", '{"a":["x",2.5],"b":1,"c":{}}' },
  { "free", "string", '"s"' },
  { "optional", "value", '"v"' },
  { "arr", "empty", "[]" },
  { "arr", "numbers", "[1,2.5,1e+21]" },
  { "arr", "marked", "[3]" },
  { "union", "string", '"u"' },
  { "union", "number", "4" },
  { "pattern", "ok", '{"code":"ABC"}' },
  { "loose", "kept", '{"A":true,"a":"x","b":2}' },
  { "wide", "some", '{"f01":1,"f10":10,"f20":20}' },
  { "rows", "mixed", '{"tasks":[{"completed":false,"createdAt":1700000000,"estimate":2,"id":"1",'
    .. '"tags":["x","y"],"title":"A"},{"c\\u0001":true,"completed":true,"createdAt":1700000001,'
    .. '"estimate":null,"id":"2","' .. LONG .. '":"l","priority":"high","q\\"k":"v",'
    .. '"remindAt":1900000000000,"tags":[],"title":"B","é":1000000000000000},{"completed":false,'
    .. '"createdAt":0,"estimate":0,"id":"3","tags":[],"title":"C"},{"completed":false,"createdAt":5,'
    .. '"estimate":0.5,"id":"4","priority":"low","tags":["z"],"title":"D"}]}' },
  { "rows", "shuffled", '{"tasks":[{"completed":true,"createdAt":1,"estimate":1,"id":"1",'
    .. '"tags":["a","b","c"],"title":"S"},{"completed":true,"createdAt":2,"estimate":2,"id":"2",'
    .. '"tags":["a","b","c"],"title":"S"},{"completed":true,"createdAt":3,"estimate":3,"id":"3",'
    .. '"tags":["a","b","c"],"title":"S"}]}' },
  { "rows", "empty", '{"tasks":[]}' },
  { "wide64", "all", wide_all(64) },
  { "wide64", "some", '{"w01":1,"w64":64}' },
  { "wide65", "all", wide_all(65) },
  { "wide65", "some", '{"w01":1,"w64":64}' },
}

-- { action, case, the issues' message in the log line } answered 500 ACTION_FAILED
local invalid = {
  { "obj", "missing", "id: Expected a string." },
  { "obj", "wrongtype", "yes: Expected true." },
  { "obj", "wrongbool", "created: Expected a boolean." },
  { "obj", "toobig", "count: Must be at most 100." },
  { "obj", "toosmall", "count: Must be at least 0." },
  { "obj", "notint", "count: Expected an integer." },
  { "obj", "nan", "ratio: Expected a finite number." },
  { "obj", "inf", "count: Expected a finite number." },
  { "obj", "enum", "kind: Expected one of: a, b." },
  { "obj", "literal", 'tag: Expected "x".' },
  { "obj", "literalnum", "one: Expected 1." },
  { "obj", "shortnote", "note: Must contain at least 1 character." },
  { "obj", "longnote", "note: Must contain at most 5 characters." },
  { "obj", "listmax", "nested.list: Must contain at most 2 items." },
  { "obj", "listitem", "nested.list.2: Expected a string." },
  { "obj", "deepflag", "nested.deep.flag: Expected a boolean." },
  { "obj", "itemsmin", "items: Must contain at least 1 item." },
  { "obj", "itemfield", "items.2.n: Expected a finite number." },
  { "obj", "holes", "items: Expected an array." },
  { "obj", "extra", "a: Unknown property.; x: Unknown property." },
  { "obj", "numkey", "nested: Expected an object." },
  { "obj", "badutf8", "id: Must be valid UTF-8." },
  { "obj", "notobject", "value: Expected an object." },
  { "obj", "marked", "nested.deep: Expected an object." },
  { "obj", "many", "count: Expected a finite number.; created: Expected a boolean.; id: Expected a string." },
  { "arr", "negative", "2: Must be at least 0." },
  { "arr", "holes", "value: Expected an array." },
  { "list", "object", "value: Expected an array." },
  { "union", "bool", "value: Did not match any union member (Expected a string.; Expected a finite number.)." },
  { "pattern", "bad", "code: Must match ^%u+$." },
  { "pattern", "nothing", "value: Expected an object." },
  { "loose", "bad", "a: Expected a string." },
  { "loose", "numkey", "value: Expected an object." },
  { "wide", "unknown", "g: Unknown property." },
  { "rows", "extra", "tasks.2.x: Unknown property." },
  { "rows", "missing", "tasks.1.estimate: Expected a finite number." },
  { "rows", "gap", "tasks.1.tags: Expected an array." },
  { "rows", "shuffledbad", "tasks.2.createdAt: Expected an integer." },
  { "wide64", "unknown", "w: Unknown property." },
  { "wide65", "unknown", "w: Unknown property." },
}

-- The lines of stderr after byte `from` that report a failed action, once `want` of them came.
local function failures(s, from, want)
  local lines
  for _ = 1, 100 do
    lines = {}
    for line in s:stderr():sub(from + 1):gmatch("[^\n]+") do
      if line:find("failed", 1, true) then lines[#lines + 1] = line end
    end
    if #lines >= want then break end
    require("socket").sleep(0.02)
  end
  return lines
end

describe("an action's output through the bridge", function()
  local s = server.for_describe(server.fixture("action_output"))

  it("answers a valid output 200 with it in canonical JSON, and logs no failure", function()
    local conn = assert(http.connect(s.port))
    local from = #s:stderr()
    for _, c in ipairs(valid) do
      local res = post(conn, c[1], '{"case":"' .. c[2] .. '"}')
      assert.are.equal(200, res.status, c[2])
      assert.are.equal('{"ok":true,"output":' .. c[3] .. "}", res.body, c[1] .. " " .. c[2])
      assert.is_nil(res.headers["cache-control"])
    end
    local res = post(conn, "nothing", "{}") -- nil and no output schema (SPEC §13)
    assert.are.equal(200, res.status)
    assert.are.equal('{"ok":true}', res.body)
    conn:close()
    require("socket").sleep(0.1)
    assert.are.same({}, failures(s, from, 0))
  end)

  for _, c in ipairs(invalid) do
    it("answers " .. c[1] .. " " .. c[2] .. " 500 ACTION_FAILED and logs one line with its issues", function()
      local conn = assert(http.connect(s.port))
      local from = #s:stderr()
      local res = post(conn, c[1], '{"case":"' .. c[2] .. '"}')
      conn:close()
      assert.are.equal(500, res.status)
      assert.are.equal(FAILED, res.body)
      assert.are.equal("no-store", res.headers["cache-control"])
      failures(s, from, 1)
      require("socket").sleep(0.05)
      local lines = failures(s, from, 1) -- and no second one
      assert.are.equal(1, #lines, table.concat(lines, "\n"))
      local want = "action " .. c[1] .. " failed: its output does not match the output schema: " .. c[3]
      assert.are.equal(want, lines[1]:sub(-#want), lines[1])
      assert.truthy(lines[1]:find("error [", 1, true), lines[1]) -- at level error, with its request id
    end)
  end

  it("checks an output that came after a wait, while the request waited for it", function()
    local conn = assert(http.connect(s.port))
    local res = post(conn, "late", '{"ms":20,"valid":true}')
    assert.are.equal(200, res.status)
    assert.are.equal('{"ok":true,"output":{"id":"w"}}', res.body)
    local from = #s:stderr()
    res = post(conn, "late", '{"ms":20,"valid":false}')
    conn:close()
    assert.are.equal(500, res.status)
    assert.are.equal(FAILED, res.body)
    failures(s, from, 1)
    require("socket").sleep(0.05)
    local lines = failures(s, from, 1)
    assert.are.equal(1, #lines, table.concat(lines, "\n"))
    local want = "action late failed: its output does not match the output schema: id: Expected a string."
    assert.are.equal(want, lines[1]:sub(-#want), lines[1])
  end)

  it("still checks, and logs, an invalid output that comes after its request timed out", function()
    local conn = assert(http.connect(s.port))
    local from = #s:stderr()
    local res = post(conn, "late", '{"ms":600,"valid":false}')
    conn:close()
    assert.are.equal(504, res.status)
    assert.are.equal('{"error":{"code":"TIMEOUT","message":"The action timed out."},"ok":false}', res.body)
    local lines = failures(s, from, 2)
    assert.are.equal(2, #lines, table.concat(lines, "\n"))
    local want = "action late failed: its output does not match the output schema: x: Unknown property."
    assert.truthy(lines[1]:find(want, 1, true), lines[1])
    assert.truthy(lines[2]:find("an action that timed out failed later", 1, true), lines[2])
  end)

  -- 400 seeds of action `name`, each answered as GET /expect?<query>seed=N answers it (the
  -- general path); both valid and invalid outputs well represented
  local function same_as_general_path(name, query)
    local conn = assert(http.connect(s.port))
    local ok, failed = 0, 0
    for seed = 1, 400 do
      assert(conn:send(http.build("GET", "/expect?" .. query .. "seed=" .. seed, {}, nil)))
      local want = assert(conn:read_response())
      local got = post(conn, name, '{"seed":' .. seed .. "}")
      assert.are.equal(want.status, got.status, "seed " .. seed)
      assert.are.equal(want.body, got.body, "seed " .. seed)
      if got.status == 200 then ok = ok + 1 else failed = failed + 1 end
    end
    conn:close()
    assert.is_true(ok > 60, "valid outputs: " .. ok)
    assert.is_true(failed > 60, "invalid outputs: " .. failed)
  end

  it("answers many generated outputs as the general path does", function()
    same_as_general_path("random", "")
  end)

  it("answers many generated lists of objects as the general path does", function()
    same_as_general_path("randomrows", "of=rows&")
  end)
end)
