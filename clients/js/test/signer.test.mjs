// Unit tests of the signer: nonces, @authority, bodies and their digests, coverage, errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  RequestSigner, SigningError, signedFetch, randomNonce, contentDigest, VERSION_FIELD, PLATFORM_FIELD, DEFAULT_COMPONENTS,
  isForbiddenRequestField,
} from '../portico-signer.mjs';

const SECRET = 'unit-test-secret-0123456789abcdefghijklmnopqrstuv';
const CREATED = 1763800000;

function signer(options = {}) {
  return new RequestSigner({ keyId: 'unit-app', secret: SECRET, clock: () => CREATED * 1000, nonce: () => 'n-unit', ...options });
}

function sha256Field(bytes) {
  return 'sha-256=:' + createHash('sha256').update(bytes).digest('base64') + ':';
}

/** The value of a component's line in a signature base. */
function line(base, name) {
  const found = base.split('\n').find((text) => text.startsWith(`"${name}": `));
  return found === undefined ? undefined : found.slice(name.length + 4);
}

async function rejectsWith(promise, code) {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof SigningError, `expected a SigningError, got ${error}`);
    assert.equal(error.name, 'SigningError');
    assert.equal(error.code, code, error.message);
    return true;
  });
}

// MARK: nonces

test('randomNonce: 16 random bytes as base64url without padding', () => {
  const nonce = randomNonce();
  assert.match(nonce, /^[A-Za-z0-9_-]{22}$/);
  assert.equal(Buffer.from(nonce, 'base64url').length, 16);
});

test('randomNonce: no repeats over 10,000 draws', () => {
  const seen = new Set();
  for (let index = 0; index < 10_000; index += 1) seen.add(randomNonce());
  assert.equal(seen.size, 10_000);
});

test('each signature draws a fresh nonce by default', async () => {
  const plain = new RequestSigner({ keyId: 'unit-app', secret: SECRET });
  const nonces = new Set();
  for (let index = 0; index < 20; index += 1) {
    const fields = new Map(await plain.sign({ url: 'https://gateway.test/api/1/stockquote/AAPL' }));
    const match = /;nonce="([A-Za-z0-9_-]{22})";keyid="unit-app"$/.exec(fields.get('Signature-Input'));
    assert.ok(match, fields.get('Signature-Input'));
    nonces.add(match[1]);
  }
  assert.equal(nonces.size, 20);
});

test('includesNonce: false leaves the nonce parameter out', async () => {
  const fields = new Map(await signer({ includesNonce: false }).sign({ url: 'https://gateway.test/a' }));
  assert.equal(fields.get('Signature-Input'), `sig1=("@method" "@authority" "@path");created=${CREATED};keyid="unit-app"`);
});

// MARK: parameters

test('parameters: created from a Date or milliseconds, rounded down; expires with a lifetime; label', async () => {
  const fromDate = signer({ clock: () => new Date(CREATED * 1000 + 999), lifetimeSeconds: 60, label: 'app-sig' });
  const input = new Map(await fromDate.sign({ url: 'https://gateway.test/a' })).get('Signature-Input');
  assert.equal(input, `app-sig=("@method" "@authority" "@path");created=${CREATED};expires=${CREATED + 60};nonce="n-unit";keyid="unit-app"`);
});

test('keyid is a structured-field string: quotes and backslashes escaped', async () => {
  const input = new Map(await signer({ keyId: 'a"b\\c' }).sign({ url: 'https://gateway.test/a' })).get('Signature-Input');
  assert.ok(input.endsWith(';keyid="a\\"b\\\\c"'), input);
});

test('invalid configuration is refused with a SigningError', async () => {
  assert.throws(() => new RequestSigner({ keyId: 'k' }), { name: 'SigningError', code: 'invalid-key' });
  assert.throws(() => new RequestSigner({ keyId: 'k', secret: 's', secretBytes: new Uint8Array([1]) }), { code: 'invalid-key' });
  assert.throws(() => new RequestSigner({ keyId: 'k', secret: '' }), { code: 'invalid-key' });
  assert.throws(() => new RequestSigner({ keyId: '', secret: 's' }), { code: 'invalid-option' });
  assert.throws(() => new RequestSigner({ keyId: 'k', secret: 's', label: 'Sig1' }), { code: 'invalid-parameter' });
  assert.throws(() => new RequestSigner({ keyId: 'k', secret: 's', lifetimeSeconds: 1.5 }), { code: 'invalid-option' });
  assert.throws(() => new RequestSigner({ keyId: 'k', secret: 's', identity: { platform: 'web' } }), { code: 'invalid-option' });
  assert.throws(() => new RequestSigner({ keyId: 'k\n', secret: 's' }), { code: 'invalid-parameter' });
  const mutable = signer();
  mutable.label = 'Not A Key';
  await rejectsWith(mutable.sign({ url: 'https://gateway.test/a' }), 'invalid-parameter');
});

