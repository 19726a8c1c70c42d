// @ts-check
// Signing in through the server's OpenID Connect provider: authorization code with PKCE, the
// console a public client (it holds no secret). GET /v1/console/sign-in says where; without a
// provider the console asks for a bearer token, as always.
//
// Going: a code verifier (64 random characters), its S256 challenge, a state and a nonce are
// made here and kept in sessionStorage (this tab only); the person goes to the provider's
// authorization endpoint. Coming back (the console's address with ?code=&state=, or ?error=):
// the code and state leave the address bar at once, the state must be the one this tab kept
// (each is used once), the code is exchanged at the provider's token endpoint with the
// verifier, and of the tokens it gives, the console keeps the one the API takes — the access
// token when its "aud" names the server's audience, else the ID token when it does (its nonce
// must be this sign-in's). Anything else signs nothing in, and says why in a person's words.

/**
 * What GET /v1/console/sign-in says of the provider.
 * @typedef {{name: string, issuer: string, authorization_endpoint: string, token_endpoint: string,
 *   end_session_endpoint: string | null, client_id: string, scopes: string[], redirect_uri: string | null,
 *   audience: string[]}} Provider
 */

/**
 * A sign-in this tab started and has not finished.
 * @typedef {{state: string, nonce: string, verifier: string, redirect: string, returnTo: string,
 *   issuer: string, client_id: string}} Pending
 */

const PENDING_KEY = "pausepoint.signIn";
const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));

/** Why a sign-in through the provider signed nothing in, in a person's words. */
export class SignInError extends Error {}

/**
 * The provider this server signs people in through (null: a bearer token), and, when the server
 * has one it cannot reach now, what to tell the person.
 * @param {string} base where the API is
 * @returns {Promise<{provider: Provider | null, problem: string}>}
 */
export async function loadProvider(base) {
  try {
    const reply = await fetch(base + "/v1/console/sign-in", { headers: { Accept: "application/json" }, cache: "no-store" });
    if (reply.ok) return { provider: (await reply.json()).provider || null, problem: "" };
    if (reply.status === 503) {
      const problem = "Signing in through your identity provider is not possible right now: this server cannot reach it. "
        + "Try again in a moment, or paste a bearer token.";
      return { provider: null, problem };
    }
  } catch {
    /* the server cannot be reached: signing in with a token says so */
  }
  return { provider: null, problem: "" };
}

/**
 * Show "Sign in with <provider>" on the sign-in page (or why it is not there).
 * @param {Provider | null} provider @param {string} problem @param {() => void} onClick
 */
export function offerProvider(provider, problem, onClick) {
  $("signin-provider").hidden = !provider;
  if (problem) $("signin-note").textContent = problem;
  if (!provider) return;
  const button = $("signin-provider-button");
  button.textContent = `Sign in with ${provider.name}`;
  button.addEventListener("click", onClick);
  $("signin-submit").classList.remove("btn-primary");
  $("signin-note").textContent = "Or paste a bearer token this server gave you. It stays in this tab only.";
}

/** Whether this page is the provider's answer to a sign-in (?code=&state=, or ?error=). */
export function isReturn() {
  const answer = new URLSearchParams(location.search);
  return answer.has("state") || answer.has("code") || answer.has("error");
}

/**
 * Go to the provider to sign in; back here, `finishSignIn` ends it.
 * @param {Provider} provider @param {string} returnTo the fragment to show once signed in
 */
export async function startSignIn(provider, returnTo) {
  if (!crypto.subtle) {
    throw new SignInError(`Signing in with ${provider.name} needs a secure connection: open the console over https.`);
  }
  const verifier = randomText(48); // 64 characters: RFC 7636 asks for 43 to 128
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  /** @type {Pending} */
  const pending = {
    state: randomText(24),
    nonce: randomText(24),
    verifier,
    redirect: provider.redirect_uri || location.origin + location.pathname,
    returnTo,
    issuer: provider.issuer,
    client_id: provider.client_id,
  };
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  const url = new URL(provider.authorization_endpoint);
  const query = {
    response_type: "code",
    client_id: provider.client_id,
    redirect_uri: pending.redirect,
    scope: provider.scopes.join(" "),
    state: pending.state,
    nonce: pending.nonce,
    code_challenge: base64url(new Uint8Array(digest)),
    code_challenge_method: "S256",
  };
  for (const [key, value] of Object.entries(query)) url.searchParams.set(key, value);
  location.assign(url.toString());
}

/**
 * End the sign-in the provider sent the person back from: the token the API takes. Throws
 * SignInError (nothing signed in) when this tab did not start it, the provider refused, or the
 * code does not turn into such a token.
 * @param {Provider | null} provider
 * @returns {Promise<string>}
 */
