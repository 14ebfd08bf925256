-- The inspector's view (SPEC §16), made of Clank's own views and forms: every action with a
-- form generated from its input schema (submitting calls the action through the runner the
-- live channel binds, so §11's confirmation applies, and shows the JSON answer), every view's
-- surface tree (§9) mounted with empty props, and the last requests and reloads clank-run kept;
-- for an app with jobs, a link to their page (clank.inspector.jobs).
local bridge = require "clank.bridge"
local json = require "clank.json"
local signal = require "clank.signal"
local element = require "clank.ui.element"
local view_mod = require "clank.ui.view"
local surface_mod = require "clank.ui.surface"
local form_mod = require "clank.ui.form"

local h = element.h
local type, ipairs, pcall, tostring, format, sort, date =
  type, ipairs, pcall, tostring, string.format, table.sort, os.date

local M = {}

M.NAME = "__clank.inspector"

-- Plain CSS only: the renderer escapes text, and the page's policy allows inline styles.
local STYLE = [[
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#222}
section{margin-bottom:2rem}
article{border:1px solid #ccc;border-radius:4px;padding:.5rem 1rem;margin:.5rem 0}
pre{background:#f4f4f4;padding:.5rem;overflow:auto;white-space:pre-wrap}
table{border-collapse:collapse}
td,th{border-bottom:1px solid #ddd;padding:.2rem .6rem;text-align:left}
.clank-error{color:#a00}
form{display:grid;gap:.4rem;max-width:28rem}
.clank-field{display:grid;gap:.15rem}
.clank-field label{font-weight:600}
input,select,textarea{font:inherit;padding:.25rem .4rem}
button,input[type=checkbox]{justify-self:start;font:inherit}
]]

local function sorted_by_name(list, name_of)
  local out = {}
  for i, v in ipairs(list or {}) do out[i] = v end
  sort(out, function(a, b) return name_of(a) < name_of(b) end)
  return out
end

-- The bridge's answer for a call (SPEC §5): {"ok":true,"output":...} or {"ok":false,"error":...}
-- A surface tree as indented JSON, one node per line under its parent: what a person reads.
local function tree_text(nodes, indent)
  indent = indent or ""
  if #nodes == 0 then return "[]" end
  local lines = {}
  for i, node in ipairs(nodes) do
    local children = node.children
    node.children = nil
    local line = json.encode(node)
    node.children = children
    if children then
      line = line:sub(1, -2) .. ',"children":' .. tree_text(children, indent .. "  ") .. "}"
    end
    lines[i] = indent .. "  " .. line
  end
  return "[\n" .. table.concat(lines, ",\n") .. "\n" .. indent .. "]"
end

local function answer_text(action, ok, value)
  if ok then
    if value == nil then return '{"ok":true}' end
    return '{"ok":true,"output":' .. json.encode(value, action.output) .. "}"
  end
  local e = bridge.errorEnvelope(value, { exposeErrors = false })
  return json.encode { ok = false, error = { code = e.code, message = e.message, details = e.details } }
end

-- One action's form and the signal holding its last answer.
local function action_entry(action)
  local name = action.name
  local entry = { action = action, name = name, answer = signal.signal(nil) }
  local made, form = pcall(form_mod.createForm, {
    id = "action-" .. action.name, schema = action.input, action = action,
    submitLabel = "Call " .. name, pendingLabel = "Calling\u{2026}",
    onSubmit = function(f)
      local valid, data = f:validate()
      if not valid then
        entry.answer.value = answer_text(action, false, data)
        return
      end
      local output = f.runner:run(data)
      local err = f.runner.error.value
      if output == nil and err ~= nil then
        entry.answer.value = answer_text(action, false, err)
      else
        entry.answer.value = answer_text(action, true, output)
      end
    end,
  })
  if made then entry.form = form else entry.noForm = tostring(form) end
  return entry
end

local function issues_text(err)
  local lines = {}
  for _, issue in ipairs(err.issues or {}) do
    local path = {}
    for i, p in ipairs(issue.path or {}) do path[i] = tostring(p) end
    lines[#lines + 1] = (#path > 0 and table.concat(path, ".") or "value") .. ": " .. issue.message
  end
  return table.concat(lines, "; ")
end

-- A view's surface with empty props, or why there is none.
local function view_entry(view, ctx)
  local m = view.viewManifest
  local entry = { name = m.name, description = m.description }
  if view.props then
    local parsed = view.props:safeParse({})
    if not parsed.success then
      entry.message = "This view needs props: " .. issues_text(parsed.error)
      return entry
    end
  end
  local ok, nodes = pcall(function()
    local data
    if view.load then data = view.load({}, ctx) end
    local mounted = view_mod.mount(view, {}, { data = data })
    local list = surface_mod.createAgentSurface(mounted):inspect()
    mounted:dispose()
    return list
  end)
  if ok then
    entry.surface = tree_text(nodes)
  else
    entry.message = "The view failed to mount: " .. (type(nodes) == "table" and tostring(nodes.message)
      or tostring(nodes):match("^[^\n]*"))
  end
  return entry
end

local function render_action(e)
  local a = e.action
  local facts = "side effects: " .. a.manifest.sideEffects .. (a:requiresConfirmation()
    and "; asks for confirmation" or "")
  return h.article({ agentId = "action." .. e.name, agentLabel = e.name },
    h.h3(nil, e.name),
    h.p(nil, a.description),
    h.p({ class = "facts" }, facts),
    e.form and e.form:render() or h.p({ class = "clank-error" },
      "No form for this input schema: " .. e.noForm),
    e.answer.value and h.pre({ id = "answer-" .. e.name, agentId = "answer." .. e.name,
      role = "status", agentLabel = "Answer of " .. e.name }, e.answer.value))
end

local function render_view(e)
  return h.article({ agentId = "view." .. e.name, agentLabel = e.name },
    h.h3(nil, e.name),
    e.description and h.p(nil, e.description),
    e.surface and h.pre({ id = "surface-" .. e.name }, e.surface)
      or h.p({ class = "clank-error" }, e.message))
end

local function when(at) return date("!%Y-%m-%d %H:%M:%S", at) end

local function row(cells, tag)
  local out = {}
  for i, c in ipairs(cells) do out[i] = h[tag or "td"](nil, c) end
  return h.tr(nil, out)
end

local function render_requests(list)
  local rows = {}
  for i, r in ipairs(list) do
    rows[i] = row { when(r.at), r.method, r.path, r.status, format("%.1f", r.ms), r.id }
  end
  return h.table({ id = "requests" },
    h.thead(nil, row({ "time", "method", "path", "status", "ms", "request id" }, "th")),
    h.tbody(nil, rows))
end

local function render_reloads(list)
  if #list == 0 then return h.p(nil, "No reloads yet.") end
  local rows = {}
  for i, r in ipairs(list) do
    rows[i] = row { when(r.at), r.result, format("%.1f", r.ms), r.note or "" }
  end
  return h.table({ id = "reloads" },
    h.thead(nil, row({ "time", "result", "ms", "error" }, "th")), h.tbody(nil, rows))
end

-- define(app, log) → the view; log() → { requests, reloads } (clank-run's rings, newest first).
function M.define(app, log)
  log = log or function() return { requests = {}, reloads = {} } end
  return view_mod.defineView {
    name = M.NAME,
    description = "Clank inspector",
    load = function(_, ctx)
      local actions = {}
      for i, a in ipairs(sorted_by_name(app.actions, function(a) return a.name end)) do
        actions[i] = action_entry(a)
      end
      local views = {}
      for i, v in ipairs(sorted_by_name(app.views, function(v) return v.viewManifest.name end)) do
        views[i] = view_entry(v, ctx)
      end
      return { actions = actions, views = views, log = signal.signal(log()) }
    end,
    render = function(_, data)
      local actions, views = {}, {}
      for i, e in ipairs(data.actions) do actions[i] = render_action(e) end
      for i, e in ipairs(data.views) do views[i] = render_view(e) end
      local recent = data.log.value
      return h.main({ id = "clank-inspector" },
        h.style(nil, element.raw(STYLE)),
        h.h1(nil, "Inspector: " .. tostring(app.name or "app")),
        app.jobs and h.p(nil, h.a({ href = "/__clank/inspector/jobs", agentId = "jobs" }, "Jobs")),
        h.p(nil, h.a({ href = "/__clank/docs", agentId = "docs" }, "Docs"),
          ": the reference manual of this version of Clank"),
        h.section({ id = "actions" }, h.h2(nil, "Actions"), actions),
        h.section({ id = "views" }, h.h2(nil, "Views"),
          #views > 0 and views or h.p(nil, "This app has no views.")),
        h.section({ id = "log" }, h.h2(nil, "Requests and reloads"),
          h.button({ type = "button", agentId = "refresh",
            onClick = function() data.log.value = log() end }, "Refresh"),
          h.h3(nil, "Last requests"), render_requests(recent.requests),
          h.h3(nil, "Reloads"), render_reloads(recent.reloads)))
    end,
  }
end

return M
