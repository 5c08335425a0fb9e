// Checks a Parquet file written by ferry with three independent readers: DuckDB, hyparquet and
// parquet-wasm (arrow-rs, read through apache-arrow). Exits 0 with a one-line summary when all
// three agree with the expectation, 1 (printing every difference) otherwise, 2 on usage errors.
//
// Usage: node parquet_check.mjs <file.parquet> <expected.json>
//
// expected.json:
//   {
//     "columns": [{"name": "l", "field_id": 3, "type": "long", "required": false}, ...],
//     "rows": [[...one JSON value per column...], ...],
//     "codec": "ZSTD" | "SNAPPY" | "UNCOMPRESSED",   (optional)
//     "row_groups": 3,                               (optional)
//     "dictionary": "on" | "off" | "fallback"        (optional)
//   }
// "dictionary" is what every non-boolean column's chunks must show (booleans never have one):
//   on        a dictionary page before the data pages, RLE_DICTIONARY data pages only
//   off       no dictionary page, PLAIN data pages only
//   fallback  a dictionary page; RLE_DICTIONARY then PLAIN data pages (in at least one chunk)
// "type" is the Iceberg type string (boolean, int, long, float, double, decimal(P,S), date, time,
// timestamp, timestamptz, string, binary, uuid), or "list" with "element_type" (one of those),
// "element_id" and "element_required": a 3-level LIST whose value in "rows" is null or an array
// of element values. For a list, statistics, counts and encodings are checked on its one leaf
// (the element): num_values counts level entries (one per element, one per NULL or empty list),
// null_count the entries without an element value. Value encoding in "rows" (null is NULL):
//   boolean                       true / false
//   int                           JSON number
//   long                          decimal string ("-9223372036854775808"): beyond 2^53
//   float, double                 JSON number, or "NaN", "Infinity", "-Infinity", "-0"
//   decimal(P,S)                  the unscaled integer as a decimal string ("-12345" = -123.45 at S=2)
//   date                          JSON number: days since 1970-01-01
//   time                          decimal string: microseconds since midnight
//   timestamp, timestamptz        decimal string: microseconds since 1970-01-01 00:00 (UTC)
//   string                        JSON string
//   binary                        lowercase hex string
//   uuid                          lowercase hex string of the 16 bytes, no dashes
//
// What is checked:
//   DuckDB       read_parquet values and column types; parquet_schema() field ids, repetition and
//                logical types; parquet_metadata() codec, per-chunk null counts, num_values and
//                min/max statistics (ints, dates, times, timestamps, decimals, strings, booleans);
//                parquet_file_metadata() row count and created_by; parquet_metadata() encodings,
//                dictionary_page_offset and data_page_offset against "dictionary".
//   hyparquet    values, field ids, repetition, num_rows, float/double min/max statistics (DuckDB
//                does not show infinite ones); per chunk, encodings, encoding_stats and
//                dictionary_page_offset agree with each other and with "dictionary".
//   parquet-wasm values through Arrow IPC, Arrow types and PARQUET:field_id metadata.
import fs from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { readParquet } from 'parquet-wasm/node';
import { tableFromIPC } from 'apache-arrow';

if (process.argv.length !== 4) {
  console.error('usage: node parquet_check.mjs <file.parquet> <expected.json>');
  process.exit(2);
}
const [file, expectedPath] = process.argv.slice(2);
const expected = JSON.parse(fs.readFileSync(expectedPath, 'utf8'));
const columns = expected.columns;
const rows = expected.rows;
const fileBytes = fs.readFileSync(file);

const problems = [];
const MAX_PROBLEMS = 60;
function problem(msg) {
  if (problems.length < MAX_PROBLEMS) problems.push(msg);
  else if (problems.length === MAX_PROBLEMS) problems.push('... more differences omitted');
}

