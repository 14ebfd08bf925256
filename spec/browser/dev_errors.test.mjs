// Errors in the browser and pages that recover (issue 34, SPEC §11 and §14) in Chromium against
// the real clank-run serving a copy of spec/fixtures/apps/live, whose app.lua the specs rewrite
// as an editor saves it. In development (the default on loopback) a render error and a syntax
// error during hot reload, and a handler's error, show an overlay with the message, file:line
// and the traceback (the app's frames, the runtime's folded), and the next good save mends the
// page without a reload; with --production the page shows a generic message and only the log
// has the detail. A page whose server stops reconnects, for as long as it takes, and works on.
// Screenshots go to build/screenshots/dev-error-*.png.
//
//   CLANK_RUN=build/clank-run node --test spec/browser/dev_errors.test.mjs
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { copyFixture, fixture, request, root, sleep, startServer } from './helpers.mjs';

const CHROMIUM = process.env.CLANK_CHROMIUM || '/usr/bin/chromium';
const SHOTS = join(root, 'build/screenshots');
const WAIT = 10000; // a save reaches the page well within this, on a busy machine too

let browser;
before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  mkdirSync(SHOTS, { recursive: true });
});
after(async () => { await browser?.close(); });

// A copy of the live fixture, served with hot reload; server.save(text) writes its app.lua.
async function startCopy(args = []) {
  const dir = copyFixture('live');
  const appFile = join(dir, 'app.lua');
  const server = await startServer({ app: appFile, watch: true, args, cleanup: dir });
  server.source = readFileSync(appFile, 'utf8');
  server.save = (text) => writeFileSync(appFile, text);
  return server;
}

// The one occurrence of `old` in text replaced → [the new text, the line (1-based) `mark` is on].
function edit(text, old, replacement, mark = replacement) {
  const at = text.indexOf(old);
  assert.ok(at >= 0 && text.indexOf(old, at + 1) < 0, `${old} is not in the fixture once`);
  const out = text.slice(0, at) + replacement + text.slice(at + old.length);
  return [out, out.slice(0, out.indexOf(mark)).split('\n').length];
}

// Opens a page of the app and waits for its live connection (unless opts.live is false). The
// page records the frames it receives (window.__received) and counts its WebSockets (page.sockets).
async function openPage(server, path = '/views/counter', opts = {}) {
  const page = await browser.newPage({ viewport: { width: 1000, height: 760 } });
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e));
  page.sockets = 0;
  page.on('websocket', () => { page.sockets++; });
  await page.addInitScript(() => {
    window.__received = [];
    const Native = window.WebSocket;
    window.WebSocket = class extends Native {
      constructor(...args) {
        super(...args);
        this.addEventListener('message', (e) => window.__received.push(JSON.parse(e.data)));
      }
    };
  });
  page.response = await page.goto(server.base.replace(/\/$/, path));
  if (opts.live !== false) await page.waitForSelector('[data-clank-root][data-clank-status="open"]');
  await page.evaluate(() => { window.__marker = 'never navigated'; });
  return page;
}

const received = (page) => page.evaluate(() => window.__received);
const countText = (page) => page.textContent('[data-clank-id="count"]');

// What the overlay shows → { title, message, where, appFrames, runtimeFrames, folded }.
async function overlay(page) {
  await page.waitForSelector('#clank-dev-error', { timeout: WAIT });
  return page.evaluate(() => {
    const o = document.querySelector('#clank-dev-error');
    const texts = (sel) => Array.from(o.querySelectorAll(sel), (e) => e.textContent);
    const details = o.querySelector('details');
    return {
      title: o.querySelector('h2').textContent,
      message: o.querySelector('pre').textContent,
      where: o.querySelector('p')?.textContent,
      appFrames: texts(':scope > div > ol > li'),
      runtimeFrames: texts('details li'),
      summary: details?.querySelector('summary').textContent,
      folded: details ? !details.open : null,
      inRoot: !!document.querySelector('[data-clank-root] #clank-dev-error'),
    };
  });
}

// Clicks the counter's "Add one" (whatever its label now) and waits for the count it makes.
async function roundTrip(page, expected) {
  await page.click('[data-clank-id="inc"]');
  await page.waitForFunction((t) => document.querySelector('[data-clank-id="count"]')?.textContent === t,
    expected, { timeout: WAIT });
}

const noOverlay = (page) => page.waitForFunction(() => !document.querySelector('#clank-dev-error'),
  null, { timeout: WAIT });

