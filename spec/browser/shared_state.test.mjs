// Shared live state (issue 28) in Chromium against the real clank-run serving apps/tasks: a
// change made anywhere shows at once in every open page of the user, with no event from those
// pages. The writers are another page's add form, an MCP client (the official SDK's Client over
// Streamable HTTP, as an agent host calls tools) and curl on the agent bridge; the same body runs
// on one worker and on --workers 2, where the pages and the calls are spread over both workers.
// What the pages show is checked against the server's state read independently (POST
// /actions/tasks.list). Screenshots go to build/screenshots/shared-state-*.png.
//
// The MCP client comes from spec/mcp's packages (./dev test installs them with spec/browser's).
//
//   CLANK_RUN=build/clank-run node --test spec/browser/shared_state.test.mjs
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chromium } from 'playwright-core';
import { Client } from '../mcp/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js';
import { StreamableHTTPClientTransport }
  from '../mcp/node_modules/@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js';
import { json, request, root, sleep, startServer } from './helpers.mjs';

const CHROMIUM = process.env.CLANK_CHROMIUM || '/usr/bin/chromium';
const SHOTS = join(root, 'build/screenshots');
const TASKS_APP = join(root, 'apps/tasks');
const WAIT = 5000; // every wait's deadline, in ms: a change that does not show fails, never hangs

let browser;
before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  mkdirSync(SHOTS, { recursive: true });
});
after(async () => { await browser?.close(); });

// ---- the server ----

// The tasks app on a fresh SQLite file. Its user is CLANK_TASKS_USER for every request: the
// app's context(request) reads nothing from the request, and MCP tools/call builds its ctx with
// that same context (lua/clank/mcp/tools.lua), so the pages, the bridge and the MCP client all
// see one user's list and its topic. JSON logs: each access line names its worker.
async function startTasks(workers) {
  const dir = mkdtempSync(join(tmpdir(), 'clank-shared-'));
  const server = await startServer({
    app: join(TASKS_APP, 'app.lua'),
    args: ['--log', 'json', ...(workers > 1 ? ['--workers', String(workers)] : [])],
    env: { CLANK_TASKS_DB: join(dir, 'tasks.db'), CLANK_TASKS_USER: 'shared-spec' },
    cleanup: dir,
  });
  server.workers = workers;
  return server;
}

// The access lines logged so far (JSON), matching pred.
const accessLines = (server, pred) => server.stderr().split('\n').filter((l) => l.startsWith('{'))
  .map((l) => JSON.parse(l)).filter((l) => l.msg === 'request' && pred(l));

// Waits until n access lines match pred → the workers that logged them (0 without --workers).
// The log is flushed once per loop iteration, so a line may come a little after the answer.
async function loggedBy(server, pred, n = 1) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    const lines = accessLines(server, pred);
    if (lines.length >= n) return lines.map((l) => l.worker ?? 0);
    if (Date.now() > deadline) assert.fail(`${lines.length} of ${n} access lines within ${WAIT} ms`);
    await sleep(20);
  }
}

// The workers that served the request with x-request-id `id`.
const workersOf = (server, id) => loggedBy(server, (l) => l.requestId === id);

// The worker owning view session `id`: FNV-1a-64(ID) mod N (clank-run(1), --workers).
function ownerOf(id, workers) {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(id)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return Number(h % BigInt(workers));
}

// The user's tasks as the server holds them, through the bridge on a connection of its own.
async function serverTasks(server) {
  const res = await request(server, '/actions/tasks.list', { method: 'POST', json: {}, timeout: WAIT });
  assert.equal(res.status, 200, res.text);
  return json(res).output.tasks;
}

// POST /actions/<name> through the real curl binary (one process, one connection), confirmed
// as a host would after asking → { output, workers } (workers: which served it).
async function curlAction(server, name, input, requestId) {
  const out = await new Promise((ok, fail) => execFile('curl', [
    '-sS', '--max-time', String(WAIT / 1000), '-X', 'POST',
    '-H', 'content-type: application/json', '-H', 'x-clank-confirmation: confirmed',
    '-H', `x-request-id: ${requestId}`, '--data-binary', JSON.stringify(input),
    '-w', '\n%{http_code}', `${server.base}actions/${name}`,
  ], (err, stdout, stderr) => (err ? fail(new Error(`curl: ${err.message}\n${stderr}`)) : ok(stdout))));
  const i = out.lastIndexOf('\n');
  const [body, status] = [out.slice(0, i), out.slice(i + 1)];
  assert.equal(status, '200', body);
  const answer = JSON.parse(body);
  assert.equal(answer.ok, true, body);
  return { output: answer.output, workers: await workersOf(server, requestId) };
}

