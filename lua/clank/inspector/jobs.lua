-- /__clank/inspector/jobs (SPEC §16, issue 32): the app's durable jobs, for a person. A plain
-- page rendered on the server, not a live view: what it shows is the database's, read afresh at
-- each visit, and its buttons are forms that work without the client script. It shows the jobs
-- of each queue by state, the dead jobs with their errors and the last 100 jobs; an ended job
-- has Retry, a waiting or running one Cancel. Those POST to /__clank/inspector/jobs/<id>/retry
-- or /cancel, which clank-run lets through only under the inspector's access rule and the
-- CSRF rule of app routes (runtime/host/dispatch.c: a cross-site form is refused), and which
-- answer 303 back to the page with what happened in its query.
--
--   handle(request, appName) → response        (in a task: the queries wait)
local jobs = require "clank.jobs"
local null = require("clank.core").null
local element = require "clank.ui.element"
local render = require "clank.ui.render"
local page = require "clank.live.page"

local h = element.h
local ipairs, tostring, pcall, tonumber, format, date, concat, tointeger =
  ipairs, tostring, pcall, tonumber, string.format, os.date, table.concat, math.tointeger

local M = {}

M.PATH = "/__clank/inspector/jobs"

local STATES = { "available", "running", "done", "dead", "cancelled" }
local RETRYABLE = { done = true, dead = true, cancelled = true }   -- clank.jobs.retry's
local CANCELLABLE = { available = true, running = true }          -- clank.jobs.cancel's
local RECENT = 100

