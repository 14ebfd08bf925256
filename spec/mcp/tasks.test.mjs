// Clank's MCP endpoint (SPEC §6) driven by the official MCP TypeScript SDK client over
// Streamable HTTP, against the real clank-run serving apps/tasks (through
// spec/fixtures/apps/mcp_tasks, which only sets app.mcp.confirmation from CLANK_MCP_CONFIRMATION).
//
//   CLANK_RUN=build/clank-run node --test spec/mcp/
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema, ElicitRequestSchema, EmptyResultSchema,
} from '@modelcontextprotocol/sdk/types.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const app = join(root, 'spec/fixtures/apps/mcp_tasks/app.lua');
// a.b and a_b, and handlers calling ctx.log and ctx.progress
const notifyApp = join(root, 'spec/fixtures/apps/mcp_notify/app.lua');
const CONFIRMATION_REQUIRED = {
  error: { code: 'CONFIRMATION_REQUIRED', message: 'This action requires explicit confirmation.' },
};

function clankRun() {
  const bin = process.env.CLANK_RUN || join(root, 'build/clank-run');
  if (!existsSync(bin)) throw new Error(`clank-run not found at ${bin}: set CLANK_RUN`);
  return bin;
}

// Starts clank-run on a free port with a fresh tasks database; resolves once it printed its line.
async function startServer(mode, appFile = app) {
  const dir = mkdtempSync(join(tmpdir(), 'clank-mcp-'));
  const env = { ...process.env, CLANK_TASKS_DB: join(dir, 'tasks.db'), CLANK_TASKS_USER: 'ann' };
  if (mode) env.CLANK_MCP_CONFIRMATION = mode;
  else delete env.CLANK_MCP_CONFIRMATION;
  const child = spawn(clankRun(), ['--port', '0', '--no-watch', appFile], {
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
    url: new URL('__clank/mcp', base),
    stderr: () => stderr,
    hangUp: () => child.kill('SIGHUP'), // a reload, even with --no-watch
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

// A connected SDK client. opts.elicit: a function answering elicitation/create (declares the
// capability); opts.headers: extra request headers.
async function connect(server, opts = {}) {
  const capabilities = opts.elicit ? { elicitation: {} } : {};
  const client = new Client({ name: 'clank-spec', version: '1.0.0' }, { capabilities });
  if (opts.elicit) client.setRequestHandler(ElicitRequestSchema, opts.elicit);
  const transport = new StreamableHTTPClientTransport(server.url, {
    requestInit: opts.headers ? { headers: opts.headers } : undefined,
  });
  await client.connect(transport);
  return client;
}

const textJSON = (result) => {
  assert.equal(result.content.length, 1);
  assert.equal(result.content[0].type, 'text');
  return JSON.parse(result.content[0].text);
};

describe('MCP with the official SDK client (annotations mode)', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = await connect(server);
  });
  after(async () => {
    await client?.close();
    await server?.stop();
  });

  test('connects and negotiates the preferred version', () => {
    const info = client.getServerVersion();
    assert.equal(info.name, 'tasks-mcp');
    assert.match(info.version, /^1\.0\.0\+[0-9a-f]{16}$/);
    assert.deepEqual(client.getServerCapabilities(), { tools: { listChanged: false }, logging: {} });
  });

  test('lists the tools with their schemas and annotations', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name),
      ['tasks_archive', 'tasks_complete', 'tasks_create', 'tasks_list']);
    // SPEC §6: portable names; _meta carries the action's own name
    assert.deepEqual(tools.map((t) => t._meta['clank/action']),
      ['tasks.archive', 'tasks.complete', 'tasks.create', 'tasks.list']);
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    assert.deepEqual(byName['tasks_archive'].annotations, { destructiveHint: true });
    assert.deepEqual(byName['tasks_complete'].annotations, { readOnlyHint: false, destructiveHint: false });
    assert.deepEqual(byName['tasks_create'].annotations, { readOnlyHint: false, destructiveHint: false });
    assert.deepEqual(byName['tasks_list'].annotations, { readOnlyHint: true });
    assert.equal(byName['tasks_create'].description, 'Create one task in the current workspace.');
    assert.deepEqual(byName['tasks_create'].inputSchema.required, ['estimate', 'title']);
    assert.deepEqual(byName['tasks_create'].inputSchema.properties.title,
      { type: 'string', minLength: 1, maxLength: 120, description: 'Short task title' });
    assert.deepEqual(byName['tasks_create'].inputSchema.properties.remindAt, {
      type: 'integer', description: 'When to be reminded, in milliseconds since the Unix epoch (in the future)',
    });
    assert.deepEqual(byName['tasks_create'].outputSchema, {
      type: 'object', additionalProperties: false, required: ['created', 'id'],
      properties: { id: { type: 'string' }, created: { type: 'boolean' } },
    });
    for (const t of tools) assert.equal(t.inputSchema.type, 'object');
  });

  test('calls a tool', async () => {
    const created = await client.callTool({
      name: 'tasks_create', arguments: { title: 'Ship docs', tags: ['docs'], estimate: 2 },
    });
    assert.equal(created.isError, undefined);
    assert.deepEqual(created.structuredContent, { id: '1', created: true });
    assert.deepEqual(textJSON(created), { id: '1', created: true });
    const listed = await client.callTool({ name: 'tasks_list', arguments: {} });
    assert.equal(listed.structuredContent.tasks.length, 1);
    assert.equal(listed.structuredContent.tasks[0].title, 'Ship docs');
    assert.deepEqual(listed.structuredContent.tasks[0].tags, ['docs']);
  });

  test('reports invalid input as an error result, without throwing', async () => {
    const result = await client.callTool({
      name: 'tasks_create', arguments: { title: '', tags: 'docs' },
    });
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent, undefined);
    assert.deepEqual(textJSON(result), {
      error: {
        code: 'INVALID_INPUT',
        message: 'estimate: Expected a finite number.; tags: Expected an array.; '
          + 'title: Must contain at least 1 character.',
        details: [
          { path: ['estimate'], message: 'Expected a finite number.', expected: 'number' },
          { path: ['tags'], message: 'Expected an array.', expected: 'array' },
          { path: ['title'], message: 'Must contain at least 1 character.' },
        ],
      },
    });
  });

  test('reports an action error as an error result', async () => {
    const result = await client.callTool({ name: 'tasks_complete', arguments: { id: '999' } });
    assert.equal(result.isError, true);
    assert.deepEqual(textJSON(result), { error: { code: 'NOT_FOUND', message: 'Task not found.' } });
  });

  test('calls tasks_create by its portable name; the action name is only in _meta', async () => {
    const { tools } = await client.listTools();
    const tool = tools.find((t) => t.name === 'tasks_create');
    assert.deepEqual(tool._meta, { 'clank/action': 'tasks.create' });
    const created = await client.callTool({
      name: 'tasks_create', arguments: { title: 'Portable', tags: [], estimate: null },
    });
    assert.equal(created.isError, undefined);
    assert.equal(created.structuredContent.created, true);
    // SPEC §6: tools/call takes the portable name only
    await assert.rejects(
      client.callTool({ name: 'tasks.create', arguments: { title: 'x', tags: [], estimate: null } }),
      (e) => e.code === -32602 && /Unknown tool: tasks\.create/.test(e.message));
  });
});

