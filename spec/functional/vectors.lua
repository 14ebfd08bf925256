-- Raw request vectors, written by hand from RFC 9112 and SPEC §13. Each entry:
--   name     what is wrong (or right) with the request
--   raw      the exact bytes sent, on a fresh connection
--   status   the expected status, stated literally
--   closes   true: the server must close after the response;
--            false: the connection must stay usable (a follow-up request is answered);
--            nil: not specified by the SPEC, not checked
--   content_type  (optional) the expected content-type prefix
--   body     (optional) the expected body
-- Paths: /hello answers 200 "Hello, world!\n", /echo echoes a POST body, /nope is 404.
local H = "Host: 127.0.0.1\r\n"

local function fields(n, size)
  local t = {}
  for i = 1, n do
    t[i] = "X-Field-" .. i .. ": " .. string.rep("v", size or 1) .. "\r\n"
  end
  return table.concat(t)
end

return {
  -- Field syntax (RFC 9112 §5, RFC 9110 §5.5): framing errors, 400 and close.
  { name = "a CR inside a header value",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. "X-Bad: a\rb\r\n\r\n",
    status = 400, closes = true },
  { name = "a NUL inside a header value",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. "X-Bad: a\0b\r\n\r\n",
    status = 400, closes = true },
  { name = "an empty header name",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. ": no name\r\n\r\n",
    status = 400, closes = true },
  { name = "an obs-fold line starting with a space",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. "X-Folded: a\r\n  b\r\n\r\n",
    status = 400, closes = true },
  { name = "an obs-fold line starting with a tab",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. "X-Folded: a\r\n\tb\r\n\r\n",
    status = 400, closes = true },
  { name = "whitespace between a header name and the colon",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. "X-Space : b\r\n\r\n",
    status = 400, closes = true },
  { name = "bare LF line endings",
    raw = "GET /hello HTTP/1.1\nHost: 127.0.0.1\n\n",
    status = 400, closes = true },
  { name = "a header line ended by a bare LF",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. "X-A: b\n\r\n",
    status = 400, closes = true },

  { name = "whitespace between the request line and the first header",
    raw = "GET /hello HTTP/1.1\r\n Host: 127.0.0.1\r\n\r\n",
    status = 400, closes = true },
  { name = "a tab and obs-text inside a header value (both allowed)",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. "X-Tab: a\tb\r\nX-Latin: caf\xe9\r\n\r\n",
    status = 200, closes = false, body = "Hello, world!\n" },

  -- Message body framing (RFC 9112 §6).
  { name = "a Content-Length with leading zeros (005, valid 1*DIGIT)",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Content-Length: 005\r\n\r\nhello",
    status = 200, closes = false, body = "hello" },
  { name = "a chunked body with chunk extensions and a trailer field",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Transfer-Encoding: chunked\r\n\r\n"
      .. "3;name=value\r\nhel\r\n2;q=\"quoted\"\r\nlo\r\n0\r\nX-Trailer: t\r\n\r\n",
    status = 200, closes = false, body = "hello" },
  { name = "an empty chunked body",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    status = 200, closes = false, body = "" },
  { name = "Content-Length together with Transfer-Encoding",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
      .. "5\r\nhello\r\n0\r\n\r\n",
    status = 400, closes = true },
  { name = "two different Content-Lengths",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    status = 400, closes = true },
  { name = "a Content-Length with a plus sign",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Content-Length: +5\r\n\r\nhello",
    status = 400, closes = true },
  { name = "a negative Content-Length",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Content-Length: -5\r\n\r\nhello",
    status = 400, closes = true },
  { name = "a hexadecimal Content-Length",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Content-Length: 0x5\r\n\r\nhello",
    status = 400, closes = true },
  { name = "a non-numeric Content-Length",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Content-Length: five\r\n\r\nhello",
    status = 400, closes = true },
  { name = "a bare CR in a chunk extension",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Transfer-Encoding: chunked\r\n\r\n"
      .. "5;ext=a\rb\r\nhello\r\n0\r\n\r\n",
    status = 400, closes = true },
  { name = "a chunk size that is not hexadecimal",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Transfer-Encoding: chunked\r\n\r\n"
      .. "zz\r\nhello\r\n0\r\n\r\n",
    status = 400, closes = true },
  { name = "chunk data longer than its size",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Transfer-Encoding: chunked\r\n\r\n"
      .. "3\r\nhello\r\n0\r\n\r\n",
    status = 400, closes = true },
  { name = "transfer-encoding: gzip, chunked",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Transfer-Encoding: gzip, chunked\r\n\r\n"
      .. "5\r\nhello\r\n0\r\n\r\n",
    status = 501, closes = true },
  { name = "transfer-encoding: , chunked",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Transfer-Encoding: , chunked\r\n\r\n"
      .. "5\r\nhello\r\n0\r\n\r\n",
    status = 501, closes = true },
  { name = "transfer-encoding: gzip",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Transfer-Encoding: gzip\r\n\r\nhello",
    status = 501, closes = true },
  { name = "transfer-encoding: chunked on HTTP/1.0",
    raw = "POST /echo HTTP/1.0\r\n" .. H .. "Transfer-Encoding: chunked\r\n\r\n"
      .. "5\r\nhello\r\n0\r\n\r\n",
    status = 400, closes = true },
  { name = "a chunked body that is fine",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Transfer-Encoding: chunked\r\n\r\n"
      .. "5\r\nhello\r\n0\r\n\r\n",
    status = 200, closes = false, body = "hello" },

  -- Versions (RFC 9112 §2.3, SPEC §13).
  { name = "an HTTP/2.0 request line",
    raw = "GET /hello HTTP/2.0\r\n" .. H .. "\r\n",
    status = 505 },
  { name = "an HTTP/1.2 request line",
    raw = "GET /hello HTTP/1.2\r\n" .. H .. "\r\n",
    status = 505 },

  -- Host (RFC 9112 §3.2, SPEC §13).
  { name = "HTTP/1.1 without Host",
    raw = "GET /hello HTTP/1.1\r\n\r\n",
    status = 400 },
  { name = "a repeated Host",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. H .. "\r\n",
    status = 400 },
  { name = "HTTP/1.0 without Host",
    raw = "GET /hello HTTP/1.0\r\n\r\n",
    status = 200, closes = true, body = "Hello, world!\n" },
  { name = "a foreign Host (evil.example) on the loopback listener",
    raw = "GET /hello HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    status = 403, closes = false, content_type = "text/plain" },
  { name = "a foreign Host with a port (evil.example:8080)",
    raw = "GET /hello HTTP/1.1\r\nHost: evil.example:8080\r\n\r\n",
    status = 403, content_type = "text/plain" },
  { name = "a rebinding Host that starts like loopback (127.0.0.1.evil.example)",
    raw = "GET /hello HTTP/1.1\r\nHost: 127.0.0.1.evil.example\r\n\r\n",
    status = 403, content_type = "text/plain" },
  { name = "a rebinding Host that starts like localhost (localhost.evil.example)",
    raw = "GET /hello HTTP/1.1\r\nHost: localhost.evil.example\r\n\r\n",
    status = 403, content_type = "text/plain" },
  { name = "Host localhost",
    raw = "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n",
    status = 200, closes = false, body = "Hello, world!\n" },
  { name = "Host localhost:1234",
    raw = "GET /hello HTTP/1.1\r\nHost: localhost:1234\r\n\r\n",
    status = 200, closes = false, body = "Hello, world!\n" },
  { name = "Host 127.0.0.2",
    raw = "GET /hello HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n",
    status = 200, closes = false, body = "Hello, world!\n" },
  { name = "Host [::1]:80",
    raw = "GET /hello HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
    status = 200, closes = false, body = "Hello, world!\n" },

  { name = "Host 127.0.0.1 with trailing whitespace (OWS, RFC 9112 §5.1)",
    raw = "GET /hello HTTP/1.1\r\nHost: 127.0.0.1 \t\r\n\r\n",
    status = 200, closes = false, body = "Hello, world!\n" },
  { name = "Host [::1]",
    raw = "GET /hello HTTP/1.1\r\nHost: [::1]\r\n\r\n",
    status = 200, closes = false, body = "Hello, world!\n" },
  { name = "a foreign IPv6 Host ([::2])",
    raw = "GET /hello HTTP/1.1\r\nHost: [::2]\r\n\r\n",
    status = 403, content_type = "text/plain" },
  { name = "a Host with an invalid value (a space inside)",
    raw = "GET /hello HTTP/1.1\r\nHost: local host\r\n\r\n",
    status = 400 },

  -- Request target (RFC 9112 §3.2).
  { name = "an origin-form target without the leading slash",
    raw = "GET hello HTTP/1.1\r\n" .. H .. "\r\n",
    status = 400 },
  { name = "an absolute-form target on a loopback host (RFC 9112 §3.2.2: MUST accept)",
    raw = "GET http://127.0.0.1/hello HTTP/1.1\r\n" .. H .. "\r\n",
    status = 200, body = "Hello, world!\n" },
  { name = "an absolute-form target naming a foreign host (its host wins over Host)",
    raw = "GET http://evil.example/hello HTTP/1.1\r\n" .. H .. "\r\n",
    status = 403 },

  -- Sizes (SPEC §13).
  { name = "a request line over 8 KiB",
    raw = "GET /say?v=" .. string.rep("a", 8300) .. " HTTP/1.1\r\n" .. H .. "\r\n",
    status = 414 },
  { name = "a request line of 8200 bytes",
    raw = "GET /say?v=" .. string.rep("a", 8200 - #"GET /say?v= HTTP/1.1") .. " HTTP/1.1\r\n" .. H
      .. "\r\n",
    status = 414 },
  { name = "a request line of 8190 bytes",
    raw = "GET /say?v=" .. string.rep("a", 8190 - #"GET /say?v= HTTP/1.1") .. " HTTP/1.1\r\n" .. H
      .. "\r\n",
    status = 200, closes = false, body = string.rep("a", 8190 - #"GET /say?v= HTTP/1.1") },
  { name = "one header value of 17000 bytes",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. "X-Huge: " .. string.rep("h", 17000) .. "\r\n\r\n",
    status = 431 },
  { name = "headers over 16 KiB",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. fields(20, 1000) .. "\r\n",
    status = 431 },
  { name = "headers of about 15 KiB",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. fields(15, 1000) .. "\r\n",
    status = 200, closes = false, body = "Hello, world!\n" },
  { name = "101 header fields",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. fields(100) .. "\r\n",
    status = 431 },
  { name = "100 header fields",
    raw = "GET /hello HTTP/1.1\r\n" .. H .. fields(99) .. "\r\n",
    status = 200, closes = false, body = "Hello, world!\n" },

  -- Expectations (RFC 9110 §10.1.1).
  { name = "Expect: something-else",
    raw = "POST /echo HTTP/1.1\r\n" .. H .. "Expect: something-else\r\nContent-Length: 5\r\n\r\nhello",
    status = 417 },
}
