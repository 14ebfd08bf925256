// MCP clients sign in with OAuth (issue 31), end to end with the official MCP TypeScript SDK
// client: its OAuth side (`auth()` driven by the transport's 401 and 403 handling, an
// OAuthClientProvider, `transport.finishAuth(code)`) against the real clank-run. The person's
// part of the flow, the consent page, is done over HTTP by SpecProvider.redirectToAuthorization
// as a signed-in person would in a browser: GET the authorization URL with their session
// cookie, POST the page's form as the browser sends it (its hidden fields, the scope boxes left
// ticked, Approve), read the code from the 303's Location.
//
//   apps/tasks with accounts: discovery from the 401, RFC 7591 registration, the grant of both
//     scopes the challenge asks for, a read grant when the person unticks agent:write, its 403
//     insufficient_scope and the step-up to agent:write, each person their own tasks, the audit
//     line of each tool call (refused ones too), revocation (RFC 7009 and the grants page).
//   spec/fixtures/apps/accounts: a client whose id is the https URL of its Client ID Metadata
//     Document (served by this file, trusted through SSL_CERT_FILE), and refresh-token
//     rotation with its grace window (the fixture's ACCOUNTS_CLOCK_FILE steps past it).
//
// A first connection asks for the scope the 401 names (agent:read agent:write), not for
// scopes_supported or the provider's clientMetadata.scope (MCP's scope selection, which the SDK
// follows). The consent page has a box per scope asked, ticked: the person may untick
// agent:write (SpecProvider's grant option), and the host then holds a read grant until a 403
// makes it ask for agent:write alone (a step-up). The SDK is pinned
// (spec/mcp/package-lock.json, 1.32.x); what a test says about its behaviour is about that version.
//
//   CLANK_RUN=build/clank-run node --test spec/mcp/oauth.test.mjs
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const TASKS_APP = join(root, 'apps/tasks/app.lua');
const ACCOUNTS_APP = join(root, 'spec/fixtures/apps/accounts/app.lua');

const READ = 'agent:read';
const WRITE = 'agent:write';
const BOTH = `${READ} ${WRITE}`;
const ALL_TOOLS = ['tasks_archive', 'tasks_complete', 'tasks_create', 'tasks_list'];
// the grace after a refresh token's rotation (issue 31: 60 s), and a step past it
const GRACE_MS = 60000;
const PAST_GRACE_MS = GRACE_MS + 1000;

function clankRun() {
  const bin = process.env.CLANK_RUN || join(root, 'build/clank-run');
  if (!existsSync(bin)) throw new Error(`clank-run not found at ${bin}: set CLANK_RUN`);
  return bin;
}

// ---- servers ---------------------------------------------------------------------------------

const running = new Set(); // the servers whose stderr a failing test prints

// Starts app on a free port with env over the test's own, without the variables of unset (and
// with cheap password hashes); resolves once it printed its line → { name, base, origin, url,
// stderr(), stop() }.
async function startServer(name, app, env, unset = []) {
  const full = { ...process.env, CLANK_PASSWORD_COST: 'fast', ...env };
  for (const k of unset) delete full[k];
  const child = spawn(clankRun(), ['--port', '0', '--no-watch', app], {
    env: full, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const base = await new Promise((ok, fail) => {
    let out = '';
    const timer = setTimeout(() => fail(new Error(`${name}: no start-up line; stderr:\n${stderr}`)), 10000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/^clank-run: serving .* at (http:\/\/[^/]+\/)\n/);
      if (m) { clearTimeout(timer); ok(m[1]); }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`${name}: clank-run exited ${code}; stderr:\n${stderr}`));
    });
  });
  const server = {
    name,
    base,
    origin: new URL(base).origin,
    url: new URL('__clank/mcp', base),
    stderr: () => stderr,
    // Stops it with SIGTERM: a clean stop exits 0, with no sanitizer report (ASan builds).
    async stop() {
      running.delete(server);
      let code = child.exitCode;
      if (code === null) {
        const exited = new Promise((ok) => child.once('exit', (c) => ok(c)));
        child.kill('SIGTERM');
        code = await exited;
      }
      assert.doesNotMatch(stderr, /Sanitizer|runtime error:/, stderr);
      assert.equal(code, 0, `${name}: clank-run exited ${code}; stderr:\n${stderr}`);
    },
  };
  running.add(server);
  return server;
}

// test() that prints the running servers' stderr when the test fails.
function it(name, fn) {
  return test(name, async (t) => {
    try {
      await fn(t);
    } catch (err) {
      for (const s of running) console.error(`--- ${s.name} (clank-run) stderr ---\n${s.stderr()}`);
      throw err;
    }
  });
}

// ---- people and plain HTTP -------------------------------------------------------------------

const sessionCookie = (person) => `clank_session=${person.cookie}`;

