-- clank.live.diff: what changed between two renders of a view, as the splices of a "diff" frame
-- (README, Live views):
--
--   diff.splices(old, new) → { {at, del, ins}, ... } | nil
--
-- Applied in order to old, each splice removes del units at `at` and puts ins there; `at`
-- counts in the old string, so splices never shift each other. Positions and lengths are in
-- UTF-16 code units, what a browser's string indexes. nil when the part of old they count is
-- not valid UTF-8 (the caller sends the whole HTML).
--
-- The strings are compared as tokens that start at each "<" (a tag and the text after it):
-- the common prefix and suffix first, then the middle token by token; at a mismatch, the
-- nearest pair of positions within WINDOW tokens where the two agree again (on AGREE tokens in
-- a row) ends the splice. A change the window cannot bridge becomes one splice of the rest of
-- the middle, which the caller finds too large and answers with the whole HTML.
local byte, find, sub, concat = string.byte, string.find, string.sub, table.concat
local pcall, error = pcall, error
local min = math.min
local render_core = require "clank.render_core"
local common_affixes, utf16_units = render_core.commonAffixes, render_core.utf16Units

local M = {}

local WINDOW, AGREE = 48, 3
M.WINDOW = WINDOW

local LT = byte("<")

-- The tokens of s[i..j]: strings, each starting at a "<" (but the first).
local function tokens(s, i, j)
  local out, n = {}, 0
  while i <= j do
    local k = find(s, "<", i + 1, true)
    if not k or k > j then k = j + 1 end
    n = n + 1
    out[n] = sub(s, i, k - 1)
    i = k
  end
  return out, n
end

-- UTF-16 units in s[i..j] (whole characters): one per character, two for those past U+FFFF
-- → n, or raises "invalid UTF-8".
local function units(s, i, j)
  local n = utf16_units(s, i, j)
  if not n then error("invalid UTF-8", 0) end
  return n
end

-- Whether a[i..i+AGREE-1] equals b[j..j+AGREE-1] (or both run out together).
local function agree(a, i, b, j)
  for d = 0, AGREE - 1 do
    local x, y = a[i + d], b[j + d]
    if x ~= y then return false end
    if x == nil then return true end
  end
  return true
end

local function splices(old, new)
  local lo, ln = #old, #new
  -- common prefix, then back to the start of its last token (a "<"), so that splices start
  -- and end on token boundaries, which are character boundaries; the common suffix (not into
  -- the prefix), its first byte a "<" unless it is empty
  local p, s = common_affixes(old, new)
  local limit = min(lo, ln)
  if p < limit or lo ~= ln then
    while p > 0 and byte(old, p + 1) ~= LT do p = p - 1 end
  end
  if p == lo and p == ln then return {} end
  s = min(s, limit - p)
  while s > 0 and byte(old, lo - s + 1) ~= LT do s = s - 1 end
  -- the middles, token by token
  local a, na = tokens(old, p + 1, lo - s)
  local b, nb = tokens(new, p + 1, ln - s)
  local out = {}
  local at, upos = units(old, 1, p), p + 1 -- at: the units in old before byte upos
  local pos = p + 1 -- the old byte where a[i] starts
  local i, j = 1, 1
  -- Deletes a[i .. i+da-1] and inserts b[j .. jj-1]; both go on from there.
  local function splice(da, jj)
    at, upos = at + units(old, upos, pos - 1), pos
    local dbytes = 0
    for k = i, i + da - 1 do dbytes = dbytes + #a[k] end
    local ins = concat(b, "", j, jj - 1)
    local del = units(old, pos, pos + dbytes - 1)
    local last = out[#out]
    if last and last[1] + last[2] == at then -- right after the previous one: one splice
      last[2] = last[2] + del
      last[3] = last[3] .. ins
    else
      out[#out + 1] = { at, del, ins }
    end
    at, pos, upos = at + del, pos + dbytes, pos + dbytes
    i, j = i + da, jj
  end
  while i <= na or j <= nb do
    local x = a[i]
    if x ~= nil and x == b[j] then
      pos = pos + #x
      i, j = i + 1, j + 1
    else
      local found = false
      for d = 1, WINDOW do
        for da = 0, d do
          local ii, jj = i + da, j + d - da
          if ii <= na + 1 and jj <= nb + 1 and a[ii] == b[jj] and agree(a, ii, b, jj) then
            splice(da, jj)
            found = true
            break
          end
        end
        if found then break end
      end
      if not found then splice(na - i + 1, nb + 1) end -- the rest of the middle
    end
  end
  return out
end

function M.splices(old, new)
  local ok, out = pcall(splices, old, new)
  if ok then return out end
  if out == "invalid UTF-8" then return nil end
  error(out, 0)
end

return M
