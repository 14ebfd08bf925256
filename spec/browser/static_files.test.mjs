// app.static (SPEC §15) against the real clank-run serving a copy of
// spec/fixtures/apps/live_static, through node:http and raw TCP. The copy gets, at test time, a
// 3 MiB file of random bytes, a fixed modification time, a dot-folder and symlinks (inside the
// folder, and pointing outside it). Every expected value is written by hand from the SPEC
// (and RFC 9110 for the validators and ranges).
//
//   CLANK_RUN=build/clank-run node --test spec/browser/static_files.test.mjs
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { copyFixture, rawExchange, request, startServer } from './helpers.mjs';

const CSS = 'body { color: #123456; }\n'; // public/style.css, 25 bytes
const MTIME = new Date('2024-01-02T03:04:05Z');
const LAST_MODIFIED = 'Tue, 02 Jan 2024 03:04:05 GMT';
const BIG = randomBytes(3 * 1024 * 1024 + 17);
const sha = (b) => createHash('sha256').update(b).digest('hex');

describe('app.static (SPEC §15)', () => {
  let server;
  let dir;
  before(async () => {
    dir = copyFixture('live_static');
    const pub = join(dir, 'public');
    writeFileSync(join(pub, 'big.bin'), BIG);
    mkdirSync(join(pub, '.private'));
    writeFileSync(join(pub, '.private', 'data.txt'), 'secret: in a dot-folder\n');
    symlinkSync('style.css', join(pub, 'alias.css')); // resolves inside the folder
    symlinkSync('../secret.txt', join(pub, 'outside.txt')); // resolves outside it
    symlinkSync('..', join(pub, 'up')); // a folder outside it
    utimesSync(join(pub, 'style.css'), MTIME, MTIME);
    server = await startServer({ app: join(dir, 'app.lua'), cleanup: dir });
  });
  after(async () => { await server?.stop(); });

  const get = (path, headers, method = 'GET') => request(server, path, { headers, method });

  test('GET a CSS file → 200 with its bytes, content type by extension, etag and last-modified', async () => {
    const res = await get('/assets/style.css');
    assert.equal(res.status, 200);
    assert.equal(res.text, CSS);
    assert.equal(res.headers['content-type'], 'text/css; charset=utf-8');
    assert.equal(res.headers['content-length'], String(CSS.length));
    assert.match(res.headers.etag || '', /^(W\/)?"[^"]+"$/);
    assert.equal(res.headers['last-modified'], LAST_MODIFIED);
    const txt = await get('/assets/sub/inner.txt');
    assert.equal(txt.status, 200);
    assert.equal(txt.text, 'inner text file\n');
    assert.match(txt.headers['content-type'], /^text\/plain/);
  });

  test('static responses carry x-content-type-options: nosniff (SPEC §13)', async () => {
    assert.equal((await get('/assets/style.css')).headers['x-content-type-options'], 'nosniff');
    assert.equal((await get('/assets/nope.css')).headers['x-content-type-options'], 'nosniff');
  });

  test('If-None-Match with the etag → 304 without a body', async () => {
    const { headers } = await get('/assets/style.css');
    for (const inm of [headers.etag, `"other", ${headers.etag}`, '*', `W/${headers.etag.replace(/^W\//, '')}`]) {
      const res = await get('/assets/style.css', { 'if-none-match': inm });
      assert.equal(res.status, 304, inm);
      assert.equal(res.body.length, 0);
      assert.equal(res.headers.etag, headers.etag);
    }
    const other = await get('/assets/style.css', { 'if-none-match': '"not-the-etag"' });
    assert.equal(other.status, 200);
    assert.equal(other.text, CSS);
  });

  test('If-Modified-Since → 304 when not modified since, 200 when modified', async () => {
    const same = await get('/assets/style.css', { 'if-modified-since': LAST_MODIFIED });
    assert.equal(same.status, 304);
    assert.equal(same.body.length, 0);
    const later = await get('/assets/style.css', { 'if-modified-since': 'Wed, 03 Jan 2024 00:00:00 GMT' });
    assert.equal(later.status, 304);
    const earlier = await get('/assets/style.css', { 'if-modified-since': 'Tue, 02 Jan 2024 03:04:04 GMT' });
    assert.equal(earlier.status, 200);
    assert.equal(earlier.text, CSS);
    // RFC 9110 §13.1.3: If-Modified-Since is ignored when If-None-Match is present
    const both = await get('/assets/style.css', {
      'if-none-match': '"not-the-etag"', 'if-modified-since': LAST_MODIFIED,
    });
    assert.equal(both.status, 200);
  });

  test('Range: bytes=0-3 → 206 with content-range', async () => {
    const res = await get('/assets/style.css', { range: 'bytes=0-3' });
    assert.equal(res.status, 206);
    assert.equal(res.headers['content-range'], 'bytes 0-3/25');
    assert.equal(res.headers['content-length'], '4');
    assert.equal(res.text, 'body');
    assert.equal(res.headers['content-type'], 'text/css; charset=utf-8');
  });

  test('Range: bytes=-2 → the last two bytes', async () => {
    const res = await get('/assets/style.css', { range: 'bytes=-2' });
    assert.equal(res.status, 206);
    assert.equal(res.headers['content-range'], 'bytes 23-24/25');
    assert.equal(res.text, '}\n');
  });

  test('Range: an open or overlong end is cut at the last byte', async () => {
    const open = await get('/assets/style.css', { range: 'bytes=20-' });
    assert.equal(open.status, 206);
    assert.equal(open.headers['content-range'], 'bytes 20-24/25');
    assert.equal(open.text, CSS.slice(20));
    const long = await get('/assets/style.css', { range: 'bytes=5-1000' });
    assert.equal(long.status, 206);
    assert.equal(long.headers['content-range'], 'bytes 5-24/25');
    assert.equal(long.text, CSS.slice(5));
  });

  test('an unsatisfiable range → 416 with content-range: bytes */size', async () => {
    for (const range of ['bytes=25-', 'bytes=100-200']) {
      const res = await get('/assets/style.css', { range });
      assert.equal(res.status, 416, range);
      assert.equal(res.headers['content-range'], 'bytes */25');
    }
  });

  test('HEAD → the headers of GET and no body', async () => {
    const res = await get('/assets/style.css', undefined, 'HEAD');
    assert.equal(res.status, 200);
    assert.equal(res.body.length, 0);
    assert.equal(res.headers['content-type'], 'text/css; charset=utf-8');
    assert.equal(res.headers['content-length'], '25');
    assert.equal(res.headers['last-modified'], LAST_MODIFIED);
    assert.equal(res.headers.etag, (await get('/assets/style.css')).headers.etag);
  });

  test('dotfiles and dot-folders → 404', async () => {
    for (const path of ['/assets/.hidden.css', '/assets/%2ehidden.css', '/assets/.private/data.txt',
      '/assets/%2Eprivate/data.txt', '/assets/sub/.hidden.css']) {
      const res = await get(path);
      assert.equal(res.status, 404, path);
      assert.doesNotMatch(res.text, /secret:/, path);
    }
  });

  test('.. and its escapes cannot leave the folder → 404', async () => {
    for (const path of ['/assets/../secret.txt', '/assets/sub/../../secret.txt', '/assets/%2e%2e/secret.txt',
      '/assets/%2E%2E/secret.txt', '/assets/sub/%2e%2e/%2e%2e/secret.txt', '/assets/..%2fsecret.txt',
      '/assets/%2e%2e%2fsecret.txt', '/assets/sub%2f..%2f..%2fsecret.txt', '/assets/..%5csecret.txt']) {
      const res = await get(path);
      assert.equal(res.status, 404, path);
      assert.doesNotMatch(res.text, /secret:/, path);
    }
  });

  test('symlinks: one resolving inside the folder is served, one pointing outside → 404', async () => {
    const inside = await get('/assets/alias.css');
    assert.equal(inside.status, 200);
    assert.equal(inside.text, CSS);
    for (const path of ['/assets/outside.txt', '/assets/up/secret.txt', '/assets/up/app.lua']) {
      const res = await get(path);
      assert.equal(res.status, 404, path);
      assert.doesNotMatch(res.text, /secret:/, path);
    }
  });

  test('folders are never listed → 404', async () => {
    for (const path of ['/assets/sub', '/assets/sub/', '/assets/', '/assets']) {
      const res = await get(path);
      assert.equal(res.status, 404, path);
      assert.doesNotMatch(res.text, /inner\.txt|style\.css/, path);
    }
  });

  test('a missing file → 404', async () => {
    for (const path of ['/assets/nope.css', '/assets/sub/nope.txt', '/assets/style.css/x']) {
      assert.equal((await get(path)).status, 404, path);
    }
  });

  test('a 3 MiB file arrives byte-identical, and a range of it too', async () => {
    const res = await get('/assets/big.bin');
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-length'], String(BIG.length));
    assert.equal(res.body.length, BIG.length);
    assert.equal(sha(res.body), sha(BIG));
    const part = await get('/assets/big.bin', { range: 'bytes=2000000-2000099' });
    assert.equal(part.status, 206);
    assert.equal(part.headers['content-range'], `bytes 2000000-2000099/${BIG.length}`);
    assert.ok(part.body.equals(BIG.subarray(2000000, 2000100)));
  });

  test('pipelined requests after file answers come back in order', async () => {
    const host = `Host: ${server.host}\r\n`;
    const reqs = [
      `GET /assets/big.bin HTTP/1.1\r\n${host}\r\n`,
      `GET /assets/style.css HTTP/1.1\r\n${host}\r\n`,
      `GET /assets/nope.css HTTP/1.1\r\n${host}\r\n`,
      `GET /assets/style.css HTTP/1.1\r\n${host}Range: bytes=0-3\r\n\r\n`,
      `HEAD /assets/sub/inner.txt HTTP/1.1\r\n${host}\r\n`,
      `GET /health-check HTTP/1.1\r\n${host}\r\n`,
      `GET /assets/sub/inner.txt HTTP/1.1\r\n${host}\r\n`,
    ];
    const res = await rawExchange(server, reqs.join(''), reqs.length, { heads: [4], timeout: 20000 });
    assert.deepEqual(res.map((r) => r.status), [200, 200, 404, 206, 200, 200, 200]);
    assert.equal(sha(res[0].body), sha(BIG));
    assert.equal(res[1].body.toString(), CSS);
    assert.equal(res[3].body.toString(), 'body');
    assert.equal(res[4].headers['content-length'], '16');
    assert.equal(res[5].body.toString(), 'ok');
    assert.equal(res[6].body.toString(), 'inner text file\n');
  });
});