// A JSON request with plain fetch → { status, body (parsed, or null), headers }.
async function request(server, method, path, { body, person, headers = {} } = {}) {
  const res = await fetch(new URL(path, server.base), {
    method,
    headers: {
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(person ? { cookie: sessionCookie(person), origin: server.origin } : {}),
      ...headers,
    },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
}

// Registers a person → { id, email, cookie } (their clank_session cookie).
async function signUp(server, email) {
  const res = await request(server, 'POST', '__clank/auth/register',
    { body: { email, password: `${email}-secret` } });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const cookie = res.headers.getSetCookie().map((line) => line.match(/^clank_session=([^;]+)/))
    .find(Boolean)?.[1];
  assert.ok(cookie, 'registration set no session cookie');
  return { id: res.body.user.id, email, cookie };
}

// The person's grants as the grants page gives them in JSON.
async function grantsOf(server, person) {
  const res = await request(server, 'GET', '__clank/auth/grants',
    { person, headers: { accept: 'application/json' } });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.ok, true);
  return res.body.grants;
}

// POST /__clank/oauth/token with fields (a form, as RFC 6749 §3.2 has it) → { status, body }.
async function tokenEndpoint(server, fields) {
  const res = await fetch(new URL('__clank/oauth/token', server.base), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams(fields).toString(),
  });
  return { status: res.status, body: await res.json() };
}

const INITIALIZE = {
  jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1.0.0' } },
};

// An initialize with `authorization: Bearer <token>` and nothing else → { status, challenge }.
async function bareInitialize(server, token) {
  const res = await fetch(server.url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
    },
    body: JSON.stringify(INITIALIZE),
  });
  await res.text();
  return { status: res.status, challenge: res.headers.get('www-authenticate') };
}

// The WWW-Authenticate of the MCP endpoint (RFC 6750 §3, RFC 9728 §5.1), written out.
function challenge(server, { error, scope }) {
  const metadata = `${server.origin}/.well-known/oauth-protected-resource/__clank/mcp`;
  return `Bearer resource_metadata="${metadata}"${error ? `, error="${error}"` : ''}, scope="${scope}"`;
}

// ---- the consent step, as the signed-in person ------------------------------------------------

// The attributes of an HTML start tag → { name: value }.
function attributes(tag) {
  const out = {};
  for (const m of tag.matchAll(/\s([a-z-]+)(?:="([^"]*)")?/g)) out[m[1]] = m[2] ?? '';
  return out;
}

// Opens the authorization URL as person and answers its consent page with Approve, with the
// boxes of the scopes in grant ticked (undefined: the boxes as the page has them) → { html, csp,
// boxes ([{ scope, checked }] as the page showed them), posted (the form's fields, a
// URLSearchParams), location (the 303's, parsed) }.
async function consent(server, person, url, grant) {
  const cookie = sessionCookie(person);
  const page = await fetch(url, { headers: { cookie }, redirect: 'manual' });
  const html = await page.text();
  assert.equal(page.status, 200, `the consent page: ${page.status} ${page.headers.get('location') ?? html}`);
  // one plain form (works without JavaScript): a hidden request id, a box per scope, Approve and Deny
  const forms = [...html.matchAll(/<form\b[^>]*>/g)].map((m) => attributes(m[0]));
  assert.equal(forms.length, 1, html);
  assert.equal(forms[0].method, 'post');
  const inputs = [...html.matchAll(/<input\b[^>]*>/g)].map((m) => attributes(m[0]));
  const request = inputs.find((a) => a.name === 'request');
  assert.equal(request?.type, 'hidden', html);
  assert.ok(request.value, html);
  const checkboxes = inputs.filter((a) => a.type === 'checkbox');
  assert.ok(checkboxes.every((a) => a.name === 'scope'), html);
  const boxes = checkboxes.map((a) => ({ scope: a.value, checked: 'checked' in a }));
  const decisions = [...html.matchAll(/<button\b[^>]*>/g)].map((m) => attributes(m[0]))
    .filter((a) => a.name === 'decision').map((a) => a.value);
  assert.deepEqual(decisions.sort(), ['approve', 'deny']);

  // what a browser posts: every hidden field, the ticked boxes, the button pressed
  for (const scope of grant ?? []) {
    assert.ok(boxes.some((b) => b.scope === scope), `no box for ${scope} on the page:\n${html}`);
  }
  const ticked = boxes.filter((b) => (grant ? grant.includes(b.scope) : b.checked));
  const posted = new URLSearchParams([
    ...inputs.filter((a) => a.type === 'hidden').map((a) => [a.name, a.value]),
    ...ticked.map((b) => ['scope', b.scope]),
    ['decision', 'approve'],
  ]);
  const answer = await fetch(new URL(forms[0].action, url), {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie, origin: server.origin, 'content-type': 'application/x-www-form-urlencoded' },
    body: posted.toString(),
  });
  const text = await answer.text();
  assert.equal(answer.status, 303, `the consent answer: ${answer.status} ${text}`);
  return {
    html, csp: page.headers.get('content-security-policy'), boxes, posted,
    location: new URL(answer.headers.get('location')),
  };
}

