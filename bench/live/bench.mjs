// bench/live.sh's client: live-view events against action calls on the same server, many open
// live sessions, and a publish fanned out to many sessions. Prints one JSON object per
// measurement on stdout.
//   node bench.mjs BASE_URL SERVER_PID roundtrip SECONDS CONNECTIONS
//   node bench.mjs BASE_URL SERVER_PID scale SESSIONS SECONDS VIEW_PATH
//   node bench.mjs BASE_URL SERVER_PID fanout SESSIONS ROUNDS TIMEOUT_MS
//   node bench.mjs - - report RESULTS_FILE     the table of targets from those lines
// The keyed view (/views/rows) is opened with ?diffs=1, as the page's script does: the client
// keeps each session's html and applies the diff frames to it (a diff whose base it does not
// hold is answered with {"t":"resync"}, counted). The unkeyed list (/) and /views/small are
// opened without diffs, as before (the historical baseline).
import http from "node:http";
import { readFileSync } from "node:fs";
import WebSocket from "ws";

const [base, pidText, mode, a, b, c] = process.argv.slice(2);
const pid = Number(pidText);
const url = mode === "report" ? null : new URL(base);
const ROWS = "/views/rows";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The server's CPU time (user + system) in seconds, from /proc.
function cpuSeconds() {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime: fields 14 and 15
}

// How long the server's main thread waited for a CPU (runnable, not running) in seconds, from
// /proc/PID/schedstat: another process on its core shows here, not in its CPU time.
function runqueueSeconds() {
  return Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[1]) / 1e9;
}

// Waits until the server is quiet: under a tenth of a core over the last QUIET_MS, or MAX_MS
// in all → the seconds waited. Opening a thousand sessions in a few seconds grows the Lua heap
// by hundreds of MiB, and the collection cycle that starts then (at the server's next
// once-a-second tick) runs in its idle time, a second of CPU or so: a publish sent before it
// ends measures that cycle, not the publish. QUIET_MS spans more than a tick.
async function settle() {
  const QUIET_MS = 1500, STEP_MS = 250, MAX_MS = 20000;
  const t0 = performance.now(), samples = [cpuSeconds()];
  while (performance.now() - t0 < MAX_MS) {
    await sleep(STEP_MS);
    samples.push(cpuSeconds());
    const n = QUIET_MS / STEP_MS;
    if (samples.length > n && samples.at(-1) - samples.at(-1 - n) < QUIET_MS / 1000 / 10) break;
  }
  return (performance.now() - t0) / 1000;
}

function rssKiB() {
  const m = readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+) kB/);
  return Number(m[1]);
}

function percentile(values, p) {
  if (values.length === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
const round3 = (x) => (x === null || x === undefined || Number.isNaN(x) ? null : +x.toFixed(3));

function summary(name, latencies, seconds, cpu) {
  return {
    name, count: latencies.length,
    p50_ms: round3(percentile(latencies, 50)), p99_ms: round3(percentile(latencies, 99)),
    per_s: Math.round(latencies.length / seconds),
    per_core_s: Math.round(latencies.length / cpu), server_cpu_s: +cpu.toFixed(2),
    cpu_ms_per_op: round3((cpu * 1000) / latencies.length),
  };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });

function request(method, path, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method, path, agent,
      headers: { ...headers, ...(body ? { "content-type": "application/json" } : {}) } }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
    });
    req.on("error", reject);
    req.setTimeout(60000, () => req.destroy(new Error(`${method} ${path}: no answer in 60 s`)));
    req.end(body);
  });
}

// The Lua memory of the server (GET /__clank/metrics), in KiB.
async function luaKiB() {
  const m = (await request("GET", "/__clank/metrics")).body.match(/^clank_lua_memory_bytes (\d+)$/m);
  return m ? Math.round(Number(m[1]) / 1024) : null;
}

// A diff frame's splices applied to html (positions in UTF-16 code units: JS string indexes;
// `at` counts in the old string, in order) → the new html, or null when they do not fit.
function applySplices(html, splices) {
  const parts = [];
  let pos = 0;
  for (const [at, del, ins] of splices) {
    if (at < pos || at + del > html.length) return null;
    parts.push(html.slice(pos, at), ins);
    pos = at + del;
  }
  parts.push(html.slice(pos));
  return parts.join("");
}

