-- The seed's task tracker: four actions over SQLite (a file next to this one) or PostgreSQL.
--   CLANK_TASKS_DB    a file path, or a postgres:// / postgresql:// URL (default: tasks.db here)
--   CLANK_TASKS_USER  whose tasks the requests see (default: "local")
local clank = require "clank"
local store = require "store" -- apps/tasks/store.lua: clank-run puts this folder on package.path

local s = clank.schema
local null = clank.null
local array = clank.json.array
local ipairs, error, type, tostring = ipairs, error, type, tostring
local concat, format = table.concat, string.format

--------------------------------------------------------------------------------
-- Storage: one connection per app generation, opened on first use and again after a failure

-- The folder of this file, so the default database does not depend on the working directory.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."

local function db_target()
  local target = os.getenv("CLANK_TASKS_DB")
  if target and target ~= "" then
    return target
  end
  return here .. "/tasks.db"
end

local db

-- Runs store method `name`; a database failure raises (the bridge answers 500 ACTION_FAILED and
-- logs the message) and drops the connection, so the next call opens a fresh one.
local function call(name, ...)
  if not db then
    local err
    db, err = store.open(db_target())
    if not db then
      error("tasks: cannot open the database: " .. tostring(err), 0)
    end
  end
  local result, err = db[name](db, ...)
  if result == nil then
    db:close()
    db = nil
    error("tasks: " .. name .. " failed: " .. tostring(err), 0)
  end
  return result
end

--------------------------------------------------------------------------------
-- Schemas

local Priority = s.enum({ "low", "normal", "high" })

local CreateTask = s.object {
  title = s.string { min = 1, max = 120, description = "Short task title" },
  priority = s.optional(Priority),
  estimate = s.nullable(s.number { min = 0 }),
  tags = s.array(s.string(), { max = 10 }),
}

local Task = s.object {
  id = s.string(),
  title = s.string(),
  priority = s.optional(Priority),
  estimate = s.nullable(s.number { min = 0 }),
  tags = s.array(s.string()),
  completed = s.boolean(),
  archived = s.boolean(),
  createdAt = s.number { integer = true, description = "Seconds since the Unix epoch" },
}

local TaskId = s.object { id = s.string { min = 1, description = "A task id from tasks.create" } }

local function not_found()
  error(clank.ActionError("NOT_FOUND", "Task not found.", 404), 0)
end

local function authorized(_, ctx)
  return type(ctx.user) == "string" and ctx.user ~= ""
end

