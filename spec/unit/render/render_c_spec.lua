-- clank.render in C (runtime/render/render.c) against the Lua renderer it replaced
-- (spec/helpers/render_reference.lua): many seeded random trees, plain and live, must give the
-- same HTML, or fail with the same message.
local clank = require "clank"
local render = require("clank.ui.render").render
local reference = require("helpers.render_reference").render

local h, raw, json, s = clank.h, clank.raw, clank.json, clank.schema
local ELEMENT = getmetatable(h.div())
local RAW = getmetatable(raw(""))

local function outcome(f, ...)
  local ok, result = pcall(f, ...)
  return { ok = ok, value = ok and result or tostring(result) }
end

-- Renders node both ways; returns the two outcomes.
local function both(node, options)
  return outcome(reference, node, options), outcome(render, node, options)
end

local function describe_node(node, seen, depth)
  seen, depth = seen or {}, depth or 0
  local t = type(node)
  if t == "string" then return string.format("%q", node) end
  if t ~= "table" then return tostring(node) end
  if seen[node] or depth > 12 then return "..." end
  seen[node] = true
  local parts = {}
  if getmetatable(node) == ELEMENT then
    local props = {}
    for k, v in pairs(node.props) do props[#props + 1] = tostring(k) .. "=" .. describe_node(v, seen, depth + 1) end
    table.sort(props)
    for _, c in ipairs(node.children) do parts[#parts + 1] = describe_node(c, seen, depth + 1) end
    return "h." .. tostring(node.tag) .. "({" .. table.concat(props, ",") .. "}, " .. table.concat(parts, ", ") .. ")"
  end
  if getmetatable(node) == RAW then return "raw(" .. describe_node(node.html, seen, depth + 1) .. ")" end
  for i = 1, #node do parts[#parts + 1] = describe_node(node[i], seen, depth + 1) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function same(node, options)
  local want, got = both(node, options)
  if not want.ok and not got.ok then
    -- a runtime error inside the reference itself carries a position in its file
    want.value = want.value:gsub("^[^\n]-render_reference%.lua:%d+: ", "")
  end
  if want.ok ~= got.ok or want.value ~= got.value then
    error(string.format("C and Lua renderers differ%s for %s\n  lua: %s %s\n  C:   %s %s",
      options and options.live and " (live)" or "", describe_node(node),
      want.ok and "ok" or "error", want.value, got.ok and "ok" or "error", got.value), 2)
  end
  return want
end

-- Actions: one that needs confirmation, one that does not, and look-alikes.
local remove = clank.defineAction { name = "items.remove", description = "Remove an item.",
  input = s.object {}, sideEffects = "destructive", handler = function() return {} end }
local read = clank.defineAction { name = "items.read", description = "Read <items> & \"more\".",
  input = s.object {}, sideEffects = "read", handler = function() return {} end }
local fake = { name = "fake.confirm", description = "Fake", sideEffects = 3,
  requiresConfirmation = function() return true end }
local failing = { name = "fake.fails", requiresConfirmation = function() error("no") end }
local ACTIONS = { ["items.remove"] = remove, ["items.read"] = read, ["fake.confirm"] = fake,
  ["fake.fails"] = failing, ["not.an.action"] = 42 }

local f = function() end

describe("clank.render in C", function()
  describe("matches the Lua renderer on hand-picked trees", function()
    local mounted = setmetatable({}, { __index = { tree = function() return h.button({ onClick = f }, "m") end } })
    local weird_element = setmetatable({ tag = "1x", props = {}, children = {} }, ELEMENT)
    local tagless = setmetatable({ props = {}, children = {} }, ELEMENT)
    local cases = {
      { "an empty list", {} },
      { "text", "a < b & \"c\" > 'd'" },
      { "numbers", { 1, 0.1, -0.0, 1e21, 2 ^ 53, 0 / 0, math.huge, -math.huge, math.mininteger, 5e-324 } },
      { "nil, false and true in a list", { false, true, "x" } },
      { "nested lists", { { { h.p(nil, "a") }, "b" }, { h.b() } } },
      { "raw html", { raw("<b>x</b>"), h.div(nil, raw("&amp;")) } },
      { "a function", f },
      { "clank.null", json.null },
      { "a coroutine", coroutine.create(f) },
      { "a table with a metatable", setmetatable({}, {}) },
      { "a mounted view", mounted },
      { "a mounted view in a list", { h.p(), mounted, h.button({ onClick = f }) } },
      { "a plain table with a tag", { tag = "p", props = { class = "x" }, children = { "t" } } },
      { "an element with an invalid tag", weird_element },
      { "an element without a tag", tagless },
      { "void elements", { h.br(), h.img({ src = "/a.png", alt = "x" }), h.INPUT({ value = 3 }) } },
      { "a void element with children", h.hr(nil, "x") },
      { "a textarea value", h.textarea({ value = "a</textarea>", agentLabel = "T" }, "ignored") },
      { "a textarea number value", h.textarea({ value = 1.5 }, "ignored") },
      { "a textarea null value", h.textarea({ value = json.null }, "kept") },
      { "a textarea element value", h.textarea({ value = h.b({ onClick = f }, "x") }) },
      { "a textarea false value", h.textarea({ value = false }, "kept") },
      { "a textarea function value", h.textarea({ value = f }) },
      { "a TEXTAREA value", h.TEXTAREA({ value = "v" }, "c") },
      { "a select with a value", h.select({ value = "b" }, h.option({ value = "a" }, "A"),
        h.option({ value = "b", selected = true }, "B"), h.option(nil, "b")) },
      { "a select with numbers", h.select({ value = 2 }, h.option({ value = 2 }, "two"), h.option(nil, 2),
        h.option(nil, "2.0")) },
      { "a select multiple", h.select({ value = { "a", 3, "c" }, multiple = true }, h.option({ value = "a" }, "A"),
        h.optgroup({ label = "g" }, h.option({ value = 3 }, "3"), h.option(nil, "c", h.b(nil, "x"))),
        h.div(nil, h.option({ value = "a" }, "not under the select")), "text") },
      { "a select with a null value",
        h.select({ value = json.null }, h.option({ value = "a", selected = true }, "A")) },
      { "a select with a boolean value", h.select({ value = true }, h.option({ value = true }, "A")) },
      { "a select with an array value", h.select({ value = json.array { "x" } }, h.option({ value = "x" }, "X")) },
      { "a select with handlers on options", h.select({ value = "a", onChange = f },
        h.option({ value = "a", onClick = f }, "A"), h.optgroup(nil, h.option({ onClick = f }, "a"))) },
      { "a select in an optgroup", h.select({ value = "a" }, h.optgroup(nil, h.select(nil, h.option(nil, "a")))) },
      { "an option with a bad prop under a select",
        h.select({ value = "a" }, h.option({ value = "a", onclick = "x", ["a b"] = 1 }, "A")) },
      { "an option with a srcdoc under a select", h.select({ value = "a" }, h.option({ srcdoc = "x", value = "a" })) },
      { "a table with rows", h.table(nil, h.caption(nil, "c"), h.tr(nil, h.td(nil, "1")), h.TR({ onClick = f }),
        h.tfoot(nil, h.tr()), h.tr(), "text", h.tr()) },
      { "a TABLE", h.TABLE(nil, h.tr(nil, h.td(nil, "x"))) },
      { "a table with a list of rows", h.table(nil, { h.tr(), { h.tr({ onInput = f }) } }) },
      { "a plain table with a tag inside a table", h.table(nil, h.tr()) },
      { "semantic props", h.button({ agentId = "i", agentLabel = "L", agentDescription = "D",
        agentAction = "items.remove",
        intent = "x", agentHidden = true, onClick = f }, "go") },
      { "agentLabel = false on a button", h.button({ agentLabel = false }) },
      { "agentLabel as a number on an input", h.input({ agentLabel = 12 }) },
      { "an explicit aria-label false", h.a({ agentLabel = "x", ["aria-label"] = false }) },
      { "agentAction objects", { h.button({ agentAction = remove }), h.button({ agentAction = read }),
        h.button({ agentAction = fake }), h.button({ agentAction = failing }), h.button({ agentAction = "fake.fails" }),
        h.button({ agentAction = "not.an.action" }), h.button({ agentAction = "missing" }) } },
      { "agentAction = 12", h.button({ agentAction = 12 }) },
      { "agentAction = clank.null", h.button({ agentAction = json.null }) },
      { "agentAction = false", h.button({ agentAction = false }) },
      { "agentAction = true", h.button({ agentAction = true }) },
      { "agentHidden = \"yes\"", h.div({ agentHidden = "yes" }) },
      { "format = password", h.input({ format = "password" }) },
      { "another format", h.input({ format = "email" }) },
      { "format = password and data-clank-secret", h.input({ format = "password", ["data-clank-secret"] = "x" }) },
      { "class twice", h.div({ class = "a", className = "b" }) },
      { "class twice, one null", h.div({ class = "a", className = json.null }) },
      { "class twice, one false", h.div({ class = false, className = "b" }) },
      { "htmlFor", h.label({ htmlFor = "x", ["for"] = "y" }) },
      { "data-clank-id twice", h.div({ agentId = "a", ["data-clank-id"] = "b" }) },
      { "data-clank-key given with a handler", h.div({ ["data-clank-key"] = "k", onClick = f }) },
      { "data-clank-on given with a handler", h.div({ ["data-clank-on"] = "k", onClick = f }) },
      { "data-clank-confirm given with an action", h.div({ ["data-clank-confirm"] = "k", agentAction = remove }) },
      { "srcdoc from raw", h.iframe({ srcdoc = raw("<p>\"hi\"</p>") }) },
      { "SRCDOC from raw", h.iframe({ SrcDoc = raw("<p>") }) },
      { "srcdoc from a string", h.iframe({ srcdoc = "<p>" }) },
      { "srcdoc from a number raw", h.iframe({ srcdoc = setmetatable({ html = 5 }, RAW) }) },
      { "a table as a value", h.div({ title = {} }) },
      { "an element as a value", h.div({ title = h.b() }) },
      { "a function as a value", h.div({ title = f }) },
      { "an action as a value", h.div({ title = remove }) },
      { "a named metatable as a value", h.div({ title = setmetatable({}, { __name = "My.Type" }) }) },
      { "a protected metatable as a value",
        h.div({ title = setmetatable({}, { __metatable = { __name = "Hidden" } }) }) },
      { "a lower-case handler", h.div({ onclick = f }) },
      { "an upper-case handler", h.div({ ONCLICK = f }) },
      { "a string handler", h.div({ onClick = "x" }) },
      { "on alone", h.div({ on = f }) },
      { "an odd handler name", h.div({ onA = f, ["onB\0x"] = f, onCLICK = f, onClick = f }) },
      { "bad attribute names", h.div({ ["x\0y"] = 1 }) },
      { "aria booleans", h.div({ ["aria-x"] = true, ["aria-y"] = false, ["ARIA-z"] = true, hidden = false }) },
      { "deep nesting at the limit", (function()
        local n = "x"
        for _ = 1, 199 do n = h.div(nil, n) end
        return n
      end)() },
      { "deep nesting past the limit", (function()
        local n = "x"
        for _ = 1, 201 do n = h.div(nil, n) end
        return n
      end)() },
      { "deep lists", (function()
        local n = { "x" }
        for _ = 1, 205 do n = { n } end
        return n
      end)() },
      { "an element in a deep list", (function()
        local n = { h.b({ onClick = f }) }
        for _ = 1, 198 do n = { n } end
        return n
      end)() },
    }
    for _, case in ipairs(cases) do
      it("on " .. case[1], function()
        same(case[2])
        same(case[2], { live = true })
        same(case[2], { live = true, actions = ACTIONS })
      end)
    end

    it("with odd live.actions", function()
      local el = { h.button({ agentAction = "len" }), h.button({ agentAction = "items.remove" }) }
      same(el, { live = true, actions = "string" })
      same(el, { live = true, actions = false })
      same(el, { live = true, actions = setmetatable({}, { __index = function() return remove end }) })
    end)

    it("with URLs", function()
      local urls = { "/x?a=1&b=2", "https://e.com/", "mailto:a@b", "javascript:alert(1)", "JaVaScRiPt:1",
        "  \1\31java\tscript:x", "java\r\nscript:x", "vbscript:x", "file:///etc", "data:,x", "data:image/png;base64,x",
        "data:image/svg+xml,x", "data: Image/PNG ,x", "data:image/ svg,x", "data:\timage/png,x", "data:ima ge/png,x",
        "data:\vimage/png,x", "data:\f image/png,x", "data:image/\vsvg,x",
        "/a:b", "1http:x", "h-t+t.p:x", "", " ", ":", "javascript", "data:image", "data:image/", 42, 0.5, true }
      for _, attr in ipairs { "href", "src", "HREF", "xlink:href", "action", "formaction", "poster", "cite",
        "background", "codebase", "data", "icon", "longdesc", "manifest", "profile", "usemap", "title" } do
        for _, url in ipairs(urls) do same(h.a({ [attr] = url })) end
      end
    end)
  end)

  describe("matches the Lua renderer on random trees", function()
    local TAGS = { "div", "span", "p", "a", "button", "input", "select", "option", "optgroup", "textarea",
      "table", "tr", "td", "thead", "tbody", "img", "br", "iframe", "form", "label", "summary", "li", "ul",
      "TR", "Table", "custom-el", "Select", "h1" }
    local STRINGS = { "", "plain", "a & b", "<tag>", "\"quoted\"", "it's", "x > y < z", "ünïcödé", "line\nbreak",
      "/path?x=1&y=2", "javascript:alert(1)", "data:image/png;base64,AA", "data:text/html,x", "items.remove",
      "items.read", "fake.confirm", "missing", "a", "b", "c", "1", "2" }
    local NUMBERS = { 0, 1, -1, 42, 0.5, -0.0, 1e21, 1e-7, 2 ^ 53, 0 / 0, math.huge, math.maxinteger }
    local KEYS = { "class", "className", "id", "title", "href", "src", "action", "HREF", "xlink:href", "data-x",
      "aria-hidden", "aria-label", "aria-expanded", "disabled", "checked", "value", "value", "value", "format",
      "srcdoc", "agentId", "agentLabel", "agentDescription", "agentAction", "agentHidden", "intent", "htmlFor",
      "for", "onClick", "onInput", "onChange", "onSubmit", "style", "selected", "multiple", "name", "type",
      "tabindex", "data-clank-id", "data-clank-key", "data-clank-on", "data-clank-confirm", "data-clank-secret",
      "onclick", "a b", "x>", "", "1x", "_ok", ":ns", "a.b-c" }
    local rare_keys = { onclick = true, ["a b"] = true, ["x>"] = true, [""] = true, ["1x"] = true,
      ["data-clank-key"] = true, ["data-clank-on"] = true, ["data-clank-confirm"] = true,
      ["data-clank-id"] = true, ["data-clank-secret"] = true }

    local random = math.random
    local function pick(list) return list[random(#list)] end

    local function value_for(key)
      local r = random(100)
      if key:find("^on") then
        if r <= 95 then return f end
        return "alert(1)"
      end
      if key == "srcdoc" then return r <= 80 and raw(pick(STRINGS)) or pick(STRINGS) end
      if key == "agentAction" then
        if r <= 50 then return pick(STRINGS) end
        if r <= 85 then return pick { remove, read, fake, failing } end
        return pick { false, 12, json.null, { name = 5 } }
      end
      if key == "format" and r <= 50 then return "password" end
      if r <= 55 then return pick(STRINGS) end
      if r <= 75 then return pick(NUMBERS) end
      if r <= 93 then return random(2) == 1 end
      if r <= 98 then return json.null end
      if r <= 99 then return {} end
      return pick { f, h.b() }
    end

    local function random_props(tag)
      local props = {}
      for _ = 1, random(0, 4) do
        local key = pick(KEYS)
        if not rare_keys[key] or random(8) == 1 then props[key] = value_for(key) end
      end
      if tag == "select" and random(2) == 1 then
        local r = random(4)
        props.value = r == 1 and pick(STRINGS) or r == 2 and pick(NUMBERS)
          or r == 3 and { pick(STRINGS), pick(NUMBERS) } or json.null
      end
      return props
    end

    local node
    local function children(depth)
      local list = {}
      for i = 1, random(0, depth > 3 and 1 or 4) do
        local r = random(100)
        if r <= 30 then list[i] = pick(STRINGS)
        elseif r <= 38 then list[i] = pick(NUMBERS)
        elseif r <= 42 then list[i] = raw(pick(STRINGS))
        elseif r <= 46 then list[i] = { node(depth + 1), pick(STRINGS) }
        elseif r <= 48 then list[i] = pick { false, true }
        else list[i] = node(depth + 1) end
      end
      return list
    end

    function node(depth)
      if depth > 5 then return pick(STRINGS) end
      local tag = pick(TAGS)
      local props = random_props(tag)
      if tag == "select" or (tag == "optgroup" and random(2) == 1) then
        local options = {}
        for i = 1, random(0, 4) do
          local r = random(10)
          if r <= 6 then
            options[i] = h.option(random(2) == 1 and { value = random(2) == 1 and pick(STRINGS) or pick(NUMBERS) } or
              random_props("option"), pick(STRINGS), random(3) == 1 and pick(NUMBERS) or nil)
          elseif r <= 8 then
            options[i] = h.optgroup(nil, h.option(nil, pick(STRINGS)), h.option({ value = pick(STRINGS) }))
          else
            options[i] = node(depth + 1)
          end
        end
        return h(tag, props, options)
      end
      if tag == "table" then
        local rows = {}
        for i = 1, random(0, 5) do
          rows[i] = random(4) > 1 and h(pick { "tr", "TR" }, random_props("tr"), h.td(nil, pick(STRINGS)))
            or node(depth + 1)
        end
        return h(tag, props, rows)
      end
      if tag == "img" or tag == "br" or (tag == "input" and random(4) > 1) then
        return h(tag, props, random(10) == 1 and pick(STRINGS) or nil)
      end
      return h(tag, props, children(depth))
    end

    local function top()
      local r = random(10)
      if r <= 6 then return node(0) end
      if r <= 9 then return { node(1), pick(STRINGS), { node(1) }, false } end
      local tree = node(0)
      return setmetatable({}, { __index = { tree = function() return tree end } })
    end

    for _, seed in ipairs { 1, 2, 3, 4 } do
      it("with seed " .. seed, function()
        math.randomseed(seed)
        local ok, failed = 0, 0
        for _ = 1, 1500 do
          local tree = top()
          for _, options in ipairs { false, { live = true }, { live = true, actions = ACTIONS } } do
            local r = same(tree, options or nil)
            if r.ok then ok = ok + 1 else failed = failed + 1 end
          end
        end
        -- the trees exercise both outcomes
        assert.is_true(ok > 500, "renders: " .. ok)
        assert.is_true(failed > 100, "errors: " .. failed)
      end)
    end
  end)
end)