// The keys of the elements that take a click (the rows' buttons in /views/rows), in order.
const clickKeys = (html) => [...html.matchAll(/data-clank-key="([^"]+)"[^>]*data-clank-on="click"/g)].map((m) => m[1]);

let resyncsLogged = 0;

// A live session: a page load for its token, then the WebSocket and its first html.
//   diffs  open with ?diffs=1 and keep the html, applying diff frames to it
//   keep   keep the html (a session that measures nothing need not)
// session.onFrame(m, bytes), when set, sees every html or diff frame once applied.
async function openSession(path = "/", { diffs = false, keep = diffs } = {}) {
  const page = await request("GET", path);
  if (page.status !== 200) throw new Error(`GET ${path} answered ${page.status}`);
  const id = page.body.match(/data-clank-session="([^"]+)"/)[1];
  const ws = new WebSocket(`ws://${url.host}/__clank/sessions/${id}/live${diffs ? "?diffs=1" : ""}`,
    { origin: base.replace(/\/$/, "") });
  const session = { ws, v: 0, seq: 0, waiting: null, key: null, keys: null, html: null, next: 0, bytesIn: 0,
    frames: { html: 0, diff: 0, resync: 0 }, resyncing: false, onFrame: null };
  ws.on("message", (data) => {
    const bytes = data.length; // the frame's JSON text, in bytes
    session.bytesIn += bytes;
    const m = JSON.parse(data);
    const w = session.waiting;
    // the frame answering the event waited for: its size and kind, applied or not
    if (w && m.seq === w.seq && (m.t === "diff" || m.t === "html")) w.answer = { bytes, type: m.t };
    if (m.t === "diff") {
      // as runtime/client/client.js: while a resync is on its way, diffs are dropped
      const html = session.resyncing ? null
        : session.html !== null && m.base === session.v ? applySplices(session.html, m.splices) : null;
      if (html === null) {
        if (session.resyncing) return;
        // not the base held, or splices that do not fit: ask for the whole html
        if (resyncsLogged++ < 3) {
          console.error(`resync (${path}): a diff (seq ${m.seq}) from v ${m.base} to ${m.v}, the client holds v ${session.v}`
            + ` (from a ${session.lastType} frame, seq ${session.lastSeq})`
            + (session.html === null ? " and no html" : m.base === session.v ? ": the splices do not fit" : ""));
        }
        session.frames.resync++;
        session.resyncing = true;
        ws.send('{"t":"resync"}');
        return;
      }
      session.frames.diff++;
      session.html = html;
    } else if (m.t === "html") {
      session.frames.html++;
      session.resyncing = false;
      if (keep) session.html = m.html;
      if (session.key === null) {
        session.key = m.html.match(/data-clank-key="([^"]+)"/)[1];
        session.keys = keep ? clickKeys(m.html) : null;
      }
    } else {
      if (m.t === "error") console.error(`live session ${path}: error frame ${JSON.stringify(m)}`);
      return;
    }
    session.v = m.v;
    session.lastBytes = bytes;
    session.lastType = m.t;
    session.lastSeq = m.seq;
    if (session.onFrame) session.onFrame(m, bytes);
    // the event waited for is answered once its answer is applied (or the html a resync asked
    // for instead): → the answer frame's size
    if (w && (m.seq === w.seq || (w.answer && m.t === "html"))) {
      session.waiting = null;
      w.resolve(w.answer);
    } else if (session.opened) {
      const o = session.opened;
      session.opened = null;
      o();
    }
  });
  await new Promise((resolve, reject) => {
    session.opened = resolve;
    ws.on("error", reject);
    ws.on("close", (code, reason) => {
      session.closed = `${code} ${reason}`;
      const why = new Error(`live session ${path} closed: ${code} ${reason}`);
      if (session.opened) reject(why);
      if (session.waiting) session.waiting.reject(why);
    });
  });
  return session;
}

