-- clank-run new NAME (SPEC §16): writes NAME/ from the starter app (lua/clank/starter), with
-- {{name}} replaced by the folder's name. Run by runtime/host/command.c: (target, env) → status.
local FILES = { "app.lua", "README.md", "public/app.css", "spec/app_spec.lua" }

local function read(path)
  local f = assert(io.open(path, "rb"))
  local data = f:read("a")
  f:close()
  return data
end

local function write(path, data)
  local f, err = io.open(path, "wb")
  if not f then return nil, err end
  f:write(data)
  f:close()
  return true
end

-- target as one word for a POSIX shell: as it is when it holds nothing the shell reads, else in
-- single quotes (each ' written '\'').
local function shell_word(target)
  if target:find("^[%w_./:@%%+=,-]+$") then return target end
  return "'" .. target:gsub("'", "'\\''") .. "'"
end

return function(target, env)
  local fs = env.fs
  if fs.exists(target) then
    io.stderr:write("clank-run new: ", target, " already exists; choose a new folder name\n")
    return 1
  end
  -- the app's name: the folder's, kept to characters that need no escaping in Lua or HTML
  local name = target:gsub("/+$", ""):match("([^/]*)$"):gsub("[^%w_.-]", "-")
  if name == "" or name == "." or name == ".." then
    io.stderr:write("clank-run new: ", target, " is not a folder name\n")
    return 1
  end
  local starter = env.luaDir .. "/clank/starter"
  local ok, err = fs.mkdir(target)
  if not ok then
    io.stderr:write("clank-run new: ", tostring(err), "\n")
    return 1
  end
  for _, file in ipairs(FILES) do
    local sub = file:match("^(.*)/")
    if sub and not fs.isdir(target .. "/" .. sub) then assert(fs.mkdir(target .. "/" .. sub)) end
    local text = read(starter .. "/" .. file):gsub("{{name}}", function() return name end)
    assert(write(target .. "/" .. file, text))
  end
  local word = shell_word(target) -- the commands are pasted into a shell: "My App" is two words
  io.stdout:write("clank-run new: wrote ", target, "/ (app.lua, public/app.css, spec/, README.md)\n",
    "  serve it:  clank-run ", word, "\n",
    "  test it:   clank-run test ", word, "\n")
  return 0
end
