// Types for importing ./portico-signer.mjs by its file name: TypeScript looks for a .d.mts beside a
// .mjs, so this re-exports the declarations in portico-signer.d.ts.
export * from './portico-signer.js';
