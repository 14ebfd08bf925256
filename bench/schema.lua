-- bench/schema.lua: the seed's CreateTask validated by clank.schema against an
-- idiomatic hand-written plain-Lua validator (same checks, same messages), and
-- decode + validate against lua-cjson + that validator, in one run; and the
-- 422 error object written straight from the issues (clank_schema_validate_json,
-- through its spec-only entry) against the tables the bridge encodes today.
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/?.so;;" lua5.4 bench/schema.lua
local clank = require "clank"
local cjson = require "cjson"
local bridge = require "clank.bridge"
local s, json = clank.schema, clank.json

local CreateTask = s.object {
  title = s.string { min = 1, max = 120, description = "Short task title" },
  priority = s.optional(s.enum { "low", "normal", "high" }),
  estimate = s.nullable(s.number { min = 0 }),
  tags = s.array(s.string(), { max = 10 }),
}

---------------------------------------------------------------------------
-- The plain-Lua validator, as one would write it by hand.
---------------------------------------------------------------------------
local ErrorMT = { __tostring = function(e)
  local parts = {}
  for i, issue in ipairs(e.issues) do
    local path = #issue.path > 0 and table.concat(issue.path, ".") or "value"
    parts[i] = path .. ": " .. issue.message
  end
  return table.concat(parts, "; ")
end }

