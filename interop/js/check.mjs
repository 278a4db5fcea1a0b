// check.mjs BASE_URL checks an ifaced daemon's public HTTP binding with the
// real client libraries:
//
//   - GET BASE_URL/capabilities must parse with AgentCapabilitiesSchema from
//     @ag-ui/core (its "schemas" entry point); the orchestrator members
//     (message, actions) are unknown to that schema, and parsing must not
//     fail on them. Whether the schema kept or stripped them is reported.
//   - BASE_URL/.well-known/agent-card.json must resolve with @a2a-js/sdk's
//     DefaultAgentCardResolver, a client must be built from it by the SDK's
//     ClientFactory (JSON-RPC, with the SDK's v0.3 compatibility on, since
//     the card's interface says 0.3; building sends nothing), and its
//     signature must verify with the SDK's verifyAgentCardSignature under
//     the Ed25519 key its did:key kid names.
//
// It prints a one-line JSON summary and exits 0, or prints what failed and
// exits 1. node/httpapi's TestRealClientsAcceptTheEndpoints runs it.

import { AgentCapabilitiesSchema } from "@ag-ui/core/schemas";
import { canonicalizeAgentCard, verifyAgentCardSignature } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";

class CheckError extends Error {}

function fail(msg) {
  throw new CheckError(msg);
}

async function getJSON(url) {
  let res;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
  } catch (e) {
    fail(`GET ${url}: ${e.cause?.message ?? e.message}`);
  }
  const text = await res.text();
  if (!res.ok) fail(`GET ${url}: HTTP ${res.status}: ${text.slice(0, 300)}`);
  try {
    return JSON.parse(text);
  } catch (e) {
    fail(`GET ${url}: the body is not JSON (${e.message}): ${text.slice(0, 300)}`);
  }
}

function zodIssues(error) {
  return error.issues.map((i) => `${i.path.length ? i.path.join(".") : "(root)"}: ${i.message} [${i.code}]`).join("; ");
}

// checkAGUI validates GET /capabilities as an AG-UI AgentCapabilities object.
async function checkAGUI(base) {
  const url = new URL("/capabilities", base).href;
  const raw = await getJSON(url);
  let parsed;
  try {
    parsed = AgentCapabilitiesSchema.parse(raw);
  } catch (e) {
    if (e?.issues) fail(`@ag-ui/core AgentCapabilitiesSchema.parse rejects ${url}: ${zodIssues(e)}`);
    throw e;
  }
  const known = new Set(Object.keys(AgentCapabilitiesSchema.shape));
  const unknownKeys = {};
  for (const k of Object.keys(raw)) {
    if (!known.has(k)) unknownKeys[k] = k in parsed ? "kept" : "stripped";
  }
  if (typeof raw.message !== "string" || !Array.isArray(raw.actions)) {
    fail(`${url}: the orchestrator members are missing (message ${typeof raw.message}, actions ${Array.isArray(raw.actions) ? "array" : typeof raw.actions})`);
  }
  return {
    identity: parsed.identity?.name,
    tools: (parsed.tools?.items ?? []).map((t) => t.name),
    unknownKeys,
    actions: raw.actions.map((a) => a.name),
  };
}

// Base58btc (the did:key multibase "z" alphabet).
const B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

function base58Decode(s) {
  let n = 0n;
  for (const c of s) {
    const v = B58.indexOf(c);
    if (v < 0) throw new Error(`invalid base58 character ${JSON.stringify(c)}`);
    n = n * 58n + BigInt(v);
  }
  const bytes = [];
  while (n > 0n) {
    bytes.unshift(Number(n & 0xffn));
    n >>= 8n;
  }
  for (const c of s) {
    if (c !== "1") break;
    bytes.unshift(0);
  }
  return Uint8Array.from(bytes);
}