// An in-memory OAuthClientProvider (client/auth.js) for one installation of a host, acting for
// person: it registers dynamically (or names clientMetadataUrl), keeps what the SDK saves, and
// sends the person to the consent page, where they approve at once (approves = false: the host
// waits for them, and the flow stops there) with every box ticked, or only those of grant
// (e.g. [READ]: they untick agent:write). keepRefreshToken = false: it forgets refresh tokens,
// so the SDK re-authorizes where it would refresh.
class SpecProvider {
  constructor(server, person, { name, redirectUrl = 'http://127.0.0.1:8123/callback', clientMetadataUrl,
    keepRefreshToken = true, grant } = {}) {
    this.server = server;
    this.person = person;
    this.name = name;
    this.redirectUrl = redirectUrl;
    if (clientMetadataUrl) this.clientMetadataUrl = clientMetadataUrl;
    this.keepRefreshToken = keepRefreshToken;
    this.approves = true;
    this.grant = grant; // the next consents' ticked boxes (undefined: all the page ticks)
    this.authorizations = []; // { url, html, csp, location } of each time the SDK sent the person
    this.saved = []; // every token response the SDK saved
    this.invalidated = [];
    this._client = undefined;
    this._tokens = undefined;
    this._verifier = undefined;
    this._state = undefined;
    this._code = undefined;
  }

  get clientMetadata() {
    return {
      client_name: this.name, redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
      token_endpoint_auth_method: 'none', scope: BOTH,
    };
  }

  state() {
    this._state = randomBytes(16).toString('base64url');
    return this._state;
  }

  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this._tokens; }

  saveTokens(tokens) {
    this.saved.push(tokens);
    this._tokens = { ...tokens };
    if (!this.keepRefreshToken) delete this._tokens.refresh_token;
  }

  saveCodeVerifier(verifier) { this._verifier = verifier; }

  codeVerifier() {
    if (!this._verifier) throw new Error('no code verifier saved');
    return this._verifier;
  }

  invalidateCredentials(scope) {
    this.invalidated.push(scope);
    if (scope === 'all' || scope === 'tokens') this._tokens = undefined;
    if (scope === 'all' || scope === 'client') this._client = undefined;
    if (scope === 'all' || scope === 'verifier') this._verifier = undefined;
  }

  async redirectToAuthorization(url) {
    const entry = { url: new URL(url) };
    this.authorizations.push(entry);
    if (!this.approves) return;
    Object.assign(entry, await consent(this.server, this.person, entry.url, this.grant));
    // RFC 6749 §4.1.2: back to the redirect URI with the code and the state; RFC 9207: iss
    const { location } = entry;
    assert.equal(`${location.origin}${location.pathname}`, this.redirectUrl);
    assert.equal(location.searchParams.get('state'), this._state);
    assert.equal(location.searchParams.get('iss'), this.server.origin);
    assert.equal(location.searchParams.get('error'), null, location.href);
    this._code = location.searchParams.get('code');
    assert.ok(this._code, location.href);
  }

  // The code of the last approval, once.
  takeCode() {
    const code = this._code;
    assert.ok(code, 'no authorization code: the person did not approve');
    this._code = undefined;
    return code;
  }
}

// ---- the SDK client ----------------------------------------------------------------------------

// A fetch for the transport that records what the SDK asked: { method, path, status, body,
// challenge } (the request's body as sent, the answer's WWW-Authenticate).
function recorder() {
  const seen = [];
  const record = async (url, init = {}) => {
    const res = await fetch(url, init);
    const body = init.body;
    seen.push({
      method: (init.method ?? 'GET').toUpperCase(), path: new URL(url).pathname, status: res.status,
      body: typeof body === 'string' || body instanceof URLSearchParams ? String(body) : undefined,
      challenge: res.headers.get('www-authenticate'),
    });
    return res;
  };
  return { seen, fetch: record, calls: () => seen.map((r) => `${r.method} ${r.path} ${r.status}`) };
}

// Whether each of expected is in calls, in that order (other calls between them).
function assertInOrder(calls, expected) {
  let at = 0;
  for (const call of expected) {
    const found = calls.indexOf(call, at);
    assert.ok(found >= 0, `${call} not found after #${at} in:\n${calls.join('\n')}`);
    at = found + 1;
  }
}

const newClient = () => new Client({ name: 'clank-oauth-spec', version: '1.0.0' }, { capabilities: {} });

function transportFor(server, provider, rec) {
  return new StreamableHTTPClientTransport(server.url, { authProvider: provider, fetch: rec?.fetch });
}

