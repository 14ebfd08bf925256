// The tasks app's live page (apps/tasks/app.lua, SPEC §8–§11) in Chromium against the real
// clank-run, on a fresh SQLite file in a temporary folder. What the page shows is checked
// against what the server holds, read independently through the agent bridge (POST
// /actions/tasks.list) and the agents' surface endpoints (GET /__clank/sessions/:id/surface).
// Screenshots go to build/screenshots/tasks-*.png.
//
//   CLANK_RUN=build/clank-run node --test spec/browser/tasks.test.mjs
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { fixture, json, request, root, sleep, startServer } from './helpers.mjs';

const CHROMIUM = process.env.CLANK_CHROMIUM || '/usr/bin/chromium';
const SHOTS = join(root, 'build/screenshots');
const TASKS_APP = join(root, 'apps/tasks');

// The confirmation texts: each action's description, which its confirm would replace (issue 34).
// The server asks ({"t":"confirm"}) once the action's input is valid; the page answers.
const CREATE_CONFIRM = 'Create one task in the current workspace.';
const COMPLETE_CONFIRM = 'Mark one of the current user\'s tasks as done.';
const ARCHIVE_CONFIRM = 'Archive one of the current user\'s tasks: it leaves the default list for good.';

let browser;
before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  mkdirSync(SHOTS, { recursive: true });
});
after(async () => { await browser?.close(); });

// ---- the server ----

// A copy of apps/tasks (app.lua, store.lua, public/) in a fresh folder, and a database there.
function tasksCopy() {
  const dir = mkdtempSync(join(tmpdir(), 'clank-tasks-'));
  cpSync(TASKS_APP, join(dir, 'app'), {
    recursive: true,
    filter: (src) => !/\/tasks\.db(-wal|-shm|-journal)?$/.test(src),
  });
  return dir;
}

// Starts the tasks app on a fresh SQLite file; opts.copy runs it from a copy (hot reload).
async function startTasks(opts = {}) {
  const dir = opts.copy ? tasksCopy() : mkdtempSync(join(tmpdir(), 'clank-tasks-db-'));
  const app = opts.copy ? join(dir, 'app/app.lua') : join(TASKS_APP, 'app.lua');
  const server = await startServer({
    app,
    watch: opts.watch,
    env: { CLANK_TASKS_DB: join(dir, 'tasks.db'), CLANK_TASKS_USER: 'browser-spec' },
    cleanup: dir,
  });
  server.dir = dir;
  server.appFile = app;
  return server;
}

// POST /actions/<name> through the bridge → the output (confirmed, as a host would after asking).
async function action(server, name, input) {
  const res = await request(server, `/actions/${name}`, {
    method: 'POST', json: input, headers: { 'x-clank-confirmation': 'confirmed' },
  });
  const body = json(res);
  assert.equal(res.status, 200, res.text);
  assert.equal(body.ok, true, res.text);
  return body.output;
}

const serverTasks = async (server, includeArchived = false) =>
  (await action(server, 'tasks.list', { includeArchived })).tasks;

async function serverSurface(server, session) {
  const res = await request(server, `/__clank/sessions/${encodeURIComponent(session)}/surface`);
  assert.equal(res.status, 200, res.text);
  return json(res).nodes;
}

// ---- the page ----

