// Writes a partitioned Iceberg v2 table the way another engine would, with no ferry code: DuckDB
// writes the Parquet data files (field ids set by COPY ... FIELD_IDS), avsc the manifest and the
// manifest list (with the partition tuples and field summaries), this script the metadata JSON.
// Tests point ferry at the table to check that it appends to a table it did not make, by that
// table's spec.
//
// Usage: node make_partitioned_table.mjs <table folder> <rows.json>
//   rows.json: [[id, "YYYY-MM-DD HH:MM:SS", region or null, payload or null], ...]
// The table (schema: id long required (the identifier field), ts timestamp required, region
// string, payload string) is partitioned by day(ts) and identity(region), sorted by id, with one
// snapshot whose data files are one per partition. Prints the metadata file's path.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import avro from 'avsc';
import { DuckDBInstance } from '@duckdb/node-api';

const [tableDir, rowsPath] = process.argv.slice(2);
if (!tableDir || !rowsPath) {
  console.error('usage: node make_partitioned_table.mjs <table folder> <rows.json>');
  process.exit(2);
}
const location = 'file://' + path.resolve(tableDir);
fs.mkdirSync(path.join(tableDir, 'metadata'), { recursive: true });
fs.mkdirSync(path.join(tableDir, 'data'), { recursive: true });

const schema = {
  type: 'struct',
  'schema-id': 0,
  'identifier-field-ids': [1],
  fields: [
    { id: 1, name: 'id', required: true, type: 'long' },
    { id: 2, name: 'ts', required: true, type: 'timestamp' },
    { id: 3, name: 'region', required: false, type: 'string' },
    { id: 4, name: 'payload', required: false, type: 'string' },
  ],
};
const specFields = [
  { 'source-id': 2, 'field-id': 1000, name: 'ts_day', transform: 'day' },
  { 'source-id': 3, 'field-id': 1001, name: 'region', transform: 'identity' },
];
const snapshotId = 4711000000001;
const now = Date.now();

// ---- data files: one per (day, region), written by DuckDB ----
const rows = JSON.parse(fs.readFileSync(rowsPath, 'utf8'));
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
const q = async (sql) => (await conn.runAndReadAll(sql)).getRowObjectsJS();
const lit = (v) => (v === null ? 'NULL' : `'${String(v).replaceAll("'", "''")}'`);
await q('CREATE TABLE src (id BIGINT NOT NULL, ts TIMESTAMP NOT NULL, region VARCHAR, payload VARCHAR)');
for (let i = 0; i < rows.length; i += 500) {
  const values = rows.slice(i, i + 500)
    .map(([id, ts, region, payload]) => `(${Number(id)}, TIMESTAMP ${lit(ts)}, ${lit(region)}, ${lit(payload)})`);
  await q(`INSERT INTO src VALUES ${values.join(', ')}`);
}
const parts = await q(`SELECT DISTINCT datediff('day', DATE '1970-01-01', ts::DATE)::INTEGER AS day, region
                       FROM src ORDER BY day, region NULLS FIRST`);
const entries = [];
for (const [n, p] of parts.entries()) {
  const day = new Date(p.day * 86400000).toISOString().slice(0, 10);
  const folder = `ts_day=${day}/region=${p.region === null ? 'null' : encodeURIComponent(p.region)}`;
  fs.mkdirSync(path.join(tableDir, 'data', folder), { recursive: true });
  const file = path.join(path.resolve(tableDir), 'data', folder, `00000-${n}-${crypto.randomUUID()}.parquet`);
  const where = `datediff('day', DATE '1970-01-01', ts::DATE) = ${p.day} AND region IS NOT DISTINCT FROM ${lit(p.region)}`;
  await q(`COPY (SELECT id, ts, region, payload FROM src WHERE ${where} ORDER BY id)
           TO ${lit(file)} (FORMAT parquet, COMPRESSION snappy,
                            FIELD_IDS {id: 1, ts: 2, region: 3, payload: 4})`);
  // Metrics as Java Iceberg writes them: counts, and bounds in the single-value serialization
  // (long and timestamp: 8 bytes little-endian; string: its UTF-8 bytes, here short).
  const [st] = await q(`SELECT count(*)::INTEGER AS n, min(id)::VARCHAR AS id_lo, max(id)::VARCHAR AS id_hi,
      epoch_us(min(ts))::VARCHAR AS ts_lo, epoch_us(max(ts))::VARCHAR AS ts_hi,
      min(region) AS region_lo, max(region) AS region_hi, count(*) - count(region) AS region_nulls,
      min(payload) AS payload_lo, max(payload) AS payload_hi, count(*) - count(payload) AS payload_nulls
      FROM src WHERE ${where}`);
  const count = st.n;
  const le64 = (v) => { const b = Buffer.alloc(8); b.writeBigInt64LE(BigInt(v)); return b; };
  const bounds = (which) => [
    [1, le64(st[`id_${which}`])], [2, le64(st[`ts_${which}`])],
    [3, st[`region_${which}`]], [4, st[`payload_${which}`]],
  ].filter(([, v]) => v !== null)
    .map(([key, v]) => ({ key, value: Buffer.isBuffer(v) ? v : Buffer.from(v, 'utf8') }));
  entries.push({
    status: 1,
    snapshot_id: snapshotId,
    sequence_number: null,
    file_sequence_number: null,
    data_file: {
      content: 0,
      file_path: 'file://' + file,
      file_format: 'PARQUET',
      partition: { ts_day: p.day, region: p.region },
      record_count: count,
      file_size_in_bytes: fs.statSync(file).size,
      column_sizes: null,
      value_counts: [1, 2, 3, 4].map((k) => ({ key: k, value: count })),
      null_value_counts: [[1, 0], [2, 0], [3, Number(st.region_nulls)], [4, Number(st.payload_nulls)]]
        .map(([key, value]) => ({ key, value })),
      nan_value_counts: null,
      lower_bounds: bounds('lo'),
      upper_bounds: bounds('hi'),
      key_metadata: null,
      split_offsets: null,
      equality_ids: null,
      sort_order_id: 1,
      referenced_data_file: null,
    },
  });
}
conn.closeSync?.();

