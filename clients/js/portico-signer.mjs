// Portico request signer for JavaScript (browsers and Node 20+).
//
// Signs requests for a Portico gateway the way the Swift client library (PorticoClient's
// RequestSigner) does, byte for byte: RFC 9421 HTTP Message Signatures with `hmac-sha256`, and an
// RFC 9530 `Content-Digest` for bodies. WebCrypto only (`globalThis.crypto.subtle`), no Node-only
// imports and no dependencies, so the same file runs in a browser page, a worker and Node.

/**
 * The field that carries the app's version. The gateway maps it to an API version and refuses apps
 * older than a service's minimum, so it is covered by the signature: a proxy cannot move a request
 * into another compatibility bucket without breaking it.
 */
export const VERSION_FIELD = 'X-Client-Version';

/** The field that carries the app's platform (`web`, `android`…), covered like the version. */
export const PLATFORM_FIELD = 'X-Client-Platform';

/** The components every signature covers first; the gateway's default policy requires these three. */
export const DEFAULT_COMPONENTS = Object.freeze(['@method', '@authority', '@path']);

/**
 * Why a request could not be signed. `code` says which kind of mistake it was, in a form a program
 * can branch on; `message` says what to do about it. None carries the secret.
 *
 * Codes: `invalid-url`, `invalid-key`, `invalid-option`, `body-stream`, `unsupported-body`,
 * `missing-component`, `non-ascii`, `invalid-component`, `unsupported-component`,
 * `invalid-parameter`, `no-webcrypto`.
 */
export class SigningError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {{cause?: unknown}} [options]
   */
  constructor(code, message, options) {
    super(message, options);
    this.name = 'SigningError';
    this.code = code;
  }
}

// MARK: Bytes and encodings

const BASE64_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Standard base64 with padding (RFC 4648 §4): what structured-field byte sequences carry. */
function base64(bytes) {
  let out = '';
  let index = 0;
  for (; index + 2 < bytes.length; index += 3) {
    const n = (bytes[index] << 16) | (bytes[index + 1] << 8) | bytes[index + 2];
    out += BASE64_ALPHABET[n >> 18] + BASE64_ALPHABET[(n >> 12) & 63] + BASE64_ALPHABET[(n >> 6) & 63] + BASE64_ALPHABET[n & 63];
  }
  const rest = bytes.length - index;
  if (rest === 1) {
    const n = bytes[index] << 16;
    out += BASE64_ALPHABET[n >> 18] + BASE64_ALPHABET[(n >> 12) & 63] + '==';
  } else if (rest === 2) {
    const n = (bytes[index] << 16) | (bytes[index + 1] << 8);
    out += BASE64_ALPHABET[n >> 18] + BASE64_ALPHABET[(n >> 12) & 63] + BASE64_ALPHABET[(n >> 6) & 63] + '=';
  }
  return out;
}