// An MCP client as an agent host runs it: the SDK's Client over StreamableHTTPClientTransport.
// Each of its HTTP requests goes on a fresh connection (connection: close) with an x-request-id
// naming its JSON-RPC method, so the log tells which worker served which (client.requests).
async function mcpClient(server) {
  const requests = [];
  const fetchFresh = (url, init = {}) => {
    let method = init.method || 'GET';
    try { method = JSON.parse(init.body).method || 'response'; } catch { /* no JSON-RPC body */ }
    const id = `mcp-${requests.length + 1}-${method.replace(/[^\w.-]/g, '.')}`;
    requests.push({ id, method });
    const headers = new Headers(init.headers);
    headers.set('connection', 'close');
    headers.set('x-request-id', id);
    return fetch(url, { ...init, headers, signal: init.signal || AbortSignal.timeout(WAIT) });
  };
  const client = new Client({ name: 'clank-shared-spec', version: '1.0.0' }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL('__clank/mcp', server.base),
    { fetch: fetchFresh });
  await client.connect(transport, { timeout: WAIT });
  client.requests = requests;
  return client;
}

// ---- the pages ----

// Opens the app's page in a browser context of its own (its own connections: no keep-alive
// shared with another page) and waits for its live connection. Every WebSocket frame the
// browser sends for it is recorded as the network sees it (page.sent), whatever the page's
// script does; page.worker is its session's owner.
async function openPage(server) {
  const page = await browser.newPage({ viewport: { width: 960, height: 900 } });
  page.sent = [];
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e));
  page.on('dialog', (d) => d.accept()); // the add form asks before tasks.create
  page.on('websocket', (ws) => ws.on('framesent', (f) => page.sent.push(f.payload)));
  await page.goto(server.base, { timeout: WAIT });
  await page.waitForSelector('[data-clank-root][data-clank-status="open"]', { timeout: WAIT });
  page.session = await page.getAttribute('[data-clank-root]', 'data-clank-session');
  page.worker = ownerOf(page.session, server.workers);
  return page;
}

// Opens at least 4 pages, and at least 2 owned by each worker (session IDs are random, so more
// pages are opened until the hash has put some on every worker; 16 at most), into `pages`.
// The workers the server logged the live connections on are the ones the hash says (one
// connection each: a page that had to reconnect fails here).
async function openPages(server, pages) {
  const owned = (w) => pages.filter((p) => p.worker === w).length;
  const workers = [...Array(server.workers).keys()];
  while (pages.length < 4 || workers.some((w) => owned(w) < 2)) {
    if (pages.length === 16) break;
    pages.push(await openPage(server));
  }
  pages.forEach((p, i) => { p.name = `page ${i + 1} (worker ${p.worker})`; });
  for (const w of workers) assert.ok(owned(w) >= 2, `not 2 of ${pages.length} pages on worker ${w}`);
  const live = (l) => l.status === 101 && /^\/__clank\/sessions\/[^/]+\/live(\?diffs=1)?$/.test(l.target);
  const sorted = (list) => [...list].sort();
  assert.deepEqual(sorted(await loggedBy(server, live, pages.length)), sorted(pages.map((p) => p.worker)));
  // a change must come through the live channel, not a reload of the page
  for (const p of pages) await p.evaluate(() => { window.__sameDocument = true; });
}

const row = (page, id) => page.locator(`li.task[data-clank-id="task-${id}"]`);

// Waits on every page at once for `locator(page)` to be attached → the pages where it was not
// within WAIT ms.
async function missing(pages, locator) {
  const results = await Promise.allSettled(pages.map((p) => locator(p).waitFor({ timeout: WAIT })));
  return pages.filter((_, i) => results[i].status === 'rejected');
}

// The rows a page shows, as { id, title, done }.
const shownTasks = (page) => page.$$eval('li.task', (lis) => lis.map((li) => ({
  id: li.getAttribute('data-clank-id').replace(/^task-/, ''),
  title: li.querySelector('.task-title').textContent,
  done: li.classList.contains('done') && li.querySelector('.status')?.textContent === 'Done'
    && !li.querySelector('[data-clank-id^="complete-"]'),
})));

// ---- the spec: one body, run at each scale ----

