// Checks an Avro container file written by ferry with an independent reader (avsc).
//
// Usage: node avro_check.mjs <file.avro> [expected.json]
//
// Always: decodes every record with avsc's createFileDecoder (which verifies the magic, every sync
// marker and the codec), prints the header metadata keys and the record count, and walks the
// writer schema stored in the header (avro.schema) listing every record field and whether it
// carries a "field-id" attribute. If the schema is an Iceberg manifest or manifest list (top-level
// record "manifest_entry" or "manifest_file", or a "format-version" metadata key), every field must
// carry "field-id"; fields without one are reported and the exit code is 1.
//
// expected.json (optional): {"metadata": {key: value, ...}, "records": [...]}.
//   - metadata: only the keys listed are compared, each against the header value read as UTF-8.
//   - records: compared one by one, deeply and exactly, in file order; the count must match.
//   Value conventions in expected.json:
//   - bytes and fixed values are lowercase hex strings ("0a00ff");
//   - long values are JSON numbers when |v| <= 2^53 - 1, otherwise decimal strings
//     ("9223372036854775807"), since JSON numbers lose precision beyond that in JavaScript;
//   - unions are unwrapped: the branch's value, or null (avsc's wrapUnions: 'never', so unions
//     whose branches avsc cannot tell apart, e.g. ["int","long"], are refused with an error);
//   - records and maps are objects; arrays (also Iceberg's "logicalType":"map" arrays) are arrays;
//   - enums are their symbol strings; float and double are numbers.
// Any difference is printed with its path and the exit code is 1.
import fs from 'node:fs';
import avro from 'avsc';
import { bigLong } from './lib/avro_long.mjs';

function usage() {
  console.error('usage: node avro_check.mjs <file.avro> [expected.json]');
  process.exit(2);
}

const [file, expectedPath] = process.argv.slice(2);
if (!file) usage();



// Turns an avsc value into the conventions of expected.json.
function normalize(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') {
    const limit = BigInt(Number.MAX_SAFE_INTEGER);
    return v >= -limit && v <= limit ? Number(v) : v.toString();
  }
  if (Buffer.isBuffer(v)) return v.toString('hex');
  if (Array.isArray(v)) return v.map(normalize);
  if (typeof v === 'object') {
    const out = {};
    for (const k of Object.keys(v)) out[k] = normalize(v[k]);
    return out;
  }
  return v;
}

// Collects differences between `actual` and `expected` with their paths.
function diff(actual, expected, path, out) {
  if (out.length >= 50) return;
  const kind = (x) => (x === null ? 'null' : Array.isArray(x) ? 'array' : typeof x);
  if (kind(actual) !== kind(expected)) {
    out.push(`${path}: got ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
    return;
  }
  if (kind(actual) === 'array') {
    if (actual.length !== expected.length) {
      out.push(`${path}: got ${actual.length} items, expected ${expected.length}`);
    }
    const n = Math.min(actual.length, expected.length);
    for (let i = 0; i < n; i++) diff(actual[i], expected[i], `${path}[${i}]`, out);
    return;
  }
  if (kind(actual) === 'object') {
    const keys = new Set([...Object.keys(actual), ...Object.keys(expected)]);
    for (const k of keys) {
      if (!(k in actual)) out.push(`${path}.${k}: missing`);
      else if (!(k in expected)) out.push(`${path}.${k}: unexpected (value ${JSON.stringify(actual[k])})`);
      else diff(actual[k], expected[k], `${path}.${k}`, out);
    }
    return;
  }
  if (!Object.is(actual, expected) && actual !== expected) {
    out.push(`${path}: got ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
  }
}

// Walks a schema and reports every record field with or without "field-id". Named types are
// visited once (a reference by name is a string and is not followed).
function walkFields(schema, prefix, found) {
  if (Array.isArray(schema)) {
    for (const branch of schema) walkFields(branch, prefix, found);
    return;
  }
  if (schema === null || typeof schema !== 'object') return;
  switch (schema.type) {
    case 'record':
    case 'error':
      for (const f of schema.fields || []) {
        const path = prefix ? `${prefix}.${f.name}` : f.name;
        found.push({ path, fieldId: f['field-id'] });
        walkFields(f.type, path, found);
      }
      return;
    case 'array':
      walkFields(schema.items, `${prefix}[]`, found);
      return;
    case 'map':
      walkFields(schema.values, `${prefix}{}`, found);
      return;
    default:
      if (typeof schema.type === 'object') walkFields(schema.type, prefix, found);
  }
}

async function main() {
  let header = null;
  const records = [];
  await new Promise((resolve, reject) => {
    avro
      .createFileDecoder(file, {
        parseHook: (schema) =>
          avro.Type.forSchema(schema, { registry: { long: bigLong }, wrapUnions: 'never' }),
      })
      .on('metadata', (type, codec, h) => {
        header = h;
      })
      .on('data', (r) => records.push(r))
      .on('error', reject)
      .on('end', resolve);
  });
  if (header === null) throw new Error('no header decoded');

  const metadata = {};
  for (const [k, v] of Object.entries(header.meta)) metadata[k] = v.toString('utf8');
  console.log(`file: ${file}`);
  console.log(`metadata keys: ${Object.keys(metadata).sort().join(', ')}`);
  console.log(`codec: ${metadata['avro.codec'] || 'null'}`);
  console.log(`records: ${records.length}`);

  const problems = [];
  const schema = JSON.parse(metadata['avro.schema']);
  const fields = [];
  walkFields(schema, '', fields);
  const withId = fields.filter((f) => f.fieldId !== undefined);
  console.log(`schema fields: ${fields.length}, with field-id: ${withId.length}`);
  const iceberg =
    (schema && (schema.name === 'manifest_entry' || schema.name === 'manifest_file')) ||
    'format-version' in metadata;
  if (iceberg) {
    for (const f of fields) {
      if (f.fieldId === undefined) problems.push(`schema field ${f.path} has no "field-id"`);
      else if (!Number.isInteger(f.fieldId)) {
        problems.push(`schema field ${f.path} has a non-integer "field-id" ${JSON.stringify(f.fieldId)}`);
      }
    }
  }

  if (expectedPath) {
    const expected = JSON.parse(fs.readFileSync(expectedPath, 'utf8'));
    for (const [k, v] of Object.entries(expected.metadata || {})) {
      if (!(k in metadata)) problems.push(`metadata ${k}: missing`);
      else if (metadata[k] !== v) {
        problems.push(`metadata ${k}: got ${JSON.stringify(metadata[k])}, expected ${JSON.stringify(v)}`);
      }
    }
    if (expected.records !== undefined) {
      diff(records.map(normalize), expected.records, 'records', problems);
    }
  }

  if (problems.length > 0) {
    for (const p of problems) console.log(`MISMATCH ${p}`);
    console.log(`FAIL: ${problems.length} problem(s)`);
    process.exit(1);
  }
  console.log('OK');
}

main().catch((err) => {
  console.log(`FAIL: avsc could not read ${file}: ${err && err.message ? err.message : err}`);
  process.exit(1);
});
