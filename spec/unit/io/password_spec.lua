-- clank.password in process: Argon2id hashes made on libuv's thread pool while an action's
-- handler (a runtime coroutine driven by the loop) waits, as db_sqlite_spec runs its waits.
-- Expected strings come from the encoded form libsodium and the reference implementation
-- document ($argon2id$v=19$m=<KiB>,t=<passes>,p=1$<salt>$<hash>, unpadded base64: a 16-byte
-- salt is 22 characters, a 32-byte hash 43) and from the reference implementation's own test
-- vectors (phc-winner-argon2, src/test.c: "password" with salt "somesalt").
local clank = require "clank"
local password = require "clank.password"
local socket = require "socket"
local s = clank.schema

local NOT_IN_COROUTINE = "clank.sleep: cannot wait here (not in a handler coroutine)"
-- argon2id, version 19, m=65536, t=2, p=1 of "password" with salt "somesalt"
local REFERENCE = "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"
-- the same with argon2i: libsodium's crypto_pwhash_str_verify would take it
local REFERENCE_I = "$argon2i$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$wWKIMhR9lyDFvRz9YTZweHKfbftvj+qf+YFY4NeBbtA"
local MIN = { opslimit = 1, memlimit = 8192 } -- libsodium's minimum: 8 KiB, one pass
-- Hashes that take long enough (about 450 ms here, in 16 MiB) for an abort to land while they run.
local SLOW = { opslimit = 150, memlimit = 16 * 1024 * 1024 }
local B64 = "[A-Za-z0-9+/]"

-- The whole encoded form for a cost, salt and hash in their unpadded base64 lengths.
local function shape(m_kib, t)
  return "^%$argon2id%$v=19%$m=" .. m_kib .. ",t=" .. t .. ",p=1%$" .. B64:rep(22) .. "%$" .. B64:rep(43) .. "$"
end

-- Runs fn(ctx) as an action's handler and returns what it returns.
local function in_handler(fn)
  local action = clank.defineAction {
    name = "run", description = "Runs a function.", input = s.object {}, sideEffects = "read",
    handler = function(_, c) return { value = fn(c) } end,
  }
  return action({}, {}).value
end

-- Spawns each function, waits at most 10 s for all of them, and returns what each returned, or
-- its error as text: a failed task must fail the spec, not leave it waiting for CI's timeout.
local function spawn_all(fns)
  local out, left = {}, #fns
  for i, fn in ipairs(fns) do
    clank.spawn(function()
      local ok, value = pcall(fn)
      if ok then out[i] = value else out[i] = "error: " .. tostring(value) end
      left = left - 1
    end)
  end
  for _ = 1, 2000 do
    if left == 0 then return out end
    clank.sleep(5)
  end
  error(left .. " spawned tasks never finished")
end

