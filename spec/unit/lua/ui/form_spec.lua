-- clank.createForm (SPEC §10). The manifest below is written by hand from SPEC §3 and §10.
local clank = require "clank"
local signal = require "clank.signal"
local s, h, json = clank.schema, clank.h, clank.json

local raised = require("helpers.errors").raised_message

local function CreateTask()
  return s.object {
    title = s.string { min = 1, max = 120, description = "Short task title" },
    priority = s.optional(s.enum { "low", "normal", "high" }),
    estimate = s.nullable(s.number { min = 0 }),
    tags = s.array(s.string(), { max = 10 }),
  }
end

local CREATE_TASK_MANIFEST = table.concat {
  '{"fields":[',
  '{"control":"number","name":"estimate","required":true,',
  '"schema":{"anyOf":[{"minimum":0,"type":"number"},{"type":"null"}]}},',
  '{"control":"select","name":"priority","required":false,',
  '"schema":{"enum":["low","normal","high"],"type":"string"}},',
  '{"control":"list","name":"tags","required":true,',
  '"schema":{"items":{"type":"string"},"maxItems":10,"type":"array"}},',
  '{"control":"text","name":"title","required":true,',
  '"schema":{"description":"Short task title","maxLength":120,"minLength":1,"type":"string"}}',
  '],"id":"create-task","protocol":"clank-form/1",',
  '"schema":{"additionalProperties":false,"properties":{',
  '"estimate":{"anyOf":[{"minimum":0,"type":"number"},{"type":"null"}]},',
  '"priority":{"enum":["low","normal","high"],"type":"string"},',
  '"tags":{"items":{"type":"string"},"maxItems":10,"type":"array"},',
  '"title":{"description":"Short task title","maxLength":120,"minLength":1,"type":"string"}},',
  '"required":["estimate","tags","title"],"type":"object"}}',
}

local function create_action(handler)
  return clank.defineAction {
    name = "tasks.create",
    description = "Create one task in the current workspace.",
    input = CreateTask(),
    output = s.object { id = s.string(), created = s.boolean() },
    sideEffects = "write",
    handler = handler or function(input) return { id = "t-" .. input.title, created = true } end,
  }
end

