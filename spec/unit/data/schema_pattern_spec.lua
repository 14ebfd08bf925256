-- clank.schema `pattern` (SPEC §3): Lua patterns, string.find semantics, matched in linear
-- time by runtime/data/schema_match.c. Expected results are written by hand from Lua's rules
-- (lstrlib.c), and each is also checked against string.find itself. The attack inputs would
-- take hours under backtracking: these specs assert their results only (a hang is the failure).
local clank = require "clank"
local bridge_answers = require "helpers.bridge"
local s = clank.schema

local raised = require("helpers.errors").raised_message -- the error raised by f(...), as a string

local function matches(pattern, subject)
  return s.string { pattern = pattern }:safeParse(subject).success
end

describe("clank.schema pattern", function()
  -- { pattern, subject, string.find finds a match }
  local cases = {
    -- anchors: ^ only first, $ only last; elsewhere themselves
    { "^abc", "abcd", true }, { "^abc", "xabc", false }, { "abc$", "xabc", true }, { "abc$", "abcx", false },
    { "^abc$", "abc", true }, { "^$", "", true }, { "^$", "a", false }, { "", "", true }, { "", "xyz", true },
    { "$", "xyz", true }, { "^", "xyz", true },
    { "a^b", "a^b", true }, { "a^b", "ab", false }, { "^^", "^x", true }, { "^^", "x^", false },
    { "a$b", "a$b", true }, { "a$b", "ab", false }, { "$$", "x$", true }, { "$$", "$x", false },
    { "^$a", "$a", true }, { "a%$", "a$", true }, { "a%$", "a", false },
    -- quantifiers; lazy `-` accepts what `*` accepts
    { "^a*$", "", true }, { "^a*$", "aaa", true }, { "^a*$", "aab", false },
    { "^a+$", "", false }, { "^a+$", "aaa", true },
    { "^a-$", "aaa", true }, { "^a-b", "aaab", true }, { "^a.-b$", "axxbyyb", true }, { "^a.*b$", "axxbyy", false },
    { "^ab?c$", "ac", true }, { "^ab?c$", "abc", true }, { "^ab?c$", "abbc", false },
    { "^a?a?a?aaa$", "aaa", true }, { "^a?a?a?aaa$", "aaaaaa", true }, { "^a?a?a?aaa$", "aaaaaaa", false },
    { "^[%w.-]-@", "a.b-c@d", true }, { "^%w+@%w+%.%a+$", "me@host.org", true },
    { "^%w+@%w+%.%a+$", "me@host", false },
    -- a quantifier with nothing to repeat is itself
    { "^*$", "*", true }, { "^a**$", "aa*", true }, { "^a**$", "aa", false },
    { "^-+$", "--", true }, { "^a-?$", "aa?", true }, { "^a-?$", "a", false }, { "+", "1+1", true },
    { "^.+$", "\n\0x", true }, { ".", "", false }, { "a", "", false }, { "%s*", "", true },
    -- classes (C locale, ASCII)
    { "^%a+$", "abcXYZ", true }, { "^%a+$", "ab1", false }, { "^%d%d%-%d%d$", "12-34", true },
    { "^%l%u$", "aB", true }, { "^%l%u$", "Ab", false }, { "^%s$", "\v", true }, { "^%s$", "\f", true },
    { "^%s$", "\u{a0}", false }, { "^%p+$", "!/:@[`{~", true }, { "^%p$", "a", false },
    { "^%c$", "\127", true }, { "^%c$", "\31", true }, { "^%c$", " ", false },
    { "^%g+$", "a!~", true }, { "^%g$", " ", false }, { "^%x+$", "09afAF", true }, { "^%x$", "g", false },
    { "^%w+$", "a1Z", true }, { "^%w$", "_", false }, { "^%W$", "_", true }, { "^%D+$", "ab", true },
    { "^%S+$", "a b", false }, { "^%z$", "\0", true }, { "^%Z$", "\0", false },
    -- `%` and a byte that names no class is that byte
    { "%q", "q", true }, { "%Q", "Q", true }, { "%Q", "q", false },
    { "^%.$", ".", true }, { "^%.$", "x", false }, { "^%%$", "%", true }, { "^%[%]$", "[]", true },
    { "^%(%)$", "()", true }, { "^%-%+%*%?$", "-+*?", true },
    -- sets: ranges, classes, negation, `]` first is itself, `-` at an end is itself
    { "^[abc]+$", "cab", true }, { "^[abc]+$", "cad", false }, { "^[a-c]+$", "abc", true }, { "^[a-c]$", "d", false },
    { "^[^a-c]$", "d", true }, { "^[^a-c]$", "b", false }, { "^[]]$", "]", true }, { "^[^]]$", "]", false },
    { "^[^]]$", "a", true }, { "^[]a]+$", "]a]", true }, { "^[a-]$", "-", true }, { "^[-a]$", "-", true },
    { "^[%a_][%w_]*$", "_id9", true }, { "^[%a_][%w_]*$", "9id", false }, { "^[%]]$", "]", true },
    { "^[%^]$", "^", true }, { "^[a^]$", "^", true }, { "^[z-a]$", "z", false }, { "^[z-a]$", "a", false },
    { "^[a-%d]$", "d", true }, { "^[a-%d]$", "b", false }, { "^[%D]$", "a", true },
    { "^[^%s%d]+$", "ab", true }, { "^[^%s%d]+$", "a1", false }, { "^[%b]$", "b", true }, { "^[%1]$", "1", true },
    -- captures and position captures change nothing; what they keep apart stays literal
    { "^(%a+)=(%d*)$", "ab=", true }, { "^(a)*$", "a*", true }, { "^(a)*$", "aa", false },
    { "^()a()$", "a", true }, { "(^a)", "x^a", true }, { "(^a)", "ab", false }, { "(a$)b", "a$b", true },
    { "^((a)(b))$", "ab", true }, { "^((a)(b))$", "abb", false },
    -- bytes >= 0x80: in no class, only in negations; `é` is two items
    { "^..$", "é", true }, { "^.$", "é", false }, { "^%A%A$", "é", true }, { "^%w+$", "é", false },
    { "^%C+$", "é", true }, { "^[^\0-\127]+$", "日本", true }, { "^[^\0-\127]+$", "日a", false },
    { "^é+$", "é", true }, { "^é+$", "éé", false }, { "é+", "ééé", true },
  }

  for _, c in ipairs(cases) do
    local pattern, subject, want = c[1], c[2], c[3]
    it(("matches %q against %q as string.find does"):format(subject, pattern), function()
      assert.equal(want, string.find(subject, pattern) ~= nil, "the case disagrees with string.find")
      assert.equal(want, matches(pattern, subject))
    end)
  end

  it("reports a mismatch as Must match <pattern>.", function()
    local r = s.string { pattern = "^(%d+)-[a-z]$" }:safeParse("12-A")
    assert.is_false(r.success)
    assert.equal("value: Must match ^(%d+)-[a-z]$.", tostring(r.error))
  end)

  it("tells every ASCII byte into classes and sets as string.find does", function()
    for cl in ("acdglpsuwxzACDGLPSUWXZ.!%qQ"):gmatch(".") do
      for _, pattern in ipairs { "^%" .. cl .. "$", "^[%" .. cl .. "]$", "^[^%" .. cl .. "]$", "^[a%" .. cl .. "]$" } do
        local sc = s.string { pattern = pattern }
        for b = 0, 127 do
          local subject = string.char(b)
          assert.equal(string.find(subject, pattern) ~= nil, sc:safeParse(subject).success,
            ("pattern %q, byte %d"):format(pattern, b))
        end
      end
    end
  end)

  describe("on inputs that make string.find backtrack", function()
    local MB = 1024 * 1024

    it("answers ^%w+%s?%w+$ on 40,000 bytes, and on a megabyte", function()
      assert.is_false(matches("^%w+%s?%w+$", string.rep("a", 40000) .. "!"))
      assert.is_false(matches("^%w+%s?%w+$", string.rep("a", MB) .. "!"))
      assert.is_true(matches("^%w+%s?%w+$", string.rep("a", MB)))
      assert.is_true(matches("^%w+%s?%w+$", string.rep("a", MB // 2) .. " " .. string.rep("b", MB // 2)))
    end)

    it("answers ^%w+%w+%w+$ on 600 bytes, and on a megabyte", function()
      assert.is_false(matches("^%w+%w+%w+$", string.rep("a", 600) .. "!"))
      assert.is_false(matches("^%w+%w+%w+$", string.rep("a", MB) .. "!"))
      assert.is_true(matches("^%w+%w+%w+$", string.rep("a", MB)))
    end)

    it("answers unanchored and lazy patterns on a megabyte", function()
      local big = string.rep("a", MB) .. "!"
      assert.is_false(matches("%w+%s?%w+$", big))
      assert.is_false(matches("a-a-a-a-b", big))
      assert.is_true(matches("(a*)(a*)(a*)!$", big))
      assert.is_false(matches("^" .. string.rep("a?", 100) .. string.rep("a", 100) .. "$", string.rep("a", MB)))
      assert.is_true(matches(string.rep("[%w_]*", 250) .. "!", big))
    end)

    it("raises Must match through parse", function()
      local sc = s.string { pattern = "^%w+%s?%w+$" }
      assert.equal("value: Must match ^%w+%s?%w+$.", raised(sc.parse, sc, string.rep("a", MB) .. "!"))
    end)
  end)

  describe("at build time", function()
    local function refused(pattern)
      local ok, err = pcall(s.string, { pattern = pattern })
      assert.is_false(ok, pattern)
      return tostring(err)
    end

    it("takes up to 32 captures, and refuses more as string.find does", function()
      local p = string.rep("(a)", 32)
      assert.is_true(matches(p, string.rep("a", 32)))
      assert.is_truthy(string.find(string.rep("a", 32), p))
      assert.truthy(refused(p .. "()"):find(
        "s.string: option 'pattern' is too complex: more than 32 captures", 1, true))
      assert.is_false(pcall(string.find, string.rep("a", 32), p .. "()"))
    end)

    it("takes up to 255 items", function()
      assert.is_true(matches(string.rep("[ab]", 255), string.rep("ab", 128)))
      assert.truthy(refused(string.rep("a", 256)):find(
        "s.string: option 'pattern' is too complex: more than 255 items (characters, classes or sets)", 1, true))
    end)

    it("refuses what string.find raises on", function()
      -- { pattern, a subject string.find raises on: Lua finds a fault when its walk reaches it }
      for _, c in ipairs { { "[a", "" }, { "[]", "" }, { "[^]", "" }, { "a%", "a" }, { "(a", "a" }, { "(a))", "a" },
        { "()a)", "a" }, { "%1", "" }, { "(a)%2", "a" } } do
        refused(c[1])
        assert.is_false(pcall(string.find, c[2], c[1]), c[1])
      end
    end)
  end)

  describe("in an action's input (the bridge decodes and matches in one pass)", function()
    local Pair = s.object { words = s.string { pattern = "^%w+%s?%w+$" } }
    local echo = clank.defineAction {
      name = "echo", description = "Answers with the length of its words.",
      input = Pair, output = s.object { n = s.number() },
      sideEffects = "none",
      handler = function(input) return { n = #input.words } end,
    }
    local b = clank.createAgentBridge({ echo })
    local function post(body)
      return b:handle({
        method = "POST", url = "/actions/echo", path = "/actions/echo", query = {}, scheme = "http",
        headers = { host = "127.0.0.1:8080", ["content-type"] = "application/json",
                    ["content-length"] = tostring(#body) },
        body = body,
      })
    end

    it("accepts a match and answers 422 for the attack body", function()
      bridge_answers.assert_ok(post('{"words":"ab cd"}'), '{"n":5}')
      local body = '{"words":"' .. string.rep("a", 40000) .. '!"}'
      bridge_answers.assert_failure(post(body), 422, "INVALID_INPUT", "words: Must match ^%w+%s?%w+$.",
        '[{"message":"Must match ^%w+%s?%w+$.","path":["words"]}]')
      -- with an escape the string is decoded first, then matched the same way
      bridge_answers.assert_failure(post('{"words":"a\\u0021"}'), 422, "INVALID_INPUT",
        "words: Must match ^%w+%s?%w+$.", '[{"message":"Must match ^%w+%s?%w+$.","path":["words"]}]')
      bridge_answers.assert_ok(post('{"words":"a\\u0062"}'), '{"n":2}')
    end)
  end)
end)
