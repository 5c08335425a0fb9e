// Drives an Iceberg REST catalog server with iceberg-js (Supabase's REST client, written by
// nobody here) as a third-party client would, and checks what the server answers.
//
// Usage: node iceberg_js_drive.mjs --url http://127.0.0.1:PORT [--token T] --namespace NS
//                                  [--warehouse-dir DIR] [--warehouse NAME] [--keep]
//
//   --url            the catalog's base URL (the server itself, or rest_proxy.mjs in front of it);
//                    a base path is kept: http://h:p/base -> http://h:p/base/v1/config
//   --token          sent as "Authorization: Bearer T" on every request
//   --namespace      a namespace that does not exist yet (one level); the run creates it
//   --warehouse-dir  the folder the server keeps its tables in: every metadata-location the server
//                    answers with that is a local file (file:// or a path) must be an existing
//                    metadata file under it whose table-uuid is the table's
//   --warehouse      sent as ?warehouse= on /v1/config
//   --keep           leave the namespace and the two transaction tables in place at the end
//
// Steps, in order (iceberg-js calls unless marked raw):
//   GET /v1/config (raw; defaults and overrides must be objects), loadConfig;
//   createNamespace with properties (again -> 409 AlreadyExistsException), loadNamespaceMetadata
//   (properties back; a missing one -> 404 NoSuchNamespaceException), namespaceExists (HEAD),
//   listNamespaces (lists it);
//   createTable js_orders (long id required, string name, double amount, timestamp ts;
//   identifier field id; the server may renumber the columns) (again -> 409
//   AlreadyExistsException), loadTable (schema back), loadTableResult (metadata-location: see
//   --warehouse-dir), a missing table -> 404 NoSuchTableException, tableExists (HEAD);
//   updateTable set-properties asserting the table-uuid (lands: answer, loadTable and the new
//   metadata file show it), asserting main's current snapshot id (lands), asserting another
//   table-uuid -> 409 CommitFailedException, asserting main at a snapshot it is not at -> 409
//   CommitFailedException (neither changes the table or its metadata-location);
//   listTables; renameTable to js_orders_renamed (same uuid; the old name -> 404);
//   createTable js_tx_a, js_tx_b; raw POST /v1/{prefix}/transactions/commit changing both -> 204
//   and both changed; one whose second table's requirement fails -> 409 CommitFailedException and
//   neither table changed (properties and metadata-location);
//   dropTable js_orders_renamed (load -> 404 NoSuchTableException, tableExists false, not listed);
//   unless --keep: dropNamespace while it holds tables -> 409 NamespaceNotEmptyException, drop
//   the two tables and the namespace (namespaceExists false, load -> 404).
//
// Prints one JSON summary on stdout ({"ok", "prefix", "steps": [...]}) and exits 0 when every
// expectation held; otherwise exits 1 after naming the step and what was wrong on stderr. A step
// that fails ends the run (later steps build on earlier ones). Exit 2: bad arguments.
//
// iceberg-js takes the prefix from /v1/config (overrides.prefix, then defaults.prefix) only when
// it is given a warehouse (or catalogName), and with one but no prefix advertised it calls
// /v1/<warehouse>/...; without one it calls /v1/... and never reads /v1/config. So this script
// reads /v1/config itself first and gives iceberg-js a warehouse only when the server advertises
// a prefix; its own requests (transactions/commit) use that prefix too.
import fs from 'node:fs';
import path from 'node:path';
import { IcebergRestCatalog, IcebergError } from 'iceberg-js';

function usage(msg) {
  process.stderr.write(`iceberg_js_drive: ${msg}\nusage: node iceberg_js_drive.mjs --url http://127.0.0.1:PORT ` +
    `[--token T] --namespace NS [--warehouse-dir DIR] [--warehouse NAME] [--keep]\n`);
  process.exit(2);
}

const opts = { keep: false };
{
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--url') opts.url = val();
    else if (a === '--token') opts.token = val();
    else if (a === '--namespace') opts.namespace = val();
    else if (a === '--warehouse-dir') opts.warehouseDir = val();
    else if (a === '--warehouse') opts.warehouse = val();
    else if (a === '--keep') opts.keep = true;
    else usage(`unknown argument ${a}`);
  }
  if (!opts.url) usage('--url is required');
  if (!opts.namespace) usage('--namespace is required');
}