local STYLE = [[
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#222}
section{margin-bottom:2rem}
table{border-collapse:collapse}
td,th{border-bottom:1px solid #ddd;padding:.2rem .6rem;text-align:left;vertical-align:top}
td.error{white-space:pre-wrap;font-family:monospace;color:#a00;max-width:50rem}
form{display:inline}
[role=status]{background:#f4f4f4;padding:.5rem}
]]

-- What the page says after a POST, from the query the POST's 303 wrote (never the query's own
-- text: a link could carry any).
local NOTES = {
  retry = { ["1"] = "Job %d will run again.",
    ["0"] = "Job %d was not retried: only a done, dead or cancelled job can be, and it must exist." },
  cancel = { ["1"] = "Job %d is cancelled.",
    ["0"] = "Job %d was not cancelled: it has ended, or there is no such job." },
}

local function note_of(query)
  local texts = NOTES[query.op or ""]
  local text = texts and texts[query.ok or ""]
  local id = tointeger(tonumber(query.id or ""))
  if text and id then return format(text, id) end
end

-- Milliseconds since the epoch, as UTC.
local function when(ms)
  ms = tointeger(tonumber(ms))
  if not ms then return "" end
  return date("!%Y-%m-%d %H:%M:%S", ms // 1000) .. format(".%03d", ms % 1000)
end

local function button(id, op, label)
  return h.form({ method = "post", action = M.PATH .. "/" .. id .. "/" .. op },
    h.button({ type = "submit", agentId = "job." .. id .. "." .. op }, label))
end

local function buttons(job)
  if RETRYABLE[job.state] then return button(job.id, "retry", "Retry") end
  if CANCELLABLE[job.state] then return button(job.id, "cancel", "Cancel") end
  return ""
end

local function row(cells, tag)
  local out = {}
  for i, c in ipairs(cells) do out[i] = h[tag or "td"](nil, c) end
  return h.tr(nil, out)
end

-- A column's value as text: SQL NULL (clank.core.null) is empty.
local function text(v)
  if v == nil or v == null then return "" end
  return tostring(v)
end

local function attempts(job) return tostring(job.attempt) .. "/" .. tostring(job.max_attempts) end

-- counts() rows pivoted: one row per queue, a column per state.
local function render_counts(counts)
  if #counts == 0 then return h.p(nil, "No jobs yet.") end
  local queues, byQueue = {}, {}
  for _, c in ipairs(counts) do
    local q = byQueue[c.queue]
    if not q then
      q = {}
      byQueue[c.queue] = q
      queues[#queues + 1] = c.queue
    end
    q[c.state] = tostring(c.n)
  end
  local rows = {}
  for i, name in ipairs(queues) do
    local cells = { name }
    for k, state in ipairs(STATES) do cells[k + 1] = byQueue[name][state] or "0" end
    rows[i] = row(cells)
  end
  local head = { "queue" }
  for k, state in ipairs(STATES) do head[k + 1] = state end
  return h.table({ id = "queues" }, h.thead(nil, row(head, "th")), h.tbody(nil, rows))
end

local function render_dead(list)
  if #list == 0 then return h.p(nil, "No dead jobs.") end
  local rows = {}
  for i, job in ipairs(list) do
    rows[i] = h.tr({ id = "dead-" .. job.id },
      h.td(nil, text(job.id)), h.td(nil, text(job.name)), h.td(nil, text(job.queue)), h.td(nil, attempts(job)),
      h.td(nil, when(job.finished_at)), h.td({ class = "error" }, text(job.last_error)),
      h.td(nil, buttons(job)))
  end
  return h.table({ id = "dead" },
    h.thead(nil, row({ "id", "name", "queue", "attempts", "died at (UTC)", "error", "" }, "th")),
    h.tbody(nil, rows))
end

local function render_recent(list)
  if #list == 0 then return h.p(nil, "No jobs yet.") end
  local rows = {}
  for i, job in ipairs(list) do
    rows[i] = h.tr({ id = "job-" .. job.id },
      h.td(nil, text(job.id)), h.td(nil, text(job.name)), h.td(nil, text(job.queue)), h.td(nil, text(job.state)),
      h.td(nil, attempts(job)), h.td(nil, when(job.run_at)), h.td({ class = "error" }, text(job.last_error)),
      h.td(nil, buttons(job)))
  end
  return h.table({ id = "recent" },
    h.thead(nil, row({ "id", "name", "queue", "state", "attempts", "run at (UTC)", "last error", "" }, "th")),
    h.tbody(nil, rows))
end

local function document(status, title, body)
  local html = concat {
    '<!doctype html><html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    "<title>", render.escape(title), "</title></head><body>", render.render(body), "</body></html>",
  }
  return { status = status, headers = page.headers(page.csp()), body = html }
end

-- The page: what the database says now, or why it could not say.
local function show(request, appName)
  local title = "Jobs: " .. tostring(appName or "app")
  local parts = { h.style(nil, element.raw(STYLE)), h.h1(nil, title),
    h.p(nil, h.a({ href = "/__clank/inspector" }, "Back to the inspector")) }
  local status = 200
  if not jobs.bound() then
    parts[#parts + 1] = h.p({ id = "no-jobs" }, "This app has no jobs (clank.app { jobs = { ... } }).")
  else
    local note = note_of(request.query or {})
    if note then parts[#parts + 1] = h.p({ role = "status", id = "note" }, note) end
    local ok, counts, dead, recent = pcall(function()
      return jobs.counts(), jobs.list { state = "dead", limit = RECENT }, jobs.list { limit = RECENT }
    end)
    if ok then
      parts[#parts + 1] = h.section({ id = "counts" }, h.h2(nil, "Queues"), render_counts(counts))
      parts[#parts + 1] = h.section({ id = "dead-jobs" }, h.h2(nil, "Dead jobs"), render_dead(dead))
      parts[#parts + 1] = h.section({ id = "recent-jobs" }, h.h2(nil, "Last " .. RECENT .. " jobs"),
        render_recent(recent))
    else
      status = 500
      parts[#parts + 1] = h.p({ class = "error", id = "failed" },
        "The jobs' database failed: " .. tostring(counts):match("^[^\n]*"))
    end
  end
  return document(status, title, h.main({ id = "clank-jobs" }, parts))
end

-- POST .../<id>/retry | cancel: done or refused, then back to the page, which says which.
local function act(request)
  local id, op = request.path:match("^/__clank/inspector/jobs/(%d+)/(%l+)$")
  id = tointeger(tonumber(id or ""))
  if not (id and NOTES[op]) then
    return { status = 404, body = "Not found." }
  end
  if not jobs.bound() then return { status = 404, body = "This app has no jobs." } end
  local done = jobs[op](id)
  return { status = 303, headers = { location = format("%s?op=%s&id=%d&ok=%d", M.PATH, op, id, done and 1 or 0) } }
end

function M.handle(request, appName)
  if request.method == "POST" then return act(request) end
  if request.path ~= M.PATH then return { status = 404, body = "Not found." } end
  return show(request, appName)
end

return M
