// The resolve hook node22.mjs registers: `fs` / `node:fs` imported from the conformance
// package resolve to node22-fs.mjs (node:fs plus globSync); everything else resolves as usual.
const shim = new URL('./node22-fs.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL
      && context.parentURL.includes('/node_modules/@modelcontextprotocol/conformance/')) {
    return { url: shim, shortCircuit: true };
  }
  return next(specifier, context);
}
