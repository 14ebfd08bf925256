// Shared helpers for the specs under spec/browser: start and stop the real clank-run, make HTTP
// requests with full control over the headers (node:http, raw TCP), and speak the live channel
// (SPEC §11) through an independent WebSocket client (ws).
//
//   CLANK_RUN=build/clank-run node --test spec/browser/
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';

export const root = process.env.CLANK_SOURCE_DIR
  || resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const fixture = (name) => join(root, 'spec/fixtures/apps', name);

export function clankRun() {
  const bin = process.env.CLANK_RUN || join(root, 'build/clank-run');
  if (!existsSync(bin)) throw new Error(`clank-run not found at ${bin}: set CLANK_RUN`);
  return bin;
}

export const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

// Servers still running when this process exits (a crashed spec) are killed with it.
const running = new Set();
process.once('exit', () => { for (const child of running) child.kill('SIGKILL'); });

// Copies a fixture app's folder into a fresh temporary folder → its path (removed by stop()
// when given as opts.cleanup, or by the caller).
export function copyFixture(name) {
  const dir = mkdtempSync(join(tmpdir(), `clank-${name}-`));
  cpSync(fixture(name), dir, { recursive: true });
  return dir;
}

// Starts clank-run on a free port; resolves once it printed its start-up line.
//   opts.app: the app file or folder; opts.limits: CLANK_TEST_LIMITS; opts.watch (default false);
//   opts.env: more environment; opts.args: more arguments; opts.cleanup: a folder removed on stop.
export async function startServer(opts = {}) {
  const env = { ...process.env, ...(opts.env || {}) };
  delete env.CLANK_TEST_LIMITS;
  if (opts.limits) env.CLANK_TEST_LIMITS = opts.limits;
  const args = ['--port', '0'];
  if (!opts.watch) args.push('--no-watch');
  args.push(...(opts.args || []), opts.app || fixture('live/app.lua'));
  const child = spawn(clankRun(), args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  running.add(child);
  const exited = new Promise((ok) => child.once('exit', (code, signal) => {
    running.delete(child);
    ok({ code, signal });
  }));
  const base = await new Promise((ok, fail) => {
    let out = '';
    const timer = setTimeout(() => fail(new Error(`no start-up line; stderr:\n${stderr}`)), 15000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/^clank-run: serving .* at (http:\/\/127\.0\.0\.1:\d+\/)\n/);
      if (m) { clearTimeout(timer); ok(m[1]); }
    });
    exited.then(({ code }) => {
      clearTimeout(timer);
      fail(new Error(`clank-run exited ${code}; stderr:\n${stderr}`));
    });
  });
  const url = new URL(base);
  return {
    base, // "http://127.0.0.1:PORT/"
    origin: url.origin,
    port: Number(url.port),
    host: url.host,
    pid: child.pid,
    child,
    exited,
    stderr: () => stderr,
    // VmRSS of the process in KiB.
    rssKiB() {
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
      return Number(status.match(/^VmRSS:\s+(\d+) kB$/m)[1]);
    },
    // Stops it with SIGTERM: a clean stop exits 0, with no sanitizer report (ASan builds).
    async stop() {
      let result = child.exitCode === null && child.signalCode === null ? null
        : { code: child.exitCode, signal: child.signalCode };
      if (!result) {
        child.kill('SIGTERM');
        result = await exited;
      }
      if (opts.cleanup) rmSync(opts.cleanup, { recursive: true, force: true });
      assert.doesNotMatch(stderr, /Sanitizer|runtime error:/, stderr);
      assert.equal(result.code, 0, `clank-run exited ${result.code} (${result.signal}); stderr:\n${stderr}`);
    },
  };
}