// Opens the app's page and waits for its live connection. The page records every live frame
// it sends and receives (in the page, as the client sends and gets them: window.__live), and
// answers window.confirm as page.answer says ('accept' | 'dismiss'), recording the questions.
async function openPage(server, path = '/') {
  const page = await browser.newPage({ viewport: { width: 960, height: 900 } });
  page.dialogs = [];
  page.answer = 'accept';
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e));
  page.on('dialog', async (d) => {
    page.dialogs.push({ type: d.type(), message: d.message() });
    if (page.answer === 'accept') await d.accept(); else await d.dismiss();
  });
  await page.addInitScript(() => {
    const live = { sent: [], received: [] };
    window.__live = live;
    const Native = window.WebSocket;
    // A diff frame is kept with the html it makes from the last one (README, Live views).
    let last = '';
    const made = (m) => {
      if (m.t === 'html' || m.t === 'reload') last = m.html;
      if (m.t !== 'diff') return m;
      let out = '', from = 0;
      for (const [at, del, ins] of m.splices) {
        out += last.slice(from, at) + ins;
        from = at + del;
      }
      last = out + last.slice(from);
      return { ...m, html: last };
    };
    window.WebSocket = class extends Native {
      constructor(...args) {
        super(...args);
        this.addEventListener('message', (e) => live.received.push(made(JSON.parse(e.data))));
      }
      send(data) {
        live.sent.push(JSON.parse(data));
        return super.send(data);
      }
    };
  });
  await page.goto(server.base.replace(/\/$/, path));
  await page.waitForSelector('[data-clank-root][data-clank-status="open"]');
  page.session = await page.getAttribute('[data-clank-root]', 'data-clank-session');
  return page;
}

const frames = (page) => page.evaluate(() => window.__live);
const events = async (page) => (await frames(page)).sent.filter((m) => m.t === 'event');
// The page's answers to the server's confirmation questions, in order.
const answers = async (page) => (await frames(page)).sent.filter((m) => m.t === 'confirm').map((m) => m.ok);

// Waits until the input events queued for the next frame are sent, then until the html
// (or diff) answering the latest event sent has arrived (and so been patched in: the client patches as
// it receives). Events run in order, so every earlier one was handled (or collapsed into a
// later input, SPEC §11).
async function settled(page) {
  await page.evaluate(() => new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok))));
  await page.waitForFunction(() => {
    const { sent, received } = window.__live;
    const last = sent.filter((m) => m.t === 'event').pop();
    return !last || received.some((m) => (m.t === 'html' || m.t === 'diff') && m.seq === last.seq);
  }, null, { timeout: 5000 });
}

// Waits for an html or diff frame received after the first `from` frames whose html contains
// `text`.
async function htmlWith(page, from, text) {
  await page.waitForFunction(([n, t]) => window.__live.received.slice(n)
    .some((m) => (m.t === 'html' || m.t === 'diff') && m.html.includes(t)), [from, text],
    { timeout: 5000 });
}
const receivedCount = async (page) => (await frames(page)).received.length;

const row = (page, id) => page.locator(`[data-clank-id="task-${id}"]`);

// The id of the row showing `title` (one row).
async function rowIdOf(page, title) {
  const li = page.locator('li.task', { hasText: title });
  await li.waitFor();
  return (await li.getAttribute('data-clank-id')).replace(/^task-/, '');
}

// Fills the add form a field at a time, at a person's pace: each field's event is answered
// before the next is sent (see "fields filled back to back" below for the fast case).
async function fillForm(page, { title, priority, estimate, tags }) {
  const step = async (fn) => { await fn(); await settled(page); };
  if (title !== undefined) await step(() => page.fill('[data-clank-id="new-task.title"]', title));
  if (priority !== undefined) await step(() => page.selectOption('[data-clank-id="new-task.priority"]', priority));
  if (estimate !== undefined) await step(() => page.fill('[data-clank-id="new-task.estimate"]', estimate));
  if (tags !== undefined) await step(() => page.fill('[data-clank-id="new-task.tags"]', tags));
}

// Records the submit button's states (text, aria-busy, disabled) through every DOM change.
async function recordSubmitStates(page) {
  await page.evaluate(() => {
    const root = document.querySelector('[data-clank-root]');
    const seen = [];
    const note = () => {
      const b = root.querySelector('[data-clank-id="new-task.submit"]');
      if (!b) return;
      const s = { text: b.textContent, busy: b.getAttribute('aria-busy'), disabled: b.disabled };
      const last = seen[seen.length - 1];
      if (!last || last.text !== s.text || last.busy !== s.busy || last.disabled !== s.disabled) seen.push(s);
    };
    note();
    new MutationObserver(note).observe(root, { subtree: true, childList: true, attributes: true, characterData: true });
    window.__submitStates = seen;
  });
}

