-- bench/db/app_luasql.lua: apps/tasks/app.lua as it is, over the store it had before clank.db
-- (bench/db/store_luasql.lua: LuaSQL, blocking the loop), for bench/db.sh's comparison. The old
-- store returns nil, message on a database failure where the new one raises: the adapter below
-- raises, so the app sees the contract it was written for.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local luasql_store = require "store_luasql"

local store = { is_postgres_url = luasql_store.is_postgres_url }

function store.open(target)
  local db, err = luasql_store.open(target)
  if not db then
    return nil, err
  end
  return setmetatable({}, {
    __index = function(_, name)
      return function(_, ...)
        local result, failure = db[name](db, ...)
        if result == nil and name ~= "close" then
          error("tasks: " .. name .. " failed: " .. tostring(failure), 0)
        end
        return result
      end
    end,
  })
end

package.loaded.store = store -- what apps/tasks/app.lua requires
return dofile(here .. "/../../apps/tasks/app.lua")
