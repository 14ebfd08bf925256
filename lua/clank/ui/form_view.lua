-- form:render() (SPEC §10): a <form> with one labelled control per field, agentIds
-- "<form id>.<field>", aria-invalid and the messages. Reads the form's signals, so a mounted
-- view showing it re-renders when they change.
local element = require "clank.ui.element"
local json = require "clank.json"

local h = element.h
local type, ipairs, concat = type, ipairs, table.concat

local M = {}

local function text(v)
  if type(v) == "string" then return v end
  if type(v) == "number" then return json.formatNumber(v) end
  return nil
end

local function control(form, f, props)
  local info, name = f.info, f.info.name
  local v = f.value.value
  local function on_value(ev) form:set(name, ev.value) end
  local ctl = info.control
  if ctl == "checkbox" then
    props.type = "checkbox"
    props.checked = v == true
    props.onChange = function(ev) form:set(name, ev.checked) end
    return h.input(props)
  elseif ctl == "select" then
    local options = {}
    if not info.multiple then options[1] = h.option({ value = "" }, "") end -- nothing chosen yet
    for _, value in ipairs(info.enum) do options[#options + 1] = h.option({ value = value }, value) end
    props.multiple = info.multiple or nil
    if info.multiple then
      props.value = type(v) == "table" and v ~= json.null and v or json.array()
    else
      props.value = text(v) or ""
    end
    props.onChange = on_value
    return h.select(props, options)
  elseif ctl == "list" then
    local lines = {}
    if type(v) == "table" and v ~= json.null then
      for i, item in ipairs(v) do lines[i] = text(item) or "" end
    end
    props.value = concat(lines, "\n")
    props.onInput = on_value
    return h.textarea(props)
  end
  -- text, number, password: a password's value is never put in the page
  props.type = ctl == "password" and "password" or ctl == "number" and "number" or "text"
  if ctl ~= "password" then props.value = text(v) or "" end
  if ctl ~= "number" then props.maxlength = info.maxLength end -- checked before onInput runs
  props.onInput = on_value
  return h.input(props)
end

local function field_view(form, info)
  local f = form.fields[info.name]
  local dom_id = form.id .. "-" .. info.name
  local message = f.error.value
  local props = {
    id = dom_id,
    name = info.name,
    agentId = form.id .. "." .. info.name,
    required = (info.required and not info.nullable) or nil, -- empty is null, not missing
    ["aria-invalid"] = message and "true" or nil,
    ["aria-describedby"] = message and dom_id .. "-error" or nil,
  }
  return h.div({ class = "clank-field" },
    h.label({ ["for"] = dom_id }, info.label),
    control(form, f, props),
    message and h.p({ id = dom_id .. "-error", class = "clank-error", role = "alert" }, message))
end

function M.render(form)
  local fields = {}
  for i, info in ipairs(form.order) do fields[i] = field_view(form, info) end
  local form_error = form.formError.value
  local pending = form.pending.value == true
  local submit_id = form.id .. (form.fields.submit and "._submit" or ".submit")
  return h.form({
    id = form.id,
    ["aria-label"] = form.label,
    novalidate = true,
    ["data-clank-form"] = form.id,
    ["aria-busy"] = pending or nil,
    -- the action it runs: a live page asks before submitting when it needs confirmation
    agentAction = form.action,
    onSubmit = function(ev, ctx)
      if form.onSubmit then return form.onSubmit(form, ev, ctx) end
      form:submit()
    end,
  },
    fields,
    form_error and h.p({ id = form.id .. "-error", class = "clank-error", role = "alert" }, form_error),
    h.button({ type = "submit", agentId = submit_id, disabled = pending or nil,
      ["aria-busy"] = pending or nil }, pending and form.pendingLabel or form.submitLabel))
end

return M