const shot = (page, name) => page.screenshot({ path: join(SHOTS, name), fullPage: true });

// Another process (the sqlite3 shell) takes the database's write lock and holds it until
// release() (which waits for that process to end): the app's writes wait on their busy timeout
// meanwhile, on clank.db's threads (SPEC §12), and fail once it runs out (5 s).
async function holdWriteLock(dbPath) {
  const holder = spawn('sqlite3', [dbPath], { stdio: ['pipe', 'pipe', 'inherit'] });
  holder.stdin.write("BEGIN EXCLUSIVE;\nSELECT 'locked';\n");
  await new Promise((ok, fail) => {
    holder.stdout.once('data', ok);
    holder.once('error', fail);
  });
  return {
    release: async () => {
      holder.stdin.end('ROLLBACK;\n');
      if (holder.exitCode === null) await new Promise((ok) => holder.once('exit', ok));
    },
  };
}

// ---- the specs ----

describe('the tasks page', () => {
  let server;
  before(async () => { server = await startTasks(); });
  after(async () => { await server?.stop(); });

  test('is a live view at / with the stylesheet, and shows an empty list on a fresh database', async () => {
    const res = await request(server, '/');
    assert.equal(res.status, 200);
    assert.match(res.headers['content-type'], /^text\/html/);
    assert.match(res.text, /<link rel="stylesheet" href="\/assets\/app\.css">/);
    const css = await request(server, '/assets/app.css');
    assert.equal(css.status, 200);
    assert.match(css.headers['content-type'], /^text\/css/);

    const page = await openPage(server);
    assert.equal(await page.textContent('h1'), 'Tasks');
    assert.equal(await page.textContent('[data-clank-id="empty"]'), 'No tasks yet. Add your first one above.');
    assert.equal(await page.locator('li.task').count(), 0);
    // the stylesheet applies (the page is not unstyled)
    assert.equal(await page.$eval('.card', (el) => getComputedStyle(el).borderRadius), '10px');
    await shot(page, 'tasks-empty.png');
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('adds a task through the form: asks first, shows the new row, clears the form', async () => {
    const page = await openPage(server);
    await fillForm(page, { title: 'Ship documentation', priority: 'high', estimate: '2', tags: 'docs\nrelease' });
    await settled(page);
    await recordSubmitStates(page);
    await page.click('[data-clank-id="new-task.submit"]');
    const id = await rowIdOf(page, 'Ship documentation');

    assert.deepEqual(page.dialogs, [{ type: 'confirm', message: CREATE_CONFIRM }]);
    const submit = (await events(page)).find((m) => m.type === 'submit');
    assert.equal(submit.confirmed, undefined); // sent first: the server asked after checking it
    assert.deepEqual(await answers(page), [true]);
    assert.deepEqual(submit.values, { title: 'Ship documentation', priority: 'high', estimate: '2', tags: 'docs\nrelease' });

    const shown = row(page, id);
    assert.equal(await shown.locator('.task-title').textContent(), 'Ship documentation');
    assert.equal(await shown.locator('.badge').textContent(), 'high priority');
    assert.equal(await shown.locator('.estimate').textContent(), 'Estimate 2');
    assert.deepEqual(await shown.locator('.tag').allTextContents(), ['#docs', '#release']);
    assert.equal(await shown.locator('[data-clank-id^="complete-"]').textContent(), 'Complete');
    assert.equal(await page.textContent('[role="status"]'), 'Added \u201cShip documentation\u201d.');
    assert.equal(await page.inputValue('[data-clank-id="new-task.title"]'), '');
    assert.equal(await page.inputValue('[data-clank-id="new-task.tags"]'), '');

    const [task] = (await serverTasks(server)).filter((t) => t.id === id);
    assert.deepEqual({ ...task, createdAt: 0 }, {
      id, title: 'Ship documentation', priority: 'high', estimate: 2, tags: ['docs', 'release'],
      completed: false, archived: false, createdAt: 0,
    });
    const states = await page.evaluate(() => window.__submitStates);
    assert.deepEqual(states[0], { text: 'Add task', busy: null, disabled: false });
    assert.deepEqual(states[states.length - 1], { text: 'Add task', busy: null, disabled: false });
    await page.close();
  });

  // SPEC §10/§11: the form shows its pending state while its runner runs, pushed while the
  // handler waits: tasks.create waits on clank.db (SPEC §12) without blocking the loop. So that
  // the insert surely lasts longer than a push (at most every 50 ms), another process holds the
  // write lock for 300 ms: the insert waits for it on its busy timeout, a real slow database.
  test('shows the pending state while the task is being added', async () => {
    const page = await openPage(server);
    await fillForm(page, { title: 'Pending state', tags: 'ui' });
    await recordSubmitStates(page);
    const lock = await holdWriteLock(join(server.dir, 'tasks.db'));
    try {
      await page.click('[data-clank-id="new-task.submit"]');
      await sleep(300);
    } finally {
      await lock.release();
    }
    await rowIdOf(page, 'Pending state');
    const states = await page.evaluate(() => window.__submitStates);
    await page.close();
    assert.deepEqual(states, [
      { text: 'Add task', busy: null, disabled: false },
      { text: 'Adding\u2026', busy: 'true', disabled: true },
      { text: 'Add task', busy: null, disabled: false },
    ]);
  });

  // A person who types or moves to the next field faster than the server answers sends events
  // from a DOM whose answers are still on their way (SPEC §11's v): they all reach the view.
  test('fields filled back to back all reach the server', async () => {
    const page = await openPage(server);
    const typed = 'The quick brown fox jumps over the lazy dog';
    await page.click('[data-clank-id="new-task.title"]');
    await page.keyboard.type(typed);
    await page.selectOption('[data-clank-id="new-task.priority"]', 'low');
    await page.fill('[data-clank-id="new-task.estimate"]', '4');
    await settled(page);
    const values = {};
    const walk = (list) => { for (const n of list) { if (n.name) values[n.name] = n.value; walk(n.children || []); } };
    walk(await serverSurface(server, page.session));
    await page.close();
    assert.deepEqual(values, { title: typed, priority: 'low', estimate: '4', tags: undefined });
  });

  test('shows a validation error at its field and creates nothing', async () => {
    const before = (await serverTasks(server)).length;
    const page = await openPage(server);
    await fillForm(page, { title: '', estimate: '-1' });
    await page.click('[data-clank-id="new-task.submit"]');
    const titleError = page.locator('#new-task-title-error');
    await titleError.waitFor();
    // checked before anything is confirmed (issue 34): nobody was asked about an invalid task
    assert.deepEqual(page.dialogs, []);
    assert.equal(await titleError.getAttribute('role'), 'alert');
    assert.equal(await titleError.textContent(), 'Required.');
    assert.equal(await page.textContent('#new-task-estimate-error'), 'Must be at least 0.');
    // next to its field: in the same field box, right after the control that describes it
    for (const name of ['title', 'estimate']) {
      const where = await page.$eval(`#new-task-${name}`, (input) => ({
        invalid: input.getAttribute('aria-invalid'),
        describedBy: input.getAttribute('aria-describedby'),
        next: input.nextElementSibling?.id,
        field: input.parentElement.className,
      }));
      assert.deepEqual(where, { invalid: 'true', describedBy: `new-task-${name}-error`, next: `new-task-${name}-error`, field: 'clank-field' });
    }
    assert.equal(await page.locator('#new-task-priority-error, #new-task-tags-error').count(), 0);
    await shot(page, 'tasks-validation-error.png');
    assert.equal((await serverTasks(server)).length, before);
    // typing a title clears its error
    await page.type('[data-clank-id="new-task.title"]', 'x');
    await titleError.waitFor({ state: 'detached' });
    await page.close();
  });

  test('completes a task', async () => {
    const { id } = await action(server, 'tasks.create', { title: 'Write the changelog', estimate: null, tags: [] });
    const page = await openPage(server);
    await row(page, id).waitFor();
    await page.click(`[data-clank-id="complete-${id}"]`);
    await row(page, id).locator('.status').waitFor();
    assert.deepEqual(page.dialogs, [{ type: 'confirm', message: COMPLETE_CONFIRM }]);
    assert.equal(await row(page, id).getAttribute('class'), 'task done');
    assert.equal(await row(page, id).locator('.status').textContent(), 'Done');
    assert.equal(await page.locator(`[data-clank-id="complete-${id}"]`).count(), 0);
    const task = (await serverTasks(server)).find((t) => t.id === id);
    assert.equal(task.completed, true);
    await page.close();
  });

  test('archives a task when the dialog is accepted: the row goes', async () => {
    const { id } = await action(server, 'tasks.create', { title: 'Old idea', estimate: null, tags: [] });
    const page = await openPage(server);
    await row(page, id).waitFor();
    await page.click(`[data-clank-id="archive-${id}"]`);
    await row(page, id).waitFor({ state: 'detached' });
    assert.deepEqual(page.dialogs, [{ type: 'confirm', message: ARCHIVE_CONFIRM }]);
    const sent = await events(page);
    assert.equal(sent.length, 1);
    assert.equal(sent[0].type, 'click');
    assert.deepEqual(await answers(page), [true]);
    assert.equal((await serverTasks(server)).find((t) => t.id === id), undefined);
    assert.equal((await serverTasks(server, true)).find((t) => t.id === id).archived, true);
    await page.close();
  });

  test('keeps the task when the archive dialog is dismissed: the action does not run', async () => {
    const { id } = await action(server, 'tasks.create', { title: 'Keep me', estimate: null, tags: [] });
    const page = await openPage(server);
    await row(page, id).waitFor();
    page.answer = 'dismiss';
    await page.click(`[data-clank-id="archive-${id}"]`);
    await page.locator('[data-clank-id="action-error"]').waitFor();
    assert.deepEqual(page.dialogs, [{ type: 'confirm', message: ARCHIVE_CONFIRM }]);
    assert.deepEqual(await answers(page), [false]);
    assert.equal(await page.textContent('[data-clank-id="action-error"]'),
      'Could not archive \u201cKeep me\u201d: The action was not confirmed.');
    assert.equal(await row(page, id).count(), 1);
    const task = (await serverTasks(server, true)).find((t) => t.id === id);
    assert.equal(task.archived, false);
    // the server's view of this session still lists the task and its button
    const nodes = JSON.stringify(await serverSurface(server, page.session));
    assert.ok(nodes.includes(`"archive-${id}"`), nodes);
    await page.close();
  });

  test('shows changes made elsewhere at once: another page and an agent, with no event in this page', async () => {
    const page = await openPage(server);
    const other = await openPage(server);
    const sentBefore = (await events(page)).length;
    // an agent over the bridge: the action publishes the user's topic, the page re-reads its list
    const { id } = await action(server, 'tasks.create', { title: 'Made by an agent', priority: 'low', estimate: 0.5, tags: ['bridge'] });
    await row(page, id).waitFor({ timeout: 5000 });
    await row(other, id).waitFor({ timeout: 5000 });
    await action(server, 'tasks.complete', { id });
    await page.locator(`[data-clank-id="task-${id}"].done`).waitFor({ timeout: 5000 });
    // another page: an add there shows here
    await fillForm(other, { title: 'Added in the other page', estimate: '1', tags: 'ui' });
    await other.click('[data-clank-id="new-task.submit"]');
    const added = await rowIdOf(other, 'Added in the other page');
    await row(page, added).waitFor({ timeout: 5000 });
    assert.equal((await events(page)).length, sentBefore, 'this page sent no event');
    assert.equal(await row(page, id).getAttribute('class'), 'task done');
    await shot(page, 'tasks-with-tasks.png');
    await other.close();
    await page.close();
  });

  // A reminder (tasks.create's remindAt) is a durable job: when it fires it marks the task and
  // publishes the user's topic, so the open page re-renders with the badge.
  test('shows a reminder that fires while the page is open, without a reload or an event', async () => {
    const page = await openPage(server);
    await page.evaluate(() => { window.__marker = 'not reloaded'; });
    const sentBefore = (await events(page)).length;
    const remindAt = Date.now() + 1500;
    const { id } = await action(server, 'tasks.create', { title: 'Call the bank', estimate: null, tags: [], remindAt });
    await row(page, id).waitFor({ timeout: 5000 });
    const badge = page.locator(`[data-clank-id="reminder-${id}"]`);
    assert.equal(await badge.count(), 0); // not before its time
    await badge.waitFor({ timeout: 10000 });
    assert.ok(Date.now() >= remindAt, 'shown before its time');
    assert.equal(await badge.textContent(), 'Reminder');
    const label = 'Reminder: the time set for this task has come';
    assert.equal(await page.getByRole('note', { name: label }).count(), 1);
    assert.equal(await page.evaluate(() => window.__marker), 'not reloaded');
    assert.equal((await events(page)).length, sentBefore, 'this page sent no event');
    const task = (await serverTasks(server)).find((t) => t.id === id);
    assert.equal(task.remindAt, remindAt);
    assert.ok(task.remindedAt >= remindAt, `remindedAt ${task.remindedAt} < remindAt ${remindAt}`);
    // agents see it too: a node of its own, and the row's description
    const flat = [];
    const walk = (nodes) => { for (const n of nodes) { flat.push(n); walk(n.children || []); } };
    walk(await serverSurface(server, page.session));
    const byId = Object.fromEntries(flat.filter((n) => n.id).map((n) => [n.id, n]));
    assert.deepEqual(byId[`reminder-${id}`], { id: `reminder-${id}`, tag: 'span', role: 'note', label });
    assert.equal(byId[`task-${id}`].description, 'open; reminder due');
    await shot(page, 'tasks-reminder.png');
    // done, the badge goes
    await page.click(`[data-clank-id="complete-${id}"]`);
    await badge.waitFor({ state: 'detached' });
    assert.equal(await row(page, id).getAttribute('class'), 'task done');
    await page.close();
  });

  test('shows a failed action as an alert: the database is locked', async () => {
    const { id } = await action(server, 'tasks.create', { title: 'Blocked by a lock', estimate: null, tags: [] });
    const page = await openPage(server);
    await row(page, id).waitFor();
    // another process holds the write lock past the app's 5 s busy timeout
    const lock = await holdWriteLock(join(server.dir, 'tasks.db'));
    try {
      await page.click(`[data-clank-id="complete-${id}"]`);
      const alert = page.locator('[data-clank-id="action-error"]');
      // the busy timeout is 5 s of SQLite's own sleeps, which run late on a loaded machine:
      // 15 s was once not enough under the sanitizers beside the other specs
      await alert.waitFor({ timeout: 30000 });
      assert.equal(await alert.getAttribute('role'), 'alert');
      assert.equal(await alert.textContent(), 'Could not complete \u201cBlocked by a lock\u201d: The action failed.');
    } finally {
      await lock.release();
    }
    assert.equal(await row(page, id).getAttribute('class'), 'task'); // still open
    // once the lock is gone, the same click works and the alert goes (at once: the pending
    // render, pushed while the action waits on the database, already has no alert)
    await page.click(`[data-clank-id="complete-${id}"]`);
    await page.locator('[data-clank-id="action-error"]').waitFor({ state: 'detached' });
    await row(page, id).locator('.status').waitFor();
    assert.equal(await page.locator('[data-clank-id="action-error"]').count(), 0);
    assert.equal(await row(page, id).getAttribute('class'), 'task done');
    assert.equal((await serverTasks(server)).find((t) => t.id === id).completed, true);
    await page.close();
  });

  test('keeps focus and caret in a field while the server re-renders', async () => {
    const page = await openPage(server);
    // an error first, so the first keystroke's re-render patches the focused input itself
    await page.click('[data-clank-id="new-task.submit"]');
    await page.locator('#new-task-title-error').waitFor();
    const input = page.locator('[data-clank-id="new-task.title"]');
    await input.click();
    await input.evaluate((el) => { el.__mark = 'same element'; });
    // a key at a time, each answered before the next (see "fast typing" below)
    await page.keyboard.type('Hello world', { delay: 60 });
    await page.locator('#new-task-title-error').waitFor({ state: 'detached' });
    assert.equal(await input.getAttribute('aria-invalid'), null); // patched while focused
    await settled(page);
    await page.keyboard.press('Home');
    for (let i = 0; i < 5; i++) await page.keyboard.press('ArrowRight');
    const received = await receivedCount(page);
    await page.keyboard.type(',');
    // the server rendered the new value, and that html was patched in
    await htmlWith(page, received, 'value="Hello, world"');
    await settled(page);
    const state = await page.evaluate(() => {
      const el = document.activeElement;
      return { id: el.getAttribute('data-clank-id'), mark: el.__mark, value: el.value, start: el.selectionStart, end: el.selectionEnd };
    });
    assert.deepEqual(state, { id: 'new-task.title', mark: 'same element', value: 'Hello, world', start: 6, end: 6 });
    // a selection made before the server's answer arrives survives the patch too
    const before = await receivedCount(page);
    await input.evaluate((el) => {
      el.value += '!';
      el.dispatchEvent(new Event('input', { bubbles: true }));
      el.setSelectionRange(2, 4);
    });
    await htmlWith(page, before, 'value="Hello, world!"');
    await settled(page);
    assert.deepEqual(await page.evaluate(() => {
      const el = document.activeElement;
      return { mark: el.__mark, value: el.value, start: el.selectionStart, end: el.selectionEnd };
    }), { mark: 'same element', value: 'Hello, world!', start: 2, end: 4 });
    await page.close();
  });

  test('the browser inspect() deep-equals the server\'s for the same session', async () => {
    const { id } = await action(server, 'tasks.create', { title: 'Inspect me', priority: 'normal', estimate: 3, tags: ['a', 'b'] });
    const page = await openPage(server);
    await row(page, id).waitFor();
    await fillForm(page, { title: 'Draft title', priority: 'low' });
    const browserNodes = await page.evaluate(() =>
      window.clank.createAgentSurface(document.querySelector('[data-clank-root]')).inspect());
    const serverNodes = await serverSurface(server, page.session);
    assert.deepEqual(browserNodes, serverNodes);
    // and it says what an agent needs
    const flat = [];
    const walk = (nodes) => { for (const n of nodes) { flat.push(n); walk(n.children || []); } };
    walk(serverNodes);
    const byId = Object.fromEntries(flat.filter((n) => n.id).map((n) => [n.id, n]));
    assert.deepEqual(byId['new-task.title'], {
      id: 'new-task.title', tag: 'input', role: 'textbox', label: 'Short task title', name: 'title',
      type: 'text', required: true, value: 'Draft title',
    });
    assert.equal(byId['new-task.priority'].value, 'low');
    assert.equal(byId['new-task'].action, 'tasks.create');
    // the form's own name (its submit button's words), not every control's text run together
    assert.equal(byId['new-task'].label, 'Add task');
    assert.deepEqual(byId[`archive-${id}`], {
      id: `archive-${id}`, tag: 'button', role: 'button', label: 'Archive \u201cInspect me\u201d',
      intent: 'destructive-control', action: 'tasks.archive', type: 'button',
    });
    assert.equal(byId[`complete-${id}`].action, 'tasks.complete');
    assert.equal(byId[`task-${id}`].label, 'Inspect me');
    assert.equal(byId[`task-${id}`].description, 'open; normal priority; estimate 3; tags a, b');
    await page.close();
  });
});

describe('the tasks page when the database cannot be opened', () => {
  let server;
  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'clank-tasks-nodb-'));
    server = await startServer({
      app: join(TASKS_APP, 'app.lua'),
      // one user without accounts: the list's own failure, not the sign-in's, is what is shown
      env: { CLANK_TASKS_DB: join(dir, 'missing/folder/tasks.db'), CLANK_TASKS_USER: 'browser-spec' },
      cleanup: dir,
    });
  });
  after(async () => { await server?.stop(); });

  test('shows an alert instead of the list, without the server\'s message', async () => {
    const page = await openPage(server);
    const alert = page.locator('[data-clank-id="list-error"]');
    assert.equal(await alert.getAttribute('role'), 'alert');
    assert.equal(await alert.textContent(), 'Could not load your tasks: The action failed.');
    assert.equal(await page.locator('[data-clank-id="empty"], li.task').count(), 0);
    await page.close();
  });
});