// A click on the session's first clickable element (the unkeyed list: as before), or with
// rotate on each row's button in turn → the answer's bytes.
function event(session, rotate = false) {
  return new Promise((resolve, reject) => {
    if (session.closed) { reject(new Error(`live session closed: ${session.closed}`)); return; }
    const seq = ++session.seq;
    const key = rotate ? session.keys[session.next++ % session.keys.length] : session.key;
    session.waiting = { seq, resolve, reject };
    session.ws.send(JSON.stringify({ t: "event", seq, v: session.v, key, type: "click" }));
  });
}

// What a worker returns for a round trip that failed (its session was closed and reopened):
// not counted.
const FAILED = Symbol("failed");

async function loop(seconds, fn, count = 0) {
  const latencies = [];
  const end = performance.now() + seconds * 1000;
  while (count ? latencies.length < count : performance.now() < end) {
    const t0 = performance.now();
    if ((await fn()) === FAILED) continue;
    latencies.push(performance.now() - t0);
  }
  return latencies;
}

// Sessions the server closed under an event (e.g. 1011 "internal error": the server's log says
// why), by close code and reason. A browser would reconnect: so does the client, with a new
// session of the same view, and the round trip is not counted.
const closes = {};
const closesOf = () => ({ ...closes });
function closesSince(before) {
  const out = {};
  for (const [k, n] of Object.entries(closes)) if (n - (before[k] || 0) > 0) out[k] = n - (before[k] || 0);
  return out;
}

// A session that is reopened when the server closes it: { s, path, opts }.
function printCloses(part) {
  console.log(JSON.stringify({ name: `sessions closed under an event (${part}, warm-ups included)`, kind: "closes", part, closes }));
}
async function reopenable(path, opts) {
  return { s: await openSession(path, opts), path, opts };
}
async function eventOn(h, rotate = false) {
  try {
    return await event(h.s, rotate);
  } catch (e) {
    if (!h.s.closed) throw e;
    closes[h.s.closed] = (closes[h.s.closed] || 0) + 1;
    if (closes[h.s.closed] === 1) console.error(`warning: the server closed a live session of ${h.path} under an event (${h.s.closed}); reopening it`);
    const next = h.s.next;
    h.s = await openSession(h.path, h.opts);
    h.s.next = next;
    return FAILED;
  }
}

async function measure(name, seconds, workers) {
  const cpu0 = cpuSeconds(), t0 = performance.now(), closed0 = closesOf(), rq0 = runqueueSeconds();
  // BENCH_EVENTS=N: each worker makes N round trips instead of running SECONDS, and a warm-up
  // 20 (not a second's worth, which varies with the machine's speed): counts callgrind can
  // divide by (bench/README.md)
  const events = Number(process.env.BENCH_EVENTS || 0);
  const count = name === "warmup" && events ? 20 : events;
  const all = (await Promise.all(workers.map((fn) => loop(seconds, fn, count)))).flat();
  const wall = (performance.now() - t0) / 1000;
  const closed = closesSince(closed0);
  return { ...summary(name, all, wall, cpuSeconds() - cpu0), server_runqueue_s: +(runqueueSeconds() - rq0).toFixed(2),
    ...(Object.keys(closed).length ? { closed } : {}) };
}

// The <tr> rows of an html, as strings.
const rowsOf = (html) => html.split("<tr").slice(1);
function changedRows(before, after) {
  const x = rowsOf(before), y = rowsOf(after);
  if (x.length !== y.length) return [-1];
  const out = [];
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) out.push(i);
  return out;
}

// Once, loudly: a click on a row of /views/rows comes back as a diff that, applied, gives the
// html with that row (and only it) changed, the same html a resync sends in full.
async function validateRows() {
  const s = await openSession(ROWS, { diffs: true });
  const fail = (why) => { throw new Error(`keyed rows check failed: ${why}`); };
  if (s.keys.length !== 100) fail(`${s.keys.length} buttons in the first html, expected 100`);
  const before = s.html;
  s.next = 4; // the fifth row (t5, open)
  const answer = await event(s, true);
  if (s.frames.resync) fail("the client could not apply the answer (it asked for a resync)");
  if (answer.type !== "diff") console.error(`warning: the answer to a one-row click was a whole html frame (${answer.bytes} bytes), not a diff`);
  const changed = changedRows(before, s.html);
  if (changed.length !== 1 || changed[0] !== 4) fail(`rows changed: [${changed}], expected [4]`);
  const row = rowsOf(s.html)[4];
  if (!row.includes("<td>done</td>") || !row.includes(">Reopen</button>")) fail(`row 5 after the click: <tr${row}`);
  const held = s.html;
  const full = await new Promise((resolve) => {
    s.onFrame = (m) => { if (m.t === "html") resolve(m.html); };
    s.ws.send('{"t":"resync"}');
  });
  s.onFrame = null;
  if (full !== held) fail(`the html built from the diff differs from the server's (${held.length} vs ${full.length} units)`);
  s.ws.close();
  return { name: "keyed rows check", kind: "check", ok: true, answer: answer.type, answer_bytes: answer.bytes, html_units: full.length };
}

