// Reads an Iceberg table written by ferry with readers nobody here wrote, and prints what they
// see as one JSON document on stdout:
//   icebird  the table's current rows (metadata -> manifest list -> manifests -> Parquet, with
//            delete files applied), and its view of the manifests;
//   DuckDB   every data and delete file of the current snapshot: rows (with the delete files
//            applied as the spec says), Parquet field ids, row counts, null counts and bounds;
//   avsc     the manifest list and every manifest: decodes them and checks that every field of
//            their embedded schemas carries "field-id".
// Problems found on the way (a missing field id, a row count that disagrees with the manifest,
// a partition tuple that disagrees with the rows of its file or with the manifest list's
// partition summaries, ...) are listed in "problems"; the caller compares the rows with its
// source.
//
// Usage: node iceberg_inspect.mjs <path of the table's current metadata.json>
//        (a table on S3: FERRY_INSPECT_S3_MIRROR=<folder holding a copy of its bucket>, below)
//
// Canonical values (so that callers compare exactly, whatever each reader returns):
//   null -> null; boolean -> "true"/"false"; int, long -> decimal string;
//   float, double -> "f:" + the 16 hex digits of the IEEE 754 double;
//   decimal -> DuckDB: its text ("12.34"); icebird: "~" + the number with the scale's digits
//             (icebird returns decimals as JS numbers);
//   date -> days since 1970-01-01 as a decimal string;
//   timestamp, timestamptz -> DuckDB: microseconds since the epoch; icebird: "ms:" + milliseconds
//   string -> itself; binary, uuid -> "hex:" + lowercase hex (icebird: "utf8:" + the hex of the
//   UTF-8 string it decoded the bytes into, as it does not return raw bytes).
import fs from 'node:fs';
import path from 'node:path';
import avro from 'avsc';
import { bigLong } from './lib/avro_long.mjs';
import { icebergRead } from 'icebird';
import { DuckDBInstance } from '@duckdb/node-api';

// ---- local files only: icebird fetches everything; nothing may leave this machine ----
// A table on an object store is read from a local copy of its bucket: with
// FERRY_INSPECT_S3_MIRROR=<folder>, s3://bucket/key (and icebird's
// https://bucket.s3.amazonaws.com/key) is read from <folder>/bucket/key.
const s3Mirror = process.env.FERRY_INSPECT_S3_MIRROR || '';
function mirrored(url) {
  const m = /^s3a?:\/\/([^/]+)\/(.*)$/.exec(url) || /^https:\/\/([^./]+)\.s3\.amazonaws\.com\/(.*)$/.exec(url);
  if (!m || !s3Mirror) return null;
  return path.join(s3Mirror, m[1], decodeURIComponent(m[2]));
}
globalThis.fetch = async (input, init = {}) => {
  const url = typeof input === 'string' ? input : input.url;
  const file = url.startsWith('file://') ? url.slice('file://'.length) : mirrored(url);
  if (file === null) throw new Error(`blocked a non-local URL: ${url}`);
  const size = fs.statSync(file).size;
  const method = (init.method || 'GET').toUpperCase();
  if (method === 'HEAD') return new Response(null, { status: 200, headers: { 'Content-Length': String(size) } });
  let range = null;
  const h = init.headers;
  if (h) range = typeof h.get === 'function' ? h.get('Range') || h.get('range') : h.Range || h.range;
  if (range) {
    const m = /bytes=(\d+)-(\d*)/.exec(range);
    const start = Number(m[1]);
    const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    const fd = fs.openSync(file, 'r');
    const buf = Buffer.alloc(end - start + 1);
    fs.readSync(fd, buf, 0, buf.length, start);
    fs.closeSync(fd);
    return new Response(buf, {
      status: 206,
      headers: { 'Content-Length': String(buf.length), 'Content-Range': `bytes ${start}-${end}/${size}` },
    });
  }
  return new Response(fs.readFileSync(file), { status: 200, headers: { 'Content-Length': String(size) } });
};

