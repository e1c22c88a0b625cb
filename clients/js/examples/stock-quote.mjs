// Signs and sends GET /api/1/stockquote/AAPL to a Portico gateway and prints the quote.
//   node clients/js/examples/stock-quote.mjs [SYMBOL]
// Defaults to the demo gateway and key; set PORTICO_GATEWAY, PORTICO_KEY_ID, PORTICO_SECRET_FILE for others.
import { readFile } from 'node:fs/promises';
import { RequestSigner, signedFetch } from '../portico-signer.mjs';

const gateway = process.env.PORTICO_GATEWAY ?? 'http://127.0.0.1:8080';
const secretFile = process.env.PORTICO_SECRET_FILE ?? new URL('../../../policies/secrets/demo-app.secret', import.meta.url);
const secret = (await readFile(secretFile, 'utf8')).replace(/[\r\n]+$/, ''); // a trailing newline is not part of the secret

const signer = new RequestSigner({
  keyId: process.env.PORTICO_KEY_ID ?? 'demo-app',
  secret,
  identity: { appVersion: '1.4.0', platform: 'node' },
});

const response = await signedFetch(signer, `${gateway}/api/1/stockquote/${encodeURIComponent(process.argv[2] ?? 'AAPL')}`);
const body = await response.json();
if (!response.ok) {
  console.error(`${response.status} ${body.type ?? ''}: ${body.detail ?? body.title ?? ''}`);
  process.exit(1);
}
console.log(JSON.stringify(body, null, 2));
