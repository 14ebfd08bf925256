-- db:queryAs (doc/data.md, "Rows read as a schema's objects"): a query's rows read as the
-- objects of an s.object schema, on SQLite and on PostgreSQL (when CLANK_TEST_POSTGRES_URL is
-- set). What Lua sees, what an action answers through the bridge (written straight from the
-- driver's buffer) and what it answers the general way must agree; every expected value and
-- body is written by hand from the rules in doc/data.md.
local clank = require "clank"
local storage = require "helpers.storage"
local s = clank.schema
local null, isArray = clank.null, clank.json.isArray

local HOST = "127.0.0.1:8080"

local Row = s.object {
  id = s.string(),
  title = s.string(),
  flag = s.boolean(),
  note = s.optional(s.string()),
  est = s.nullable(s.number()),
  tags = s.array(s.string()),
  meta = s.optional(s.object { a = s.number() }),
  amount = s.optional(s.number()),
  kind = s.enum { "x", "y" },
  gone = s.optional(s.string()),
}
-- The same object schema made again: another schema, as far as the output walk knows.
local SameRow = s.object {
  id = s.string(), title = s.string(), flag = s.boolean(), note = s.optional(s.string()),
  est = s.nullable(s.number()), tags = s.array(s.string()),
  meta = s.optional(s.object { a = s.number() }), amount = s.optional(s.number()),
  kind = s.enum { "x", "y" }, gone = s.optional(s.string()),
}

-- Within the rows' values, and beyond them: id 2 > 1.
local Short = s.object {
  id = s.number { integer = true, min = 1, max = 2 }, title = s.string { min = 3, max = 3 },
  est = s.optional(s.nullable(s.number { max = 3 })), ok = s.boolean(),
}
local Crossed = s.object {
  id = s.number { integer = true, max = 1 }, title = s.string(), est = s.nullable(s.number()),
  ok = s.boolean(),
}

local Tagged = s.object { id = s.number(), tags = s.array(s.string()) }
local Kind = s.object { kind = s.enum { "x", "y" } }
local Id = s.object { id = s.string() }

-- The two rows below as Row reads them, and as an action's answer writes them.
local ROWS_JSON = '[{"amount":12.5,"est":2.5,"flag":true,"id":"1","kind":"x","meta":{"a":1},'
  .. '"tags":["a","b"],"title":"one"},{"amount":3,"est":null,"flag":false,"id":"2","kind":"y",'
  .. '"note":"hi","tags":[],"title":"two"}]'
local FAILED = '{"error":{"code":"ACTION_FAILED","message":"The action failed."},"ok":false}'

local function post(name, body)
  body = body or "{}"
  return { method = "POST", url = "/actions/" .. name, path = "/actions/" .. name, query = {},
           headers = { host = HOST, ["content-type"] = "application/json",
                       ["content-length"] = tostring(#body) },
           body = body, scheme = "http" }
end

-- Tags texts and the answer's tags for each ("fails": the answer is ACTION_FAILED): arrays of
-- strings (whitespace, Unicode, escapes) and what is not one.
local TAGS = {
  { "[]", "[]" },
  { ' [ "a" , "b" ] ', '["a","b"]' },
  { '[""]', '[""]' },
  { '["é","日本","𝄞"]', '["é","日本","𝄞"]' },
  { '["a\\"b","c\\\\d"]', '["a\\"b","c\\\\d"]' },
  { '["\\u00e9","a\\/b","\\n"]', '["é","a/b","\\n"]' },
  { '["x",]', "fails" },
  { '["x"', "fails" },
  { '["x"] y', "fails" },
  { "[1]", "fails" },
  { '["a",null]', "fails" },
  { "{}", "fails" },
  { '["\t"]', "fails" }, -- a raw tab
  { "", "fails" },
}

-- Runs fn(ctx) as an action's handler and returns what it returns.
local function in_handler(fn)
  local action = clank.defineAction {
    name = "run", description = "Runs a function.", input = s.object {}, sideEffects = "read",
    handler = function(_, c) return { value = fn(c) } end,
  }
  return action({}, {}).value
end

local function raised(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

-- A plain copy of a row (or any value): what Lua would have returned without queryAs.
local function copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy(x) end
  return isArray(v) and clank.json.array(out) or out
end

for _, backend in ipairs(storage.backends) do
  describe("db:queryAs on " .. backend.name, function()
    if backend.pending then
      it("needs its database", function() pending(backend.pending) end)
      return
    end
    local target, remove = backend.fresh()
    local pg = backend.name == "PostgreSQL"
    local db = clank.db.open(target)
    local t = ("rows_%d_%d"):format(os.time(), math.random(1, 1e9))
    local SELECT = "SELECT id, title, flag, note, est, tags, meta, amount, extra, kind FROM " .. t

    setup(function()
      in_handler(function()
        db:exec(("CREATE TABLE %s (id %s, title TEXT, flag INTEGER, note TEXT, est %s, tags TEXT,"
          .. " meta TEXT, amount %s, extra TEXT, kind TEXT, ok BOOLEAN)"):format(t, pg and "BIGINT" or "INTEGER",
          pg and "DOUBLE PRECISION" or "REAL", pg and "NUMERIC" or "TEXT"))
        db:exec("INSERT INTO " .. t .. " VALUES (1, 'one', 1, NULL, 2.5, '[\"a\",\"b\"]', '{\"a\":1}',"
          .. " 12.50, 'e1', 'x', TRUE), (2, 'two', 0, 'hi', NULL, '[]', NULL, 3, 'e2', 'y', FALSE)")
      end)
    end)

    teardown(function()
      in_handler(function() db:exec("DROP TABLE " .. t) end)
      db:close()
      remove()
    end)

    it("reads each column as the schema's property says", function()
      local rows = in_handler(function() return db:queryAs(Row, SELECT .. " ORDER BY id") end)
      assert.are.equal(2, #rows)
      local one, two = rows[1], rows[2]
      -- integer to string; 0/1 to booleans; JSON text decoded; numeric text to a number;
      -- NULL absent where optional and null where nullable; `extra` is not the schema's
      assert.are.same({ id = "1", title = "one", flag = true, est = 2.5, tags = { "a", "b" },
                        meta = { a = 1 }, amount = 12.5, kind = "x" }, one)
      assert.are.same({ id = "2", title = "two", flag = false, note = "hi", est = null, tags = {},
                        amount = 3, kind = "y" }, two)
      assert.are.equal("integer", math.type(two.amount))
      assert.is_true(isArray(one.tags))
      assert.is_true(isArray(two.tags))
      assert.is_false(isArray(one.meta))
      assert.is_nil(one.note)
      assert.is_nil(one.extra)
    end)

    it("is a list to Lua: #, [i] (the same table each time), ipairs, pairs, tostring", function()
      local rows = in_handler(function() return db:queryAs(Row, SELECT .. " ORDER BY id") end)
      assert.are.equal("userdata", type(rows))
      assert.are.equal(rows[1], rows[1])
      assert.is_nil(rows[0])
      assert.is_nil(rows[3])
      assert.is_nil(rows.title)
      local titles = {}
      for i, row in ipairs(rows) do titles[i] = row.title end
      assert.are.same({ "one", "two" }, titles)
      local keys = {}
      for k, row in pairs(rows) do keys[#keys + 1] = k .. "=" .. row.title end
      table.sort(keys)
      assert.are.same({ "1=one", "2=two" }, keys)
      assert.are.equal(ROWS_JSON, clank.json.encode(rows)) -- the list
      assert.are.equal("clank.Rows (2 rows)", tostring(rows))
      assert.are.equal("clank.Rows", getmetatable(rows))
    end)

    it("leaves what it cannot read as the schema says for the validation to refuse", function()
      local rows = in_handler(function()
        return db:queryAs(Row, "SELECT id, title, 2 AS flag, NULL AS est, 'not json' AS tags,"
          .. " '[1]' AS meta, 'abc' AS amount, 'z' AS kind FROM " .. t .. " WHERE id = 1"
          .. " UNION ALL SELECT id, title, 1, NULL, '{}', '{\"a\":2}', '1e400', 'x' FROM " .. t
          .. " WHERE id = 2")
      end)
      local row = rows[1]
      assert.are.equal(2, row.flag)
      assert.are.equal("not json", row.tags)
      assert.are.equal("[1]", row.meta) -- an array is not the object the schema wants
      assert.are.equal("abc", row.amount)
      assert.are.equal("z", row.kind)
      assert.are.equal(null, row.est)
      row = rows[2]
      assert.are.equal("{}", row.tags) -- an object is not the array the schema wants
      assert.are.same({ a = 2 }, row.meta)
      assert.are.equal("1e400", row.amount) -- clank.json.decode takes no number past a double
    end)

    it("answers no rows as an empty list, even without the columns", function()
      local rows = in_handler(function() return db:queryAs(Row, SELECT .. " WHERE id < 0") end)
      assert.are.equal(0, #rows)
      assert.is_nil(rows[1])
      local none = in_handler(function() return db:queryAs(Row, "SELECT 1 AS x FROM " .. t .. " WHERE id < 0") end)
      assert.are.equal(0, #none)
    end)

    it("raises for a missing required column, a schema that is not an object, and no SQL", function()
      local err = raised(function() in_handler(function() return db:queryAs(Row, "SELECT id FROM " .. t) end) end)
      -- the first the schema requires, in the order of its keys
      assert.matches('clank.db: queryAs: the result has no column "est", which the schema requires', err,
        1, true)
      assert.matches("db_rows_spec.lua", err, 1, true) -- where the caller called it
      assert.matches("clank.db: queryAs expects an s.object schema first",
        raised(function() in_handler(function() return db:queryAs(s.array(Row), SELECT) end) end), 1, true)
      assert.matches("clank.db: queryAs expects an s.object schema first",
        raised(function() in_handler(function() return db:queryAs(SELECT) end) end), 1, true)
      assert.matches("clank.db: queryAs expects SQL text",
        raised(function() in_handler(function() return db:queryAs(Row) end) end), 1, true)
    end)

    it("reads the same in a transaction", function()
      local rows = in_handler(function()
        return db:transaction(function(tx) return tx:queryAs(Row, SELECT .. " ORDER BY id") end)
      end)
      assert.are.equal(2, #rows)
      assert.are.equal(true, rows[1].flag)
    end)

    describe("as an action's answer", function()
      local function action(name, output, fn)
        return clank.defineAction {
          name = name, description = "Answers rows.", input = s.object {}, output = output,
          sideEffects = "read", handler = fn,
        }
      end
      local Out = s.object { rows = s.array(Row) }
      local bridge = clank.createAgentBridge({
        action("walked", Out, function() return { rows = db:queryAs(Row, SELECT .. " ORDER BY id") } end),
        action("plain", Out, function()
          local list = {}
          for i, row in ipairs(db:queryAs(Row, SELECT .. " ORDER BY id")) do list[i] = copy(row) end
          return { rows = clank.json.array(list) }
        end),
        action("touched", Out, function()
          local rows = db:queryAs(Row, SELECT .. " ORDER BY id")
          rows[2].title = "changed"
          return { rows = rows }
        end),
        action("other", s.object { rows = s.array(SameRow) }, function()
          return { rows = db:queryAs(Row, SELECT .. " ORDER BY id") }
        end),
        action("top", s.array(Row), function() return db:queryAs(Row, SELECT .. " ORDER BY id") end),
        action("empty", Out, function() return { rows = db:queryAs(Row, SELECT .. " WHERE id < 0") } end),
        action("few", s.object { rows = s.array(Row, { max = 1 }) }, function()
          return { rows = db:queryAs(Row, SELECT .. " ORDER BY id") }
        end),
        -- bounds met and crossed; PostgreSQL's boolean, SQLite's 0/1
        action("bounded", s.array(Short), function()
          return db:queryAs(Short, "SELECT id, title, est, ok FROM " .. t .. " ORDER BY id")
        end),
        action("crossed", s.array(Crossed), function()
          return db:queryAs(Crossed, "SELECT id, title, est, ok FROM " .. t .. " ORDER BY id")
        end),
        clank.defineAction {
          name = "tags", description = "Answers one row's tags.", sideEffects = "read",
          input = s.object { id = s.number { integer = true } }, output = s.array(Tagged),
          handler = function(input)
            return db:queryAs(Tagged, "SELECT id, tags FROM " .. t .. "_tags WHERE id = $1", input.id)
          end,
        },
        action("invalid", Out, function()
          return { rows = db:queryAs(Row, "SELECT id, title, 2 AS flag, est, tags, kind FROM " .. t) }
        end),
        -- an enum's value matches with all its bytes: "y" is one, "xx", "X", "" and "y\0" are not
        clank.defineAction {
          name = "kinds", description = "Answers a kind.", sideEffects = "read",
          input = s.object { kind = s.string() }, output = s.array(Kind),
          handler = function(input) return db:queryAs(Kind, "SELECT $1 AS kind", input.kind) end,
        },
        -- an integer column read as s.string() is its decimal digits
        clank.defineAction {
          name = "ids", description = "Answers an id.", sideEffects = "read",
          input = s.object { n = s.number { integer = true } }, output = s.array(Id),
          handler = function(input) return db:queryAs(Id, "SELECT CAST($1 AS BIGINT) AS id", input.n) end,
        },
      })
      local function answer(name, body)
        local res = bridge:handle(post(name, body))
        return res.status, res.body
      end

      it("writes the rows straight from the result, as the general way writes their list", function()
        local want = '{"ok":true,"output":{"rows":' .. ROWS_JSON .. "}}"
        assert.are.same({ 200, want }, { answer("walked") })
        assert.are.same({ 200, want }, { answer("plain") })
        assert.are.same({ 200, want }, { answer("other") }) -- another schema: the general way
        assert.are.same({ 200, '{"ok":true,"output":' .. ROWS_JSON .. "}" }, { answer("top") })
        assert.are.same({ 200, '{"ok":true,"output":{"rows":[]}}' }, { answer("empty") })
      end)

      it("checks each value's bounds as it writes it", function()
        assert.are.same({ 200, '{"ok":true,"output":[{"est":2.5,"id":1,"ok":true,"title":"one"},'
          .. '{"est":null,"id":2,"ok":false,"title":"two"}]}' }, { answer("bounded") })
        assert.are.same({ 500, FAILED }, { answer("crossed") })
      end)

      it("writes a JSON text of strings as its array, and fails for any other text", function()
        in_handler(function()
          db:exec("CREATE TABLE " .. t .. "_tags (id INTEGER, tags TEXT)")
          for i, case in ipairs(TAGS) do db:exec("INSERT INTO " .. t .. "_tags VALUES ($1, $2)", i, case[1]) end
        end)
        for i, case in ipairs(TAGS) do
          local want = case[2] == "fails" and { 500, FAILED }
            or { 200, '{"ok":true,"output":[{"id":' .. i .. ',"tags":' .. case[2] .. "}]}" }
          assert.are.same(want, { answer("tags", '{"id":' .. i .. "}") }, case[1])
        end
        in_handler(function() db:exec("DROP TABLE " .. t .. "_tags") end)
      end)

      it("writes an integer read as a string as its digits", function()
        for _, n in ipairs { "0", "7", "-1", "1234567890123", "9223372036854775807", "-9223372036854775808" } do
          assert.are.same({ 200, '{"ok":true,"output":[{"id":"' .. n .. '"}]}' },
            { answer("ids", '{"n":' .. n .. "}") }, n)
        end
      end)

      it("writes the rows Lua changed", function()
        local status, body = answer("touched")
        assert.are.equal(200, status)
        assert.are.equal('{"ok":true,"output":{"rows":' .. ROWS_JSON:gsub('"two"', '"changed"') .. "}}", body)
      end)

      it("fails as any invalid output does: a row that does not fit, too many rows", function()
        assert.are.same({ 500, FAILED }, { answer("invalid") })
        assert.are.same({ 200, '{"ok":true,"output":[{"kind":"y"}]}' }, { answer("kinds", '{"kind":"y"}') })
        for _, kind in ipairs { "xx", "X", "", "y\\u0000" } do
          assert.are.same({ 500, FAILED }, { answer("kinds", '{"kind":"' .. kind .. '"}') }, kind)
        end
        assert.are.same({ 500, FAILED }, { answer("few") })
      end)

      it("is the list Lua sees when the action is called in process", function()
        local out = bridge:invoke("walked", {}, {})
        assert.are.equal("table", type(out.rows))
        assert.is_true(isArray(out.rows))
        assert.are.equal("1", out.rows[1].id)
        assert.are.equal(null, out.rows[2].est)
      end)
    end)
  end)
end
