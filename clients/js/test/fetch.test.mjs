// signedFetch end to end: requests sent by Node's fetch to a local node:http server, which records
// what actually arrived (method, raw request target, fields, body). Each recording is verified by an
// independent RFC 9421 verifier written here with node:crypto, which shares no code with the signer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { RequestSigner, SigningError, signedFetch } from '../portico-signer.mjs';

const SECRET = 'fetch-test-secret-0123456789abcdefghijklmnopqrstuv';
let server;
let origin;
const received = [];

before(async () => {
  server = createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      received.push({ method: request.method, target: request.url, headers: request.headers, body: Buffer.concat(chunks) });
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end('{"ok":true}');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${server.address().port}`;
});

after(() => new Promise((resolve) => server.close(resolve)));

/** Sends with `send` and returns what the server received. */
async function exchange(send) {
  const count = received.length;
  const response = await send();
  assert.equal(response.status, 200);
  assert.deepEqual(await response.json(), { ok: true });
  assert.equal(received.length, count + 1);
  return received[count];
}

/**
 * An independent verifier of what arrived: parses Signature-Input (one member), rebuilds the base
 * from the received request alone, and compares the HMAC-SHA256 in constant time. Also checks
 * Content-Digest against the received body. Returns the covered components, or throws.
 */
function verify(record, { secret = SECRET, label = 'sig1' } = {}) {
  const input = record.headers['signature-input'];
  const signature = record.headers['signature'];
  assert.ok(input && signature, 'both signature fields arrived');
  const member = new RegExp(`^${label}=(\\((.*?)\\).*)$`).exec(input);
  assert.ok(member, `Signature-Input has the label ${label}: ${input}`);
  const components = [...member[2].matchAll(/"([^"]+)"/g)].map((match) => match[1]);
  const queryAt = record.target.indexOf('?');
  const path = queryAt < 0 ? record.target : record.target.slice(0, queryAt);
  const lines = components.map((name) => {
    let value;
    if (name === '@method') value = record.method;
    else if (name === '@authority') value = record.headers.host.toLowerCase().replace(/:80$/, '');
    else if (name === '@path') value = path || '/';
    else if (name === '@query') value = queryAt < 0 ? '?' : record.target.slice(queryAt);
    else if (name.startsWith('@')) throw new Error(`unexpected derived component ${name}`);
    else {
      value = record.headers[name];
      assert.ok(value !== undefined, `the covered field ${name} arrived`);
      value = String(value).trim();
    }
    return `"${name}": ${value}`;
  });
  const base = [...lines, `"@signature-params": ${member[1]}`].join('\n');
  const expected = createHmac('sha256', secret).update(base, 'utf8').digest();
  const presented = /^[a-z0-9*_.-]+=:([A-Za-z0-9+/=]+):$/.exec(signature);
  assert.ok(presented, `Signature is label=:base64: (${signature})`);
  const mac = Buffer.from(presented[1], 'base64');
  if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) throw new Error(`bad signature over\n${base}`);

  if (record.body.length > 0) {
    assert.ok(components.includes('content-digest'), 'a body is covered by its digest');
    assert.equal(record.headers['content-digest'], `sha-256=:${createHash('sha256').update(record.body).digest('base64')}:`);
  } else {
    assert.equal(record.headers['content-digest'], undefined);
  }
  return components;
}

test('GET: the path and query fetch sends (percent-encoded by URL) are what was signed', async () => {
  const signer = new RequestSigner({ keyId: 'fetch-app', secret: SECRET, identity: { appVersion: '2.4.1', platform: 'web' } });
  const record = await exchange(() => signedFetch(signer, `${origin}/api/2/stock quote/BRK.B?q=café&note=a b#fragment`));
  assert.equal(record.method, 'GET');
  assert.equal(record.target, '/api/2/stock%20quote/BRK.B?q=caf%C3%A9&note=a%20b');
  assert.equal(record.headers['x-client-version'], '2.4.1');
  assert.equal(record.headers['x-client-platform'], 'web');
  assert.deepEqual(verify(record), ['@method', '@authority', '@path', '@query', 'x-client-version', 'x-client-platform']);
  assert.match(record.headers['signature-input'], /;created=\d+;nonce="[A-Za-z0-9_-]{22}";keyid="fetch-app"$/);
});

test('POST with a string body and covered Content-Type', async () => {
  const signer = new RequestSigner({ keyId: 'fetch-app', secret: SECRET, coveredFields: ['content-type'] });
  const body = JSON.stringify({ symbol: 'AAPL', quantity: 10, note: 'é' });
  const record = await exchange(() =>
    signedFetch(signer, new URL('/api/1/orders', origin), { method: 'post', body, headers: { 'Content-Type': 'application/json' } }));
  assert.equal(record.method, 'POST');
  assert.equal(record.body.toString('utf8'), body);
  assert.deepEqual(verify(record), ['@method', '@authority', '@path', 'content-digest', 'content-type']);
});