/** Base64url without padding (RFC 4648 §5), the nonce's alphabet. */
function base64url(bytes) {
  return base64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

const encoder = new TextEncoder();

/**
 * WebCrypto's SubtleCrypto. Browsers offer it only in secure contexts (https://, or http:// to
 * localhost and 127.0.0.1), so a page served over plain HTTP from elsewhere cannot sign at all;
 * this says so instead of failing on `undefined`.
 */
function subtle() {
  const value = globalThis.crypto?.subtle;
  if (!value) {
    throw new SigningError(
      'no-webcrypto',
      'WebCrypto (crypto.subtle) is not available: browsers provide it only in secure contexts ' +
        '(https://, or http://localhost and http://127.0.0.1), Node from version 20 on');
  }
  return value;
}

/**
 * A fresh nonce: 16 bytes from the platform's secure generator (`crypto.getRandomValues`),
 * base64url without padding (22 characters). The gateway remembers the nonces it has accepted per
 * key and refuses one it has seen, so a captured request cannot be replayed.
 *
 * @returns {string}
 */
export function randomNonce() {
  if (typeof globalThis.crypto?.getRandomValues !== 'function') {
    throw new SigningError('no-webcrypto', 'crypto.getRandomValues is not available to draw a nonce');
  }
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  return base64url(bytes);
}

/**
 * The `Content-Digest` value (RFC 9530) of `body`: `sha-256=:<base64 of its SHA-256>:`.
 *
 * @param {Uint8Array} body
 * @returns {Promise<string>}
 */
export async function contentDigest(body) {
  const digest = new Uint8Array(await subtle().digest('SHA-256', body));
  return 'sha-256=:' + base64(digest) + ':';
}

// MARK: Bodies

function isReadableStream(value) {
  return (typeof ReadableStream !== 'undefined' && value instanceof ReadableStream) ||
    (typeof value?.getReader === 'function');
}

/**
 * Refuses, before anything is read, a body whose bytes cannot be known in advance: a ReadableStream
 * (or any async iterable), whose Content-Digest would need the whole stream before the request is
 * sent, and FormData, whose multipart boundary fetch picks only when it sends it.
 */
function checkSignableBody(body) {
  if (body === null || body === undefined || typeof body === 'string' || body instanceof ArrayBuffer || ArrayBuffer.isView(body)) return;
  if (typeof URLSearchParams !== 'undefined' && body instanceof URLSearchParams) return;
  if (typeof Blob !== 'undefined' && body instanceof Blob) return;
  if (typeof FormData !== 'undefined' && body instanceof FormData) {
    throw new SigningError(
      'unsupported-body',
      'a FormData body cannot be signed: fetch chooses its multipart boundary only when it sends it, so its bytes ' +
        'are not known beforehand; encode the body yourself (e.g. as a Blob or a Uint8Array) and set Content-Type');
  }
  if (isReadableStream(body) || typeof body?.[Symbol.asyncIterator] === 'function') {
    throw new SigningError(
      'body-stream',
      'a streamed body (ReadableStream) cannot be signed: its Content-Digest must be computed before the request ' +
        'is sent; read it into an ArrayBuffer, a Uint8Array or a Blob first');
  }
  throw new SigningError(
    'unsupported-body',
    `a body of type ${Object.prototype.toString.call(body)} cannot be signed; use a string, an ArrayBuffer, a ` +
      'TypedArray or DataView, a Blob or URLSearchParams');
}

/**
 * The bytes `fetch` will send for `body`, or `null` for none.
 *
 * Supported: a string (sent as UTF-8, as fetch sends it), an ArrayBuffer, any TypedArray or
 * DataView, a Blob or File, and URLSearchParams (sent as its `application/x-www-form-urlencoded`
 * serialisation). The digest must be computed before the request leaves, so the whole body must be
 * known: a ReadableStream (or any async iterable) cannot be signed, and FormData cannot either.
 *
 * @param {unknown} body
 * @returns {Promise<Uint8Array | null>}
 */
async function bodyBytes(body) {
  checkSignableBody(body);
  if (body === null || body === undefined) return null;
  if (typeof body === 'string') return encoder.encode(body);
  if (body instanceof ArrayBuffer) return new Uint8Array(body.slice(0));
  if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength).slice();
  if (body instanceof URLSearchParams) return encoder.encode(body.toString());
  return new Uint8Array(await /** @type {Blob} */ (body).arrayBuffer());
}

// MARK: Requests