function bytesSummary(list) {
  return { frame_bytes_p50: percentile(list, 50), frame_bytes_max: list.length ? Math.max(...list) : null };
}

// The table: measure | value | target | met?, from the lines the modes printed.
function report(file) {
  const lines = readFileSync(file, "utf8").split("\n").filter((l) => l.startsWith("{")).map(JSON.parse);
  const one = (kind, view) => lines.find((l) => l.kind === kind && (view === undefined || l.view === view));
  const rows = [];
  const verdict = (ok) => (ok === null ? "not measured" : ok ? "met" : "MISSED");
  const ms = (x) => (x === null || x === undefined ? "–" : `${x.toFixed(x < 10 ? 2 : 1)} ms`);
  const row = (measure, value, target = "", met = "") => rows.push([measure, value, target, met]);

  const action = one("action"), unkeyed = one("unkeyed"), keyed = one("keyed");
  if (action) {
    row("action call `POST /actions/tasks.list` (100 rows): p50 / p99; server CPU per call",
      `${ms(action.p50_ms)} / ${ms(action.p99_ms)}; ${action.cpu_ms_per_op.toFixed(3)} ms`);
  }
  if (action && unkeyed) {
    const ratio = action.per_core_s / unkeyed.per_core_s;
    row("unkeyed 100-row list (`/`, whole html back): event p50 / p99; server CPU per event",
      `${ms(unkeyed.p50_ms)} / ${ms(unkeyed.p99_ms)}; ${unkeyed.cpu_ms_per_op.toFixed(3)} ms`);
    row("unkeyed: event / action server CPU (issue 11, the historical baseline)", `${ratio.toFixed(1)}x`, "≤ 2x", verdict(ratio <= 2));
  }
  const check = one("check");
  if (check) {
    row("keyed rows check: a click's answer, applied to the html held, is the server's html with that one row changed",
      `${check.answer} of ${check.answer_bytes} B`, "a diff", verdict(check.answer === "diff"));
  }
  if (keyed) {
    row("keyed rows (`/views/rows`, `?diffs=1`, one row changes): event p50 / p99; server CPU per event",
      `${ms(keyed.p50_ms)} / ${ms(keyed.p99_ms)}; ${keyed.cpu_ms_per_op.toFixed(3)} ms`);
    if (action) {
      const ratio = action.per_core_s / keyed.per_core_s;
      row("keyed rows: event / action server CPU", `${ratio.toFixed(1)}x`, "≤ 2x", verdict(ratio <= 2));
    }
    row("keyed rows: the update frame (the answer to the event, JSON bytes): median / max",
      `${keyed.frame_bytes_p50} / ${keyed.frame_bytes_max} B`, "≤ 2048 B", verdict(keyed.frame_bytes_max <= 2048));
    const f = keyed.frames;
    row("keyed rows: frames received (diffs applied / html / resyncs asked for); bytes received per event, all frames",
      `${f.diff} / ${f.html} / ${f.resync}; ${keyed.bytes_in_per_event} B`, "no html, no resync", verdict(f.html === 0 && f.resync === 0));
  }
  const setup = one("fanout-setup"), fan = lines.filter((l) => l.kind === "fanout");
  if (setup) {
    const complete = fan.filter((r) => r.last_ms !== null), lasts = complete.map((r) => r.last_ms);
    const all = fan.length > 0 && complete.length === fan.length;
    const worst = lasts.length ? Math.max(...lasts) : null;
    row(`fan-out: POST rows.rename → every one of ${setup.sessions} keyed sessions has its push: median / max of ${fan.length} rounds`
      + ` (from when the server was quiet, ${setup.settle_s} s after they opened)`
      + (all ? "" : `, ${fan.length - complete.length} incomplete`),
      `${ms(percentile(lasts, 50))} / ${all ? ms(worst) : "incomplete"}`, "≤ 300 ms", all ? verdict(worst <= 300) : "MISSED");
    const bytes = fan.flatMap((r) => [r.frame_bytes_p50, r.frame_bytes_max]).filter((x) => x !== null);
    const types = fan.reduce((t, r) => ({ html: t.html + r.frames.html, diff: t.diff + r.frames.diff, resync: t.resync + r.resyncs }),
      { html: 0, diff: 0, resync: 0 });
    row("fan-out: push frames (diffs / html / resyncs); bytes, median of the rounds' medians / max",
      `${types.diff} / ${types.html} / ${types.resync}; ${percentile(fan.map((r) => r.frame_bytes_p50), 50)} / ${bytes.length ? Math.max(...bytes) : "–"} B`);
    const cpu = fan.map((r) => r.server_cpu_ms);
    row("fan-out: server CPU per round, median (per session)",
      `${percentile(cpu, 50)} ms (${(percentile(cpu, 50) / setup.sessions).toFixed(2)} ms)`);
    const mem = one("fanout-memory");
    if (mem) {
      row(`fan-out: server memory, sessions open → after the rounds: RSS / Lua`,
        `${Math.round(mem.rss_before_kib / 1024)} → ${Math.round(mem.rss_after_kib / 1024)} MiB / `
        + `${Math.round(mem.lua_before_kib / 1024)} → ${Math.round(mem.lua_after_kib / 1024)} MiB`);
    }
  }

  const targets = { "/views/small": 50, "/": 50, "/views/rows": 64 };
  for (const mem of lines.filter((l) => l.kind === "memory")) {
    const t = targets[mem.view];
    row(`${mem.sessions} open sessions of \`${mem.view}\`${mem.view === ROWS ? " (\`?diffs=1\`)" : ""}, just opened: RSS / Lua per session`,
      `${mem.open_rss_per_session_kib} / ${mem.open_lua_per_session_kib} KiB`);
    row(`the same once quiet (${mem.hibernated} hibernated after ${mem.quiet_s} s): RSS / Lua per session`,
      `${mem.per_session_kib} / ${mem.lua_per_session_kib} KiB`);
    row(`then once the server's idle collection is done (${mem.idle_collection_s} s later): RSS / Lua per session; Lua after a full collection`,
      `${mem.idle_rss_per_session_kib} / ${mem.idle_lua_per_session_kib} KiB; ${mem.collected_lua_per_session_kib} KiB`,
      t ? `≤ ${t} KiB` : "", t ? verdict(mem.idle_lua_per_session_kib <= t) + " (Lua)" : "");
    const idle = one("idle", mem.view), loaded = one("loaded", mem.view);
    if (idle && loaded) {
      const rows_ = mem.view === ROWS;
      row(`a probe's event round trip (${rows_ ? "a keyed rows session" : "a session of `/`"}) with them open: p50 / p99 (none open: ${ms(idle.p50_ms)} / ${ms(idle.p99_ms)})`,
        `${ms(loaded.p50_ms)} / ${ms(loaded.p99_ms)}`, rows_ ? "p99 < 20 ms" : "", rows_ ? verdict(loaded.p99_ms < 20) : "");
    }
  }

  const closed = lines.filter((l) => l.kind === "closes");
  if (closed.length) {
    const count = (l) => Object.values(l.closes).reduce((x, y) => x + y, 0);
    const n = closed.reduce((sum, l) => sum + count(l), 0);
    row("live sessions the server closed under an event, warm-ups included (reopened, the round trip not counted)",
      n ? closed.filter(count).map((l) => `${l.part}: ${JSON.stringify(l.closes)}`).join("; ") : "0", "0", verdict(n === 0));
  }

  const timed = lines.filter((l) => l.server_runqueue_s !== undefined);
  if (timed.length) {
    const rq = timed.reduce((x, l) => x + l.server_runqueue_s, 0), cpu = timed.reduce((x, l) => x + l.server_cpu_s, 0);
    row("the server waiting for its core (another process there) during the timed round trips, against its CPU time",
      `${rq.toFixed(2)} s / ${cpu.toFixed(2)} s`, "small (a quiet machine)", "");
  }

  console.log("\n| measure | value | target | met? |\n|---|---|---|---|");
  for (const r of rows) console.log(`| ${r.join(" | ")} |`);
  if (fan.length) {
    console.log("\nfan-out rounds (ms from the POST):\n\n| round | row | delivered | POST answered | first | median | last | push bytes p50 / max | server CPU | server waiting for a CPU |\n|---|---|---|---|---|---|---|---|---|---|");
    for (const r of fan) {
      console.log(`| ${r.round} | ${r.id} | ${r.delivered}/${r.sessions} | ${r.post_ms} | ${r.first_ms ?? "–"} | ${r.median_ms ?? "–"} | `
        + `${r.last_ms ?? `> ${r.timeout_ms}`} | ${r.frame_bytes_p50} / ${r.frame_bytes_max} | ${r.server_cpu_ms} ms | ${r.server_runqueue_ms} ms |`);
    }
  }
}

