// /__clank/inspector (SPEC §16) in Chromium against the real clank-run serving apps/tasks on a
// fresh SQLite file: an action called from the form generated from its input schema shows the
// bridge's JSON answer (after the confirmation §11 asks for), a view's surface tree is shown, and
// the request list shows paths without their query strings.
//
//   CLANK_RUN=build/clank-run node --test spec/browser/inspector.test.mjs
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { json, request, root, startServer } from './helpers.mjs';

const CHROMIUM = process.env.CLANK_CHROMIUM || '/usr/bin/chromium';
const CREATE_CONFIRM = 'Create one task in the current workspace.';

let browser;
let server;
before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  const dir = mkdtempSync(join(tmpdir(), 'clank-inspector-'));
  server = await startServer({
    app: join(root, 'apps/tasks/app.lua'),
    env: { CLANK_TASKS_DB: join(dir, 'tasks.db'), CLANK_TASKS_USER: 'inspector-spec' },
    cleanup: dir,
  });
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

// Opens the inspector, answering window.confirm as page.answer says and recording the questions.
async function openInspector() {
  const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
  page.dialogs = [];
  page.answer = 'accept';
  page.on('dialog', async (d) => {
    page.dialogs.push(d.message());
    if (page.answer === 'accept') await d.accept(); else await d.dismiss();
  });
  await page.goto(`${server.base}__clank/inspector`);
  await page.waitForSelector('[data-clank-root][data-clank-status="open"]');
  return page;
}

const answer = (page, name) => page.locator(`[data-clank-id="answer.${name}"]`);

