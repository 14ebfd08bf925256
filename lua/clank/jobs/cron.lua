-- clank.jobs.cron (issue 32): cron lines for durable job schedules, and their next tick in a time
-- zone (clank.jobs.tz).
--
--   cron.parse(line) → spec, or nil, err
--       "minute hour day-of-month month day-of-week", or six fields with seconds first. A field
--       is a comma list of *, N, A-B, */S, A-B/S and N/S (N to the field's end by S); months JAN-DEC
--       and days SUN-SAT by name too; day of week 0-7, 0 and 7 both Sunday.
--   cron.next(spec, zone, afterMs) → the next tick in epoch milliseconds, strictly after afterMs,
--       or nil when the line matches nothing in the next 8 years (e.g. "0 0 31 2 *").
--
-- Days follow Vixie cron: when day-of-month and day-of-week are both restricted, a day matching
-- either runs; when one of them is *, the other decides. Only a field written * (or */1) counts as
-- unrestricted: Vixie also counts */S, an accident of its parser that makes "0 0 */2 * MON" mean
-- "odd days that are Mondays"; here it means odd days and Mondays, as the fields say.
--
-- Ticks are wall-clock times in the zone. One that falls in a daylight-saving gap (02:30 on the
-- spring-forward night) runs once, when the gap ends; in an overlap (the repeated hour of the
-- fall-back night) only the first pass runs.
local tz = require "clank.jobs.tz"

local type, tonumber, error, format = type, tonumber, error, string.format
local upper, match, gmatch, sub = string.upper, string.match, string.gmatch, string.sub
local floor = math.floor
local civil, fromCivil, daysInMonth = tz.civil, tz.fromCivil, tz.daysInMonth

local M = {}

-- A bounded search: Feb 29 can be 8 years away (2096 → 2104); a line that never matches gives
-- nil after this many years instead of looping.
local HORIZON_YEARS = 8

local MONTHS = { JAN = 1, FEB = 2, MAR = 3, APR = 4, MAY = 5, JUN = 6, JUL = 7, AUG = 8, SEP = 9,
  OCT = 10, NOV = 11, DEC = 12 }
local DAYS = { SUN = 0, MON = 1, TUE = 2, WED = 3, THU = 4, FRI = 5, SAT = 6 }

local FIELDS = {
  { key = "second", name = "second", min = 0, max = 59 },
  { key = "minute", name = "minute", min = 0, max = 59 },
  { key = "hour", name = "hour", min = 0, max = 23 },
  { key = "dom", name = "day-of-month", min = 1, max = 31 },
  { key = "month", name = "month", min = 1, max = 12, names = MONTHS, kind = "month" },
  -- 7 is accepted as Sunday, but * and N/S end at Saturday: "1/2" is Mon, Wed, Fri
  { key = "dow", name = "day-of-week", min = 0, max = 7, last = 6, names = DAYS, kind = "day" },
}

-- One value of a field at pos: digits, or a name where the field has names. → value, next pos;
-- or nil, message.
local function value(field, item, pos)
  local digits, p = match(item, "^(%d+)()", pos)
  if digits then
    local v = tonumber(digits)
    if v < field.min or v > field.max then
      return nil, format("%s %s is out of range %d-%d", field.name, digits, field.min, field.max)
    end
    return v, p
  end
  local word
  word, p = match(item, "^(%a+)()", pos)
  if word then
    local v = field.names and field.names[upper(word)]
    if v then return v, p end
    if field.names then return nil, format("unknown %s name '%s'", field.kind, word) end
    return nil, format("%s '%s' is not a number", field.name, item)
  end
  if pos > #item then return nil, format("%s '%s' is missing a value", field.name, item) end
  return nil, format("%s '%s' has '%s' where a value should be", field.name, item, sub(item, pos))
end

-- One comma-list item into set (set[v] = true). → true, or nil, message.
local function item(field, text, set)
  if text == "" then return nil, format("%s has an empty list item", field.name) end
  local lo, hi, p, err
  local single = false -- a lone N, which a step stretches to the field's end
  if sub(text, 1, 1) == "*" then
    lo, hi, p = field.min, field.last or field.max, 2
  else
    lo, p = value(field, text, 1)
    if not lo then return nil, p end
    hi, single = lo, true
    if sub(text, p, p) == "-" then
      single = false
      hi, err = value(field, text, p + 1)
      if not hi then return nil, err end
      p = err
      if hi < lo then return nil, format("%s range %d-%d is backwards", field.name, lo, hi) end
    end
  end
  local step = 1
  if sub(text, p, p) == "/" then
    local digits, q = match(text, "^(%d+)()", p + 1)
    if not digits then return nil, format("%s '%s' needs a number after '/'", field.name, text) end
    step, p = tonumber(digits), q
    if step == 0 then return nil, format("%s '%s' has step 0; a step must be at least 1", field.name, text) end
    if single then hi = field.last or field.max end -- N/S: from N to the end
  end
  if p <= #text then
    return nil, format("%s '%s' has trailing junk '%s'", field.name, text, sub(text, p))
  end
  for v = lo, hi, step do set[v] = true end
  return true
end

-- A field's text → sorted list of its values, or nil, message.
local function parseField(field, text)
  local set = {}
  for part in gmatch(text .. ",", "([^,]*),") do
    local ok, err = item(field, part, set)
    if not ok then return nil, err end
  end
  if field.key == "dow" and set[7] then set[0], set[7] = true, nil end -- 7 is Sunday too
  local list = {}
  for v = field.min, field.max do
    if set[v] then list[#list + 1] = v end
  end
  return list
end

function M.parse(line)
  if type(line) ~= "string" then
    return nil, format("cron line must be a string, got %s", type(line))
  end
  local function fail(msg) return nil, format('cron "%s": %s', line, msg) end
  local words = {}
  for w in gmatch(line, "%S+") do words[#words + 1] = w end
  if #words ~= 5 and #words ~= 6 then
    return fail(format("expected 5 fields (or 6 with seconds first), got %d", #words))
  end
  local spec = { line = line, seconds = #words == 6 }
  if #words == 5 then table.insert(words, 1, "0") end
  for i, field in ipairs(FIELDS) do
    local list, err = parseField(field, words[i])
    if not list then return fail(err) end
    -- sets for matching, lists for the search
    local set = {}
    for _, v in ipairs(list) do set[v] = true end
    spec[field.key] = list
    spec[field.key .. "Set"] = set
  end
  spec.domStar = words[4] == "*" or words[4] == "*/1"
  spec.dowStar = words[6] == "*" or words[6] == "*/1"
  return spec
end

-- The first value of the sorted list at or above v, or nil.
local function atLeast(list, v)
  for i = 1, #list do
    if list[i] >= v then return list[i] end
  end
  return nil
end

local function dayMatches(spec, y, m, d)
  local dom = spec.domSet[d]
  local dow = spec.dowSet[(tz.fromCivil(y, m, d, 0, 0, 0) // 86400 + 4) % 7]
  if spec.domStar or spec.dowStar then return dom and dow end
  return dom or dow
end

-- The first civil time (seconds, local wall clock as if UTC) at or after c that the spec matches,
-- or nil past the horizon. Field by field: a field with no match left carries into the next
-- larger one, so a search never walks minute by minute.
local function nextCivil(spec, c)
  local t = civil(c)
  local y, mo, d, h, mi, s = t.year, t.month, t.day, t.hour, t.min, t.sec
  local lastYear = y + HORIZON_YEARS
  local function carry(yy, mm, dd, hh, mmi) -- normalises an overflowed time
    local n = civil(fromCivil(yy, mm, dd, hh, mmi, 0))
    return n.year, n.month, n.day, n.hour, n.min, 0
  end
  while y <= lastYear do
    local m2 = atLeast(spec.month, mo)
    if not m2 then
      y, mo, d, h, mi, s = y + 1, 1, 1, 0, 0, 0
    else
      if m2 ~= mo then mo, d, h, mi, s = m2, 1, 0, 0, 0 end
      local dim, d2 = daysInMonth(y, mo), nil
      for dd = d, dim do
        if dayMatches(spec, y, mo, dd) then d2 = dd; break end
      end
      if not d2 then
        y, mo, d, h, mi, s = carry(y, mo, dim + 1, 0, 0)
      else
        if d2 ~= d then d, h, mi, s = d2, 0, 0, 0 end
        local h2 = atLeast(spec.hour, h)
        if not h2 then
          y, mo, d, h, mi, s = carry(y, mo, d + 1, 0, 0)
        else
          if h2 ~= h then h, mi, s = h2, 0, 0 end
          local mi2 = atLeast(spec.minute, mi)
          if not mi2 then
            y, mo, d, h, mi, s = carry(y, mo, d, h + 1, 0)
          else
            if mi2 ~= mi then mi, s = mi2, 0 end
            local s2 = atLeast(spec.second, s)
            if s2 then return fromCivil(y, mo, d, h, mi, s2) end
            y, mo, d, h, mi, s = carry(y, mo, d, h, mi + 1)
          end
        end
      end
    end
  end
  return nil
end

function M.next(spec, zone, afterMs)
  if type(spec) ~= "table" or not spec.second then
    error("cron.next: spec must be a table from cron.parse, got " .. type(spec), 2)
  end
  if type(zone) ~= "table" or not zone.toUTC then
    error("cron.next: zone must be a zone from clank.jobs.tz.load, got " .. type(zone), 2)
  end
  if type(afterMs) ~= "number" or afterMs ~= afterMs then
    error("cron.next: afterMs must be a number of milliseconds, got " .. type(afterMs), 2)
  end
  local after = floor(afterMs)
  -- the first whole second whose millisecond is strictly after afterMs
  local from = after // 1000 + 1
  local c = from + zone:offset(from)
  while true do
    c = nextCivil(spec, c)
    if not c then return nil end
    -- A gap maps to its end, so the gap's ticks collapse into one; an overlap maps to its first
    -- pass, so a search that starts in the second pass skips the ticks already run.
    local utc = zone:toUTC(c)
    if utc >= from then return utc * 1000 end
    c = c + 1
  end
end

return M