if (mode === "roundtrip") {
  const seconds = Number(a), connections = Number(b);
  let actionBytes = 0;
  const call = async () => {
    const res = await request("POST", "/actions/tasks.list", "{}");
    if (res.status !== 200) throw new Error(`tasks.list answered ${res.status}`);
    actionBytes = Buffer.byteLength(res.body);
  };
  console.log(JSON.stringify(await validateRows()));
  const sessions = [], keyed = [];
  for (let i = 0; i < connections; i++) sessions.push(await reopenable("/"));
  for (let i = 0; i < connections; i++) keyed.push(await reopenable(ROWS, { diffs: true }));
  const bytes = [];
  const keyedEvent = (h) => async () => {
    const answer = await eventOn(h, true);
    if (answer === FAILED) return answer;
    bytes.push(answer.bytes);
  };
  // warm-up, of the kinds timed (BENCH_KINDS, below): another kind's would be in a profile of one
  const kinds = process.env.BENCH_KINDS ? process.env.BENCH_KINDS.split(/[ ,]/) : null;
  const timed = (kind) => !kinds || kinds.includes(kind);
  if (timed("unkeyed")) await measure("warmup", 1, sessions.map((h) => () => eventOn(h)));
  if (timed("keyed")) await measure("warmup", 1, keyed.map(keyedEvent));
  if (timed("action")) await measure("warmup", 1, sessions.map(() => call));
  bytes.length = 0;
  for (const k of keyed) Object.assign(k.s, { frames: { html: 0, diff: 0, resync: 0 }, bytesIn: 0 });
  for (const [name, workers, extra] of [
    ["action call (POST /actions/tasks.list, 100 rows)", sessions.map(() => call), () => ({ kind: "action", answer_bytes: actionBytes })],
    ["live event (click → 100-row list html)", sessions.map((h) => () => eventOn(h)), () => ({ kind: "unkeyed" })],
    ["live event, keyed rows, ?diffs=1 (click → one row changes)", keyed.map(keyedEvent), () => {
      // frames received (diffs applied, html, resyncs asked for); bytes received per event,
      // all frames counted (a resync's html too; sessions reopened after a close not counted)
      const frames = { html: 0, diff: 0, resync: 0 };
      let bytesIn = 0;
      for (const k of keyed) {
        for (const t in frames) frames[t] += k.s.frames[t];
        bytesIn += k.s.bytesIn;
      }
      return { kind: "keyed", ...bytesSummary(bytes), frames, bytes_in_per_event: Math.round(bytesIn / bytes.length) };
    }],
  ]) {
    // BENCH_KINDS="keyed" (action, unkeyed, keyed): only those timed (a profile of one of them)
    if (!timed(extra().kind)) continue;
    console.log(JSON.stringify({ ...(await measure(name, seconds, workers)), ...extra() }));
  }
  for (const h of [...sessions, ...keyed]) h.s.ws.close();
  printCloses("roundtrip");
  agent.destroy();
} else if (mode === "scale") {
  const count = Number(a), seconds = Number(b), viewPath = c;
  const rows = viewPath === ROWS;
  // the keyed view's probe is a session of it (diffs, a row clicked in turn); otherwise as before
  const probe = rows ? await reopenable(ROWS, { diffs: true }) : await reopenable("/");
  const probeEvent = () => eventOn(probe, rows);
  await measure("warmup", 1, [probeEvent]);
  const idle = await measure(`event round trip${rows ? " (keyed rows, diffs)" : ""}, no other session open`, seconds, [probeEvent]);
  const rss0 = rssKiB(), lua0 = await luaKiB();
  const sessions = [];
  const batch = 200, t0 = performance.now();
  for (let i = 0; i < count; i += batch) {
    const n = Math.min(batch, count - i);
    sessions.push(...(await Promise.all(Array.from({ length: n }, () => openSession(viewPath, { diffs: rows, keep: false })))));
  }
  const openS = (performance.now() - t0) / 1000;
  await sleep(2000);
  const rssOpen = rssKiB(), luaOpen = await luaKiB();
  // Quiet sessions hibernate after 15 s (README, Live views): memory once they all have (or 40 s)
  const hibernations = async () => Number((await request("GET", "/__clank/metrics")).body
    .match(/^clank_live_hibernations_total (\d+)$/m)?.[1] ?? 0);
  const quietT0 = performance.now();
  while ((await hibernations()) < count && performance.now() - quietT0 < 40000) await sleep(500);
  const rss1 = rssKiB(), lua1 = await luaKiB();
  // then what the server's own collection in idle time leaves (runtime/host/idle_gc.c): once
  // it completed a cycle that started after the last hibernation, at most 180 s
  const idleCycles = async () => Number((await request("GET", "/__clank/metrics")).body
    .match(/^clank_lua_idle_collections_total (\d+)$/m)?.[1] ?? 0);
  const cycles0 = await idleCycles(), idleT0 = performance.now();
  while ((await idleCycles()) === cycles0 && performance.now() - idleT0 < 180000) await sleep(1000);
  const idle_collection_s = +((performance.now() - idleT0) / 1000).toFixed(1);
  const luaIdle = await luaKiB(), rssIdle = rssKiB();
  const collected0 = Number((await request("GET", "/bench/gc")).body);
  console.log(JSON.stringify({ ...idle, view: viewPath, kind: "idle" }));
  console.log(JSON.stringify({
    name: `${count} open live sessions of ${viewPath}${rows ? " (?diffs=1)" : ""}`, view: viewPath, kind: "memory", sessions: count,
    open_s: +openS.toFixed(1), rss_before_kib: rss0, rss_after_kib: rss1, per_session_kib: +((rss1 - rss0) / count).toFixed(1),
    hibernated: await hibernations(), quiet_s: +((performance.now() - quietT0) / 1000).toFixed(1),
    collected_lua_per_session_kib: lua0 === null ? null : +((collected0 - lua0) / count).toFixed(1),
    open_rss_per_session_kib: +((rssOpen - rss0) / count).toFixed(1),
    open_lua_per_session_kib: lua0 === null ? null : +((luaOpen - lua0) / count).toFixed(1),
    lua_before_kib: lua0, lua_after_kib: lua1, lua_per_session_kib: lua0 === null ? null : +((lua1 - lua0) / count).toFixed(1),
    idle_lua_per_session_kib: lua0 === null ? null : +((luaIdle - lua0) / count).toFixed(1), idle_collection_s,
    idle_rss_per_session_kib: +((rssIdle - rss0) / count).toFixed(1),
  }));
  console.log(JSON.stringify({ ...(await measure(`event round trip, ${count} sessions of ${viewPath} open (pinged)`, seconds,
    [probeEvent])), view: viewPath, kind: "loaded" }));
  for (const s of sessions) s.ws.terminate();
  probe.s.ws.close();
  printCloses(`scale ${viewPath}`);
  agent.destroy();
} else if (mode === "fanout") {
  // SESSIONS sessions of /views/rows (?diffs=1) watch rows:bench; each round POSTs rows.rename
  // of one task (it publishes rows:bench): the time from sending the POST until every session
  // has a push (seq 0) of a newer version; then every session's html must show the new title.
  const count = Number(a), rounds = Number(b), timeoutMs = Number(c);
  const sessions = [];
  const t0 = performance.now();
  for (let i = 0; i < count; i += 100) {
    const n = Math.min(100, count - i);
    sessions.push(...(await Promise.all(Array.from({ length: n }, () => openSession(ROWS, { diffs: true })))));
  }
  const openS = (performance.now() - t0) / 1000, settleS = await settle();
  const rss0 = rssKiB(), lua0 = await luaKiB();
  console.log(JSON.stringify({ name: "fan-out setup", kind: "fanout-setup", sessions: count,
    open_s: +openS.toFixed(1), settle_s: +settleS.toFixed(1), html_units: sessions[0].html.length, rss_kib: rss0, lua_kib: lua0 }));
  let nothing = 0;
  for (let round = 1; round <= rounds; round++) {
    const id = `t${((round * 37) % 100) + 1}`;
    const before0 = sessions[0].html;
    let start = null, pending = sessions.length, finished;
    const done = new Promise((resolve) => { finished = resolve; });
    const bytes = [], types = { html: 0, diff: 0 };
    for (const s of sessions) {
      const before = s.v;
      s.arrived = null;
      s.frames.resync = 0;
      s.onFrame = (m, n) => {
        if (s.arrived !== null || m.seq !== 0 || m.v <= before || start === null) return;
        s.arrived = performance.now() - start;
        bytes.push(n);
        types[m.t]++;
        if (--pending === 0) finished();
      };
    }
    const cpu0 = cpuSeconds(), rq0 = runqueueSeconds();
    start = performance.now();
    const res = await request("POST", "/actions/rows.rename", JSON.stringify({ id }));
    const postMs = performance.now() - start;
    if (res.status !== 200) throw new Error(`rows.rename answered ${res.status}: ${res.body}`);
    const { title } = JSON.parse(res.body).output;
    let timer;
    await Promise.race([done, new Promise((resolve) => { timer = setTimeout(resolve, timeoutMs); })]);
    clearTimeout(timer);
    const cpu = cpuSeconds() - cpu0, runqueue = runqueueSeconds() - rq0;
    for (const s of sessions) s.onFrame = null;
    const arrivals = sessions.map((s) => s.arrived).filter((x) => x !== null);
    // every session that got its push shows the new title, in that row only
    const stale = sessions.filter((s) => s.arrived !== null && !s.html.includes(`>${title}</td>`)).length;
    const resyncs = sessions.reduce((n, s) => n + s.frames.resync, 0);
    if (round === 1 && sessions[0].arrived !== null) {
      const changed = changedRows(before0, sessions[0].html);
      if (changed.length !== 1) throw new Error(`fan-out: the push changed rows [${changed}], expected one (${id})`);
    }
    console.log(JSON.stringify({
      name: "fan-out round", kind: "fanout", round, id, sessions: count, delivered: arrivals.length,
      post_ms: round3(postMs), first_ms: round3(arrivals.length ? Math.min(...arrivals) : null),
      median_ms: round3(percentile(arrivals, 50)), last_ms: pending === 0 ? round3(Math.max(...arrivals)) : null,
      timeout_ms: timeoutMs, server_cpu_ms: Math.round(cpu * 1000), server_runqueue_ms: Math.round(runqueue * 1000), ...bytesSummary(bytes), frames: types,
      resyncs, stale,
    }));
    if (stale) throw new Error(`fan-out: ${stale} sessions got a push without the new title ${title}`);
    nothing = arrivals.length === 0 ? nothing + 1 : 0;
    if (nothing === 2) throw new Error(`fan-out: no session got a push in two rounds of ${timeoutMs} ms`);
    await sleep(300); // a session pushes at most every 50 ms (PUSH_MS): let the last ones go out
  }
  console.log(JSON.stringify({ name: "fan-out memory", kind: "fanout-memory", rss_before_kib: rss0, rss_after_kib: rssKiB(),
    lua_before_kib: lua0, lua_after_kib: await luaKiB() }));
  for (const s of sessions) s.ws.terminate();
  agent.destroy();
} else if (mode === "report") {
  report(a);
} else {
  console.error("usage: bench.mjs BASE_URL PID roundtrip SECONDS CONNECTIONS | scale SESSIONS SECONDS VIEW | fanout SESSIONS ROUNDS TIMEOUT_MS");
  process.exit(2);
}
