-- clank.request: request:form(), request:json() and request.cookies (SPEC §2, §15 "Bodies").
local request = require "clank.request"
local json = require "clank.json"

-- A request table as the runtime makes it, with its metatable.
local function req(content_type, body, cookie)
  local headers = { ["content-type"] = content_type, cookie = cookie }
  return setmetatable({ method = "POST", url = "/", path = "/", query = {}, headers = headers,
    body = body, scheme = "http" }, { __index = request.index })
end

local CRLF = "\r\n"

local function multipart(boundary, parts, close)
  local out = {}
  for _, p in ipairs(parts) do
    out[#out + 1] = "--" .. boundary .. CRLF .. p
  end
  out[#out + 1] = "--" .. boundary .. (close or "--") .. CRLF
  return table.concat(out, "")
end

describe("clank.request", function()
  describe("form() on application/x-www-form-urlencoded", function()
    local cases = {
      { "a=1&b=2", { a = "1", b = "2" } },
      { "name=Ada+Lovelace", { name = "Ada Lovelace" } },
      { "q=%41%2b%26%3D", { q = "A+&=" } },
      { "bad=%zz%4", { bad = "%zz%4" } },
      { "k=1&k=2&k=3", { k = "3" } },
      { "flag&empty=&=v", { flag = "", empty = "", [""] = "v" } },
      { "&&a=1&&", { a = "1" } },
      { "x=a%00b", { x = "a\0b" } },
      { "caf%C3%A9=th%C3%A9", { ["café"] = "thé" } },
    }
    for _, c in ipairs(cases) do
      it("decodes " .. c[1], function()
        assert.are.same(c[2], req("application/x-www-form-urlencoded", c[1]):form())
      end)
    end

    it("ignores the content type's case and parameters", function()
      assert.are.same({ a = "1" },
        req("Application/X-WWW-Form-URLEncoded; charset=UTF-8", "a=1"):form())
    end)

    it("answers an empty table for no body", function()
      assert.are.same({}, req(nil, nil):form())
    end)

    it("returns nil and a message for a body of another type", function()
      local v, err = req("application/json", "{}"):form()
      assert.is_nil(v)
      assert.are.equal(
        "Expected a form body (application/x-www-form-urlencoded or multipart/form-data).", err)
    end)
  end)

  describe("form() on multipart/form-data", function()
    local B = "----clankB0undary"
    local TYPE = "multipart/form-data; boundary=" .. B

    it("reads text parts as strings and a file part as {filename, type, data}", function()
      local file = "PNG\0\1\2\r\n--not-the-boundary\0end"
      local body = "preamble is ignored" .. CRLF .. multipart(B, {
        'Content-Disposition: form-data; name="title"' .. CRLF .. CRLF .. "Hello, world" .. CRLF,
        'Content-Disposition: form-data; name="upload"; filename="a b.png"' .. CRLF
          .. "Content-Type: image/png" .. CRLF .. CRLF .. file .. CRLF,
        'content-disposition: form-data; name="empty"' .. CRLF .. CRLF .. CRLF,
      })
      assert.are.same({
        title = "Hello, world",
        upload = { filename = "a b.png", type = "image/png", data = file },
        empty = "",
      }, req(TYPE, body):form())
    end)

    it("takes a quoted boundary, escapes in quoted names and defaults a file's type", function()
      local body = multipart("a;b", {
        'Content-Disposition: form-data; name="say \\"hi\\""; filename="x.bin"' .. CRLF .. CRLF
          .. "\0" .. CRLF,
      })
      assert.are.same({ ['say "hi"'] = { filename = "x.bin", type = "application/octet-stream",
        data = "\0" } }, req('multipart/form-data; boundary="a;b"', body):form())
    end)

    it("lets the last part of a repeated name win", function()
      local body = multipart(B, {
        'Content-Disposition: form-data; name="k"' .. CRLF .. CRLF .. "1" .. CRLF,
        'Content-Disposition: form-data; name="k"' .. CRLF .. CRLF .. "2" .. CRLF,
      })
      assert.are.same({ k = "2" }, req(TYPE, body):form())
    end)

    local malformed = {
      { "no boundary parameter", "multipart/form-data", "x",
        "Malformed multipart body: missing or invalid boundary." },
      { "a boundary over 70 characters", "multipart/form-data; boundary=" .. ("b"):rep(71), "x",
        "Malformed multipart body: missing or invalid boundary." },
      { "no opening boundary", TYPE, "just text",
        "Malformed multipart body: no opening boundary." },
      { "no closing boundary", TYPE,
        "--" .. B .. CRLF .. 'Content-Disposition: form-data; name="a"' .. CRLF .. CRLF .. "1",
        "Malformed multipart body: part 1 is not closed by a boundary." },
      { "a part without a blank line after its headers", TYPE,
        "--" .. B .. CRLF .. 'Content-Disposition: form-data; name="a"' .. CRLF .. "--" .. B .. "--",
        "Malformed multipart body: part 1 has no end of headers." },
      { "a part without a name", TYPE,
        multipart(B, { "Content-Disposition: form-data" .. CRLF .. CRLF .. "1" .. CRLF }),
        "Malformed multipart body: part 1 has no content-disposition form-data name." },
      { "a header line without a colon", TYPE,
        multipart(B, { "garbage" .. CRLF .. CRLF .. "1" .. CRLF }),
        "Malformed multipart body: part 1 has a malformed header line." },
      { "junk after a boundary", TYPE, "--" .. B .. "junk" .. CRLF,
        "Malformed multipart body: a boundary line is not followed by CRLF." },
    }
    for _, c in ipairs(malformed) do
      it("returns nil and a message naming the problem for " .. c[1], function()
        local v, err = req(c[2], c[3]):form()
        assert.is_nil(v)
        assert.are.equal(c[4], err)
      end)
    end
  end)

  describe("json()", function()
    it("decodes strictly, arrays marked", function()
      local v = req("application/json", '{"a":[1,2.5,"x"],"b":{}}'):json()
      assert.are.equal('{"a":[1,2.5,"x"],"b":{}}', json.encode(v))
      assert.are.equal(math.type(v.a[1]), "integer")
    end)

    local bad = {
      { "1e400", "number out of range at byte 1" },
      { '{"a":1,}', "unexpected character at byte 8" },
      { "NaN", nil },
      { "[01]", nil },
      { '"\\ud800"', nil },
    }
    for _, c in ipairs(bad) do
      it("returns nil and a message for " .. c[1], function()
        local v, err = req("application/json", c[1]):json()
        assert.is_nil(v)
        assert.are.equal("string", type(err))
        assert.is_truthy(err:find("^Request body is not valid JSON: "))
        if c[2] then
          assert.are.equal("Request body is not valid JSON: " .. c[2], err)
        end
      end)
    end

    it("returns nil and a message for no body", function()
      assert.are.same({ nil, "A JSON request body is required." }, { req(nil, nil):json() })
    end)
  end)

  describe("cookies", function()
    local cases = {
      { "a=1; b=2", { a = "1", b = "2" } },
      { "a=1;b=2;;  ; c = 3 ", { a = "1", b = "2", c = "3" } },
      { 'q="quoted"', { q = "quoted" } },
      { "a=1; a=2", { a = "1" } },
      { "empty=", { empty = "" } },
      { "no-equals; x=1", { x = "1" } },
      { "bad name=1; ok=2", { ok = "2" } },
      { "=v; (x)=1; ok=2", { ok = "2" } },
      { 'sp=a b; dq=a"b; bs=a\\b; ok=1', { ok = "1" } },
      { "utf=caf\195\169; ok=1", { ok = "1" } },
      { "a=1, b=2", { a = "1", b = "2" } },
      { ";;;===;;;", {} },
    }
    for _, c in ipairs(cases) do
      it("reads " .. string.format("%q", c[1]) .. " skipping junk pairs", function()
        assert.are.same(c[2], req(nil, nil, c[1]).cookies)
      end)
    end

    it("is an empty table without a cookie header, made once", function()
      local r = req(nil, nil)
      assert.are.same({}, r.cookies)
      assert.are.equal(r.cookies, rawget(r, "cookies"))
    end)
  end)
end)