const metadataPath = process.argv[2];
if (!metadataPath) {
  console.error('usage: node iceberg_inspect.mjs <metadata.json>');
  process.exit(2);
}
const problems = [];
const metadata = JSON.parse(fs.readFileSync(metadataPath, 'utf8'));
const schema = metadata.schemas.find((s) => s['schema-id'] === metadata['current-schema-id']);
const localPath = (uri) => (uri.startsWith('file://') ? uri.slice(7) : mirrored(uri) ?? uri);

function hexBytes(u8) {
  return 'hex:' + Buffer.from(u8.buffer ? new Uint8Array(u8.buffer, u8.byteOffset, u8.byteLength) : u8).toString('hex');
}
function doubleBits(x) {
  const dv = new DataView(new ArrayBuffer(8));
  dv.setFloat64(0, Number(x));
  return 'f:' + dv.getBigUint64(0).toString(16).padStart(16, '0');
}

// Lists: types[i] is the list type's JSON text; the canonical value is 'list:' and the JSON array
// of the elements' canonical values (null for a NULL element), in both readers.
function listElement(type) {
  if (!type.startsWith('{')) return null;
  const t = JSON.parse(type);
  return t.type === 'list' && typeof t.element === 'string' ? t.element : null;
}

function canonIcebird(type, v) {
  if (v === null || v === undefined) return null;
  const elem = listElement(type);
  if (elem !== null) return 'list:' + JSON.stringify(Array.from(v, (e) => canonIcebird(elem, e)));
  if (type === 'boolean') return v ? 'true' : 'false';
  if (type === 'int' || type === 'long') return BigInt(v).toString();
  if (type === 'float' || type === 'double') return doubleBits(v);
  if (type.startsWith('decimal')) {
    const scale = Number(/decimal\(\d+,\s*(\d+)\)/.exec(type)[1]);
    return '~' + Number(v).toFixed(scale);
  }
  if (type === 'date') return v instanceof Date ? String(Math.round(v.getTime() / 86400000)) : String(v);
  if (type === 'timestamp' || type === 'timestamptz') return v instanceof Date ? 'ms:' + v.getTime() : 'ms:' + String(v);
  if (type === 'binary' || type === 'uuid' || type.startsWith('fixed')) {
    // icebird (hyparquet) hands un-annotated byte arrays back as UTF-8-decoded strings, replacing
    // invalid sequences: keep what it returned so callers can mirror that; DuckDB checks the bytes.
    return typeof v === 'string' ? 'utf8:' + Buffer.from(v, 'utf8').toString('hex') : hexBytes(v);
  }
  return String(v);
}

function canonDuck(type, v) {
  if (v === null || v === undefined) return null;
  const elem = listElement(type);
  if (elem !== null) return 'list:' + JSON.stringify(v.items.map((e) => canonDuck(elem, e)));
  if (type === 'float' || type === 'double') return doubleBits(v);
  return String(v);
}

// The DuckDB select expression giving a column's canonical text.
function duckExpr(name, type) {
  const c = '"' + name.replaceAll('"', '""') + '"';
  const elem = listElement(type);
  if (elem !== null) return `list_transform(${c}, x -> ${duckExpr('x', elem).replaceAll('"x"', 'x')})`;
  if (type === 'boolean') return `CASE WHEN ${c} IS NULL THEN NULL WHEN ${c} THEN 'true' ELSE 'false' END`;
  if (type === 'float' || type === 'double') return `CAST(${c} AS DOUBLE)`;
  if (type === 'date') return `CAST(${c} - DATE '1970-01-01' AS VARCHAR)`;
  if (type === 'timestamp') return `CAST(epoch_us(${c}) AS VARCHAR)`;
  if (type === 'timestamptz') return `CAST(epoch_us(${c}) AS VARCHAR)`;
  if (type === 'binary') return `'hex:' || lower(hex(${c}))`;
  // DuckDB reads an annotated UUID as its own UUID type, printed with dashes.
  if (type === 'uuid') return `'hex:' || replace(CAST(${c} AS VARCHAR), '-', '')`;
  return `CAST(${c} AS VARCHAR)`;
}

