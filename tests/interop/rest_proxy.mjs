// An HTTP proxy between an Iceberg REST catalog client and a REST catalog server, both on
// 127.0.0.1, that judges both sides against the official OpenAPI document of the protocol and can
// make the server misbehave on request.
//
// Usage: node rest_proxy.mjs --upstream http://127.0.0.1:PORT --listen PORT|0 --report FILE
//                            [--control] [--base-path /something] [--fault '<json>']...
//                            [--oauth '<json>']
//
// Prints one line `listening <port>` on stdout once it accepts connections; ends on SIGTERM or
// SIGINT.
//
// Every request is forwarded to the upstream as it came (method, path, query, headers, body; the
// bodies are small JSON documents, so each is read whole first), and the upstream's answer is sent
// back as it came. Each exchange is then checked with openapi-backend against the spec
// (../../../shared/reference/iceberg-spec/rest-catalog-open-api.json from this file, or the file
// named by FERRY_ICEBERG_SPEC):
//   request:  an operation of the spec must match the method and path (after --base-path is taken
//             off); path, query and header parameters and the body must match its schemas;
//   response: the body must match the operation's schema for the status (an exact code, then
//             NXX); a status the operation does not list is a violation when it is below 400, and
//             an error body is then checked against IcebergErrorResponse; an error body's
//             error.code must be the HTTP status; a body must come as application/json; 204, 304
//             and HEAD answers carry none.
// The spec only has /v1/{prefix}/...: a server that advertises no prefix in /v1/config is called
// at /v1/namespaces..., so a path that matches no operation is tried again with a placeholder
// prefix inserted after /v1 (first, once /v1/config answered without a prefix). Once the proxy
// has seen /v1/config answered, a request whose prefix is not the advertised one (or has one when
// none was advertised) is a request error.
// The spec's discriminators (TableRequirement, TableUpdate, ...) are made into checks Ajv applies;
// see sharpenDiscriminators().
//
// One JSON line per exchange is appended to the report file:
//   {"seq", "at", "method", "path", "query", "status", "operationId", "requestErrors": [...],
//    "responseErrors": [...], "notes": [...], "fault"?, "upstreamStatus"?, "dropped"?,
//    "oauth"?, "auth"?, "token"?}
// seq and at (ms since the proxy started) are taken when the request arrived; status is what the
// client got (null if the connection was dropped); operationId is null when no operation matched
// (then requestErrors says so); oauth, auth and token: see --oauth. Headers and bodies are never
// written (so no Authorization header, token request or vended credential reaches the report),
// only what was wrong with them.
//
// Faults (with --control, over HTTP on the proxy itself; paths under /__proxy/ are not forwarded):
//   POST   /__proxy/faults   {"match": {"method": "POST", "pathRegex": "/tables/[^/]+$",
//                                      "operationId": "updateTable"},   (each key optional)
//                             "action": "status" | "drop" | "delay",
//                             "status": 409 | 500 | 503 | ...,          (action status)
//                             "type": "...", "message": "...",           (of the ErrorModel; the
//                                type defaults to CommitFailedException for 409,
//                                ServiceFailureException for 500, ServiceUnavailableException
//                                for 503)
//                             "ms": N,                                  (action delay)
//                             "count": N (default 1), "after": "before" | "after" (default before)}
//            status/before: answer with that status and an ErrorModel body, not forwarding;
//            status/after:  forward (the change lands), then answer with that status instead;
//            drop/before:   destroy the client's connection without forwarding;
//            drop/after:    forward, then destroy the connection: the change landed, the client
//                           never learns;
//            delay:         wait ms before forwarding (before) or before answering (after).
//            merge/after:   forward, then merge "body" (a JSON object) into a 2xx JSON answer
//                           (objects key by key, anything else replaced) — a catalog that
//                           answers otherwise than the server behind it, e.g. with storage
//                           credentials that have expired.
//            The first fault (in the order added) whose match fits a request applies to it, for
//            `count` requests. pathRegex is tested on the path as received, without the query.
//   GET    /__proxy/faults   the faults still armed
//   DELETE /__proxy/faults   disarms every fault
//   GET    /__proxy/report   every exchange so far, as a JSON array
//   DELETE /__proxy/report   forgets them (the report file keeps them)
//   GET    /__proxy/stats    counts
// The same faults can be armed at start with --fault '<json>' (repeatable).
//
// OAuth2 (--oauth '{"clients": {"<client id>": "<secret>", ...}, "lifetime_s": 3600,
//                   "upstreamToken": "<token>", "tokenPath": "/v1/oauth/tokens"}'; all but
//                   clients optional): the proxy is the catalog's OAuth2 server and guards it.
//   POST <base path>/v1/oauth/tokens (or tokenPath) is answered by the proxy, never forwarded:
//     a form-encoded client credentials request (client_id and client_secret in the body, or as
//     HTTP Basic); a known client with its secret gets 200 OAuthTokenResponse {"access_token": a
//     fresh random token, "token_type": "bearer", "expires_in": lifetime_s, "issued_token_type":
//     "urn:ietf:params:oauth:token-type:access_token"}; an unknown client or a wrong secret 401,
//     a request that is not client credentials 400, each with the spec's OAuthError body
//     {"error": "invalid_client" | "invalid_request" | "unsupported_grant_type",
//      "error_description"}. The exchange is checked as the spec's getToken (also at a tokenPath
//     of another name) and reported with "oauth": "issued" or the error (and "token": {"no": n},
//     the n-th token issued); its query, headers and body (the secret) are never written, only
//     what was wrong with them. Credentials as HTTP Basic are not counted as the body's missing
//     client_id and client_secret (the spec's text allows them there).
//   Every other request must carry `Authorization: Bearer <a token the proxy issued that has not
//     expired>`, else it is answered 401 (IcebergErrorResponse, NotAuthorizedException, with
//     WWW-Authenticate: Bearer error="invalid_token") without being forwarded, and reported with
//     "auth": "expired" | "unknown" (a token it never issued, or not a bearer token) | "missing";
//     an accepted one has "auth": "ok" and goes upstream with its Authorization header replaced
//     by `Bearer <upstreamToken>`, or removed when no upstreamToken is given. A request carrying
//     a token the proxy issued is reported with "token": {"no", "ageMs"} (which one, how old).
//     Faults apply only to accepted requests.
//   POST   /__proxy/oauth/expire   every token issued so far expires now: {"expired": N live ones}
//   Fault action "expire" (e.g. {"match": {"operationId": "updateTable"}, "action": "expire"}):
//     every token expires just before the matching request is checked, so that request is the
//     one refused (a 401 at a chosen point of a sync, independently of time).
//   /__proxy/stats then has "oauth": {tokenRequests, tokensIssued, tokenRequestsRefused,
//     refusedExpired, refusedUnknown, refusedMissing, expiredOnDemand, live}.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAPIBackend, { OpenAPIValidator } from 'openapi-backend';

