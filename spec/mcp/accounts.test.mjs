// MCP with accounts (issue 30) driven by the official MCP TypeScript SDK client over Streamable
// HTTP: apps/tasks with people signed up (no CLANK_TASKS_USER), their agents calling with API
// tokens in `authorization: Bearer <token>`. Who may see and call a tool follows the token: a
// write token every tool of its person, a read token only the tools that do not write, no token
// a 401 that points at the OAuth metadata (issue 31); each person sees only their own tasks; a revoked token stops at once;
// an MCP session belongs to the person who made it.
//
//   CLANK_RUN=build/clank-run node --test spec/mcp/accounts.test.mjs
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const app = join(root, 'apps/tasks/app.lua');

const ALL_TOOLS = ['tasks_archive', 'tasks_complete', 'tasks_create', 'tasks_list'];
// runtime/agent/bridge_checks.c's refusals, as clank.mcp words them in a tool result
const READ_ONLY = {
  error: { code: 'FORBIDDEN', message: 'This token may call only actions that do not write.' },
};

function clankRun() {
  const bin = process.env.CLANK_RUN || join(root, 'build/clank-run');
  if (!existsSync(bin)) throw new Error(`clank-run not found at ${bin}: set CLANK_RUN`);
  return bin;
}

// Starts apps/tasks with accounts on a free port and a fresh database (cheap password hashes);
// resolves once it printed its line.
async function startServer() {
  const dir = mkdtempSync(join(tmpdir(), 'clank-mcp-accounts-'));
  const env = { ...process.env, CLANK_TASKS_DB: join(dir, 'tasks.db'), CLANK_PASSWORD_COST: 'fast' };
  delete env.CLANK_TASKS_USER;
  delete env.CLANK_MCP_CONFIRMATION;
  const child = spawn(clankRun(), ['--port', '0', '--no-watch', app], {
    env, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const base = await new Promise((ok, fail) => {
    let out = '';
    const timer = setTimeout(() => fail(new Error(`no start-up line; stderr:\n${stderr}`)), 10000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/^clank-run: serving .* at (http:\/\/[^/]+\/)\n/);
      if (m) { clearTimeout(timer); ok(m[1]); }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`clank-run exited ${code}; stderr:\n${stderr}`));
    });
  });
  return {
    base,
    url: new URL('__clank/mcp', base),
    // Stops it with SIGTERM: a clean stop exits 0, with no sanitizer report (ASan builds).
    async stop() {
      let code = child.exitCode;
      if (code === null) {
        const exited = new Promise((ok) => child.once('exit', (c) => ok(c)));
        child.kill('SIGTERM');
        code = await exited;
      }
      rmSync(dir, { recursive: true, force: true });
      assert.doesNotMatch(stderr, /Sanitizer|runtime error:/, stderr);
      assert.equal(code, 0, `clank-run exited ${code}; stderr:\n${stderr}`);
    },
  };
}