// One HTTP/1.1 request through node:http (no agent: a fresh connection each time, so any header
// may be set, Host included) → { status, headers, body (Buffer), text }.
export function request(server, path, opts = {}) {
  return new Promise((ok, fail) => {
    const headers = Object.fromEntries(Object.entries(opts.headers || {}).filter(([, v]) => v !== undefined));
    let body = opts.body;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
        headers['content-type'] = 'application/json';
      }
    }
    if (body !== undefined) headers['content-length'] = Buffer.byteLength(body);
    const req = http.request({
      host: '127.0.0.1', port: server.port, path, method: opts.method || 'GET', headers,
      agent: false, setHost: !Object.keys(headers).some((h) => h.toLowerCase() === 'host'),
    });
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const buf = Buffer.concat(chunks);
        ok({ status: res.statusCode, headers: res.headers, body: buf, text: buf.toString('utf8') });
      });
      res.on('error', fail);
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      ok({ status: res.statusCode, headers: res.headers, upgraded: true, body: Buffer.alloc(0), text: '' });
    });
    req.on('error', fail);
    req.setTimeout(opts.timeout || 10000, () => req.destroy(new Error(`timed out: ${path}`)));
    if (body !== undefined) req.write(body);
    req.end();
  });
}

export const json = (res) => {
  assert.match(res.headers['content-type'] || '', /^application\/json/, res.text);
  return JSON.parse(res.text);
};

// Parses one HTTP/1.1 response (with content-length, or none for 1xx/204/304/HEAD) from the
// start of buf → { status, headers, body, rest } or null when incomplete.
export function parseResponse(buf, { head = false } = {}) {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(lines[0].split(' ')[1]);
  const headers = {};
  for (const line of lines.slice(1)) {
    const i = line.indexOf(':');
    const name = line.slice(0, i).trim().toLowerCase();
    const value = line.slice(i + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  const bodyless = head || status === 304 || status === 204 || (status >= 100 && status < 200);
  const length = bodyless ? 0 : Number(headers['content-length'] || 0);
  if (headers['transfer-encoding']) throw new Error('chunked responses are not parsed here');
  if (buf.length < end + 4 + length) return null;
  return {
    status, headers, body: buf.subarray(end + 4, end + 4 + length),
    rest: buf.subarray(end + 4 + length),
  };
}

// Writes raw bytes on a fresh TCP connection and reads `count` responses (HEAD ones flagged in
// opts.heads by index) → list of responses. Rejects if the connection closes first.
export function rawExchange(server, bytes, count, opts = {}) {
  return new Promise((ok, fail) => {
    const socket = net.connect(server.port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const out = [];
    const timer = setTimeout(() => { socket.destroy(); fail(new Error(`timed out after ${out.length} responses`)); },
      opts.timeout || 10000);
    socket.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const r = parseResponse(buf, { head: (opts.heads || []).includes(out.length) });
        if (!r) break;
        buf = r.rest;
        out.push(r);
        if (out.length === count) {
          clearTimeout(timer);
          socket.destroy();
          ok(out);
          return;
        }
      }
    });
    socket.on('error', (e) => { clearTimeout(timer); fail(e); });
    socket.on('close', () => {
      clearTimeout(timer);
      if (out.length < count) fail(new Error(`closed after ${out.length} of ${count} responses`));
    });
    socket.write(bytes);
  });
}

// ---- pages and the live channel (SPEC §11) ----

// The session token of a page (data-clank-session on the root).
export function sessionOf(html) {
  const m = html.match(/<div data-clank-root data-clank-session="([^"]+)">/);
  assert.ok(m, `no root div with a session in:\n${html}`);
  return m[1];
}

// Loads a page and returns its session token.
export async function newSession(server, path = '/views/counter') {
  const res = await request(server, path);
  assert.equal(res.status, 200, res.text);
  return sessionOf(res.text);
}

// The positional data-clank-key of the element with data-clank-id=`id` in html.
export function keyOf(html, id) {
  for (const m of html.matchAll(/<[a-z]+\s[^>]*>/g)) {
    const tag = m[0];
    if (tag.includes(`data-clank-id="${id}"`)) {
      const k = tag.match(/data-clank-key="([^"]+)"/);
      assert.ok(k, `element ${id} has no data-clank-key: ${tag}`);
      return k[1];
    }
  }
  assert.fail(`no element with data-clank-id="${id}" in:\n${html}`);
}

// The text of the element with data-clank-id=`id` (a leaf) in html.
export function textOf(html, id) {
  const m = html.match(new RegExp(`data-clank-id="${id}"[^>]*>([^<]*)<`));
  assert.ok(m, `no element with data-clank-id="${id}" in:\n${html}`);
  return m[1];
}

export const liveURL = (server, id) =>
  `ws://${server.host}/__clank/sessions/${encodeURIComponent(id)}/live`;