export async function finishSignIn(provider) {
  const answer = new URLSearchParams(location.search);
  const pending = takePending();
  history.replaceState(null, "", location.pathname + (pending ? pending.returnTo : ""));
  const name = provider ? provider.name : "the identity provider";
  if (!pending || answer.get("state") !== pending.state) {
    throw new SignInError("This sign-in was not started in this tab, or its answer was altered on the way: "
      + "nothing was signed in. Sign in again.");
  }
  const error = answer.get("error");
  if (error) {
    const said = error === "access_denied" ? "was cancelled or refused" : `did not succeed (${brief(error)})`;
    throw new SignInError(`Signing in with ${name} ${said}: nothing was signed in.`);
  }
  const code = answer.get("code");
  if (!code) throw new SignInError(`${name} sent no sign-in code back: nothing was signed in. Sign in again.`);
  if (!provider) {
    throw new SignInError("This server cannot finish signing in through its identity provider right now: "
      + "nothing was signed in. Try again in a moment.");
  }
  if (provider.issuer !== pending.issuer || provider.client_id !== pending.client_id) {
    throw new SignInError("This server's sign-in changed while you were away: nothing was signed in. Sign in again.");
  }
  const body = await exchange(provider, pending, code);
  return accepted(body, provider, pending.nonce);
}

/**
 * The code turned into tokens at the provider's token endpoint (with the verifier: PKCE).
 * @param {Provider} provider @param {Pending} pending @param {string} code
 */
async function exchange(provider, pending, code) {
  const form = new URLSearchParams({
    grant_type: "authorization_code",
    code,
    redirect_uri: pending.redirect,
    client_id: provider.client_id,
    code_verifier: pending.verifier,
  });
  let reply;
  try {
    reply = await fetch(provider.token_endpoint, {
      method: "POST", body: form, headers: { Accept: "application/json" }, credentials: "omit", cache: "no-store",
    });
  } catch {
    throw new SignInError(`The console could not reach ${provider.name} to finish signing in: nothing was signed in. Try again.`);
  }
  /** @type {any} */
  let body = null;
  try {
    body = await reply.json();
  } catch {
    /* not JSON: said below */
  }
  if (!reply.ok || !body || typeof body !== "object") {
    const said = body && (typeof body.error_description === "string" ? body.error_description : body.error);
    throw new SignInError(`${provider.name} refused to finish this sign-in: nothing was signed in. Sign in again.`
      + (typeof said === "string" && said ? ` (${provider.name} said: “${brief(said)}”)` : ""));
  }
  return body;
}

/**
 * Of the provider's tokens, the one the API takes: its "aud" names one of the server's audience.
 * @param {any} body the token endpoint's answer @param {Provider} provider @param {string} nonce
 */
function accepted(body, provider, nonce) {
  if (typeof body.id_token === "string") {
    const id = readClaims(body.id_token);
    if (!id || id.nonce !== nonce) {
      throw new SignInError(`${provider.name}'s answer does not belong to this sign-in: nothing was signed in. Sign in again.`);
    }
  }
  for (const token of [body.access_token, body.id_token]) {
    const claims = typeof token === "string" ? readClaims(token) : null;
    if (!claims) continue;
    const audience = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
    if (audience.some((aud) => provider.audience.includes(aud))) return /** @type {string} */ (token);
  }
  throw new SignInError(`${provider.name} signed you in, but gave no token meant for this server: nothing was signed in. `
    + "Tell whoever runs it (the provider's tokens must name this server's audience).");
}

/** The sign-in this tab started, taken (it answers once). @returns {Pending | null} */
function takePending() {
  const raw = sessionStorage.getItem(PENDING_KEY);
  sessionStorage.removeItem(PENDING_KEY);
  try {
    const pending = raw ? JSON.parse(raw) : null;
    return pending && typeof pending.state === "string" && typeof pending.verifier === "string" ? pending : null;
  } catch {
    return null;
  }
}

/**
 * A JWT's claims as it says them (unchecked: the server checks the signature), or null for
 * a token that is no JWT.
 * @param {string} token @returns {Record<string, any> | null}
 */
export function readClaims(token) {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  try {
    const text = atob(parts[1].replace(/-/g, "+").replace(/_/g, "/"));
    const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(text, (c) => c.charCodeAt(0))));
    return claims && typeof claims === "object" && !Array.isArray(claims) ? claims : null;
  } catch {
    return null;
  }
}

/** When a token says it expires (ms since the epoch), or null. @param {string} token */
export function expiresAt(token) {
  const claims = readClaims(token);
  return claims && typeof claims.exp === "number" ? claims.exp * 1000 : null;
}

/** @param {number} bytes @returns {string} that many random bytes, base64url (unreserved characters only) */
function randomText(bytes) {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

/** @param {Uint8Array} bytes */
function base64url(bytes) {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** A provider's word, shown short and as text. @param {string} text */
function brief(text) {
  return text.length > 160 ? text.slice(0, 157) + "…" : text;
}