// ed25519JWK is the public key a did:key kid ("did:key:z6Mk…#z6Mk…")
// names: multibase base58btc of the multicodec 0xed 0x01 and 32 bytes.
function ed25519JWK(kid) {
  const m = /^did:key:(z[1-9A-HJ-NP-Za-km-z]+)#(z[1-9A-HJ-NP-Za-km-z]+)$/.exec(kid ?? "");
  if (!m || m[1] !== m[2]) throw new Error(`kid ${JSON.stringify(kid)} is not a did:key key id`);
  const b = base58Decode(m[1].slice(1));
  if (b.length !== 34 || b[0] !== 0xed || b[1] !== 0x01) throw new Error(`kid ${JSON.stringify(kid)} is not an Ed25519 did:key`);
  return { kty: "OKP", crv: "Ed25519", x: Buffer.from(b.subarray(2)).toString("base64url") };
}

// checkA2A resolves the agent card, builds a client, verifies the signature.
async function checkA2A(base) {
  const resolver = new DefaultAgentCardResolver();
  let card;
  try {
    card = await resolver.resolve(base);
  } catch (e) {
    fail(`@a2a-js/sdk DefaultAgentCardResolver.resolve(${JSON.stringify(base)}): ${e.message}`);
  }
  for (const m of ["name", "description", "version"]) {
    if (typeof card[m] !== "string" || card[m] === "") fail(`agent card: ${m} is missing or empty`);
  }
  if (!Array.isArray(card.supportedInterfaces) || card.supportedInterfaces.length === 0) {
    fail("agent card: supportedInterfaces is missing or empty, so a v1.0 client has no endpoint");
  }
  if (!Array.isArray(card.skills)) fail("agent card: skills is missing");

  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ legacyCompat: { enabled: true } })],
    }),
  );
  let client;
  try {
    client = await factory.createFromAgentCard(card);
  } catch (e) {
    fail(`@a2a-js/sdk ClientFactory.createFromAgentCard: ${e.message} (supportedInterfaces ${JSON.stringify(card.supportedInterfaces)})`);
  }

  // verifyAgentCardSignature logs each failing signature with console.debug
  // and then throws a general error; keep the particular reasons.
  const reasons = [];
  const debug = console.debug;
  console.debug = (...args) => reasons.push(args.map((a) => (a instanceof Error ? `${a.name}: ${a.message}` : typeof a === "string" ? a : "")).join(" ").trim());
  try {
    await verifyAgentCardSignature(async (kid) => ed25519JWK(kid))(card);
  } catch (e) {
    fail(`@a2a-js/sdk verifyAgentCardSignature: ${e.message} (${reasons.join("; ")})${payloadDiff(card)}`);
  } finally {
    console.debug = debug;
  }

  return {
    name: card.name,
    interfaces: card.supportedInterfaces.map((i) => `${i.protocolBinding} ${i.protocolVersion} ${i.url}`),
    transport: client.transport?.constructor?.name,
    skills: card.skills.map((s) => s.id),
    signatures: card.signatures.length,
    signatureVerified: true,
  };
}

// payloadDiff says how the SDK's signing payload differs from the card as
// served (the card without signatures), to explain a failed verification.
function payloadDiff(card) {
  const sdk = JSON.parse(canonicalizeAgentCard(card));
  const served = { ...card };
  delete served.signatures;
  const dropped = Object.keys(served).filter((k) => !(k in sdk));
  const changed = Object.keys(sdk).filter((k) => k in served && JSON.stringify(sortKeys(sdk[k])) !== JSON.stringify(sortKeys(served[k])));
  if (dropped.length === 0 && changed.length === 0) return "";
  return `; canonicalizeAgentCard leaves out of the signed payload [${dropped.join(", ")}] and changes [${changed.join(", ")}]`;
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  return v;
}

async function main() {
  const base = process.argv[2];
  if (!base || process.argv.length !== 3) {
    process.stderr.write("usage: node check.mjs BASE_URL   (the daemon's public HTTP binding, e.g. http://127.0.0.1:8787)\n");
    process.exit(2);
  }
  const summary = { node: process.version, agui: await checkAGUI(base), a2a: await checkA2A(base) };
  process.stdout.write(JSON.stringify(summary) + "\n");
}

main().catch((e) => {
  process.stderr.write(`check.mjs: ${e instanceof CheckError ? e.message : e.stack ?? e}\n`);
  process.exit(1);
});