const scriptDir = path.dirname(fileURLToPath(import.meta.url));
const startedAt = Date.now();

function usage(msg) {
  process.stderr.write(`rest_proxy: ${msg}\nusage: node rest_proxy.mjs --upstream http://127.0.0.1:PORT ` +
    `--listen PORT|0 --report FILE [--control] [--base-path /p] [--fault JSON]... [--oauth JSON]\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const o = { faults: [], control: false, basePath: '' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--upstream') o.upstream = val();
    else if (a === '--listen') o.listen = val();
    else if (a === '--report') o.report = val();
    else if (a === '--control') o.control = true;
    else if (a === '--base-path') o.basePath = val();
    else if (a === '--fault') {
      const text = val();
      try {
        o.faults.push(JSON.parse(text));
      } catch (e) {
        usage(`--fault is not JSON: ${e.message}`);
      }
    } else if (a === '--oauth') {
      const text = val();
      try {
        o.oauth = JSON.parse(text);
      } catch (e) {
        usage(`--oauth is not JSON: ${e.message}`);
      }
    } else usage(`unknown argument ${a}`);
  }
  if (!o.upstream) usage('--upstream is required');
  if (o.listen === undefined) usage('--listen is required');
  if (!o.report) usage('--report is required');
  o.basePath = o.basePath.replace(/\/+$/, '');
  if (o.basePath && !o.basePath.startsWith('/')) o.basePath = '/' + o.basePath;
  if (o.oauth !== undefined) o.oauth = oauthSettings(o.oauth, o.basePath);
  return o;
}

function oauthSettings(v, basePath) {
  if (!v || typeof v !== 'object' || Array.isArray(v)) usage('--oauth takes a JSON object');
  const known = ['clients', 'lifetime_s', 'upstreamToken', 'tokenPath'];
  const unknown = Object.keys(v).filter((k) => !known.includes(k));
  if (unknown.length) usage(`--oauth: unknown keys ${unknown.join(', ')} (known: ${known.join(', ')})`);
  const clients = v.clients;
  if (!clients || typeof clients !== 'object' || Array.isArray(clients) || !Object.keys(clients).length ||
      Object.values(clients).some((s) => typeof s !== 'string' || s === '')) {
    usage('--oauth: clients must map client ids to non-empty secrets');
  }
  const lifetime = v.lifetime_s === undefined ? 3600 : v.lifetime_s;
  // expires_in is an integer in the spec (OAuthTokenResponse)
  if (!Number.isInteger(lifetime) || lifetime < 1) usage('--oauth: lifetime_s must be a whole number of seconds, at least 1');
  if (v.upstreamToken !== undefined && (typeof v.upstreamToken !== 'string' || v.upstreamToken === '')) {
    usage('--oauth: upstreamToken must be a non-empty string');
  }
  let tokenPath = v.tokenPath === undefined ? `${basePath}/v1/oauth/tokens` : v.tokenPath;
  if (typeof tokenPath !== 'string' || !tokenPath.startsWith('/')) usage('--oauth: tokenPath must start with /');
  return {
    clients: new Map(Object.entries(clients)), lifetimeS: lifetime, upstreamToken: v.upstreamToken ?? null,
    tokenPath,
  };
}

const opts = parseArgs(process.argv.slice(2));
const upstream = new URL(opts.upstream);
if (upstream.protocol !== 'http:') usage('--upstream must be an http:// URL');
const upstreamBase = upstream.pathname.replace(/\/+$/, '');

// ---------------------------------------------------------------- the spec and its validator

// openapi-backend's decycle() turns every object it meets a second time into {"$ref": path},
// shared or not; the dereferenced Iceberg spec shares arrays (a oneOf reached through a $ref with
// sibling keywords), and a {"$ref"} standing where Ajv needs an array makes the schema invalid
// ("oneOf must be array"). This one copies shared objects and only cuts real cycles (an object
// already on the path from the root), and those only past UNROLL levels (a struct in a list in a
// map...), so that errors keep the schema paths pruneAlternatives() reads; the cut is a reference
// to the object's first place on the path (to the schema holding it, for an array).
// Each unrolled level multiplies the schema Ajv compiles (expressions recurse in many places:
// three levels of them take a minute to compile), so only the types of a table schema are
// unrolled (UNROLLED, found by the name sharpenDiscriminators() tags each component with).
const UNROLLED = new Set(['Type', 'StructType', 'StructField', 'ListType', 'MapType']);
const UNROLL = 2;
OpenAPIValidator.decycle = function decycle(root) {
  const onPath = new Map(); // object or array -> JSON pointers of its places on the current path
  const esc = (k) => String(k).replace(/~/g, '~0').replace(/\//g, '~1');
  // Cycles run through components (the targets of $ref), so only a component (or an array of
  // one) is cut; the plain objects inside a component repeat only where it is unrolled.
  const cut = (v, owner) => {
    const at = onPath.get(v);
    const name = (owner || v)['x-component'];
    if (!at || (name === undefined && at.length < 8)) return null;
    const levels = UNROLLED.has(name) ? UNROLL : 1;
    return at.length >= levels ? at[0] : null;
  };
  return (function copy(v, p) {
    if (v === null || typeof v !== 'object') return v;
    let target = cut(v, null);
    if (target !== null) return { $ref: target };
    if (!Array.isArray(v)) {
      for (const k of Object.keys(v)) {
        if (Array.isArray(v[k]) && (target = cut(v[k], v)) !== null) return { $ref: target };
      }
    }
    if (!onPath.has(v)) onPath.set(v, []);
    onPath.get(v).push(Array.isArray(v) ? p.slice(0, p.lastIndexOf('/')) : p);
    let out;
    if (Array.isArray(v)) out = v.map((e, i) => copy(e, `${p}/${i}`));
    else {
      out = {};
      for (const k of Object.keys(v)) out[k] = copy(v[k], `${p}/${esc(k)}`);
    }
    onPath.get(v).pop();
    if (!onPath.get(v).length) onPath.delete(v);
    return out;
  })(root, '#');
};

// The formats the spec uses that Ajv and openapi-backend do not know (int32, int64, float,
// double, byte are openapi-backend's own).
const FORMATS = {
  uuid: /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/,
  date: /^\d{4}-\d{2}-\d{2}$/,
  duration: /^P(?!$)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$/,
  'date-time': /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$/,
  uri: /^[A-Za-z][A-Za-z0-9+.-]*:\S*$/,
};

const specPath = process.env.FERRY_ICEBERG_SPEC ||
  path.resolve(scriptDir, '../../../shared/reference/iceberg-spec/rest-catalog-open-api.json');
let spec;
try {
  spec = JSON.parse(fs.readFileSync(specPath, 'utf8'));
} catch (e) {
  process.stderr.write(`rest_proxy: cannot read the REST catalog spec ${specPath}: ${e.message}\n`);
  process.exit(2);
}
const errorSchema = spec.components?.schemas?.IcebergErrorResponse;
oneOfAsAnyOf(spec);
sharpenDiscriminators(spec);

// The spec's unions are written as oneOf ("exactly one alternative") where their alternatives
// overlap: a field of type "variant" is both a VariantType and a PrimitiveType (any string), and
// a write-default of 5 is both an IntegerTypeValue and a LongTypeValue, so conforming metadata
// would fail. Every oneOf is read as anyOf ("at least one"), which is what the spec means.
function oneOfAsAnyOf(v) {
  if (Array.isArray(v)) {
    v.forEach(oneOfAsAnyOf);
  } else if (v && typeof v === 'object') {
    if (Array.isArray(v.oneOf) && !v.anyOf) {
      v.anyOf = v.oneOf;
      delete v.oneOf;
    }
    Object.values(v).forEach(oneOfAsAnyOf);
  }
}

// The spec leans on OpenAPI's discriminator, which Ajv does not apply: TableRequirement is only
// {"type": string} plus a discriminator mapping, so without this every requirement would pass
// whatever its fields; and TableUpdate is an anyOf of 23 schemas, so one wrong update gave 23
// errors. For each schema B with a discriminator mapping and no oneOf/anyOf of its own: the
// mapped schemas get B's plain fields (B__core) instead of B in their allOf, and B becomes "the
// property is one of the mapping's values, and the schema it maps to holds" (if/then); an
// anyOf/oneOf listing only schemas of one mapping becomes B with the property limited to theirs.
function sharpenDiscriminators(doc) {
  const S = doc.components?.schemas || {};
  for (const [name, sch] of Object.entries(S)) sch['x-component'] = name;
  const ref = (n) => ({ $ref: `#/components/schemas/${n}` });
  const nameOf = (r) => (r && typeof r.$ref === 'string' && r.$ref.startsWith('#/components/schemas/')
    ? r.$ref.slice('#/components/schemas/'.length) : null);
  const bases = {};
  for (const [name, sch] of Object.entries(S)) {
    const d = sch.discriminator;
    if (!d?.mapping || !d.propertyName || sch.oneOf || sch.anyOf) continue;
    const map = Object.entries(d.mapping).map(([k, r]) => [k, nameOf({ $ref: r })]);
    if (map.some(([, m]) => !m || !S[m])) continue;
    const prop = d.propertyName;
    const core = `${name}__core`;
    const { discriminator, ...plain } = sch;
    S[core] = plain;
    for (const m of new Set(map.map(([, m]) => m))) {
      const ms = S[m];
      if (Array.isArray(ms.allOf)) ms.allOf = ms.allOf.map((x) => (nameOf(x) === name ? ref(core) : x));
    }
    S[name] = {
      ...(sch.description ? { description: sch.description } : {}),
      allOf: [ref(core), ...map.map(([k, m]) => ({
        if: { properties: { [prop]: { const: k } }, required: [prop] },
        then: ref(m),
      }))],
      properties: { [prop]: { enum: map.map(([k]) => k) } },
      required: [prop],
    };
    bases[name] = { prop, map };
  }
  for (const sch of Object.values(S)) {
    for (const kw of ['anyOf', 'oneOf']) {
      const list = sch[kw];
      if (!Array.isArray(list) || !list.length) continue;
      const names = list.map(nameOf);
      if (names.some((n) => !n)) continue;
      for (const [b, { prop, map }] of Object.entries(bases)) {
        if (!names.every((n) => map.some(([, m]) => m === n))) continue;
        const keys = map.filter(([, m]) => names.includes(m)).map(([k]) => k);
        delete sch[kw];
        delete sch.discriminator;
        sch.allOf = [...(sch.allOf || []), ref(b), { properties: { [prop]: { enum: keys } } }];
        break;
      }
    }
  }
}

const api = new OpenAPIBackend({
  definition: spec,
  strict: true,
  // quick: the validators of an operation are compiled when it is first used (all of them at
  // start take seconds), and the document is dereferenced synchronously.
  quick: true,
  validate: true,
  ajvOpts: { allErrors: true },
  customizeAjv: (ajv) => {
    for (const [name, re] of Object.entries(FORMATS)) ajv.addFormat(name, re);
    return ajv;
  },
});
// The spec is OpenAPI 3.1; openapi-backend checks a document against the 3.0 schema only (and
// the Iceberg document fails it), so the document itself is not checked here.
api.validateDefinition = function validateDefinition() {
  return this.document;
};
await api.init();

// An Ajv validator of IcebergErrorResponse, for error answers an operation does not list.
let errorValidator = null;
function validateErrorBody(body) {
  if (!errorSchema) return [];
  if (!errorValidator) {
    const deref = api.definition.components.schemas.IcebergErrorResponse;
    const ajv = api.validator.getAjv('response');
    errorValidator = OpenAPIValidator.compileSchema(ajv, deref);
  }
  errorValidator(body);
  return pruneAlternatives(errorValidator.errors || []).map((e) => fmtAjv('response', e)).filter(Boolean);
}

// With allErrors, a value that fits no alternative of a oneOf/anyOf gets every alternative's
// complaints (a list type that lacks element-id is also "not a string", "not a struct", "not a
// map"...). Keep, for each such failure, only the alternatives whose kind fits (no type, const or
// enum complaint at the value itself or at its direct properties); when none fits, only the
// oneOf/anyOf error, naming the kinds it takes.
function pruneAlternatives(errors) {
  const alts = errors.filter((e) => e.keyword === 'oneOf' || e.keyword === 'anyOf');
  const depth = (p) => (p ? p.split('/').length - 1 : 0);
  const owner = new Map();
  for (const e of errors) {
    let best = null;
    for (const o of alts) {
      if (o === e || !e.schemaPath.startsWith(`${o.schemaPath}/`)) continue;
      if (e.instancePath !== o.instancePath && !e.instancePath.startsWith(`${o.instancePath}/`)) continue;
      if (!best || o.instancePath.length > best.instancePath.length ||
          (o.instancePath.length === best.instancePath.length && o.schemaPath.length > best.schemaPath.length)) best = o;
    }
    if (best) owner.set(e, best);
  }
  const dropped = new Set();
  const dropTree = (o) => {
    for (const e of errors) if (owner.get(e) === o && !dropped.has(e)) { dropped.add(e); if (alts.includes(e)) dropTree(e); }
  };
  const outerFirst = [...alts].sort((a, b) => a.instancePath.length - b.instancePath.length || a.schemaPath.length - b.schemaPath.length);
  for (const o of outerFirst) {
    if (dropped.has(o)) continue;
    const branches = new Map();
    for (const e of errors) {
      if (owner.get(e) !== o || dropped.has(e)) continue;
      const k = e.schemaPath.slice(o.schemaPath.length + 1).split('/')[0];
      if (!branches.has(k)) branches.set(k, []);
      branches.get(k).push(e);
    }
    const kinds = [];
    const fits = [];
    for (const [k, errs] of branches) {
      const misfit = errs.find((e) => ['type', 'const', 'enum'].includes(e.keyword) && depth(e.instancePath) <= depth(o.instancePath) + 1);
      if (misfit) {
        const at = misfit.instancePath.slice(o.instancePath.length).replace(/^\//, '');
        kinds.push(misfit.keyword === 'type' ? misfit.params.type
          : `${at || 'value'}=${J(misfit.params.allowedValue ?? misfit.params.allowedValues)}`);
      } else fits.push(k);
    }
    for (const [k, errs] of branches) {
      if (fits.includes(k)) continue;
      for (const e of errs) { dropped.add(e); if (alts.includes(e)) dropTree(e); }
    }
    if (fits.length) dropped.add(o);
    else if (kinds.length) o.message += ` (it takes: ${[...new Set(kinds)].join(' | ')})`;
  }
  // the same enum complaint from a dispatcher and from a narrower list: keep the narrower
  const kept = errors.filter((e) => !dropped.has(e));
  return kept.filter((e) => e.keyword !== 'enum' || !kept.some((x) => x !== e && x.keyword === 'enum' &&
    x.instancePath === e.instancePath && x.params.allowedValues.length < e.params.allowedValues.length));
}
const J = (v) => JSON.stringify(v);

function fmtAjv(where, e) {
  if (e.keyword === 'if') return null; // 'must match "then" schema': the error under it says what
  const at = e.instancePath || '';
  let s = `${where}${at}: ${e.message}`;
  if (e.params && Object.keys(e.params).length && e.keyword !== 'type') {
    s += ` ${JSON.stringify(e.params)}`;
  }
  return s;
}

// ---------------------------------------------------------------- state

const PLACEHOLDER_PREFIX = '__no_prefix__';
let advertisedPrefix; // undefined: /v1/config not seen; null: no prefix; string: the prefix
const exchanges = [];
let faults = [];
let faultSeq = 0;
let seq = 0;
const stats = {
  requests: 0, forwarded: 0, upstreamFailures: 0, faultsApplied: 0, dropped: 0,
  violations: 0, unmatched: 0, byOperation: {},
};
const oauth = opts.oauth || null;
const tokens = new Map(); // access token -> {client, expiresAt (ms)}; only with --oauth
if (oauth) {
  stats.oauth = {
    tokenRequests: 0, tokensIssued: 0, tokenRequestsRefused: 0, refusedExpired: 0, refusedUnknown: 0,
    refusedMissing: 0, expiredOnDemand: 0,
  };
}

function addFault(f) {
  if (!f || typeof f !== 'object') throw new Error('a fault is a JSON object');
  const action = f.action || 'status';
  if (!['status', 'drop', 'delay', 'expire', 'merge'].includes(action)) throw new Error(`unknown action ${action}`);
  if (action === 'merge' && (f.after !== 'after' || !f.body || typeof f.body !== 'object')) {
    throw new Error('the merge action needs "after": "after" and a JSON object "body"');
  }
  if (action === 'expire' && !oauth) throw new Error('the expire action needs --oauth');
  const after = f.after || 'before';
  if (!['before', 'after'].includes(after)) throw new Error(`after must be "before" or "after"`);
  const status = Number(f.status ?? 503);
  if (action === 'status' && !(status >= 100 && status <= 599)) throw new Error('bad status');
  const match = f.match || {};
  let re = null;
  if (match.pathRegex !== undefined) re = new RegExp(match.pathRegex);
  const count = f.count === undefined ? 1 : Number(f.count);
  if (!(count >= 1)) throw new Error('count must be at least 1');
  const fault = {
    id: ++faultSeq, match, action, after, status, ms: Number(f.ms ?? 0), count, applied: 0,
    message: f.message, type: f.type, body: f.body, re,
  };
  faults.push(fault);
  return fault;
}

// JSON numbers of 16 digits or more (snapshot ids are 63-bit) do not survive a JavaScript number:
// they travel through a merge as marked strings and are written back as the digits they were.
function parseKeepingLongs(text) {
  return JSON.parse(text.replace(/(":\s*|[\[,]\s*)(-?\d{16,})(?=\s*[,\]}])/g, '$1"@@long@@$2"'));
}
function stringifyKeepingLongs(value) {
  return JSON.stringify(value).replace(/"@@long@@(-?\d+)"/g, '$1');
}

// `over` merged into `base`: objects key by key, anything else (arrays too) replaced.
function deepMerge(base, over) {
  if (!over || typeof over !== 'object' || Array.isArray(over) || !base ||
      typeof base !== 'object' || Array.isArray(base)) {
    return over;
  }
  const out = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = k in base ? deepMerge(base[k], v) : v;
  return out;
}

function publicFault(f) {
  const { re, ...rest } = f;
  return rest;
}

// The first armed fault that fits the request, among those whose action is in `actions`.
function takeFault(method, pathOnly, operationId, actions) {
  for (const f of faults) {
    if (f.applied >= f.count) continue;
    if (!actions.includes(f.action)) continue;
    const m = f.match;
    if (m.method && String(m.method).toUpperCase() !== method) continue;
    if (f.re && !f.re.test(pathOnly)) continue;
    if (m.operationId && m.operationId !== operationId) continue;
    f.applied++;
    stats.faultsApplied++;
    faults = faults.filter((x) => x.applied < x.count);
    return f;
  }
  return null;
}

for (const f of opts.faults) {
  try {
    addFault(f);
  } catch (e) {
    usage(`bad --fault: ${e.message}`);
  }
}

const reportFd = fs.openSync(opts.report, 'a');

// ---------------------------------------------------------------- matching and checking

function stripBase(p) {
  if (!opts.basePath) return p;
  if (p === opts.basePath) return '/';
  if (p.startsWith(opts.basePath + '/')) return p.slice(opts.basePath.length);
  return null;
}

function withPlaceholder(p) {
  return p.startsWith('/v1/') ? `/v1/${PLACEHOLDER_PREFIX}${p.slice(3)}` : null;
}

// -> {operation, specPath, prefixless} or null
function match(method, rawPath) {
  const p = stripBase(rawPath);
  if (p === null) return null;
  const tries = [];
  const ph = withPlaceholder(p);
  if (advertisedPrefix === null && ph) tries.push([ph, true], [p, false]);
  else {
    tries.push([p, false]);
    if (ph) tries.push([ph, true]);
  }
  for (const [candidate, prefixless] of tries) {
    // /v1/config and /v1/oauth/tokens must not be taken for /v1/{prefix}/... with the
    // placeholder.
    let op;
    try {
      op = api.matchOperation({ method: method.toLowerCase(), path: candidate, headers: {} });
    } catch {
      op = undefined;
    }
    if (op) return { operation: op, specPath: candidate, prefixless };
  }
  return null;
}

// A client must use the prefix the server advertised in /v1/config (once the proxy saw one).
function prefixProblem(m, rawPath) {
  if (advertisedPrefix === undefined || !m.operation.path.startsWith('/v1/{prefix}/')) return null;
  if (m.prefixless) {
    return advertisedPrefix === null ? null
      : `request: the server advertised the prefix ${J(advertisedPrefix)} in /v1/config; the request has none`;
  }
  const seg = stripBase(rawPath).split('/')[2];
  let used;
  try {
    used = decodeURIComponent(seg);
  } catch {
    used = seg;
  }
  if (advertisedPrefix === null) return `request: the server advertised no prefix in /v1/config; the request uses ${J(used)}`;
  return used === advertisedPrefix ? null
    : `request: the server advertised the prefix ${J(advertisedPrefix)} in /v1/config; the request uses ${J(used)}`;
}

function parseBody(buf, contentType) {
  if (!buf || buf.length === 0) return { present: false };
  const text = buf.toString('utf8');
  const ct = String(contentType || '').split(';')[0].trim().toLowerCase();
  if (ct === 'application/x-www-form-urlencoded') {
    return { present: true, ct, value: Object.fromEntries(new URLSearchParams(text)) };
  }
  try {
    return { present: true, ct, value: JSON.parse(text) };
  } catch (e) {
    return { present: true, ct, value: text, parseError: e.message };
  }
}

function checkRequest(m, method, query, headers, body) {
  const errs = [];
  const op = m.operation;
  const req = { method: method.toLowerCase(), path: m.specPath, query, headers: { ...headers } };
  // A header the spec declares as an array (style simple, the default for headers) travels as
  // comma-separated values: "vended-credentials,remote-signing". The validator does not split
  // it, so it is split here before the check.
  for (const p of op.parameters || []) {
    const name = (p.name || '').toLowerCase();
    if (p.in === 'header' && p.schema?.type === 'array' && typeof req.headers[name] === 'string') {
      req.headers[name] = req.headers[name].split(',').map((v) => v.trim());
    }
  }
  const declared = Object.keys(op.requestBody?.content || {});
  if (body.present) {
    if (body.parseError && (body.ct === 'application/json' || declared.includes('application/json'))) {
      errs.push(`requestBody: not JSON (${body.parseError})`);
    } else {
      req.body = body.value;
    }
    if (declared.length && !declared.includes(body.ct)) {
      errs.push(`request: Content-Type "${body.ct}" is not one the operation takes (${declared.join(', ')})`);
    }
  } else if (op.requestBody?.required) {
    errs.push('requestBody: the operation requires a body and the request has none');
  }
  try {
    const r = api.validateRequest(req, op);
    for (const e of pruneAlternatives(r.errors || [])) {
      if (e.instancePath === '/requestBody' && e.keyword === 'required' && !body.present) continue;
      const f = fmtAjv('request', e);
      if (f) errs.push(f);
    }
  } catch (e) {
    errs.push(`proxy: could not validate the request: ${e.message}`);
  }
  return errs;
}

function checkResponse(m, method, status, headers, body) {
  const errs = [];
  const notes = [];
  const op = m.operation;
  const responses = op.responses || {};
  const key = [String(status), `${Math.floor(status / 100)}XX`, 'default'].find((k) => k in responses);
  const noBody = method === 'HEAD' || status === 204 || status === 304;
  if (noBody) {
    if (body.present && method !== 'HEAD') errs.push(`response: status ${status} must carry no body`);
  } else if (body.present) {
    if (body.ct !== 'application/json') {
      errs.push(`response: Content-Type is "${headers['content-type'] || ''}", not application/json`);
    }
    if (body.parseError) errs.push(`response: body is not JSON (${body.parseError})`);
  }
  if (key === undefined) {
    if (status < 400) {
      errs.push(`response: status ${status} is not one ${op.operationId} answers with ` +
        `(${Object.keys(responses).join(', ')})`);
    } else {
      notes.push(`status ${status} is not listed for ${op.operationId}; its body was checked as IcebergErrorResponse`);
    }
  }
  const declared = key !== undefined ? responses[key]?.content?.['application/json']?.schema : undefined;
  if (!noBody && declared && !body.present) {
    errs.push(`response: status ${status} of ${op.operationId} must carry a body`);
  }
  if (body.present && !body.parseError && !noBody) {
    if (key !== undefined) {
      if (declared) {
        try {
          const r = api.validateResponse(body.value, op, status);
          for (const e of pruneAlternatives(r.errors || [])) {
            const f = fmtAjv('response', e);
            if (f) errs.push(f);
          }
        } catch (e) {
          errs.push(`proxy: could not validate the response: ${e.message}`);
        }
      }
    } else if (status >= 400) {
      errs.push(...validateErrorBody(body.value));
    }
    if (status >= 400 && body.value && typeof body.value === 'object' && body.value.error &&
        typeof body.value.error === 'object' && 'code' in body.value.error &&
        body.value.error.code !== status) {
      errs.push(`response: error.code ${JSON.stringify(body.value.error.code)} is not the HTTP status ${status}`);
    }
  }
  return { errs, notes };
}

function learnConfig(m, status, body) {
  if (m?.operation.operationId !== 'getConfig' || status !== 200 || !body.present) return;
  const v = body.value;
  if (!v || typeof v !== 'object') return;
  const p = v.overrides?.prefix ?? v.defaults?.prefix;
  advertisedPrefix = typeof p === 'string' && p !== '' ? p : null;
}

function record(entry) {
  exchanges.push(entry);
  const opId = entry.operationId || '(unmatched)';
  stats.byOperation[opId] = (stats.byOperation[opId] || 0) + 1;
  if (!entry.operationId) stats.unmatched++;
  if (!entry.operationId || entry.requestErrors.length || entry.responseErrors.length) stats.violations++;
  fs.writeSync(reportFd, JSON.stringify(entry) + '\n');
}

// ---------------------------------------------------------------- HTTP

const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade',
  'te', 'trailer', 'content-length']);

function readAll(stream) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    stream.on('data', (c) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

function forward(method, url, headers, body) {
  return new Promise((resolve, reject) => {
    // raw [name, value, ...]: names keep their case and repeated headers stay apart
    const h = [];
    for (let i = 0; i < headers.length; i += 2) {
      if (HOP.has(headers[i].toLowerCase())) continue;
      // With --oauth the client's token is the proxy's, never the upstream's.
      if (oauth && headers[i].toLowerCase() === 'authorization') continue;
      h.push(headers[i], headers[i + 1]);
    }
    if (oauth?.upstreamToken) h.push('Authorization', `Bearer ${oauth.upstreamToken}`);
    if (body.length || !['GET', 'HEAD', 'DELETE', 'OPTIONS'].includes(method)) h.push('Content-Length', String(body.length));
    const req = http.request({
      host: upstream.hostname, port: upstream.port || 80, method, path: upstreamBase + url,
      headers: h, agent: false,
    }, (res) => {
      readAll(res).then((buf) => resolve({ status: res.statusCode, message: res.statusMessage, headers: res.rawHeaders, lower: res.headers, body: buf }), reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const ERROR_TYPES = {
  400: 'BadRequestException', 401: 'NotAuthorizedException', 403: 'ForbiddenException',
  404: 'NoSuchTableException', 406: 'UnsupportedOperationException', 409: 'CommitFailedException',
  419: 'AuthenticationTimeoutException', 500: 'ServiceFailureException',
  502: 'BadGatewayException', 503: 'ServiceUnavailableException',
  504: 'GatewayTimeoutException',
};

function errorBody(status, message, type) {
  return Buffer.from(JSON.stringify({
    error: {
      message: message || `injected by the test proxy: ${status}`,
      type: type || ERROR_TYPES[status] || (status >= 500 ? 'ServiceFailureException' : 'BadRequestException'),
      code: status,
    },
  }));
}

function sendJson(res, status, value, method = 'GET') {
  const b = Buffer.isBuffer(value) ? value : Buffer.from(JSON.stringify(value));
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': b.length });
  res.end(method === 'HEAD' ? undefined : b);
}

function sendRaw(res, status, rawHeaders, body, method) {
  const h = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (HOP.has(rawHeaders[i].toLowerCase())) continue;
    h.push([rawHeaders[i], rawHeaders[i + 1]]);
  }
  if (method === 'HEAD') {
    const cl = rawHeaders.findIndex((x, i) => i % 2 === 0 && x.toLowerCase() === 'content-length');
    if (cl >= 0) h.push([rawHeaders[cl], rawHeaders[cl + 1]]);
  } else if (status !== 204 && status !== 304) {
    h.push(['Content-Length', String(body.length)]);
  }
  res.writeHead(status, h.flat());
  res.end(method === 'HEAD' ? undefined : body);
}

function destroy(req) {
  // RST rather than FIN where the platform allows: the client sees a connection reset.
  const s = req.socket;
  if (typeof s.resetAndDestroy === 'function') s.resetAndDestroy();
  else s.destroy();
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- OAuth2 (--oauth)

function sameSecret(a, b) {
  const x = crypto.createHash('sha256').update(String(a)).digest();
  const y = crypto.createHash('sha256').update(String(b)).digest();
  return crypto.timingSafeEqual(x, y);
}

// Every token issued so far expires now; -> how many were still live.
function expireAll() {
  const now = Date.now();
  let n = 0;
  for (const t of tokens.values()) {
    if (t.expiresAt > now) {
      t.expiresAt = now;
      n++;
    }
  }
  stats.oauth.expiredOnDemand += n;
  return n;
}

function liveTokens() {
  const now = Date.now();
  let n = 0;
  for (const t of tokens.values()) if (t.expiresAt > now) n++;
  return n;
}

// The answer to a token request: {status, headers, value, outcome}. Never echoes a secret.
function tokenAnswer(req, form) {
  const so = stats.oauth;
  so.tokenRequests++;
  const fail = (status, error, description) => {
    so.tokenRequestsRefused++;
    const headers = { 'Cache-Control': 'no-store' };
    if (status === 401) headers['WWW-Authenticate'] = 'Basic realm="rest_proxy"';
    return { status, headers, value: { error, error_description: `rest_proxy: ${description}` }, outcome: error };
  };
  if (!form) return fail(400, 'invalid_request', 'a token request is an application/x-www-form-urlencoded body');
  if (form.grant_type === undefined) return fail(400, 'invalid_request', 'grant_type is missing');
  if (form.grant_type !== 'client_credentials') {
    return fail(400, 'unsupported_grant_type', 'only grant_type=client_credentials is served');
  }
  let id = form.client_id;
  let secret = form.client_secret;
  let basicUsed = false;
  // RFC 6749 2.3.1: the credentials may come as HTTP Basic, each form-encoded.
  const basic = /^Basic\s+(\S+)\s*$/i.exec(req.headers.authorization || '');
  if (basic && id === undefined && secret === undefined) {
    const text = Buffer.from(basic[1], 'base64').toString('utf8');
    const colon = text.indexOf(':');
    const dec = (x) => {
      try {
        return decodeURIComponent(x.replace(/\+/g, ' '));
      } catch {
        return x;
      }
    };
    if (colon >= 0) {
      id = dec(text.slice(0, colon));
      secret = dec(text.slice(colon + 1));
      basicUsed = true;
    }
  }
  if (typeof id !== 'string' || typeof secret !== 'string') {
    return fail(400, 'invalid_request', 'client_id and client_secret are required');
  }
  const failOrBasic = (...a) => ({ ...fail(...a), basic: basicUsed });
  const known = oauth.clients.get(id);
  // The same work whether the client is known or not.
  const ok = sameSecret(known ?? '', secret) && known !== undefined;
  if (!ok) return failOrBasic(401, 'invalid_client', 'unknown client or wrong client secret');
  const token = `rpx-oauth-${crypto.randomBytes(24).toString('base64url')}`;
  const now = Date.now();
  so.tokensIssued++;
  tokens.set(token, { no: so.tokensIssued, client: id, issuedAt: now, expiresAt: now + oauth.lifetimeS * 1000 });
  return {
    status: 200,
    headers: { 'Cache-Control': 'no-store', Pragma: 'no-cache' },
    value: {
      access_token: token, token_type: 'bearer', expires_in: oauth.lifetimeS,
      issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
    },
    outcome: 'issued',
    tokenNo: so.tokensIssued,
    basic: basicUsed,
  };
}

// Whether a request carries a live token the proxy issued: {outcome: 'ok', 'missing', 'unknown'
// or 'expired', token: {no, ageMs} of a token it issued}.
function authOutcome(req) {
  const h = req.headers.authorization;
  if (h === undefined || h === '') return { outcome: 'missing' };
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  const t = m ? tokens.get(m[1]) : undefined;
  if (!t) return { outcome: 'unknown' };
  const now = Date.now();
  return { outcome: now < t.expiresAt ? 'ok' : 'expired', token: { no: t.no, ageMs: now - t.issuedAt } };
}

const REFUSAL = {
  missing: 'the request carries no access token',
  unknown: 'the access token is not one this server issued',
  expired: 'the access token has expired',
};

async function control(req, res, p, body) {
  const m = req.method;
  try {
    if (p === '/__proxy/faults' && m === 'POST') {
      const v = JSON.parse(body.toString('utf8') || '{}');
      const list = Array.isArray(v) ? v : [v];
      const added = list.map((f) => publicFault(addFault(f)));
      return sendJson(res, 200, Array.isArray(v) ? added : added[0]);
    }
    if (p === '/__proxy/faults' && m === 'GET') return sendJson(res, 200, faults.map(publicFault));
    if (p === '/__proxy/faults' && m === 'DELETE') {
      const n = faults.length;
      faults = [];
      return sendJson(res, 200, { cleared: n });
    }
    if (p === '/__proxy/report' && m === 'GET') return sendJson(res, 200, exchanges);
    if (p === '/__proxy/report' && m === 'DELETE') {
      const n = exchanges.length;
      exchanges.length = 0;
      return sendJson(res, 200, { cleared: n });
    }
    if (p === '/__proxy/stats' && m === 'GET') {
      const out = { ...stats, exchanges: exchanges.length, faultsArmed: faults.length, advertisedPrefix: advertisedPrefix ?? null };
      if (oauth) out.oauth = { ...stats.oauth, live: liveTokens() };
      return sendJson(res, 200, out);
    }
    if (p === '/__proxy/oauth/expire' && m === 'POST') {
      if (!oauth) return sendJson(res, 400, { error: 'the proxy was started without --oauth' });
      return sendJson(res, 200, { expired: expireAll() });
    }
    return sendJson(res, 404, { error: `no control endpoint ${m} ${p}` });
  } catch (e) {
    return sendJson(res, 400, { error: e.message });
  }
}

async function handle(req, res) {
  const method = req.method.toUpperCase();
  const url = req.url;
  const qi = url.indexOf('?');
  const pathOnly = qi < 0 ? url : url.slice(0, qi);
  const query = qi < 0 ? '' : url.slice(qi + 1);
  const reqBuf = await readAll(req);
  if (opts.control && pathOnly.startsWith('/__proxy/')) return control(req, res, pathOnly, reqBuf);

  stats.requests++;
  const tokenRequest = oauth !== null && method === 'POST' && pathOnly === oauth.tokenPath;
  const entry = {
    seq: ++seq, at: Date.now() - startedAt, method, path: pathOnly,
    query: tokenRequest && query ? '(not shown)' : query,
    status: null, operationId: null, requestErrors: [], responseErrors: [], notes: [],
  };
  let m = match(method, pathOnly);
  if (tokenRequest && m?.operation.operationId !== 'getToken') {
    // a token endpoint of another name (an identity provider's): checked as the spec's getToken
    const op = api.router.getOperation('getToken');
    if (op) {
      m = { operation: op, specPath: '/v1/oauth/tokens', prefixless: false };
      entry.notes.push(`the token endpoint ${pathOnly} is checked as getToken`);
    }
  }
  if (m) {
    entry.operationId = m.operation.operationId;
    if (m.prefixless) entry.notes.push('matched without a prefix (/v1/... as /v1/{prefix}/...)');
    const problem = prefixProblem(m, pathOnly);
    if (problem) entry.requestErrors.push(problem);
  } else {
    entry.requestErrors.push(`no operation of the spec matches ${method} ${pathOnly}` +
      (opts.basePath ? ` (base path ${opts.basePath})` : ''));
  }
  const reqBody = parseBody(reqBuf, req.headers['content-type']);

  // The answer checked against the spec: the upstream's, or the proxy's own as the OAuth2
  // server or guard ({status, lower: headers, body}).
  let resp = null;
  let basicCredentials = false;
  // The checks run once the client has its answer (or lost its connection), before the proxy
  // reads its next request: a report read after an answer holds that exchange.
  const finish = () => {
    if (m) {
      let errs = checkRequest(m, method, query, req.headers, reqBody);
      // The spec's schema requires the credentials in the body, its text (and RFC 6749, which
      // prefers it) allows HTTP Basic instead.
      if (basicCredentials) errs = errs.filter((e) => !/missingProperty":"client_(id|secret)"/.test(e));
      entry.requestErrors.push(...errs);
    }
    if (m && resp) {
      const { errs, notes } = checkResponse(m, method, resp.status, resp.lower, resp.body);
      entry.responseErrors.push(...errs);
      entry.notes.push(...notes);
    }
    record(entry);
  };
  const answerOwn = (status, headers, buf) => {
    entry.status = status;
    res.writeHead(status, { ...headers, 'Content-Type': 'application/json', 'Content-Length': buf.length });
    res.end(method === 'HEAD' ? undefined : buf);
    resp = {
      status, lower: { 'content-type': 'application/json' },
      body: method === 'HEAD' ? { present: false } : parseBody(buf, 'application/json'),
    };
  };

  if (tokenRequest) {
    const form = reqBody.present && reqBody.ct === 'application/x-www-form-urlencoded' ? reqBody.value : null;
    const a = tokenAnswer(req, form);
    entry.oauth = a.outcome;
    if (a.tokenNo) entry.token = { no: a.tokenNo };
    if (a.basic) {
      basicCredentials = true;
      entry.notes.push('client credentials as HTTP Basic');
    }
    answerOwn(a.status, a.headers, Buffer.from(JSON.stringify(a.value)));
    return finish();
  }
  if (oauth) {
    const expiry = takeFault(method, pathOnly, entry.operationId, ['expire']);
    if (expiry) {
      entry.fault = publicFault(expiry);
      expireAll();
    }
    const a = authOutcome(req);
    entry.auth = a.outcome;
    if (a.token) entry.token = a.token;
    if (entry.auth !== 'ok') {
      const so = stats.oauth;
      if (entry.auth === 'expired') so.refusedExpired++;
      else if (entry.auth === 'unknown') so.refusedUnknown++;
      else so.refusedMissing++;
      answerOwn(401, {
        'WWW-Authenticate': entry.auth === 'missing' ? 'Bearer realm="rest_proxy"'
          : `Bearer realm="rest_proxy", error="invalid_token", error_description="${REFUSAL[entry.auth]}"`,
      }, errorBody(401, `rest_proxy: ${REFUSAL[entry.auth]}`, 'NotAuthorizedException'));
      return finish();
    }
  }
  const fault = takeFault(method, pathOnly, entry.operationId, ['status', 'drop', 'delay', 'merge']);
  if (fault) entry.fault = publicFault(fault);

  let up = null;

  if (fault && fault.after === 'before') {
    if (fault.action === 'drop') {
      entry.dropped = true;
      stats.dropped++;
      destroy(req);
      return finish();
    }
    if (fault.action === 'status') {
      entry.status = fault.status;
      sendJson(res, fault.status, errorBody(fault.status, fault.message, fault.type), method);
      return finish();
    }
    if (fault.action === 'delay') await sleep(fault.ms);
  }

  try {
    stats.forwarded++;
    up = await forward(method, url, req.rawHeaders, reqBuf);
  } catch (e) {
    stats.upstreamFailures++;
    entry.status = 502;
    entry.responseErrors.push(`proxy: the upstream did not answer: ${e.message}`);
    sendJson(res, 502, { error: { message: `rest_proxy: upstream failed: ${e.message}`, type: 'BadGatewayException', code: 502 } }, method);
    return finish();
  }
  entry.upstreamStatus = up.status;
  const upBody = parseBody(up.body, up.lower['content-type']);
  resp = { status: up.status, lower: up.lower, body: upBody };
  learnConfig(m, up.status, upBody);

  if (fault && fault.after === 'after') {
    if (fault.action === 'drop') {
      entry.dropped = true;
      stats.dropped++;
      destroy(req);
      return finish();
    }
    if (fault.action === 'status') {
      entry.status = fault.status;
      sendJson(res, fault.status, errorBody(fault.status, fault.message, fault.type), method);
      return finish();
    }
    if (fault.action === 'delay') await sleep(fault.ms);
    if (fault.action === 'merge' && up.status >= 200 && up.status < 300 && upBody.present &&
        !upBody.parseError &&
        upBody.value && typeof upBody.value === 'object') {
      const merged = deepMerge(parseKeepingLongs(up.body.toString('utf8')), fault.body);
      const text = stringifyKeepingLongs(merged);
      resp = { status: up.status, lower: up.lower, body: { ...upBody, value: JSON.parse(text) } };
      entry.status = up.status;
      sendJson(res, up.status, Buffer.from(text), method);
      return finish();
    }
  }
  entry.status = up.status;
  sendRaw(res, up.status, up.headers, up.body, method);
  return finish();
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    process.stderr.write(`rest_proxy: ${e.stack || e}\n`);
    try {
      if (!res.headersSent) sendJson(res, 500, { error: { message: `rest_proxy: ${e.message}`, type: 'ProxyError', code: 500 } });
      else res.destroy();
    } catch {
      // the connection is gone
    }
  });
});
server.keepAliveTimeout = 30000;
server.on('clientError', (err, socket) => socket.destroy());

function shutdown() {
  server.close();
  server.closeAllConnections?.();
  try {
    fs.closeSync(reportFd);
  } catch {
    // closed already
  }
  process.exit(0);
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

// The validators of an operation are compiled when it is first used, which takes up to half a
// second for those that carry table metadata; those a catalog client uses are compiled once the
// proxy listens, one at a time between requests, so that a client's first commit is not the one
// kept waiting. With --oauth they are all compiled before the proxy listens (some seconds): a
// compilation blocks the proxy, and a request it reads late would be judged by a token's age
// then, not when it came.
const WARM = ['getConfig', 'listNamespaces', 'createNamespace', 'loadNamespaceMetadata',
  'namespaceExists', 'dropNamespace', 'updateProperties', 'listTables', 'createTable', 'loadTable',
  'tableExists', 'updateTable', 'dropTable', 'renameTable', 'commitTransaction', 'registerTable',
  'getToken', 'reportMetrics', 'loadCredentials'];
function warmOne(i) {
  const op = WARM[i >> 1];
  try {
    if (api.router.getOperation(op)) {
      if (i % 2 === 0) api.validator.getRequestValidatorsForOperation(op);
      else api.validator.getStatusBasedResponseValidatorForOperation(op);
    }
  } catch (e) {
    process.stderr.write(`rest_proxy: the validators of ${op} do not compile: ${e.message}\n`);
  }
}
function warm(i) {
  if (i >= WARM.length * 2) return;
  warmOne(i);
  setImmediate(() => warm(i + 1));
}

if (oauth) for (let i = 0; i < WARM.length * 2; i++) warmOne(i);
server.listen(Number(opts.listen), '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
  if (!oauth) setImmediate(() => warm(0));
});
