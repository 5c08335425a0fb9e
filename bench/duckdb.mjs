// DuckDB for the benchmarks (bench/parquet_vs_duckdb.sh, bench/full_refresh.sh), through @duckdb/node-api installed in
// tests/interop/node_modules (scripts/setup.sh installs it). Prints one JSON object on stdout.
//
//   node duckdb.mjs write <rows> <out.parquet> <mode>
//       mode "generate": times COPY (SELECT <the benchmark table from range()>) TO out: the time
//                        includes generating the rows in SQL.
//       mode "table":    first materializes the rows in an in-memory table (not timed), then
//                        times COPY table TO out: DuckDB's writer plus an in-memory scan.
//       Both at one thread (SET threads = 1), FORMAT parquet, COMPRESSION zstd.
//   node duckdb.mjs check <a.parquet> <b.parquet>
//       Compares the two files' schemas and contents (count, per-column sums, a sum of row
//       hashes) so that both sides provably wrote the same logical table.
//   node duckdb.mjs count <glob>
//       Rows, sum(id) and distinct ids of the Parquet files matching glob (a sync's data files).
//   node duckdb.mjs partition <glob> <out-folder> <layout>
//       The rows of the Parquet files matching glob, read into an in-memory table (not timed),
//       then written by COPY ... TO out-folder (FORMAT parquet, COMPRESSION zstd) one thread,
//       timed: layout "none" one file, "day" PARTITION_BY the day of created_at, "bucket16" by
//       hash(id) % 16 (DuckDB has no Iceberg bucket; the same count of partitions), "day_x_bucket16"
//       by both. Prints its seconds and the files written.
//   node duckdb.mjs rewrite <glob> <out.parquet>
//       DuckDB's own file of the same rows: COPY (SELECT * FROM read_parquet(glob)) TO out,
//       zstd, one thread; prints its bytes, to compare a sync's files with.
//
// Row i = 1..rows, h = i * 2654435761 mod 2^32, as in bench/parquet_write.cc.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', 'tests', 'interop', 'package.json'));
const { DuckDBInstance } = require('@duckdb/node-api');

const sqlString = (s) => `'${s.replaceAll("'", "''")}'`;

const rowsSql = (rows) => `
  SELECT i AS id,
         CAST((i * 37) % 100 + 1 AS INTEGER) AS qty,
         ['pending', 'paid', 'shipped', 'delivered', 'cancelled'][((h >> 7) % 5) + 1] AS status,
         CAST(CAST(h % 10000000 AS DECIMAL(18,0)) / 100 AS DECIMAL(12,2)) AS amount,
         to_timestamp(1704067200 + i * 7) AS created_at,
         printf('order %08d ref %08x cust %06d', i, h, h % 999983) AS note,
         ((h >> 3) & 1) = 1 AS flag
  FROM (SELECT range AS i, (range * 2654435761) % 4294967296 AS h FROM range(1, ${rows} + 1))`;

async function main() {
  const [cmd, ...args] = process.argv.slice(2);
  const instance = await DuckDBInstance.create(':memory:');
  const con = await instance.connect();
  const rowsOf = async (sql) => (await con.runAndReadAll(sql)).getRowObjectsJson();
  await con.run('SET threads = 1');
  if (cmd === 'write') {
    const [rows, out, mode] = [Number(args[0]), args[1], args[2] || 'generate'];
    let source;
    if (mode === 'table') {
      await con.run(`CREATE TABLE t AS ${rowsSql(rows)}`);
      source = 't';
    } else {
      source = `(${rowsSql(rows)})`;
    }
    const t0 = process.hrtime.bigint();
    await con.run(`COPY ${source} TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd)`);
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const [meta] = await rowsOf(
      `SELECT count(DISTINCT row_group_id) AS row_groups FROM parquet_metadata(${sqlString(out)})`);
    const [ver] = await rowsOf('SELECT version() AS v');
    console.log(JSON.stringify({ rows, mode, seconds: secs, row_groups: Number(meta.row_groups),
                                 duckdb: ver.v }));
  } else if (cmd === 'check') {
    const summary = async (file) => {
      const f = sqlString(file);
      const schema = await rowsOf(
        `SELECT name, type, logical_type FROM parquet_schema(${f}) WHERE type IS NOT NULL ORDER BY name`);
      const [sums] = await rowsOf(`
        SELECT count(*) AS n, sum(id) AS id, sum(qty) AS qty, sum(amount) AS amount,
               sum(epoch_us(created_at)) AS created_at, sum(length(note)) AS note_chars,
               count(DISTINCT status) AS statuses, sum(flag::INT) AS flags,
               sum(hash(id, qty, status, amount, created_at, note, flag)) AS row_hash
        FROM read_parquet(${f})`);
      return { schema, sums };
    };
    const a = await summary(args[0]);
    const b = await summary(args[1]);
    const same = JSON.stringify(a.sums) === JSON.stringify(b.sums);
    console.log(JSON.stringify({ same_contents: same, a, b }));
    if (!same) process.exitCode = 1;
  } else if (cmd === 'count') {
    const [r] = await rowsOf(`SELECT count(*) AS n, sum(id) AS sum_id, count(DISTINCT id) AS ids,
                                     count(*) FILTER (WHERE note IS NULL) AS null_notes
                              FROM read_parquet(${sqlString(args[0])})`);
    console.log(JSON.stringify(r));
  } else if (cmd === 'partition') {
    const [glob, out, layout] = args;
    const keys = { none: [], day: ['d'], bucket16: ['b'], day_x_bucket16: ['d', 'b'] }[layout];
    if (!keys) throw new Error(`unknown layout ${layout}`);
    await con.run(`CREATE TABLE t AS SELECT *, CAST(created_at AS DATE) AS d, hash(id) % 16 AS b
                   FROM read_parquet(${sqlString(glob)})`);
    const unused = ['d', 'b'].filter((k) => !keys.includes(k));
    const select = unused.length ? `(SELECT * EXCLUDE (${unused.join(', ')}) FROM t)` : 't';
    const { mkdirSync, readdirSync, statSync } = await import('node:fs');
    mkdirSync(out, { recursive: true });
    const target = keys.length ? out : path.join(out, 'data.parquet');
    const partition = keys.length ? `, PARTITION_BY (${keys.join(', ')})` : '';
    const t0 = process.hrtime.bigint();
    await con.run(`COPY ${select} TO ${sqlString(target)}
                   (FORMAT parquet, COMPRESSION zstd${partition})`);
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const count = (dir) => readdirSync(dir).reduce((n, e) => {
      const p = path.join(dir, e);
      return n + (statSync(p).isDirectory() ? count(p) : e.endsWith('.parquet') ? 1 : 0);
    }, 0);
    console.log(JSON.stringify({ layout, seconds: secs, files: count(out) }));
  } else if (cmd === 'rewrite') {
    await con.run(`COPY (SELECT * FROM read_parquet(${sqlString(args[0])})) TO ${sqlString(args[1])}
                   (FORMAT parquet, COMPRESSION zstd)`);
    const [r] = await rowsOf(`SELECT count(*) AS n FROM read_parquet(${sqlString(args[1])})`);
    const { statSync } = await import('node:fs');
    console.log(JSON.stringify({ rows: Number(r.n), bytes: statSync(args[1]).size }));
  } else {
    throw new Error('usage: duckdb.mjs write <rows> <out> [generate|table] | check <a> <b> | ' +
                    'count <glob> | partition <glob> <out> <layout> | rewrite <glob> <out>');
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