describe('errors in the browser in development (the default on loopback)', () => {
  test('a render error on save shows the overlay with file:line; the next good save mends the page in place', async () => {
    const server = await startCopy();
    try {
      const page = await openPage(server);
      const [broken, line] = edit(server.source, 'local count = d.count',
        'local count = d.count; error("render broke on save")', 'render broke on save');
      server.save(broken);
      const shown = await overlay(page);
      await page.screenshot({ path: join(SHOTS, 'dev-error-render.png') });
      assert.equal(shown.title, 'The view counter failed to mount');
      assert.equal(shown.message, 'render broke on save');
      assert.match(shown.where, new RegExp(`/app\\.lua:${line}$`));
      // the app's frames first: the render's line; the runtime's folded behind a toggle
      assert.match(shown.appFrames[0], new RegExp(`/app\\.lua:${line} in `));
      assert.ok(shown.appFrames.every((f) => !/\/clank\/|\[C\]/.test(f)), shown.appFrames.join('\n'));
      assert.equal(shown.folded, true);
      assert.match(shown.summary, /^Show runtime frames \(\d+\)$/);
      assert.ok(shown.runtimeFrames.some((f) => f.includes('/clank/ui/view.lua:')), shown.runtimeFrames.join('\n'));
      assert.ok(shown.runtimeFrames.every((f) => f !== '[C] in ?'), shown.runtimeFrames.join('\n'));
      assert.equal(shown.inRoot, false, 'outside the root: patches and the agent surface never see it');
      await page.click('#clank-dev-error summary');
      assert.ok(await page.isVisible('#clank-dev-error details li'));

      // a page loaded now gets the page with the error, and the overlay from its live channel
      const fresh = await openPage(server, '/views/counter', { live: false });
      assert.equal(fresh.response.status(), 500);
      assert.match((await overlay(fresh)).where, new RegExp(`/app\\.lua:${line}$`));

      const [mended] = edit(server.source, '"Add one"', '"Add uno"');
      server.save(mended);
      for (const p of [page, fresh]) {
        await p.waitForFunction(() => document.querySelector('[data-clank-id="inc"]')?.textContent === 'Add uno',
          null, { timeout: WAIT });
        await noOverlay(p);
        assert.equal(await p.evaluate(() => window.__marker), 'never navigated');
        await roundTrip(p, 'Count: 1');
        assert.deepEqual(p.errors, []);
      }
      const ts = (await received(page)).map((m) => m.t);
      assert.ok(ts.indexOf('dev-error') < ts.lastIndexOf('dev-clear'), ts.join(' '));
      await page.close();
      await fresh.close();
    } finally {
      await server.stop();
    }
  });

  test('a syntax error on save shows the overlay with file:line, the running version serving on; undoing it clears it', async () => {
    const server = await startCopy();
    try {
      const page = await openPage(server);
      const [broken, line] = edit(server.source, 'local items = {}',
        'local items = {}\nlocal = "a syntax error on save"', 'local = ');
      server.save(broken);
      const shown = await overlay(page);
      await page.screenshot({ path: join(SHOTS, 'dev-error-syntax.png') });
      assert.equal(shown.title, 'The app failed to load: the running version stays');
      assert.match(shown.message, /<name> expected near '='/);
      assert.match(shown.where, new RegExp(`/app\\.lua:${line}$`));
      // under the overlay, the page still runs on the version that loaded
      await page.evaluate(() => document.querySelector('[data-clank-id="inc"]').click());
      await page.waitForFunction(() => document.querySelector('[data-clank-id="count"]')?.textContent === 'Count: 1',
        null, { timeout: WAIT });

      // undone: the file as it was, which loads as a new version
      server.save(server.source);
      await page.waitForFunction(() => window.__received.some((m) => m.t === 'dev-clear'), null, { timeout: WAIT });
      await noOverlay(page);
      assert.equal(await page.evaluate(() => window.__marker), 'never navigated');
      assert.equal(await countText(page), 'Count: 0', 're-mounted from its props');
      await roundTrip(page, 'Count: 1');
      assert.deepEqual(page.errors, []);
      await page.close();
    } finally {
      await server.stop();
    }
  });

  test('a handler error shows the overlay with file:line; closing it leaves the page working', async () => {
    const server = await startCopy();
    try {
      const page = await openPage(server);
      const line = server.source.slice(0, server.source.indexOf('handler failed on purpose')).split('\n').length;
      await page.click('[data-clank-id="fail"]');
      const shown = await overlay(page);
      await page.screenshot({ path: join(SHOTS, 'dev-error-handler.png') });
      assert.equal(shown.title, 'The click handler of the view counter failed');
      assert.equal(shown.message, 'handler failed on purpose');
      assert.match(shown.where, new RegExp(`/app\\.lua:${line}$`));
      assert.match(shown.appFrames[0], new RegExp(`/app\\.lua:${line} in `));
      await page.click('#clank-dev-error button[aria-label="Close"]');
      await noOverlay(page);
      await roundTrip(page, 'Count: 1');
      await page.close();
    } finally {
      await server.stop();
    }
  });
});