const baseUrl = opts.url.endsWith('/') ? opts.url : `${opts.url}/`;
const NS = [opts.namespace];
const nsId = { namespace: NS };
const T = {
  main: 'js_orders',
  renamed: 'js_orders_renamed',
  a: 'js_tx_a',
  b: 'js_tx_b',
};
const id = (name) => ({ namespace: NS, name });

class Failure extends Error {}
function expect(cond, msg) {
  if (!cond) throw new Failure(msg);
}
const J = (v) => JSON.stringify(v);

// ---------------------------------------------------------------- raw HTTP (what iceberg-js lacks)

function authHeaders() {
  return opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
}

async function raw(method, rel, body) {
  const url = new URL(rel, baseUrl).toString();
  let res;
  try {
    res = await fetch(url, {
      method,
      headers: { ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...authHeaders() },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
  } catch (e) {
    throw new Failure(`${method} ${url}: no answer (${e.cause?.message || e.message})`);
  }
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, contentType: res.headers.get('content-type') || '', text, json };
}

// ---------------------------------------------------------------- expectations

// Runs `fn`, which must fail with an IcebergError of HTTP `status` and error.type `type`.
async function expectError(what, fn, status, type) {
  let r;
  try {
    r = await fn();
  } catch (e) {
    if (!(e instanceof IcebergError)) throw e;
    expect(e.status === status,
      `${what}: expected HTTP ${status} ${type}, got HTTP ${e.status} (${e.icebergType ?? 'no error type'}: ${e.message})`);
    expect(e.icebergType === type,
      `${what}: HTTP ${status} as expected, but error.type is ${J(e.icebergType)}, not ${J(type)} ` +
      `(body ${J(e.details)}; iceberg-js reads the error body only when Content-Type is application/json)`);
    return { status: e.status, type: e.icebergType };
  }
  throw new Failure(`${what}: expected HTTP ${status} ${type}, but it succeeded (${J(r)?.slice(0, 300)})`);
}

function expectRawError(what, r, status, type) {
  expect(r.status === status, `${what}: expected HTTP ${status} ${type}, got HTTP ${r.status}: ${r.text.slice(0, 300)}`);
  expect(r.contentType.includes('application/json'), `${what}: the error answer's Content-Type is ${J(r.contentType)}, not application/json`);
  expect(r.json?.error?.type === type, `${what}: error.type is ${J(r.json?.error?.type)}, not ${J(type)} (body ${r.text.slice(0, 300)})`);
  expect(r.json?.error?.code === status, `${what}: error.code is ${J(r.json?.error?.code)}, not ${status}`);
}

function localPath(location) {
  if (typeof location !== 'string') return null;
  if (location.startsWith('file://')) return decodeURIComponent(location.slice('file://'.length).replace(/^localhost\//, '/'));
  if (location.startsWith('file:')) return decodeURIComponent(location.slice('file:'.length));
  if (location.startsWith('/')) return location;
  return null;
}

// A metadata-location answered for the table of uuid `uuid`: a local file must exist, be under
// --warehouse-dir and hold that table's metadata. Returns the parsed file (or null: not local).
const notes = [];
function checkMetadataFile(what, location, uuid) {
  expect(typeof location === 'string' && location.length > 0, `${what}: no metadata-location in the answer`);
  const p = localPath(location);
  if (p === null) {
    notes.push(`${what}: metadata-location ${location} is not a local file; not read`);
    return null;
  }
  if (opts.warehouseDir) {
    const real = (x) => (fs.existsSync(x) ? fs.realpathSync(x) : path.resolve(x));
    const rel = path.relative(real(opts.warehouseDir), real(p));
    expect(!rel.startsWith('..') && !path.isAbsolute(rel),
      `${what}: metadata-location ${location} is not under the warehouse ${opts.warehouseDir}`);
  }
  expect(fs.existsSync(p), `${what}: metadata-location ${location} does not exist`);
  let m;
  try {
    m = JSON.parse(fs.readFileSync(p, 'utf8'));
  } catch (e) {
    throw new Failure(`${what}: metadata file ${p} is not JSON: ${e.message}`);
  }
  expect(m['table-uuid'] === uuid, `${what}: metadata file ${p} has table-uuid ${m['table-uuid']}, not ${uuid}`);
  return m;
}

function currentSchema(m) {
  return (m.schemas || []).find((s) => s['schema-id'] === m['current-schema-id']);
}

const SCHEMA = {
  type: 'struct',
  'schema-id': 0,
  fields: [
    { id: 1, name: 'id', type: 'long', required: true },
    { id: 2, name: 'name', type: 'string', required: false },
    { id: 3, name: 'amount', type: 'double', required: false },
    { id: 4, name: 'ts', type: 'timestamp', required: false },
  ],
  'identifier-field-ids': [1],
};

// The server may give the columns new ids; names, types, required and the identifier must stay.
function checkSchema(what, m) {
  expect(m && typeof m === 'object', `${what}: no table metadata in the answer`);
  const s = currentSchema(m);
  expect(s, `${what}: current-schema-id ${m['current-schema-id']} names none of schemas ${J((m.schemas || []).map((x) => x['schema-id']))}`);
  const got = (s.fields || []).map((f) => ({ name: f.name, type: f.type, required: f.required }));
  const want = SCHEMA.fields.map((f) => ({ name: f.name, type: f.type, required: f.required }));
  expect(J(got) === J(want), `${what}: schema is ${J(got)}, expected ${J(want)}`);
  const idField = s.fields.find((f) => f.name === 'id');
  expect(J(s['identifier-field-ids']) === J([idField.id]),
    `${what}: identifier-field-ids is ${J(s['identifier-field-ids'])}, expected [${idField.id}] (the id of column "id")`);
  const ids = s.fields.map((f) => f.id);
  expect(new Set(ids).size === ids.length, `${what}: field ids repeat: ${J(ids)}`);
  expect(Number(m['last-column-id']) >= Math.max(...ids), `${what}: last-column-id ${m['last-column-id']} is below the field ids ${J(ids)}`);
}

// ---------------------------------------------------------------- the run

const summary = { ok: false, url: opts.url, namespace: opts.namespace, prefix: null, steps: [], notes };
const state = {};
let catalog;

async function step(name, fn) {
  const t0 = Date.now();
  const rec = { name, ok: false };
  summary.steps.push(rec);
  try {
    const detail = await fn();
    rec.ok = true;
    if (detail !== undefined) rec.detail = detail;
  } catch (e) {
    rec.error = e instanceof Failure ? e.message
      : e instanceof IcebergError ? `HTTP ${e.status} ${e.icebergType ?? ''}: ${e.message} ${J(e.details ?? null)}`
        : (e.stack || String(e));
    throw e;
  } finally {
    rec.ms = Date.now() - t0;
  }
}

const pfx = () => (state.prefix ? `v1/${state.prefix}` : "v1"); // as iceberg-js builds it
const nsPath = () => NS.map(encodeURIComponent).join('%1F');

async function run() {
  await step('GET /v1/config (raw)', async () => {
    const r = await raw('GET', opts.warehouse ? `v1/config?warehouse=${encodeURIComponent(opts.warehouse)}` : 'v1/config');
    expect(r.status === 200, `GET /v1/config answered HTTP ${r.status}: ${r.text.slice(0, 300)}`);
    expect(r.json && typeof r.json.defaults === 'object' && typeof r.json.overrides === 'object',
      `GET /v1/config must answer {"defaults": {...}, "overrides": {...}}, got ${r.text.slice(0, 300)}`);
    const p = r.json.overrides.prefix ?? r.json.defaults.prefix;
    state.prefix = typeof p === 'string' && p !== '' ? p : null;
    summary.prefix = state.prefix;
    return { prefix: state.prefix, endpoints: r.json.endpoints?.length ?? null };
  });

  catalog = new IcebergRestCatalog({
    baseUrl,
    // see above: a warehouse makes iceberg-js read the prefix from /v1/config
    ...(state.prefix ? { warehouse: opts.warehouse ?? state.prefix } : {}),
    auth: opts.token ? { type: 'bearer', token: opts.token } : { type: 'none' },
  });

  await step('loadConfig', async () => {
    const c = await catalog.loadConfig();
    expect(c && typeof c.defaults === 'object' && typeof c.overrides === 'object', `loadConfig gave ${J(c)}`);
    const p = c.overrides.prefix ?? c.defaults.prefix ?? null;
    expect((p || null) === state.prefix, `loadConfig's prefix ${J(p)} differs from the one read before ${J(state.prefix)}`);
  });

  await step('createNamespace', async () => {
    const r = await catalog.createNamespace(nsId, { properties: { owner: 'iceberg-js', comment: 'made by iceberg_js_drive' } });
    expect(J(r?.namespace) === J(NS), `createNamespace answered namespace ${J(r?.namespace)}, not ${J(NS)}`);
  });

  await step('createNamespace again -> 409', () =>
    expectError('creating the namespace a second time', () => catalog.createNamespace(nsId), 409, 'AlreadyExistsException'));

  await step('loadNamespaceMetadata', async () => {
    const r = await catalog.loadNamespaceMetadata(nsId);
    expect(r.properties.owner === 'iceberg-js' && r.properties.comment === 'made by iceberg_js_drive',
      `the namespace's properties are ${J(r.properties)}; owner and comment are missing`);
    return { properties: r.properties };
  });

  await step('loadNamespaceMetadata of a missing namespace -> 404', () =>
    expectError('loading a namespace that does not exist',
      () => catalog.loadNamespaceMetadata({ namespace: [`${opts.namespace}_missing`] }), 404, 'NoSuchNamespaceException'));

  await step('namespaceExists', async () => {
    expect(await catalog.namespaceExists(nsId) === true, 'namespaceExists (HEAD) says the namespace does not exist');
    expect(await catalog.namespaceExists({ namespace: [`${opts.namespace}_missing`] }) === false,
      'namespaceExists (HEAD) says a missing namespace exists');
  });

  await step('listNamespaces', async () => {
    const r = await catalog.listNamespaces();
    const all = r.namespaces.map((n) => J(n.namespace));
    expect(all.includes(J(NS)), `listNamespaces does not list ${J(NS)}: ${all.join(' ')}`);
    return { count: all.length };
  });

  await step('createTable', async () => {
    const m = await catalog.createTable(nsId, { name: T.main, schema: SCHEMA, properties: { 'created-by': 'iceberg-js' } });
    checkSchema('createTable', m);
    expect(typeof m['table-uuid'] === 'string', `createTable: no table-uuid in ${J(m).slice(0, 300)}`);
    expect(m.properties?.['created-by'] === 'iceberg-js', `createTable: properties ${J(m.properties)} lack created-by`);
    state.uuid = m['table-uuid'];
    return { uuid: state.uuid, location: m.location };
  });

  await step('createTable again -> 409', () =>
    expectError('creating the table a second time',
      () => catalog.createTable(nsId, { name: T.main, schema: SCHEMA }), 409, 'AlreadyExistsException'));

  await step('loadTable', async () => {
    const m = await catalog.loadTable(id(T.main));
    checkSchema('loadTable', m);
    expect(m['table-uuid'] === state.uuid, `loadTable: table-uuid ${m['table-uuid']} is not the one createTable gave ${state.uuid}`);
    expect(m.properties?.['created-by'] === 'iceberg-js', `loadTable: properties ${J(m.properties)} lack created-by`);
    const r = await catalog.loadTableResult(id(T.main));
    checkMetadataFile('loadTableResult', r['metadata-location'], state.uuid);
    state.location = r['metadata-location'];
    state.mainRef = m.refs?.main?.['snapshot-id'] ?? null;
    return { 'metadata-location': state.location, 'format-version': m['format-version'] };
  });

  await step('loadTable of a missing table -> 404', () =>
    expectError('loading a table that does not exist', () => catalog.loadTable(id(`${T.main}_missing`)), 404, 'NoSuchTableException'));

  await step('tableExists', async () => {
    expect(await catalog.tableExists(id(T.main)) === true, 'tableExists (HEAD) says the table does not exist');
    expect(await catalog.tableExists(id(`${T.main}_missing`)) === false, 'tableExists (HEAD) says a missing table exists');
  });

  await step('updateTable: set-properties, assert-table-uuid', async () => {
    const r = await catalog.updateTable(id(T.main), {
      requirements: [{ type: 'assert-table-uuid', uuid: state.uuid }],
      updates: [{ action: 'set-properties', updates: { 'ferry.drive': 'one' } }],
    });
    expect(r.metadata?.properties?.['ferry.drive'] === 'one', `the commit's answer lacks the property: ${J(r.metadata?.properties)}`);
    expect(r['metadata-location'] !== state.location, `the commit's metadata-location is the one before it (${state.location})`);
    const f = checkMetadataFile('updateTable', r['metadata-location'], state.uuid);
    if (f) expect(f.properties?.['ferry.drive'] === 'one', `the metadata file ${r['metadata-location']} lacks the property`);
    const m = await catalog.loadTable(id(T.main));
    expect(m.properties?.['ferry.drive'] === 'one', `loadTable after the commit: properties ${J(m.properties)} lack ferry.drive=one`);
    state.location = r['metadata-location'];
    return { 'metadata-location': state.location };
  });

  await step('updateTable: assert-ref-snapshot-id of the current main', async () => {
    const r = await catalog.updateTable(id(T.main), {
      requirements: [{ type: 'assert-ref-snapshot-id', ref: 'main', 'snapshot-id': state.mainRef }],
      updates: [{ action: 'set-properties', updates: { 'ferry.drive.ref': 'ok' } }],
    });
    expect(r.metadata?.properties?.['ferry.drive.ref'] === 'ok', `the commit's answer lacks the property: ${J(r.metadata?.properties)}`);
    state.location = r['metadata-location'];
    return { main: state.mainRef };
  });

  await step('updateTable with a wrong assert-table-uuid -> 409', async () => {
    await expectError('a commit asserting another table-uuid', () => catalog.updateTable(id(T.main), {
      requirements: [{ type: 'assert-table-uuid', uuid: '00000000-0000-4000-8000-000000000000' }],
      updates: [{ action: 'set-properties', updates: { 'ferry.drive': 'wrong-uuid' } }],
    }), 409, 'CommitFailedException');
    const r = await catalog.loadTableResult(id(T.main));
    expect(r.metadata.properties?.['ferry.drive'] === 'one', `the refused commit changed the table: ${J(r.metadata.properties)}`);
    expect(r['metadata-location'] === state.location, `the refused commit moved metadata-location to ${r['metadata-location']}`);
  });

  await step('updateTable with a stale assert-ref-snapshot-id -> 409', async () => {
    const stale = state.mainRef === null ? 1234567890123 : null;
    await expectError(`a commit asserting main is at ${stale}`, () => catalog.updateTable(id(T.main), {
      requirements: [{ type: 'assert-ref-snapshot-id', ref: 'main', 'snapshot-id': stale }],
      updates: [{ action: 'set-properties', updates: { 'ferry.drive': 'stale-ref' } }],
    }), 409, 'CommitFailedException');
    const m = await catalog.loadTable(id(T.main));
    expect(m.properties?.['ferry.drive'] === 'one', `the refused commit changed the table: ${J(m.properties)}`);
  });

  await step('listTables', async () => {
    const r = await catalog.listTables(nsId);
    const names = r.identifiers.map((i) => i.name);
    expect(names.includes(T.main), `listTables does not list ${T.main}: ${J(r.identifiers)}`);
    for (const i of r.identifiers) expect(J(i.namespace) === J(NS), `listTables gave an identifier of another namespace: ${J(i)}`);
    return { names };
  });

  await step('renameTable', async () => {
    await catalog.renameTable({ source: id(T.main), destination: id(T.renamed) });
    const m = await catalog.loadTable(id(T.renamed));
    expect(m['table-uuid'] === state.uuid, `the renamed table has table-uuid ${m['table-uuid']}, not ${state.uuid}`);
    expect(m.properties?.['ferry.drive'] === 'one', `the renamed table lost its properties: ${J(m.properties)}`);
    await expectError('loading the table by its old name after the rename', () => catalog.loadTable(id(T.main)), 404, 'NoSuchTableException');
    const names = (await catalog.listTables(nsId)).identifiers.map((i) => i.name);
    expect(names.includes(T.renamed) && !names.includes(T.main), `listTables after the rename: ${J(names)}`);
  });

  await step('createTable x2 for the transaction', async () => {
    for (const k of ['a', 'b']) {
      const m = await catalog.createTable(nsId, { name: T[k], schema: SCHEMA });
      checkSchema(`createTable ${T[k]}`, m);
      state[`uuid_${k}`] = m['table-uuid'];
    }
  });

  const txChange = (k, uuid, value) => ({
    identifier: id(T[k]),
    requirements: [{ type: 'assert-table-uuid', uuid }],
    updates: [{ action: 'set-properties', updates: { 'ferry.tx': value } }],
  });

  await step('POST transactions/commit (two tables) -> 204', async () => {
    const r = await raw('POST', `${pfx()}/transactions/commit`, {
      'table-changes': [txChange('a', state.uuid_a, '1'), txChange('b', state.uuid_b, '1')],
    });
    expect(r.status === 204, `transactions/commit answered HTTP ${r.status}, not 204: ${r.text.slice(0, 300)}`);
    for (const k of ['a', 'b']) {
      const res = await catalog.loadTableResult(id(T[k]));
      expect(res.metadata.properties?.['ferry.tx'] === '1', `after the transaction ${T[k]} has properties ${J(res.metadata.properties)}`);
      checkMetadataFile(`loadTableResult ${T[k]}`, res['metadata-location'], state[`uuid_${k}`]);
      state[`loc_${k}`] = res['metadata-location'];
    }
  });

  await step('POST transactions/commit whose second requirement fails -> 409, nothing changes', async () => {
    const r = await raw('POST', `${pfx()}/transactions/commit`, {
      'table-changes': [txChange('a', state.uuid_a, '2'), txChange('b', '00000000-0000-4000-8000-000000000000', '2')],
    });
    expectRawError('a transaction whose second table requirement fails', r, 409, 'CommitFailedException');
    for (const k of ['a', 'b']) {
      const res = await catalog.loadTableResult(id(T[k]));
      expect(res.metadata.properties?.['ferry.tx'] === '1',
        `the failed transaction changed ${T[k]}: ferry.tx is ${J(res.metadata.properties?.['ferry.tx'])}, not "1"`);
      expect(res['metadata-location'] === state[`loc_${k}`],
        `the failed transaction moved ${T[k]}'s metadata-location from ${state[`loc_${k}`]} to ${res['metadata-location']}`);
    }
  });

  await step('dropTable', async () => {
    await catalog.dropTable(id(T.renamed));
    await expectError('loading the dropped table', () => catalog.loadTable(id(T.renamed)), 404, 'NoSuchTableException');
    expect(await catalog.tableExists(id(T.renamed)) === false, 'tableExists (HEAD) says the dropped table exists');
    const names = (await catalog.listTables(nsId)).identifiers.map((i) => i.name);
    expect(!names.includes(T.renamed), `listTables still lists the dropped table: ${J(names)}`);
  });

  if (opts.keep) return;

  await step('dropNamespace while it holds tables -> 409', () =>
    expectError('dropping a namespace that holds tables', () => catalog.dropNamespace(nsId), 409, 'NamespaceNotEmptyException'));

  await step('drop the rest and the namespace', async () => {
    await catalog.dropTable(id(T.a));
    await catalog.dropTable(id(T.b));
    await catalog.dropNamespace(nsId);
    expect(await catalog.namespaceExists(nsId) === false, 'namespaceExists says the dropped namespace exists');
    await expectError('loading the dropped namespace', () => catalog.loadNamespaceMetadata(nsId), 404, 'NoSuchNamespaceException');
  });
}

let failed = null;
try {
  await run();
  summary.ok = true;
} catch (e) {
  failed = e;
}
process.stdout.write(JSON.stringify(summary, null, 1) + '\n');
if (failed) {
  const last = summary.steps[summary.steps.length - 1];
  process.stderr.write(`iceberg_js_drive: FAILED at step "${last?.name}": ${last?.error ?? failed.message}\n`);
  process.exit(1);
}
