// The shared signing vectors (Tests/Vectors/signing-vectors.json), which the Swift client signer and
// the gateway's verifier are tested against too: the JavaScript signer must reproduce each one byte
// for byte (signature base, Signature-Input, Signature, and the fields it adds).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { RequestSigner } from '../portico-signer.mjs';

const file = new URL('../../../Tests/Vectors/signing-vectors.json', import.meta.url);
const { vectors } = JSON.parse(readFileSync(file, 'utf8'));

/** The signer set up as the vector says (as SharedVectorTests.swift sets up the Swift one). */
function signerFor(vector) {
  const key = vector.key.text !== undefined
    ? { secret: vector.key.text }
    : { secretBytes: new Uint8Array(Buffer.from(vector.key.base64, 'base64')) };
  return new RequestSigner({
    keyId: vector.keyID,
    ...key,
    identity: vector.identity,
    label: vector.label,
    lifetimeSeconds: vector.lifetime,
    includesNonce: vector.nonce !== null,
    clock: () => new Date(vector.created * 1000),
    nonce: () => vector.nonce,
  });
}

function requestOf(vector) {
  return { method: vector.request.method, url: vector.request.url, headers: vector.request.headers, body: vector.body };
}

test('the vector file has vectors of both coverage modes', () => {
  assert.ok(vectors.length >= 6);
  assert.ok(vectors.some((vector) => vector.coverage.mode === 'exact'));
  assert.ok(vectors.some((vector) => vector.coverage.mode === 'default'));
});

for (const vector of vectors) {
  test(`vector: ${vector.name}`, async () => {
    const signer = signerFor(vector);
    if (vector.coverage.mode === 'exact') {
      const signed = await signer.signCovering(requestOf(vector), vector.coverage.components);
      assert.equal(signed.signatureBase, vector.expected.signatureBase);
      assert.equal(signed.signatureInput, vector.expected.signatureInput);
      assert.equal(signed.signature, vector.expected.signature);
      return;
    }
    assert.equal(vector.coverage.mode, 'default');
    const signed = await signer.signWithDetails(requestOf(vector));
    assert.equal(signed.signatureBase, vector.expected.signatureBase);
    assert.deepEqual(signed.components, vector.coverage.components);

    const fields = new Map(signed.fields);
    assert.equal(fields.get('Signature-Input'), vector.expected.signatureInput);
    assert.equal(fields.get('Signature'), vector.expected.signature);
    assert.equal(fields.get('Content-Digest'), vector.expected.contentDigest);
    assert.equal(fields.get('X-Client-Version'), vector.identity?.appVersion);
    assert.equal(fields.get('X-Client-Platform'), vector.identity?.platform ?? undefined);
    const expectedNames = [
      ...(vector.identity ? ['X-Client-Version'] : []),
      ...(vector.identity?.platform ? ['X-Client-Platform'] : []),
      ...(vector.expected.contentDigest ? ['Content-Digest'] : []),
      'Signature-Input', 'Signature',
    ];
    assert.deepEqual(signed.fields.map(([name]) => name), expectedNames);

    // sign() and signatureBase() give the same as signWithDetails().
    assert.deepEqual(await signer.sign(requestOf(vector)), signed.fields);
    assert.equal(await signer.signatureBase(requestOf(vector)), vector.expected.signatureBase);
  });
}