-- Neither database can keep a NUL character in text (the schema lets JSON's \u0000 through).
local function check_text(input)
  local where
  if input.title:find("\0", 1, true) then
    where = "title"
  else
    for i, tag in ipairs(input.tags) do
      if tag:find("\0", 1, true) then
        where = "tags." .. (i - 1)
        break
      end
    end
  end
  if where then
    error(clank.ActionError("INVALID_INPUT", where .. ": Must not contain NUL characters.", 422), 0)
  end
end

local function task_output(t)
  return {
    id = t.id,
    title = t.title,
    priority = t.priority,
    estimate = t.estimate == nil and null or t.estimate,
    tags = array(t.tags),
    completed = t.completed,
    archived = t.archived,
    createdAt = t.created,
  }
end

--------------------------------------------------------------------------------
-- Actions

local createTask = clank.defineAction {
  name = "tasks.create",
  description = "Create one task in the current workspace.",
  input = CreateTask,
  output = s.object { id = s.string(), created = s.boolean() },
  sideEffects = "write",
  confirmation = "write",
  authorize = authorized,
  handler = function(input, ctx)
    check_text(input)
    local estimate = input.estimate
    if estimate == null then
      estimate = nil
    end
    local task = call("create", ctx.user, {
      title = input.title, priority = input.priority, estimate = estimate, tags = input.tags,
    })
    return { id = task.id, created = true }
  end,
}

local listTasks = clank.defineAction {
  name = "tasks.list",
  description = "List the current user's tasks in creation order; archived ones only on request.",
  input = s.object {
    includeArchived = s.optional(s.boolean { description = "Also list archived tasks" }),
  },
  output = s.object { tasks = s.array(Task) },
  sideEffects = "read",
  authorize = authorized,
  handler = function(input, ctx)
    local tasks = array()
    for i, t in ipairs(call("list", ctx.user, input.includeArchived == true)) do
      tasks[i] = task_output(t)
    end
    return { tasks = tasks }
  end,
}

local completeTask = clank.defineAction {
  name = "tasks.complete",
  description = "Mark one of the current user's tasks as done.",
  input = TaskId,
  output = s.object { id = s.string(), completed = s.boolean() },
  sideEffects = "write",
  confirmation = "write",
  authorize = authorized,
  handler = function(input, ctx)
    if not call("complete", ctx.user, input.id) then
      not_found()
    end
    return { id = input.id, completed = true }
  end,
}

local archiveTask = clank.defineAction {
  name = "tasks.archive",
  description = "Archive one of the current user's tasks: it leaves the default list for good.",
  input = TaskId,
  output = s.object { id = s.string(), archived = s.boolean() },
  sideEffects = "destructive",
  confirmation = "always",
  authorize = authorized,
  handler = function(input, ctx)
    if not call("archive", ctx.user, input.id) then
      not_found()
    end
    return { id = input.id, archived = true }
  end,
}

--------------------------------------------------------------------------------
-- The page: the user's tasks and how to call the actions

local function task_line(t)
  local notes = {}
  if t.priority then
    notes[#notes + 1] = t.priority
  end
  if t.estimate then
    notes[#notes + 1] = "estimate " .. clank.json.formatNumber(t.estimate)
  end
  for _, tag in ipairs(t.tags) do
    notes[#notes + 1] = "#" .. tag
  end
  local line = format("  [%s] %-6s %s", t.completed and "x" or " ", t.id, t.title)
  if #notes > 0 then
    line = line .. "  (" .. concat(notes, ", ") .. ")"
  end
  return line
end

local function index(request, ctx)
  local tasks = call("list", ctx.user, false)
  local base = "http://" .. (request.headers.host or "127.0.0.1:8080")
  local json = "-H 'content-type: application/json'"
  local confirmed = json .. " -H 'x-clank-confirmation: confirmed'"
  local lines = { format("Tasks of %s (%d, archived ones not shown):", ctx.user, #tasks), "" }
  for _, t in ipairs(tasks) do
    lines[#lines + 1] = task_line(t)
  end
  if #tasks == 0 then
    lines[#lines + 1] = "  (none yet)"
  end
  local post = "  curl -s -X POST " .. base .. "/actions/"
  for _, l in ipairs({
    "",
    "Agents and scripts use the actions (POST a JSON body; write and destructive actions need",
    "the x-clank-confirmation header, sent only after a person agreed):",
    "",
    "  curl -s " .. base .. "/manifest",
    post .. "tasks.list " .. json .. " -d '{\"includeArchived\":true}'",
    post .. "tasks.create " .. confirmed .. " \\",
    "    -d '{\"title\":\"Ship docs\",\"priority\":\"high\",\"estimate\":2,\"tags\":[\"docs\"]}'",
    post .. "tasks.complete " .. confirmed .. " -d '{\"id\":\"1\"}'",
    post .. "tasks.archive " .. confirmed .. " -d '{\"id\":\"1\"}'",
    "",
  }) do
    lines[#lines + 1] = l
  end
  return { status = 200, body = concat(lines, "\n") }
end

return clank.app {
  name = "tasks",
  description = "Task tracker",
  version = "1.0.0",
  actions = { createTask, listTasks, completeTask, archiveTask },
  context = function(request) -- luacheck: no unused args
    return { user = os.getenv("CLANK_TASKS_USER") or "local" }
  end,
  routes = {
    ["GET /"] = index,
  },
}
