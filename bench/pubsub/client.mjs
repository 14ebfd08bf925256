// bench/pubsub.sh's client (Node, ws from bench/node_modules, playwright-core from
// spec/browser/node_modules). One part per run; prints one JSON object per line on stdout,
// which `report` turns into the tables.
//   node client.mjs cost   BASE N ROUNDS
//   node client.mjs fanout PAGE_BASE PUBLISH_BASE PIDS WORKER_PIDS SESSIONS ROWS ROUNDS TIMEOUT_MS
//   node client.mjs dom    PAGE_BASE PUBLISH_BASE WORKER_PIDS ROWS ROUNDS TIMEOUT_MS GAP_MS CHROMIUM
//   node client.mjs report FILE SCALE
// PAGE_BASE serves the pages and live sessions, PUBLISH_BASE the actions that publish (the same
// server, or instance B). PIDS: the server processes whose CPU time is read (comma-separated).
// WORKERS: the --workers count (2: each session's worker is told from its ID, each publish's
// from GET /bench/pid on the connection that posts it).
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import WebSocket from 'ws';

const [mode, ...args] = process.argv.slice(2);
const now = () => performance.timeOrigin + performance.now(); // ms, comparable across threads
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const out = (o) => console.log(JSON.stringify(o));
const CONFIRMED = { 'x-clank-confirmation': 'confirmed' }; // tasks.* ask for it

function percentile(values, p) {
  if (values.length === 0) return null;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
const median = (values) => percentile(values, 50);
const round3 = (x) => (x === null || x === undefined ? null : +x.toFixed(3));

// ---- HTTP ----

function request(base, method, path, { body, headers = {}, agent } = {}) {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: url.hostname, port: url.port, method, path, agent,
      headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.setTimeout(30000, () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

async function action(base, name, input, agent) {
  const res = await request(base, 'POST', `/actions/${name}`, { body: input, headers: CONFIRMED, agent });
  if (res.status !== 200) throw new Error(`${name} answered ${res.status}: ${res.text}`);
  return JSON.parse(res.text).output;
}

// Seeds the (fresh) database with `rows` tasks.
async function seed(base, rows) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < rows; i++) {
    await action(base, 'tasks.create', { title: `seeded task ${i + 1}`, priority: 'normal', estimate: i, tags: ['bench'] }, agent);
  }
  agent.destroy();
}

// A publish: a fresh connection, GET /bench/pid on it (which process serves it: with --workers
// the kernel picks), then the action on the same connection, timed from just before it is sent.
// onSent(t0) is called right before the POST goes out.
async function publish(base, name, input, onSent) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const { pid } = JSON.parse((await request(base, 'GET', '/bench/pid', { agent })).text);
    const t0 = now();
    onSent(t0);
    const output = await action(base, name, input, agent);
    return { pid, t0, answered: now(), output };
  } finally {
    agent.destroy();
  }
}

// The worker (0 .. n-1) owning a session ID with --workers n: FNV-1a 64 of its bytes mod n, as
// lua/clank/live/token.lua's owner() and runtime/host/handoff.c compute it.
function owner(id, n) {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(id)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return Number(h % BigInt(n));
}

const sessionOf = (html) => {
  const m = html.match(/data-clank-session="([^"]+)"/);
  if (!m) throw new Error(`no session in the page: ${html.slice(0, 300)}`);
  return m[1];
};

function cpuMs(pids) {
  let ticks = 0;
  for (const pid of pids) {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    ticks += Number(fields[11]) + Number(fields[12]); // utime, stime (clock ticks of 10 ms)
  }
  return ticks * 10;
}

// Lua memory (the metric, summed over the workers by the master) and RSS of the processes, in MB.
async function memory(base, pids) {
  const m = (await request(base, 'GET', '/__clank/metrics')).text.match(/^clank_lua_memory_bytes (\d+)$/m);
  let rss = 0;
  for (const pid of pids) rss += Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/)[1]);
  return { lua_mb: m ? Math.round(Number(m[1]) / 1e6) : null, rss_mb: Math.round(rss / 1000) };
}