async function sharedState(server, scale) {
  const pages = [];
  let mcp;
  try {
    await openPages(server, pages);
    mcp = await mcpClient(server);
    const [a, ...others] = pages;
    const changes = []; // { what, workers: where it ran, missed: the pages not showing it in time }

    // page 1 adds a task through its form (its own events; none from the others)
    await a.fill('[data-clank-id="new-task.title"]', 'Added in page 1');
    await a.click('[data-clank-id="new-task.submit"]');
    const added = a.locator('li.task', { hasText: 'Added in page 1' });
    await added.waitFor({ timeout: WAIT });
    const addedId = (await added.getAttribute('data-clank-id')).replace(/^task-/, '');
    const sentByA = a.sent.length; // its input and submit events, answered: none after these
    assert.ok(a.sent.map((f) => JSON.parse(f)).some((m) => m.t === 'event' && m.type === 'submit'));
    changes.push({ what: 'the add in page 1', workers: [a.worker], missed: await missing(others,
      (p) => row(p, addedId).filter({ hasText: 'Added in page 1' })) });

    // an agent host calls tasks_create over MCP
    const created = await mcp.callTool({
      name: 'tasks_create', arguments: { title: 'Made by an MCP agent', estimate: null, tags: ['mcp'] },
    }, undefined, { timeout: WAIT });
    assert.equal(created.isError, undefined, JSON.stringify(created));
    const mcpId = created.structuredContent.id;
    const toolCall = mcp.requests.find((r) => r.method === 'tools/call');
    changes.push({ what: 'MCP tasks_create', workers: await workersOf(server, toolCall.id),
      missed: await missing(pages, (p) => row(p, mcpId).filter({ hasText: 'Made by an MCP agent' })) });

    // curl completes it through the bridge
    const done = await curlAction(server, 'tasks.complete', { id: mcpId }, `curl-complete-${scale}`);
    assert.deepEqual(done.output, { id: mcpId, completed: true });
    changes.push({ what: 'curl tasks.complete', workers: done.workers, missed: await missing(pages,
      (p) => p.locator(`li.task.done[data-clank-id="task-${mcpId}"] .status`)) });

    for (const [i, p] of pages.entries()) {
      const name = `shared-state-${scale}-${i + 1}-w${p.worker}.png`;
      await p.screenshot({ path: join(SHOTS, name), fullPage: true });
    }
    const report = `pages: ${pages.map((p) => p.name).join(', ')}\n${changes.map((c) =>
      `${c.what} (ran on worker ${c.workers.join('+')}): ${c.missed.length
        ? `not shown within ${WAIT} ms in ${c.missed.map((p) => p.name).join(', ')}`
        : 'shown in every page'}`).join('\n')}`;
    const missedBy = (near) => Object.fromEntries(changes.map((c) => [c.what,
      c.missed.filter((p) => c.workers.includes(p.worker) === near).map((p) => p.name)]));
    const none = Object.fromEntries(changes.map((c) => [c.what, []]));
    // in the pages on the worker a change ran on, then in the pages on every other worker
    assert.deepEqual(missedBy(true), none, `a change missing on its own worker:\n${report}`);
    assert.deepEqual(missedBy(false), none, `a change missing on another worker:\n${report}`);

    // what every page shows is what the server holds: the add still open, the agent's task done
    const held = (await serverTasks(server))
      .map((t) => ({ id: t.id, title: t.title, done: t.completed }));
    assert.deepEqual(held, [
      { id: addedId, title: 'Added in page 1', done: false },
      { id: mcpId, title: 'Made by an MCP agent', done: true },
    ]);
    for (const p of pages) assert.deepEqual(await shownTasks(p), held, p.name);

    // no page sent a frame for the changes made elsewhere, and none was reloaded
    assert.equal(a.sent.length, sentByA, `${a.name} sent ${JSON.stringify(a.sent.slice(sentByA))}`);
    for (const p of others) assert.deepEqual(p.sent, [], p.name);
    for (const p of pages) {
      assert.equal(await p.evaluate(() => window.__sameDocument), true, p.name);
      assert.deepEqual(p.errors, [], p.name);
    }
  } finally {
    await mcp?.close();
    for (const p of pages) await p.close();
  }
}

describe('shared live state of the tasks app', () => {
  for (const [scale, workers] of [['one worker', 1], ['--workers 2', 2]]) {
    describe(scale, () => {
      let server;
      before(async () => { server = await startTasks(workers); });
      after(async () => { await server?.stop(); });

      test('an add in one page, an MCP client\'s tasks_create and curl\'s tasks.complete '
        + 'show in every open page, with no event from them', async () => {
        await sharedState(server, workers === 1 ? 'one-worker' : `workers-${workers}`);
      });
    });
  }
});
