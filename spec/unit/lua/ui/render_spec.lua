-- clank.h, clank.raw and clank.render (SPEC §8). Expected HTML is written by hand from the SPEC;
-- attributes come out sorted by name (byte order).
local clank = require "clank"
local h, render, raw = clank.h, clank.render, clank.raw

local raised = require("helpers.errors").raised_message

describe("clank.h", function()
  it("builds the same element through h(tag) and h.tag", function()
    assert.are.equal(render(h("p", { class = "x" }, "a")), render(h.p({ class = "x" }, "a")))
  end)

  it("flattens nested lists and skips nil and false", function()
    assert.are.equal("<ul><li>1</li><li>2</li><li>3</li></ul>",
      render(h.ul(nil, { h.li(nil, 1), nil, { false, h.li(nil, 2) } }, nil, h.li(nil, "3"))))
  end)

  it("refuses an element or a string as props", function()
    assert.matches("props must be nil or a plain table", raised(h.div, h.span()))
    assert.matches("props must be nil or a plain table", raised(h.div, "text"))
  end)

  local bad_tags = { "", "1a", "a b", "div>", "sc\"ript", "-x" }
  for _, tag in ipairs(bad_tags) do
    it("refuses the tag name " .. string.format("%q", tag), function()
      assert.matches("invalid tag name", raised(h, tag))
    end)
  end

  it("refuses children given in the props table", function()
    assert.matches("prop names must be strings", raised(h.div, { "text" }))
  end)

  it("refuses a function as a child", function()
    assert.matches("a child must be", raised(h.div, nil, function() end))
  end)

  it("calls a function tag as a component with its children in props", function()
    local function Card(props) return h.section({ title = props.title }, props.children) end
    assert.are.equal('<section title="T"><b>x</b>y</section>',
      render(h(Card, { title = "T" }, h.b(nil, "x"), "y")))
  end)

  it("copies props, so later changes to the caller's table change nothing", function()
    local props = { class = "a" }
    local el = h.div(props)
    props.class = "b"
    assert.are.equal('<div class="a"></div>', render(el))
  end)
end)