// WORKER_PIDS ("-" or pids in index order) → { workers, workerOf(pid) → index or -1 }
function workersOf(text) {
  const list = text === '-' ? [] : text.split(',').map(Number);
  return { workers: Math.max(1, list.length), workerOf: (pid) => (list.length ? list.indexOf(pid) : 0) };
}

// ---- 1. publish cost ----

async function cost([base, nText, roundsText]) {
  const n = Number(nText), rounds = Number(roundsText);
  const kinds = ['empty', 'publish', 'empty-payload', 'publish-payload'];
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const published = async () => {
    const m = (await request(base, 'GET', '/__clank/metrics', { agent })).text
      .match(/^clank_pubsub_published_total (\d+)$/m);
    return m ? Number(m[1]) : NaN;
  };
  const runs = Object.fromEntries(kinds.map((k) => [k, []]));
  const before = await published();
  for (let r = 0; r < rounds + 1; r++) { // the first round warms up
    for (let i = 0; i < kinds.length; i++) {
      const kind = kinds[(i + r) % kinds.length]; // the order turns from round to round
      const res = await request(base, 'GET', `/bench/publish?kind=${kind}&n=${n}`, { agent });
      if (res.status !== 200) throw new Error(`/bench/publish answered ${res.status}: ${res.text}`);
      if (r > 0) runs[kind].push((JSON.parse(res.text).seconds * 1e9) / n);
    }
  }
  const counted = (await published()) - before;
  agent.destroy();
  const ns = Object.fromEntries(kinds.map((k) => [k, median(runs[k])]));
  out({
    part: 'cost', n, rounds, ns_per_call: ns,
    publish_ns: round3(ns.publish - ns.empty), publish_payload_ns: round3(ns['publish-payload'] - ns['empty-payload']),
    counted, expected: 2 * n * (rounds + 1),
  });
}

// ---- 2. fan-out ----

// The tail of a live frame (canonical JSON, keys sorted: html first): seq, t, v without parsing
// the html; anything else is parsed.
const TAIL = /"seq":(\d+),"t":"(\w+)","v":(\d+)\}$/;
function frameOf(text) {
  const m = TAIL.exec(text.slice(-64));
  if (m) return { seq: Number(m[1]), t: m[2], v: Number(m[3]) };
  try { return JSON.parse(text); } catch { return { t: 'unparsable' }; }
}

// A live session: the page for its ID, then the WebSocket and its first html.
async function openSession(base, agent, workers) {
  const page = await request(base, 'GET', '/', { agent });
  if (page.status !== 200) throw new Error(`GET / answered ${page.status}`);
  const id = sessionOf(page.text);
  const url = new URL(base);
  const ws = new WebSocket(`ws://${url.host}/__clank/sessions/${encodeURIComponent(id)}/live`,
    { origin: url.origin, perMessageDeflate: false });
  const s = { id, ws, v: 0, owner: workers > 1 ? owner(id, workers) : 0, onFrame: null, errors: 0, first: null };
  ws.on('message', (data) => {
    const text = data.toString();
    const m = frameOf(text);
    if (m.t !== 'html') { s.errors++; return; }
    s.v = m.v;
    if (s.first === null) s.first = text;
    if (s.onFrame) s.onFrame(text, m);
  });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`session ${id}: no first html within 30 s`)), 30000);
    ws.once('message', () => { clearTimeout(timer); resolve(); });
    ws.once('close', (code, reason) => reject(new Error(`session ${id}: closed ${code} ${reason} before its first html`)));
    ws.once('error', reject);
    ws.once('unexpected-response', (_, res) => reject(new Error(`live connection answered ${res.statusCode}`)));
  });
  return s;
}

