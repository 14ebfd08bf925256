-- The seed's task tracker: four actions over SQLite (a file next to this one) or PostgreSQL, a
-- live view of them at / (its stylesheet: public/app.css, served at /assets), and two durable
-- jobs (issue 32) in the same database: a task's reminder, and the nightly archive of tasks done
-- more than 30 days ago.
--   CLANK_TASKS_DB    a file path, or a postgres:// / postgresql:// URL (default: tasks.db here)
--   CLANK_TASKS_USER  one user for every request, without accounts (benches, single-user use);
--                     unset, people register and sign in (clank.auth) and each sees only their own
local clank = require "clank"
local core = require "clank.core"
local store = require "store" -- apps/tasks/store.lua: clank-run puts this folder on package.path

local s = clank.schema
local null = clank.null
local array = clank.json.array
local ipairs, error, type, tostring = ipairs, error, type, tostring
local concat, format, tointeger = table.concat, string.format, math.tointeger
local now_ms = core.nowMs

--------------------------------------------------------------------------------
-- Storage: clank.db (SPEC §12) through store.lua. The store is opened (and the migrations
-- checked) on first use in each app generation, and again after that failed; clank.db keeps the
-- connections, shared by every generation, and replaces dead ones itself.

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

local single_user = os.getenv("CLANK_TASKS_USER")
if single_user == "" then single_user = nil end