// Opens the live channel of session `id` with ws → a Live:
//   live.next(pred?, ms?) → the next message (parsed JSON) matching pred, in arrival order;
//   live.closed → promise of { code, reason }; live.pings → count of pings received;
//   live.send(obj|string), live.ws.
export function openLive(server, id, opts = {}) {
  const ws = new WebSocket(liveURL(server, id), {
    origin: opts.origin === undefined ? server.origin : opts.origin || undefined,
    headers: opts.headers,
    maxPayload: 64 * 1024 * 1024,
  });
  const live = { ws, messages: [], waiters: [], pings: 0, opened: false, raw: [] };
  live.closed = new Promise((ok) => {
    ws.on('close', (code, reason) => {
      live.closeInfo = { code, reason: reason.toString() };
      ok(live.closeInfo);
      for (const w of live.waiters.splice(0)) w.fail(new Error(`closed ${code} ${reason}`));
    });
  });
  live.open = new Promise((ok, fail) => {
    ws.once('open', () => { live.opened = true; ok(); });
    ws.once('unexpected-response', (req, res) => fail(new Error(`unexpected response ${res.statusCode}`)));
    ws.once('error', (e) => { if (!live.opened) fail(e); });
  });
  live.open.catch(() => {});
  ws.on('error', () => {}); // surfaced through close codes and open
  ws.on('ping', () => { live.pings++; });
  ws.on('message', (data, isBinary) => {
    const text = data.toString('utf8');
    live.raw.push(text);
    let msg;
    try { msg = JSON.parse(text); } catch { msg = { unparsable: text, binary: isBinary }; }
    live.messages.push(msg);
    live.pump();
  });
  let cursor = 0;
  live.pump = () => {
    for (let i = 0; i < live.waiters.length;) {
      const w = live.waiters[i];
      let found = -1;
      for (let j = w.from; j < live.messages.length; j++) {
        if (w.pred(live.messages[j])) { found = j; break; }
      }
      if (found >= 0) {
        live.waiters.splice(i, 1);
        cursor = Math.max(cursor, found + 1);
        w.ok(live.messages[found]);
      } else i++;
    }
  };
  // The next message after those already returned that satisfies pred (default: any).
  live.next = (pred = () => true, ms = 5000) => new Promise((ok, fail) => {
    const w = { pred, from: cursor, ok: (m) => { clearTimeout(w.timer); ok(m); }, fail: (e) => { clearTimeout(w.timer); fail(e); } };
    w.timer = setTimeout(() => {
      live.waiters.splice(live.waiters.indexOf(w), 1);
      fail(new Error(`no matching message within ${ms} ms; got ${JSON.stringify(live.messages.slice(w.from))}`));
    }, ms);
    live.waiters.push(w);
    live.pump();
    if (live.closeInfo && live.waiters.includes(w)) {
      live.waiters.splice(live.waiters.indexOf(w), 1);
      w.fail(new Error(`closed ${live.closeInfo.code} ${live.closeInfo.reason}`));
    }
  });
  // Messages received after those already returned (and skips them).
  live.drain = () => { const m = live.messages.slice(cursor); cursor = live.messages.length; return m; };
  live.send = (m) => ws.send(typeof m === 'string' ? m : JSON.stringify(m));
  live.close = async () => {
    if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close(1000);
    await live.closed;
  };
  return live;
}

// Opens the live channel and waits for the first message (the html with seq 0) → [live, first].
export async function connect(server, id, opts) {
  const live = openLive(server, id, opts);
  await live.open;
  const first = await live.next();
  return [live, first];
}

// Sends an event and waits for the html answering it (its seq) → that message.
let seqs = 1000;
export async function event(live, fields) {
  const seq = fields.seq ?? ++seqs;
  live.send({ t: 'event', seq, ...fields });
  return live.next((m) => m.t === 'html' && m.seq === seq);
}

// "Count: N" (or another label) → N, from an html fragment.
export function countIn(html) {
  const m = textOf(html, 'count').match(/^[^:]+: (-?\d+)$/);
  assert.ok(m, `no count in ${html}`);
  return Number(m[1]);
}

// Resolves with an error if `promise` does not settle within ms.
export function within(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, fail) => { timer = setTimeout(() => fail(new Error(`${what}: not within ${ms} ms`)), ms); }),
  ]);
}
