-- The tasks app's own spec, run by `clank-run test apps/tasks` (SPEC §16): the app loaded in
-- process through clank.test, as README.md's table of actions and SPEC §5, §9, §11 describe it.
-- Each run is its own user (the app's context, replaced), so a database that outlives the run
-- (CLANK_TASKS_DB, else tasks.db next to app.lua) holds nothing this run sees.
local test = require "clank.test"
local clank = require "clank"

local user = ("spec-%d-%d"):format(os.time(), math.random(1, 1e9))

describe("the tasks app", function()
  local t = test.app("app.lua", { context = { user = user } })

  it("creates a task only once a person confirmed", function()
    local refused, status = t:call("tasks.create", { title = "Ship docs", estimate = 2, tags = { "docs" } })
    assert.are.equal(428, status)
    assert.are.same({ ok = false, error = { code = "CONFIRMATION_REQUIRED",
      message = "This action requires explicit confirmation." } }, refused)

    local answer
    answer, status = t:call("tasks.create", { title = "Ship docs", priority = "high", estimate = 2,
      tags = { "docs" } }, { confirmed = true })
    assert.are.equal(200, status)
    assert.is_true(answer.ok)
    assert.is_true(answer.output.created)
    assert.is_string(answer.output.id)
  end)

  it("lists the user's tasks, and only theirs", function()
    local answer, status = t:call("tasks.list", {})
    assert.are.equal(200, status)
    local titles = {}
    for _, task in ipairs(answer.output.tasks) do titles[#titles + 1] = task.title end
    assert.are.same({ "Ship docs" }, titles)
    local task = answer.output.tasks[1]
    assert.are.equal("high", task.priority)
    assert.are.equal(2, task.estimate)
    assert.are.same({ "docs" }, task.tags)
    assert.is_false(task.completed)

    local other = t:call("tasks.list", {}, { context = { user = user .. "-other" } })
    assert.are.same({}, other.output.tasks)
  end)

  it("refuses a title that is empty", function()
    local answer, status = t:call("tasks.create", { title = "", estimate = clank.null, tags = {} },
      { confirmed = true })
    assert.are.equal(422, status)
    assert.are.equal("INVALID_INPUT", answer.error.code)
  end)

  it("answers 404 NOT_FOUND `Task not found.` for an unknown id", function()
    local answer, status = t:call("tasks.complete", { id = "999999999" }, { confirmed = true })
    assert.are.equal(404, status)
    assert.are.same({ ok = false, error = { code = "NOT_FOUND", message = "Task not found." } }, answer)
  end)

  it("serves the live page at /", function()
    local status, html = t:page("/")
    assert.are.equal(200, status)
    assert.truthy(html:find("<h1>Tasks</h1>", 1, true))
    assert.truthy(html:find('href="/assets/app.css"', 1, true))
  end)

  it("lets an agent add a task through the page's form, confirming the write", function()
    local surface = t:surface("tasks")
    assert.is_true(surface:input("new-task.title", "Write the changelog"))
    assert.has_error(function() surface:activate("new-task.submit") end,
      "clank.test: CONFIRMATION_REQUIRED: This action requires explicit confirmation.")
    assert.is_true(surface:activate("new-task.submit", { confirmed = true }))
    assert.are.equal("2 open tasks \u{b7} 0 done", surface:find("summary").label)
    local answer = t:call("tasks.list", {})
    assert.are.equal("Write the changelog", answer.output.tasks[2].title)
  end)

  -- Reminders: the task and its tasks.remind job (due at remindAt) are written together. The job
  -- runs under clank-run (spec/functional/tasks_spec.lua); here it waits in the database.
  local ann = { context = { user = user .. "-reminders" }, confirmed = true }

  it("creates a task with a reminder: listed with remindAt, not reminded yet", function()
    local at = require("clank.core").nowMs() + 3600000
    local answer, status = t:call("tasks.create", { title = "Call the bank", estimate = clank.null, tags = {},
      remindAt = at }, ann)
    assert.are.equal(200, status)
    local task = t:call("tasks.list", {}, ann).output.tasks[1]
    assert.are.equal(answer.output.id, task.id)
    assert.are.equal(at, task.remindAt)
    assert.is_nil(task.remindedAt)
  end)

  it("refuses a reminder time that is not in the future", function()
    local answer, status = t:call("tasks.create", { title = "Too late", estimate = clank.null, tags = {},
      remindAt = require("clank.core").nowMs() - 1000 }, ann)
    assert.are.equal(422, status)
    assert.are.same({ ok = false, error = { code = "INVALID_INPUT",
      message = "remindAt: Must be in the future (milliseconds since the Unix epoch)." } }, answer)
    assert.are.equal(1, #t:call("tasks.list", {}, ann).output.tasks)
  end)

  it("archives done tasks every night at 03:15 UTC", function()
    assert.are.equal(1, #t.app.schedules)
    local schedule = t.app.schedules[1]
    assert.are.same({ "nightly-archive", "15 3 * * *", "tasks.archiveDone" },
      { schedule.name, schedule.cron, schedule.job.name })
    assert.is_nil(schedule.tz) -- UTC
  end)
end)
