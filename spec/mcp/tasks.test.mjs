// Clank's MCP endpoint (SPEC §6) driven by the official MCP TypeScript SDK client over
// Streamable HTTP, against the real clank-run serving apps/tasks (through
// spec/fixtures/apps/mcp_tasks, which only sets app.mcp.confirmation from CLANK_MCP_CONFIRMATION).
//
//   CLANK_RUN=build/clank-run node --test spec/mcp/
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const app = join(root, 'spec/fixtures/apps/mcp_tasks/app.lua');
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
    assert.deepEqual(byName['tasks_create'].inputSchema.required, ['estimate', 'tags', 'title']);
    assert.deepEqual(byName['tasks_create'].inputSchema.properties.title,
      { type: 'string', minLength: 1, maxLength: 120, description: 'Short task title' });
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
          + 'title: Must contain at least 1 characters.',
        details: [
          { path: ['estimate'], message: 'Expected a finite number.', expected: 'number' },
          { path: ['tags'], message: 'Expected an array.', expected: 'array' },
          { path: ['title'], message: 'Must contain at least 1 characters.' },
        ],
      },
    });
  });

  test('reports an action error as an error result', async () => {
    const result = await client.callTool({ name: 'tasks_complete', arguments: { id: '999' } });
    assert.equal(result.isError, true);
    assert.deepEqual(textJSON(result), { error: { code: 'NOT_FOUND', message: 'Task not found.' } });
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