test('secret and secretBytes with the same bytes sign alike; the key is imported once', async () => {
  const subtle = globalThis.crypto.subtle;
  const original = subtle.importKey;
  let imports = 0;
  subtle.importKey = function (...args) {
    imports += 1;
    return original.apply(this, args);
  };
  try {
    const fromText = signer();
    const fromBytes = signer({ secret: undefined, secretBytes: new TextEncoder().encode(SECRET) });
    const request = { url: 'https://gateway.test/api/1/stockquote/AAPL' };
    const first = await fromText.sign(request);
    for (let index = 0; index < 5; index += 1) assert.deepEqual(await fromText.sign(request), first);
    await Promise.all([fromBytes.sign(request), fromBytes.sign(request)]);
    assert.deepEqual(await fromBytes.sign(request), first);
    assert.equal(imports, 2);
  } finally {
    delete subtle.importKey;
  }
  assert.equal(globalThis.crypto.subtle.importKey, original);
});

// MARK: @authority, @path, @query, @method

test('@authority: the scheme default port is left out, the host lowercased; other ports kept', async () => {
  const cases = [
    ['https', 'Example.COM:443', 'example.com'],
    ['http', 'example.com:80', 'example.com'],
    ['https', 'example.com:80', 'example.com:80'],
    ['http', 'example.com:443', 'example.com:443'],
    ['http', 'example.com:8080', 'example.com:8080'],
    ['HTTPS', 'example.com:443', 'example.com'],
    ['http', '[::1]:80', '[::1]'],
  ];
  for (const [scheme, authority, expected] of cases) {
    const base = await signer().signatureBase({ scheme, authority, requestTarget: '/a' });
    assert.equal(line(base, '@authority'), expected, `${scheme} ${authority}`);
  }
  for (const [url, expected] of [
    ['http://EXAMPLE.com:80/a', 'example.com'],
    ['https://example.com:443/a', 'example.com'],
    ['https://example.com:8443/a', 'example.com:8443'],
    ['http://127.0.0.1:8080/a', '127.0.0.1:8080'],
  ]) {
    assert.equal(line(await signer().signatureBase({ url }), '@authority'), expected, url);
  }
});

test('the Host field is the authority as sent, and can be covered', async () => {
  const base = await signer({ coveredFields: ['Host'] }).signatureBase({ url: 'https://Gateway.test:8443/a' });
  assert.equal(line(base, 'host'), 'gateway.test:8443');
});

test('@path and @query are the URL as fetch sends it (WHATWG serialisation), fragment left out', async () => {
  const details = await signer().signWithDetails({ url: 'http://gateway.test/api/2/stock quote/BRK.B?q=café&a=b c#top' });
  assert.equal(line(details.signatureBase, '@path'), '/api/2/stock%20quote/BRK.B');
  assert.equal(line(details.signatureBase, '@query'), '?q=caf%C3%A9&a=b%20c');
  assert.deepEqual(details.components, ['@method', '@authority', '@path', '@query']);

  const dots = await signer().signatureBase({ url: 'http://gateway.test/a/./b/../c' });
  assert.equal(line(dots, '@path'), '/a/c');

  const emptyQuery = await signer().signWithDetails({ url: 'http://gateway.test/a?' });
  assert.equal(line(emptyQuery.signatureBase, '@query'), '?');
  assert.deepEqual(emptyQuery.components, ['@method', '@authority', '@path', '@query']);

  const noPath = await signer().signWithDetails({ url: 'http://gateway.test' });
  assert.equal(line(noPath.signatureBase, '@path'), '/');
  assert.deepEqual(noPath.components, DEFAULT_COMPONENTS);

  const parts = await signer().signatureBase({ scheme: 'http', authority: 'gateway.test', requestTarget: '/a%2Fb?x=%41' });
  assert.equal(line(parts, '@path'), '/a%2Fb');
  assert.equal(line(parts, '@query'), '?x=%41');
});