// Java-style Parquet column name (what ferry writes; readers match columns by field id).
function parquetName(name) {
  let out = '';
  for (let i = 0; i < name.length; i++) {
    const ch = name.charAt(i);
    if (/[A-Za-z_]/.test(ch) || (i > 0 && /[0-9]/.test(ch))) out += ch;
    else if (/[0-9]/.test(ch)) out += '_' + ch;
    else out += '_x' + ch.charCodeAt(0).toString(16).toUpperCase();
  }
  return out;
}

// ---- avsc: manifest list and manifests ----
function fieldsWithoutId(schemaJson) {
  const missing = [];
  const walk = (t, where) => {
    if (Array.isArray(t)) return t.forEach((b) => walk(b, where));
    if (!t || typeof t !== 'object') return;
    if (t.type === 'record') {
      for (const f of t.fields) {
        if (f['field-id'] === undefined) missing.push(`${where}.${f.name}`);
        walk(f.type, `${where}.${f.name}`);
      }
    } else if (t.type === 'array') walk(t.items, where);
    else if (t.type === 'map') walk(t.values, where);
  };
  walk(schemaJson, schemaJson.name || 'record');
  return missing;
}



function readAvro(file) {
  return new Promise((resolve, reject) => {
    const records = [];
    let header = null;
    avro.createFileDecoder(file, {
      parseHook: (schema) => avro.Type.forSchema(schema, { registry: { long: bigLong }, wrapUnions: 'never' }),
    })
      .on('metadata', (type, codec, h) => { header = h; })
      .on('data', (r) => records.push(r))
      .on('error', reject)
      .on('end', () => resolve({ header, records }));
  });
}

async function inspectAvro(file, what) {
  try {
    const { header, records } = await readAvro(file);
    const schemaJson = JSON.parse(header.meta['avro.schema'].toString('utf8'));
    for (const m of fieldsWithoutId(schemaJson)) problems.push(`avsc: ${what} field ${m} has no field-id`);
    return records;
  } catch (e) {
    problems.push(`avsc: cannot read ${what} ${file}: ${e.message}`);
    return [];
  }
}

const out = {
  table_uuid: metadata['table-uuid'],
  current_snapshot_id: String(metadata['current-snapshot-id']),
  schema,
  properties: metadata.properties || {},
  refs: Object.keys(metadata.refs || {}),
  snapshot_count: (metadata.snapshots || []).length,
  summary: null,
  data_files: [],
  manifests: 0,
  icebird_rows: [],
  duckdb_rows: [],
  problems,
};