describe('/__clank/inspector in a browser', () => {
  test('calls tasks.create from its generated form, after confirmation, and shows the JSON answer', async () => {
    const page = await openInspector();
    try {
      await page.fill('[data-clank-id="action-tasks.create.title"]', 'From the inspector');
      await page.fill('[data-clank-id="action-tasks.create.tags"]', 'one\ntwo');
      await page.click('[data-clank-id="action-tasks.create.submit"]');
      await answer(page, 'tasks.create').waitFor({ timeout: 5000 });
      const body = JSON.parse(await answer(page, 'tasks.create').textContent());
      assert.equal(body.ok, true);
      assert.equal(body.output.created, true);
      assert.equal(typeof body.output.id, 'string');
      assert.equal(page.dialogs.length, 1);
      assert.ok(page.dialogs[0].includes(CREATE_CONFIRM), page.dialogs[0]);
      // the task exists: read back through the bridge
      const res = await request(server, '/actions/tasks.list', { method: 'POST', json: {} });
      const tasks = json(res).output.tasks;
      assert.deepEqual(tasks.map((t) => t.title), ['From the inspector']);
      assert.deepEqual(tasks[0].tags, ['one', 'two']);
      // a call from a live view's event is one of clank_action_calls_total's (SPEC §15)
      const metrics = (await request(server, '/__clank/metrics')).text;
      assert.match(metrics, /^clank_action_calls_total\{action="tasks\.create",outcome="ok"\} 1$/m);
    } finally {
      await page.close();
    }
  });

  test('declining the confirmation calls nothing, and the answer says it was not confirmed', async () => {
    const page = await openInspector();
    try {
      page.answer = 'dismiss';
      await page.fill('[data-clank-id="action-tasks.create.title"]', 'Declined');
      await page.fill('[data-clank-id="action-tasks.create.tags"]', 'x');
      await page.click('[data-clank-id="action-tasks.create.submit"]');
      await answer(page, 'tasks.create').waitFor({ timeout: 5000 });
      assert.equal(page.dialogs.length, 1);
      assert.deepEqual(JSON.parse(await answer(page, 'tasks.create').textContent()),
        { ok: false, error: { code: 'CONFIRMATION_REQUIRED', message: 'The action was not confirmed.' } });
      const res = await request(server, '/actions/tasks.list', { method: 'POST', json: {} });
      assert.ok(!json(res).output.tasks.some((t) => t.title === 'Declined'));
    } finally {
      await page.close();
    }
  });

  // issue 34: the input is checked before anyone is asked to confirm it
  test('an invalid input shows its issues without asking for confirmation', async () => {
    const page = await openInspector();
    try {
      await page.click('[data-clank-id="action-tasks.create.submit"]');
      await answer(page, 'tasks.create').waitFor({ timeout: 5000 });
      const body = JSON.parse(await answer(page, 'tasks.create').textContent());
      assert.equal(body.error.code, 'INVALID_INPUT');
      assert.deepEqual(page.dialogs, []);
    } finally {
      await page.close();
    }
  });

  test('an action that needs no confirmation runs without asking; errors show as the bridge answers them', async () => {
    const page = await openInspector();
    try {
      await page.click('[data-clank-id="action-tasks.list.submit"]');
      await answer(page, 'tasks.list').waitFor({ timeout: 5000 });
      const body = JSON.parse(await answer(page, 'tasks.list').textContent());
      assert.equal(body.ok, true);
      assert.ok(Array.isArray(body.output.tasks));
      assert.equal(page.dialogs.length, 0);
      // tasks.complete with an unknown id: the action's own error (confirmed first)
      await page.fill('[data-clank-id="action-tasks.complete.id"]', 'no-such-task');
      await page.click('[data-clank-id="action-tasks.complete.submit"]');
      await answer(page, 'tasks.complete').waitFor({ timeout: 5000 });
      const failed = JSON.parse(await answer(page, 'tasks.complete').textContent());
      assert.deepEqual(failed, { ok: false, error: { code: 'NOT_FOUND', message: 'Task not found.' } });
    } finally {
      await page.close();
    }
  });

  test('shows the surface tree of the app\'s view', async () => {
    const page = await openInspector();
    try {
      const text = await page.locator('#surface-tasks').textContent();
      const nodes = JSON.parse(text);
      // the node of this id among these nodes and their children (wrappers included, SPEC §9)
      const find = (list, id) => {
        for (const n of list || []) {
          const found = n.id === id ? n : find(n.children, id);
          if (found) return found;
        }
        return null;
      };
      const form = find(nodes, 'new-task');
      assert.ok(form, text);
      assert.equal(form.action, 'tasks.create');
      assert.equal(find(form.children, 'new-task.title')?.role, 'textbox', text);
      // the view's main, which has no id or role, is listed as the wrapper of its kept nodes
      assert.deepEqual(Object.keys(nodes[0]).sort(), ['children', 'tag']);
      assert.equal(nodes[0].tag, 'main');
    } finally {
      await page.close();
    }
  });

  test('follows a reload: the page is mounted again on the new generation and lists the reload', async () => {
    const page = await openInspector();
    try {
      assert.equal(await page.locator('#reloads').count(), 0);
      server.child.kill('SIGHUP');
      await page.locator('#reloads td', { hasText: /^ok$/ }).waitFor({ timeout: 5000 });
      await page.waitForSelector('[data-clank-root][data-clank-status="open"]');
      await page.click('[data-clank-id="action-tasks.list.submit"]');
      await answer(page, 'tasks.list').waitFor({ timeout: 5000 });
      assert.equal(JSON.parse(await answer(page, 'tasks.list').textContent()).ok, true);
    } finally {
      await page.close();
    }
  });

  test('lists recent requests with query strings and session tokens left out', async () => {
    const page0 = await browser.newPage();
    await page0.goto(`${server.base}?secret=hunter2`);
    await page0.waitForSelector('[data-clank-root][data-clank-status="open"]');
    await page0.close();
    const page = await openInspector();
    try {
      const rows = await page.locator('#requests tbody tr').allTextContents();
      const cells = await page.locator('#requests tbody tr td:nth-child(3)').allTextContents();
      assert.ok(cells.includes('/'), cells.join(' | '));
      assert.ok(cells.includes('/__clank/sessions/<redacted>/live'), cells.join(' | '));
      assert.ok(!rows.some((r) => r.includes('hunter2')), rows.join('\n'));
      assert.ok(!(await page.content()).includes('hunter2'));
    } finally {
      await page.close();
    }
  });
});
