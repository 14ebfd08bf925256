-- clank-run jobs ls [--state S] [--limit N] | jobs retry ID | jobs cancel ID [--app DIR]
-- (issue 32): an app's durable jobs from a shell, on the database the app's jobs use. The app
-- is loaded as `users add` loads it (clank.test.app: its top-level code runs, nothing serves,
-- no runner starts); a server running it meanwhile picks a retried job up within its poll.
-- Exit status: 0 done; 1 no such job, not retryable or cancellable, an app that fails to load
-- or has no jobs; 2 bad usage. Run by runtime/host/command.c: (target, env) → status.
local USAGE = [[
usage: clank-run jobs ls [--state STATE] [--limit N] [--app DIR]
       clank-run jobs retry ID [--app DIR]
       clank-run jobs cancel ID [--app DIR]
]]

local STATES = { "available", "running", "done", "dead", "cancelled" }
local IS_STATE = {}
for _, s in ipairs(STATES) do IS_STATE[s] = true end

local null = require("clank.core").null

local tointeger, tonumber, tostring, format, concat = math.tointeger, tonumber, tostring, string.format,
  table.concat

local function fail(code, message)
  io.stderr:write("clank-run jobs: ", message, "\n")
  if code == 2 then io.stderr:write(USAGE) end
  return code
end

-- A positive integer written in decimal digits, or nil.
local function count(text)
  if not text or not text:find("^%d+$") then return nil end
  local n = tointeger(tonumber(text))
  return n and n > 0 and n or nil
end

local function parse(args)
  local opts = { app = "." }
  local words = {}
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--app" or a == "--state" or a == "--limit" then
      local value = args[i + 1]
      if not value or value == "" then return nil, a .. " needs a value" end
      opts[a:sub(3)] = value
      i = i + 2
    elseif a:sub(1, 1) == "-" then
      return nil, "unknown option " .. a
    else
      words[#words + 1] = a
      i = i + 1
    end
  end
  opts.command = words[1]
  if opts.command == "ls" then
    if #words > 1 then return nil, "extra argument " .. words[2] end
    if opts.state and not IS_STATE[opts.state] then
      return nil, "--state must be one of " .. concat(STATES, ", ")
    end
    if opts.limit then
      opts.limit = count(opts.limit)
      if not (opts.limit and opts.limit <= 1000) then return nil, "--limit must be a number from 1 to 1000" end
    end
  elseif opts.command == "retry" or opts.command == "cancel" then
    if opts.state or opts.limit then return nil, "--state and --limit are for ls" end
    if not words[2] then return nil, opts.command .. " needs a job id" end
    if #words > 2 then return nil, "extra argument " .. words[3] end
    opts.id = count(words[2])
    if not opts.id then return nil, "a job id is a positive integer, not " .. words[2] end
  elseif opts.command == nil then
    return nil, "a command is needed: ls, retry or cancel"
  else
    return nil, "unknown command " .. opts.command .. " (ls, retry or cancel)"
  end
  return opts
end

-- A column's value on one line: SQL NULL is empty, tabs and line breaks are spaces.
local function cell(v)
  if v == nil or v == null then return "" end
  return (tostring(v):gsub("[%c]", " "))
end

local function ls(jobs, opts, out)
  local list = jobs.list { state = opts.state, limit = opts.limit }
  local counts = jobs.counts()
  if #list == 0 then
    out:write(opts.state and "no " .. opts.state .. " jobs\n" or "no jobs\n")
  else
    out:write("ID\tSTATE\tQUEUE\tNAME\tATTEMPTS\tLAST ERROR\n")
    for _, job in ipairs(list) do
      out:write(concat({ cell(job.id), cell(job.state), cell(job.queue), cell(job.name),
        cell(job.attempt) .. "/" .. cell(job.max_attempts), cell(job.last_error) }, "\t"), "\n")
    end
  end
  -- the counts of every job, one line per queue, whatever --state kept above
  local queues, byQueue = {}, {}
  for _, c in ipairs(counts) do
    if not byQueue[c.queue] then
      byQueue[c.queue] = {}
      queues[#queues + 1] = c.queue
    end
    byQueue[c.queue][c.state] = c.n
  end
  if #queues > 0 then out:write("\n") end
  for _, q in ipairs(queues) do
    local parts = {}
    for i, s in ipairs(STATES) do parts[i] = format("%s %s", s, cell(byQueue[q][s] or 0)) end
    out:write("queue ", q, ": ", concat(parts, ", "), "\n")
  end
end

-- Why retry or cancel refused a job: there is none, or its state (get's, just before).
local WHY = {
  retry = "job %d is %s: only a done, dead or cancelled job can be retried",
  cancel = "job %d is %s: only an available or running job can be cancelled",
}
local DONE = { retry = "job %d will run again\n", cancel = "job %d is cancelled\n" }

-- retry or cancel → whether it was done, and the job's state before (nil: no such job).
local function act(jobs, opts)
  local row = jobs.get(opts.id)
  if not row then return false end
  return jobs[opts.command](opts.id), row.state
end

return function(_, env)
  local opts, problem = parse(env.args)
  if not opts then return fail(2, problem) end
  local dir = opts.app:gsub("/+$", "")
  if dir == "" then dir = "/" end
  local path = dir .. "/app.lua"
  if not env.fs.exists(path) then return fail(1, "no app.lua in " .. opts.app) end
  -- where an app without jobsDb keeps its jobs (.clank/jobs.sqlite), as clank-run says it
  debug.getregistry()["clank.app_dir"] = env.fs.realpath(dir) or dir
  local test = require "clank.test"
  local ok, t = pcall(test.app, path)
  if not ok then return fail(1, tostring(t)) end
  local jobs = require "clank.jobs"
  if not jobs.bound() then return fail(1, path .. " has no jobs (clank.app { jobs = { ... } })") end
  if opts.command == "ls" then
    local listed, err = pcall(test.run, ls, jobs, opts, io.stdout)
    return listed and 0 or fail(1, tostring(err))
  end
  local ran, done, state = pcall(test.run, act, jobs, opts)
  if not ran then return fail(1, tostring(done)) end
  if not done then
    return fail(1, state and format(WHY[opts.command], opts.id, state) or format("no job %d", opts.id))
  end
  io.stdout:write(format(DONE[opts.command], opts.id))
  return 0
end
