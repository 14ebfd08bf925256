// bench/live.sh's client: live-view events against action calls on the same server, then
// many open live sessions. Prints one JSON object per measurement on stdout.
//   node bench.mjs BASE_URL SERVER_PID roundtrip SECONDS CONNECTIONS
//   node bench.mjs BASE_URL SERVER_PID scale SESSIONS SECONDS VIEW_PATH
import http from "node:http";
import { readFileSync } from "node:fs";
import WebSocket from "ws";

const [base, pidText, mode, a, b, viewPath] = process.argv.slice(2);
const pid = Number(pidText);
const url = new URL(base);

// The server's CPU time (user + system) in seconds, from /proc.
function cpuSeconds() {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime: fields 14 and 15
}

function rssKiB() {
  const m = readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+) kB/);
  return Number(m[1]);
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function summary(name, latencies, seconds, cpu) {
  const sorted = Float64Array.from(latencies).sort();
  return {
    name, count: latencies.length,
    p50_ms: +percentile(sorted, 50).toFixed(3), p99_ms: +percentile(sorted, 99).toFixed(3),
    per_s: Math.round(latencies.length / seconds),
    per_core_s: Math.round(latencies.length / cpu), server_cpu_s: +cpu.toFixed(2),
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
    req.end(body);
  });
}

// A live session: a page load for its token, then the WebSocket and its first html.
async function openSession(path = "/") {
  const page = await request("GET", path);
  const id = page.body.match(/data-clank-session="([^"]+)"/)[1];
  const ws = new WebSocket(`ws://${url.host}/__clank/sessions/${id}/live`, { origin: base.replace(/\/$/, "") });
  const session = { ws, v: 0, seq: 0, waiting: null, key: null };
  ws.on("message", (data) => {
    const m = JSON.parse(data);
    if (m.t !== "html") return;
    session.v = m.v;
    if (session.key === null) session.key = m.html.match(/data-clank-key="([^"]+)"/)[1];
    if (session.waiting && m.seq === session.waiting.seq) {
      const w = session.waiting;
      session.waiting = null;
      w.resolve();
    } else if (session.opened) {
      const o = session.opened;
      session.opened = null;
      o();
    }
  });
  await new Promise((resolve, reject) => {
    session.opened = resolve;
    ws.on("error", reject);
  });
  return session;
}

function event(session) {
  return new Promise((resolve) => {
    const seq = ++session.seq;
    session.waiting = { seq, resolve };
    session.ws.send(JSON.stringify({ t: "event", seq, v: session.v, key: session.key, type: "click" }));
  });
}

async function loop(seconds, fn) {
  const latencies = [];
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    const t0 = performance.now();
    await fn();
    latencies.push(performance.now() - t0);
  }
  return latencies;
}

async function measure(name, seconds, workers) {
  const cpu0 = cpuSeconds(), t0 = performance.now();
  const all = (await Promise.all(workers.map((fn) => loop(seconds, fn)))).flat();
  const wall = (performance.now() - t0) / 1000;
  return summary(name, all, wall, cpuSeconds() - cpu0);
}

if (mode === "roundtrip") {
  const seconds = Number(a), connections = Number(b);
  const call = async () => {
    const res = await request("POST", "/actions/tasks.list", "{}");
    if (res.status !== 200) throw new Error(`tasks.list answered ${res.status}`);
  };
  const sessions = [];
  for (let i = 0; i < connections; i++) sessions.push(await openSession());
  // warm-up
  await measure("warmup", 1, sessions.map((s) => () => event(s)));
  await measure("warmup", 1, sessions.map(() => call));
  for (const [name, workers] of [
    ["action call (POST /actions/tasks.list, 100 rows)", sessions.map(() => call)],
    ["live event (click → 100-row list html)", sessions.map((s) => () => event(s))],
  ]) console.log(JSON.stringify(await measure(name, seconds, workers)));
  for (const s of sessions) s.ws.close();
  agent.destroy();
} else if (mode === "scale") {
  const count = Number(a), seconds = Number(b);
  const probe = await openSession();
  await measure("warmup", 1, [() => event(probe)]);
  const idle = await measure(`event round trip, no other session open`, seconds, [() => event(probe)]);
  const rss0 = rssKiB();
  const sessions = [];
  const batch = 200;
  for (let i = 0; i < count; i += batch) {
    const n = Math.min(batch, count - i);
    sessions.push(...(await Promise.all(Array.from({ length: n }, () => openSession(viewPath)))));
  }
  await new Promise((r) => setTimeout(r, 2000));
  const rss1 = rssKiB();
  console.log(JSON.stringify(idle));
  console.log(JSON.stringify({
    name: `${count} open live sessions of ${viewPath}`, sessions: count,
    rss_before_kib: rss0, rss_after_kib: rss1, per_session_kib: +((rss1 - rss0) / count).toFixed(1),
  }));
  console.log(JSON.stringify(await measure(`event round trip, ${count} sessions open (pinged)`, seconds,
    [() => event(probe)])));
  for (const s of sessions) s.ws.terminate();
  probe.ws.close();
  agent.destroy();
} else {
  console.error("usage: bench.mjs BASE_URL PID roundtrip SECONDS CONNECTIONS | scale SESSIONS SECONDS");
  process.exit(2);
}