describe('hot reload of the tasks app', () => {
  let server;
  before(async () => { server = await startTasks({ copy: true, watch: true }); });
  after(async () => { await server?.stop(); });

  test('an edited string shows in the open page without navigation', async () => {
    const { id } = await action(server, 'tasks.create', { title: 'Survives reloads', estimate: null, tags: [] });
    const page = await openPage(server);
    await row(page, id).waitFor();
    await page.evaluate(() => { window.__marker = 'still here'; });
    assert.equal(await page.textContent('#add-heading'), 'Add a task');
    const source = readFileSync(server.appFile, 'utf8');
    assert.ok(source.includes('"Add a task"'));
    writeFileSync(server.appFile, source.replace('"Add a task"', '"Add something to do"'));
    await page.waitForFunction(() => document.querySelector('#add-heading')?.textContent === 'Add something to do',
      null, { timeout: 10000 });
    assert.equal(await page.evaluate(() => window.__marker), 'still here');
    assert.ok((await frames(page)).received.some((m) => m.t === 'reload'));
    assert.equal(await row(page, id).count(), 1);
    // and the page still works on the new generation
    await page.click('[data-clank-id="refresh"]');
    await settled(page);
    assert.equal(await page.evaluate(() => window.__marker), 'still here');
    await page.close();
  });
});