test('POST with ArrayBuffer, TypedArray, DataView, Blob and URLSearchParams bodies', async () => {
  const signer = new RequestSigner({ keyId: 'fetch-app', secret: SECRET, coveredFields: ['content-type'] });
  const bytes = new Uint8Array([0, 1, 2, 250, 251, 252, 10, 13]);
  const padded = new Uint8Array(16);
  padded.set(bytes, 3);
  const bodies = [
    bytes.buffer.slice(0),
    bytes,
    padded.subarray(3, 3 + bytes.length),
    new DataView(padded.buffer, 3, bytes.length),
    new Blob([bytes], { type: 'application/octet-stream' }),
  ];
  for (const body of bodies) {
    const record = await exchange(() => signedFetch(signer, `${origin}/upload?kind=bytes`, { method: 'PUT', body }));
    assert.deepEqual(new Uint8Array(record.body), bytes);
    verify(record);
  }
  // fetch adds the Blob's type and the form's Content-Type itself, after signing: arrives, not covered.
  const blobRecord = await exchange(() => signedFetch(signer, `${origin}/upload`, { method: 'POST', body: new Blob(['{}'], { type: 'application/json' }) }));
  assert.equal(blobRecord.headers['content-type'], 'application/json');
  assert.deepEqual(verify(blobRecord), ['@method', '@authority', '@path', 'content-digest']);
  const formRecord = await exchange(() => signedFetch(signer, `${origin}/form`, { method: 'POST', body: new URLSearchParams({ a: 'b c', d: 'é' }) }));
  assert.equal(formRecord.body.toString(), 'a=b+c&d=%C3%A9');
  verify(formRecord);
});

test('a Request as input, with and without init', async () => {
  const signer = new RequestSigner({ keyId: 'fetch-app', secret: SECRET, coveredFields: ['content-type'] });
  const request = new Request(`${origin}/api/1/orders?x=1`, { method: 'POST', body: 'payload', headers: { 'Content-Type': 'text/plain' } });
  const record = await exchange(() => signedFetch(signer, request));
  assert.equal(record.body.toString(), 'payload');
  assert.deepEqual(verify(record), ['@method', '@authority', '@path', '@query', 'content-digest', 'content-type']);

  const overridden = await exchange(() => signedFetch(signer, new Request(`${origin}/a`), { method: 'DELETE', headers: { 'X-Other': '1' } }));
  assert.equal(overridden.method, 'DELETE');
  assert.deepEqual(verify(overridden), ['@method', '@authority', '@path']);
});

test('the independent verifier refuses a signature sent with another path or another key', async () => {
  const signer = new RequestSigner({ keyId: 'fetch-app', secret: SECRET });
  const fields = await signer.sign({ url: `${origin}/api/1/stockquote/AAPL` });
  const honest = await exchange(() => fetch(`${origin}/api/1/stockquote/AAPL`, { headers: fields }));
  verify(honest);
  const moved = await exchange(() => fetch(`${origin}/api/1/stockquote/MSFT`, { headers: fields }));
  assert.throws(() => verify(moved), /bad signature/);
  assert.throws(() => verify(honest, { secret: 'another-secret' }), /bad signature/);
});

test('a label other than sig1 and a lifetime arrive as signed', async () => {
  const signer = new RequestSigner({ keyId: 'fetch-app', secret: SECRET, label: 'app', lifetimeSeconds: 30 });
  const record = await exchange(() => signedFetch(signer, `${origin}/a`));
  verify(record, { label: 'app' });
  const [, created, expires] = /;created=(\d+);expires=(\d+);/.exec(record.headers['signature-input']);
  assert.equal(Number(expires) - Number(created), 30);
  assert.ok(Math.abs(Number(created) - Date.now() / 1000) < 5);
});

test('signedFetch with a ReadableStream body throws SigningError and sends nothing', async () => {
  const signer = new RequestSigner({ keyId: 'fetch-app', secret: SECRET });
  const count = received.length;
  const body = new ReadableStream({ start(controller) { controller.enqueue(new TextEncoder().encode('x')); controller.close(); } });
  await assert.rejects(signedFetch(signer, `${origin}/a`, { method: 'POST', body, duplex: 'half' }), (error) =>
    error instanceof SigningError && error.code === 'body-stream');
  assert.equal(received.length, count);
});
