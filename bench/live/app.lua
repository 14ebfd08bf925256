-- The app bench/live.sh serves: one view listing 100 tasks, whose rows toggle on click, and
-- the action tasks.list returning the same 100 tasks. An event re-renders the whole list and
-- sends its HTML back; the action call validates, runs and encodes the list: the two round
-- trips the benchmark compares (issue 11: an event costs no more than 2x an action call).
-- The view "small" is what the many-sessions measure opens besides.
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

return clank.app { name = "bench-live", actions = { list }, views = { TaskList, Small } }
