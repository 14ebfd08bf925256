-- clank.auth's sign-in does not tell who has an account (issue 30): an unknown email gets the
-- answer a wrong password gets, byte for byte, in about the same time, because it is checked
-- against a dummy hash made with the same parameters (lua/clank/auth/passwords.lua). Measured
-- from outside, against the real clank-run serving the accounts fixture at the default password
-- cost (CLANK_PASSWORD_COST empty: the module's default, whatever the caller's environment says).
--
-- The guessing limits (10 failures per account, 50 per address in 15 minutes) stay out of the
-- way: the wrong passwords are spread over ACCOUNTS accounts, each unknown email is new, and a
-- batch makes 2 * ROUNDS failures from one address, on a server and database of its own.
--
-- Other processes on the machine (ctest -j, a browser spec) slow some sign-ins by tens or
-- hundreds of milliseconds, so that a median of 15 can land on either side of a jump: batches
-- run one after another (at most BATCHES) until one has its medians within 20 % of each other,
-- and its fastest sign-in of each kind too. A load only ever adds time, so the minimums show
-- what each kind costs: a real difference cannot hide behind a batch where the load happened
-- to even out the medians. Answers that are not byte-identical fail the batch they are in.
local server = require "helpers.server"
local http = require "helpers.http"
local storage = require "helpers.storage"

local JSON = { ["content-type"] = "application/json" }
local ROUNDS = 15
local ACCOUNTS = 3 -- ROUNDS / ACCOUNTS = 5 wrong passwords each, under the account limit of 10
local PASSWORD = "correct horse battery"
local BATCHES = 3 -- a quiet machine needs one (about 2.5 s)

-- What both kinds of failure answer (lua/clank/auth/http.lua: WRONG), written out.
local WRONG_STATUS = 401
local WRONG_BODY = '{"error":{"code":"INVALID_CREDENTIALS","message":"Wrong email or password."},'
  .. '"ok":false}'
-- Headers that differ between any two answers.
local PER_ANSWER = { date = true, ["x-request-id"] = true }

local function median(list)
  local sorted = { table.unpack(list) }
  table.sort(sorted)
  local n = #sorted
  if n % 2 == 1 then return sorted[(n + 1) / 2] end
  return (sorted[n / 2] + sorted[n / 2 + 1]) / 2
end

-- a and b differ by less than 20 % of the larger
local function close(a, b) return math.abs(a - b) < 0.2 * math.max(a, b) end

-- The answer's header lines but those that differ per answer, as one string.
local function stable_headers(res)
  local lines = {}
  for _, field in ipairs(res.fields) do
    if not PER_ANSWER[field[1]] then lines[#lines + 1] = field[1] .. ": " .. field[2] end
  end
  return table.concat(lines, "\n")
end

local function email_of(i) return ("person%d@example.com"):format(i) end

-- One JSON sign-in on a fresh connection → the response and the seconds it took.
local function sign_in(port, email, password)
  local body = ('{"email":"%s","password":"%s"}'):format(email, password)
  local t0 = http.now()
  local res = assert(http.request(port, "POST", "/__clank/auth/login", JSON, body))
  return res, http.now() - t0
end

-- One batch on a fresh server and database: registers ACCOUNTS people, signs in once (the
-- first sign-in of a process also makes the dummy hash: not measured), then ROUNDS rounds of one
-- wrong password and one unknown email → the seconds each took, by kind.
local function batch()
  local db, remove_db = storage.backends[1].fresh()
  local s = server.start(server.fixture("accounts"), {
    env = { ACCOUNTS_DB = db, CLANK_PASSWORD_COST = "" },
  })
  for i = 1, ACCOUNTS do
    local res = assert(http.request(s.port, "POST", "/__clank/auth/register", JSON,
      ('{"email":"%s","password":"%s"}'):format(email_of(i), PASSWORD)))
    assert.are.equal(201, res.status, res.body)
  end
  local first = sign_in(s.port, email_of(1), PASSWORD)
  assert.are.equal(200, first.status, first.body)

  local wrong, unknown = {}, {}
  local headers
  local function check(res, what)
    assert.are.equal(WRONG_STATUS, res.status, what .. ": " .. res.body)
    assert.are.equal(WRONG_BODY, res.body, what)
    headers = headers or stable_headers(res)
    assert.are.equal(headers, stable_headers(res), what)
  end
  for i = 1, ROUNDS do
    -- alternate which kind goes first, so that a drift in the machine's speed hits both
    local function a_wrong_password()
      local res, took = sign_in(s.port, email_of((i - 1) % ACCOUNTS + 1), "wrong password " .. i)
      check(res, "wrong password " .. i)
      wrong[#wrong + 1] = took
    end
    local function an_unknown_email()
      local res, took = sign_in(s.port, ("nobody%d@example.com"):format(i), PASSWORD)
      check(res, "unknown email " .. i)
      unknown[#unknown + 1] = took
    end
    if i % 2 == 1 then
      a_wrong_password()
      an_unknown_email()
    else
      an_unknown_email()
      a_wrong_password()
    end
  end

  -- the right password still signs in: the limits did not get in the way
  local last = sign_in(s.port, email_of(ACCOUNTS), PASSWORD)
  assert.are.equal(200, last.status, last.body)
  assert.are.equal(0, s:stop())
  remove_db()
  return wrong, unknown
end

describe("clank.auth sign-in timing", function()
  after_each(server.kill_all)

  it("answers an unknown email and a wrong password the same, in about the same time", function()
    local seen, agreed = {}, false
    for n = 1, BATCHES do
      if agreed then break end
      local wrong, unknown = batch()
      local m_wrong, m_unknown = median(wrong), median(unknown)
      local min_wrong, min_unknown = math.min(table.unpack(wrong)), math.min(table.unpack(unknown))
      local shown = ("medians %.1f ms (wrong password) and %.1f ms (unknown email), minimums "
        .. "%.1f and %.1f ms"):format(m_wrong * 1000, m_unknown * 1000, min_wrong * 1000,
        min_unknown * 1000)
      seen[n] = shown
      print(("\nauth_timing: batch %d: %s"):format(n, shown))
      -- the hash really runs (the default cost: tens of milliseconds)
      assert.is_true(m_wrong > 0.020 and m_unknown > 0.020, shown)
      agreed = close(m_wrong, m_unknown) and close(min_wrong, min_unknown)
    end
    assert.is_true(agreed, "the medians or the minimums differed by 20 % of the larger or more "
      .. "in each of " .. #seen .. " batches: " .. table.concat(seen, "; "))
  end)
end)