// ---- canonical form: every value becomes a string (or null) so that readers compare exactly ----
function decimalScale(type) {
  const m = /^decimal\((\d+),\s*(\d+)\)$/.exec(type);
  return m ? { precision: Number(m[1]), scale: Number(m[2]) } : null;
}
function floatCanon(x, single) {
  if (x === null || x === undefined) return null;
  let n;
  if (typeof x === 'string') {
    n = x === 'NaN' ? NaN : x === 'Infinity' ? Infinity : x === '-Infinity' ? -Infinity : x === '-0' ? -0 : Number(x);
  } else {
    n = Number(x);
  }
  if (single) n = Math.fround(n);
  if (Number.isNaN(n)) return 'NaN';
  if (Object.is(n, -0)) return '-0';
  return String(n);
}
function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}
function shorten(v) {
  if (v === null || v === undefined) return String(v);
  const s = String(v);
  return s.length > 80 ? `${s.slice(0, 60)}...(${s.length} chars)` : s;
}
// Expected JSON value -> canonical string.
function canonExpected(type, v) {
  if (v === null) return null;
  if (type === 'float') return floatCanon(v, true);
  if (type === 'double') return floatCanon(v, false);
  if (type === 'boolean') return String(v);
  return String(v);
}
// "-123.45" (DuckDB's decimal text) -> unscaled "-12345".
function decimalTextToUnscaled(text, scale) {
  let s = String(text);
  const neg = s.startsWith('-');
  if (neg) s = s.slice(1);
  let [int, frac = ''] = s.split('.');
  frac = frac.padEnd(scale, '0');
  const v = BigInt(int + frac);
  return String(neg ? -v : v);
}
function int128FromWords(words) {
  let v = 0n;
  for (let k = 3; k >= 0; k--) v = (v << 32n) | BigInt(words[k] >>> 0);
  if (v >= 1n << 127n) v -= 1n << 128n;
  return v;
}

// ---- lists ----
const isList = (col) => col.type === 'list';
// The element of a list column as a column of its own (for types, canonical forms and stats).
const elementOf = (col) => ({ name: 'element', type: col.element_type, field_id: col.element_id, required: col.element_required });
const leafOf = (col) => (isList(col) ? elementOf(col) : col);
// A list column's values as its leaf sees them: each element, and null for a NULL or empty list.
function leafValues(col, values) {
  if (!isList(col)) return values;
  const out = [];
  for (const v of values) {
    if (v === null || v.length === 0) out.push(null);
    else out.push(...v);
  }
  return out;
}
// A canonical list: the JSON array of its elements' canonical values.
const canonList = (v, canonElement) => (v === null || v === undefined ? null : JSON.stringify(Array.from(v, canonElement)));

// ---- compare one reader's column-major values with the expectation ----
function compareValues(reader, got) {
  let diffs = 0;
  for (let c = 0; c < columns.length; c++) {
    const col = columns[c];
    const values = got[c];
    if (!values) {
      problem(`${reader}: column ${col.name} missing`);
      continue;
    }
    if (values.length !== rows.length) {
      problem(`${reader}: column ${col.name} has ${values.length} values, expected ${rows.length}`);
      continue;
    }
    for (let r = 0; r < rows.length; r++) {
      const want = isList(col)
        ? canonList(rows[r][c], (e) => canonExpected(col.element_type, e))
        : canonExpected(col.type, rows[r][c]);
      const have = values[r];
      if (want !== have) {
        diffs++;
        problem(`${reader}: row ${r} column ${col.name} (${col.type}): got ${shorten(have)}, expected ${shorten(want)}`);
      }
    }
  }
  return diffs;
}

