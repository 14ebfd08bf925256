-- clank.jobs.cron (issue 32): parsing cron lines, and their next ticks in a zone across
-- daylight-saving changes (gaps run once at their end, overlaps only on the first pass), leap
-- days, the day-of-month/day-of-week OR rule, and lines that never match. The expected ticks are
-- written by hand from the rules (and were checked with GNU date, TZ=<zone> date -d @<seconds>).
local cron = require "clank.jobs.cron"
local tz = require "clank.jobs.tz"

local UTC = assert(tz.load("UTC"))
local PARIS = assert(tz.load("Europe/Paris"))
local NEW_YORK = assert(tz.load("America/New_York"))

-- "2026-03-08T07:00:00Z" (optionally with .mmm) ↔ epoch milliseconds
local function ms(iso)
  local y, mo, d, h, mi, s, frac = iso:match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)%.?(%d*)Z$")
  assert(y, "bad ISO time " .. iso)
  local n = tonumber
  return tz.fromCivil(n(y), n(mo), n(d), n(h), n(mi), n(s)) * 1000 + (frac ~= "" and n(frac) or 0)
end
local function iso(t)
  local c = tz.civil(t // 1000)
  return string.format("%04d-%02d-%02dT%02d:%02d:%02dZ", c.year, c.month, c.day, c.hour, c.min, c.sec)
    .. (t % 1000 ~= 0 and string.format("+%dms", t % 1000) or "")
end

-- The first n ticks of line in zone after the ISO time from, as ISO times (nil where it ends).
local function ticks(line, zone, from, n)
  local spec = assert(cron.parse(line))
  local out, t = {}, ms(from)
  for i = 1, n do
    t = cron.next(spec, zone, t)
    if not t then break end
    out[i] = iso(t)
  end
  return out
end

describe("cron.parse", function()
  local function fields(line)
    local spec = assert(cron.parse(line))
    return { spec.second, spec.minute, spec.hour, spec.dom, spec.month, spec.dow }
  end

  it("reads five fields, the seconds then being 0", function()
    local spec = assert(cron.parse("30 2 * * *"))
    assert.are.same({ 0 }, spec.second)
    assert.are.same({ 30 }, spec.minute)
    assert.are.same({ 2 }, spec.hour)
    assert.are.equal(31, #spec.dom)
    assert.are.equal(12, #spec.month)
    assert.are.same({ 0, 1, 2, 3, 4, 5, 6 }, spec.dow)
    assert.is_false(spec.seconds)
    assert.are.equal("30 2 * * *", spec.line)
  end)

  it("reads six fields with the seconds first", function()
    local spec = assert(cron.parse("*/20 0 12 * * *"))
    assert.are.same({ 0, 20, 40 }, spec.second)
    assert.are.same({ 0 }, spec.minute)
    assert.are.same({ 12 }, spec.hour)
    assert.is_true(spec.seconds)
  end)

  it("takes any blanks between fields", function()
    assert.are.same(fields("0 12 * * 1"), fields("  0\t12  *\t* 1 "))
  end)

  it("reads ranges, steps and lists", function()
    assert.are.same({ 10, 25, 40 }, fields("10-40/15 * * * *")[2])
    assert.are.same({ 7, 27, 47 }, fields("7/20 * * * *")[2]) -- N/S: from N to 59
    assert.are.same({ 0, 20, 40 }, fields("*/20 * * * *")[2])
    assert.are.same({ 1, 2, 3, 4, 5, 10, 50, 51, 52 }, fields("1-5,10,50-52 * * * *")[2])
    assert.are.same({ 5 }, fields("5-5/2 * * * *")[2]) -- a range, however short, is not N/S
    assert.are.same({ 0 }, fields("*/90 * * * *")[2])
    assert.are.same({ 0, 6, 12, 18 }, fields("0 */6 * * *")[3])
    assert.are.same({ 1, 11, 21, 31 }, fields("0 0 1/10 * *")[4])
    assert.are.same({ 3, 6, 9, 12 }, fields("0 0 1 MAR/3 *")[5])
    assert.are.same({ 1, 3, 5 }, fields("0 0 * * 1/2")[6]) -- to Saturday: 7 is only a spelling
    assert.are.same({ 0, 2, 4, 6 }, fields("0 0 * * */2")[6])
    assert.are.same({ 1, 2, 3, 5, 8, 13, 21, 34 }, fields("1,2,3,5,8,13,21,34,21 * * * *")[2])
  end)

  it("reads month and day names in any case", function()
    assert.are.same(fields("0 9 * 1,7 1-5"), fields("0 9 * JAN,jul mon-FRI"))
    assert.are.same(fields("0 0 * 2-4 0,6"), fields("0 0 * Feb-Apr sat,Sun"))
    assert.are.same({ 12 }, fields("0 0 1 dec *")[5])
  end)

  it("takes 0 and 7 both for Sunday", function()
    assert.are.same({ 0 }, fields("0 0 * * 7")[6])
    assert.are.same({ 0 }, fields("0 0 * * 0")[6])
    assert.are.same({ 0 }, fields("0 0 * * SUN")[6])
    assert.are.same({ 0, 5, 6 }, fields("0 0 * * 5-7")[6])
    assert.are.same({ 0, 1, 2, 3, 4, 5, 6 }, fields("0 0 * * 0-7")[6])
  end)

  local ERRORS = {
    { "* * * *", "expected 5 fields (or 6 with seconds first), got 4" },
    { "0 0 0 * * * *", "expected 5 fields (or 6 with seconds first), got 7" },
    { "", "expected 5 fields (or 6 with seconds first), got 0" },
    { "61 * * * *", "minute 61 is out of range 0-59" },
    { "60 * * * * *", "second 60 is out of range 0-59" },
    { "0 24 * * *", "hour 24 is out of range 0-23" },
    { "0 0 0 * *", "day-of-month 0 is out of range 1-31" },
    { "0 0 32 * *", "day-of-month 32 is out of range 1-31" },
    { "0 0 * 13 *", "month 13 is out of range 1-12" },
    { "0 0 * 0 *", "month 0 is out of range 1-12" },
    { "0 0 * * 8", "day-of-week 8 is out of range 0-7" },
    { "0 0-99 * * *", "hour 99 is out of range 0-23" },
    { "*/0 * * * *", "minute '*/0' has step 0; a step must be at least 1" },
    { "0 0 1-10/0 * *", "day-of-month '1-10/0' has step 0; a step must be at least 1" },
    { "5/0 * * * *", "minute '5/0' has step 0; a step must be at least 1" },
    { "5-2 * * * *", "minute range 5-2 is backwards" },
    { "0 0 * DEC-JAN *", "month range 12-1 is backwards" },
    { "0 0 * * FRI-MON", "day-of-week range 5-1 is backwards" },
    { "0 0 * FOO *", "unknown month name 'FOO'" },
    { "0 0 * * funday", "unknown day name 'funday'" },
    { "0 0 * JANUARY *", "unknown month name 'JANUARY'" },
    { "MON * * * *", "minute 'MON' is not a number" },
    { "0 0 L * *", "day-of-month 'L' is not a number" },
    { "1,,2 * * * *", "minute has an empty list item" },
    { "0 0 1, * *", "day-of-month has an empty list item" },
    { ", * * * *", "minute has an empty list item" },
    { "5x * * * *", "minute '5x' has trailing junk 'x'" },
    { "1-2-3 * * * *", "minute '1-2-3' has trailing junk '-3'" },
    { "*/5/2 * * * *", "minute '*/5/2' has trailing junk '/2'" },
    { "*-5 * * * *", "minute '*-5' has trailing junk '-5'" },
    { "0 0 * * 5#2", "day-of-week '5#2' has trailing junk '#2'" },
    { "5- * * * *", "minute '5-' is missing a value" },
    { "-5 * * * *", "minute '-5' has '-5' where a value should be" },
    { "? * * * *", "minute '?' has '?' where a value should be" },
    { "*/ * * * *", "minute '*/' needs a number after '/'" },
  }
  for _, e in ipairs(ERRORS) do
    it(string.format("refuses %q: %s", e[1], e[2]), function()
      local spec, err = cron.parse(e[1])
      assert.is_nil(spec)
      assert.are.equal('cron "' .. e[1] .. '": ' .. e[2], err)
    end)
  end

  it("refuses a line that is not a string", function()
    assert.are.same({ nil, "cron line must be a string, got number" }, { cron.parse(5) })
  end)
end)

describe("cron.next", function()
  it("gives integer milliseconds strictly after afterMs", function()
    local spec = cron.parse("*/2 * * * * *")
    local t = cron.next(spec, UTC, ms("2026-01-01T00:00:00Z"))
    assert.are.equal("integer", math.type(t))
    assert.are.equal(ms("2026-01-01T00:00:02Z"), t)
    assert.are.equal(ms("2026-01-01T00:00:02Z"), cron.next(spec, UTC, ms("2026-01-01T00:00:01.999Z")))
    assert.are.equal(ms("2026-01-01T00:00:04Z"), cron.next(spec, UTC, ms("2026-01-01T00:00:02Z")))
    assert.are.equal(ms("2026-01-01T00:00:04Z"), cron.next(spec, UTC, ms("2026-01-01T00:00:02.001Z")))
    assert.are.equal(ms("2026-01-01T00:00:04Z"), cron.next(spec, UTC, ms("2026-01-01T00:00:02Z") + 0.5))
  end)

  it("ticks every 2 seconds for */2 * * * * *", function()
    assert.are.same({ "2026-12-31T23:59:58Z", "2027-01-01T00:00:00Z", "2027-01-01T00:00:02Z" },
      ticks("*/2 * * * * *", UTC, "2026-12-31T23:59:57Z", 3))
  end)

  it("runs a yearly line once a year, in UTC", function()
    assert.are.same({ "2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z" },
      ticks("0 0 1 1 *", UTC, "2027-01-01T00:00:00Z", 2)) -- not at afterMs itself
    assert.are.same({ "2027-01-01T00:00:00Z" }, ticks("0 0 1 1 *", UTC, "2026-06-01T00:00:00Z", 1))
  end)

  it("finds ranges and steps", function()
    assert.are.same({ "2026-01-01T00:25:00Z", "2026-01-01T00:40:00Z", "2026-01-01T06:10:00Z",
      "2026-01-01T06:25:00Z" }, ticks("10-40/15 */6 * * *", UTC, "2026-01-01T00:20:00Z", 4))
    -- the last day of some months: 31 only where the month has it
    assert.are.same({ "2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z" },
      ticks("0 0 31 * *", UTC, "2026-01-01T00:00:00Z", 3))
  end)

  it("reads names: 09:00 on weekdays of January and July", function()
    -- 2026-01-30 is a Friday; 2026-07-01 a Wednesday
    assert.are.same({ "2026-01-30T09:00:00Z", "2026-07-01T09:00:00Z", "2026-07-02T09:00:00Z",
      "2026-07-03T09:00:00Z", "2026-07-06T09:00:00Z" },
      ticks("0 9 * JAN,jul mon-fri", UTC, "2026-01-29T12:00:00Z", 5))
  end)

  describe("day of month and day of week", function()
    it("runs on either when both are restricted: 0 12 13 * FRI", function()
      -- 2026-01-02 is a Friday, the 13th of January a Tuesday, the 13th of February a Friday
      assert.are.same({ "2026-01-02T12:00:00Z", "2026-01-09T12:00:00Z", "2026-01-13T12:00:00Z",
        "2026-01-16T12:00:00Z", "2026-01-23T12:00:00Z", "2026-01-30T12:00:00Z", "2026-02-06T12:00:00Z",
        "2026-02-13T12:00:00Z", "2026-02-20T12:00:00Z" }, ticks("0 12 13 * FRI", UTC, "2026-01-01T00:00:00Z", 9))
    end)

    it("lets the other decide when one is *", function()
      assert.are.same({ "2026-01-02T12:00:00Z", "2026-01-09T12:00:00Z", "2026-01-16T12:00:00Z" },
        ticks("0 12 * * FRI", UTC, "2026-01-01T00:00:00Z", 3))
      assert.are.same({ "2026-01-13T12:00:00Z", "2026-02-13T12:00:00Z", "2026-03-13T12:00:00Z" },
        ticks("0 12 13 * *", UTC, "2026-01-01T00:00:00Z", 3))
    end)

    it("counts */2 as restricted (odd days or Mondays)", function()
      -- Mondays of January 2026: the 5th, 12th, 19th, 26th
      assert.are.same({ "2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-05T00:00:00Z",
        "2026-01-07T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-11T00:00:00Z", "2026-01-12T00:00:00Z",
        "2026-01-13T00:00:00Z" }, ticks("0 0 */2 * MON", UTC, "2025-12-31T12:00:00Z", 8))
    end)
  end)

  describe("leap days and lines that never match", function()
    it("finds the next February 29", function()
      assert.are.same({ "2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z", "2036-02-29T00:00:00Z" },
        ticks("0 0 29 2 *", UTC, "2026-01-01T00:00:00Z", 3))
      -- in Paris: midnight CET is 23:00Z the day before
      assert.are.same({ "2028-02-28T23:00:00Z" }, ticks("0 0 29 2 *", PARIS, "2026-01-01T00:00:00Z", 1))
    end)

    it("crosses 2100, which is not a leap year: 2096 → 2104", function()
      assert.are.same({ "2104-02-29T00:00:00Z" }, ticks("0 0 29 2 *", UTC, "2096-02-29T00:00:00Z", 1))
    end)

    it("gives nil for a day that never comes, after a bounded search", function()
      local started = os.clock()
      for _, line in ipairs({ "0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *", "* * * 30,31 2 *" }) do
        assert.is_nil(cron.next(cron.parse(line), UTC, ms("2026-01-01T00:00:00Z")), line)
        assert.is_nil(cron.next(cron.parse(line), PARIS, ms("2026-01-01T00:00:00Z")), line)
      end
      for _ = 1, 100 do cron.next(cron.parse("0 0 29 2 *"), PARIS, ms("2096-03-01T00:00:00Z")) end
      assert.is_true(os.clock() - started < 1, "field-wise, not minute by minute")
    end)
  end)

  describe("across daylight-saving changes", function()
    it("runs 30 2 * * * once at the gap's end on New York's spring day", function()
      -- 2026-03-08: 02:00 EST → 03:00 EDT; 02:30 does not exist, so 03:00 EDT = 07:00Z
      assert.are.same({ "2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z",
        "2026-03-10T06:30:00Z" }, ticks("30 2 * * *", NEW_YORK, "2026-03-06T22:00:00Z", 4))
    end)

    it("runs 30 2 * * * once on New York's fall day", function()
      -- 2026-11-01: 02:00 EDT → 01:00 EST; 02:30 comes once, in EST
      assert.are.same({ "2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z" },
        ticks("30 2 * * *", NEW_YORK, "2026-10-30T21:00:00Z", 3))
    end)

    it("runs 30 1 * * * only on the first pass of the repeated hour", function()
      -- 01:30 EDT = 05:30Z runs; 01:30 EST = 06:30Z does not
      assert.are.same({ "2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z" },
        ticks("30 1 * * *", NEW_YORK, "2026-10-30T21:00:00Z", 3))
    end)

    it("runs */15 * * * * once per quarter across New York's fall back", function()
      -- 00:45-01:45 EDT (04:45Z-05:45Z), then the repeated 01:00-01:45 EST (06:00Z-06:45Z) is
      -- skipped, and 02:00 EST is 07:00Z
      assert.are.same({ "2026-11-01T04:45:00Z", "2026-11-01T05:00:00Z", "2026-11-01T05:15:00Z",
        "2026-11-01T05:30:00Z", "2026-11-01T05:45:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:15:00Z" },
        ticks("*/15 * * * *", NEW_YORK, "2026-11-01T04:40:00Z", 7))
      -- from inside the second pass (01:20 EST) the next tick is 02:00 EST
      assert.are.same({ "2026-11-01T07:00:00Z" }, ticks("*/15 * * * *", NEW_YORK, "2026-11-01T06:20:00Z", 1))
      assert.are.same({ "2026-11-01T07:00:00Z" },
        ticks("*/15 * * * *", NEW_YORK, "2026-11-01T05:59:59.999Z", 1))
    end)

    it("collapses the spring gap's quarters into one tick at its end", function()
      -- 02:00, 02:15, 02:30, 02:45 (do not exist) and 03:00 EDT are all 07:00Z, once
      assert.are.same({ "2026-03-08T06:45:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:15:00Z",
        "2026-03-08T07:30:00Z" }, ticks("*/15 * * * *", NEW_YORK, "2026-03-08T06:40:00Z", 4))
    end)

    it("runs every second up to the fall back, then from the end of the repeated hour", function()
      local started = os.clock()
      assert.are.same({ "2026-11-01T05:59:59Z", "2026-11-01T07:00:00Z", "2026-11-01T07:00:01Z" },
        ticks("* * * * * *", NEW_YORK, "2026-11-01T05:59:58Z", 3))
      assert.is_true(os.clock() - started < 1)
    end)

    it("runs */2 * * * * * from the end of Paris's spring gap", function()
      -- 2026-03-29 01:59:58 CET is 00:59:58Z; 02:00:00 does not exist, so 03:00 CEST = 01:00Z
      assert.are.same({ "2026-03-29T01:00:00Z", "2026-03-29T01:00:02Z" },
        ticks("*/2 * * * * *", PARIS, "2026-03-29T00:59:58Z", 2))
    end)

    it("skips the second pass of Paris's repeated hour", function()
      -- 2026-10-25: 02:45 CEST = 00:45Z, then 03:00 CET = 02:00Z (02:00-02:45 CET already ran)
      assert.are.same({ "2026-10-25T00:45:00Z", "2026-10-25T02:00:00Z" },
        ticks("*/15 * * * *", PARIS, "2026-10-25T00:40:00Z", 2))
    end)

    it("follows the zone's rule after 2037: Paris 2040", function()
      -- 2040-03-25 (last Sunday of March) 02:30 does not exist: 03:00 CEST = 01:00Z
      assert.are.same({ "2040-03-24T01:30:00Z", "2040-03-25T01:00:00Z", "2040-03-26T00:30:00Z" },
        ticks("30 2 * * *", PARIS, "2040-03-24T00:00:00Z", 3))
      -- 2040-10-28 (last Sunday of October) 02:30 comes twice: CEST first
      assert.are.same({ "2040-10-27T00:30:00Z", "2040-10-28T00:30:00Z", "2040-10-29T01:30:00Z" },
        ticks("30 2 * * *", PARIS, "2040-10-27T00:00:00Z", 3))
    end)
  end)

  it("refuses arguments of the wrong kind", function()
    local spec = cron.parse("* * * * *")
    assert.has_error(function() cron.next("* * * * *", UTC, 0) end,
      "cron.next: spec must be a table from cron.parse, got string")
    assert.has_error(function() cron.next(spec, "UTC", 0) end,
      "cron.next: zone must be a zone from clank.jobs.tz.load, got string")
    assert.has_error(function() cron.next(spec, UTC, "0") end,
      "cron.next: afterMs must be a number of milliseconds, got string")
  end)
end)
