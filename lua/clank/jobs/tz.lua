-- clank.jobs.tz (issue 32): IANA time zones from the system's tzdata, so a job's schedule can
-- say "02:30 in Europe/Paris" and keep meaning it across daylight-saving changes. Pure Lua and
-- pure integer arithmetic: os.time/os.date follow the process's TZ, which is not the job's zone.
--
--   tz.load(name) → zone, or nil, err     "UTC" and "Etc/UTC" need no files; other names are read
--                                         from $TZDIR or /usr/share/zoneinfo (TZif, RFC 8536).
--   zone.name
--   zone:offset(utc) → seconds east of UTC at the instant utc (seconds since the epoch)
--   zone:toUTC(civil) → utc, "gap" | "overlap" | nil
--                                         civil: local wall time as seconds since 1970-01-01T00:00
--                                         as if it were UTC. An overlap gives the earlier instant,
--                                         a gap the instant it ends (the transition itself).
--   tz.civil(seconds) → { year, month, day, hour, min, sec, wday (0 = Sunday) }
--   tz.fromCivil(year, month, day, hour, min, sec) → seconds
local type, tonumber, error, setmetatable = type, tonumber, error, setmetatable
local format, sub, byte, find, match, gmatch, unpack = string.format, string.sub, string.byte,
  string.find, string.match, string.gmatch, string.unpack
local sort = table.sort
local open, getenv = io.open, os.getenv

local M = {}

local DAY = 86400
-- Offsets are within ±26 hours (RFC 8536 allows -89999..93599 s): local and UTC instants for the
-- same moment are never further apart than this.
local MAX_OFFSET = 93600