function startHammer(base) {
  const samples = new SharedArrayBuffer(8 * 2 * (1 << 21));
  const count = new SharedArrayBuffer(8);
  const worker = new Worker(new URL('./health.mjs', import.meta.url), { workerData: { base, samples, count } });
  worker.on('error', (e) => { console.error(`health hammer: ${e.stack || e}`); process.exit(1); });
  const pairs = new Float64Array(samples), state = new Int32Array(count);
  return {
    // latencies of the requests started within [from, to]
    between(from, to) {
      const lat = [];
      const n = Atomics.load(state, 0);
      for (let i = 0; i < n; i++) if (pairs[2 * i] >= from && pairs[2 * i] <= to) lat.push(pairs[2 * i + 1]);
      return lat;
    },
    async stop() {
      Atomics.store(state, 1, 1);
      await new Promise((resolve) => worker.once('exit', resolve));
    },
  };
}

// in a frame's JSON text, where the quotes are escaped
const countRows = (frame) => (frame.match(/class=\\"task-title\\"/g) || []).length;

async function fanout([pageBase, pubBase, pidsText, workerPidsText, sessionsText, rowsText, roundsText, timeoutText]) {
  const pids = pidsText.split(',').map(Number);
  const count = Number(sessionsText), rows = Number(rowsText), rounds = Number(roundsText);
  const timeoutMs = Number(timeoutText);
  const { workers, workerOf } = workersOf(workerPidsText);
  await seed(pubBase, rows);

  const t0 = now();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const sessions = [];
  for (let i = 0; i < count; i += 100) {
    const n = Math.min(100, count - i);
    sessions.push(...(await Promise.all(Array.from({ length: n }, () => openSession(pageBase, agent, workers)))));
  }
  agent.destroy();
  const shown = countRows(sessions[0].first);
  const perWorker = Array.from({ length: workers }, (_, w) => sessions.filter((s) => s.owner === w).length);
  out({ part: 'fanout-setup', sessions: sessions.length, rows: shown, open_s: round3((now() - t0) / 1000),
    frame_bytes: sessions[0].first.length,
    per_worker: perWorker, worker_pids: workerPidsText });
  if (shown !== rows) throw new Error(`the list shows ${shown} rows, expected ${rows}`);

  const memoryOpen = await memory(pageBase, pids);
  const hammer = startHammer(pageBase);
  await sleep(1000);
  const idle = hammer.between(now() - 1000, now());
  out({ part: 'health-idle', n: idle.length, p50_ms: round3(median(idle)), p99_ms: round3(percentile(idle, 99)) });

  let created = null, nothing = 0;
  for (let round = 1; round <= rounds; round++) {
    // odd rounds add a task (the list has rows + 1), even ones archive it (back to rows)
    const kind = created ? 'archive' : 'create';
    const title = created ? created.title : `fan-out ${round} ${Math.random().toString(36).slice(2, 8)}`;
    let start = null, pending = sessions.length, finished;
    const done = new Promise((resolve) => { finished = resolve; });
    for (const s of sessions) {
      const before = s.v;
      s.arrived = null;
      s.onFrame = (text, m) => {
        if (s.arrived !== null || m.seq !== 0 || m.v <= before || start === null) return;
        if (text.includes(title) !== (kind === 'create')) return; // not (yet) the change
        s.arrived = now() - start;
        if (--pending === 0) finished();
      };
    }
    const cpu0 = cpuMs(pids), client0 = process.cpuUsage();
    const sent = await publish(pubBase, kind === 'create' ? 'tasks.create' : 'tasks.archive',
      kind === 'create' ? { title, estimate: null, tags: ['fan-out'] } : { id: created.id }, (t) => { start = t; });
    let timer;
    await Promise.race([done, new Promise((resolve) => { timer = setTimeout(resolve, timeoutMs); })]);
    clearTimeout(timer);
    const end = now();
    const cpu = cpuMs(pids) - cpu0, client = process.cpuUsage(client0);
    const arrivals = sessions.map((s) => s.arrived).filter((a) => a !== null);
    const health = hammer.between(start, pending === 0 ? start + Math.max(...arrivals) : end);
    const missing = Array.from({ length: workers }, (_, w) => sessions.filter((s) => s.owner === w && s.arrived === null).length);
    out({
      part: 'fanout', round, kind, sessions: sessions.length, delivered: arrivals.length,
      post_ms: round3(sent.answered - sent.t0), first_ms: round3(arrivals.length ? Math.min(...arrivals) : null),
      median_ms: round3(median(arrivals)), last_ms: pending === 0 ? round3(Math.max(...arrivals)) : null,
      timeout_ms: timeoutMs, health_n: health.length, health_p50_ms: round3(median(health)),
      health_p99_ms: round3(percentile(health, 99)), health_max_ms: round3(health.length ? Math.max(...health) : null),
      server_cpu_ms: cpu, client_cpu_ms: Math.round((client.user + client.system) / 1000),
      publish_pid: sent.pid, missing_per_worker: missing,
      publish_worker: workerOf(sent.pid),
    });
    for (const s of sessions) s.onFrame = null;
    created = kind === 'create' ? { title, id: sent.output.id } : null;
    nothing = arrivals.length === 0 ? nothing + 1 : 0;
    if (nothing === 2) {
      out({ part: 'gave-up', what: 'fanout', message: `no session got a push in two rounds of ${timeoutMs} ms: nothing is delivered from ${pubBase} to the sessions on ${pageBase}` });
      break;
    }
    await sleep(300); // pushes of a session are at least 50 ms apart; let the last ones go out
  }
  await hammer.stop();
  out({ part: 'fanout-memory', sessions: sessions.length, open: memoryOpen, end: await memory(pageBase, pids) });
  for (const s of sessions) s.ws.terminate();
}