test('the method is signed as fetch sends it', async () => {
  assert.equal(line(await signer().signatureBase({ method: 'post', url: 'https://g.test/a' }), '@method'), 'POST');
  assert.equal(line(await signer().signatureBase({ method: 'PATCH', url: 'https://g.test/a' }), '@method'), 'PATCH');
  assert.equal(line(await signer().signatureBase({ method: 'patch', url: 'https://g.test/a' }), '@method'), 'patch');
  assert.equal(line(await signer().signatureBase({ url: 'https://g.test/a' }), '@method'), 'GET');
});

test('URLs that are not absolute http(s) are refused', async () => {
  for (const url of ['/relative/in/node', 'ftp://example.com/a', 'mailto:someone@example.com', 'https://user:pw@example.com/a', 'not a url']) {
    await rejectsWith(signer().sign({ url }), 'invalid-url');
  }
  await rejectsWith(signer().sign({ scheme: 'ws', authority: 'a', requestTarget: '/' }), 'invalid-url');
  await rejectsWith(signer().sign({}), 'invalid-url');
});

// MARK: bodies

test('Content-Digest is the SHA-256 of the body, covered after the derived components', async () => {
  const body = '{"symbol": "AAPL", "quantity": 10}';
  const details = await signer().signWithDetails({ method: 'POST', url: 'https://gateway.test/api/1/orders', body });
  const fields = new Map(details.fields);
  assert.equal(fields.get('Content-Digest'), sha256Field(body));
  assert.equal(fields.get('Content-Digest'), 'sha-256=:ibXltkW1ofYvZKbXhv1WMe9I7xzqLlBwp1muhTeVSIs=:');
  assert.deepEqual(details.components, ['@method', '@authority', '@path', 'content-digest']);
  assert.equal(line(details.signatureBase, 'content-digest'), fields.get('Content-Digest'));
  assert.equal(await contentDigest(new Uint8Array()), 'sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:');
});

test('string, ArrayBuffer, TypedArray, DataView, Blob and URLSearchParams bodies give the same digest as their bytes', async () => {
  const text = 'é=1&b=two words';
  const bytes = new TextEncoder().encode(text);
  const padded = new Uint8Array(bytes.length + 8);
  padded.set(bytes, 4);
  const expected = sha256Field(bytes);
  const bodies = {
    string: text,
    ArrayBuffer: bytes.buffer.slice(0),
    Uint8Array: bytes,
    'Uint8Array view at an offset': padded.subarray(4, 4 + bytes.length),
    DataView: new DataView(padded.buffer, 4, bytes.length),
    Blob: new Blob([bytes], { type: 'application/octet-stream' }),
  };
  for (const [kind, body] of Object.entries(bodies)) {
    const fields = new Map(await signer().sign({ method: 'POST', url: 'https://gateway.test/a', body }));
    assert.equal(fields.get('Content-Digest'), expected, kind);
  }
  const form = new URLSearchParams({ symbol: 'BRK.B', note: 'a b&c' });
  const formFields = new Map(await signer().sign({ method: 'POST', url: 'https://gateway.test/a', body: form }));
  assert.equal(formFields.get('Content-Digest'), sha256Field('symbol=BRK.B&note=a+b%26c'));
});

test('an empty body has no Content-Digest and covers none', async () => {
  for (const body of ['', new Uint8Array(), new ArrayBuffer(0), new Blob([]), null, undefined]) {
    const details = await signer().signWithDetails({ method: 'POST', url: 'https://gateway.test/a', body });
    assert.equal(new Map(details.fields).has('Content-Digest'), false);
    assert.deepEqual(details.components, DEFAULT_COMPONENTS);
  }
});

test('streamed, FormData and other bodies are refused with a clear SigningError', async () => {
  const stream = new ReadableStream({ start(controller) { controller.enqueue(new Uint8Array([1])); controller.close(); } });
  await rejectsWith(signer().sign({ method: 'POST', url: 'https://gateway.test/a', body: stream }), 'body-stream');
  const form = new FormData();
  form.set('a', 'b');
  await rejectsWith(signer().sign({ method: 'POST', url: 'https://gateway.test/a', body: form }), 'unsupported-body');
  await rejectsWith(signer().sign({ method: 'POST', url: 'https://gateway.test/a', body: { a: 1 } }), 'unsupported-body');
  await rejectsWith(signer().sign({ method: 'POST', url: 'https://gateway.test/a', body: 42 }), 'unsupported-body');
  try {
    await signer().sign({ method: 'POST', url: 'https://gateway.test/a', body: stream });
  } catch (error) {
    assert.match(error.message, /ReadableStream/);
  }
});