// ---- DuckDB ----
const duckTypes = {
  boolean: 'BOOLEAN', int: 'INTEGER', long: 'BIGINT', float: 'FLOAT', double: 'DOUBLE', date: 'DATE',
  time: 'TIME', timestamp: 'TIMESTAMP', timestamptz: 'TIMESTAMP WITH TIME ZONE', string: 'VARCHAR',
  binary: 'BLOB', uuid: 'UUID',
};
function duckType(type, col) {
  if (type === 'list') return `${duckType(col.element_type)}[]`;
  const d = decimalScale(type);
  return d ? `DECIMAL(${d.precision},${d.scale})` : duckTypes[type];
}
function quoteIdent(name) {
  return `"${name.replaceAll('"', '""')}"`;
}
function duckProjection(col, expr) {
  if (isList(col)) return `list_transform(${quoteIdent(col.name)}, x -> ${duckProjection(elementOf(col), 'x')})`;
  const q = expr ?? quoteIdent(col.name);
  if (decimalScale(col.type)) return `CAST(${q} AS VARCHAR)`;
  switch (col.type) {
    case 'long': return `CAST(${q} AS VARCHAR)`;
    case 'date': return `CAST(datediff('day', DATE '1970-01-01', ${q}) AS VARCHAR)`;
    case 'time': return `CAST(datediff('microsecond', TIME '00:00:00', ${q}) AS VARCHAR)`;
    case 'timestamp':
    case 'timestamptz': return `CAST(epoch_us(${q}) AS VARCHAR)`;
    case 'binary': return `lower(hex(${q}))`;
    case 'uuid': return `replace(CAST(${q} AS VARCHAR), '-', '')`;
    default: return q;
  }
}
function duckCanon(col, v) {
  if (v === null || v === undefined) return null;
  if (isList(col)) return canonList(v, (e) => duckCanon(elementOf(col), e));
  const d = decimalScale(col.type);
  if (d) return decimalTextToUnscaled(v, d.scale);
  if (col.type === 'float') return floatCanon(v, true);
  if (col.type === 'double') return floatCanon(v, false);
  return String(v);
}
// DuckDB's stats text -> canonical, for the types whose stats we check there.
function duckStatCanon(col, text) {
  if (text === null || text === undefined) return null;
  const d = decimalScale(col.type);
  if (d) return decimalTextToUnscaled(text, d.scale);
  return String(text);
}