const current = (metadata.snapshots || []).find((s) => String(s['snapshot-id']) === String(metadata['current-snapshot-id']));
if (current) {
  out.summary = current.summary;
  const list = await inspectAvro(localPath(current['manifest-list']), 'manifest list');
  out.manifests = list.length;
  for (const m of list) {
    const entries = await inspectAvro(localPath(m.manifest_path), 'manifest');
    const spec = (metadata['partition-specs'] || []).find((s) => s['spec-id'] === m.partition_spec_id);
    if (!spec) problems.push(`manifest ${m.manifest_path} has partition spec ${m.partition_spec_id}, which the metadata does not list`);
    const fields = spec ? spec.fields : [];
    if ((m.partitions || []).length !== fields.length) problems.push(`manifest list: ${m.manifest_path} has ${(m.partitions || []).length} partition summaries for a spec of ${fields.length} fields`);
    for (const e of entries) {
      if (e.status === 2) continue;
      const mapOf = (arr) => new Map((arr || []).map((kv) => [Number(kv.key), kv.value]));
      // The tuple, by the spec's field names (the Avro record names them the Avro-safe way).
      const tuple = {};
      fields.forEach((f, i) => {
        const v = (e.data_file.partition || {})[parquetName(f.name)];
        tuple[f.name] = v === null || v === undefined ? null : String(v);
        const sum = (m.partitions || [])[i];
        if (!sum) return;
        if (v === null || v === undefined) {
          if (!sum.contains_null) problems.push(`manifest list: ${m.manifest_path} field ${f.name} says no nulls, an entry has one`);
        } else if (typeof v === 'number' || typeof v === 'bigint') {
          const lo = sum.lower_bound ? Buffer.from(sum.lower_bound) : null;
          const hi = sum.upper_bound ? Buffer.from(sum.upper_bound) : null;
          const read = (b) => (b.length === 4 ? BigInt(b.readInt32LE(0)) : b.readBigInt64LE(0));
          if (!lo || !hi || BigInt(v) < read(lo) || BigInt(v) > read(hi)) problems.push(`manifest list: ${m.manifest_path} field ${f.name} value ${v} outside its summary's bounds`);
        } else if (typeof v === 'string') {
          const lo = sum.lower_bound ? Buffer.from(sum.lower_bound).toString('utf8') : null;
          const hi = sum.upper_bound ? Buffer.from(sum.upper_bound).toString('utf8') : null;
          if (lo === null || hi === null || Buffer.compare(Buffer.from(v), Buffer.from(lo)) < 0 || Buffer.compare(Buffer.from(v), Buffer.from(hi)) > 0) problems.push(`manifest list: ${m.manifest_path} field ${f.name} value ${v} outside its summary's bounds`);
        }
      });
      out.data_files.push({
        spec_id: m.partition_spec_id,
        partition: tuple,
        path: e.data_file.file_path,
        content: e.data_file.content,
        sequence_number: String(e.sequence_number ?? m.sequence_number),
        equality_ids: e.data_file.equality_ids || null,
        record_count: Number(e.data_file.record_count),
        file_size_in_bytes: Number(e.data_file.file_size_in_bytes),
        split_offsets: (e.data_file.split_offsets || []).map(Number),
        bounds: {
          lower: mapOf(e.data_file.lower_bounds),
          upper: mapOf(e.data_file.upper_bounds),
          nulls: mapOf(e.data_file.null_value_counts),
          values: mapOf(e.data_file.value_counts),
        },
      });
    }
  }
}

// ---- icebird: the table's rows ----
const types = schema.fields.map((f) => (typeof f.type === 'string' ? f.type : JSON.stringify(f.type)));
if (out.data_files.length > 0) {
  try {
    const rows = await icebergRead({
      tableUrl: metadata.location,
      metadataFileName: path.basename(metadataPath),
    });
    out.icebird_rows = rows.map((r) => schema.fields.map((f, i) => canonIcebird(types[i], r[f.name])));
  } catch (e) {
    problems.push(`icebird: ${e.message}`);
  }
}

// Decodes an Iceberg single-value bound (binary form) to the canonical text DuckDB rows use.
function boundValue(type, buf) {
  const b = Buffer.from(buf);
  if (type === 'int' || type === 'date') return String(b.readInt32LE(0));
  // A file written before its column was promoted (int -> long, float -> double) keeps bounds of
  // the older type: 4 bytes, read as Java Iceberg's Conversions reads them.
  if (type === 'long' && b.length === 4) return String(b.readInt32LE(0));
  if (type === 'long' || type === 'timestamp' || type === 'timestamptz' || type === 'time') return b.readBigInt64LE(0).toString();
  if (type === 'double' && b.length === 4) return doubleBits(b.readFloatLE(0));
  if (type === 'double') return doubleBits(b.readDoubleLE(0));
  if (type === 'float') return doubleBits(b.readFloatLE(0));
  if (type === 'boolean') return b[0] ? 'true' : 'false';
  if (type === 'string') return b.toString('utf8');
  return null;  // decimals, binary: checked by parquet_check.mjs on generated files
}