test('signedFetch refuses a ReadableStream body before sending anything', async () => {
  const original = globalThis.fetch;
  let calls = 0;
  globalThis.fetch = async () => {
    calls += 1;
    return new Response('');
  };
  try {
    const body = new ReadableStream({ pull(controller) { controller.close(); } });
    await rejectsWith(signedFetch(signer(), 'https://gateway.test/a', { method: 'POST', body, duplex: 'half' }), 'body-stream');
    const request = new Request('https://gateway.test/a', { method: 'POST', body: 'x' });
    await rejectsWith(signedFetch(signer(), request, { body: new ReadableStream(), duplex: 'half' }), 'body-stream');
    assert.equal(calls, 0);
  } finally {
    globalThis.fetch = original;
  }
});

// MARK: coverage and fields

test('identity fields are set, replace stale ones, and are covered after content-digest', async () => {
  const identified = signer({ identity: { appVersion: '2.4.1', platform: 'web' } });
  const details = await identified.signWithDetails({
    method: 'POST',
    url: 'https://gateway.test/api/1/orders?dry=1',
    headers: { 'x-client-version': '0.0.1', Signature: 'stale', 'Signature-Input': 'stale' },
    body: 'x',
  });
  assert.deepEqual(details.fields.map(([name]) => name), [VERSION_FIELD, PLATFORM_FIELD, 'Content-Digest', 'Signature-Input', 'Signature']);
  assert.deepEqual(details.components, ['@method', '@authority', '@path', '@query', 'content-digest', 'x-client-version', 'x-client-platform']);
  assert.equal(line(details.signatureBase, 'x-client-version'), '2.4.1');
  assert.equal(line(details.signatureBase, 'x-client-platform'), 'web');

  const noPlatform = await signer({ identity: { appVersion: '1.0.0' } }).signWithDetails({ url: 'https://gateway.test/a' });
  assert.deepEqual(noPlatform.fields.map(([name]) => name), [VERSION_FIELD, 'Signature-Input', 'Signature']);
});

test('coveredFields are covered when the request carries them, trimmed and joined, and skipped otherwise', async () => {
  const covering = signer({ coveredFields: ['Content-Type', 'X-Trace'] });
  const absent = await covering.signWithDetails({ url: 'https://gateway.test/a' });
  assert.deepEqual(absent.components, DEFAULT_COMPONENTS);

  const present = await covering.signWithDetails({
    url: 'https://gateway.test/a',
    headers: [['content-type', ' application/json\t'], ['X-Trace', 'a'], ['x-trace', 'b ']],
  });
  assert.deepEqual(present.components, [...DEFAULT_COMPONENTS, 'content-type', 'x-trace']);
  assert.equal(line(present.signatureBase, 'content-type'), 'application/json');
  assert.equal(line(present.signatureBase, 'x-trace'), 'a, b');

  const fromHeaders = await covering.signWithDetails({ url: 'https://gateway.test/a', headers: new Headers({ 'X-Trace': 'h' }) });
  assert.equal(line(fromHeaders.signatureBase, 'x-trace'), 'h');
});

test('a covered field the request lacks is an error (exact coverage)', async () => {
  const request = { method: 'POST', url: 'https://example.com/foo', headers: [['Content-Type', 'application/json']] };
  await rejectsWith(signer().signCovering(request, ['date', '@authority']), 'missing-component');
  try {
    await signer().signCovering(request, ['date']);
  } catch (error) {
    assert.match(error.message, /"date" is not present/);
  }
  const signed = await signer().signCovering(request, ['content-type', '@authority']);
  assert.equal(signed.signatureBase.split('\n')[0], '"content-type": application/json');
});

test('exact coverage refuses bad component identifiers', async () => {
  const request = { url: 'https://example.com/foo' };
  await rejectsWith(signer().signCovering(request, ['@Method']), 'invalid-component');
  await rejectsWith(signer().signCovering(request, ['@method', '@method']), 'invalid-component');
  await rejectsWith(signer().signCovering(request, ['@signature-params']), 'invalid-component');
  await rejectsWith(signer().signCovering(request, ['@query-param']), 'unsupported-component');
  await rejectsWith(signer().signCovering(request, ['@status']), 'unsupported-component');
  await rejectsWith(signer().signCovering(request, ['content-digest;key="sha-256"']), 'invalid-component');
  await rejectsWith(signer().signCovering(request, 'date'), 'invalid-component');
});

