-- clank.jobs.tz (issue 32): the calendar arithmetic, zones from the system's tzdata on both sides
-- of their daylight-saving changes (table years and, after 2037, the TZif footer's rule), wall
-- times in gaps and overlaps, and names and files that are refused. Expected instants are written
-- by hand from the rules and were checked against GNU date (TZ=<zone> date -d @<seconds>).
local tz = require "clank.jobs.tz"

local HOUR = 3600

describe("clank.jobs.tz calendar", function()
  -- { y, m, d, h, mi, s, seconds, wday }; seconds from `date -ud '<date>' +%s`
  local DATES = {
    { 1970, 1, 1, 0, 0, 0, 0, 4 },
    { 1969, 12, 31, 23, 59, 59, -1, 3 },
    { 2000, 2, 29, 12, 34, 56, 951827696, 2 },
    { 1900, 3, 1, 0, 0, 0, -2203891200, 4 }, -- 1900 is not a leap year
    { 2100, 3, 1, 0, 0, 0, 4107542400, 1 }, -- nor is 2100
    { 1600, 2, 29, 0, 0, 0, -11670998400, 2 }, -- 1600 is
    { 2026, 7, 1, 10, 0, 0, 1782900000, 3 },
    { 2038, 1, 19, 3, 14, 8, 2147483648, 2 }, -- one past the 32-bit end
  }
  for _, c in ipairs(DATES) do
    local label = string.format("%04d-%02d-%02dT%02d:%02d:%02d", table.unpack(c, 1, 6))
    it("fromCivil and civil agree with " .. label .. " = " .. c[7], function()
      assert.are.equal(c[7], tz.fromCivil(c[1], c[2], c[3], c[4], c[5], c[6]))
      assert.are.same({ year = c[1], month = c[2], day = c[3], hour = c[4], min = c[5], sec = c[6],
        wday = c[8] }, tz.civil(c[7]))
    end)
  end

  it("keeps integers integers", function()
    assert.are.equal("integer", math.type(tz.fromCivil(2026, 3, 29, 2, 30, 0)))
    assert.are.equal("integer", math.type(tz.civil(1774746000).hour))
  end)

  it("round-trips every day from 1899 to 2101", function()
    local days = (tz.fromCivil(2101, 12, 31, 0, 0, 0) - tz.fromCivil(1899, 1, 1, 0, 0, 0)) // 86400
    local start = tz.fromCivil(1899, 1, 1, 0, 0, 0)
    local prev = tz.civil(start - 86400)
    for i = 0, days do
      local c = tz.civil(start + i * 86400)
      assert(tz.fromCivil(c.year, c.month, c.day, 0, 0, 0) == start + i * 86400)
      assert(c.wday == (prev.wday + 1) % 7)
      prev = c
    end
  end)
end)

describe("clank.jobs.tz.load", function()
  it("has UTC and Etc/UTC without files", function()
    for _, name in ipairs({ "UTC", "Etc/UTC" }) do
      local z = assert(tz.load(name))
      assert.are.equal(name, z.name)
      assert.are.equal(0, z:offset(1774746000))
      assert.are.equal(0, z:offset(-5000000000))
      assert.are.equal(1774746000, (z:toUTC(1774746000)))
      assert.is_nil(select(2, z:toUTC(1774746000)))
    end
  end)

  it("caches a zone per name", function()
    assert.are.equal(tz.load("Europe/Paris"), tz.load("Europe/Paris"))
    assert.are.equal("Europe/Paris", tz.load("Europe/Paris").name)
  end)

  it("does not know Mars/Olympus", function()
    local z, err = tz.load("Mars/Olympus")
    assert.is_nil(z)
    assert.are.equal("unknown time zone 'Mars/Olympus'", err)
  end)

  it("takes a directory of zones for no zone", function()
    assert.are.same({ nil, "unknown time zone 'Europe'" }, { tz.load("Europe") })
  end)

  for _, name in ipairs({ "../../etc/passwd", "Europe/../../etc/passwd", "..", "/etc/localtime",
    "Europe//Paris", "Europe/", "Europe/Paris\0", "Europe/Par is", "" }) do
    it(string.format("refuses the name %q", name), function()
      local z, err = tz.load(name)
      assert.is_nil(z)
      assert.are.equal("invalid time zone name '" .. name .. "'", err)
    end)
  end

  it("refuses a name that is not a string", function()
    assert.are.same({ nil, "time zone name must be a string, got nil" }, { tz.load(nil) })
  end)

  it("refuses files that are not TZif, naming them", function()
    local z, err = tz.load("leapseconds") -- a text file in tzdata
    assert.is_nil(z)
    assert.matches("^time zone 'leapseconds': .*/leapseconds is not a TZif file$", err)
  end)
end)

-- Offsets one second before and at each change: { zone, instant of the change, before, after }.
local CHANGES = {
  -- 2026-03-29T01:00:00Z: Paris 02:00 CET → 03:00 CEST
  { "Europe/Paris", 1774746000, 1 * HOUR, 2 * HOUR },
  -- 2026-10-25T01:00:00Z: Paris 03:00 CEST → 02:00 CET
  { "Europe/Paris", 1792890000, 2 * HOUR, 1 * HOUR },
  -- 2026-03-08T07:00:00Z: New York 02:00 EST → 03:00 EDT
  { "America/New_York", 1772953200, -5 * HOUR, -4 * HOUR },
  -- 2026-11-01T06:00:00Z: New York 02:00 EDT → 01:00 EST
  { "America/New_York", 1793512800, -4 * HOUR, -5 * HOUR },
  -- After 2037 the files' tables end and their footers' rules say. 2040-03-25 and 2040-10-28
  -- are the last Sundays of March and October, at 01:00Z (M3.5.0 and M10.5.0/3 in CET).
  { "Europe/Paris", 2216250000, 1 * HOUR, 2 * HOUR },
  { "Europe/Paris", 2234998800, 2 * HOUR, 1 * HOUR },
  -- 2040-03-11 and 2040-11-04, the second Sunday of March and the first of November, 02:00 local
  { "America/New_York", 2215062000, -5 * HOUR, -4 * HOUR },
  { "America/New_York", 2235621600, -4 * HOUR, -5 * HOUR },
  -- IST-2IDT,M3.4.4/26,M10.5.0: the fourth Thursday of March (22nd) at 26:00, i.e. Friday 02:00
  { "Asia/Jerusalem", 2216073600, 2 * HOUR, 3 * HOUR },
  { "Asia/Jerusalem", 2234991600, 3 * HOUR, 2 * HOUR },
  -- <-02>2<-01>,M3.5.0/-1,M10.5.0/0: a negative time, Saturday 23:00 before the last Sunday
  { "America/Nuuk", 2216250000, -2 * HOUR, -1 * HOUR },
  { "America/Nuuk", 2234998800, -1 * HOUR, -2 * HOUR },
  -- <-04>4<-03>,M9.1.6/24,M4.1.6/24: 24:00 on the first Saturdays of September and April
  { "America/Santiago", 2230171200, -4 * HOUR, -3 * HOUR },
  { "America/Santiago", 2217466800, -3 * HOUR, -4 * HOUR },
  -- IST-1GMT0,M10.5.0,M3.5.0/1: standard time in summer, "daylight" time (GMT) in winter
  { "Europe/Dublin", 2216250000, 0, 1 * HOUR },
  { "Europe/Dublin", 2234998800, 1 * HOUR, 0 },
  -- <+1245>-12:45<+1345>,M9.5.0/2:45,M4.1.0/3:45: offsets and times with minutes
  { "Pacific/Chatham", 2232540000, 12 * HOUR + 45 * 60, 13 * HOUR + 45 * 60 },
  { "Pacific/Chatham", 2216815200, 13 * HOUR + 45 * 60, 12 * HOUR + 45 * 60 },
}

describe("zone:offset", function()
  for _, c in ipairs(CHANGES) do
    it(string.format("%s at %d: %d before, %d from then", c[1], c[2], c[3], c[4]), function()
      local z = assert(tz.load(c[1]))
      assert.are.equal(c[3], z:offset(c[2] - 1))
      assert.are.equal(c[4], z:offset(c[2]))
      assert.are.equal(c[4], z:offset(c[2] + 3600))
    end)
  end

  it("gives fixed zones from their footers", function()
    assert.are.equal(5 * HOUR + 30 * 60, tz.load("Asia/Kolkata"):offset(2216250000))
    assert.are.equal(3 * HOUR + 30 * 60, tz.load("Asia/Tehran"):offset(2216250000))
    assert.are.equal(-3 * HOUR, tz.load("America/Sao_Paulo"):offset(2216250000))
  end)

  it("refuses a time that is not a number", function()
    assert.has_error(function() tz.load("UTC"):offset("now") end,
      "zone:offset: utc must be a number of seconds, got string")
  end)
end)

describe("zone:toUTC", function()
  local civil = tz.fromCivil
  -- { zone, local wall time, expected UTC instant, "gap" | "overlap" | nil }
  local CASES = {
    -- Paris, 2026-03-29: 02:00-02:59:59 does not exist; the gap ends at 03:00 CEST = 01:00Z
    { "Europe/Paris", { 2026, 3, 29, 1, 59, 59 }, 1774745999 },
    { "Europe/Paris", { 2026, 3, 29, 2, 0, 0 }, 1774746000, "gap" },
    { "Europe/Paris", { 2026, 3, 29, 2, 30, 0 }, 1774746000, "gap" },
    { "Europe/Paris", { 2026, 3, 29, 2, 59, 59 }, 1774746000, "gap" },
    { "Europe/Paris", { 2026, 3, 29, 3, 0, 0 }, 1774746000 },
    -- Paris, 2026-10-25: 02:00-02:59:59 twice; the earlier is CEST (00:00Z-00:59:59Z)
    { "Europe/Paris", { 2026, 10, 25, 1, 59, 59 }, 1792886399 },
    { "Europe/Paris", { 2026, 10, 25, 2, 0, 0 }, 1792886400, "overlap" },
    { "Europe/Paris", { 2026, 10, 25, 2, 30, 0 }, 1792888200, "overlap" },
    { "Europe/Paris", { 2026, 10, 25, 2, 59, 59 }, 1792889999, "overlap" },
    { "Europe/Paris", { 2026, 10, 25, 3, 0, 0 }, 1792893600 },
    -- an ordinary summer noon: 12:00 CEST = 10:00Z
    { "Europe/Paris", { 2026, 7, 1, 12, 0, 0 }, 1782900000 },
    -- New York, 2026-03-08 02:30 does not exist: 03:00 EDT = 07:00Z
    { "America/New_York", { 2026, 3, 8, 2, 30, 0 }, 1772953200, "gap" },
    -- New York, 2026-11-01 01:30 twice: EDT first, 05:30Z
    { "America/New_York", { 2026, 11, 1, 1, 30, 0 }, 1793511000, "overlap" },
    { "America/New_York", { 2026, 11, 1, 2, 0, 0 }, 1793516400 },
    -- after 2037, from the footer: Paris 2040-03-25 02:30 and 2040-10-28 02:30
    { "Europe/Paris", { 2040, 3, 25, 2, 30, 0 }, 2216250000, "gap" },
    { "Europe/Paris", { 2040, 10, 28, 2, 30, 0 }, 2234997000, "overlap" },
    -- a gap of 30 minutes... in Lord Howe the clocks go 02:00 → 02:30 (+10:30 → +11)
    { "Australia/Lord_Howe", { 2040, 10, 7, 2, 15, 0 }, 2233150200, "gap" },
  }
  for _, c in ipairs(CASES) do
    local label = string.format("%s %04d-%02d-%02d %02d:%02d:%02d → %d %s", c[1], c[2][1], c[2][2],
      c[2][3], c[2][4], c[2][5], c[2][6], c[3], c[4] or "")
    it(label, function()
      local z = assert(tz.load(c[1]))
      local u, kind = z:toUTC(civil(table.unpack(c[2])))
      assert.are.equal(c[3], u)
      assert.are.equal(c[4], kind)
    end)
  end
end)

-- Hand-made TZif files, read through $TZDIR by a child lua5.4 (the module reads TZDIR when it
-- loads a zone; a child has its own environment).
describe("TZif files in $TZDIR", function()
  local dir

  -- A TZif file: types (offsets), transitions { instant, type index }, footer; version "2" or
  -- "\0" (version 1: 32-bit times and no footer).
  local function tzif(version, types, transitions, footer)
    local function block(tfmt)
      local parts = { "TZif", version, string.rep("\0", 15),
        string.pack(">I4I4I4I4I4I4", 0, 0, 0, #transitions, #types, 4) }
      for _, t in ipairs(transitions) do parts[#parts + 1] = string.pack(tfmt, t[1]) end
      for _, t in ipairs(transitions) do parts[#parts + 1] = string.char(t[2]) end
      for _, off in ipairs(types) do parts[#parts + 1] = string.pack(">i4BB", off, 0, 0) end
      parts[#parts + 1] = "XYZ\0"
      return table.concat(parts)
    end
    if version == "\0" then return block(">i4") end
    return block(">i4") .. block(">i8") .. "\n" .. footer .. "\n"
  end

  local function write(name, data)
    local f = assert(io.open(dir .. "/" .. name, "wb"))
    f:write(data)
    f:close()
  end

  -- Runs code (with `tz` and `show` in scope) in a child lua5.4 with TZDIR=dir; → its stdout.
  local function child(code)
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write("package.path = ", string.format("%q", package.path), "\n",
      "local tz = require 'clank.jobs.tz'\n",
      -- show(...): its arguments on one line, separated by spaces
      "local function show(...) local t = table.pack(...) for i = 1, t.n do t[i] = tostring(t[i]) end ",
      "io.write(table.concat(t, ' ', 1, t.n), '\\n') end\n", code)
    f:close()
    local p = assert(io.popen("TZDIR=" .. dir .. " lua5.4 " .. script .. " 2>&1"))
    local out = p:read("a")
    p:close()
    os.remove(script)
    return out
  end

  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir .. "/Test"))
    write("Test/Fixed", tzif("2", { 3 * HOUR }, {}, "<+03>-3"))
    -- RFC 8536 §3.3.1: DST all year when it starts Jan 1 00:00 and ends Dec 31 24:00 + 1 hour
    write("Test/AllYearDST", tzif("2", { -5 * HOUR }, {}, "EST5EDT,0/0,J365/25"))
    -- J60 is March 1 in every year; 300 (zero-based, Feb 29 counted) is Oct 27 in 2028, Oct 28 in
    -- 2027. DST from 00:00 XST (-03) to 02:00 XDT (-02).
    write("Test/Julian", tzif("2", { -3 * HOUR }, {}, "XST3XDT,J60/0,300"))
    -- version 1: one transition at 0 from +00:00 to +01:00, then that for ever
    write("Test/V1", tzif("\0", { 0, HOUR }, { { 0, 1 } }))
    -- a table then an empty footer: the last type stays
    write("Test/NoRule", tzif("2", { 0, 2 * HOUR }, { { 1000, 1 } }, ""))
    write("Test/Truncated", tzif("2", { 0, HOUR }, { { 0, 1 } }, "XYZ-1"):sub(1, 60))
    write("Test/BadFooter", tzif("2", { 0 }, {}, "not a rule"))
    write("Test/NotTZif", "hello\n")
  end)

  teardown(function()
    if dir then os.execute("rm -rf " .. dir) end
  end)

  it("reads zones from $TZDIR, and only from there", function()
    assert.are.equal("10800 10800 10800\nunknown time zone 'Europe/Paris'\n", child([[
      local z = assert(tz.load("Test/Fixed"))
      show(z:offset(-4000000000), z:offset(0), z:offset(4000000000))
      show(select(2, tz.load("Europe/Paris")))
    ]]))
  end)

  it("keeps DST all year for 0/0,J365/25", function()
    -- 2029-12-31 23:59:59 and 2030-01-01 00:00:00 EDT; 2030-01-01T05:00Z, where 2029's end and
    -- 2030's start meet, and a second before; 2030-06-01T05:00Z; 2031-01-01T05:00Z
    assert.are.equal("-14400 -14400 -14400 -14400 -14400 -14400\n", child([[
      local z = assert(tz.load("Test/AllYearDST"))
      show(z:offset(1893470399), z:offset(1893470400), z:offset(1893473999), z:offset(1893474000),
        z:offset(1906520400), z:offset(1925010000))
    ]]))
  end)

  it("reads Jn and zero-based n dates, with and without a leap day", function()
    -- 2027-03-01T03:00Z, 2027-10-28T04:00Z, 2028-03-01T03:00Z, 2028-10-27T04:00Z
    assert.are.equal("-10800 -7200 -7200 -10800 -10800 -7200 -7200 -10800\n", child([[
      local z = assert(tz.load("Test/Julian"))
      local out = {}
      for _, u in ipairs({ 1803870000, 1824696000, 1835492400, 1856232000 }) do
        out[#out + 1] = z:offset(u - 1)
        out[#out + 1] = z:offset(u)
      end
      show(table.concat(out, " "))
    ]]))
  end)

  it("reads version 1 files and tables without a footer rule", function()
    assert.are.equal("0 3600 3600\n0 7200 7200\n", child([[
      local v1 = assert(tz.load("Test/V1"))
      show(v1:offset(-1), v1:offset(0), v1:offset(4000000000))
      local nr = assert(tz.load("Test/NoRule"))
      show(nr:offset(999), nr:offset(1000), nr:offset(4000000000))
    ]]))
  end)

  it("refuses bad files, naming them", function()
    local out = child([[
      for _, name in ipairs({ "Test/Truncated", "Test/BadFooter", "Test/NotTZif" }) do
        show(select(2, tz.load(name)))
      end
    ]])
    assert.are.equal(table.concat({
      "time zone 'Test/Truncated': " .. dir .. "/Test/Truncated is truncated",
      "time zone 'Test/BadFooter': " .. dir .. '/Test/BadFooter has a TZ footer that does not parse: "not a rule"',
      "time zone 'Test/NotTZif': " .. dir .. "/Test/NotTZif is not a TZif file",
    }, "\n") .. "\n", out)
  end)
end)
