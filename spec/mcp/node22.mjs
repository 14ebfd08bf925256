// Lets @modelcontextprotocol/conformance (written for Node >= 22) run on Debian 12's Node 20:
// its one Node 22 need is `globSync` from "fs", so a resolve hook hands its `fs` imports a
// module that re-exports node:fs plus glob's globSync. Use: node --import ./node22.mjs ...
import { register } from 'node:module';

if (typeof (await import('node:fs')).globSync !== 'function') {
  register('./node22-hooks.mjs', import.meta.url);
}