-- The store, opened on first use; a database failure raises (the bridge answers 500
-- ACTION_FAILED and logs the message; the request's timeout answers 504 TIMEOUT).
local function opened_store()
  if not db then
    local opened, err = store.open(db_target())
    if not opened then
      error("tasks: cannot open the database: " .. tostring(err), 0)
    end
    if db then -- another request opened it meanwhile
      opened:close()
    else
      db = opened
    end
  end
  return db
end

-- Runs store method `name`.
local function call(name, ...)
  local st = opened_store()
  return st[name](st, ...)
end

-- fn(tx) with tx the store in one transaction (store:transaction): a job enqueued inside is
-- written by it, since the jobs' database is the store's (jobsDb below).
local function in_transaction(fn)
  return opened_store():transaction(fn)
end

--------------------------------------------------------------------------------
-- Schemas

local Priority = s.enum({ "low", "normal", "high" })

local CreateTask = s.object {
  title = s.string { min = 1, max = 120, description = "Short task title" },
  priority = s.optional(Priority),
  estimate = s.nullable(s.number { min = 0 }),
  tags = s.optional(s.array(s.string(), { max = 10 })),
  remindAt = s.optional(s.number {
    integer = true, description = "When to be reminded, in milliseconds since the Unix epoch (in the future)",
  }),
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
  remindAt = s.optional(s.number { integer = true, description = "Milliseconds since the Unix epoch" }),
  remindedAt = s.optional(s.number {
    integer = true, description = "When the reminder fired, in milliseconds since the Unix epoch",
  }),
}

local TaskId = s.object { id = s.string { min = 1, description = "A task id from tasks.create" } }

local function not_found()
  error(clank.ActionError("NOT_FOUND", "Task not found.", 404), 0)
end

-- The topic of a user's list: every change to it is published there, and every page showing
-- it subscribes (clank.publish, issue 28), so other pages and agents' changes show at once.
-- Whose tasks a request sees: the signed-in person's id (clank.auth), or CLANK_TASKS_USER.
local function owner(ctx)
  local user = ctx.user
  if type(user) == "table" then return "user:" .. tostring(user.id) end
  return user
end

local function owner_topic(who)
  return "tasks:" .. who:gsub("[^%w_.:/-]", "_")
end

local function user_topic(ctx)
  return owner_topic(owner(ctx))
end

local function authorized(_, ctx)
  local who = owner(ctx)
  return type(who) == "string" and who ~= ""
end

-- Neither database can keep a NUL character in text (the schema lets JSON's \u0000 through).
local function check_text(input)
  local where
  if input.title:find("\0", 1, true) then
    where = "title"
  else
    for i, tag in ipairs(input.tags or {}) do
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

local function invalid(message)
  error(clank.ActionError("INVALID_INPUT", message, 422), 0)
end

--------------------------------------------------------------------------------
-- Jobs (issue 32), run by every worker from the tasks' own database

-- A task's reminder, enqueued with the task (runAt = its remindAt, one per task): marks the task
-- unless it was completed or archived meanwhile, and publishes its owner's topic so that an open
-- page shows the reminder land.
local Remind = clank.defineJob {
  name = "tasks.remind",
  description = "Marks a task whose reminder time has come, unless it is done or archived.",
  input = s.object { id = s.string { min = 1 }, owner = s.string { min = 1 } },
  publishes = function(input) return owner_topic(input.owner) end,
  handler = function(input)
    call("remind", input.owner, input.id, now_ms())
  end,
}

local ARCHIVE_AFTER = 30 * 86400 -- seconds

-- Every night (the schedule below): archives every task completed more than 30 days ago, and
-- publishes the topic of each owner whose list changed.
local ArchiveDone = clank.defineJob {
  name = "tasks.archiveDone",
  description = "Archives every task completed more than 30 days ago.",
  input = s.object {},
  handler = function()
    for _, who in ipairs(call("archive_done", os.time() - ARCHIVE_AFTER)) do
      clank.publish(owner_topic(who))
    end
  end,
}

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
  publishes = function(_, _, ctx) return user_topic(ctx) end,
  handler = function(input, ctx)
    check_text(input)
    local estimate = input.estimate
    if estimate == null then
      estimate = nil
    end
    local who = owner(ctx)
    local fields = { title = input.title, priority = input.priority, estimate = estimate, tags = input.tags or {} }
    if input.remindAt == nil then
      return { id = call("create", who, fields).id, created = true }
    end
    -- an integer past 2^63 comes as a float: no time either
    local at = tointeger(input.remindAt)
    if not at or at <= now_ms() then
      invalid("remindAt: Must be in the future (milliseconds since the Unix epoch).")
    end
    fields.remindAt = at
    -- the task and its reminder in one transaction: both exist, or neither
    local task = in_transaction(function(tx)
      local task = tx:create(who, fields)
      Remind:enqueue({ id = task.id, owner = who }, { runAt = at, key = task.id })
      return task
    end)
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
    return { tasks = call("list_rows", Task, owner(ctx), input.includeArchived == true) }
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
  publishes = function(_, _, ctx) return user_topic(ctx) end,
  handler = function(input, ctx)
    if not call("complete", owner(ctx), input.id) then
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
  publishes = function(_, _, ctx) return user_topic(ctx) end,
  handler = function(input, ctx)
    if not call("archive", owner(ctx), input.id) then
      not_found()
    end
    return { id = input.id, archived = true }
  end,
}


--------------------------------------------------------------------------------
-- The page: a live view (SPEC §11) of the user's tasks, with a form to add one and buttons to
-- complete and archive them. Its state lives in the view session (made by load); the list is
-- read again after every click and submit, and whenever the user's topic says it changed, so
-- changes made elsewhere (another tab, an agent through the bridge or MCP) show at once.

local h = clank.h
local signal = clank.signal

-- The message of a runner's or an action's error, fit to show.
local function message_of(err)
  if clank.isActionError(err) then
    return err.message
  end
  return "The action failed."
end

local function present(v)
  return v ~= nil and v ~= null
end

local function plural(n, one, many)
  return format("%d %s", n, n == 1 and one or many)
end

-- A task whose reminder fired shows it until it is done.
local function reminded(t)
  return t.remindedAt ~= nil and not t.completed
end

local function task_meta(t)
  local items = {}
  if reminded(t) then
    -- its label, for screen readers and agents alike (the surface takes aria-label)
    items[#items + 1] = h.span({
      class = "reminder",
      role = "note",
      ["aria-label"] = "Reminder: the time set for this task has come",
      agentId = "reminder-" .. t.id,
    }, "Reminder")
  end
  if present(t.priority) then
    items[#items + 1] = h.span({ class = "badge priority-" .. t.priority }, t.priority .. " priority")
  end
  if present(t.estimate) then
    items[#items + 1] = h.span({ class = "estimate" }, "Estimate " .. clank.json.formatNumber(t.estimate))
  end
  for _, tag in ipairs(t.tags) do
    items[#items + 1] = h.span({ class = "tag" }, "#" .. tag)
  end
  if #items == 0 then
    return nil
  end
  return h.div({ class = "task-meta" }, items)
end

local function describe_task(t)
  local parts = { t.completed and "done" or "open" }
  if reminded(t) then
    parts[#parts + 1] = "reminder due"
  end
  if present(t.priority) then
    parts[#parts + 1] = t.priority .. " priority"
  end
  if present(t.estimate) then
    parts[#parts + 1] = "estimate " .. clank.json.formatNumber(t.estimate)
  end
  if #t.tags > 0 then
    parts[#parts + 1] = "tags " .. concat(t.tags, ", ")
  end
  return concat(parts, "; ")
end

local function task_row(d, t)
  local busy = d.busy.value
  local completing = busy and busy.id == t.id and busy.kind == "complete"
  local archiving = busy and busy.id == t.id and busy.kind == "archive"
  return h.li({
    key = t.id, -- patched by id: a row keeps its DOM node when others come or go
    class = t.completed and "task done" or "task",
    agentId = "task-" .. t.id,
    agentLabel = t.title,
    agentDescription = describe_task(t),
  },
    h.span({ class = "check", ["aria-hidden"] = "true" }, t.completed and "\u{2713}" or ""),
    h.div({ class = "task-main" },
      h.span({ class = "task-title" }, t.title),
      task_meta(t)),
    h.div({ class = "task-actions" },
      t.completed and h.span({ class = "status" }, "Done") or h.button({
        type = "button",
        class = "button secondary",
        agentId = "complete-" .. t.id,
        agentLabel = "Complete \u{201c}" .. t.title .. "\u{201d}",
        agentAction = completeTask,
        intent = "complete-task",
        disabled = busy and true or nil,
        ["aria-busy"] = completing or nil,
        onClick = function(_, ctx) d.act("complete", t, ctx) end,
      }, completing and "Completing\u{2026}" or "Complete"),
      h.button({
        type = "button",
        class = "button danger",
        agentId = "archive-" .. t.id,
        agentLabel = "Archive \u{201c}" .. t.title .. "\u{201d}",
        agentAction = archiveTask,
        intent = "destructive-control",
        disabled = busy and true or nil,
        ["aria-busy"] = archiving or nil,
        onClick = function(_, ctx) d.act("archive", t, ctx) end,
      }, archiving and "Archiving\u{2026}" or "Archive")))
end

local TaskList = clank.defineView {
  name = "tasks",
  description = "Your tasks: add, complete and archive them.",
  auth = "user", -- signed in (or CLANK_TASKS_USER's single user): others go to the sign-in page
  -- Per view session: the list as last read, the add form, a runner per row action.
  -- the list of this user's topic: a change made anywhere re-loads it
  topics = function(_, ctx) return { user_topic(ctx) } end,
  load = function(_, load_ctx, previous)
    if previous then -- a publish: the list read again, the form and runners as they are
      previous.refresh(load_ctx)
      return previous
    end
    local d
    d = {
      email = type(load_ctx.user) == "table" and load_ctx.user.email or nil,
      tasks = signal.signal(array()),
      listError = signal.signal(nil),
      actionError = signal.signal(nil),
      busy = signal.signal(nil), -- { id, kind } while a row's action runs
      added = signal.signal(nil), -- the title of the task just added
      form = clank.createForm {
        id = "new-task",
        schema = CreateTask,
        action = createTask,
        fields = { "title", "priority", "estimate", "tags" },
        initial = { title = "" }, -- an untouched title is empty, not missing
        submitLabel = "Add task",
        pendingLabel = "Adding\u{2026}",
        onSubmit = function(_, _, ctx) d.submit(ctx) end,
      },
      complete = clank.actionRunner(completeTask),
      archive = clank.actionRunner(archiveTask),
    }

    -- Reads the list again (tasks.list, as an agent would).
    function d.refresh(ctx)
      local ok, out = pcall(listTasks, {}, ctx)
      signal.batch(function()
        if ok then
          d.tasks.value = out.tasks
          d.listError.value = nil
        else
          d.listError.value = "Could not load your tasks: " .. message_of(out)
        end
      end)
    end

    -- Completes or archives one task through its runner, then reads the list again.
    function d.act(kind, t, ctx)
      local runner = d[kind]
      signal.batch(function()
        d.actionError.value = nil
        d.added.value = nil
        d.busy.value = { id = t.id, kind = kind }
      end)
      local out = runner:run({ id = t.id })
      signal.batch(function()
        d.busy.value = nil
        if out == nil then
          d.actionError.value = format("Could not %s \u{201c}%s\u{201d}: %s", kind, t.title,
            message_of(runner.error.value))
        end
      end)
      d.refresh(ctx)
    end

    function d.submit(ctx)
      d.actionError.value = nil
      d.added.value = nil
      local title = d.form:get("title")
      if d.form:submit() ~= nil then
        signal.batch(function()
          d.form:reset()
          d.added.value = title
        end)
      end
      d.refresh(ctx)
    end

    d.refresh(load_ctx)
    return d
  end,
  render = function(_, d)
    local tasks = d.tasks.value
    local done = 0
    for _, t in ipairs(tasks) do
      if t.completed then
        done = done + 1
      end
    end
    local rows = {}
    for i, t in ipairs(tasks) do
      rows[i] = task_row(d, t)
    end
    local list_error, action_error, added = d.listError.value, d.actionError.value, d.added.value
    return h.main({ class = "app" },
      h.header({ class = "app-header" },
        h.h1(nil, "Tasks"),
        d.email and h.form({ class = "account", method = "post", action = "/__clank/auth/logout" },
          h.span({ class = "account-email", agentId = "account" }, d.email), " ",
          h.button({ type = "submit", class = "button ghost", agentId = "sign-out" }, "Sign out")),
        h.p({ class = "summary", agentId = "summary" },
          #tasks == 0 and "Nothing to do yet."
            or plural(#tasks - done, "open task", "open tasks") .. " \u{b7} " .. done .. " done")),
      h.section({ class = "card", ["aria-labelledby"] = "add-heading" },
        h.h2({ id = "add-heading" }, "Add a task"),
        d.form:render(),
        added and h.p({ class = "notice", role = "status" },
          "Added \u{201c}" .. added .. "\u{201d}.")),
      h.section({ class = "card", ["aria-labelledby"] = "list-heading" },
        h.div({ class = "card-header" },
          h.h2({ id = "list-heading" }, "Your tasks"),
          h.button({
            type = "button",
            class = "button ghost",
            agentId = "refresh",
            agentLabel = "Refresh the list",
            onClick = function(_, ctx) d.refresh(ctx) end,
          }, "Refresh")),
        list_error and h.p({ class = "alert", role = "alert", agentId = "list-error" }, list_error),
        action_error and h.p({ class = "alert", role = "alert", agentId = "action-error" },
          action_error),
        #rows > 0 and h.ul({ key = "tasks", class = "tasks", agentId = "task-list", agentLabel = "Tasks" },
          rows)
          or (not list_error and h.p({ class = "empty", agentId = "empty" },
            "No tasks yet. Add your first one above."))))
  end,
}

return clank.app {
  name = "tasks",
  description = "Task tracker",
  version = "1.0.0",
  actions = { createTask, listTasks, completeTask, archiveTask },
  views = { TaskList },
  jobs = { Remind, ArchiveDone },
  -- the store's database (clank.db keeps one pool per target), so that a job enqueued in the
  -- store's transaction is written by it
  jobsDb = db_target(),
  schedules = { { name = "nightly-archive", cron = "15 3 * * *", job = ArchiveDone } }, -- UTC
  -- people and their agents sign in (the accounts live in the tasks' own database), unless one
  -- user is given
  auth = not single_user and clank.auth { db = db_target() } or nil,
  context = single_user and function() return { user = single_user } end or nil,
  -- public/ next to this file, also when another app file loads this one (spec/fixtures/apps/mcp_tasks)
  static = { ["/assets"] = here:sub(1, 1) == "/" and here .. "/public" or "public" },
  page = { stylesheets = { "/assets/app.css" } },
}