describe('errors in the browser with --production', () => {
  test('a styled generic message and no traceback in the page; the log has the detail', async () => {
    const server = await startCopy(['--production']);
    try {
      const page = await openPage(server);
      await page.click('[data-clank-id="fail"]');
      const notice = page.locator('.clank-notice');
      await notice.waitFor({ state: 'visible', timeout: WAIT });
      assert.equal(await notice.textContent(), 'Something went wrong. Please try again.');
      const look = await notice.evaluate((e) => getComputedStyle(e).backgroundColor);
      assert.notEqual(look, 'rgba(0, 0, 0, 0)', 'the notice has a look of its own');

      const [broken] = edit(server.source, 'local count = d.count',
        'local count = d.count; error("render broke on save")', 'render broke on save');
      server.save(broken);
      await page.waitForFunction(() => document.querySelector('.clank-notice')?.textContent === 'The view failed to load.',
        null, { timeout: WAIT });
      await page.screenshot({ path: join(SHOTS, 'dev-error-production.png') });
      const res = await request(server, '/views/counter');
      assert.equal(res.status, 500);
      assert.match(res.text, /<h1>Something went wrong<\/h1>/);

      assert.equal(await page.locator('#clank-dev-error').count(), 0);
      const frames = JSON.stringify(await received(page));
      for (const text of [await page.content(), await page.textContent('body'), frames, res.text]) {
        for (const secret of ['on purpose', 'render broke', 'stack traceback', 'app.lua', '/clank/']) {
          assert.ok(!text.includes(secret), `${secret} reached the browser: ${text.slice(0, 2000)}`);
        }
      }
      assert.ok(!frames.includes('dev-error'));
      // the log has it all
      const log = server.stderr();
      assert.match(log, /click handler failed: .*\/app\.lua:\d+: handler failed on purpose\\nstack traceback:/);
      assert.match(log, /mount failed: .*\/app\.lua:\d+: render broke on save\\nstack traceback:\\n\\t[^\\]*\/app\.lua:\d+: /);

      // and a page that retried meanwhile comes back once a save mends the view
      server.save(server.source);
      await notice.waitFor({ state: 'hidden', timeout: WAIT });
      await page.waitForSelector('[data-clank-root][data-clank-status="open"]', { timeout: WAIT });
      await roundTrip(page, 'Count: 1');
      await page.close();
    } finally {
      await server.stop();
    }
  });
});

describe('a server that restarts with a page open', () => {
  // Stops the server, checks what the page says for 5 s, starts it again on the same port.
  async function restart(server, page, env) {
    await server.stop();
    const stopped = Date.now();
    const notice = page.locator('.clank-notice');
    await page.waitForFunction(() => document.querySelector('.clank-notice:not([hidden])')
      ?.textContent.startsWith('Cannot reach the server: retrying'), null, { timeout: WAIT });
    assert.equal(await page.getAttribute('[data-clank-root]', 'data-clank-status'), 'connecting');
    await page.screenshot({ path: join(SHOTS, 'dev-error-retrying.png') });
    // "Retry now" tries at once, whatever the wait
    await sleep(1500);
    const sockets = page.sockets;
    await notice.getByRole('button', { name: 'Retry now' }).click();
    for (const until = Date.now() + 1000; page.sockets === sockets && Date.now() < until;) await sleep(20);
    assert.ok(page.sockets > sockets, 'Retry now opened a WebSocket');
    await sleep(Math.max(0, 5000 - (Date.now() - stopped)));
    assert.equal(await page.getAttribute('[data-clank-root]', 'data-clank-status'), 'connecting',
      'still trying after 5 s');
    return startServer({ app: fixture('live/app.lua'), args: ['--port', String(server.port)], env });
  }

  test('reconnects once it is back after 5 s, re-mounted in place (CLANK_SECRET), and an event round-trips', async () => {
    const env = { CLANK_SECRET: 'restart-spec-secret' };
    const server = await startServer({ app: fixture('live/app.lua'), env });
    const page = await openPage(server);
    await roundTrip(page, 'Count: 1');
    const again = await restart(server, page, env);
    try {
      await page.waitForSelector('[data-clank-root][data-clank-status="open"]', { timeout: 15000 });
      assert.ok(await page.locator('.clank-notice').isHidden());
      assert.equal(await page.evaluate(() => window.__marker), 'never navigated');
      assert.equal(await countText(page), 'Count: 0', 're-mounted from its props');
      await roundTrip(page, 'Count: 1');
      assert.deepEqual(page.errors, []);
      await page.close();
    } finally {
      await again.stop();
    }
  });

  test('without CLANK_SECRET its session is unknown to the new run: the page reloads itself (4404) and works', async () => {
    const server = await startServer({ app: fixture('live/app.lua') });
    const page = await openPage(server);
    const reloaded = page.waitForEvent('load', { timeout: 30000 });
    const again = await restart(server, page, {});
    try {
      await reloaded;
      assert.equal(await page.evaluate(() => window.__marker), undefined);
      await page.waitForSelector('[data-clank-root][data-clank-status="open"]', { timeout: WAIT });
      await roundTrip(page, 'Count: 1');
      await page.close();
    } finally {
      await again.stop();
    }
  });
});