describe("clank.createForm", function()
  describe("manifest", function()
    it("is the seed's CreateTask manifest, byte for byte, without live values", function()
      local form = clank.createForm { id = "create-task", schema = CreateTask(),
        initial = { title = "secret draft" } }
      assert.are.equal(CREATE_TASK_MANIFEST, json.encode(form.manifest))
      assert.is_nil(json.encode(form.manifest):find("secret draft", 1, true))
    end)

    local controls = {
      { "a boolean", s.boolean(), "checkbox" },
      { "a boolean literal", s.literal(true), "checkbox" },
      { "an optional boolean", s.optional(s.boolean()), "checkbox" },
      { "a number", s.number(), "number" },
      { "an integer", s.number { integer = true }, "number" },
      { "a nullable number", s.nullable(s.number()), "number" },
      { "an optional nullable number", s.optional(s.nullable(s.number())), "number" },
      { "an enum", s.enum { "a", "b" }, "select" },
      { "a nullable enum", s.nullable(s.enum { "a" }), "select" },
      { "a password string", s.string { format = "password" }, "password" },
      { "an optional password", s.optional(s.string { format = "password" }), "password" },
      { "an array of strings", s.array(s.string()), "list" },
      { "an array of enums", s.array(s.enum { "x", "y" }), "select", true },
      { "a string", s.string(), "text" },
      { "an email-format string", s.string { format = "email" }, "text" },
      { "a string literal", s.literal("x"), "text" },
      { "a union", s.union { s.string(), s.number() }, "text" },
      { "an object", s.object {}, "text" },
      { "unknown", s.unknown(), "text" },
    }
    for _, case in ipairs(controls) do
      it("suggests " .. case[3] .. (case[4] and " multiple" or "") .. " for " .. case[1], function()
        local form = clank.createForm { id = "f", schema = s.object { x = case[2] } }
        assert.are.equal(case[3], form.manifest.fields[1].control)
        assert.are.equal(case[4], form.manifest.fields[1].multiple)
      end)
    end

    it("orders fields by `fields`", function()
      local form = clank.createForm { id = "f", schema = CreateTask(), fields = { "title", "tags" } }
      assert.are.equal('[{"control":"text","name":"title","required":true,"schema":'
        .. '{"description":"Short task title","maxLength":120,"minLength":1,"type":"string"}},'
        .. '{"control":"list","name":"tags","required":true,"schema":{"items":{"type":"string"},'
        .. '"maxItems":10,"type":"array"}}]', json.encode(form.manifest.fields))
    end)

    for _, name in ipairs { "__proto__", "prototype", "constructor", "_form" } do
      it("refuses the field name " .. name, function()
        assert.matches("field name " .. name .. " is not allowed",
          raised(clank.createForm, { id = "f", schema = s.object { [name] = s.string() } }))
      end)
    end

    local misuse = {
      { "a non-object schema", { id = "f", schema = s.string() }, "must be an object schema" },
      { "a missing schema", { id = "f" }, "schema must be a schema" },
      { "a missing id", { schema = s.object {} }, "id must be" },
      { "an id with spaces", { id = "a b", schema = s.object {} }, "id must be" },
      { "an unknown field in `fields`", { id = "f", schema = s.object {}, fields = { "x" } }, "unknown field x" },
      { "an unknown initial value", { id = "f", schema = s.object {}, initial = { x = 1 } }, "unknown field x" },
      { "an unknown option", { id = "f", schema = s.object {}, onSave = print }, "unknown option onSave" },
      { "a submitLabel that is not a string", { id = "f", schema = s.object {}, submitLabel = 1 },
        "submitLabel must be a string" },
      { "an onSubmit that is not a function", { id = "f", schema = s.object {}, onSubmit = "x" },
        "onSubmit must be a function" },
    }
    for _, case in ipairs(misuse) do
      it("refuses " .. case[1], function()
        assert.matches("clank.createForm: .*" .. case[3], raised(clank.createForm, case[2]))
      end)
    end
  end)

  describe("submit button and submit handler", function()
    local function submit_button(el)
      for _, c in ipairs(el.children) do
        if type(c) == "table" and c.tag == "button" then return c end
      end
    end

    it("labels the submit button Submit, and Saving… while pending, unless told otherwise", function()
      local f = clank.createForm { id = "f", schema = s.object { a = s.string() } }
      assert.are.same({ "Submit" }, submit_button(f:render()).children)
      f.pending.value = true
      assert.are.same({ "Saving\u{2026}" }, submit_button(f:render()).children)
      local g = clank.createForm { id = "g", schema = s.object { a = s.string() }, submitLabel = "Add task",
        pendingLabel = "Adding\u{2026}" }
      assert.are.same({ "Add task" }, submit_button(g:render()).children)
      g.pending.value = true
      assert.are.same({ "Adding\u{2026}" }, submit_button(g:render()).children)
    end)

    it("runs onSubmit(form, event, ctx) instead of submit() when given", function()
      local seen
      local f = clank.createForm { id = "f", schema = s.object { a = s.string() },
        onSubmit = function(form, ev, ctx) seen = { form, ev, ctx } end }
      local ev, ctx = { type = "submit" }, { user = "u" }
      f:render().props.onSubmit(ev, ctx)
      assert.are.equal(f, seen[1])
      assert.are.equal(ev, seen[2])
      assert.are.equal(ctx, seen[3])
    end)

    it("resets every field to its initial value and clears the errors", function()
      local f = clank.createForm { id = "f", schema = s.object { a = s.string { min = 2 }, b = s.optional(s.string()) },
        initial = { a = "x" } }
      f:set("b", "typed")
      assert.is_false((f:validate()))
      f:reset()
      assert.are.equal("x", f:get("a"))
      assert.is_nil(f:get("b"))
      assert.is_nil(f.fields.a.error.value)
    end)
  end)

  describe("values and validation", function()
    it("coerces text for number fields", function()
      local form = clank.createForm { id = "f", schema = s.object {
        n = s.optional(s.number()), m = s.nullable(s.number()) } }
      form:set("n", "42")
      assert.are.equal(42, form:get("n"))
      assert.is_true(math.type(form:get("n")) == "integer")
      form:set("n", " 1.5 ")
      assert.are.equal(1.5, form:get("n"))
      form:set("n", "")
      assert.is_nil(form:get("n"))
      form:set("m", "")
      assert.are.equal(clank.null, form:get("m"))
      form:set("m", "abc")
      assert.are.equal("abc", form:get("m"))
      assert.is_false((form:validate()))
      assert.are.equal("Expected a finite number.", form.fields.m.error.value)
    end)

    it("splits list text one item per line", function()
      local form = clank.createForm { id = "f", schema = CreateTask() }
      form:set("tags", "a\n\n  b \r\nc")
      assert.are.same({ "a", "b", "c" }, form:get("tags"))
      assert.is_true(json.isArray(form:get("tags")))
    end)

    it("maps issues to the field at path[1], joined, and the rest to _form", function()
      local form = clank.createForm { id = "f", schema = s.object {
        title = s.string { min = 3 },
        tags = s.array(s.string { min = 2 }),
        range = s.union { s.literal("a") },
      }, fields = { "title", "tags" } }
      form:set("title", "x")
      form:set("tags", { "ok", "z", "y" })
      form:set("range", "b")
      local ok, err = form:validate()
      assert.is_false(ok)
      assert.are.equal("table", type(err.issues))
      assert.are.equal("Must contain at least 3 characters.", form.fields.title.error.value)
      assert.are.equal("Must contain at least 2 characters.; Must contain at least 2 characters.",
        form.fields.tags.error.value)
      assert.are.equal("Did not match any union member (Expected \"a\".).", form.fields.range.error.value)
      assert.is_nil(form.formError.value)
    end)

    it("sends issues without a known field to _form and shows them", function()
      local action = clank.defineAction { name = "t.owned", description = "d",
        input = s.object { title = s.string(), owner = s.string() }, handler = function() return {} end }
      local form = clank.createForm { id = "f", schema = s.object { title = s.string() }, action = action,
        initial = { title = "Tea" } }
      assert.is_nil(form:submit())
      assert.is_nil(form.fields.title.error.value)
      assert.are.equal("Expected a string.", form.formError.value)
      assert.truthy(clank.render(form:render()):find(
        '<p class="clank-error" id="f-error" role="alert">Expected a string.</p>', 1, true))
      form:set("title", "Tee")
      assert.is_nil(form.formError.value)
    end)

    it("says Required. for a required field left empty, and what is wrong with a value given", function()
      local form = clank.createForm { id = "f", schema = s.object {
        title = s.string { min = 1 }, name = s.string(), n = s.number(), level = s.enum { "a", "b" },
        note = s.optional(s.string { min = 2 }), pin = s.string { pattern = "^%d+$", min = 4 },
        memo = s.nullable(s.string { min = 1 }),
      } }
      form:set("title", "")
      form:set("n", "")
      form:set("level", "")
      form:set("note", "")
      form:set("pin", "")
      form:set("memo", "")
      assert.is_false((form:validate()))
      assert.are.equal("Required.", form.fields.title.error.value) -- cleared: "" fails min
      assert.are.equal("Required.", form.fields.name.error.value) -- never set
      assert.are.equal("Required.", form.fields.n.error.value) -- "" is no number: absent
      assert.are.equal("Required.", form.fields.level.error.value) -- nothing chosen
      assert.are.equal("Required.", form.fields.pin.error.value) -- once, not per failed check
      -- an optional field is not required: its own message; a nullable one is not rendered required
      assert.are.equal("Must contain at least 2 characters.", form.fields.note.error.value)
      assert.are.equal("Must contain at least 1 character.", form.fields.memo.error.value)
      form:set("title", 5)
      form:set("n", "x")
      form:set("level", "c")
      form:set("pin", "12")
      assert.is_false((form:validate()))
      assert.are.equal("Expected a string.", form.fields.title.error.value)
      assert.are.equal("Expected a finite number.", form.fields.n.error.value)
      assert.are.equal("Expected one of: a, b.", form.fields.level.error.value)
      assert.are.equal("Must contain at least 4 characters.", form.fields.pin.error.value)
    end)

    it("clears a field's error when it is set, and validates clean", function()
      local form = clank.createForm { id = "f", schema = CreateTask() }
      assert.is_false((form:validate()))
      assert.are.equal("Required.", form.fields.title.error.value)
      assert.is_nil(form.fields.estimate.error.value) -- nullable starts null
      assert.is_nil(form.fields.tags.error.value) -- lists start empty
      form:set("title", "Tea")
      assert.is_nil(form.fields.title.error.value)
      local ok, data = form:validate()
      assert.is_true(ok)
      assert.are.equal("Tea", data.title)
    end)

    it("refuses an unknown field in set", function()
      local form = clank.createForm { id = "f", schema = CreateTask() }
      assert.matches("form f: unknown field nope", raised(form.set, form, "nope", 1))
    end)

    it("keeps values in signals an effect can follow", function()
      local form = clank.createForm { id = "f", schema = CreateTask() }
      local seen = {}
      local stop = signal.effect(function() seen[#seen + 1] = form.fields.title.value.value or "-" end)
      form:set("title", "A")
      stop()
      assert.are.same({ "-", "A" }, seen)
    end)
  end)

  describe("submit", function()
    it("does not run the action when invalid", function()
      local calls = 0
      local form = clank.createForm { id = "create-task", schema = CreateTask(),
        action = create_action(function() calls = calls + 1 end) }
      assert.is_nil(form:submit())
      assert.are.equal(0, calls)
      assert.are.equal("Required.", form.fields.title.error.value)
      assert.is_false(form.pending.value)
    end)

    it("runs the action and exposes pending, data and error", function()
      local during
      local form
      form = clank.createForm { id = "create-task", schema = CreateTask(),
        action = create_action(function()
          during = form.pending.value
          return { id = "t1", created = true, title = nil }
        end),
        initial = { title = "Ship", tags = { "docs" } } }
      local out = form:submit()
      assert.are.same({ id = "t1", created = true }, out)
      assert.is_true(during)
      assert.is_false(form.pending.value)
      assert.are.same({ id = "t1", created = true }, form.data.value)
      assert.is_nil(form.error.value)
    end)

    it("exposes an ActionError and shows its message as the form's error", function()
      local form = clank.createForm { id = "create-task", schema = CreateTask(),
        action = create_action(function() error(clank.ActionError("CONFLICT", "Task exists.", 409)) end),
        initial = { title = "Ship" } }
      assert.is_nil(form:submit())
      assert.is_true(clank.isActionError(form.error.value))
      assert.are.equal("Task exists.", form.formError.value)
      assert.is_false(form.pending.value)
    end)

    it("hides other failures behind a generic message", function()
      local form = clank.createForm { id = "create-task", schema = CreateTask(),
        action = create_action(function() error("db password=hunter2") end),
        initial = { title = "Ship" } }
      assert.is_nil(form:submit())
      assert.is_not_nil(form.error.value)
      assert.are.equal("The action failed.", form.formError.value)
    end)

    it("without an action, keeps the parsed values as data", function()
      local form = clank.createForm { id = "f", schema = CreateTask(), initial = { title = "A" } }
      assert.are.same({ title = "A", estimate = clank.null, tags = {} }, form:submit())
      assert.are.same({ title = "A", estimate = clank.null, tags = {} }, form.data.value)
    end)
  end)

  describe("render", function()
    -- SPEC §9 takes a kept node's text content as its label last: a form's is every control's text
    -- run together ("Short task titleprioritylow…", issue 34), so the form names itself.
    it("labels the form with its own words in the surface, not its controls' text run together", function()
      local label_of = function(form)
        return clank.createAgentSurface(h.div(nil, form:render())):inspect()[1].label
      end
      local plain = { id = "new-task", schema = CreateTask(), fields = { "title", "priority" } }
      assert.are.equal("Submit", label_of(clank.createForm(plain)))
      plain.action = create_action(function() end)
      assert.are.equal("Create one task in the current workspace.", label_of(clank.createForm(plain)))
      plain.submitLabel = "Add task"
      assert.are.equal("Add task", label_of(clank.createForm(plain)))
      plain.label = "New task"
      local form = clank.createForm(plain)
      assert.are.equal("New task", label_of(form))
      form.pending.value = true -- the button's words change while it runs, the form's name does not
      assert.are.equal("New task", label_of(form))
      assert.truthy(clank.render(form:render()):find('<form aria-busy="true" aria-label="New task" ', 1, true))
      assert.matches("clank.createForm: label must be a string",
        raised(clank.createForm, { id = "f", schema = CreateTask(), label = 5 }))
    end)

    it("gives a text or password field its schema's max as maxlength, a number field none", function()
      local form = clank.createForm { id = "f", schema = s.object {
        name = s.string { max = 5 }, secret = s.string { max = 9, format = "password" },
        note = s.string(), n = s.number { max = 3 } } }
      local html = clank.render(form:render())
      assert.truthy(html:find('id="f-name" maxlength="5" name="name"', 1, true), html)
      assert.truthy(html:find('id="f-secret" maxlength="9" name="secret"', 1, true), html)
      assert.truthy(html:find('id="f-note" name="note"', 1, true), html)
      assert.truthy(html:find('id="f-n" name="n"', 1, true), html)
    end)

    it("renders labelled controls with agentIds, aria-invalid and messages", function()
      local form = clank.createForm { id = "create-task", schema = CreateTask(), fields = { "title", "estimate" } }
      form:validate()
      assert.are.equal(table.concat {
        '<form aria-label="Submit" data-clank-form="create-task" id="create-task" novalidate>',
        '<div class="clank-field"><label for="create-task-title">Short task title</label>',
        '<input aria-describedby="create-task-title-error" aria-invalid="true" data-clank-id="create-task.title"',
        ' id="create-task-title" maxlength="120" name="title" required type="text" value="">',
        '<p class="clank-error" id="create-task-title-error" role="alert">Required.</p></div>',
        '<div class="clank-field"><label for="create-task-estimate">estimate</label>',
        '<input data-clank-id="create-task.estimate" id="create-task-estimate" name="estimate" type="number" value="">',
        '</div>',
        '<button data-clank-id="create-task.submit" type="submit">Submit</button></form>',
      }, clank.render(form:render()))
    end)

    it("renders selects, checkboxes, lists and never a password's value", function()
      local form = clank.createForm { id = "f", schema = s.object {
        level = s.enum { "a", "b" }, many = s.array(s.enum { "x", "y" }), ok = s.boolean(),
        pw = s.string { format = "password" }, tags = s.array(s.string()),
      }, initial = { level = "b", many = { "y" }, ok = true, pw = "hunter2", tags = { "p", "q" } } }
      local html = clank.render(form:render())
      assert.truthy(html:find('<select data-clank-id="f.level" id="f-level" name="level" required>'
        .. '<option value=""></option><option value="a">a</option><option selected value="b">b</option>'
        .. '</select>', 1, true), html)
      assert.truthy(html:find('<select data-clank-id="f.many" id="f-many" multiple name="many" required>'
        .. '<option value="x">x</option><option selected value="y">y</option></select>', 1, true), html)
      local function has(fragment) assert.truthy(html:find(fragment, 1, true), html) end
      has('<input checked data-clank-id="f.ok" id="f-ok" name="ok" required type="checkbox">')
      has('<input data-clank-id="f.pw" id="f-pw" name="pw" required type="password">')
      has('<textarea data-clank-id="f.tags" id="f-tags" name="tags" required>p\nq</textarea>')
      assert.is_nil(html:find("hunter2", 1, true))
    end)

    it("is operated by an agent through a surface over a mounted view", function()
      local created
      local form = clank.createForm { id = "create-task", schema = CreateTask(),
        action = create_action(function(input)
          created = input
          return { id = "t1", created = true }
        end) }
      local View = clank.defineView { name = "new-task", render = function()
        return h.main(nil, form:render(), form.data.value and h.p({ id = "done" }, "Created ", form.data.value.id))
      end }
      local view = clank.mount(View)
      local surface = clank.createAgentSurface(view)
      local function node(id)
        local function find(nodes)
          for _, n in ipairs(nodes) do
            if n.id == id then return n end
            local c = n.children and find(n.children)
            if c then return c end
          end
        end
        return find(surface:inspect())
      end
      assert.are.same({ id = "create-task.title", tag = "input", role = "textbox", name = "title", type = "text",
        label = "Short task title", required = true }, node("create-task.title"))

      assert.is_true(surface:activate("create-task.submit"))
      assert.is_nil(created)
      assert.is_true(node("create-task.title").invalid)

      assert.is_true(surface:input("create-task.title", "Ship docs"))
      assert.is_true(surface:input("create-task.estimate", "2.5"))
      assert.is_true(surface:input("create-task.priority", "high"))
      assert.is_false(surface:input("create-task.priority", "urgent"))
      assert.is_true(surface:input("create-task.tags", "docs\nrelease"))
      assert.is_nil(node("create-task.title").invalid)
      assert.are.equal("2.5", node("create-task.estimate").value)

      assert.is_true(surface:activate("create-task.submit"))
      assert.are.same({ title = "Ship docs", estimate = 2.5, priority = "high", tags = { "docs", "release" } }, created)
      assert.are.equal("Created t1", node("done").label)
      view:dispose()
    end)

    it("shows a validation error from the action on its field", function()
      local strict = clank.defineAction { name = "t.strict", description = "d",
        input = s.object { title = s.string { max = 2 } }, handler = function() return {} end }
      local form = clank.createForm { id = "f", schema = s.object { title = s.string() }, action = strict,
        initial = { title = "long" } }
      assert.is_nil(form:submit())
      assert.are.equal("Must contain at most 2 characters.", form.fields.title.error.value)
    end)
  end)
end)
