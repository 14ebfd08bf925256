-- bench/instructions/client.lua PORT COUNT STATUS METHOD PATH [BODY_FILE [HEADER...]]
-- Sends COUNT requests `METHOD PATH` (with BODY_FILE's bytes as a JSON body when given, and each
-- HEADER, "Name: value", as a header line), one at a time on one keep-alive connection, reads
-- each answer whole (Content-Length) and checks its status: the same fixed client for every
-- measurement, so what differs between runs is the server.
local socket = require "socket"

local port, count, want, method, path, body_file =
  tonumber(arg[1]), tonumber(arg[2]), arg[3], arg[4], arg[5], arg[6]
assert(port and count and want and method and path,
  "usage: client.lua PORT COUNT STATUS METHOD PATH [BODY_FILE [HEADER...]]")
local headers = {}
for i = 7, #arg do
  headers[#headers + 1] = arg[i] .. "\r\n"
end

local request
if body_file then
  local f = assert(io.open(body_file, "rb"))
  local body = f:read("a"):gsub("\n$", "")
  f:close()
  request = table.concat {
    method, " ", path, " HTTP/1.1\r\n",
    "Host: 127.0.0.1\r\n",
    "Content-Type: application/json\r\n",
    "Content-Length: ", #body, "\r\n",
    table.concat(headers),
    "\r\n",
    body,
  }
else
  request = table.concat { method, " ", path, " HTTP/1.1\r\n", "Host: 127.0.0.1\r\n", "\r\n" }
end

local conn = assert(socket.tcp())
conn:settimeout(60) -- the server runs under valgrind: slow, but never this slow
assert(conn:connect("127.0.0.1", port))
conn:setoption("tcp-nodelay", true)

for i = 1, count do
  assert(conn:send(request))
  local status_line = assert(conn:receive("*l"))
  local status = status_line:match("^HTTP/1%.1 (%d%d%d)")
  if status ~= want then
    error(("request %d: %q, want %s"):format(i, status_line, want))
  end
  local length
  while true do
    local line = assert(conn:receive("*l"))
    if line == "" then
      break
    end
    local n = line:lower():match("^content%-length:%s*(%d+)")
    if n then
      length = tonumber(n)
    end
  end
  assert(length, "answer without content-length")
  assert(conn:receive(length))
end
conn:close()
