-- psql(url, sql) → psql's output for sql against url, trailing space trimmed; fails the test when
-- psql fails. It runs without the ASan runtime the sanitizer build preloads into lua5.4: psql
-- hangs at exit under it.
local quote = require("helpers.files").quote

return function(url, sql)
  local p = assert(io.popen("env -u LD_PRELOAD psql " .. quote(url) .. " -X -qAt -v ON_ERROR_STOP=1 -c "
    .. quote(sql) .. " 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  assert(ok, "psql failed: " .. out)
  return (out:gsub("%s+$", ""))
end