async function checkDuckDB() {
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  await conn.run('SET autoinstall_known_extensions=false; SET autoload_known_extensions=false;');
  const path = file.replaceAll("'", "''");
  const before = problems.length;

  // Column types.
  const described = (await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet('${path}')`)).getRowObjectsJS();
  if (described.length !== columns.length) problem(`duckdb: ${described.length} columns, expected ${columns.length}`);
  columns.forEach((col, c) => {
    const d = described[c];
    if (!d) return;
    if (d.column_name !== col.name) problem(`duckdb: column ${c} is named ${d.column_name}, expected ${col.name}`);
    if (d.column_type !== duckType(col.type, col)) problem(`duckdb: column ${col.name} has type ${d.column_type}, expected ${duckType(col.type, col)}`);
  });

  // Values, converted to canonical text in SQL where JS numbers would lose precision.
  const sql = `SELECT ${columns.map((col) => duckProjection(col)).join(', ')} FROM read_parquet('${path}')`;
  const valueRows = (await conn.runAndReadAll(sql)).getRowsJS();
  const got = columns.map((col, c) => valueRows.map((row) => duckCanon(col, row[c])));
  compareValues('duckdb', got);

  // Schema: field ids, repetition, logical types.
  const schema = (await conn.runAndReadAll(
    `SELECT name, type, type_length, repetition_type, converted_type, field_id, logical_type FROM parquet_schema('${path}')`)).getRowObjectsJS();
  const elements = schema.slice(1);
  let at = 0;
  columns.forEach((outer) => {
    let col = outer;
    if (isList(outer)) {
      // <repetition> group <name> (LIST) { repeated group list { <repetition> element } }
      const [g, mid] = [elements[at], elements[at + 1]];
      at += 2;
      if (!g || !mid) return problem(`duckdb: parquet_schema has no list group for ${outer.name}`);
      if (g.name !== outer.name) problem(`duckdb: list group ${g.name}, expected ${outer.name}`);
      if (Number(g.field_id) !== outer.field_id) problem(`duckdb: ${outer.name} field_id ${g.field_id}, expected ${outer.field_id}`);
      const grep = outer.required ? 'REQUIRED' : 'OPTIONAL';
      if (g.repetition_type !== grep) problem(`duckdb: ${outer.name} repetition ${g.repetition_type}, expected ${grep}`);
      if (g.converted_type !== 'LIST') problem(`duckdb: ${outer.name} converted type ${g.converted_type}, expected LIST`);
      if (mid.name !== 'list' || mid.repetition_type !== 'REPEATED') problem(`duckdb: ${outer.name} middle group ${mid.name} ${mid.repetition_type}`);
      col = elementOf(outer);
    }
    const s = elements[at++];
    if (!s) return problem(`duckdb: parquet_schema has no element for ${col.name}`);
    if (s.name !== col.name) problem(`duckdb: schema element ${at - 1} is ${s.name}, expected ${col.name}`);
    if (Number(s.field_id) !== col.field_id) problem(`duckdb: ${col.name} field_id ${s.field_id}, expected ${col.field_id}`);
    const rep = col.required ? 'REQUIRED' : 'OPTIONAL';
    if (s.repetition_type !== rep) problem(`duckdb: ${col.name} repetition ${s.repetition_type}, expected ${rep}`);
    const lt = String(s.logical_type ?? '');
    const needs = {
      string: 'StringType', date: 'DateType', uuid: 'UUIDType', time: 'TimeType(isAdjustedToUTC=0',
      timestamp: 'TimestampType(isAdjustedToUTC=0', timestamptz: 'TimestampType(isAdjustedToUTC=1',
    }[col.type];
    if (needs && !lt.includes(needs)) problem(`duckdb: ${col.name} logical type '${lt}', expected ${needs}`);
    if ((col.type === 'time' || col.type.startsWith('timestamp')) && !lt.includes('MICROS=MicroSeconds()')) {
      problem(`duckdb: ${col.name} logical type '${lt}' is not MICROS`);
    }
    const d = decimalScale(col.type);
    if (d && !lt.includes(`DecimalType(scale=${d.scale}, precision=${d.precision})`)) {
      problem(`duckdb: ${col.name} logical type '${lt}', expected decimal(${d.precision},${d.scale})`);
    }
  });

  // Row groups: codec, counts, statistics.
  const meta = (await conn.runAndReadAll(
    `SELECT row_group_id, row_group_num_rows, column_id, path_in_schema, num_values, compression,
            stats_null_count, stats_min_value, stats_max_value
       FROM parquet_metadata('${path}') ORDER BY row_group_id, column_id`)).getRowObjectsJS();
  const groups = new Set(meta.map((m) => Number(m.row_group_id)));
  if (expected.row_groups !== undefined && groups.size !== expected.row_groups) {
    problem(`duckdb: ${groups.size} row groups, expected ${expected.row_groups}`);
  }
  // Row ranges of the row groups, in order.
  const groupRows = [];
  for (const m of meta) if (Number(m.column_id) === 0) groupRows.push(Number(m.row_group_num_rows));
  const totalRows = groupRows.reduce((a, b) => a + b, 0);
  if (totalRows !== rows.length) problem(`duckdb: row groups hold ${totalRows} rows, expected ${rows.length}`);
  const statTypes = new Set(['boolean', 'int', 'long', 'date', 'time', 'timestamp', 'timestamptz', 'string']);
  for (const m of meta) {
    const c = Number(m.column_id);
    if (!columns[c]) continue;
    const col = leafOf(columns[c]);
    const g = Number(m.row_group_id);
    if (expected.codec && m.compression !== expected.codec) {
      problem(`duckdb: row group ${g} column ${col.name} codec ${m.compression}, expected ${expected.codec}`);
    }
    const first = groupRows.slice(0, g).reduce((a, b) => a + b, 0);
    const slice = leafValues(columns[c], rows.slice(first, first + groupRows[g]).map((r) => r[c]));
    if (Number(m.num_values) !== slice.length) problem(`duckdb: rg ${g} ${col.name} num_values ${m.num_values}, expected ${slice.length}`);
    const nulls = slice.filter((v) => v === null).length;
    if (Number(m.stats_null_count) !== nulls) problem(`duckdb: rg ${g} ${col.name} null_count ${m.stats_null_count}, expected ${nulls}`);
    if (!statTypes.has(col.type) && !decimalScale(col.type)) continue;
    const present = slice.filter((v) => v !== null);
    let want = [null, null];
    if (present.length > 0) {
      if (col.type === 'string') {
        const sorted = present.map((s) => Buffer.from(s, 'utf8')).sort(Buffer.compare);
        want = [sorted[0].toString('utf8'), sorted[sorted.length - 1].toString('utf8')];
      } else if (col.type === 'boolean') {
        want = [String(!present.includes(false)), String(present.includes(true))];
      } else {
        const big = present.map((v) => BigInt(v));
        const mn = big.reduce((a, b) => (b < a ? b : a));
        const mx = big.reduce((a, b) => (b > a ? b : a));
        want = [String(mn), String(mx)];
      }
    }
    let have = [duckStatCanon(col, m.stats_min_value), duckStatCanon(col, m.stats_max_value)];
    if (want[0] !== null && have[0] !== null && ['date', 'time', 'timestamp', 'timestamptz'].includes(col.type)) {
      // DuckDB renders these as text: compare through DuckDB itself.
      const fmt = (x) => ({
        date: `CAST(DATE '1970-01-01' + INTERVAL (${x}) DAY AS DATE)`,
        time: `CAST(make_time(0,0,0) + INTERVAL (${x}) MICROSECOND AS TIME)`,
        timestamp: `make_timestamp(${x}::BIGINT)`,
        timestamptz: `make_timestamp(${x}::BIGINT)`,
      })[col.type];
      const r = (await conn.runAndReadAll(`SELECT CAST(${fmt(want[0])} AS VARCHAR), CAST(${fmt(want[1])} AS VARCHAR)`)).getRowsJS()[0];
      want = col.type === 'timestamptz' ? [`${r[0]}+00`, `${r[1]}+00`] : [r[0], r[1]];
    }
    if (col.type === 'string' && present.some((s) => Buffer.byteLength(s) > 4096)) {
      // Large values may be left out of the statistics; if present they must be exact.
      if (have[0] === null && have[1] === null) continue;
    }
    if (have[0] !== want[0] || have[1] !== want[1]) {
      problem(`duckdb: rg ${g} ${col.name} stats [${shorten(have[0])}, ${shorten(have[1])}], expected [${shorten(want[0])}, ${shorten(want[1])}]`);
    }
  }

  // Encodings and dictionary pages.
  if (expected.dictionary !== undefined) {
    const enc = (await conn.runAndReadAll(
      `SELECT row_group_id, column_id, encodings, dictionary_page_offset, data_page_offset
         FROM parquet_metadata('${path}') ORDER BY row_group_id, column_id`)).getRowObjectsJS();
    for (const m of enc) {
      if (!columns[Number(m.column_id)]) continue;
      const col = leafOf(columns[Number(m.column_id)]);
      const g = Number(m.row_group_id);
      const list = String(m.encodings ?? '').split(',').map((e) => e.trim()).filter((e) => e);
      const hasDictPage = m.dictionary_page_offset !== null && m.dictionary_page_offset !== undefined;
      const dictData = list.includes('RLE_DICTIONARY') || list.includes('PLAIN_DICTIONARY');
      const mode = col.type === 'boolean' ? 'off' : expected.dictionary;
      const where = `duckdb: rg ${g} ${col.name} (encodings ${list.join(',')}, dictionary_page_offset ${m.dictionary_page_offset}, data_page_offset ${m.data_page_offset})`;
      if (mode === 'off') {
        if (hasDictPage || dictData) problem(`${where}: expected no dictionary`);
      } else if (mode === 'auto' && !hasDictPage) {
        // The writer chose PLAIN for this chunk (its table's earlier chunks found the values
        // nearly distinct): then no page may refer to a dictionary.
        if (dictData) problem(`${where}: dictionary-encoded pages without a dictionary page`);
      } else {
        if (!hasDictPage || !dictData) problem(`${where}: expected a dictionary page and RLE_DICTIONARY pages`);
        else if (Number(m.dictionary_page_offset) >= Number(m.data_page_offset)) problem(`${where}: dictionary page after the data pages`);
      }
    }
  }

  const fm = (await conn.runAndReadAll(`SELECT num_rows, created_by FROM parquet_file_metadata('${path}')`)).getRowObjectsJS()[0];
  if (Number(fm.num_rows) !== rows.length) problem(`duckdb: num_rows ${fm.num_rows}, expected ${rows.length}`);
  if (!String(fm.created_by).startsWith('ferry version')) problem(`duckdb: created_by '${fm.created_by}'`);
  return problems.length === before;
}

// ---- hyparquet ----
async function checkHyparquet() {
  const before = problems.length;
  const ab = fileBytes.buffer.slice(fileBytes.byteOffset, fileBytes.byteOffset + fileBytes.byteLength);
  const metadata = parquetMetadata(ab);
  if (Number(metadata.num_rows) !== rows.length) problem(`hyparquet: num_rows ${metadata.num_rows}, expected ${rows.length}`);
  const elements = metadata.schema.slice(1);
  let at = 0;
  columns.forEach((outer) => {
    let col = outer;
    if (isList(outer)) {
      const [g, mid] = [elements[at], elements[at + 1]];
      at += 2;
      if (!g || !mid) return problem(`hyparquet: no list group for ${outer.name}`);
      if (g.field_id !== outer.field_id) problem(`hyparquet: ${outer.name} field_id ${g.field_id}, expected ${outer.field_id}`);
      if (g.num_children !== 1 || mid.num_children !== 1 || mid.repetition_type !== 'REPEATED') problem(`hyparquet: ${outer.name} is not a 3-level list`);
      if (g.converted_type !== 'LIST' && !(g.logical_type && g.logical_type.type === 'LIST')) problem(`hyparquet: ${outer.name} has no LIST annotation`);
      col = elementOf(outer);
    }
    const s = elements[at++];
    if (!s) return problem(`hyparquet: no schema element for ${col.name}`);
    if (s.field_id !== col.field_id) problem(`hyparquet: ${col.name} field_id ${s.field_id}, expected ${col.field_id}`);
    const rep = col.required ? 'REQUIRED' : 'OPTIONAL';
    if (s.repetition_type !== rep) problem(`hyparquet: ${col.name} repetition ${s.repetition_type}, expected ${rep}`);
  });
  // Float statistics (DuckDB hides infinite ones): NaN excluded, -0.0 as min zero, +0.0 as max zero.
  let first = 0;
  metadata.row_groups.forEach((rg, g) => {
    const n = Number(rg.num_rows);
    columns.forEach((outer, c) => {
      const col = leafOf(outer);
      if (col.type !== 'float' && col.type !== 'double') return;
      const single = col.type === 'float';
      const vals = leafValues(outer, rows.slice(first, first + n).map((r) => r[c])).filter((v) => v !== null)
        .map((v) => Number(floatCanon(v, single) === '-0' ? -0 : floatCanon(v, single)))
        .filter((v) => !Number.isNaN(v));
      const st = rg.columns[c].meta_data.statistics ?? {};
      let want = [undefined, undefined];
      if (vals.length > 0) {
        let mn = Math.min(...vals);
        let mx = Math.max(...vals);
        if (mn === 0) mn = -0;
        if (mx === 0) mx = 0;
        want = [floatCanon(mn, single), floatCanon(mx, single)];
      }
      const have = [st.min_value === undefined ? undefined : floatCanon(st.min_value, single),
        st.max_value === undefined ? undefined : floatCanon(st.max_value, single)];
      if (have[0] !== want[0] || have[1] !== want[1]) {
        problem(`hyparquet: rg ${g} ${col.name} stats [${have}], expected [${want}]`);
      }
    });
    first += n;
  });

  // Encodings, encoding_stats and dictionary pages, per chunk.
  if (expected.dictionary !== undefined) {
    const fellBack = new Set();
    metadata.row_groups.forEach((rg, g) => {
      columns.forEach((outer, c) => {
        const col = leafOf(outer);
        const md = rg.columns[c].meta_data;
        const where = `hyparquet: rg ${g} ${col.name}`;
        const encodings = md.encodings ?? [];
        const stats = md.encoding_stats;
        if (!stats) return problem(`${where}: no encoding_stats`);
        let dictPages = 0, dictData = 0, plainData = 0;
        for (const st of stats) {
          if (st.page_type === 'DICTIONARY_PAGE' && st.encoding === 'PLAIN') dictPages += st.count;
          else if (st.page_type === 'DATA_PAGE' && st.encoding === 'RLE_DICTIONARY') dictData += st.count;
          else if (st.page_type === 'DATA_PAGE' && st.encoding === 'PLAIN') plainData += st.count;
          else problem(`${where}: unexpected encoding_stats entry ${JSON.stringify(st)}`);
        }
        const hasOffset = md.dictionary_page_offset !== undefined && md.dictionary_page_offset !== null;
        if ((dictPages === 1) !== hasOffset || dictPages > 1) problem(`${where}: ${dictPages} dictionary pages in encoding_stats, dictionary_page_offset ${md.dictionary_page_offset}`);
        if ((dictData > 0) !== encodings.includes('RLE_DICTIONARY')) problem(`${where}: encodings [${encodings}] disagree with encoding_stats ${JSON.stringify(stats)}`);
        if (dictData > 0 && dictPages !== 1) problem(`${where}: RLE_DICTIONARY pages without a dictionary page`);
        if (!encodings.includes('PLAIN')) problem(`${where}: encodings [${encodings}] lack PLAIN`);
        const mode = col.type === 'boolean' ? 'off' : expected.dictionary;
        if (mode === 'off' && (dictPages > 0 || dictData > 0)) problem(`${where}: expected no dictionary, encoding_stats ${JSON.stringify(stats)}`);
        if (mode === 'on' && (dictPages !== 1 || dictData === 0 || plainData > 0)) problem(`${where}: expected dictionary pages only, encoding_stats ${JSON.stringify(stats)}`);
        if (mode === 'auto') {
          // Each chunk wholly dictionary-encoded or wholly PLAIN; the first row group's chunks
          // start with a dictionary (nothing was learnt about the values yet).
          const whole = (dictPages === 1 && plainData === 0) || (dictPages === 0 && dictData === 0);
          if (!whole || (g === 0 && dictPages !== 1)) problem(`${where}: expected a dictionary-only or PLAIN-only chunk (a dictionary in row group 0), encoding_stats ${JSON.stringify(stats)}`);
        }
        if (mode === 'fallback') {
          if (dictPages !== 1 || dictData === 0) problem(`${where}: expected a dictionary, encoding_stats ${JSON.stringify(stats)}`);
          if (plainData > 0) fellBack.add(col.name);
        }
      });
    });
    if (expected.dictionary === 'fallback') {
      for (const col of columns.map(leafOf)) {
        if (col.type !== 'boolean' && !fellBack.has(col.name)) problem(`hyparquet: ${col.name} never falls back to PLAIN`);
      }
    }
  }

  const data = await parquetReadObjects({
    file: ab,
    compressors,
    utf8: false,
    parsers: {
      timestampFromMilliseconds: (v) => v,
      timestampFromMicroseconds: (v) => v,
      timestampFromNanoseconds: (v) => v,
      dateFromDays: (v) => v,
      uuidFromBytes: (b) => b && hex(b),
    },
  });
  const hyCanon = (type, v) => {
    if (v === null || v === undefined) return null;
    const d = decimalScale(type);
    if (type === 'float') return floatCanon(v, true);
    if (type === 'double') return floatCanon(v, false);
    if (type === 'binary') return hex(v);
    if (d) return `~${v}`;  // hyparquet yields decimals as JS numbers: compared approximately
    return String(v);
  };
  const got = columns.map((col) => data.map((row) => {
    const v = row[col.name];
    if (isList(col)) return canonList(v, (e) => hyCanon(col.element_type, e));
    return hyCanon(col.type, v);
  }));
  // Decimals: hyparquet computes Number(unscaled) / 10^scale; do the same with the expectation.
  const hyDecimal = (type, v) => {
    const d = decimalScale(type);
    return d && v !== null ? `~${Number(BigInt(v)) / 10 ** d.scale}` : v;
  };
  const rowsForHy = rows.map((r) => r.map((v, c) => {
    const col = columns[c];
    if (isList(col)) return v === null ? v : v.map((e) => hyDecimal(col.element_type, e));
    return hyDecimal(col.type, v);
  }));
  const saved = rows.slice();
  rows.splice(0, rows.length, ...rowsForHy);
  compareValues('hyparquet', got);
  rows.splice(0, rows.length, ...saved);
  return problems.length === before;
}

// ---- parquet-wasm (arrow-rs) ----
const arrowTypes = {
  boolean: 'Bool', int: 'Int32', long: 'Int64', float: 'Float32', double: 'Float64', date: 'Date32<DAY>',
  time: 'Time64<MICROSECOND>', timestamp: 'Timestamp<MICROSECOND>', timestamptz: 'Timestamp<MICROSECOND, UTC>',
  string: 'Utf8', binary: 'Binary', uuid: 'FixedSizeBinary[16]',
};
function checkParquetWasm() {
  const before = problems.length;
  const table = tableFromIPC(readParquet(new Uint8Array(fileBytes)).intoIPCStream());
  if (table.numRows !== rows.length) problem(`parquet-wasm: ${table.numRows} rows, expected ${rows.length}`);
  const got = columns.map((col) => {
    const field = table.schema.fields.find((f) => f.name === col.name);
    if (!field) return null;
    const id = field.metadata.get('PARQUET:field_id');
    if (Number(id) !== col.field_id) problem(`parquet-wasm: ${col.name} field_id ${id}, expected ${col.field_id}`);
    const leaf = leafOf(col);
    const d = decimalScale(leaf.type);
    const leafType = d ? `Decimal[${d.precision}e${d.scale > 0 ? '+' : ''}${d.scale}]` : arrowTypes[leaf.type];
    if (isList(col)) {
      const child = field.type.children?.[0];
      if (String(field.type) !== `List<${leafType}>`) problem(`parquet-wasm: ${col.name} Arrow type ${field.type}, expected List<${leafType}>`);
      const cid = child?.metadata.get('PARQUET:field_id');
      if (Number(cid) !== col.element_id) problem(`parquet-wasm: ${col.name} element field_id ${cid}, expected ${col.element_id}`);
    } else if (String(field.type) !== leafType) {
      problem(`parquet-wasm: ${col.name} Arrow type ${field.type}, expected ${leafType}`);
    }
    if (field.nullable === col.required && col.required) problem(`parquet-wasm: ${col.name} nullable for a required column`);
    // The canonical value of logical row j of an Arrow Data of the leaf's type.
    const value = (chunk, j) => {
      if (!chunk.getValid(j)) return null;
      const at = chunk.offset + j;
      switch (leaf.type) {
        case 'float': return floatCanon(chunk.values[at], true);
        case 'double': return floatCanon(chunk.values[at], false);
        case 'boolean': return String(((chunk.values[at >> 3] >> (at & 7)) & 1) === 1);
        case 'string': return new TextDecoder().decode(chunk.values.subarray(chunk.valueOffsets[at], chunk.valueOffsets[at + 1]));
        case 'binary': return hex(chunk.values.subarray(chunk.valueOffsets[at], chunk.valueOffsets[at + 1]));
        case 'uuid': return hex(chunk.values.subarray(at * 16, at * 16 + 16));
        default:
          if (d) return String(int128FromWords(chunk.values.subarray(at * 4, at * 4 + 4)));
          return String(chunk.values[at]);
      }
    };
    const vector = table.getChild(col.name);
    const out = [];
    for (const chunk of vector.data) {
      for (let j = 0; j < chunk.length; j++) {
        if (!isList(col)) { out.push(value(chunk, j)); continue; }
        if (!chunk.getValid(j)) { out.push(null); continue; }
        const at = chunk.offset + j;
        const items = [];
        for (let k = chunk.valueOffsets[at]; k < chunk.valueOffsets[at + 1]; k++) items.push(value(chunk.children[0], k));
        out.push(JSON.stringify(items));
      }
    }
    return out;
  });
  compareValues('parquet-wasm', got);
  return problems.length === before;
}

const results = {};
for (const [name, fn] of [['duckdb', checkDuckDB], ['hyparquet', checkHyparquet], ['parquet-wasm', checkParquetWasm]]) {
  try {
    results[name] = await fn();
  } catch (e) {
    problem(`${name}: failed to read ${file}: ${e && e.stack ? e.stack : e}`);
    results[name] = false;
  }
}
if (problems.length > 0) {
  for (const p of problems) console.log(p);
  console.log(`FAIL ${file}: ${Object.entries(results).map(([k, v]) => `${k} ${v ? 'ok' : 'differs'}`).join(', ')}`);
  process.exit(1);
}
console.log(`OK ${file}: ${rows.length} rows x ${columns.length} columns agree in duckdb, hyparquet, parquet-wasm`);
process.exit(0);