// A JSON request to the server with plain fetch → { status, body (parsed, or null), headers }.
async function request(server, method, path, { body, cookie, headers = {} } = {}) {
  const res = await fetch(new URL(path, server.base), {
    method,
    headers: {
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(cookie ? { cookie: `clank_session=${cookie}` } : {}),
      ...headers,
    },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
}

// Registers a person → { id, email, cookie } (the clank_session cookie registration set).
async function signUp(server, email, password) {
  const res = await request(server, 'POST', '__clank/auth/register', { body: { email, password } });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  assert.deepEqual(res.body, { ok: true, user: { id: res.body.user.id, email, roles: [] } });
  const cookie = res.headers.getSetCookie().map((line) => line.match(/^clank_session=([^;]+)/))
    .find(Boolean)?.[1];
  assert.ok(cookie, 'registration set no session cookie');
  return { id: res.body.user.id, email, cookie };
}

// A new API token of the signed-in person → { id, token }.
async function newToken(server, person, name, scope) {
  const res = await request(server, 'POST', '__clank/auth/tokens',
    { body: { name, scope }, cookie: person.cookie });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  assert.equal(res.body.ok, true);
  assert.match(res.body.token, /^clank_/);
  return { id: res.body.id, token: res.body.token };
}

// A connected SDK client sending `authorization: Bearer <token>` (none without a token).
async function connect(server, token) {
  const client = new Client({ name: 'clank-accounts-spec', version: '1.0.0' }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(server.url, {
    requestInit: token ? { headers: { authorization: `Bearer ${token}` } } : undefined,
  });
  await client.connect(transport);
  return client;
}

// Runs fn(client) with a client connected with token, closed afterwards.
async function withClient(server, token, fn) {
  const client = await connect(server, token);
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

// the SDK's StreamableHTTPError for an answer with HTTP status 401
const is401 = (e) => e?.code === 401;
const toolNames = async (client) => (await client.listTools()).tools.map((t) => t.name);

const textJSON = (result) => {
  assert.equal(result.content.length, 1);
  assert.equal(result.content[0].type, 'text');
  return JSON.parse(result.content[0].text);
};

const titles = (listed) => listed.structuredContent.tasks.map((t) => t.title);

describe('MCP with API tokens (apps/tasks with accounts, official SDK client)', () => {
  let server;
  let ann;
  let bob;
  let annWrite;
  let annRead;
  let bobWrite;
  before(async () => {
    server = await startServer();
    ann = await signUp(server, 'ann@example.com', 'ann-secret-1');
    bob = await signUp(server, 'bob@example.com', 'bob-secret-1');
    assert.notEqual(ann.id, bob.id);
    annWrite = await newToken(server, ann, 'ann agent', 'write');
    annRead = await newToken(server, ann, 'ann reader', 'read');
    bobWrite = await newToken(server, bob, 'bob agent', 'write');
  });
  after(async () => {
    await server?.stop();
  });

  test("a write token lists every tool and creates a task in its person's list", async () => {
    await withClient(server, annWrite.token, async (client) => {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name), ALL_TOOLS);
      // an app with accounts: an action that says nothing needs a signed-in user
      for (const t of tools) assert.equal(t._meta['clank/auth'], 'user', t.name);

      // annotations mode (lua/clank/mcp.lua's default): an action that asks for confirmation runs
      const created = await client.callTool({
        name: 'tasks_create', arguments: { title: 'Ship docs', tags: ['docs'], estimate: 2 },
      });
      assert.equal(created.isError, undefined, JSON.stringify(created));
      assert.deepEqual(created.structuredContent, { id: '1', created: true });

      const listed = await client.callTool({ name: 'tasks_list', arguments: {} });
      assert.equal(listed.isError, undefined, JSON.stringify(listed));
      assert.equal(listed.structuredContent.tasks.length, 1);
      const [task] = listed.structuredContent.tasks;
      assert.equal(typeof task.createdAt, 'number');
      assert.deepEqual({ ...task, createdAt: 0 }, {
        id: '1', title: 'Ship docs', estimate: 2, tags: ['docs'], completed: false,
        archived: false, createdAt: 0,
      });
    });
  });

  test('a read token lists only the tool that reads, and a call of another is FORBIDDEN', async () => {
    await withClient(server, annRead.token, async (client) => {
      assert.deepEqual(await toolNames(client), ['tasks_list']);

      const refused = await client.callTool({
        name: 'tasks_create', arguments: { title: 'Through a read token', tags: [], estimate: null },
      });
      assert.equal(refused.isError, true);
      assert.equal(refused.structuredContent, undefined);
      assert.deepEqual(textJSON(refused), READ_ONLY);
      // nor the destructive one
      const archived = await client.callTool({ name: 'tasks_archive', arguments: { id: '1' } });
      assert.equal(archived.isError, true);
      assert.deepEqual(textJSON(archived), READ_ONLY);

      // it reads Ann's list, which the refused calls did not change
      const listed = await client.callTool({ name: 'tasks_list', arguments: {} });
      assert.equal(listed.isError, undefined, JSON.stringify(listed));
      assert.deepEqual(titles(listed), ['Ship docs']);
      assert.equal(listed.structuredContent.tasks[0].archived, false);
    });
  });

  test("another person's token sees only that person's tasks", async () => {
    await withClient(server, bobWrite.token, async (client) => {
      assert.deepEqual(await toolNames(client), ALL_TOOLS);
      const empty = await client.callTool({ name: 'tasks_list', arguments: {} });
      assert.deepEqual(empty.structuredContent, { tasks: [] });

      const created = await client.callTool({
        name: 'tasks_create', arguments: { title: "Bob's errand", tags: [], estimate: null },
      });
      assert.equal(created.isError, undefined, JSON.stringify(created));
      assert.equal(created.structuredContent.created, true);
      assert.notEqual(created.structuredContent.id, '1');
      assert.deepEqual(titles(await client.callTool({ name: 'tasks_list', arguments: {} })),
        ["Bob's errand"]);

      // Ann's task (id 1) is not Bob's to complete
      const theirs = await client.callTool({ name: 'tasks_complete', arguments: { id: '1' } });
      assert.equal(theirs.isError, true);
      assert.deepEqual(textJSON(theirs), { error: { code: 'NOT_FOUND', message: 'Task not found.' } });
    });
    // … and Ann's list has neither Bob's task nor a change to hers
    await withClient(server, annRead.token, async (client) => {
      const listed = await client.callTool({ name: 'tasks_list', arguments: {} });
      assert.deepEqual(titles(listed), ['Ship docs']);
      assert.equal(listed.structuredContent.tasks[0].completed, false);
    });
  });

  test('without a token the endpoint answers 401, naming where its metadata is (issue 31)', async () => {
    await assert.rejects(connect(server, null), is401);
    const init = {
      jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    };
    const accept = { accept: 'application/json, text/event-stream' };
    const bare = await request(server, 'POST', '__clank/mcp', { body: init, headers: accept });
    assert.equal(bare.status, 401);
    const metadata = `${server.base}.well-known/oauth-protected-resource/__clank/mcp`;
    assert.equal(bare.headers.get('www-authenticate'),
      `Bearer resource_metadata="${metadata}", scope="agent:read agent:write"`);
    // a bearer that is no token of anyone's: the same, with invalid_token
    const bogus = await request(server, 'POST', '__clank/mcp', {
      body: init, headers: { ...accept, authorization: `Bearer clank_${'A'.repeat(43)}` },
    });
    assert.equal(bogus.status, 401);
    assert.equal(bogus.headers.get('www-authenticate'),
      `Bearer resource_metadata="${metadata}", error="invalid_token", scope="agent:read agent:write"`);
  });

  test('a revoked token stops at once: its session is gone, and a new one is no one', async () => {
    const doomed = await newToken(server, ann, 'ann doomed', 'write');
    const client = await connect(server, doomed.token);
    try {
      assert.deepEqual(await toolNames(client), ALL_TOOLS);
      assert.deepEqual(titles(await client.callTool({ name: 'tasks_list', arguments: {} })),
        ['Ship docs']);

      const revoked = await request(server, 'DELETE', `__clank/auth/tokens/${doomed.id}`,
        { cookie: ann.cookie });
      assert.equal(revoked.status, 204);

      // The revoked token is no one now: 401, the next request already.
      await assert.rejects(client.listTools(), is401);
      await assert.rejects(client.callTool({ name: 'tasks_list', arguments: {} }), is401);
    } finally {
      await client.close();
    }
    // A client that connects again with it is as good as one without a token.
    await assert.rejects(connect(server, doomed.token), is401);
    // Ann's other tokens go on.
    await withClient(server, annWrite.token, async (other) => {
      assert.deepEqual(await toolNames(other), ALL_TOOLS);
      assert.deepEqual(titles(await other.callTool({ name: 'tasks_list', arguments: {} })),
        ['Ship docs']);
    });
    // Revoking it again, or another person's token, finds nothing.
    const again = await request(server, 'DELETE', `__clank/auth/tokens/${doomed.id}`,
      { cookie: ann.cookie });
    assert.equal(again.status, 404);
    const notHers = await request(server, 'DELETE', `__clank/auth/tokens/${bobWrite.id}`,
      { cookie: ann.cookie });
    assert.equal(notHers.status, 404);
  });

  test("a session made with Ann's token is not found with Bob's (HTTP 404)", async () => {
    const mcpHeaders = (token, sessionId) => ({
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      authorization: `Bearer ${token}`,
      ...(sessionId ? { 'mcp-session-id': sessionId } : {}),
    });
    const initialized = await request(server, 'POST', '__clank/mcp', {
      headers: mcpHeaders(annWrite.token),
      body: {
        jsonrpc: '2.0', id: 1, method: 'initialize',
        params: {
          protocolVersion: '2025-11-25', capabilities: {},
          clientInfo: { name: 'raw', version: '1.0.0' },
        },
      },
    });
    assert.equal(initialized.status, 200, JSON.stringify(initialized.body));
    const sessionId = initialized.headers.get('mcp-session-id');
    assert.match(sessionId, /^2025-11-25\.0\.[0-9a-f]{16}\.[0-9a-f]{64}$/);

    const list = (token) => request(server, 'POST', '__clank/mcp', {
      headers: mcpHeaders(token, sessionId),
      body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    });
    // Ann's own token: her session
    const hers = await list(annWrite.token);
    assert.equal(hers.status, 200, JSON.stringify(hers.body));
    assert.deepEqual(hers.body.result.tools.map((t) => t.name), ALL_TOOLS);
    // Ann's read token is Ann too: the session is the person's, not the token's
    const herReader = await list(annRead.token);
    assert.equal(herReader.status, 200, JSON.stringify(herReader.body));
    assert.deepEqual(herReader.body.result.tools.map((t) => t.name), ['tasks_list']);
    // Bob's token: not found; none: not signed in (401, issue 31)
    const body = { jsonrpc: '2.0', id: 3, method: 'tools/list' };
    const bobs = await request(server, 'POST', '__clank/mcp', { headers: mcpHeaders(bobWrite.token, sessionId), body });
    assert.equal(bobs.status, 404, JSON.stringify(bobs.body));
    assert.deepEqual(bobs.body, {
      jsonrpc: '2.0', id: 3, error: { code: -32001, message: 'Session not found.' },
    });
    const anonymous = mcpHeaders('x', sessionId);
    delete anonymous.authorization;
    const none = await request(server, 'POST', '__clank/mcp', { headers: anonymous, body });
    assert.equal(none.status, 401);
  });
});