local function raised(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

-- What `lua5.4 -e code` prints with env set (it inherits LUA_PATH, LUA_CPATH, and the sanitizer
-- build's LD_PRELOAD).
local function lua_with(env, code)
  local f = assert(io.popen(env .. " lua5.4 -e '" .. code .. "' 2>&1"))
  local out = f:read("a")
  f:close()
  return out
end

describe("clank.password", function()
  describe("DEFAULT", function()
    it("is 2 passes over 64 MiB (libsodium's INTERACTIVE), or the minimum with CLANK_PASSWORD_COST=fast", function()
      if os.getenv("CLANK_PASSWORD_COST") == "fast" then
        assert.are.same({ opslimit = 1, memlimit = 8192 }, password.DEFAULT)
      else
        assert.are.same({ opslimit = 2, memlimit = 67108864 }, password.DEFAULT)
      end
    end)

    it("is the minimum under CLANK_PASSWORD_COST=fast, read when the module loads", function()
      local code = 'local p = require "clank.password"; print(p.DEFAULT.opslimit, p.DEFAULT.memlimit)'
      assert.are.equal("1\t8192\n", lua_with("CLANK_PASSWORD_COST=fast", code))
      assert.are.equal("2\t67108864\n", lua_with("CLANK_PASSWORD_COST=", code))
    end)

    it("refuses another CLANK_PASSWORD_COST when the module loads", function()
      local out = lua_with("CLANK_PASSWORD_COST=slow", 'print(pcall(require, "clank.password"))')
      assert.truthy(out:find("false\t", 1, true), out)
      assert.truthy(out:find("CLANK_PASSWORD_COST is 'fast' or unset, not 'slow'", 1, true), out)
    end)

    it("is a copy: changing it does not change what hash uses", function()
      local before = password.DEFAULT.opslimit
      password.DEFAULT.opslimit = 7
      local h = in_handler(function() return password.hash("x") end)
      password.DEFAULT.opslimit = before
      assert.truthy(h:find(",t=" .. before .. ",", 1, true), h)
    end)
  end)

  describe("hash", function()
    it("makes an argon2id v19 encoded hash at the DEFAULT cost", function()
      local h = in_handler(function() return password.hash("correct horse") end)
      assert.truthy(h:match(shape(password.DEFAULT.memlimit // 1024, password.DEFAULT.opslimit)), h)
    end)

    it("makes one at the cost of params, in KiB and passes", function()
      local h = in_handler(function() return password.hash("correct horse", MIN) end)
      assert.are.equal("$argon2id$v=19$m=8,t=1,p=1$", h:sub(1, 27))
      assert.truthy(h:match(shape(8, 1)), h)
      h = in_handler(function() return password.hash("x", { opslimit = 3, memlimit = 1024 * 1024 }) end)
      assert.truthy(h:match(shape(1024, 3)), h)
    end)

    it("takes a field params leaves out from DEFAULT", function()
      local h = in_handler(function() return password.hash("x", { memlimit = 16384 }) end)
      assert.truthy(h:match(shape(16, password.DEFAULT.opslimit)), h)
    end)

    it("salts each hash: the same password twice gives two hashes, each verified", function()
      local a, b, ok_a, ok_b = table.unpack(in_handler(function()
        local x, y = password.hash("same"), password.hash("same")
        return { x, y, password.verify(x, "same"), password.verify(y, "same") }
      end))
      assert.are_not.equal(a, b)
      assert.are_not.equal(a:match("%$([^$]+)%$[^$]+$"), b:match("%$([^$]+)%$[^$]+$")) -- the salts
      assert.is_true(ok_a)
      assert.is_true(ok_b)
    end)
  end)

  describe("verify", function()
    it("takes the reference implementation's hash of 'password', and nothing else", function()
      assert.are.same({ true, false, false, false }, in_handler(function()
        return { password.verify(REFERENCE, "password"), password.verify(REFERENCE, "Password"),
          password.verify(REFERENCE, "password "), password.verify(REFERENCE, "") }
      end))
    end)

    it("answers true for the password hashed and false for another", function()
      assert.are.same({ true, false }, in_handler(function()
        local h = password.hash("hunter2", MIN)
        return { password.verify(h, "hunter2"), password.verify(h, "hunter3") }
      end))
    end)

    it("works for an empty password, a 1024-byte one and one with NUL bytes", function()
      local long = ("0123456789abcdef"):rep(64)
      assert.are.equal(1024, #long)
      assert.are.same({ true, false, true, false, false, true, false, false, false }, in_handler(function()
        local empty, big, nul = password.hash(""), password.hash(long), password.hash("a\0b\0")
        return {
          password.verify(empty, ""), password.verify(empty, "\0"),
          password.verify(big, long), password.verify(big, long:sub(1, 1023)), password.verify(big, long .. "x"),
          password.verify(nul, "a\0b\0"), password.verify(nul, "a"), password.verify(nul, "a\0b"),
          password.verify(nul, "a\0c\0"),
        }
      end))
    end)

    it("answers false, without raising, for a stored string that is not an argon2id hash", function()
      local h = in_handler(function() return password.hash("pw", MIN) end)
      local cases = {
        "", "garbage", "$argon2id$", "$argon2id$v=19$m=8,t=1,p=1$",
        REFERENCE:sub(1, -2), REFERENCE:sub(1, 45), -- truncated
        REFERENCE_I, -- argon2i, not id
        REFERENCE:gsub("argon2id", "argon2d"), -- argon2d
        REFERENCE .. "\0", "\0" .. REFERENCE, REFERENCE .. ("A"):rep(100), -- a NUL, too long
        h:gsub("m=8,", "m=x,"), h:upper(),
      }
      local got = in_handler(function()
        local out = {}
        for i, stored in ipairs(cases) do out[i] = password.verify(stored, "password") end
        out[#cases + 1] = password.verify(h:sub(1, -2), "pw")
        return out
      end)
      for i = 1, #cases + 1 do
        assert.is_false(got[i], "case " .. i .. ": " .. tostring(cases[i]))
      end
    end)
  end)

  describe("needsRehash", function()
    it("is false for a hash made with the params asked about, true for other params", function()
      -- the reference hash is m=65536,t=2: the DEFAULT's
      local same = { opslimit = 2, memlimit = 64 * 1024 * 1024 }
      assert.is_false(password.needsRehash(REFERENCE, same))
      assert.is_true(password.needsRehash(REFERENCE, { opslimit = 3, memlimit = same.memlimit }))
      assert.is_true(password.needsRehash(REFERENCE, { opslimit = 2, memlimit = 32 * 1024 * 1024 }))
      assert.is_true(password.needsRehash(REFERENCE, MIN))
      local h = in_handler(function() return password.hash("pw", MIN) end)
      assert.is_false(password.needsRehash(h, MIN))
      assert.is_true(password.needsRehash(h, same))
    end)

    it("is false for a hash made with DEFAULT, asked without params", function()
      local h = in_handler(function() return password.hash("pw") end)
      assert.is_false(password.needsRehash(h))
      assert.is_true(password.needsRehash(h, { opslimit = password.DEFAULT.opslimit + 1 }))
    end)

    it("is true for anything that is not an argon2id hash, argon2i among them", function()
      for _, stored in ipairs { "", "garbage", "$argon2id$", REFERENCE_I, REFERENCE:sub(1, 40), REFERENCE .. "\0" } do
        assert.is_true(password.needsRehash(stored, { opslimit = 2, memlimit = 67108864 }), stored)
      end
    end)

    it("needs no task", function()
      assert.is_boolean(password.needsRehash(REFERENCE))
    end)
  end)

  describe("waiting", function()
    it("does not block the loop while a hash runs", function()
      local ticks, hashed = table.unpack(in_handler(function()
        local count, running = 0, true
        local out = spawn_all {
          function()
            local h = password.hash("pw")
            running = false
            return h
          end,
          function()
            while running do
              clank.sleep(1)
              count = count + 1
            end
            return true
          end,
        }
        return { count, out[1] }
      end))
      assert.truthy(hashed:match(shape(password.DEFAULT.memlimit // 1024, password.DEFAULT.opslimit)), hashed)
      -- a DEFAULT hash takes tens of ms; ticks of 1 ms go on meanwhile
      assert.is_true(ticks >= 5, ticks .. " ticks during the hash")
    end)

    it("runs hashes side by side", function()
      local out = in_handler(function()
        return spawn_all {
          function() return password.verify(password.hash("a"), "a") end,
          function() return password.verify(password.hash("b"), "b") end,
          function() return password.verify(password.hash("c"), "x") end,
        }
      end)
      assert.are.same({ true, true, false }, out)
    end)

    it("returns nil, ABORTED at once when its signal aborts, and goes on afterwards", function()
      local t0 = socket.gettime()
      local res = in_handler(function()
        local h, err = password.hash("pw", SLOW, clank.timeout(20))
        local elapsed = socket.gettime() - t0
        local ok, verr = password.verify(REFERENCE, "password", clank.timeout(5))
        return { h = h, err = err, elapsed = elapsed, ok = ok, verr = verr }
      end)
      assert.is_nil(res.h)
      assert.are.same({ code = "ABORTED", reason = "timeout", message = "aborted: timeout" }, res.err)
      assert.is_true(res.elapsed < 0.2, "answered after " .. res.elapsed .. " s")
      assert.is_nil(res.ok)
      assert.are.same({ code = "ABORTED", reason = "timeout", message = "aborted: timeout" }, res.verr)
      -- the abandoned hashes finish on their threads, unseen; the next ones are answered
      assert.is_true(in_handler(function() return password.verify(password.hash("next", MIN), "next") end))
    end)

    it("leaves many aborted hashes to free themselves, queued ones never started", function()
      -- more than libuv's 4 threads: some are still queued when their signal aborts
      local out = in_handler(function()
        local fns = {}
        for i = 1, 8 do
          fns[i] = function()
            local _, err = password.hash("pw" .. i, SLOW, clank.timeout(10))
            return err.code
          end
        end
        return spawn_all(fns)
      end)
      assert.are.same({ "ABORTED", "ABORTED", "ABORTED", "ABORTED", "ABORTED", "ABORTED", "ABORTED", "ABORTED" }, out)
      collectgarbage()
      collectgarbage()
    end)

    it("answers an already aborted signal without starting", function()
      local signal = clank.timeout(0)
      local t0 = socket.gettime()
      local res = in_handler(function()
        clank.sleep(5)
        return { password.hash("pw", SLOW, signal) }
      end)
      assert.is_nil(res[1])
      assert.are.same({ code = "ABORTED", reason = "timeout", message = "aborted: timeout" }, res[2])
      assert.is_true(socket.gettime() - t0 < 0.2)
    end)

    it("returns the hash when its signal does not abort in time", function()
      local h = in_handler(function() return password.hash("pw", MIN, clank.timeout(5000)) end)
      assert.truthy(h:match(shape(8, 1)), h)
    end)

    it("raises the SPEC message outside a handler coroutine", function()
      assert.truthy(raised(password.hash, "pw"):find(NOT_IN_COROUTINE, 1, true))
      assert.truthy(raised(password.verify, REFERENCE, "password"):find(NOT_IN_COROUTINE, 1, true))
      assert.truthy(raised(password.verify, "garbage", "password"):find(NOT_IN_COROUTINE, 1, true))
    end)
  end)

  describe("misuse", function()
    it("raises for arguments of the wrong type", function()
      local cases = {
        { password.hash, nil }, { password.hash, 42 }, { password.hash, {} },
        { password.hash, "pw", "params" }, { password.hash, "pw", { opslimit = "2" } },
        { password.hash, "pw", { opslimit = 2.5 } }, { password.hash, "pw", { memlimit = true } },
        { password.hash, "pw", nil, "signal" }, { password.hash, "pw", nil, {} },
        { password.verify, nil, "pw" }, { password.verify, REFERENCE, nil }, { password.verify, REFERENCE, 1 },
        { password.verify, 1, "pw" }, { password.verify, REFERENCE, "pw", 5 },
        { password.needsRehash, nil }, { password.needsRehash, 1 }, { password.needsRehash, REFERENCE, "x" },
        { password.needsRehash, REFERENCE, { memlimit = "big" } },
      }
      for i, case in ipairs(cases) do
        local err = raised(case[1], table.unpack(case, 2, 4))
        assert.truthy(err:find("bad argument", 1, true), "case " .. i .. ": " .. err)
      end
      -- inside a task as well: they raise before waiting
      local err = in_handler(function() return select(2, pcall(password.hash, 42)) end)
      assert.truthy(tostring(err):find("string expected, got number", 1, true), tostring(err))
    end)

    it("raises for a cost out of libsodium's range, naming it", function()
      local err = raised(password.hash, "pw", { opslimit = 0 })
      assert.truthy(err:find("opslimit must be from 1 to 4294967295", 1, true), err)
      err = raised(password.hash, "pw", { memlimit = 8191 })
      assert.truthy(err:find("memlimit must be from 8192 to", 1, true), err)
      err = raised(password.needsRehash, REFERENCE, { opslimit = -1 })
      assert.truthy(err:find("opslimit must be from 1", 1, true), err)
    end)
  end)
end)