local function plain_validator(null, array_mt)
  local huge, utf8len, mtype = math.huge, utf8.len, math.type
  local known = { title = true, priority = true, estimate = true, tags = true }
  local priorities = { low = true, normal = true, high = true }

  local function is_array(t)
    if type(t) ~= "table" then return false end
    if array_mt and getmetatable(t) == array_mt then return true end
    local n = 0
    for k in pairs(t) do
      if mtype(k) ~= "integer" or k < 1 then return false end
      n = n + 1
    end
    return n == #t
  end

  local function is_object(t)
    if type(t) ~= "table" or (array_mt and getmetatable(t) == array_mt) then return false end
    for k in pairs(t) do
      if type(k) ~= "string" then return false end
    end
    return true
  end

  return function(v)
    local issues = {}
    local function add(path, message, expected, received)
      issues[#issues + 1] = { path = path, message = message, expected = expected, received = received }
    end
    if not is_object(v) then
      add({}, "Expected an object.", "object", v)
    else
      local e = v.estimate
      if e ~= null then
        if type(e) ~= "number" or e ~= e or e == huge or e == -huge then
          add({ "estimate" }, "Expected a finite number.", "number", e)
        elseif e < 0 then
          add({ "estimate" }, "Must be at least 0.")
        end
      end
      local p = v.priority
      if p ~= nil and not (type(p) == "string" and priorities[p]) then
        add({ "priority" }, "Expected one of: low, normal, high.", "enum", p)
      end
      local tags = v.tags
      if not is_array(tags) then
        add({ "tags" }, "Expected an array.", "array", tags)
      elseif #tags > 10 then
        add({ "tags" }, "Must contain at most 10 items.")
      else
        for i = 1, #tags do
          local t = tags[i]
          if type(t) ~= "string" then
            add({ "tags", i }, "Expected a string.", "string", t)
          elseif not utf8len(t) then
            add({ "tags", i }, "Must be valid UTF-8.")
          end
        end
      end
      local title = v.title
      if type(title) ~= "string" then
        add({ "title" }, "Expected a string.", "string", title)
      else
        local n = utf8len(title)
        if not n then
          add({ "title" }, "Must be valid UTF-8.")
        elseif n < 1 then
          add({ "title" }, "Must contain at least 1 character.")
        elseif n > 120 then
          add({ "title" }, "Must contain at most 120 characters.")
        end
      end
      local unknown
      for k in pairs(v) do
        if not known[k] then
          unknown = unknown or {}
          unknown[#unknown + 1] = k
        end
      end
      if unknown then
        table.sort(unknown)
        for _, k in ipairs(unknown) do add({ k }, "Unknown property.") end
      end
    end
    if #issues == 0 then return { success = true, data = v } end
    return { success = false, error = setmetatable({ issues = issues }, ErrorMT) }
  end
end

local array_mt = getmetatable(json.decode("[]"))
local plain = plain_validator(clank.null, array_mt)
local plain_cjson = plain_validator(cjson.null, nil)

---------------------------------------------------------------------------
-- The pool: JSON bodies, valid and invalid in varied ways.
---------------------------------------------------------------------------
math.randomseed(42)
local words = { "ship", "docs", "fix", "bug", "in", "the", "parser", "écrire", "tâche", "日本", "🚀", "review" }
local function text(n)
  local t = {}
  for i = 1, n do t[i] = words[math.random(#words)] end
  return table.concat(t, " ")
end

local function valid_task()
  local tags = json.array {}
  for i = 1, math.random(0, 6) do tags[i] = words[math.random(#words)] end
  local t = { title = text(math.random(1, 8)), tags = tags }
  if math.random() < 0.7 then t.priority = ({ "low", "normal", "high" })[math.random(3)] end
  t.estimate = math.random() < 0.3 and clank.null or math.random(0, 4000) / 8
  return t
end

local breakers = {
  function(t) t.title = "" end,
  function(t) t.title = string.rep("x", 121) end,
  function(t) t.title = 42 end,
  function(t) t.title = nil end,
  function(t) t.priority = "urgent" end,
  function(t) t.estimate = -1 end,
  function(t) t.estimate = "soon" end,
  function(t) t.estimate = nil end,
  function(t) for i = 1, 11 do t.tags[i] = "t" .. i end end,
  function(t) t.tags[#t.tags + 1] = 7 end,
  function(t) t.tags = "a,b" end,
  function(t) t.extra = true end,
  function(t) t.title, t.zzz, t.estimate = "", 1, -5 end,
}

local POOL = 2000
local valid_bodies, invalid_bodies = {}, {}
for i = 1, POOL do
  local t = valid_task()
  if i % 2 == 0 then
    breakers[(i // 2) % #breakers + 1](t)
    invalid_bodies[#invalid_bodies + 1] = json.encode(t)
  else
    valid_bodies[#valid_bodies + 1] = json.encode(t)
  end
end
invalid_bodies[#invalid_bodies + 1] = "[]"

local function decode_all(bodies)
  local out = {}
  for i, b in ipairs(bodies) do out[i] = json.decode(b) end
  return out
end
local valid, invalid = decode_all(valid_bodies), decode_all(invalid_bodies)

-- Both validators must agree on every table and every message.
local mismatches = 0
for _, pool in ipairs { valid, invalid } do
  for _, v in ipairs(pool) do
    local a, b = CreateTask:safeParse(v), plain(v)
    if a.success ~= b.success or (not a.success and tostring(a.error) ~= tostring(b.error)) then
      mismatches = mismatches + 1
      if mismatches <= 3 then
        print("mismatch:", json.encode(v), tostring(a.error), tostring(b.error))
      end
    end
  end
end
for _, v in ipairs(valid) do assert(CreateTask:safeParse(v).success) end
for _, v in ipairs(invalid) do assert(not CreateTask:safeParse(v).success) end

---------------------------------------------------------------------------
-- Timing
---------------------------------------------------------------------------
local clock = os.clock
local SLICE = 0.1 -- seconds per timed slice
local REPEAT = 7  -- slices per contender, alternated; the fastest counts

-- ns per call of f over every element of pool, for one slice.
local function slice(pool, f)
  local n = #pool
  collectgarbage()
  local rounds, t0 = 0, clock()
  local elapsed
  repeat
    for i = 1, n do f(pool[i]) end
    rounds = rounds + 1
    elapsed = clock() - t0
  until elapsed >= SLICE
  return elapsed * 1e9 / (rounds * n)
end

-- Alternates the two contenders so that a busy machine hurts both alike.
local function duel(pool_a, fa, pool_b, fb)
  for i = 1, #pool_a do fa(pool_a[i]) end -- warm up
  for i = 1, #pool_b do fb(pool_b[i]) end
  local best_a, best_b = math.huge, math.huge
  for _ = 1, REPEAT do
    best_a = math.min(best_a, slice(pool_a, fa))
    best_b = math.min(best_b, slice(pool_b, fb))
  end
  return best_a, best_b
end

local function safe(v) return CreateTask:safeParse(v) end
local function parse(v) return CreateTask:parse(v) end
local function decode_clank(b) return CreateTask:safeParse(json.decode(b)) end
local function decode_cjson(b) return plain_cjson(cjson.decode(b)) end

print(("pool: %d valid, %d invalid CreateTask tables; validators disagree on %d"):format(#valid, #invalid,
  mismatches))
local function row(name, ns_schema, ns_plain)
  print(("%-30s clank %8.1f ns   plain Lua %8.1f ns   ratio %5.2fx"):format(name, ns_schema, ns_plain,
    ns_plain / ns_schema))
end
print("validate (plain Lua = hand-written validator, same checks and messages)")
row("  valid, schema:parse", duel(valid, parse, valid, plain))
row("  valid, schema:safeParse", duel(valid, safe, valid, plain))
row("  invalid, schema:safeParse", duel(invalid, safe, invalid, plain))
print("decode + validate (clank = clank.json.decode + safeParse; plain Lua = cjson.decode + validator)")
row("  valid bodies", duel(valid_bodies, decode_clank, valid_bodies, decode_cjson))
row("  invalid bodies", duel(invalid_bodies, decode_clank, invalid_bodies, decode_cjson))
print("decode only, for reference (clank = clank.json.decode; plain Lua = cjson.decode)")
row("  valid bodies", duel(valid_bodies, json.decode, valid_bodies, cjson.decode))

-- The 422 error object: issue tables + bridge.errorEnvelope + clank.json.encode
-- (what the bridge answers today) against clank_schema_validate_json.
local json422 = getmetatable(CreateTask).__json422
local function answer_tables(v)
  local e = bridge.errorEnvelope(CreateTask:safeParse(v).error, {})
  return json.encode { code = e.code, details = e.details, message = e.message }
end
local function answer_json(v) return json422(CreateTask, v) end
for _, v in ipairs(invalid) do assert(answer_tables(v) == answer_json(v)) end
local ns_tables, ns_json = duel(invalid, answer_tables, invalid, answer_json)
print(("422 error object, invalid: tables + encode %8.1f ns   written from the issues %8.1f ns   ratio %5.2fx")
  :format(ns_tables, ns_json, ns_tables / ns_json))
