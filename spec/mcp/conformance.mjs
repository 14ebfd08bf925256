// The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
// package-lock.json) against apps/conformance/app.lua served by the real clank-run: each server
// scenario SPEC §6 lists, run as `conformance server --url ... --scenario S`; every check of every
// scenario must be SUCCESS (INFO lines are fine). The suite wants Node >= 22 (fs.globSync): on
// Node 20 it runs with node22.mjs's resolve hook.
//
//   CLANK_RUN=build/clank-run node spec/mcp/conformance.mjs [scenario...]
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const app = join(root, 'apps/conformance/app.lua');
const suite = join(here, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');

export const SCENARIOS = [
  'server-initialize', 'ping', 'tools-list',
  'tools-call-simple-text', 'tools-call-error', 'tools-call-with-logging',
  'tools-call-with-progress', 'tools-call-elicitation',
  'logging-set-level', 'dns-rebinding-protection', 'server-sse-multiple-streams',
  'json-schema-2020-12',
];

function startServer() {
  const bin = process.env.CLANK_RUN || join(root, 'build/clank-run');
  if (!existsSync(bin)) throw new Error(`clank-run not found at ${bin}: set CLANK_RUN`);
  const child = spawn(bin, ['--port', '0', '--no-watch', app], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  return new Promise((ok, fail) => {
    let out = '';
    const timer = setTimeout(() => fail(new Error(`no start-up line; stderr:\n${stderr}`)), 10000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/^clank-run: serving .* at (http:\/\/[^/]+\/)\n/);
      if (m) { clearTimeout(timer); ok({ child, base: m[1], stderr: () => stderr }); }
    });
    child.on('exit', (code) => { clearTimeout(timer); fail(new Error(`clank-run exited ${code}:\n${stderr}`)); });
  });
}

function run(args, cwd) {
  return new Promise((ok) => {
    const p = spawn(process.execPath, ['--import', join(here, 'node22.mjs'), suite, ...args],
      { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    p.on('exit', (code) => ok({ code, out }));
  });
}

// Every checks.json the suite wrote under dir.
function checks(dir) {
  const found = [];
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile() && e.name === 'checks.json') {
      found.push(...JSON.parse(readFileSync(join(e.parentPath ?? e.path, e.name), 'utf8')));
    }
  }
  return found;
}

const wanted = process.argv.slice(2).length ? process.argv.slice(2) : SCENARIOS;
const server = await startServer();
// the suite's dns-rebinding scenario needs a localhost URL
const url = new URL('__clank/mcp', server.base.replace('0.0.0.0', '127.0.0.1')).href;
let failed = 0;
try {
  for (const scenario of wanted) {
    const dir = mkdtempSync(join(tmpdir(), 'clank-conformance-'));
    const { code, out } = await run(['server', '--url', url, '--scenario', scenario,
      '--output-dir', dir], dir);
    let list = [];
    try { list = checks(dir); } catch { /* none written */ }
    const bad = list.filter((c) => c.status !== 'SUCCESS' && c.status !== 'INFO');
    const ok = code === 0 && list.some((c) => c.status === 'SUCCESS') && bad.length === 0;
    console.log(`${ok ? 'ok' : 'FAIL'} ${scenario} (${list.filter((c) => c.status === 'SUCCESS').length} checks)`);
    if (!ok) {
      failed++;
      console.log(out);
      for (const c of bad) console.log(`  ${c.status} ${c.id}: ${c.errorMessage ?? ''}`);
    }
    rmSync(dir, { recursive: true, force: true });
  }
} finally {
  server.child.kill('SIGTERM');
}
if (/Sanitizer|runtime error:/.test(server.stderr())) { console.log(server.stderr()); failed++; }
console.log(failed ? `${failed} of ${wanted.length} scenarios failed` : `all ${wanted.length} scenarios passed`);
process.exit(failed ? 1 : 0);
