-- Components that did not change are not rendered again (README "Live views"): inside a
-- mounted view's render, a call View(props) whose props equal those of the same call last time
-- and whose signals did not change since returns the tree it returned then, the same table.
--
--   memo.scope()                       → a scope (one per mount: its calls and their trees)
--   memo.within(scope, fn, ...)        → fn(...) with scope's calls matched against last time's
--   memo.active()                      → whether a render of a mounted view is running
--   memo.call(view, props, copy, validate) → the call's tree and true (nothing unless active)
--   memo.equal(a, b)                   → whether two props values are equal, as calls compare
--   memo.outputs                       → the trees component calls returned (weak keys): the
--                                        renderer keeps their HTML (the same table at the same
--                                        place is the same HTML)
--   memo.traceback(err, level)         → err with the traceback of where a render raised it
--   memo.swapChanged(scope, tree)      → a mounted view's tree with its calls' new trees in
--                                        place, when nothing else changed (or nil); then the
--                                        old trees and the new ones, two lists
--
-- A call is the same call as last time when it is one of the same View in the same scope (the
-- mount, or the component it is made in) with the same props.key, or, without a key, the same
-- rank among that View's calls without a key. Props are equal when each value is: the same
-- value; plain tables (no metatable) with equal fields; closures of the same function whose
-- upvalues are equal. Each call's render is a computed (clank.signal): it runs again when a
-- signal it read changes, and the render it is made in reads it. A change inside one row of a
-- mounted view's list puts the row's new tree in the old one's place (swapChanged); deeper
-- down, it re-runs the render the row is made in, which gets its other calls' trees back
-- unchanged.
local signal = require "clank.signal"
local render_core = require "clank.render_core"
local tree_swaps = render_core.treeSwaps
local value_of, invalidate = signal.valueInRun, signal.invalidate

local type, next, xpcall, error, getmetatable, rawequal, setmetatable, ipairs, rawget =
  type, next, xpcall, error, getmetatable, rawequal, setmetatable, ipairs, rawget
local math_type = math.type
local getinfo, getupvalue, dump = debug.getinfo, debug.getupvalue, string.dump

local M = {}