// Every JSON-RPC message the client receives, in order (wrapping the transport's onmessage, which
// the SDK set on connect).
function recordMessages(client) {
  const seen = [];
  const transport = client.transport;
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    seen.push(message);
    deliver.call(transport, message, extra);
  };
  return seen;
}

const notificationsOf = (seen, method) => seen.filter((m) => m.method === method).map((m) => m.params);

describe('MCP portable names, logging and progress with the official SDK client', () => {
  // SPEC §6 by hand: a_b is portable, so it keeps its name; a.b maps to a_b too, which another
  // tool has, so it becomes its first 55 characters + "_" + 8 hex digits of SHA-256("a.b").
  const digest = createHash('sha256').update('a.b').digest('hex').slice(0, 8);
  const expectedNames = {
    'a.b': `a_b_${digest}`,
    a_b: 'a_b',
    'notify.bad_progress': 'notify_bad_progress',
    'notify.logs': 'notify_logs',
    'notify.progress': 'notify_progress',
  };

  let server;
  let client;
  before(async () => {
    server = await startServer(undefined, notifyApp);
    client = await connect(server);
  });
  after(async () => {
    await client?.close();
    await server?.stop();
  });

  const toolNames = async (c) => Object.fromEntries(
    (await c.listTools()).tools.map((t) => [t._meta['clank/action'], t.name]));

  test('gives a.b and a_b distinct names, a.b digested', async () => {
    assert.equal(digest.length, 8);
    assert.deepEqual(await toolNames(client), expectedNames);
    const ab = await client.callTool({ name: `a_b_${digest}`, arguments: {} });
    assert.deepEqual(ab.structuredContent, { name: 'a.b' });
    const a_b = await client.callTool({ name: 'a_b', arguments: {} });
    assert.deepEqual(a_b.structuredContent, { name: 'a_b' });
  });

  test('keeps the same names across a restart', async () => {
    const again = await startServer(undefined, notifyApp);
    try {
      const other = await connect(again);
      try {
        assert.deepEqual(await toolNames(other), expectedNames);
      } finally {
        await other.close();
      }
    } finally {
      await again.stop();
    }
  });

  test('sends ctx.log at info and above by default, then at warning and above after setLevel', async () => {
    const c = await connect(server);
    try {
      const seen = recordMessages(c);
      const first = await c.callTool({ name: 'notify_logs', arguments: {} });
      assert.deepEqual(first.structuredContent, { logged: 4 });
      const info = { level: 'info', logger: 'notify.logs', data: 'info line' };
      const warning = { level: 'warning', logger: 'notify.logs', data: 'warning line' };
      const error = {
        level: 'error', logger: 'notify.logs', data: { message: 'error line', data: { code: 7 } },
      };
      assert.deepEqual(notificationsOf(seen, 'notifications/message'), [info, warning, error]);

      seen.length = 0;
      assert.deepEqual(await c.setLoggingLevel('warning'), {});
      const second = await c.callTool({ name: 'notify_logs', arguments: {} });
      assert.deepEqual(second.structuredContent, { logged: 4 });
      assert.deepEqual(notificationsOf(seen, 'notifications/message'), [warning, error]);
    } finally {
      await c.close();
    }
  });

  test('answers an unknown level with -32602', async () => {
    await assert.rejects(
      client.request({ method: 'logging/setLevel', params: { level: 'loud' } }, EmptyResultSchema),
      (e) => e.code === -32602);
  });

  test('sends progress in order when the call carries a progress token', async () => {
    const c = await connect(server);
    try {
      const seen = recordMessages(c);
      const progress = [];
      const result = await c.callTool({ name: 'notify_progress', arguments: {} },
        CallToolResultSchema, { onprogress: (p) => progress.push(p) });
      assert.deepEqual(result.structuredContent, { done: 3 });
      assert.deepEqual(progress, [
        { progress: 1, total: 3, message: 'step 1' },
        { progress: 2, total: 3, message: 'step 2' },
        { progress: 3, total: 3, message: 'step 3' },
      ]);
      const sent = notificationsOf(seen, 'notifications/progress');
      assert.deepEqual(sent.map((p) => p.progress), [1, 2, 3]);
      // the token is the one the SDK put in the call's _meta
      assert.equal(new Set(sent.map((p) => p.progressToken)).size, 1);
    } finally {
      await c.close();
    }
  });

  test('sends no progress without a progress token', async () => {
    const c = await connect(server);
    try {
      const seen = recordMessages(c);
      const result = await c.callTool({ name: 'notify_progress', arguments: {} });
      assert.deepEqual(result.structuredContent, { done: 3 });
      assert.deepEqual(notificationsOf(seen, 'notifications/progress'), []);
    } finally {
      await c.close();
    }
  });

  test('fails the call when a handler calls ctx.progress with a non-number', async () => {
    const result = await client.callTool({ name: 'notify_bad_progress', arguments: {} },
      CallToolResultSchema, { onprogress: () => assert.fail('no progress expected') });
    // a programming error in the handler: ACTION_FAILED, redacted (SPEC §5 step 9, §6)
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent, undefined);
    assert.deepEqual(textJSON(result),
      { error: { code: 'ACTION_FAILED', message: 'The action failed.' } });
    // the log is written once per loop iteration: the answer may arrive before its line
    const logged = /ctx\.progress: done must be a finite number \(got string\)/;
    for (let i = 0; i < 100 && !logged.test(server.stderr()); i++) await new Promise((r) => setTimeout(r, 20));
    assert.match(server.stderr(), logged);
  });
});

