#!/usr/bin/env node
// Checks the JavaScript signer against a running Portico gateway, for the project's Swift test suite.
//
//   node live-check.mjs --url http://127.0.0.1:8080 --path /api/1/stockquote/AAPL \
//       --key-id demo-app --secret-file policies/secrets/demo-app.secret [--app-version 2.4.1] [--platform web]
//
// For TLS, trust the gateway's CA with NODE_EXTRA_CA_CERTS=ca.pem. Prints one line of JSON:
//   {"accepted":{"status":S,"type":T},"tampered":{...},"replayFirst":{...},"replayed":{...}}
// where T is the problem+json `type` of the response body, or null. It decides nothing: the caller
// asserts the statuses (expected 200, 401, 200, 401). Exits 0 after printing; non-zero (2) only
// when it could not run (bad arguments, unreadable secret, gateway unreachable).

import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { RequestSigner, signedFetch } from './portico-signer.mjs';

const usage =
  'usage: node live-check.mjs --url <gateway base URL> --path <signed path> --key-id <id> --secret-file <file> ' +
  '[--app-version <v>] [--platform <p>] [--timeout <seconds>]';

function fail(message) {
  process.stderr.write(`live-check: ${message}\n`);
  process.exit(2);
}

let options;
try {
  ({ values: options } = parseArgs({
    options: {
      url: { type: 'string' },
      path: { type: 'string' },
      'key-id': { type: 'string' },
      'secret-file': { type: 'string' },
      'app-version': { type: 'string' },
      platform: { type: 'string' },
      timeout: { type: 'string', default: '15' },
    },
    strict: true,
  }));
} catch (error) {
  fail(`${error.message}\n${usage}`);
}
for (const name of ['url', 'path', 'key-id', 'secret-file']) {
  if (!options[name]) fail(`--${name} is required\n${usage}`);
}
if (!options.path.startsWith('/')) fail('--path must start with /');
if (options.platform && !options['app-version']) fail('--platform needs --app-version');
const timeoutMs = Number(options.timeout) * 1000;
if (!(timeoutMs > 0)) fail('--timeout must be a positive number of seconds');

// Read as the gateway and `portico sign` read key files: UTF-8, trailing line breaks not part of the secret.
let secret;
try {
  secret = (await readFile(options['secret-file'], 'utf8')).replace(/[\r\n]+$/, '');
} catch (error) {
  fail(`cannot read the secret file ${options['secret-file']}: ${error.message}`);
}

const base = options.url.replace(/\/+$/, '');
const signedURL = base + options.path;
// Another path of the same service: the last segment changed (…/AAPL → …/MSFT).
const segments = options.path.split('/');
segments[segments.length - 1] = segments[segments.length - 1] === 'MSFT' ? 'AAPL' : 'MSFT';
const otherURL = base + segments.join('/');

const signer = new RequestSigner({
  keyId: options['key-id'],
  secret,
  identity: options['app-version'] ? { appVersion: options['app-version'], platform: options.platform ?? null } : null,
});

/** Status and problem type of a response; its body is always read so the connection is freed. */
async function outcome(response) {
  const text = await response.text();
  let type = null;
  if (/json/i.test(response.headers.get('content-type') ?? '')) {
    try {
      const body = JSON.parse(text);
      if (typeof body?.type === 'string') type = body.type;
    } catch {
      // not JSON after all: no type
    }
  }
  return { status: response.status, type };
}

const init = () => ({ cache: 'no-store', signal: AbortSignal.timeout(timeoutMs) });

try {
  // 1. An ordinary signed request.
  const accepted = await outcome(await signedFetch(signer, signedURL, init()));

  // 2. Signed for one path, sent to another: @path no longer matches.
  const tamperedFields = await signer.sign({ method: 'GET', url: signedURL });
  const tampered = await outcome(await fetch(otherURL, { ...init(), headers: tamperedFields }));

  // 3. One signed request sent twice with identical fields: the second reuses the nonce.
  const replayFields = await signer.sign({ method: 'GET', url: signedURL });
  const replayFirst = await outcome(await fetch(signedURL, { ...init(), headers: replayFields }));
  const replayed = await outcome(await fetch(signedURL, { ...init(), headers: replayFields }));

  process.stdout.write(JSON.stringify({ accepted, tampered, replayFirst, replayed }) + '\n');
} catch (error) {
  const cause = error?.cause ? ` (${error.cause.code ?? error.cause.message ?? error.cause})` : '';
  fail(`could not run the checks against ${base}: ${error.message}${cause}`);
}