-- The fields of an entry a component call reads, the array slots the computed leaves its host
-- (see signal.computed): next to the computed's own a read looks at, so that a call that
-- matches reads a few cache lines of its entry. Its props' fields are kept there too, up to
-- MAX_FIELDS names and values from FIELDS on (the caller's table, in the order it gave them),
-- so that comparing the next call's props reads neither the props table nor a hash part (a
-- row's props are a key and a few values; more are compared with the props table).
local VIEW <const> = 10
local KEY <const> = 11 -- props.key, or NO_KEY
local COUNT <const> = 12 -- how many fields the props have
local TREE <const> = 13
local FIELDS <const> = 14
local MAX_FIELDS <const> = 4
local PROPS <const> = 22 -- the props (a copy): what the render is called with
-- An entry is a scope too (see M.scope), and the slots after the computed's are its fields
-- (a mount's scope has them as keys of its hash part).
local PREV <const> = 36
local NEXT <const> = 37
local RENDERS <const> = 38
local PARENT <const> = 39 -- the scope the call was made in
local AT <const> = 40 -- where its tree is in the parent's (see placed)
local AT_RENDER <const> = 41
assert(signal.hostFirst == VIEW and signal.hostLast == PROPS and signal.computedSlots == PREV - 1,
  "clank.ui.memo: the computed's slots moved")
local NO_KEY = {}

local current = false -- the scope whose render is running (renders never yield: see signal)
local outputs = setmetatable({}, { __mode = "k" })
local equal

local MAX_DEPTH = 20 -- plain tables nested deeper compare by identity only

local function equal_tables(a, b, depth)
  if depth > MAX_DEPTH or getmetatable(a) ~= nil or getmetatable(b) ~= nil then return false end
  for k, v in next, a do
    local w = b[k]
    if w == nil or not equal(v, w, depth + 1) then return false end
  end
  for k in next, b do
    if a[k] == nil then return false end
  end
  return true
end

-- Closures of one function: the same place in the same source, and the same code when that
-- place is one line (two functions can share it).
local function equal_functions(a, b, depth)
  local fa, fb = getinfo(a, "Su"), getinfo(b, "Su")
  if fa.what ~= "Lua" or fa.source ~= fb.source or fa.linedefined ~= fb.linedefined
    or fa.lastlinedefined ~= fb.lastlinedefined or fa.nups ~= fb.nups
    or fa.nparams ~= fb.nparams or fa.isvararg ~= fb.isvararg then
    return false
  end
  if fa.linedefined == fa.lastlinedefined and dump(a, true) ~= dump(b, true) then return false end
  local i = 1
  while true do
    local na, va = getupvalue(a, i)
    local nb, vb = getupvalue(b, i)
    if na ~= nb then return false end
    if na == nil then return true end
    if not equal(va, vb, depth + 1) then return false end
    i = i + 1
  end
end

function equal(a, b, depth)
  local ta = type(a)
  if ta == "number" then return a == b and math_type(a) == math_type(b) end -- 1 and 1.0 render apart
  if rawequal(a, b) then return true end
  if ta ~= type(b) then return false end
  if ta == "table" then return equal_tables(a, b, depth) end
  if ta == "function" then return depth <= MAX_DEPTH and equal_functions(a, b, depth) end
  return false -- strings and booleans are equal only when rawequal
end
M.equal = function(a, b) return equal(a, b, 0) end

-- same_fields(entry, props): whether props equal the entry's, each field as equal compares
-- them (the loop in C: a list's render compares every row's).
local same_fields = render_core.slotsMatcher(equal, COUNT, PROPS, FIELDS, MAX_FIELDS)

-- prefetch_calls(order, n), in a render that makes last time's calls again (see PREFIX): the
-- slots the next call reads if it matches (up to its props' fields) and the header of the one
-- after, asked for ahead. Each entry is a cache miss or two away in a server with many
-- sessions (render_core.callsPrefetcher says why and how).
local prefetch_calls = render_core.callsPrefetcher(FIELDS + 2 * MAX_FIELDS - 1)

-- Keeps props (the caller's table; its copy is entry[PROPS]) in entry's slots: their count, and
-- up to MAX_FIELDS names and values, the slots after them false.
local function keep_fields(entry, props, before)
  local at, count = FIELDS, 0
  for k, v in next, props do
    count = count + 1
    if count <= MAX_FIELDS then
      entry[at], entry[at + 1] = k, v
      at = at + 2
    end
  end
  if before > MAX_FIELDS then before = MAX_FIELDS end
  for i = at, FIELDS + 2 * before - 1 do entry[i] = false end
  entry[COUNT] = count
end

-- The traceback of the last error a render raised, taken where it was raised (within's pcall
-- would otherwise leave only the frames above it): memo.traceback(err).
local raised, raised_trace = nil, nil
local function keep_trace(err)
  if type(err) == "string" and err ~= raised then
    raised, raised_trace = err, debug.traceback(err, 2)
  end
  return err
end

-- err with the traceback of where a render raised it (else of the caller's level).
function M.traceback(err, level)
  if type(err) ~= "string" then return err end
  if err == raised then return raised_trace end
  return debug.traceback(err, (level or 1) + 1)
end

-- A scope (a mount, or a call's entry): the calls of its last render (PREV) and of the one
-- running (NEXT), each false until a call is made, then a generation:
-- { order = { entry, ... } (in call order), keyed = { [view] = { [key] = entry } }?,
--   ranked = { [view] = { entry, ... } }?, cursor = n }; how many renders it made (RENDERS).
function M.scope()
  return { [PREV] = false, [NEXT] = false, [RENDERS] = 0 }
end

-- Whether scope's last render made component calls.
function M.madeCalls(scope) return scope[PREV] ~= false end

-- A render that makes the calls its last render made, in the same order (a list rendered again
-- with the same rows), runs in "prefix" mode: next is PREFIX, and each call is matched with the
-- one at the same place in prev.order (prev.cursor counts them); prev is this render's
-- generation too, no table is made. The first call that differs makes the next generation from
-- the prefix (materialize), and calls are matched by key or rank from there.
local PREFIX = {}

-- How a call is matched: "keyed" (by props.key), "ranked" (no key: by its rank among the
-- view's calls without a key), or nil (a key the renderer raises for: never matched).
local function matched_by(key)
  if key == nil then return "ranked" end
  if type(key) == "string" or math_type(key) == "integer" then return "keyed" end
  return nil
end

-- Adds entry, called as view with key, to generation (see M.scope).
local function add_call(generation, how, view, key, entry)
  local by_view = generation[how]
  if not by_view then
    by_view = {}
    generation[how] = by_view
  end
  local now = by_view[view]
  if not now then
    now = {}
    by_view[view] = now
  end
  if how == "ranked" then key = #now + 1 end
  now[key] = entry
  local order = generation.order
  order[#order + 1] = entry
end

-- The generation of prev.order's first prev.cursor calls.
local function materialize(prev)
  local generation = { order = {}, cursor = 0 }
  local order = prev.order
  for i = 1, prev.cursor do
    local entry = order[i]
    local key = entry[KEY]
    if key == NO_KEY then key = nil end
    add_call(generation, matched_by(key), entry[VIEW], key, entry)
  end
  return generation
end

-- Runs fn(...) with scope current; on success what it called is what the next render matches
-- against (what it no longer called is dropped), on an error last time's calls are kept.
function M.within(scope, fn, ...)
  local outer = current
  local prev = scope[PREV]
  if prev then
    prev.cursor = 0
    scope[NEXT] = PREFIX
  else
    scope[NEXT] = false
  end
  current = scope
  local ok, tree = xpcall(fn, keep_trace, ...)
  current = outer
  if ok then
    local generation = scope[NEXT]
    if generation == PREFIX then -- the calls of last time, or fewer
      if prev.cursor < #prev.order then scope[PREV] = materialize(prev) end
    else
      scope[PREV] = generation
    end
    scope[RENDERS] = scope[RENDERS] + 1 -- places found in the last render's tree hold no more
  end
  scope[NEXT] = false
  if not ok then error(tree, 0) end
  return tree
end

local NOTHING = {} -- an entry's tree before its first render

local function render_entry(entry)
  return M.within(entry, entry[VIEW].render, entry[PROPS], nil)
end

-- Whether a render of a mounted view is running: then View(props) calls M.call.
function M.active() return current ~= false end

-- view's call with props (the caller's table) → its tree, true; or nothing when no render of a
-- mounted view is running (M.active() is false). copy(props) → a plain copy of them, made when
-- they are new; then validate(view, copy) raises for props the view does not take.
function M.call(view, props, copy, validate)
  local scope = current
  if not scope then return end
  local key = props.key
  local generation, entry = scope[NEXT], nil
  local kept_key = key
  if key == nil then kept_key = NO_KEY end
  if generation == PREFIX then -- the call at this place last time, when it is the same call
    local prev = scope[PREV]
    local n = prev.cursor + 1
    local order = prev.order
    entry = order[n]
    prefetch_calls(order, n)
    -- (entry's key was matched_by's "keyed" or "ranked": == leaves out only a float key
    -- equal to an integer one, which the renderer raises for)
    if entry and entry[VIEW] == view and entry[KEY] == kept_key then
      prev.cursor = n
    else
      entry = nil
      generation = materialize(prev)
      scope[NEXT] = generation
    end
  end
  local how
  if not entry then
    -- this render's calls of view, by key or by rank, and last render's
    how = matched_by(key)
    if how then
      if not generation then
        generation = { order = {}, cursor = 0 }
        scope[NEXT] = generation
      end
      local prev = scope[PREV]
      local by_view = prev and prev[how]
      local before = by_view and by_view[view]
      if before then
        if how == "ranked" then
          by_view = generation.ranked
          local now = by_view and by_view[view]
          entry = before[now and #now + 1 or 1]
        else
          entry = before[key]
        end
      end
    end
  end
  if not (entry and same_fields(entry, props)) then
    local given = props
    props = copy(props)
    validate(view, props)
    if entry then -- the same call with new props: it runs again, with them
      entry[PROPS] = props
      keep_fields(entry, given, entry[COUNT])
      invalidate(entry)
    else
      -- an entry is a scope too, and the computed of the call's render (its fields never nil:
      -- the tree is NOTHING until there is one); its 41 slots made in the array part, the
      -- computed's false until signal.computed sets them
      entry = signal.computed(render_entry, { false, false, false, false, false, false, false,
        false, false, view, kept_key, 0, NOTHING, false, false, false, false, false, false, false,
        false, props, false, false, false, false, false, false, false, false, false, false, false,
        false, false, false, false, 0, scope, false, false })
      keep_fields(entry, given, 0)
    end
  end
  if how then add_call(generation, how, view, key, entry) end
  local tree = value_of(entry)
  -- (a tree it returned before is there already: the set is large, a lookup a cache miss;
  -- ~= first, as it costs no call, then rawequal for a tree whose metatable has __eq)
  if tree ~= entry[TREE] and type(tree) == "table" and not rawequal(tree, entry[TREE]) then
    outputs[tree] = true
  end
  if tree == nil then entry[TREE] = NOTHING else entry[TREE] = tree end
  return tree, true
end

-- Where old is in tree, below its own elements (not inside components' trees, which are
-- theirs): a list of children tables and indexes, appended to at.
local function places(tree, old, at, depth)
  if depth > 200 then return end
  local children = rawget(tree, "children")
  if type(children) ~= "table" then
    if getmetatable(tree) ~= nil then return end
    children = tree -- a list
  end
  for i = 1, #children do
    local c = children[i]
    if rawequal(c, old) then
      at[#at + 1] = children
      at[#at + 1] = i
    elseif type(c) == "table" and not outputs[c] then
      places(c, old, at, depth + 1)
    end
  end
end

local NOWHERE = {}

-- Where entry's tree is in tree (a list as places makes it), or nil. Kept on the entry while
-- the scope renders no more (a render makes new tables; a swap puts the new tree where the
-- old one was), so that a row's change does not walk the list to find it again.
local function placed(scope, entry, tree)
  local at = entry[AT]
  if at and entry[AT_RENDER] == scope[RENDERS] then
    local old = entry[TREE]
    for k = 1, #at, 2 do
      if not rawequal(at[k][at[k + 1]], old) then
        at = nil
        break
      end
    end
    if at then return at end
  end
  at = {}
  places(tree, entry[TREE], at, 0)
  if #at == 0 then return nil end
  entry[AT], entry[AT_RENDER] = at, scope[RENDERS]
  return at
end

-- Inside the run of a mounted view's effect (scope: the mount's), when what changed since its
-- last run is only the trees of calls it made: each new tree put where the old one is in tree
-- → tree (or the new root), with everything the last run read tracked again. nil when anything
-- else changed, or an old tree is not found: then the view renders again. A component's tree
-- is placed as it is, never read, so putting the new one in its place is the render's result.
function M.swapChanged(scope, tree)
  local changed = signal.changed()
  if not changed or #changed == 0 then return nil end
  local swaps = {}
  for i = 1, #changed do
    local entry = changed[i] -- a call's entry (the computed of its render), or another source
    if entry[PARENT] ~= scope then return nil end
    local new, old = entry:peek(), entry[TREE] -- read untracked: retrack() below tracks it
    if old == NOTHING then old = nil end
    if not rawequal(new, old) then
      local at = NOWHERE
      if not rawequal(tree, old) then
        at = placed(scope, entry, tree)
        if not at then return nil end
      end
      swaps[#swaps + 1] = { entry, new, at }
    end
  end
  local olds, news = {}, {}
  for i, sw in ipairs(swaps) do
    local entry, new, at = sw[1], sw[2], sw[3]
    if #at == 0 then tree = new end
    for k = 1, #at, 2 do at[k][at[k + 1]] = new end
    if type(new) == "table" then outputs[new] = true end
    local old = entry[TREE]
    if old == NOTHING then old = nil end
    olds[i], news[i] = old, new
    if new == nil then entry[TREE] = NOTHING else entry[TREE] = new end
  end
  signal.retrack()
  return tree, olds, news
end

-- The trees of a render and of the one before it: equal but for components' trees, each new
-- one where an old one was, with the same key (swapChanged's update, made by a render that ran
-- again: a list read again with one row changed) → the old trees and the new ones, two lists;
-- nil when anything else differs, or more than 64 did. Elements are equal when their tags,
-- attributes and children are: an event handler for another (its HTML names the event, not the
-- function), and tables as props compare them. (The walk is in C: render_core.treeSwaps.)
function M.treeSwaps(old, new) return tree_swaps(old, new, outputs, equal) end

M.outputs = outputs

return M
