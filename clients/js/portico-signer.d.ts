// Type declarations for portico-signer.mjs: signing requests for a Portico gateway (RFC 9421
// HTTP Message Signatures with hmac-sha256, RFC 9530 Content-Digest). Needs the DOM or Node 20
// typings for fetch's types (Request, Response, Headers, Blob, URLSearchParams…).

/** `X-Client-Version`: the app's version, sent with every request and covered by its signature. */
export declare const VERSION_FIELD: 'X-Client-Version';
/** `X-Client-Platform`: the app's platform, sent and covered like the version. */
export declare const PLATFORM_FIELD: 'X-Client-Platform';
/** The components every signature covers first: `@method`, `@authority`, `@path`. */
export declare const DEFAULT_COMPONENTS: readonly ['@method', '@authority', '@path'];

/** What went wrong, for programs to branch on. */
export type SigningErrorCode =
  | 'invalid-url'
  | 'invalid-key'
  | 'invalid-option'
  | 'body-stream'
  | 'unsupported-body'
  | 'missing-component'
  | 'non-ascii'
  | 'invalid-component'
  | 'unsupported-component'
  | 'invalid-parameter'
  | 'no-webcrypto';

/** Why a request could not be signed; `message` says what to do about it, and never holds the secret. */
export declare class SigningError extends Error {
  constructor(code: SigningErrorCode, message: string, options?: { cause?: unknown });
  readonly name: 'SigningError';
  readonly code: SigningErrorCode;
}

/** Who is calling: sent as `X-Client-Version` and (when given) `X-Client-Platform`, both covered. */
export interface ClientIdentity {
  /** The app's version as released, e.g. `2.4.1`. */
  appVersion: string;
  /** e.g. `web`, `android`; `null` or absent sends no platform field. */
  platform?: string | null;
}

/** Fields to set on a request, in order, replacing any of the same name. */
export type SignedFields = [name: string, value: string][];

/** Header fields as fetch takes them: a Headers object, `[name, value]` pairs or a record. */
export type HeaderFields = Headers | ReadonlyArray<readonly [string, string]> | Iterable<readonly [string, string]> | Record<string, string>;

/**
 * A body whose bytes are known before it is sent. Strings are sent as UTF-8 and URLSearchParams as
 * its form encoding, as fetch sends them. ReadableStream and FormData bodies cannot be signed.
 */
export type SignableBody = string | ArrayBuffer | ArrayBufferView | Blob | URLSearchParams | null | undefined;

interface RequestCommon {
  /** As it will be sent; default `GET`. fetch's upper-casing of `get`, `post`… is applied. */
  method?: string;
  /** The fields the request already carries (only covered ones matter). */
  headers?: HeaderFields;
  /** The body that will be sent; `null`, `undefined` or empty for none. */
  body?: SignableBody;
}

/** A request given by its URL: its WHATWG serialisation (what fetch sends) is signed. */
export interface URLRequestDescription extends RequestCommon {
  /** Absolute `http:` or `https:` (relative ones resolve against the page in a browser). */
  url: string | URL;
}

/** A request given in its parts, for HTTP clients that do not take a URL. */
export interface PartsRequestDescription extends RequestCommon {
  url?: undefined;
  /** `http` or `https`. */
  scheme: string;
  /** Host and port as the Host field carries them. */
  authority: string;
  /** Path and query in origin form, exactly as sent (`/a%20b?q=1`). */
  requestTarget: string;
}

export type RequestDescription = URLRequestDescription | PartsRequestDescription;

export interface RequestSignerOptions {
  /** The key id the gateway knows this app's secret by (`keyid`). */
  keyId: string;
  /** The secret as `portico keygen` printed it; its UTF-8 bytes are the HMAC key. Give this or `secretBytes`. */
  secret?: string;
  /** A raw HMAC key instead of `secret` (e.g. RFC 9421's examples). */
  secretBytes?: Uint8Array | ArrayBuffer;
  /** Sent with every request and covered by its signature; `null` sends no identity fields. */
  identity?: ClientIdentity | null;
  /** The label in `Signature-Input` and `Signature`; a structured-field key. Default `sig1`. */
  label?: string;
  /** When set, signatures carry `expires` = `created` + this many seconds (a positive integer). */
  lifetimeSeconds?: number | null;
  /** Whether signatures carry a nonce (default true; the gateway requires one unless its policy says otherwise). */
  includesNonce?: boolean;
  /** Header fields to cover whenever a request carries them (e.g. `content-type`). */
  coveredFields?: string[];
  /** Where `created` comes from: a Date or milliseconds since the epoch. Default `Date.now`. */
  clock?: () => Date | number;
  /** Makes each signature's nonce. Default `randomNonce`. */
  nonce?: () => string;
}

export interface SignatureValues {
  /** The `Signature-Input` value, starting with the label. */
  signatureInput: string;
  /** The `Signature` value: `label=:base64:`. */
  signature: string;
  /** The text the HMAC was computed over. */
  signatureBase: string;
}

export interface SignatureDetails extends SignatureValues {
  /** The fields `sign` returns. */
  fields: SignedFields;
  /** The covered components, in order. */
  components: string[];
}

/**
 * Signs requests for a Portico gateway, byte for byte as the Swift client library does. Create one
 * per key and reuse it: the HMAC key is imported into WebCrypto once.
 */
export declare class RequestSigner {
  constructor(options: RequestSignerOptions);

  keyId: string;
  identity: ClientIdentity | null;
  label: string;
  lifetimeSeconds: number | null;
  includesNonce: boolean;
  coveredFields: string[];
  /** Components every signature covers before the request-dependent ones (default `DEFAULT_COMPONENTS`). */
  components: string[];

  /**
   * The fields to set on the request, replacing any of the same name: identity fields,
   * `Content-Digest` (with a body), `Signature-Input`, `Signature`. Each call draws a new nonce.
   */
  sign(request: RequestDescription): Promise<SignedFields>;
  /** Like `sign`, with the covered components, the signature base and the field values. */
  signWithDetails(request: RequestDescription): Promise<SignatureDetails>;
  /** The signature base `sign` would compute the MAC over. */
  signatureBase(request: RequestDescription): Promise<string>;
  /**
   * Signs covering exactly `components` (lowercase: `@method`, `date`…), in order, adding no fields:
   * for fixed coverage such as RFC 9421 B.2.5. The request must carry every covered field.
   */
  signCovering(request: RequestDescription, components: string[]): Promise<SignatureValues>;
  /** A copy of `request` carrying the signed fields; its body is read in full from a clone. */
  signRequest(request: Request): Promise<Request>;
}

/** 16 random bytes from `crypto.getRandomValues`, base64url without padding. */
export declare function randomNonce(): string;

/** `sha-256=:<base64 SHA-256 of body>:` (RFC 9530). */
export declare function contentDigest(body: Uint8Array): Promise<string>;

/** Whether a browser's fetch silently drops a request field of this name (the Fetch standard's forbidden request headers). */
export declare function isForbiddenRequestField(name: string): boolean;

/**
 * `fetch(input, init)`, signed: the method, URL, headers and body are signed and the signed fields
 * set before it is sent. Rejects with a `SigningError` (before sending) for a body that cannot be
 * signed, such as a ReadableStream or FormData.
 */
export declare function signedFetch(
  signer: RequestSigner,
  input: string | URL | Request,
  init?: RequestInit & { body?: SignableBody },
): Promise<Response>;