// Compares a data file's manifest metrics with what DuckDB reads from the file: null and value
// counts, and bounds. Wrong bounds make engines skip files that hold matching rows.
function checkMetrics(file, rows) {
  const { lower, upper, nulls, values } = file.bounds;
  schema.fields.forEach((field, i) => {
    const type = types[i];
    const elem = listElement(type);
    if (elem !== null) {
      // As Java Iceberg: keyed by the element's id, counting the Parquet leaf's level entries (a
      // NULL or empty list is one, NULL as are NULL elements); no bounds for a repeated field.
      const id = field.type['element-id'];
      let entries = 0, present = 0;
      for (const r of rows) {
        const v = Object.values(r)[i];
        const items = v === null || v === undefined ? [] : v.items;
        entries += Math.max(1, items.length);
        present += items.filter((x) => x !== null && x !== undefined).length;
      }
      if (!values.has(id)) problems.push(`metrics: ${file.path} ${field.name} has no value_count for element id ${id}`);
      else if (Number(values.get(id)) !== entries) problems.push(`metrics: ${file.path} ${field.name} element value_count ${values.get(id)}, file has ${entries}`);
      if (nulls.has(id) && Number(nulls.get(id)) !== entries - present) problems.push(`metrics: ${file.path} ${field.name} element null_value_count ${nulls.get(id)}, file has ${entries - present}`);
      if (lower.has(id) || upper.has(id)) problems.push(`metrics: ${file.path} ${field.name} has bounds for its elements`);
      if (values.has(field.id) || nulls.has(field.id)) problems.push(`metrics: ${file.path} ${field.name} has metrics for the list field itself`);
      return;
    }
    const vals = rows.map((r) => Object.values(r)[i]).filter((v) => v !== null && v !== undefined);
    const nullCount = rows.length - vals.length;
    if (nulls.has(field.id) && Number(nulls.get(field.id)) !== nullCount) problems.push(`metrics: ${file.path} ${field.name} null_value_count ${nulls.get(field.id)}, file has ${nullCount}`);
    if (values.has(field.id) && Number(values.get(field.id)) !== rows.length) problems.push(`metrics: ${file.path} ${field.name} value_count ${values.get(field.id)}, file has ${rows.length}`);
    if (vals.length === 0) return;
    const lo = lower.has(field.id) ? boundValue(type, lower.get(field.id)) : undefined;
    const hi = upper.has(field.id) ? boundValue(type, upper.get(field.id)) : undefined;
    if (lo === null || hi === null) return;
    if (type === 'string') {
      const bytes = vals.map((v) => Buffer.from(String(v), 'utf8'));
      const min = bytes.reduce((a, b) => (Buffer.compare(a, b) <= 0 ? a : b));
      const max = bytes.reduce((a, b) => (Buffer.compare(a, b) >= 0 ? a : b));
      if (lo === undefined) problems.push(`metrics: ${file.path} ${field.name} has no lower bound`);
      else if (Buffer.compare(Buffer.from(lo, 'utf8'), min) > 0) problems.push(`metrics: ${file.path} ${field.name} lower bound ${JSON.stringify(lo)} is above the minimum`);
      if (hi !== undefined && Buffer.compare(Buffer.from(hi, 'utf8'), max) < 0) problems.push(`metrics: ${file.path} ${field.name} upper bound ${JSON.stringify(hi)} is below the maximum`);
      return;
    }
    const canon = vals.map((v) => canonDuck(type, v));
    const num = (c) => (c.startsWith('f:') ? new DataView(new BigUint64Array([BigInt('0x' + c.slice(2))]).buffer).getFloat64(0, true) : Number(c));
    let min, max;
    if (type === 'double' || type === 'float') {
      const finite = canon.map(num).filter((x) => !Number.isNaN(x));
      if (finite.length === 0) return;
      min = doubleBits(Math.min(...finite));
      max = doubleBits(Math.max(...finite));
      if (min === doubleBits(0) && finite.some((x) => Object.is(x, -0))) min = doubleBits(-0);
    } else if (type === 'boolean') {
      min = canon.includes('false') ? 'false' : 'true';
      max = canon.includes('true') ? 'true' : 'false';
    } else {
      const big = canon.map((c) => BigInt(c));
      min = big.reduce((a, b) => (a < b ? a : b)).toString();
      max = big.reduce((a, b) => (a > b ? a : b)).toString();
    }
    if (lo !== min) problems.push(`metrics: ${file.path} ${field.name} lower bound ${lo}, file minimum ${min}`);
    if (hi !== max) problems.push(`metrics: ${file.path} ${field.name} upper bound ${hi}, file maximum ${max}`);
  });
}