describe('a password field', () => {
  let server;
  before(async () => { server = await startServer({ app: fixture('live_password/app.lua') }); });
  after(async () => { await server?.stop(); });

  test('never shows its value in the browser\'s or the server\'s surface', async () => {
    const SECRET = 'hunter2-Secret-7731';
    const page = await openPage(server);
    await page.fill('[data-clank-id="login.user"]', 'ada');
    await settled(page);
    await page.fill('[data-clank-id="login.password"]', SECRET);
    // the server got it: the view shows its length
    await page.waitForFunction((n) => document.querySelector('[data-clank-id="length"]')?.textContent === `Password: ${n} characters`,
      SECRET.length);
    await settled(page);
    const browserNodes = await page.evaluate(() =>
      window.clank.createAgentSurface(document.querySelector('[data-clank-root]')).inspect());
    const serverNodes = await serverSurface(server, page.session);
    const find = (nodes, id) => {
      for (const n of nodes) {
        if (n.id === id) return n;
        const c = find(n.children || [], id);
        if (c) return c;
      }
      return null;
    };
    for (const nodes of [browserNodes, serverNodes]) {
      assert.ok(!JSON.stringify(nodes).includes('hunter2'), JSON.stringify(nodes));
      const pw = find(nodes, 'login.password');
      assert.deepEqual(pw, { id: 'login.password', tag: 'input', role: 'textbox', label: 'Password', name: 'password', type: 'password', required: true });
      assert.equal(find(nodes, 'login.user').value, 'ada');
    }
    assert.deepEqual(browserNodes, serverNodes);
    // nor in the html the server sent, nor in the page's markup
    assert.ok(!JSON.stringify((await frames(page)).received).includes('hunter2'));
    assert.ok(!(await page.content()).includes('hunter2'));
    assert.equal(await page.inputValue('[data-clank-id="login.password"]'), SECRET);
    await page.close();
  });
});
