// The browser half of the live check: the same four requests as ../live-check.mjs, sent with fetch
// from this page's origin to the gateway's (so every one is a CORS request with a preflight), and
// the same one line of JSON written into <pre id="result">. When finished the <pre> gets
// data-done="true" (or data-done="error" with {"error": "…"} when the checks could not run).
import { RequestSigner, signedFetch } from '../portico-signer.mjs';

const output = document.getElementById('result');

function finish(value, state) {
  output.textContent = JSON.stringify(value);
  output.dataset.done = state;
}

/** The page's parameters: from the fragment when it has any, else from the query. */
function parameters() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  return fragment.has('gateway') ? fragment : new URLSearchParams(location.search);
}

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

async function run() {
  const query = parameters();
  const missing = ['gateway', 'path', 'keyId', 'secret'].filter((name) => !query.get(name));
  if (missing.length > 0) throw new Error(`missing page parameters: ${missing.join(', ')}`);
  const base = query.get('gateway').replace(/\/+$/, '');
  const path = query.get('path');
  const appVersion = query.get('appVersion');
  const signer = new RequestSigner({
    keyId: query.get('keyId'),
    secret: query.get('secret'),
    identity: appVersion ? { appVersion, platform: query.get('platform') } : null,
  });
  const signedURL = base + path;
  const segments = path.split('/');
  segments[segments.length - 1] = segments[segments.length - 1] === 'MSFT' ? 'AAPL' : 'MSFT';
  const otherURL = base + segments.join('/');
  // No timeouts here: browser-check.sh bounds the whole run (and virtual time stands still while a fetch is pending).
  const init = () => ({ cache: 'no-store', credentials: 'omit' });

  const accepted = await outcome(await signedFetch(signer, signedURL, init()));
  const tamperedFields = await signer.sign({ method: 'GET', url: signedURL });
  const tampered = await outcome(await fetch(otherURL, { ...init(), headers: tamperedFields }));
  const replayFields = await signer.sign({ method: 'GET', url: signedURL });
  const replayFirst = await outcome(await fetch(signedURL, { ...init(), headers: replayFields }));
  const replayed = await outcome(await fetch(signedURL, { ...init(), headers: replayFields }));
  return { accepted, tampered, replayFirst, replayed };
}

run().then(
  (result) => finish(result, 'true'),
  (error) => finish({ error: `${error?.name ?? 'Error'}: ${error?.message ?? error}` }, 'error'));