describe("clank.render", function()
  describe("escaping", function()
    local cases = {
      { "text with <script>", h.p(nil, "<script>alert(1)</script>"),
        "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>" },
      { "ampersands and quotes in text", h.p(nil, 'a & b "c"'), "<p>a &amp; b &quot;c&quot;</p>" },
      { "a quote-breaking attribute", h.div({ title = '"><script>x</script>' }),
        '<div title="&quot;&gt;&lt;script&gt;x&lt;/script&gt;"></div>' },
      { "an entity already in text", h.p(nil, "&lt;"), "<p>&amp;lt;</p>" },
      { "single quotes are left alone", h.div({ title = "it's" }), "<div title=\"it's\"></div>" },
      { "a bare string node", "<x>", "&lt;x&gt;" },
    }
    for _, case in ipairs(cases) do
      it("escapes " .. case[1], function()
        assert.are.equal(case[3], render(case[2]))
      end)
    end

    it("emits raw markup only through clank.raw", function()
      assert.are.equal("<div><b>bold</b>&lt;b&gt;</div>", render(h.div(nil, raw("<b>bold</b>"), "<b>")))
    end)

    it("refuses a non-string raw", function()
      assert.matches("clank.raw: expected a string", raised(raw, 1))
    end)
  end)

  describe("numbers", function()
    local cases = {
      { 3, "3" }, { 0.1, "0.1" }, { 1e21, "1e+21" }, { 2 ^ 53, "9007199254740992" },
      { -0.0, "0" }, { 1.5, "1.5" }, { 5e-324, "5e-324" },
    }
    for _, case in ipairs(cases) do
      it("prints " .. tostring(case[1]) .. " as " .. case[2], function()
        assert.are.equal("<p>" .. case[2] .. "</p>", render(h.p(nil, case[1])))
        assert.are.equal('<p title="' .. case[2] .. '"></p>', render(h.p({ title = case[1] })))
      end)
    end
  end)

  describe("void and boolean attributes", function()
    local voids = { "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
      "source", "track", "wbr" }
    for _, tag in ipairs(voids) do
      it("writes <" .. tag .. "> without a closing tag", function()
        assert.are.equal("<" .. tag .. ">", render(h(tag)))
      end)
    end

    it("closes a non-void element even when empty", function()
      assert.are.equal("<div></div><span></span>", render({ h.div(), h.span() }))
    end)

    it("refuses children in a void element", function()
      assert.matches("<br> cannot have children", raised(render, h.br(nil, "x")))
    end)

    it("writes true bare and leaves false and nil out", function()
      assert.are.equal("<input checked disabled>",
        render(h.input({ disabled = true, checked = true, readonly = false, required = nil })))
    end)

    it("writes aria states as words", function()
      assert.are.equal('<div aria-expanded="false" aria-invalid="true"></div>',
        render(h.div({ ["aria-invalid"] = true, ["aria-expanded"] = false })))
    end)

    it("sorts attributes by name", function()
      assert.are.equal('<a class="c" href="/x" id="i" title="t"></a>',
        render(h.a({ title = "t", id = "i", href = "/x", class = "c" })))
    end)

    it("adds no whitespace between nodes", function()
      assert.are.equal("<p>a<b>b</b>c</p>", render(h.p(nil, "a", h.b(nil, "b"), "c")))
    end)
  end)

  describe("attribute names", function()
    local bad = { "a b", 'x"', "x>", "x=y", "x/y", "", "1x" }
    for _, name in ipairs(bad) do
      it("refuses " .. string.format("%q", name), function()
        assert.matches("invalid attribute name", raised(render, h.div({ [name] = "v" })))
      end)
    end

    it("accepts data-, aria- and namespaced names", function()
      assert.are.equal('<svg aria-hidden="true" data-x="1" xml:lang="en"></svg>',
        render(h.svg({ ["data-x"] = 1, ["aria-hidden"] = "true", ["xml:lang"] = "en" })))
    end)

    it("refuses a prop given twice under two names", function()
      assert.matches("class given twice", raised(render, h.div({ class = "a", className = "b" })))
    end)
  end)

  describe("event handlers", function()
    it("never renders a function on<Event> prop", function()
      local f = function() end
      assert.are.equal("<button>Go</button>",
        render(h.button({ onClick = f, onInput = f, onChange = f, onSubmit = f }, "Go")))
    end)

    local refused = {
      { "a lower-case string handler", { onclick = "alert(1)" } },
      { "a string onClick", { onClick = "alert(1)" } },
      { "an upper-case ONCLICK", { ONCLICK = "x" } },
      { "onerror", { onerror = "x" } },
      { "a lower-case function handler", { onclick = function() end } },
      { "onfocus = true", { onfocus = true } },
    }
    for _, case in ipairs(refused) do
      it("raises at render for " .. case[1], function()
        local el = h.img(case[2])
        assert.matches("is not allowed", raised(render, el))
      end)
    end
  end)

  describe("URLs", function()
    local refused = {
      { "javascript:", "javascript:alert(1)" },
      { "mixed case", "JaVaScRiPt:alert(1)" },
      { "leading spaces", "   javascript:alert(1)" },
      { "leading C0 controls", "\1\31\0javascript:alert(1)" },
      { "a tab inside the scheme", "java\tscript:alert(1)" },
      { "a newline inside the scheme", "java\nscript:alert(1)" },
      { "a carriage return inside the scheme", "java\r\nscript:alert(1)" },
      { "vbscript:", "VBScript:msgbox(1)" },
      { "file:", "file:///etc/passwd" },
      { "data:text/html", "data:text/html,<script>alert(1)</script>" },
      { "data: without a type", "data:,hello" },
      { "data:image/svg+xml", "data:image/svg+xml;base64,PHN2Zz4=" },
      { "data:image/ svg", "data:image/ svg+xml,x" },
      -- SPEC §8: "URLs whose scheme (compared after stripping leading C0 controls and spaces, and
      -- any tab or newline) is javascript:, vbscript:, file: or a non-image data: raise." A
      -- browser's URL parser percent-encodes a C0 control or DEL in a data: URL's type (Node
      -- and Chromium 156 give "data:\vimage/png" the type "%0bimage/png", "data:\fimage/png"
      -- "%0cimage/png"), and a tab or newline there it removes (WHATWG URL, Node) or
      -- percent-encodes (Chromium: "data:im\tage/png" is "im%09age/png"): not image types, or
      -- an SVG one ("image/sv\tg+xml" once the tab is gone).
      { "data: with a vertical tab before the type", "data:\vimage/png;base64,iVBO" },
      { "data: with a form feed before the type", "data:\fimage/png,x" },
      { "data: with spaces and a form feed before the type", "data: \fIMAGE/png,x" },
      { "data: with a control character inside the type", "data:image/\1png,x" },
      { "data: with DEL inside the type", "data:image/png\127;base64,x" },
      { "data: with a tab inside the type", "data:im\tage/png,x" },
      { "data: with a newline before the type", "data:\nimage/png,x" },
      { "data: SVG with a tab inside the type", "data:image/sv\tg+xml,x" },
      { "data: with a tab inside the scheme", "da\tta:text/html,x" },
      { "data: with a space inside the type", "data:ima ge/png,x" },
    }
    local attrs = { "href", "src", "action", "formaction", "xlink:href", "poster", "cite", "HREF" }
    for _, case in ipairs(refused) do
      for _, attr in ipairs(attrs) do
        it("refuses " .. case[1] .. " in " .. attr, function()
          assert.matches("unsafe URL scheme", raised(render, h.a({ [attr] = case[2] })))
        end)
      end
    end

    local accepted = {
      { "a relative path", "/tasks?x=1&y=2", "/tasks?x=1&amp;y=2" },
      { "https", "https://example.com/", "https://example.com/" },
      { "mailto", "mailto:a@example.com", "mailto:a@example.com" },
      { "a data: PNG", "data:image/png;base64,iVBO", "data:image/png;base64,iVBO" },
      { "a data: PNG after spaces", "data:  IMAGE/png,x", "data:  IMAGE/png,x" },
      -- what is not a scheme to a browser: a control character other than tab and newline
      -- inside it makes the URL relative ("java\vscript:x" is a path on the page's origin)
      { "a relative path with a vertical tab", "java\vscript:x", "java\vscript:x" },
      { "a relative path with NUL before its colon", "javascript\0:x", "javascript\0:x" },
      { "a colon after a slash", "/a:b", "/a:b" },
      { "javascript: in the query", "/x?u=javascript:1", "/x?u=javascript:1" },
    }
    for _, case in ipairs(accepted) do
      it("accepts " .. case[1], function()
        assert.are.equal('<a href="' .. case[3] .. '"></a>', render(h.a({ href = case[2] })))
      end)
    end

    it("takes srcdoc only from clank.raw", function()
      assert.matches("srcdoc takes clank.raw", raised(render, h.iframe({ srcdoc = "<script>x</script>" })))
      assert.are.equal('<iframe srcdoc="&lt;b&gt;hi&lt;/b&gt;"></iframe>',
        render(h.iframe({ srcdoc = raw("<b>hi</b>") })))
    end)

    it("does not check non-URL attributes", function()
      assert.are.equal('<div title="javascript:x"></div>', render(h.div({ title = "javascript:x" })))
    end)
  end)

  describe("semantic props", function()
    it("maps every agent prop to its data-clank attribute", function()
      assert.are.equal('<div data-clank-action="documents.archive" data-clank-description="Moves it."'
        .. ' data-clank-hidden="true" data-clank-id="archive" data-clank-intent="destructive-control"'
        .. ' data-clank-label="Archive"></div>',
        render(h.div({
          agentId = "archive", agentLabel = "Archive", agentDescription = "Moves it.",
          agentAction = "documents.archive", intent = "destructive-control", agentHidden = true,
        })))
    end)

    it("writes an action's name for agentAction", function()
      local s = clank.schema
      local action = clank.defineAction {
        name = "documents.archive", description = "Archive.", input = s.object {},
        handler = function() return {} end,
      }
      assert.are.equal('<button data-clank-action="documents.archive"></button>',
        render(h.button({ agentAction = action })))
    end)

    it("leaves agentHidden = false out", function()
      assert.are.equal("<div></div>", render(h.div({ agentHidden = false })))
    end)

    it("escapes semantic values", function()
      assert.are.equal('<div data-clank-label="&lt;b&gt; &amp; &quot;q&quot;"></div>',
        render(h.div({ agentLabel = '<b> & "q"' })))
    end)

    local interactive = { "a", "button", "input", "select", "summary", "textarea" }
    for _, tag in ipairs(interactive) do
      it("mirrors agentLabel to aria-label on <" .. tag .. ">", function()
        local html = render(h(tag, { agentLabel = "Save" }))
        assert.truthy(html:find('aria-label="Save" data-clank-label="Save"', 1, true), html)
      end)
    end

    for _, tag in ipairs { "div", "span", "section", "li", "label", "form" } do
      it("keeps only data-clank-label on <" .. tag .. ">", function()
        assert.are.equal("<" .. tag .. ' data-clank-label="Save"></' .. tag .. ">",
          render(h(tag, { agentLabel = "Save" })))
      end)
    end

    it("keeps an explicit aria-label over the mirrored agentLabel", function()
      assert.are.equal('<button aria-label="Explicit" data-clank-label="Agent"></button>',
        render(h.button({ agentLabel = "Agent", ["aria-label"] = "Explicit" })))
    end)
  end)

  describe("form controls", function()
    it("marks the options of a select's value as selected", function()
      assert.are.equal('<select><option value="a">A</option><option selected value="b">B</option></select>',
        render(h.select({ value = "b" }, h.option({ value = "a" }, "A"),
          h.option({ value = "b", selected = true }, "B"))))
    end)

    it("marks every chosen option of a select multiple", function()
      assert.are.equal('<select multiple><option selected value="a">A</option><option value="b">B</option>'
        .. '<option selected>c</option></select>',
        render(h.select({ value = { "a", "c" }, multiple = true },
          h.option({ value = "a" }, "A"), h.option({ value = "b", selected = true }, "B"), h.option(nil, "c"))))
    end)

    it("writes a textarea's value as its escaped text", function()
      assert.are.equal("<textarea>a&lt;/textarea&gt;</textarea>",
        render(h.textarea({ value = "a</textarea>" }, "ignored")))
    end)

    it("marks format = password as a secret", function()
      assert.are.equal('<input data-clank-secret="true" type="text">',
        render(h.input({ type = "text", format = "password" })))
    end)
  end)
end)