// ---- 3. publish → DOM in a browser page ----

async function dom([pageBase, pubBase, workerPidsText, rowsText, roundsText, timeoutText, gapText, chromiumPath]) {
  const rows = Number(rowsText), rounds = Number(roundsText), timeoutMs = Number(timeoutText), gapMs = Number(gapText);
  const { workers, workerOf } = workersOf(workerPidsText);
  const require = createRequire(new URL('../../spec/browser/package.json', import.meta.url));
  const { chromium } = require('playwright-core');
  await seed(pubBase, rows);

  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage();
    const waits = new Map(); // "title+" (shown) or "title-" (gone) → resolve(t)
    await page.exposeFunction('__benchSeen', (key) => {
      const w = waits.get(key);
      if (w) { waits.delete(key); w(now()); }
    });
    // In the page: a MutationObserver checks, after each batch of changes the client's patch
    // makes, whether the awaited title is shown (or gone), and reports it once.
    await page.addInitScript(() => {
      let wanted = null;
      const check = () => {
        if (!wanted) return;
        const shown = [...document.querySelectorAll('.task-title')].some((e) => e.textContent === wanted.title);
        if (shown === wanted.shown) {
          const key = wanted.title + (wanted.shown ? '+' : '-');
          wanted = null;
          window.__benchSeen(key);
        }
      };
      window.__benchWant = (title, shown) => { wanted = { title, shown }; check(); };
      new MutationObserver(check).observe(document, { subtree: true, childList: true, characterData: true });
    });
    await page.goto(pageBase);
    await page.waitForSelector('[data-clank-root][data-clank-status="open"]', { timeout: 15000 });
    const id = await page.getAttribute('[data-clank-root]', 'data-clank-session');
    const shown = await page.locator('.task-title').count();
    const pageWorker = workers > 1 ? owner(id, workers) : 0;
    out({ part: 'dom-setup', rows: shown, page_worker: pageWorker, worker_pids: workerPidsText });
    if (shown !== rows) throw new Error(`the page shows ${shown} rows, expected ${rows}`);

    // one change: arm the page, publish, wait for the page's report (or the timeout)
    // measured false: published and waited for all the same, not counted (the archive of a row
    // the page never showed: "gone" would hold at once)
    const change = async (kind, title, name, input, measured = true) => {
      const key = title + (kind === 'create' ? '+' : '-');
      const seen = new Promise((resolve) => waits.set(key, resolve));
      await page.evaluate(([t, s]) => window.__benchWant(t, s), [title, kind === 'create']);
      const sent = await publish(pubBase, name, input, () => {});
      let timer;
      const t1 = await Promise.race([seen, new Promise((resolve) => { timer = setTimeout(() => resolve(null), timeoutMs); })]);
      clearTimeout(timer);
      waits.delete(key);
      await sleep(gapMs); // a session pushes at most every 50 ms: the next change waits for none
      if (measured) {
        out({ part: 'dom', kind, ms: t1 === null ? null : round3(t1 - sent.t0), post_ms: round3(sent.answered - sent.t0),
          same_worker: workers > 1 ? workerOf(sent.pid) === pageWorker : null, timeout_ms: timeoutMs });
      }
      return { sent, seen: t1 !== null };
    };
    let seenAny = false, lost = 0;
    for (let i = 1; i <= rounds; i++) {
      const title = `dom ${i} ${Math.random().toString(36).slice(2, 8)}`;
      const c = await change('create', title, 'tasks.create', { title, estimate: null, tags: ['dom'] });
      const a = await change('archive', title, 'tasks.archive', { id: c.sent.output.id }, c.seen);
      seenAny ||= c.seen;
      lost += c.seen ? (a.seen ? 0 : 1) : 1; // an archive is measured only after its row was seen
      if (!seenAny && lost >= 6) {
        out({ part: 'gave-up', what: 'dom', message: `the page on ${pageBase} saw none of ${lost} changes published to ${pubBase} within ${timeoutMs} ms each` });
        break;
      }
    }
  } finally {
    await browser.close();
  }
}