// ---- DuckDB: every data file ----
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
await conn.run('SET autoinstall_known_extensions=false; SET autoload_known_extensions=false;');
const q = async (sql) => (await conn.runAndReadAll(sql)).getRowObjects();
const lit = (s) => "'" + s.replaceAll("'", "''") + "'";
// The partition values DuckDB computes from a data file's rows must all equal the tuple its
// manifest entry carries (transforms DuckDB can compute: identity, year, month, day, hour,
// truncate of numbers and strings; bucket is Murmur3, checked against the spec's examples by
// ferry's unit tests).
async function checkPartition(f, p) {
  const spec = (metadata['partition-specs'] || []).find((s) => s['spec-id'] === f.spec_id);
  for (const field of spec ? spec.fields : []) {
    const source = schema.fields.find((x) => x.id === field['source-id']);
    if (!source) continue;
    const c = '"' + parquetName(source.name).replaceAll('"', '""') + '"';
    const t = field.transform;
    const type = typeof source.type === 'string' ? source.type : '';
    const isTime = type === 'timestamp' || type === 'timestamptz';
    const days = type === 'date' ? `(${c} - DATE '1970-01-01')` : `CAST(floor(epoch_us(${c}) / 86400000000) AS BIGINT)`;
    const ymd = (part) => `date_part('${part}', ${type === 'date' ? c : `make_date(1970, 1, 1) + CAST(${days} AS INTEGER)`})`;
    let expr = null;
    if (t === 'identity') expr = type === 'date' ? days : isTime ? `epoch_us(${c})` : c;
    else if (t === 'day') expr = days;
    else if (t === 'year') expr = `${ymd('year')} - 1970`;
    else if (t === 'month') expr = `(${ymd('year')} - 1970) * 12 + ${ymd('month')} - 1`;
    else if (t === 'hour') expr = `CAST(floor(epoch_us(${c}) / 3600000000) AS BIGINT)`;
    else if (t.startsWith('truncate[')) {
      const w = Number(t.slice(9, -1));
      expr = type === 'string' ? `left(${c}, ${w})` : `${c} - (((${c} % ${w}) + ${w}) % ${w})`;
    }
    if (expr === null || (t === 'identity' && !['int', 'long', 'string', 'date', 'timestamp', 'timestamptz', 'boolean'].includes(type))) continue;
    const seen = await q(`SELECT DISTINCT CAST(${expr} AS VARCHAR) AS v FROM read_parquet(${lit(p)})`);
    const want = f.partition[field.name];
    let values = seen.map((r) => (r.v === null ? null : String(r.v)));
    if (type === 'boolean') values = values.map((v) => (v === null ? null : v === 'true' ? 'true' : 'false'));
    if (values.length !== 1 || values[0] !== want) problems.push(`partition: ${p} is in ${field.name}=${want} but its rows give ${JSON.stringify(values)}`);
  }
}

// Delete files, applied by hand the way the spec says: an equality delete removes rows with the
// same key values from data files with a smaller data sequence number; a position delete removes
// the row at (file, pos) from data files with a sequence number up to its own.
const equalityDeletes = [];
const positionDeletes = [];
for (const f of out.data_files.filter((d) => d.content !== 0)) {
  const p = localPath(f.path);
  try {
    if (f.content === 2) {
      const fields = f.equality_ids.map((id) => schema.fields.find((x) => x.id === Number(id)));
      const exprs = fields.map((field) => duckExpr(parquetName(field.name), types[schema.fields.indexOf(field)])).join(', ');
      const rows = await q(`SELECT ${exprs} FROM read_parquet(${lit(p)})`);
      const keys = new Set(rows.map((r) => JSON.stringify(Object.values(r).map((v, i) => canonDuck(types[schema.fields.indexOf(fields[i])], v)))));
      equalityDeletes.push({ seq: BigInt(f.sequence_number), idx: fields.map((x) => schema.fields.indexOf(x)), keys });
    } else {
      const rows = await q(`SELECT file_path, pos FROM read_parquet(${lit(p)})`);
      positionDeletes.push({ seq: BigInt(f.sequence_number), rows: new Set(rows.map((r) => r.file_path + '#' + r.pos)) });
    }
  } catch (e) {
    problems.push(`duckdb: delete file ${p}: ${e.message}`);
  }
}
out.deleted_rows = 0;