---------------------------------------------------------------------------------------------------
-- Proleptic Gregorian calendar (Howard Hinnant's days_from_civil / civil_from_days). Lua's // and
-- % floor, so the negative years' corrections of the C version are not needed.

local function daysFromCivil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = y // 400
  local yoe = y - era * 400
  local doy = (153 * (m > 2 and m - 3 or m + 9) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return era * 146097 + doe - 719468
end

local function civilFromDays(z)
  z = z + 719468
  local era = z // 146097
  local doe = z - era * 146097
  local yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
  local doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
  local mp = (5 * doy + 2) // 153
  local d = doy - (153 * mp + 2) // 5 + 1
  local m = mp < 10 and mp + 3 or mp - 9
  return yoe + era * 400 + (m <= 2 and 1 or 0), m, d
end

local function isLeap(y) return y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0) end

local function daysInMonth(y, m)
  if m == 2 then return isLeap(y) and 29 or 28 end
  return (m == 4 or m == 6 or m == 9 or m == 11) and 30 or 31
end

function M.civil(seconds)
  local days, rem = seconds // DAY, seconds % DAY
  local y, m, d = civilFromDays(days)
  return { year = y, month = m, day = d, hour = rem // 3600, min = rem % 3600 // 60, sec = rem % 60,
    wday = (days + 4) % 7 } -- 1970-01-01 was a Thursday
end

function M.fromCivil(year, month, day, hour, min, sec)
  return daysFromCivil(year, month, day) * DAY + (hour or 0) * 3600 + (min or 0) * 60 + (sec or 0)
end

M.daysInMonth = daysInMonth

---------------------------------------------------------------------------------------------------
-- The POSIX TZ string of a TZif footer (RFC 8536 §3.3): the rule for instants after the file's
-- last transition, e.g. "CET-1CEST,M3.5.0,M10.5.0/3" or "<+03>-3".

-- [+-]h[:mm[:ss]] at pos, hours at most maxHours → seconds, next pos; or nil.
local function parseHMS(s, pos, maxHours)
  local sign, h, p = match(s, "^([+-]?)(%d%d?%d?)()", pos)
  if not h then return nil end
  local v = tonumber(h) * 3600
  local mm, p2 = match(s, "^:(%d%d)()", p)
  if mm then
    v, p = v + tonumber(mm) * 60, p2
    local ss, p3 = match(s, "^:(%d%d)()", p)
    if ss then v, p = v + tonumber(ss), p3 end
    if tonumber(mm) > 59 or (ss and tonumber(ss) > 59) then return nil end
  end
  if tonumber(h) > maxHours then return nil end
  return sign == "-" and -v or v, p
end

-- An abbreviation: three or more letters, or <...> with letters, digits, + and - (e.g. "<+03>").
local function parseName(s, pos)
  local p = match(s, "^<[A-Za-z0-9+-][A-Za-z0-9+-][A-Za-z0-9+-]+>()", pos)
  if p then return p end
  return match(s, "^[A-Za-z][A-Za-z][A-Za-z]+()", pos)
end

-- A rule's date and time: Jn (1-365, February 29 never counted), n (0-365, counted) or Mm.w.d
-- (day d of week w of month m; week 5 is the last), then /time (local, default 02:00; RFC 8536
-- allows -167 to 167 hours, so a change can be written relative to a neighbouring day).
local function parseDate(s, pos)
  local date = {}
  local m, w, d, p = match(s, "^M(%d%d?)%.(%d)%.(%d)()", pos)
  if m then
    m, w, d = tonumber(m), tonumber(w), tonumber(d)
    if m < 1 or m > 12 or w < 1 or w > 5 or d > 6 then return nil end
    date.kind, date.month, date.week, date.wday = "M", m, w, d
  else
    local j, n
    j, n, p = match(s, "^(J?)(%d%d?%d?)()", pos)
    if not n then return nil end
    n = tonumber(n)
    if j == "J" then
      if n < 1 or n > 365 then return nil end
      date.kind = "J"
    elseif n > 365 then
      return nil
    else
      date.kind = "n"
    end
    date.n = n
  end
  date.time = 7200
  if sub(s, p, p) == "/" then
    date.time, p = parseHMS(s, p + 1, 167)
    if not date.time then return nil end
  end
  return date, p
end

local function parseFooter(s)
  local p = parseName(s, 1)
  if not p then return nil end
  local std
  std, p = parseHMS(s, p, 24)
  if not std then return nil end
  local rule = { stdoff = -std } -- POSIX offsets count hours west of Greenwich
  if p > #s then return rule end
  p = parseName(s, p)
  if not p then return nil end
  rule.dstoff = rule.stdoff + 3600
  if p <= #s and sub(s, p, p) ~= "," then
    local dst
    dst, p = parseHMS(s, p, 24)
    if not dst then return nil end
    rule.dstoff = -dst
  end
  if p > #s then
    -- POSIX leaves the default rule to the implementation; tzcode's is the US rule.
    rule.start = { kind = "M", month = 3, week = 2, wday = 0, time = 7200 }
    rule["end"] = { kind = "M", month = 11, week = 1, wday = 0, time = 7200 }
    return rule
  end
  if sub(s, p, p) ~= "," then return nil end
  rule.start, p = parseDate(s, p + 1)
  if not rule.start or sub(s, p, p) ~= "," then return nil end
  rule["end"], p = parseDate(s, p + 1)
  if not rule["end"] or p <= #s then return nil end
  return rule
end

-- The local day (days since the epoch) of a rule's date in year y.
local function ruleDay(date, y)
  if date.kind == "J" then
    return daysFromCivil(y, 1, 1) + date.n - 1 + ((isLeap(y) and date.n >= 60) and 1 or 0)
  elseif date.kind == "n" then
    return daysFromCivil(y, 1, 1) + date.n
  end
  local first = daysFromCivil(y, date.month, 1)
  local day = first + (date.wday - (first + 4) % 7) % 7 + (date.week - 1) * 7
  local last = first + daysInMonth(y, date.month) - 1
  while day > last do day = day - 7 end -- week 5: the last such weekday of the month
  return day
end

-- Appends the rule's changes in years y1..y2 to list as { utc, offset, seq }. DST starts at a
-- standard-time wall clock and ends at a daylight-time one.
local function ruleChanges(rule, y1, y2, list)
  for y = y1, y2 do
    local s = ruleDay(rule.start, y) * DAY + rule.start.time - rule.stdoff
    local e = ruleDay(rule["end"], y) * DAY + rule["end"].time - rule.dstoff
    list[#list + 1] = { s, rule.dstoff, #list + 1 }
    list[#list + 1] = { e, rule.stdoff, #list + 1 }
  end
  return list
end

-- Sorts changes by instant; of those at one instant the last added wins, so "DST all year"
-- rules (RFC 8536 §3.3.1: this year's end and next year's start coincide) stay in DST.
local function byInstant(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] end
  return a[3] < b[3]
end

local function yearOf(utc) return (civilFromDays(utc // DAY)) end

local function ruleOffset(rule, utc)
  if not rule.dstoff then return rule.stdoff end
  local y = yearOf(utc)
  local list = ruleChanges(rule, y - 1, y + 1, {})
  sort(list, byInstant)
  local off = rule.stdoff
  for i = 1, #list do
    if list[i][1] > utc then break end
    off = list[i][2]
  end
  return off
end

---------------------------------------------------------------------------------------------------
-- Zones

local Zone = {}
Zone.__index = Zone

-- The index of the last transition at or before utc, or 0.
local function lastTransition(trans, utc)
  local lo, hi = 1, #trans
  local found = 0
  while lo <= hi do
    local mid = (lo + hi) // 2
    if trans[mid] <= utc then found, lo = mid, mid + 1 else hi = mid - 1 end
  end
  return found
end

function Zone:offset(utc)
  if type(utc) ~= "number" then
    error(format("zone:offset: utc must be a number of seconds, got %s", type(utc)), 2)
  end
  local trans = self.trans
  local i = lastTransition(trans, utc)
  if i == #trans and self.rule then
    -- after the last transition (or in a file without any) the footer's rule says
    return ruleOffset(self.rule, utc)
  elseif i == 0 then
    return self.offs[1] -- before the first transition: time type 0 (RFC 8536 §3.2)
  end
  return self.offs[i + 1]
end

-- The offset in force at a and the changes { utc, offset } in (a, b], sorted, each a real change
-- of offset (abbreviation-only and isdst-only transitions do not move the wall clock).
local function changes(zone, a, b)
  local list = {}
  local trans, offs = zone.trans, zone.offs
  local n = #trans
  for i = lastTransition(trans, a) + 1, n do
    if trans[i] > b then break end
    list[#list + 1] = { trans[i], offs[i + 1], #list + 1 }
  end
  local rule = zone.rule
  if rule and rule.dstoff and (n == 0 or trans[n] < b) then
    -- the rule governs after the last transition
    local from = (n > 0 and trans[n] > a) and trans[n] or a
    local ruled = ruleChanges(rule, yearOf(from) - 1, yearOf(b) + 1, {})
    for i = 1, #ruled do
      local c = ruled[i]
      if c[1] > from and c[1] <= b then c[3] = #list + 1; list[#list + 1] = c end
    end
  end
  sort(list, byInstant)
  local merged = {}
  for i = 1, #list do -- several at one instant: the last one counts
    local c = list[i]
    if merged[#merged] and merged[#merged][1] == c[1] then merged[#merged] = c
    else merged[#merged + 1] = c end
  end
  local off0 = zone:offset(a)
  local out, prev = {}, off0
  for i = 1, #merged do
    local c = merged[i]
    if c[2] ~= prev then out[#out + 1] = { c[1], c[2] }; prev = c[2] end
  end
  return off0, out
end

function Zone:toUTC(civil)
  if type(civil) ~= "number" then
    error(format("zone:toUTC: civil must be a number of seconds, got %s", type(civil)), 2)
  end
  local a, b = civil - MAX_OFFSET - DAY, civil + MAX_OFFSET + DAY
  local off0, list = changes(self, a, b)
  -- Each stretch between changes has one offset o; civil - o is a solution when it falls inside
  -- the stretch. None: a gap. Two or more: an overlap.
  local first, count = nil, 0
  for i = 0, #list do
    local off = i == 0 and off0 or list[i][2]
    local from = i == 0 and a or list[i][1]
    local to = list[i + 1] and list[i + 1][1] or b + 1
    local u = civil - off
    if u >= from and u < to then
      count = count + 1
      if not first then first = u end
    end
  end
  if count == 1 then return first end
  if count > 1 then return first, "overlap" end
  for i = 1, #list do
    local before = i == 1 and off0 or list[i - 1][2]
    local t = list[i][1]
    if t + before <= civil and civil < t + list[i][2] then return t, "gap" end
  end
  return civil - off0 -- not reached: a wall time is either taken or skipped
end

local function fixed(name, off)
  return setmetatable({ name = name, trans = {}, offs = { off }, rule = { stdoff = off } }, Zone)
end

---------------------------------------------------------------------------------------------------
-- TZif files (RFC 8536): a version 1 block with 32-bit times, then (version 2 and later) the same
-- with 64-bit times and the footer.

local function parseTZif(data)
  if sub(data, 1, 4) ~= "TZif" then return nil, "is not a TZif file" end
  local version = byte(data, 5)
  local function header(pos)
    if #data < pos + 43 then return nil end
    local isut, isstd, leap, timecnt, typecnt, charcnt = unpack(">I4I4I4I4I4I4", data, pos + 20)
    return { isut = isut, isstd = isstd, leap = leap, timecnt = timecnt, typecnt = typecnt,
      charcnt = charcnt }, pos + 44
  end
  local h, pos = header(1)
  if not h then return nil, "is truncated" end
  local tsize = 4
  if version and version >= byte("2") then
    -- skip the 32-bit block: the 64-bit one holds the same and more
    pos = pos + h.timecnt * 5 + h.typecnt * 6 + h.charcnt + h.leap * 8 + h.isstd + h.isut
    h, pos = header(pos)
    if not h then return nil, "is truncated" end
    if sub(data, pos - 44, pos - 41) ~= "TZif" then return nil, "has no version 2 header" end
    tsize = 8
  end
  if h.leap > 0 then return nil, "counts leap seconds (a right/ zone), which is not supported" end
  if h.typecnt == 0 then return nil, "has no local time types" end
  local size = h.timecnt * (tsize + 1) + h.typecnt * 6 + h.charcnt + h.isstd + h.isut
  if #data < pos + size - 1 then return nil, "is truncated" end
  local tfmt = tsize == 8 and ">i8" or ">i4"
  local trans, idx = {}, {}
  for i = 1, h.timecnt do
    trans[i] = unpack(tfmt, data, pos + (i - 1) * tsize)
    if i > 1 and trans[i] <= trans[i - 1] then return nil, "has transitions out of order" end
  end
  pos = pos + h.timecnt * tsize
  for i = 1, h.timecnt do
    idx[i] = byte(data, pos + i - 1)
    if idx[i] >= h.typecnt then return nil, "has a transition to a local time type it lacks" end
  end
  pos = pos + h.timecnt
  local types = {}
  for i = 0, h.typecnt - 1 do
    local off = unpack(">i4", data, pos + i * 6)
    if off < -89999 or off > 93599 then return nil, "has an offset out of range" end
    types[i] = off
  end
  pos = pos + size - h.timecnt * (tsize + 1)
  -- offs[1]: type 0, in force before the first transition; offs[i + 1]: after transition i
  local offs = { types[0] }
  for i = 1, h.timecnt do offs[i + 1] = types[idx[i]] end
  local rule
  if tsize == 8 then
    local footer = match(data, "^\n([^\n]*)\n", pos)
    if not footer then return nil, "has no footer" end
    if footer ~= "" then
      rule = parseFooter(footer)
      if not rule then return nil, format("has a TZ footer that does not parse: %q", footer) end
    end
  end
  return { trans = trans, offs = offs, rule = rule }
end

---------------------------------------------------------------------------------------------------

local cache = { -- tzdata does not change under a running process, so zones are kept per name
  ["UTC"] = fixed("UTC", 0),
  ["Etc/UTC"] = fixed("Etc/UTC", 0),
}

local ENOENT, ENOTDIR, EISDIR = 2, 20, 21

-- Names are paths under the tzdata directory: words of [A-Za-z0-9_+-] joined by single slashes,
-- so nothing absolute and nothing that climbs out of it.
local function validName(name)
  if find(name, "..", 1, true) then return false end
  for part in gmatch(name .. "/", "([^/]*)/") do
    if not match(part, "^[A-Za-z0-9_+-]+$") then return false end
  end
  return true
end

function M.load(name)
  if type(name) ~= "string" then
    return nil, format("time zone name must be a string, got %s", type(name))
  end
  local zone = cache[name]
  if zone then return zone end
  if not validName(name) then return nil, format("invalid time zone name '%s'", name) end
  local dir = getenv("TZDIR")
  if dir == nil or dir == "" then dir = "/usr/share/zoneinfo" end
  local path = dir .. "/" .. name
  local f, err, code = open(path, "rb")
  if not f then
    if code == ENOENT or code == ENOTDIR then return nil, format("unknown time zone '%s'", name) end
    return nil, format("time zone '%s': cannot read %s", name, err)
  end
  local data, rerr, rcode = f:read("a")
  f:close()
  if not data then
    if rcode == EISDIR then return nil, format("unknown time zone '%s'", name) end -- e.g. "Europe"
    return nil, format("time zone '%s': cannot read %s: %s", name, path, rerr)
  end
  local parsed, why = parseTZif(data)
  if not parsed then return nil, format("time zone '%s': %s %s", name, path, why) end
  parsed.name = name
  zone = setmetatable(parsed, Zone)
  cache[name] = zone
  return zone
end

return M