// Connects as a host does: without tokens, the connect fails with UnauthorizedError after the
// provider sent the person to consent; the host then finishes with the code and connects
// again (the SDK's documented flow) → { client, transport }.
async function connect(server, provider, rec) {
  let client = newClient();
  let transport = transportFor(server, provider, rec);
  try {
    await client.connect(transport);
    return { client, transport };
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  await transport.finishAuth(provider.takeCode());
  client = newClient();
  transport = transportFor(server, provider, rec);
  await client.connect(transport);
  return { client, transport };
}

// call refused for scope: the SDK steps up (a new authorization the person approves) and stops
// with UnauthorizedError; the host finishes with the code and calls again → the result.
async function callWithStepUp(conn, provider, call) {
  await assert.rejects(conn.client.callTool(call), UnauthorizedError);
  await conn.transport.finishAuth(provider.takeCode());
  return conn.client.callTool(call);
}

const toolNames = async (client) => (await client.listTools()).tools.map((t) => t.name);
const titles = (listed) => listed.structuredContent.tasks.map((t) => t.title);
const textJSON = (result) => JSON.parse(result.content[0].text);
const lastSaved = (provider) => provider.saved[provider.saved.length - 1];

// Waits for the server's stderr to have a line matching re (log lines are written as they come).
async function logLine(server, re) {
  for (let i = 0; i < 50 && !re.test(server.stderr()); i++) await new Promise((ok) => setTimeout(ok, 40));
  assert.match(server.stderr(), re);
}

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// The audit line of a tool call by person through provider's client (a client id may end in
// "-": the line's end, not a word boundary).
const auditLine = (action, person, provider) => new RegExp(`mcp: ${escapeRe(action)} called by user ` +
  `${escapeRe(String(person.id))} through client ${escapeRe(provider.clientInformation().client_id)}$`, 'm');

// ---- apps/tasks --------------------------------------------------------------------------------

describe('OAuth for MCP clients: apps/tasks with accounts, the SDK client', () => {
  let dir;
  let server;
  let ann;
  let bob;
  // Ann's host installations: one she grants both scopes (it keeps refresh tokens, as SDK hosts
  // do), one she grants agent:read only, and one that steps up from agent:read (it does not
  // keep refresh tokens)
  let annHost;
  let annReader;
  let annStepper;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'clank-mcp-oauth-'));
    // accounts: no CLANK_TASKS_USER; confirmation in the default (annotations) mode
    server = await startServer('apps/tasks', TASKS_APP, { CLANK_TASKS_DB: join(dir, 'tasks.db') },
      ['CLANK_TASKS_USER', 'CLANK_MCP_CONFIRMATION']);
    ann = await signUp(server, 'ann@example.com');
    bob = await signUp(server, 'bob@example.com');
    assert.notEqual(ann.id, bob.id);
  });
  after(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('finds the server from the 401, registers (RFC 7591), connects once the person approved', async () => {
    const rec = recorder();
    annHost = new SpecProvider(server, ann, { name: 'Ann Desktop Host' });
    const { client } = await connect(server, annHost, rec);
    try {
      const calls = rec.calls();
      assertInOrder(calls, [
        'POST /__clank/mcp 401', // initialize without a token
        'GET /.well-known/oauth-protected-resource/__clank/mcp 200', // RFC 9728, from the challenge
        'GET /.well-known/oauth-authorization-server 200', // RFC 8414
        'POST /__clank/oauth/register 201', // RFC 7591
        // … the person approves; finishAuth:
        'POST /__clank/oauth/token 200',
        'POST /__clank/mcp 200', // initialize again, with the access token
      ]);
      // the challenge: where the metadata is, and every scope, so the host asks for all it may need
      assert.equal(rec.seen[0].challenge, challenge(server, { scope: BOTH }));

      // registered as a public client, for the scope the challenge named (the SDK asks for the
      // challenge's scope before scopes_supported or its own metadata: MCP's scope selection)
      const registration = JSON.parse(rec.seen.find((r) => r.path === '/__clank/oauth/register').body);
      assert.equal(registration.scope, BOTH);
      const registered = annHost.clientInformation();
      assert.ok(registered.client_id && !registered.client_id.includes('://'), registered.client_id);
      assert.deepEqual(registered.redirect_uris, [annHost.redirectUrl]);
      assert.equal(registered.token_endpoint_auth_method, 'none');
      assert.equal(registered.client_name, 'Ann Desktop Host');

      // one authorization request: code with PKCE S256, for this resource (RFC 8707)
      assert.equal(annHost.authorizations.length, 1);
      const [{ url, html, csp, boxes, posted }] = annHost.authorizations;
      assert.equal(`${url.origin}${url.pathname}`, `${server.origin}/__clank/oauth/authorize`);
      const q = url.searchParams;
      assert.equal(q.get('response_type'), 'code');
      assert.equal(q.get('client_id'), registered.client_id);
      assert.equal(q.get('code_challenge_method'), 'S256');
      assert.match(q.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/);
      assert.equal(q.get('redirect_uri'), annHost.redirectUrl);
      assert.equal(q.get('scope'), BOTH);
      assert.equal(q.get('resource'), `${server.origin}/__clank/mcp`);
      // the page says who asks, where the answer goes and what it may do, a box per scope
      // (ticked); its form may go there
      assert.match(html, /Ann Desktop Host/);
      assert.match(html, /127\.0\.0\.1:8123/);
      assert.match(html, /Read your data \(agent:read\)/);
      assert.match(html, /Change your data \(agent:write\)/);
      assert.deepEqual(boxes, [{ scope: READ, checked: true }, { scope: WRITE, checked: true }]);
      assert.deepEqual(posted.getAll('scope'), ['', READ, WRITE]);
      assert.match(csp, /form-action [^;]*http:\/\/127\.0\.0\.1:8123/);

      // the code exchanged with its verifier, for tokens of the scope granted
      const exchange = new URLSearchParams(rec.seen.find((r) => r.path === '/__clank/oauth/token').body);
      assert.equal(exchange.get('grant_type'), 'authorization_code');
      assert.equal(exchange.get('client_id'), registered.client_id);
      assert.equal(exchange.get('redirect_uri'), annHost.redirectUrl);
      assert.equal(exchange.get('resource'), `${server.origin}/__clank/mcp`);
      assert.match(exchange.get('code_verifier'), /^[A-Za-z0-9._~-]{43,128}$/);
      const tokens = annHost.tokens();
      assert.match(tokens.access_token, /^clank_at_/);
      assert.match(tokens.refresh_token, /^clank_rt_/);
      assert.equal(tokens.token_type.toLowerCase(), 'bearer');
      assert.equal(tokens.expires_in, 3600);
      assert.equal(tokens.scope, BOTH);

      // both scopes: every tool, and a write runs at once
      assert.deepEqual(await toolNames(client), ALL_TOOLS);
      const empty = await client.callTool({ name: 'tasks_list', arguments: {} });
      assert.equal(empty.isError, undefined, JSON.stringify(empty));
      assert.deepEqual(empty.structuredContent, { tasks: [] });
      const created = await client.callTool({
        name: 'tasks_create', arguments: { title: 'Ship docs', tags: ['docs'], estimate: 2 },
      });
      assert.equal(created.isError, undefined, JSON.stringify(created));
      assert.deepEqual(created.structuredContent, { id: '1', created: true });
      assert.deepEqual(titles(await client.callTool({ name: 'tasks_list', arguments: {} })), ['Ship docs']);
      assert.equal(annHost.authorizations.length, 1);

      // the grants page lists it
      const grants = await grantsOf(server, ann);
      assert.equal(grants.length, 1);
      assert.equal(grants[0].clientId, registered.client_id);
      assert.equal(grants[0].clientName, 'Ann Desktop Host');
      assert.equal(grants[0].scope, BOTH);
      assert.equal(typeof grants[0].lastUsed, 'number');
    } finally {
      await client.close();
    }
  });

  it('the person unticks agent:write on the consent page: a read grant, without the write tools', async () => {
    const rec = recorder();
    annReader = new SpecProvider(server, ann, { name: 'Ann Reader Host', grant: [READ] });
    const { client } = await connect(server, annReader, rec);
    try {
      // the host asked for both, as the challenge says; the page offered both, ticked; the
      // person's browser sent agent:read alone
      assert.equal(rec.seen[0].challenge, challenge(server, { scope: BOTH }));
      assert.equal(annReader.authorizations.length, 1);
      const [{ url, boxes, posted }] = annReader.authorizations;
      assert.equal(url.searchParams.get('scope'), BOTH);
      assert.deepEqual(boxes, [{ scope: READ, checked: true }, { scope: WRITE, checked: true }]);
      assert.deepEqual(posted.getAll('scope'), ['', READ]);

      // tokens and grant of what was ticked
      assert.equal(annReader.tokens().scope, READ);
      const clientId = annReader.clientInformation().client_id;
      const grant = (await grantsOf(server, ann)).find((g) => g.clientId === clientId);
      assert.equal(grant.clientName, 'Ann Reader Host');
      assert.equal(grant.scope, READ);

      // a read grant: only the tool that does not write, on the person's own tasks
      assert.deepEqual(await toolNames(client), ['tasks_list']);
      const listed = await client.callTool({ name: 'tasks_list', arguments: {} });
      assert.equal(listed.isError, undefined, JSON.stringify(listed));
      assert.deepEqual(titles(listed), ['Ship docs']);
    } finally {
      await client.close();
    }
  });

  it('a write tool called with a read grant: 403 insufficient_scope; a refresh cannot widen it', async () => {
    assert.ok(annReader?.tokens(), 'needs the read grant of the unticking test');
    // typescript-sdk 1.32: on insufficient_scope, auth() refreshes when it holds a refresh
    // token and re-authorizes only when it has none (typescript-sdk#2255; SEP-2350 clients
    // skip the refresh). A refresh keeps the grant's scope (RFC 6749 §6), so the call is
    // refused again and the SDK gives up: the person is never asked for more.
    const rec = recorder();
    const { client } = await connect(server, annReader, rec);
    try {
      await assert.rejects(client.callTool({
        name: 'tasks_create', arguments: { title: 'Through a read grant', tags: [], estimate: null },
      }), /403/);
      const refusals = rec.seen.filter((r) => r.path === '/__clank/mcp' && r.status === 403);
      assert.equal(refusals.length, 2);
      for (const r of refusals) {
        assert.equal(r.challenge, challenge(server, { error: 'insufficient_scope', scope: WRITE }));
      }
      const refresh = rec.seen.filter((r) => r.path === '/__clank/oauth/token');
      assert.deepEqual(refresh.map((r) => [new URLSearchParams(r.body).get('grant_type'), r.status]),
        [['refresh_token', 200]]);
      assert.equal(lastSaved(annReader).scope, READ);
      assert.equal(annReader.authorizations.length, 1);
      // nothing was written, but the call was logged with who tried (before the scope check)
      assert.deepEqual(titles(await client.callTool({ name: 'tasks_list', arguments: {} })), ['Ship docs']);
      await logLine(server, auditLine('tasks.create', ann, annReader));
    } finally {
      await client.close();
    }
  });

  it('a write tool called with a read grant steps up: the person approves agent:write, the call runs', async () => {
    const rec = recorder();
    annStepper = new SpecProvider(server, ann, { name: 'Ann Web Host', keepRefreshToken: false, grant: [READ] });
    const conn = await connect(server, annStepper, rec);
    try {
      assert.deepEqual(await toolNames(conn.client), ['tasks_list']);
      assert.equal(annStepper.tokens().scope, READ);
      const readToken = annStepper.tokens().access_token;

      annStepper.grant = [WRITE]; // this time the person leaves agent:write ticked
      const created = await callWithStepUp(conn, annStepper, {
        name: 'tasks_create', arguments: { title: 'Write tests', tags: [], estimate: null },
      });
      assert.equal(created.isError, undefined, JSON.stringify(created));
      assert.deepEqual(created.structuredContent, { id: '2', created: true });

      // the 403 named the scope, and the SDK asked the person for it alone
      const refusal = rec.seen.find((r) => r.path === '/__clank/mcp' && r.status === 403);
      assert.equal(refusal.challenge, challenge(server, { error: 'insufficient_scope', scope: WRITE }));
      assert.equal(annStepper.authorizations.length, 2);
      const second = annStepper.authorizations[1];
      assert.equal(second.url.searchParams.get('scope'), WRITE);
      assert.match(second.html, /Change your data \(agent:write\)/);
      assert.deepEqual(second.boxes, [{ scope: WRITE, checked: true }]);
      assert.deepEqual(second.posted.getAll('scope'), ['', WRITE]);
      assert.equal(annStepper.tokens().scope, WRITE);

      // a write grant: every tool
      assert.deepEqual(await toolNames(conn.client), ALL_TOOLS);
      assert.deepEqual(titles(await conn.client.callTool({ name: 'tasks_list', arguments: {} })),
        ['Ship docs', 'Write tests']);
      // the grant has both now: the token of the first yes (another connection of the host
      // may hold it) still works
      const clientId = annStepper.clientInformation().client_id;
      const grant = (await grantsOf(server, ann)).find((g) => g.clientId === clientId);
      assert.equal(grant.scope, BOTH);
      assert.equal((await bareInitialize(server, readToken)).status, 200);
    } finally {
      await conn.client.close();
    }
  });

  it('each person sees only their own tasks; each tool call is logged with its user and client', async () => {
    assert.ok(annStepper?.tokens(), 'needs the write grant of the step-up test');
    const bobHost = new SpecProvider(server, bob, { name: 'Bob Host', keepRefreshToken: false });
    const bobs = await connect(server, bobHost, recorder());
    const anns = await connect(server, annStepper, recorder());
    try {
      assert.notEqual(bobHost.clientInformation().client_id, annStepper.clientInformation().client_id);
      assert.equal(bobHost.tokens().scope, BOTH);
      assert.deepEqual((await bobs.client.callTool({ name: 'tasks_list', arguments: {} })).structuredContent,
        { tasks: [] });
      const created = await bobs.client.callTool({
        name: 'tasks_create', arguments: { title: 'Bob errand', tags: [], estimate: null },
      });
      assert.equal(created.isError, undefined, JSON.stringify(created));
      assert.deepEqual(created.structuredContent, { id: '3', created: true });
      assert.equal(bobHost.authorizations.length, 1);
      assert.deepEqual(titles(await bobs.client.callTool({ name: 'tasks_list', arguments: {} })),
        ['Bob errand']);
      // Ann's task is not Bob's to complete
      const theirs = await bobs.client.callTool({ name: 'tasks_complete', arguments: { id: '1' } });
      assert.equal(theirs.isError, true);
      assert.deepEqual(textJSON(theirs), { error: { code: 'NOT_FOUND', message: 'Task not found.' } });
      // … and Ann's list has neither Bob's task nor a change to hers
      const hers = await anns.client.callTool({ name: 'tasks_list', arguments: {} });
      assert.deepEqual(titles(hers), ['Ship docs', 'Write tests']);
      assert.equal(hers.structuredContent.tasks[0].completed, false);

      // the audit: each call with the person and the client acting for them
      await logLine(server, auditLine('tasks.create', bob, bobHost));
      await logLine(server, auditLine('tasks.complete', bob, bobHost));
      await logLine(server, auditLine('tasks.create', ann, annHost));
      await logLine(server, auditLine('tasks.create', ann, annStepper));
      await logLine(server, auditLine('tasks.list', ann, annStepper));
    } finally {
      await bobs.client.close();
      await anns.client.close();
    }
  });

  it('an access token revoked (RFC 7009) fails at the next call; the SDK refreshes', async () => {
    assert.ok(annHost?.tokens(), 'needs the tokens of the first test');
    const rec = recorder();
    const { client } = await connect(server, annHost, rec);
    try {
      const revoked = annHost.tokens().access_token;
      assert.equal((await bareInitialize(server, revoked)).status, 200);
      const res = await fetch(new URL('__clank/oauth/revoke', server.base), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          token: revoked, token_type_hint: 'access_token', client_id: annHost.clientInformation().client_id,
        }).toString(),
      });
      assert.equal(res.status, 200);
      await res.text();
      assert.deepEqual(await bareInitialize(server, revoked),
        { status: 401, challenge: challenge(server, { error: 'invalid_token', scope: BOTH }) });

      // the SDK's next call: 401, a refresh, the call again
      const before = rec.seen.length;
      assert.deepEqual(await toolNames(client), ALL_TOOLS);
      assertInOrder(rec.calls().slice(before), [
        'POST /__clank/mcp 401', 'POST /__clank/oauth/token 200', 'POST /__clank/mcp 200',
      ]);
      assert.notEqual(annHost.tokens().access_token, revoked);
      assert.equal(annHost.tokens().scope, BOTH);
      assert.equal(annHost.authorizations.length, 1);
    } finally {
      await client.close();
    }
  });

  it('a grant revoked on the grants page: its tokens fail at once, the host must ask again', async () => {
    assert.ok(annHost?.tokens(), 'needs the tokens of the first test');
    const rec = recorder();
    const { client } = await connect(server, annHost, rec);
    try {
      assert.deepEqual(await toolNames(client), ALL_TOOLS);
      annHost.approves = false; // from here on, the person is not at the screen
      const clientId = annHost.clientInformation().client_id;
      const grant = (await grantsOf(server, ann)).find((g) => g.clientId === clientId);
      const revoked = await request(server, 'POST', '__clank/auth/grants',
        { person: ann, body: { grant: grant.id } });
      assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
      assert.deepEqual(revoked.body, { ok: true });

      const { access_token: access, refresh_token: refresh } = annHost.tokens();
      assert.equal((await bareInitialize(server, access)).status, 401);
      const refreshed = await tokenEndpoint(server,
        { grant_type: 'refresh_token', refresh_token: refresh, client_id: clientId });
      assert.equal(refreshed.status, 400);
      assert.equal(refreshed.body.error, 'invalid_grant');

      // the SDK: 401, a refresh refused, its tokens dropped, the person sent to consent again
      await assert.rejects(client.listTools(), UnauthorizedError);
      assert.ok(annHost.invalidated.includes('tokens'), JSON.stringify(annHost.invalidated));
      assert.equal(annHost.authorizations.length, 2);

      // gone from the page; Ann's other grants go on, each with its own scope
      const left = await grantsOf(server, ann);
      assert.deepEqual(left.map((g) => [g.clientId, g.scope]), [
        [annReader.clientInformation().client_id, READ], [annStepper.clientInformation().client_id, BOTH],
      ]);
      const stepper = await connect(server, annStepper, recorder());
      try {
        assert.deepEqual(await toolNames(stepper.client), ALL_TOOLS);
      } finally {
        await stepper.client.close();
      }
      const reader = await connect(server, annReader, recorder());
      try {
        assert.deepEqual(await toolNames(reader.client), ['tasks_list']);
      } finally {
        await reader.client.close();
      }
    } finally {
      await client.close();
    }
  });
});