// ---- the manifest (avsc) ----
const optional = (type, id, name) => ({ name, type: ['null', type], default: null, 'field-id': id });
const intMap = (name, k, v, type) => ({
  type: 'array', logicalType: 'map',
  items: { type: 'record', name, fields: [{ name: 'key', type: 'int', 'field-id': k }, { name: 'value', type, 'field-id': v }] },
});
const entrySchema = {
  type: 'record', name: 'manifest_entry',
  fields: [
    { name: 'status', type: 'int', 'field-id': 0 },
    optional('long', 1, 'snapshot_id'),
    optional('long', 3, 'sequence_number'),
    optional('long', 4, 'file_sequence_number'),
    {
      name: 'data_file', 'field-id': 2,
      type: {
        type: 'record', name: 'r2',
        fields: [
          { name: 'content', type: 'int', 'field-id': 134 },
          { name: 'file_path', type: 'string', 'field-id': 100 },
          { name: 'file_format', type: 'string', 'field-id': 101 },
          {
            name: 'partition', 'field-id': 102,
            type: {
              type: 'record', name: 'r102',
              fields: [
                optional({ type: 'int', logicalType: 'date' }, 1000, 'ts_day'),
                optional('string', 1001, 'region'),
              ],
            },
          },
          { name: 'record_count', type: 'long', 'field-id': 103 },
          { name: 'file_size_in_bytes', type: 'long', 'field-id': 104 },
          optional(intMap('k117_v118', 117, 118, 'long'), 108, 'column_sizes'),
          optional(intMap('k119_v120', 119, 120, 'long'), 109, 'value_counts'),
          optional(intMap('k121_v122', 121, 122, 'long'), 110, 'null_value_counts'),
          optional(intMap('k138_v139', 138, 139, 'long'), 137, 'nan_value_counts'),
          optional(intMap('k126_v127', 126, 127, 'bytes'), 125, 'lower_bounds'),
          optional(intMap('k129_v130', 129, 130, 'bytes'), 128, 'upper_bounds'),
          optional('bytes', 131, 'key_metadata'),
          optional({ type: 'array', items: 'long', 'element-id': 133 }, 132, 'split_offsets'),
          optional({ type: 'array', items: 'int', 'element-id': 136 }, 135, 'equality_ids'),
          optional('int', 140, 'sort_order_id'),
          optional('string', 143, 'referenced_data_file'),
        ],
      },
    },
  ],
};

function writeAvro(file, writerSchema, records, metadata) {
  return new Promise((resolve, reject) => {
    const enc = new avro.streams.BlockEncoder(writerSchema, { codec: 'null', metadata, wrapUnions: false });
    const out = fs.createWriteStream(file);
    enc.on('error', reject);
    out.on('error', reject);
    out.on('finish', resolve);
    enc.pipe(out);
    for (const r of records) enc.write(r);
    enc.end();
  });
}
// avsc writes the header metadata as given (Buffers); the schema as the plain object, so that
// its "field-id" attributes survive.
const meta = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Buffer.from(v, 'utf8')]));
const manifestPath = path.join(path.resolve(tableDir), 'metadata', `${crypto.randomUUID()}-m0.avro`);
await writeAvro(manifestPath, entrySchema, entries, meta({
  schema: JSON.stringify(schema),
  'schema-id': '0',
  'partition-spec': JSON.stringify(specFields),
  'partition-spec-id': '0',
  'format-version': '2',
  content: 'data',
}));

