-- clank.auth's sign-in does not tell who has an account (issue 30): an unknown email gets the
-- answer a wrong password gets, byte for byte, in about the same time, because it is checked
-- against a dummy hash made with the same parameters (lua/clank/auth/passwords.lua). Measured
-- from outside, against the real clank-run serving the accounts fixture at the default password
-- cost (CLANK_PASSWORD_COST empty: the module's default, whatever the caller's environment says).
--
-- The guessing limits (10 failures per account, 50 per address in 15 minutes) stay out of the
-- way: the wrong passwords are spread over ACCOUNTS accounts, each unknown email is new, and
-- the whole run makes 2 * ROUNDS failures from one address.
local server = require "helpers.server"
local http = require "helpers.http"
local storage = require "helpers.storage"

local JSON = { ["content-type"] = "application/json" }
local ROUNDS = 15
local ACCOUNTS = 3 -- ROUNDS / ACCOUNTS = 5 wrong passwords each, under the account limit of 10
local PASSWORD = "correct horse battery"

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

describe("clank.auth sign-in timing", function()
  local db, remove_db = storage.backends[1].fresh()
  local s = server.for_describe(server.fixture("accounts"), {
    env = { ACCOUNTS_DB = db, CLANK_PASSWORD_COST = "" },
  })
  teardown(remove_db)

  it("answers an unknown email and a wrong password the same, in about the same time", function()
    for i = 1, ACCOUNTS do
      local res = assert(http.request(s.port, "POST", "/__clank/auth/register", JSON,
        ('{"email":"%s","password":"%s"}'):format(email_of(i), PASSWORD)))
      assert.are.equal(201, res.status, res.body)
    end
    -- the first sign-in of the process also makes the dummy hash: not one of the measured
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

    local m_wrong, m_unknown = median(wrong), median(unknown)
    local larger = math.max(m_wrong, m_unknown)
    print(("\nauth_timing: median sign-in with a wrong password %.1f ms, with an unknown email %.1f ms")
      :format(m_wrong * 1000, m_unknown * 1000))
    -- the hash really runs (the default cost: tens of milliseconds)
    assert.is_true(m_wrong > 0.020, ("a wrong password's median is %.1f ms"):format(m_wrong * 1000))
    assert.is_true(m_unknown > 0.020, ("an unknown email's median is %.1f ms"):format(m_unknown * 1000))
    assert.is_true(math.abs(m_wrong - m_unknown) < 0.2 * larger,
      ("medians %.1f ms (wrong password) and %.1f ms (unknown email) differ by 20 %% or more")
        :format(m_wrong * 1000, m_unknown * 1000))

    -- the right password still signs in: the limits did not get in the way
    local last = sign_in(s.port, email_of(ACCOUNTS), PASSWORD)
    assert.are.equal(200, last.status, last.body)
  end)
end)
