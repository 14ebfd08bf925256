-- The app bench/live.sh serves: one view listing 100 tasks, whose rows toggle on click, and
-- the action tasks.list returning the same 100 tasks. An event re-renders the whole list and
-- sends its HTML back; the action call validates, runs and encodes the list: the two round
-- trips the benchmark compares (issue 11: an event costs no more than 2x an action call).
-- The view "small" is what the many-sessions measure opens besides.
--
-- The view "rows" (issue 29) lists the same 100 tasks as a keyed list whose rows are a
-- component (Row), each reading a signal of its own ("done") that its button toggles: one click
-- changes exactly one row's HTML, which the live channel sends as a diff (?diffs=1). It watches
-- the topic rows:bench and load reads the list again on a publish; the action rows.rename
-- renames one task and publishes it (the fan-out measure): again one row differs.
local clank = require "clank"
local s = clank.schema
local signal = require "clank.signal"
local h = clank.h

local ROWS = 100
local tasks = {}
for i = 1, ROWS do
  tasks[i] = { id = "t" .. i, title = "Task number " .. i, priority = ({ "low", "normal", "high" })[i % 3 + 1],
    done = i % 4 == 0, tags = { "bench", "row" .. i } }
end

local Task = s.object {
  id = s.string(), title = s.string(), priority = s.enum { "low", "normal", "high" },
  done = s.boolean(), tags = s.array(s.string()),
}

local list = clank.defineAction {
  name = "tasks.list", description = "List the 100 tasks.", sideEffects = "read",
  input = s.object {}, output = s.object { tasks = s.array(Task) },
  handler = function() return { tasks = tasks } end,
}

local TaskList = clank.defineView {
  name = "tasks", description = "100 tasks",
  load = function() return { selected = signal.signal(0) } end,
  render = function(_, d)
    local rows = {}
    for i, t in ipairs(tasks) do
      rows[i] = h.tr({ agentId = t.id, class = d.selected.value == i and "selected" or nil },
        h.td(nil, t.title), h.td(nil, t.priority), h.td(nil, t.done and "done" or "open"),
        h.td(nil, table.concat(t.tags, ", ")),
        h.td(nil, h.button({ agentId = "toggle-" .. i,
          onClick = function() d.selected.value = d.selected.value == i and 0 or i end }, "Select")))
    end
    return h.main(nil, h.h1(nil, "Tasks"), h.table(nil, rows))
  end,
}

-- One row of the keyed list: a component, called as Row { key = ..., task = ..., done = ... }
-- inside the list's render. done is the row's own signal (read here, toggled by the button).
local Row = clank.defineView {
  name = "row", description = "One task as a table row",
  props = s.object { key = s.string(), task = Task, done = s.unknown() },
  render = function(p)
    local t, done = p.task, p.done.value
    return h.tr({ key = p.key, agentId = t.id, class = done and "done" or nil },
      h.td(nil, t.title), h.td(nil, t.priority), h.td(nil, done and "done" or "open"),
      h.td(nil, table.concat(t.tags, ", ")),
      h.td(nil, h.button({ agentId = "toggle-" .. t.id,
        onClick = function() p.done.value = not p.done.value end }, done and "Reopen" or "Done")))
  end,
}

-- What a database read would give: a fresh list of the (immutable) task rows.
local function read_tasks()
  return table.move(tasks, 1, #tasks, 1, {})
end

local TOPIC = "rows:bench"

local Rows = clank.defineView {
  name = "rows", description = "100 tasks as keyed rows",
  topics = function() return { TOPIC } end,
  -- a publish: the list read again, the rows' signals as they are
  load = function(_, _, previous)
    local d = previous or { done = {} }
    d.tasks = read_tasks()
    for _, t in ipairs(d.tasks) do
      if not d.done[t.id] then d.done[t.id] = signal.signal(t.done) end
    end
    return d
  end,
  render = function(_, d)
    local rows = {}
    for i, t in ipairs(d.tasks) do rows[i] = Row { key = t.id, task = t, done = d.done[t.id] } end
    return h.main(nil, h.h1(nil, "Tasks"), h.table({ key = "rows" }, h.tbody(nil, rows)))
  end,
}

-- Renames one task (a new row table: rows are never changed in place) and publishes rows:bench.
local renames = 0
local rename = clank.defineAction {
  name = "rows.rename", description = "Rename one task and tell the rows views.",
  sideEffects = "write", confirmation = "never",
  input = s.object { id = s.string() }, output = s.object { title = s.string() },
  publishes = function() return TOPIC end,
  handler = function(input)
    for i, t in ipairs(tasks) do
      if t.id == input.id then
        renames = renames + 1
        local copy = {}
        for k, v in pairs(t) do copy[k] = v end
        copy.title = "Task number " .. i .. " (renamed " .. renames .. ")"
        tasks[i] = copy
        return { title = copy.title }
      end
    end
    error(clank.ActionError("NOT_FOUND", "No such task.", 404), 0)
  end,
}

-- A small view (a counter and a few controls), for the memory of many open sessions.
local Small = clank.defineView {
  name = "small", description = "A counter",
  load = function() return { n = signal.signal(0) } end,
  render = function(_, d)
    return h.main(nil, h.h1(nil, "Counter"),
      h.p({ agentId = "count" }, "Count: ", d.n.value),
      h.button({ agentId = "inc", onClick = function() d.n.value = d.n.value + 1 end }, "Add one"),
      h.input({ agentId = "note", name = "note", placeholder = "A note" }))
  end,
}

return clank.app { name = "bench-live", actions = { list, rename },
  views = { TaskList, Small, Rows },
  routes = {
    -- a measurement aid: the Lua memory in KiB after a full collection (what sessions hold,
    -- not the garbage a quiet server has not collected yet)
    ["GET /bench/gc"] = function()
      collectgarbage()
      collectgarbage()
      return { status = 200, body = tostring(collectgarbage("count") // 1) }
    end,
  } }