for (const f of out.data_files.filter((d) => d.content === 0)) {
  const p = localPath(f.path);
  try {
    const actual = fs.statSync(p).size;
    if (actual !== f.file_size_in_bytes) problems.push(`data file ${p}: manifest says ${f.file_size_in_bytes} bytes, file has ${actual}`);
    const meta = await q(`SELECT num_rows FROM parquet_file_metadata(${lit(p)})`);
    if (Number(meta[0].num_rows) !== f.record_count) problems.push(`data file ${p}: manifest says ${f.record_count} rows, Parquet footer ${meta[0].num_rows}`);
    // Columns are resolved by field id, as the spec says: a field added after the file was
    // written reads as NULL; every column of the file must carry a field id the table knows.
    // A list's repeated middle group ("list") carries no field id, as the LIST spec has it.
    const sch = (await q(`SELECT name, field_id, repetition_type FROM parquet_schema(${lit(p)})`))
      .slice(1).filter((el) => !(el.name === 'list' && String(el.repetition_type) === 'REPEATED'));
    const known = new Set(metadata.schemas.flatMap((s) => s.fields.flatMap((f) => (
      typeof f.type === 'object' && f.type.type === 'list' ? [f.id, f.type['element-id']] : [f.id]))));
    for (const el of sch) {
      if (el.field_id === null || el.field_id === undefined) problems.push(`duckdb: ${p} column ${el.name} has no field_id`);
      else if (!known.has(Number(el.field_id))) problems.push(`duckdb: ${p} column ${el.name} has field_id ${el.field_id}, unknown to the table`);
    }
    const columnOf = new Map(sch.map((el) => [Number(el.field_id), el.name]));
    for (const field of schema.fields) {
      const name = columnOf.get(field.id);
      if (name !== undefined && name !== parquetName(field.name)) problems.push(`duckdb: ${p} field ${field.id} is named ${name}, expected ${parquetName(field.name)}`);
    }
    const nulls = await q(`SELECT path_in_schema, sum(stats_null_count) AS n FROM parquet_metadata(${lit(p)}) GROUP BY path_in_schema`);
    const exprs = schema.fields
      .map((field, i) => (columnOf.has(field.id) ? duckExpr(columnOf.get(field.id), types[i]) : 'NULL'))
      .join(', ');
    const withPos = await q(`SELECT ${exprs}, file_row_number AS __pos FROM read_parquet(${lit(p)}, file_row_number = true)`);
    const rows = withPos.map((r) => {
      const { __pos, ...rest } = r;
      return rest;
    });
    const seq = BigInt(f.sequence_number);
    withPos.forEach((r, n) => {
      const values = Object.values(rows[n]).map((v, i) => canonDuck(types[i], v));
      const pos = String(r.__pos);
      if (positionDeletes.some((d) => d.seq >= seq && d.rows.has(f.path + '#' + pos))) return out.deleted_rows++;
      if (equalityDeletes.some((d) => d.seq > seq && d.keys.has(JSON.stringify(d.idx.map((i) => values[i]))))) return out.deleted_rows++;
      out.duckdb_rows.push(values);
    });
    checkMetrics(f, rows);
    await checkPartition(f, p);
    schema.fields.forEach((field, i) => {
      const counted = rows.filter((r) => Object.values(r)[i] === null).length;
      const stat = nulls.find((n) => n.path_in_schema === parquetName(field.name));
      if (stat && Number(stat.n) !== counted) problems.push(`duckdb: ${p} column ${field.name} null_count statistic ${stat.n}, rows have ${counted}`);
    });
  } catch (e) {
    problems.push(`duckdb: ${p}: ${e.message}`);
  }
}

for (const f of out.data_files) delete f.bounds;
process.stdout.write(JSON.stringify(out, (k, v) => (typeof v === 'bigint' ? v.toString() : v)) + '\n');