// ---- the manifest list, with each partition field's summary ----
const le32 = (n) => { const b = Buffer.alloc(4); b.writeInt32LE(n); return b; };
const days = entries.map((e) => e.data_file.partition.ts_day);
const regions = entries.map((e) => e.data_file.partition.region).filter((r) => r !== null);
const bytesCmp = (a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
regions.sort(bytesCmp);
const totalRows = entries.reduce((s, e) => s + e.data_file.record_count, 0);
const listSchema = {
  type: 'record', name: 'manifest_file',
  fields: [
    { name: 'manifest_path', type: 'string', 'field-id': 500 },
    { name: 'manifest_length', type: 'long', 'field-id': 501 },
    { name: 'partition_spec_id', type: 'int', 'field-id': 502 },
    { name: 'content', type: 'int', 'field-id': 517 },
    { name: 'sequence_number', type: 'long', 'field-id': 515 },
    { name: 'min_sequence_number', type: 'long', 'field-id': 516 },
    { name: 'added_snapshot_id', type: 'long', 'field-id': 503 },
    { name: 'added_files_count', type: 'int', 'field-id': 504 },
    { name: 'existing_files_count', type: 'int', 'field-id': 505 },
    { name: 'deleted_files_count', type: 'int', 'field-id': 506 },
    { name: 'added_rows_count', type: 'long', 'field-id': 512 },
    { name: 'existing_rows_count', type: 'long', 'field-id': 513 },
    { name: 'deleted_rows_count', type: 'long', 'field-id': 514 },
    optional({
      type: 'array', 'element-id': 508,
      items: {
        type: 'record', name: 'r508',
        fields: [
          { name: 'contains_null', type: 'boolean', 'field-id': 509 },
          optional('boolean', 518, 'contains_nan'),
          optional('bytes', 510, 'lower_bound'),
          optional('bytes', 511, 'upper_bound'),
        ],
      },
    }, 507, 'partitions'),
    optional('bytes', 519, 'key_metadata'),
  ],
};
const listPath = path.join(path.resolve(tableDir), 'metadata',
  `snap-${snapshotId}-1-${crypto.randomUUID()}.avro`);
await writeAvro(listPath, listSchema, [{
  manifest_path: 'file://' + manifestPath,
  manifest_length: fs.statSync(manifestPath).size,
  partition_spec_id: 0,
  content: 0,
  sequence_number: 1,
  min_sequence_number: 1,
  added_snapshot_id: snapshotId,
  added_files_count: entries.length,
  existing_files_count: 0,
  deleted_files_count: 0,
  added_rows_count: totalRows,
  existing_rows_count: 0,
  deleted_rows_count: 0,
  partitions: [
    { contains_null: false, contains_nan: null, lower_bound: le32(Math.min(...days)), upper_bound: le32(Math.max(...days)) },
    {
      contains_null: regions.length < entries.length, contains_nan: null,
      lower_bound: regions.length ? Buffer.from(regions[0], 'utf8') : null,
      upper_bound: regions.length ? Buffer.from(regions[regions.length - 1], 'utf8') : null,
    },
  ],
  key_metadata: null,
}], meta({
  'snapshot-id': String(snapshotId),
  'parent-snapshot-id': 'null',
  'sequence-number': '1',
  'format-version': '2',
}));

// ---- the metadata JSON ----
const metadata = {
  'format-version': 2,
  'table-uuid': crypto.randomUUID(),
  location,
  'last-sequence-number': 1,
  'last-updated-ms': now,
  'last-column-id': 4,
  'current-schema-id': 0,
  schemas: [schema],
  'default-spec-id': 0,
  'partition-specs': [{ 'spec-id': 0, fields: specFields }],
  'last-partition-id': 1001,
  'default-sort-order-id': 1,
  'sort-orders': [
    { 'order-id': 0, fields: [] },
    { 'order-id': 1, fields: [{ transform: 'identity', 'source-id': 1, direction: 'asc', 'null-order': 'nulls-first' }] },
  ],
  properties: { 'write.format.default': 'parquet', 'write.parquet.compression-codec': 'snappy', owner: 'fixture' },
  'current-snapshot-id': snapshotId,
  refs: { main: { 'snapshot-id': snapshotId, type: 'branch' } },
  snapshots: [{
    'sequence-number': 1,
    'snapshot-id': snapshotId,
    'timestamp-ms': now,
    summary: {
      operation: 'append',
      'added-data-files': String(entries.length),
      'added-records': String(totalRows),
      'changed-partition-count': String(entries.length),
      'total-records': String(totalRows),
      'total-data-files': String(entries.length),
      'total-delete-files': '0',
      'total-position-deletes': '0',
      'total-equality-deletes': '0',
    },
    'manifest-list': 'file://' + listPath,
    'schema-id': 0,
  }],
  statistics: [],
  'snapshot-log': [{ 'timestamp-ms': now, 'snapshot-id': snapshotId }],
  'metadata-log': [],
};
const metadataPath = path.join(path.resolve(tableDir), 'metadata', `00000-${crypto.randomUUID()}.metadata.json`);
fs.writeFileSync(metadataPath, JSON.stringify(metadata, null, 2));
console.log(metadataPath);
