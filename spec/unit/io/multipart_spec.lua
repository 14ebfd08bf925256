-- clank.multipart: the incremental multipart/form-data parser behind request:form() (SPEC §15
-- "Bodies"; RFC 7578 over RFC 2046). A body fed whole, a byte at a time or in random pieces
-- gives the same fields and the same message; expected values are written by hand.
local multipart = require "clank.multipart"

local CRLF = "\r\n"
local B = "XyZzY"

-- Feeds body to a new parser in pieces: "whole", a number (pieces of that size) or
-- { seed = n } (random sizes 1..9). Returns what finish() returns, or feed's nil, message.
local function run(body, boundary, how)
  local p, err = multipart.new(boundary)
  if not p then return nil, err end
  local pieces = {}
  if how == "whole" then
    pieces[1] = body
  elseif type(how) == "number" then
    for i = 1, #body, how do pieces[#pieces + 1] = body:sub(i, i + how - 1) end
  else
    math.randomseed(how.seed)
    local i = 1
    while i <= #body do
      local n = math.random(1, 9)
      pieces[#pieces + 1] = body:sub(i, i + n - 1)
      i = i + n
    end
  end
  for _, s in ipairs(pieces) do
    local ok, ferr = p:feed(s)
    if not ok then return nil, ferr end
  end
  return p:finish()
end

local WAYS = { "whole", 1, 2, 3, 7, { seed = 1 }, { seed = 2 }, { seed = 3 } }

local function name_of(how)
  return type(how) == "table" and ("random pieces, seed " .. how.seed) or tostring(how)
end

-- Every way of feeding gives `want` (a table) or nil, `want_err`.
local function check(body, boundary, want, want_err)
  for _, how in ipairs(WAYS) do
    local got, err = run(body, boundary, how)
    if want then
      assert.are.same(want, got, name_of(how))
      assert.is_nil(err, name_of(how))
    else
      assert.is_nil(got, name_of(how))
      assert.are.equal(want_err, err, name_of(how))
    end
  end
  local got, err = multipart.parse(body, boundary)
  assert.are.same(want, got)
  assert.are.equal(want_err, err)
end

local function part(headers, data)
  return "--" .. B .. CRLF .. headers .. CRLF .. data .. CRLF
end

local function disp(name, filename)
  return 'Content-Disposition: form-data; name="' .. name .. '"'
    .. (filename and ('; filename="' .. filename .. '"') or "") .. CRLF
end

local CLOSE = "--" .. B .. "--" .. CRLF

describe("clank.multipart", function()
  describe("a well-formed body", function()
    it("gives text parts as strings and file parts as tables, however it is split", function()
      local body = "a preamble\r\n--XyZz not yet" .. CRLF
        .. part(disp("title"), "Hi there")
        .. part(disp("f", "nul.bin") .. "Content-Type: application/x-thing" .. CRLF,
          "a\0\0b\r\n\r\n--XyZz\r\n-")
        .. part(disp("empty"), "")
        .. CLOSE .. "an epilogue, ignored --XyZzY--\r\n"
      check(body, B, {
        title = "Hi there",
        f = { filename = "nul.bin", type = "application/x-thing", data = "a\0\0b\r\n\r\n--XyZz\r\n-" },
        empty = "",
      })
    end)

    it("takes a body that opens with the delimiter, transport padding and no final CRLF", function()
      local body = "--" .. B .. " \t" .. CRLF .. disp("a") .. CRLF .. "1" .. CRLF .. "--" .. B .. "--"
      check(body, B, { a = "1" })
    end)

    it("lets a repeated name's last part win and a missing type be application/octet-stream", function()
      local body = part(disp("k"), "1") .. part(disp("k"), "2")
        .. part(disp("up", ""), "xyz") .. CLOSE
      check(body, B, { k = "2", up = { filename = "", type = "application/octet-stream", data = "xyz" } })
    end)

    it("reads header names without case, unquoted and escaped parameters", function()
      local body = part('content-disposition:   FORM-DATA ; NAME=plain ;filename="a\\"b.txt"  ' .. CRLF
          .. "CONTENT-TYPE:  text/plain  " .. CRLF, "x")
        .. CLOSE
      check(body, B, { plain = { filename = 'a"b.txt', type = "text/plain", data = "x" } })
    end)

    it("finds a delimiter that overlaps itself after a near miss in the data", function()
      local boundary = "a\r\n--a"
      local body = "--" .. boundary .. CRLF .. 'Content-Disposition: form-data; name="n"' .. CRLF .. CRLF
        .. "x\r\n--a\r\n--b\r\n--a\r\n--" .. CRLF .. "--" .. boundary .. "--"
      check(body, boundary, { n = "x\r\n--a\r\n--b\r\n--a\r\n--" })
    end)

    it("ends empty data on a delimiter that shares the header block's last CRLF", function()
      local body = "--" .. B .. CRLF .. disp("a") .. CRLF .. "--" .. B .. "--"
      check(body, B, { a = "" })
    end)

    it("carries a part of a megabyte across pieces intact", function()
      local data = ("0123456789\r\n-"):rep(80000)
      local body = part(disp("big", "b.bin"), data) .. CLOSE
      local p = assert(multipart.new(B))
      for i = 1, #body, 65536 do assert(p:feed(body:sub(i, i + 65535))) end
      local got = assert(p:finish())
      assert.are.equal(#data, #got.big.data)
      assert.is_true(got.big.data == data)
    end)
  end)

  describe("a malformed body", function()
    local cases = {
      { "no boundary", nil, "x", "Malformed multipart body: missing or invalid boundary." },
      { "an empty boundary", "", "x", "Malformed multipart body: missing or invalid boundary." },
      { "a boundary over 70 characters", ("b"):rep(71), "x",
        "Malformed multipart body: missing or invalid boundary." },
      { "no delimiter at all", B, "just text\r\n--XyZz", "Malformed multipart body: no opening boundary." },
      { "a part never closed", B, "--" .. B .. CRLF .. disp("a") .. CRLF .. "never closed",
        "Malformed multipart body: part 1 is not closed by a boundary." },
      { "a second part never closed", B, part(disp("a"), "1") .. "--" .. B .. CRLF .. disp("b"),
        "Malformed multipart body: part 2 is not closed by a boundary." },
      { "a bad header line in a part never closed", B, "--" .. B .. CRLF .. "garbage" .. CRLF .. CRLF .. "1",
        "Malformed multipart body: part 1 is not closed by a boundary." },
      { "headers running into the delimiter", B, "--" .. B .. CRLF .. disp("a") .. "1" .. CRLF .. CLOSE,
        "Malformed multipart body: part 1 has no end of headers." },
      { "a malformed header line", B, part("garbage" .. CRLF, "1") .. CLOSE,
        "Malformed multipart body: part 1 has a malformed header line." },
      { "a header name with a space", B, part(disp("a") .. "X Y: z" .. CRLF, "1") .. CLOSE,
        "Malformed multipart body: part 1 has a malformed header line." },
      { "no name", B, part(disp("a"), "1") .. part("Content-Disposition: form-data" .. CRLF, "1") .. CLOSE,
        "Malformed multipart body: part 2 has no content-disposition form-data name." },
      { "another disposition", B, part('Content-Disposition: attachment; name="a"' .. CRLF, "1") .. CLOSE,
        "Malformed multipart body: part 1 has no content-disposition form-data name." },
      { "no header at all", B, part("", "1") .. CLOSE,
        "Malformed multipart body: part 1 has no content-disposition form-data name." },
      { "an unclosed quoted name", B, part('Content-Disposition: form-data; name="a' .. CRLF, "1") .. CLOSE,
        "Malformed multipart body: part 1 has no content-disposition form-data name." },
      { "text after a delimiter", B, "--" .. B .. "x" .. CRLF,
        "Malformed multipart body: a boundary line is not followed by CRLF." },
      { "a single dash after a delimiter", B, "--" .. B .. "-x",
        "Malformed multipart body: a boundary line is not followed by CRLF." },
      { "a body ending at a delimiter", B, part(disp("a"), "1") .. "--" .. B,
        "Malformed multipart body: a boundary line is not followed by CRLF." },
      { "a CR without LF", B, "--" .. B .. "\r\r\n",
        "Malformed multipart body: a boundary line is not followed by CRLF." },
    }
    for _, c in ipairs(cases) do
      it("names " .. c[1], function()
        check(c[3], c[2], nil, c[4])
      end)
    end

    it("keeps answering the first error after it", function()
      local p = assert(multipart.new(B))
      local ok, err = p:feed("--" .. B .. "x")
      assert.is_nil(ok)
      assert.are.equal("Malformed multipart body: a boundary line is not followed by CRLF.", err)
      assert.are.same({ nil, "Malformed multipart body: a boundary line is not followed by CRLF." },
        { p:feed(CRLF .. CLOSE) })
      assert.are.same({ nil, "Malformed multipart body: a boundary line is not followed by CRLF." },
        { p:finish() })
    end)
  end)
end)