describe('MCP elicit mode with the official SDK client', () => {
  let server;
  before(async () => { server = await startServer('elicit'); });
  after(async () => { await server?.stop(); });

  test('runs the action when the person accepts', async () => {
    const asked = [];
    const client = await connect(server, {
      elicit: async (request) => {
        asked.push(request.params);
        return { action: 'accept', content: {} };
      },
    });
    try {
      const result = await client.callTool({
        name: 'tasks_create', arguments: { title: 'Accepted', tags: [], estimate: null },
      });
      assert.equal(result.isError, undefined);
      assert.deepEqual(result.structuredContent, { id: '1', created: true });
      assert.equal(asked.length, 1);
      assert.equal(asked[0].mode, 'form');
      assert.match(asked[0].message, /tasks\.create/);
      assert.match(asked[0].message, /write/);
      assert.deepEqual(asked[0].requestedSchema, { type: 'object', properties: {} });
      // an action without confirmation runs without asking
      const listed = await client.callTool({ name: 'tasks_list', arguments: {} });
      assert.equal(listed.structuredContent.tasks.length, 1);
      assert.equal(asked.length, 1);
    } finally {
      await client.close();
    }
  });

  test('answers CONFIRMATION_REQUIRED when the person declines', async () => {
    let asked = 0;
    const client = await connect(server, {
      elicit: async () => { asked += 1; return { action: 'decline' }; },
    });
    try {
      const result = await client.callTool({ name: 'tasks_archive', arguments: { id: '1' } });
      assert.equal(asked, 1);
      assert.equal(result.isError, true);
      assert.equal(result.structuredContent, undefined);
      assert.deepEqual(textJSON(result), CONFIRMATION_REQUIRED);
    } finally {
      await client.close();
    }
  });

  test('answers CONFIRMATION_REQUIRED to a client without the elicitation capability', async () => {
    const client = await connect(server);
    try {
      const result = await client.callTool({
        name: 'tasks_create', arguments: { title: 'Unasked', tags: [], estimate: null },
      });
      assert.equal(result.isError, true);
      assert.deepEqual(textJSON(result), CONFIRMATION_REQUIRED);
    } finally {
      await client.close();
    }
  });
});