// ---- the tables ----

function report([file, scale]) {
  const lines = readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map(JSON.parse);
  const of = (part) => lines.filter((l) => l.part === part);
  const rows = [];
  const verdict = (value, target) => (value === null || value === undefined ? 'not measured' : value < target ? 'met' : 'MISSED');
  const ms = (x) => (x === null || x === undefined ? '–' : `${x.toFixed(x < 10 ? 2 : 1)} ms`);

  const [c] = of('cost');
  if (c) {
    const ns = (x) => `${Math.round(x)} ns`;
    rows.push([`publish, nobody listening: \`clank.publish("bench:none")\` − empty call (${ns(c.ns_per_call.publish)} − ${ns(c.ns_per_call.empty)})`,
      ns(c.publish_ns), '< 2 µs', verdict(c.publish_ns, 2000)]);
    rows.push([`the same with \`{ n = i }\` − empty call with it (${ns(c.ns_per_call['publish-payload'])} − ${ns(c.ns_per_call['empty-payload'])})`,
      ns(c.publish_payload_ns), '< 2 µs', verdict(c.publish_payload_ns, 2000)]);
    if (c.counted !== c.expected) rows.push(['clank_pubsub_published_total grew by', `${c.counted}`, `${c.expected}`, 'MISSED']);
  }

  const setup = of('fanout-setup')[0];
  const rounds = of('fanout');
  if (setup) {
    const complete = rounds.filter((r) => r.last_ms !== null);
    const lasts = complete.map((r) => r.last_ms);
    const p99s = rounds.filter((r) => r.health_p99_ms !== null).map((r) => r.health_p99_ms);
    const p50s = rounds.filter((r) => r.health_p50_ms !== null).map((r) => r.health_p50_ms);
    const worst = (v) => (v.length ? Math.max(...v) : null);
    const all = rounds.length === complete.length && rounds.length > 0;
    const n = `${setup.sessions} sessions × ${setup.rows} rows`;
    rows.push([`fan-out, publish → every session's push (${n}): median / worst of ${rounds.length} rounds`
      + (all ? '' : `; ${rounds.length - complete.length} round(s) incomplete`),
      `${ms(median(lasts))} / ${all ? ms(worst(lasts)) : 'incomplete'}`, '< 1 s', all ? verdict(worst(lasts), 1000) : 'MISSED']);
    rows.push(['GET /__clank/health during the fan-out, p99: median / worst round',
      `${ms(median(p99s))} / ${ms(worst(p99s))}`, '< 50 ms', verdict(worst(p99s), 50)]);
    rows.push(['GET /__clank/health during the fan-out, p50: median / worst round', `${ms(median(p50s))} / ${ms(worst(p50s))}`, '', '']);
    rows.push([`a push (the whole view's HTML as a JSON frame, sent to each session)`, `${(setup.frame_bytes / 1024).toFixed(1)} KiB`, '', '']);
    const mem = of('fanout-memory')[0];
    if (mem) rows.push([`server memory with the ${mem.sessions} sessions open → after the rounds: Lua (metric) / RSS`,
      `${mem.open.lua_mb} → ${mem.end.lua_mb} MB / ${mem.open.rss_mb} → ${mem.end.rss_mb} MB`, '', '']);
    const idle = of('health-idle')[0];
    if (idle) rows.push(['GET /__clank/health before the rounds (no fan-out), p50 / p99', `${ms(idle.p50_ms)} / ${ms(idle.p99_ms)}`, '', '']);
  }

  const samples = of('dom');
  if (samples.length) {
    const group = (label, list) => {
      const got = list.filter((s) => s.ms !== null).map((s) => s.ms);
      const lost = list.length - got.length;
      const p99 = lost ? null : percentile(got, 99);
      rows.push([`publish → DOM, ${label}: p50 / p99 of ${list.length}` + (lost ? `, ${lost} not seen within ${list[0].timeout_ms} ms` : ''),
        `${ms(percentile(got, 50))} / ${lost ? 'lost' : ms(p99)}`, '< 100 ms', lost ? 'MISSED' : verdict(p99, 100)]);
    };
    const workers = samples.some((s) => s.same_worker !== null);
    const where = (list) => (workers
      ? [['page and publish on the same worker', list.filter((s) => s.same_worker)],
        ['publish on the other worker', list.filter((s) => !s.same_worker)]]
      : [[scale === 'instances' ? 'page on A, publish to B' : 'one worker', list]]);
    for (const [label, list] of where(samples)) if (list.length) group(`${label} (creates and archives)`, list);
    for (const kind of ['create', 'archive']) {
      const list = samples.filter((s) => s.kind === kind);
      if (!workers && list.length) group(kind === 'create' ? 'a new row appears' : 'an archived row leaves', list);
    }
  }

  console.log(`\n| measure (BENCH_PUBSUB_SCALE=${scale}) | figure | target | |\n|---|---|---|---|`);
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);

  if (rounds.length) {
    console.log('\nfan-out rounds (ms from the POST to each push, health latencies during it, CPU during the round):\n');
    console.log('| round | action | delivered | POST answered | first | median | last | health n | p50 | p99 | max | server CPU | client CPU |');
    console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const r of rounds) {
      const missing = r.missing_per_worker.length > 1 ? ` (missing per worker ${r.missing_per_worker.join('/')}, publish on ${r.publish_worker})` : '';
      console.log(`| ${r.round} | ${r.kind} | ${r.delivered}/${r.sessions}${missing} | ${r.post_ms} | ${r.first_ms ?? '–'} | ${r.median_ms ?? '–'} | `
        + `${r.last_ms ?? `> ${r.timeout_ms}`} | ${r.health_n} | ${r.health_p50_ms ?? '–'} | ${r.health_p99_ms ?? '–'} | ${r.health_max_ms ?? '–'} | `
        + `${r.server_cpu_ms} ms | ${r.client_cpu_ms} ms |`);
    }
  }
  for (const g of of('gave-up')) console.log(`\n${g.what}: gave up: ${g.message}`);
}

const parts = { cost, fanout, dom, report };
if (!parts[mode]) {
  console.error('usage: client.mjs cost|fanout|dom|report ... (see the header)');
  process.exit(2);
}
await parts[mode](args);