// ---- spec/fixtures/apps/accounts: metadata documents and refresh rotation -------------------

// A self-signed certificate for localhost (openssl) → { key, cert, certFile }, or null without
// openssl.
function selfSigned(dir) {
  const keyFile = join(dir, 'key.pem');
  const certFile = join(dir, 'cert.pem');
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec',
    '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', keyFile, '-out', certFile,
    '-days', '2', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1'], { stdio: 'ignore' });
  if (made.error || made.status !== 0) return null;
  return { key: readFileSync(keyFile), cert: readFileSync(certFile), certFile };
}

// An https server on localhost (both address families when it can) answering path with doc →
// { port, requests (how many asked for path), close() }.
async function documentServer(tls, path, docOf) {
  const state = { requests: 0 };
  const server = createServer(tls, (req, res) => {
    if (req.method === 'GET' && req.url === path) {
      state.requests += 1;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(docOf(state)));
    } else {
      res.writeHead(404).end();
    }
  });
  const listen = (opts) => new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(opts, () => { server.off('error', fail); ok(); });
  });
  try {
    await listen({ port: 0, host: '::', ipv6Only: false });
  } catch {
    await listen({ port: 0, host: '127.0.0.1' });
  }
  state.port = server.address().port;
  state.close = () => new Promise((ok) => server.close(ok));
  return state;
}