/** Methods fetch normalises to upper case (Fetch standard, "normalize a method"); others it sends as given. */
const NORMALISED_METHODS = new Set(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT']);

function normalisedMethod(method) {
  if (typeof method !== 'string' || method === '') {
    throw new SigningError('invalid-option', 'the method must be a non-empty string such as "GET"');
  }
  const upper = method.toUpperCase();
  return NORMALISED_METHODS.has(upper) ? upper : method;
}

/** The URL relative ones are resolved against: a page's base URL (as fetch uses), none in Node. */
function baseURL() {
  return globalThis.document?.baseURI ?? globalThis.location?.href;
}

/**
 * The scheme, authority and request target of `input` as fetch will send them.
 *
 * Fetch sends the WHATWG serialisation of the URL, not the text it was given: `new URL` lowercases
 * the host, drops a default port, percent-encodes spaces and other characters in the path and the
 * query, and resolves `.` and `..` segments. What is signed is that serialisation, so it is exactly
 * what the gateway receives. (URLs that are already normalised, such as the shared test vectors,
 * come out unchanged.)
 */
function urlParts(input) {
  let url;
  try {
    url = input instanceof URL ? input : new URL(String(input), baseURL());
  } catch (error) {
    throw new SigningError('invalid-url', `expected an absolute http:// or https:// URL, found ${String(input)}`, { cause: error });
  }
  const scheme = url.protocol.slice(0, -1);
  if ((scheme !== 'http' && scheme !== 'https') || url.hostname === '') {
    throw new SigningError('invalid-url', `expected an absolute http:// or https:// URL with a host, found ${url.href}`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new SigningError('invalid-url', 'the URL carries credentials (user:password@), which fetch refuses to send');
  }
  // `search` is "" both without a query and with an empty one ("/a?"); the serialisation tells them apart.
  const href = url.href;
  const fragment = href.indexOf('#');
  const hasQuery = url.search !== '' || (fragment < 0 ? href : href.slice(0, fragment)).endsWith('?');
  const path = url.pathname === '' ? '/' : url.pathname;
  return { url, scheme, authority: url.host, requestTarget: path + (hasQuery ? '?' + url.search.slice(1) : '') };
}

/** `[name, value]` pairs from a Headers object, an iterable of pairs or a plain record. */
function headerList(headers) {
  if (headers === null || headers === undefined) return [];
  const pairs = typeof headers[Symbol.iterator] === 'function' ? Array.from(headers) : Object.entries(headers);
  return pairs.map((pair) => {
    if (!Array.isArray(pair) || pair.length !== 2) {
      throw new SigningError('invalid-option', 'headers must be a Headers object, [name, value] pairs or a record of names to values');
    }
    return [String(pair[0]), String(pair[1])];
  });
}

/**
 * The request as it will be sent: method, scheme, authority (host and port as the Host field
 * carries them), request target (path and query, percent-encoding untouched) and its fields.
 */
function requestParts(request) {
  if (request === null || typeof request !== 'object') {
    throw new SigningError('invalid-option', 'expected a request such as { method, url, headers, body }');
  }
  let parts;
  if (request.url !== undefined && request.url !== null) {
    const { scheme, authority, requestTarget } = urlParts(request.url);
    parts = { scheme, authority, requestTarget };
  } else {
    const { scheme, authority, requestTarget } = request;
    if (typeof scheme !== 'string' || typeof authority !== 'string' || typeof requestTarget !== 'string' || authority === '') {
      throw new SigningError('invalid-url', 'give the request either a url, or a scheme, an authority and a requestTarget');
    }
    const lower = lowerASCII(scheme);
    if (lower !== 'http' && lower !== 'https') throw new SigningError('invalid-url', `expected the scheme http or https, found ${scheme}`);
    parts = { scheme: lower, authority, requestTarget };
  }
  return { method: normalisedMethod(request.method ?? 'GET'), ...parts, fields: headerList(request.headers) };
}

// MARK: The signature base (RFC 9421 §2.5)

/** The Fetch standard's forbidden request-header names (and prefixes), lowercased. */
const FORBIDDEN_REQUEST_FIELDS = new Set([
  'accept-charset', 'accept-encoding', 'access-control-request-headers', 'access-control-request-method',
  'connection', 'content-length', 'cookie', 'cookie2', 'date', 'dnt', 'expect', 'host', 'keep-alive', 'origin',
  'referer', 'set-cookie', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'via',
]);

/** Whether a browser's fetch silently drops a field of this name. */
export function isForbiddenRequestField(name) {
  const lower = lowerASCII(name);
  return FORBIDDEN_REQUEST_FIELDS.has(lower) || lower.startsWith('proxy-') || lower.startsWith('sec-');
}

function lowerASCII(text) {
  return text.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
}

/** Visible ASCII, space and tab: a signature base carries nothing else (a line break would forge a line). */
function isVisibleASCII(text) {
  return /^[\t\x20-\x7e]*$/.test(text);
}

/** A structured-field string (RFC 9651 §4.1.6): quoted, `"` and `\` escaped, visible ASCII and spaces only. */
function sfString(value, what) {
  if (typeof value !== 'string' || !/^[\x20-\x7e]*$/.test(value)) {
    throw new SigningError('invalid-parameter', `${what} must be a string of visible ASCII characters and spaces`);
  }
  return '"' + value.replace(/[\\"]/g, (c) => '\\' + c) + '"';
}

/** A structured-field key (RFC 9651 §3.1.2), as the label must be. */
function sfKey(key, what) {
  if (typeof key !== 'string' || !/^[a-z*][a-z0-9_\-.*]*$/.test(key)) {
    throw new SigningError('invalid-parameter', `${what} "${key}" is not a valid structured-field key (lowercase letters, digits, _ - . *)`);
  }
  return key;
}

/** A structured-field integer (RFC 9651 §4.1.4). */
function sfInteger(value, what) {
  if (!Number.isSafeInteger(value) || Math.abs(value) > 999_999_999_999_999) {
    throw new SigningError('invalid-parameter', `${what} must be an integer of at most 15 digits`);
  }
  return String(value);
}

const DERIVED = new Set(['@method', '@target-uri', '@authority', '@scheme', '@request-target', '@path', '@query']);

/** Checks a covered component identifier: lowercase, a derived component this signer computes, or a field name. */
function checkComponent(name) {
  if (typeof name !== 'string' || name === '' || !/^[\x20-\x7e]+$/.test(name)) {
    throw new SigningError('invalid-component', `covered components are non-empty ASCII strings, found ${JSON.stringify(name)}`);
  }
  if (/[A-Z]/.test(name)) throw new SigningError('invalid-component', `the covered component "${name}" must be lowercase`);
  if (name.startsWith('@') && !DERIVED.has(name)) {
    if (name === '@signature-params') throw new SigningError('invalid-component', '@signature-params cannot be a covered component');
    throw new SigningError(
      'unsupported-component',
      `the covered component ${name} is not supported by this signer (it signs ${[...DERIVED].join(', ')} and header fields)`);
  }
  if (!name.startsWith('@') && !/^[!#$%&'*+\-.^_`|~0-9a-z]+$/.test(name)) {
    throw new SigningError('invalid-component', `"${name}" is not a header field name (component parameters such as ;key are not supported)`);
  }
}

/** Host lowercased, the scheme's default port left out (RFC 9421 §2.2.3), as the gateway rebuilds it. */
function normalisedAuthority(scheme, authority) {
  const defaultPort = scheme === 'https' ? ':443' : ':80';
  const host = authority.endsWith(defaultPort) ? authority.slice(0, -defaultPort.length) : authority;
  return lowerASCII(host);
}

/** The value of one covered component in `request`, before the ASCII check. */
function componentValue(name, request) {
  const target = request.requestTarget;
  const queryStart = target.indexOf('?');
  switch (name) {
    case '@method': return request.method;
    case '@target-uri': return request.scheme + '://' + normalisedAuthority(request.scheme, request.authority) + target;
    case '@authority': return normalisedAuthority(request.scheme, request.authority);
    case '@scheme': return request.scheme;
    case '@request-target': return target;
    case '@path': {
      const path = queryStart < 0 ? target : target.slice(0, queryStart);
      return path === '' ? '/' : path;
    }
    case '@query': return queryStart < 0 ? '?' : target.slice(queryStart);
    default: {
      // A header field (RFC 9421 §2.1): every line's value trimmed of spaces and tabs, joined with ", ".
      const values = request.fields.filter(([field]) => lowerASCII(field) === name).map(([, value]) => value.replace(/^[ \t]+|[ \t]+$/g, ''));
      if (values.length === 0) {
        throw new SigningError('missing-component', `the covered component "${name}" is not present in the request`);
      }
      return values.join(', ');
    }
  }
}

/** The `@signature-params` value, which is also the label's member of `Signature-Input`. */
function serialiseInput(components, parameters) {
  let text = '(' + components.map((name) => sfString(name, 'a component name')).join(' ') + ')';
  for (const [key, value] of parameters) {
    text += ';' + key + '=' + (typeof value === 'number' ? sfInteger(value, key) : sfString(value, key));
  }
  return text;
}

/** The signature base: one `"name": value` line per component, then the `@signature-params` line. */
function signatureBaseText(request, components, parameters) {
  let base = '';
  for (const name of components) {
    const value = componentValue(name, request);
    if (!isVisibleASCII(value)) {
      throw new SigningError(
        'non-ascii',
        `the value of "${name}" is not ASCII; a signature base can carry only visible ASCII, so such a signature could never verify`);
    }
    base += sfString(name, 'a component name') + ': ' + value + '\n';
  }
  return base + '"@signature-params": ' + serialiseInput(components, parameters);
}

// MARK: The signer

/**
 * @typedef {{appVersion: string, platform?: string | null}} ClientIdentity
 * @typedef {[string, string][]} FieldList
 */

/**
 * Signs requests for a Portico gateway: RFC 9421 HTTP Message Signatures with `hmac-sha256`, and an
 * RFC 9530 `Content-Digest` for bodies. The output matches the Swift client library's signer byte
 * for byte (the shared vectors in `Tests/Vectors/signing-vectors.json` check it).
 *
 * Create one signer per key when the app starts and use it for every request: the HMAC key is
 * imported into WebCrypto once, on first use, as a non-extractable CryptoKey, and reused.
 *
 * What a signature covers: `@method`, `@authority`, `@path`, plus `@query` when the URL has a query,
 * `content-digest` when there is a body, the identity fields, and any of `coveredFields` the
 * request carries. Its parameters are `created`, `expires` (with a lifetime), a fresh random
 * `nonce` (the gateway refuses a nonce it has seen, so a captured request cannot be replayed) and
 * `keyid`.
 */
export class RequestSigner {
  /** @type {Uint8Array | null} the key's bytes until WebCrypto holds them */
  #keyBytes;
  /** @type {Promise<CryptoKey> | null} */
  #key = null;
  #clock;
  #nonce;

  /**
   * @param {object} options
   * @param {string} options.keyId the key id the gateway knows this app's secret by (`keyid`).
   * @param {string} [options.secret] the secret as `portico keygen` printed it; its UTF-8 bytes are
   *   the HMAC key, exactly as the gateway reads its key file.
   * @param {Uint8Array | ArrayBuffer} [options.secretBytes] a raw key instead (e.g. RFC 9421's examples).
   * @param {ClientIdentity | null} [options.identity] sent as `X-Client-Version` (and
   *   `X-Client-Platform`) with every request and covered by its signature.
   * @param {string} [options.label] the signature's label in `Signature-Input` and `Signature`.
   * @param {number | null} [options.lifetimeSeconds] when set, signatures carry `expires` this many
   *   seconds after `created`, and the gateway refuses them afterwards.
   * @param {boolean} [options.includesNonce] whether signatures carry a nonce (the gateway requires
   *   one unless its policy says otherwise).
   * @param {string[]} [options.coveredFields] header fields to cover whenever a request carries them.
   * @param {() => Date | number} [options.clock] the time `created` is taken from (a Date or
   *   milliseconds since the epoch); tests pass a fixed one.
   * @param {() => string} [options.nonce] makes each signature's nonce; the default is `randomNonce`.
   */
  constructor(options) {
    const {
      keyId, secret, secretBytes, identity = null, label = 'sig1', lifetimeSeconds = null, includesNonce = true,
      coveredFields = [], clock, nonce,
    } = options ?? {};
    if (typeof keyId !== 'string' || keyId === '') throw new SigningError('invalid-option', 'keyId must be a non-empty string');
    if ((secret === undefined || secret === null) === (secretBytes === undefined || secretBytes === null)) {
      throw new SigningError('invalid-key', 'give exactly one of secret (a string) and secretBytes (a Uint8Array)');
    }
    let bytes;
    if (secret !== undefined && secret !== null) {
      if (typeof secret !== 'string') throw new SigningError('invalid-key', 'secret must be a string; use secretBytes for raw bytes');
      bytes = encoder.encode(secret);
    } else if (secretBytes instanceof ArrayBuffer) {
      bytes = new Uint8Array(secretBytes.slice(0));
    } else if (ArrayBuffer.isView(secretBytes)) {
      bytes = new Uint8Array(secretBytes.buffer, secretBytes.byteOffset, secretBytes.byteLength).slice();
    } else {
      throw new SigningError('invalid-key', 'secretBytes must be a Uint8Array or an ArrayBuffer');
    }
    if (bytes.length === 0) throw new SigningError('invalid-key', 'the secret is empty');
    if (clock !== undefined && typeof clock !== 'function') throw new SigningError('invalid-option', 'clock must be a function');
    if (nonce !== undefined && typeof nonce !== 'function') throw new SigningError('invalid-option', 'nonce must be a function');

    this.#keyBytes = bytes;
    this.#clock = clock ?? Date.now;
    this.#nonce = nonce ?? randomNonce;
    /** The key id (`keyid` parameter). */
    this.keyId = keyId;
    /** @type {ClientIdentity | null} */
    this.identity = identity;
    this.label = label;
    this.lifetimeSeconds = lifetimeSeconds;
    this.includesNonce = includesNonce;
    /** @type {string[]} */
    this.coveredFields = [...coveredFields];
    /** Components every signature covers, before the request-dependent ones. @type {string[]} */
    this.components = [...DEFAULT_COMPONENTS];
    this.#checkConfiguration();
  }

  /**
   * Signs a request and returns the fields to set on it, replacing any of the same name: the
   * identity fields, `Content-Digest` when there is a body, then `Signature-Input` and `Signature`.
   *
   * Sign last, after every covered field and the body are final. Each call draws a new nonce, so a
   * request the app retries must be signed again.
   *
   * @param {object} request
   * @param {string} [request.method] as it will be sent (default `GET`; fetch's upper-casing of
   *   `get`, `post`… is applied).
   * @param {string | URL} [request.url] the absolute URL; what is signed is its WHATWG
   *   serialisation, which is what fetch sends.
   * @param {string} [request.scheme] instead of `url`, with `authority` and `requestTarget`: `http` or `https`.
   * @param {string} [request.authority] instead of `url`: host and port as the Host field carries them.
   * @param {string} [request.requestTarget] instead of `url`: path and query exactly as sent (`/a%20b?q=1`).
   * @param {HeadersInit} [request.headers] the fields the request already carries (only covered ones matter).
   * @param {unknown} [request.body] the body that will be sent (string, ArrayBuffer, TypedArray,
   *   DataView, Blob, URLSearchParams); `null`, `undefined` or empty for none.
   * @returns {Promise<FieldList>}
   * @throws {SigningError}
   */
  async sign(request) {
    return (await this.signWithDetails(request)).fields;
  }

  /**
   * Like `sign`, and also returns what was signed: the covered components, the signature base and
   * the two field values. For tests and for debugging a 401 (compare the base with the gateway's).
   *
   * @param {object} request as for `sign`.
   * @returns {Promise<{fields: FieldList, components: string[], signatureBase: string, signatureInput: string, signature: string}>}
   */
  async signWithDetails(request) {
    this.#checkConfiguration();
    const parts = requestParts(request);
    const body = await bodyBytes(request.body);

    /** @type {FieldList} */
    const added = [];
    if (this.identity) {
      added.push([VERSION_FIELD, this.identity.appVersion]);
      if (this.identity.platform !== undefined && this.identity.platform !== null) added.push([PLATFORM_FIELD, this.identity.platform]);
    }
    const hasBody = body !== null && body.length > 0;
    if (hasBody) added.push(['Content-Digest', await contentDigest(body)]);

    // The request as it will be sent: its own fields, with the ones this signer sets replaced.
    // `host` is the authority signed (one line on the wire), whatever the caller passed.
    const replaced = new Set([...added.map(([name]) => lowerASCII(name)), 'signature-input', 'signature', 'host']);
    const fields = [
      ['host', parts.authority],
      ...parts.fields.filter(([name]) => !replaced.has(lowerASCII(name))),
      ...added,
    ];
    const sent = { ...parts, fields };

    const covered = [];
    const cover = (name) => { if (!covered.includes(name)) covered.push(name); };
    for (const name of this.components) cover(name);
    if (parts.requestTarget.includes('?')) cover('@query');
    if (hasBody) cover('content-digest');
    for (const [name] of added) if (name !== 'Content-Digest') cover(lowerASCII(name));
    for (const name of this.coveredFields) {
      const lower = lowerASCII(name);
      if (fields.some(([field]) => lowerASCII(field) === lower)) cover(lower);
    }

    const signed = await this.#signCovering(sent, covered);
    return {
      fields: [...added, ['Signature-Input', signed.signatureInput], ['Signature', signed.signature]],
      components: covered,
      ...signed,
    };
  }

  /**
   * The signature base `sign` would compute the MAC over (with a freshly drawn nonce and time).
   *
   * @param {object} request as for `sign`.
   * @returns {Promise<string>}
   */
  async signatureBase(request) {
    return (await this.signWithDetails(request)).signatureBase;
  }

  /**
   * Signs `request` covering exactly `components`, in that order, with this signer's key, clock,
   * nonce and lifetime: for protocols that fix their own coverage, and for checking against
   * published vectors such as RFC 9421 B.2.5. Adds no fields (no digest, no identity): the request
   * must already carry every covered field.
   *
   * @param {object} request as for `sign`, without a body (a covered `content-digest` must be among its headers).
   * @param {string[]} components lowercase component identifiers (`@method`, `date`…).
   * @returns {Promise<{signatureInput: string, signature: string, signatureBase: string}>} the field
   *   values, each starting with the label.
   */
  async signCovering(request, components) {
    this.#checkConfiguration();
    if (!Array.isArray(components)) throw new SigningError('invalid-component', 'components must be an array of strings');
    const parts = requestParts(request);
    return this.#signCovering({ ...parts, fields: [['host', parts.authority], ...parts.fields] }, components);
  }

  /**
   * Returns a copy of `request` carrying the signed fields. Its body (if any) is read in full from a
   * clone, to compute its digest, and the copy is given those bytes.
   *
   * @param {Request} request
   * @returns {Promise<Request>}
   */
  async signRequest(request) {
    if (typeof Request === 'undefined' || !(request instanceof Request)) {
      throw new SigningError('invalid-option', 'signRequest expects a fetch Request');
    }
    const body = request.body === null ? null : new Uint8Array(await request.clone().arrayBuffer());
    const fields = await this.sign({ method: request.method, url: request.url, headers: request.headers, body });
    const headers = new Headers(request.headers);
    for (const [name, value] of fields) headers.set(name, value);
    return new Request(request, body === null ? { headers } : { headers, body });
  }

  #checkConfiguration() {
    if (typeof this.keyId !== 'string' || this.keyId === '') throw new SigningError('invalid-option', 'keyId must be a non-empty string');
    sfString(this.keyId, 'keyId');
    sfKey(this.label, 'the label');
    if (this.lifetimeSeconds !== null && this.lifetimeSeconds !== undefined &&
      (!Number.isSafeInteger(this.lifetimeSeconds) || this.lifetimeSeconds <= 0)) {
      throw new SigningError('invalid-option', 'lifetimeSeconds must be a positive whole number of seconds, or null');
    }
    if (this.identity !== null && this.identity !== undefined) {
      if (typeof this.identity.appVersion !== 'string' || this.identity.appVersion === '') {
        throw new SigningError('invalid-option', 'identity.appVersion must be a non-empty string');
      }
      const platform = this.identity.platform;
      if (platform !== undefined && platform !== null && typeof platform !== 'string') {
        throw new SigningError('invalid-option', 'identity.platform must be a string when given');
      }
    }
    if (!Array.isArray(this.coveredFields) || this.coveredFields.some((name) => typeof name !== 'string')) {
      throw new SigningError('invalid-option', 'coveredFields must be an array of field names');
    }
    // A browser drops these from a fetch without a word (the Fetch standard's forbidden request
    // headers), so a signature covering one would name a field the gateway never receives. `Host`
    // is the exception that matters: the browser sends it itself, as the URL's authority.
    if (typeof globalThis.document !== 'undefined') {
      const forbidden = this.coveredFields.find((name) => lowerASCII(name) !== 'host' && isForbiddenRequestField(name));
      if (forbidden !== undefined) {
        throw new SigningError('invalid-option', `a browser never sends ${forbidden}, so it cannot be covered`);
      }
    }
    if (!Array.isArray(this.components)) throw new SigningError('invalid-option', 'components must be an array of component names');
  }

  /** The signature parameters in the order RFC 9421's examples use: created, expires, nonce, keyid. */
  #parameters() {
    const now = this.#clock();
    const milliseconds = now instanceof Date ? now.getTime() : Number(now);
    if (!Number.isFinite(milliseconds)) throw new SigningError('invalid-option', 'the clock must return a Date or milliseconds since the epoch');
    const created = Math.floor(milliseconds / 1000);
    const parameters = [['created', created]];
    if (this.lifetimeSeconds !== null && this.lifetimeSeconds !== undefined) parameters.push(['expires', created + this.lifetimeSeconds]);
    if (this.includesNonce) {
      const nonce = this.#nonce();
      if (typeof nonce !== 'string' || nonce === '') throw new SigningError('invalid-parameter', 'the nonce source must return a non-empty string');
      parameters.push(['nonce', nonce]);
    }
    parameters.push(['keyid', this.keyId]);
    return parameters;
  }

  async #signCovering(request, components) {
    const seen = new Set();
    for (const name of components) {
      checkComponent(name);
      if (seen.has(name)) throw new SigningError('invalid-component', `the component "${name}" is covered twice`);
      seen.add(name);
    }
    const label = sfKey(this.label, 'the label');
    const parameters = this.#parameters();
    const signatureBase = signatureBaseText(request, components, parameters);
    const mac = new Uint8Array(await subtle().sign('HMAC', await this.#hmacKey(), encoder.encode(signatureBase)));
    return {
      signatureInput: label + '=' + serialiseInput(components, parameters),
      signature: label + '=:' + base64(mac) + ':',
      signatureBase,
    };
  }

  /** The HMAC key, imported once (non-extractable); the raw bytes are dropped once WebCrypto holds them. */
  #hmacKey() {
    if (this.#key === null) {
      const bytes = this.#keyBytes;
      this.#key = subtle().importKey('raw', bytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']).then(
        (key) => {
          this.#keyBytes = null;
          return key;
        },
        (error) => {
          this.#key = null;
          throw new SigningError('invalid-key', 'WebCrypto refused the HMAC key', { cause: error });
        });
    }
    return this.#key;
  }
}

// MARK: fetch

/**
 * `fetch(input, init)`, signed by `signer`: the request's method, URL, headers and body are signed
 * and the signed fields are set on it before it is sent. Returns fetch's Response as is (a 401
 * from the gateway is a Response, not an exception).
 *
 * `input` may be a URL (string or `URL`, relative ones resolved against the page like fetch does)
 * or a `Request` (its body is read in full from a clone). `init.body` may be a string, an
 * ArrayBuffer, a TypedArray or DataView, a Blob or URLSearchParams; a ReadableStream or FormData
 * throws a `SigningError` before anything is sent.
 *
 * @param {RequestSigner} signer
 * @param {RequestInfo | URL} input
 * @param {RequestInit} [init]
 * @returns {Promise<Response>}
 */
export async function signedFetch(signer, input, init) {
  if (!(signer instanceof RequestSigner)) throw new SigningError('invalid-option', 'signedFetch expects a RequestSigner first');
  checkSignableBody(init?.body); // a stream or FormData is refused before anything is read or sent
  if (typeof Request !== 'undefined' && input instanceof Request) {
    return fetch(await signer.signRequest(init === undefined ? input : new Request(input, init)));
  }
  const { url } = urlParts(input);
  const headers = new Headers(init?.headers);
  const fields = await signer.sign({ method: init?.method ?? 'GET', url, headers, body: init?.body });
  for (const [name, value] of fields) headers.set(name, value);
  // The body is passed on as given (fetch encodes it to the bytes that were digested, and still
  // supplies its default Content-Type); the URL is the serialisation that was signed.
  return fetch(url.href, { ...init, headers });
}