test('exact coverage computes every derived request component', async () => {
  const signed = await signer({ includesNonce: false }).signCovering(
    { method: 'GET', url: 'https://Example.com:443/a/b?c=d' },
    ['@method', '@target-uri', '@authority', '@scheme', '@request-target', '@path', '@query']);
  assert.equal(signed.signatureBase, [
    '"@method": GET',
    '"@target-uri": https://example.com/a/b?c=d',
    '"@authority": example.com',
    '"@scheme": https',
    '"@request-target": /a/b?c=d',
    '"@path": /a/b',
    '"@query": ?c=d',
    `"@signature-params": ("@method" "@target-uri" "@authority" "@scheme" "@request-target" "@path" "@query");created=${CREATED};keyid="unit-app"`,
  ].join('\n'));
});

test('a covered value that is not visible ASCII cannot be signed', async () => {
  const covering = signer({ coveredFields: ['x-note'] });
  await rejectsWith(covering.sign({ url: 'https://gateway.test/a', headers: { 'X-Note': 'café' } }), 'non-ascii');
  await rejectsWith(covering.sign({ url: 'https://gateway.test/a', headers: [['X-Note', 'a\nb']] }), 'non-ascii');
  await rejectsWith(signer({ identity: { appVersion: '2.0 ✓' } }).sign({ url: 'https://gateway.test/a' }), 'non-ascii');
  // An uncovered field may carry anything.
  await signer().sign({ url: 'https://gateway.test/a', headers: { 'X-Note': 'café' } });
});

// MARK: signRequest

test('signRequest returns a copy carrying the signed fields and the same body', async () => {
  const original = new Request('https://gateway.test/api/1/orders', {
    method: 'POST', body: '{"a":1}', headers: { 'Content-Type': 'application/json' },
  });
  const signed = await signer({ coveredFields: ['content-type'] }).signRequest(original);
  assert.equal(signed.method, 'POST');
  assert.equal(signed.url, 'https://gateway.test/api/1/orders');
  assert.equal(signed.headers.get('content-digest'), sha256Field('{"a":1}'));
  assert.match(signed.headers.get('signature-input'), /^sig1=\("@method" "@authority" "@path" "content-digest" "content-type"\);created=/);
  assert.match(signed.headers.get('signature'), /^sig1=:[A-Za-z0-9+/]{43}=:$/);
  assert.equal(await signed.text(), '{"a":1}');
  assert.equal(original.bodyUsed, false);

  const get = await signer().signRequest(new Request('https://gateway.test/a?b=c'));
  assert.equal(get.body, null);
  assert.match(get.headers.get('signature-input'), /"@query"\)/);
  await rejectsWith(signer().signRequest('https://gateway.test/a'), 'invalid-option');
});

// MARK: fields the caller passes

test("a caller's own Host field is the authority, signed once: the same signature as without it", async () => {
  const covering = signer({ coveredFields: ['host'] });
  const url = 'https://api.example.com/api/1/notes';
  const withHost = await covering.signatureBase({ method: 'GET', url, headers: [['Host', 'api.example.com']] });
  const without = await covering.signatureBase({ method: 'GET', url });
  assert.equal(line(withHost, 'host'), 'api.example.com');
  assert.equal(withHost, without);
});

test('in a browser, covering a field fetch never sends is refused; Host, which the browser sends itself, is not', async () => {
  const url = 'https://api.example.com/api/1/notes';
  assert.ok(isForbiddenRequestField('Date') && isForbiddenRequestField('Sec-Fetch-Mode') && isForbiddenRequestField('proxy-authorization'));
  assert.ok(!isForbiddenRequestField('content-type') && !isForbiddenRequestField('x-client-version'));
  globalThis.document = {};
  try {
    assert.throws(() => signer({ coveredFields: ['Date'] }), (error) => error instanceof SigningError && error.code === 'invalid-option');
    await signer({ coveredFields: ['host', 'content-type'] }).sign({ method: 'GET', url });
  } finally {
    delete globalThis.document;
  }
  // Node sends what it is given: no refusal there.
  await signer({ coveredFields: ['Date'] }).sign({ method: 'GET', url, headers: [['Date', 'x']] });
});
