// node:fs as Node 22 has it, for the conformance package on Node 20 (see node22.mjs).
import fs from 'node:fs';
import { globSync } from 'glob';

export * from 'node:fs';
export { globSync };
export default { ...fs, globSync };
