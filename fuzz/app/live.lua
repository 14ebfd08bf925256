-- The app fuzz/live_frames.c opens a live session of: one view whose handlers count, echo a
-- value, wait, fail and change the tree's shape, so that frames reach every kind of handler.
local clank = require "clank"
local signal = require "clank.signal"
local h = clank.h

local Board = clank.defineView {
  name = "board", description = "Fuzzed live view",
  load = function() return { n = signal.signal(0), text = signal.signal(""), rows = signal.signal(1) } end,
  render = function(_, d)
    local rows = {}
    for i = 1, d.rows.value % 5 do rows[i] = h.li({ id = "row" .. i }, "row ", i) end
    return h.div(nil,
      h.button({ id = "inc", onClick = function() d.n.value = d.n.value + 1 end }, "Add"),
      h.input({ id = "text", maxlength = 16, value = d.text.value,
        onInput = function(ev) d.text.value = ev.value or "" end }),
      h.button({ id = "slow", onClick = function() clank.sleep(1); d.rows.value = d.rows.value + 1 end },
        "Slow"),
      h.button({ id = "fail", onClick = function() error("failed on purpose") end }, "Fail"),
      h.form({ id = "f", onSubmit = function(ev)
        local n = 0
        for _ in pairs(ev.values or {}) do n = n + 1 end
        d.n.value = d.n.value + n
      end },
        h.input({ name = "a" }), h.button({ type = "submit" }, "Send")),
      h.ul(nil, rows),
      h.output({ id = "out" }, d.n.value, " ", d.text.value))
  end,
}

return clank.app { name = "fuzz-live", views = { Board } }