describe('MCP refuse mode with the official SDK client', () => {
  let server;
  before(async () => { server = await startServer('refuse'); });
  after(async () => { await server?.stop(); });

  test('refuses an action requiring confirmation without the header', async () => {
    const client = await connect(server);
    try {
      const result = await client.callTool({
        name: 'tasks_create', arguments: { title: 'Refused', tags: [], estimate: null },
      });
      assert.equal(result.isError, true);
      assert.deepEqual(textJSON(result), CONFIRMATION_REQUIRED);
      const listed = await client.callTool({ name: 'tasks_list', arguments: {} });
      assert.deepEqual(listed.structuredContent, { tasks: [] });
    } finally {
      await client.close();
    }
  });

  test('runs it with x-clank-confirmation: confirmed', async () => {
    const client = await connect(server, { headers: { 'x-clank-confirmation': 'confirmed' } });
    try {
      const result = await client.callTool({
        name: 'tasks_create', arguments: { title: 'Confirmed', tags: [], estimate: null },
      });
      assert.equal(result.isError, undefined);
      assert.deepEqual(result.structuredContent, { id: '1', created: true });
    } finally {
      await client.close();
    }
  });
});

describe('MCP across a reload that changes the contract', () => {
  // An app that is the tasks fixture, plus one action when `extra` is true.
  const source = (extra) => `local clank = require "clank"
local s = clank.schema
local tasks = dofile(${JSON.stringify(app)})
local def = {}
for key, value in pairs(tasks) do def[key] = value end
def.actions = { table.unpack(tasks.actions) }
if ${extra} then
  def.actions[#def.actions + 1] = clank.defineAction {
    name = "tasks.count", description = "Counts the tasks.", sideEffects = "read",
    input = s.object {}, output = s.object { count = s.number() },
    handler = function() return { count = 0 } end,
  }
end
return clank.app(def)
`;

  test('refuses the old session and lists the new contract to a client that connects again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'clank-mcp-reload-'));
    const appFile = join(dir, 'app.lua');
    writeFileSync(appFile, source(false));
    const server = await startServer(undefined, appFile);
    const clients = [];
    try {
      const old = await connect(server);
      clients.push(old);
      const before = (await old.listTools()).tools.map((t) => t.name);
      assert.ok(!before.includes('tasks_count'), before.join(', '));

      writeFileSync(appFile, source(true));
      server.hangUp();
      const deadline = Date.now() + 5000;
      while (!/reloaded in .*actions added: tasks\.count/.test(server.stderr())) {
        assert.ok(Date.now() < deadline, `no reload logged; stderr:\n${server.stderr()}`);
        await new Promise((ok) => setTimeout(ok, 20));
      }

      // SPEC §6: a reload that changes the contract makes old sessions 404 …
      await assert.rejects(old.listTools(), /404|not found/i);
      // … so the client initializes again and lists the new tools.
      const fresh = await connect(server);
      clients.push(fresh);
      const after = (await fresh.listTools()).tools.map((t) => t.name);
      assert.deepEqual(after, [...before, 'tasks_count'].sort());
      const counted = await fresh.callTool({ name: 'tasks_count', arguments: {} });
      assert.deepEqual(counted.structuredContent, { count: 0 });
    } finally {
      for (const c of clients) await c.close().catch(() => {});
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('MCP across a reload that changes only app.mcp.tools', () => {
  // The notify fixture with app.mcp.tools set to the Lua table `tools`.
  const source = (tools) => `local clank = require "clank"
local base = dofile(${JSON.stringify(notifyApp)})
local def = {}
for key, value in pairs(base) do def[key] = value end
def.mcp = { tools = ${tools} }
return clank.app(def)
`;
  const textFor = (tool) => `{ ["${tool}"] = { text = function() return "shown" end } }`;

  test('keeps the session across a reload without change, refuses it after the options change',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'clank-mcp-tools-'));
      const appFile = join(dir, 'app.lua');
      writeFileSync(appFile, source(textFor('notify.logs')));
      const server = await startServer(undefined, appFile);
      const clients = [];
      const reload = async (n) => {
        server.hangUp();
        const deadline = Date.now() + 5000;
        while ((server.stderr().match(/reloaded in /g) || []).length < n) {
          assert.ok(Date.now() < deadline, `no reload logged; stderr:\n${server.stderr()}`);
          await new Promise((ok) => setTimeout(ok, 20));
        }
      };
      try {
        const old = await connect(server);
        clients.push(old);
        const tools = (await old.listTools()).tools;
        const logged = await old.callTool({ name: 'notify_logs', arguments: {} });
        assert.equal(logged.content[0].text, 'shown');

        // the same app again: the same contract, so the session goes on
        await reload(1);
        assert.deepEqual((await old.listTools()).tools, tools);

        // only app.mcp.tools changes (the text moves to another tool; tools/list is the same)
        writeFileSync(appFile, source(textFor('notify.progress')));
        await reload(2);
        // SPEC §6: a contract change makes old sessions 404
        await assert.rejects(old.listTools(), /404|not found/i);
        const fresh = await connect(server);
        clients.push(fresh);
        assert.notEqual(fresh.getServerVersion().version, old.getServerVersion().version);
        assert.deepEqual((await fresh.listTools()).tools, tools);
        const progressed = await fresh.callTool({ name: 'notify_progress', arguments: {} });
        assert.equal(progressed.content[0].text, 'shown');
        assert.deepEqual(progressed.structuredContent, { done: 3 });
      } finally {
        for (const c of clients) await c.close().catch(() => {});
        await server.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    });
});