describe('OAuth for MCP clients: the accounts fixture, the SDK client', () => {
  const dir = mkdtempSync(join(tmpdir(), 'clank-mcp-oauth-accounts-'));
  const tls = selfSigned(dir);
  const clockFile = join(dir, 'clock');
  const DOC_PATH = '/oauth/spec-host.json';
  let docs;
  let metadataUrl;
  let server;
  let carol;
  let dave;
  let carolHost;

  before(async () => {
    if (!tls) return;
    writeFileSync(clockFile, '0');
    // the document's redirect URI has no port: a loopback one matches on any (RFC 8252 §7.3)
    docs = await documentServer(tls, DOC_PATH, () => ({
      client_id: metadataUrl, client_name: 'Spec Metadata Host',
      redirect_uris: ['http://127.0.0.1/oauth/callback'],
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }));
    metadataUrl = `https://localhost:${docs.port}${DOC_PATH}`;
    server = await startServer('accounts fixture', ACCOUNTS_APP, {
      ACCOUNTS_DB: join(dir, 'accounts.db'), ACCOUNTS_INSECURE_CLIENT_IDS: '1',
      ACCOUNTS_CLOCK_FILE: clockFile, SSL_CERT_FILE: tls.certFile,
    });
    carol = await signUp(server, 'carol@example.com');
    dave = await signUp(server, 'dave@example.com');
  });
  after(async () => {
    await server?.stop();
    await docs?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const withTLS = (name, fn) => it(name, async (t) => {
    if (!tls) {
      t.skip('openssl is needed for the metadata document server certificate');
      return;
    }
    await fn(t);
  });

  withTLS('a client id that is the https URL of its metadata document: fetched, named on the page', async () => {
    const rec = recorder();
    carolHost = new SpecProvider(server, carol, {
      name: 'Spec Metadata Host', clientMetadataUrl: metadataUrl,
      redirectUrl: 'http://127.0.0.1:49152/oauth/callback',
    });
    const { client } = await connect(server, carolHost, rec);
    try {
      // no registration: the URL is the client id
      assert.ok(!rec.seen.some((r) => r.path === '/__clank/oauth/register'), rec.calls().join('\n'));
      assert.equal(carolHost.clientInformation().client_id, metadataUrl);
      const [{ url, html, boxes }] = carolHost.authorizations;
      assert.equal(url.searchParams.get('client_id'), metadataUrl);
      assert.equal(url.searchParams.get('scope'), BOTH);
      // the server fetched the document once, and showed its name and where it lives
      assert.equal(docs.requests, 1);
      assert.match(html, /Spec Metadata Host/);
      assert.match(html, new RegExp(`localhost:${docs.port}`));
      assert.match(html, /127\.0\.0\.1:49152/);
      assert.deepEqual(boxes, [{ scope: READ, checked: true }, { scope: WRITE, checked: true }]);

      // both scopes: every tool of a signed-in person who is not an admin (not admin.stats)
      assert.equal(carolHost.tokens().scope, BOTH);
      assert.deepEqual(await toolNames(client), ['notes_add', 'notes_clear', 'notes_list', 'ping']);
      const added = await client.callTool({ name: 'notes_add', arguments: { text: 'From Carol' } });
      assert.equal(added.isError, undefined, JSON.stringify(added));
      const listed = await client.callTool({ name: 'notes_list', arguments: {} });
      assert.equal(listed.isError, undefined, JSON.stringify(listed));
      assert.deepEqual(listed.structuredContent, { notes: ['From Carol'] });
    } finally {
      await client.close();
    }

    // the same host installed by another person, who unticks agent:write: the server's cached
    // copy serves, and a read grant lists notes.list and the public ping (not notes.add or .clear)
    const daveHost = new SpecProvider(server, dave, {
      name: 'Spec Metadata Host', clientMetadataUrl: metadataUrl,
      redirectUrl: 'http://127.0.0.1:49153/oauth/callback', grant: [READ],
    });
    const other = await connect(server, daveHost, recorder());
    try {
      assert.equal(daveHost.tokens().scope, READ);
      assert.deepEqual(await toolNames(other.client), ['notes_list', 'ping']);
      assert.deepEqual((await other.client.callTool({ name: 'notes_list', arguments: {} })).structuredContent,
        { notes: [] });
      assert.equal(docs.requests, 1);
    } finally {
      await other.client.close();
    }
  });

  withTLS('refresh tokens rotate; an old one gets the same pair in the grace, revokes the grant after', async () => {
    assert.ok(carolHost?.tokens(), 'needs the tokens of the metadata document test');
    const clientId = carolHost.clientInformation().client_id;
    const first = carolHost.tokens();
    const refresh = (token) => tokenEndpoint(server,
      { grant_type: 'refresh_token', refresh_token: token, client_id: clientId });
    const expectPair = (res) => {
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.match(res.body.access_token, /^clank_at_/);
      assert.match(res.body.refresh_token, /^clank_rt_/);
      assert.equal(res.body.token_type.toLowerCase(), 'bearer');
      assert.equal(res.body.scope, BOTH);
      assert.ok(res.body.expires_in > 3500 && res.body.expires_in <= 3600, String(res.body.expires_in));
      return res.body;
    };

    // a new pair, neither token the old one
    const second = expectPair(await refresh(first.refresh_token));
    assert.notEqual(second.access_token, first.access_token);
    assert.notEqual(second.refresh_token, first.refresh_token);
    assert.equal((await bareInitialize(server, second.access_token)).status, 200);

    // the old refresh token again (a client that lost the answer): the same new pair
    const retried = expectPair(await refresh(first.refresh_token));
    assert.equal(retried.access_token, second.access_token);
    assert.equal(retried.refresh_token, second.refresh_token);

    // the new one rotates in turn
    const third = expectPair(await refresh(second.refresh_token));
    assert.notEqual(third.access_token, second.access_token);
    assert.notEqual(third.refresh_token, second.refresh_token);
    assert.equal((await bareInitialize(server, third.access_token)).status, 200);

    // past the grace, a rotated refresh token used again is a copy: the grant goes, with every token
    writeFileSync(clockFile, String(PAST_GRACE_MS));
    const reused = await refresh(second.refresh_token);
    assert.equal(reused.status, 400, JSON.stringify(reused.body));
    assert.equal(reused.body.error, 'invalid_grant');
    assert.equal((await bareInitialize(server, third.access_token)).status, 401);
    const latest = await refresh(third.refresh_token);
    assert.equal(latest.status, 400, JSON.stringify(latest.body));
    assert.equal(latest.body.error, 'invalid_grant');
    assert.deepEqual(await grantsOf(server, carol), []);
    // Dave's grant of the same client is his own
    assert.deepEqual((await grantsOf(server, dave)).map((g) => g.clientId), [clientId]);
  });
});
