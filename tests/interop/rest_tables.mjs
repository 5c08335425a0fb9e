// Lists the tables of a namespace through an Iceberg REST catalog with iceberg-js (a client
// nobody here wrote), as a reader attaching to the catalog would: the catalog's configuration,
// the namespace's tables, each table loaded. Prints one JSON document on stdout:
//   {"prefix": "...", "tables": [{"name", "metadataLocation", "records"}]}
// where records is the current snapshot's total-records (null for a table without data).
//
// Usage: node rest_tables.mjs --url http://127.0.0.1:PORT --namespace NS [--token T]
import { IcebergRestCatalog } from 'iceberg-js';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
if (!args.url || !args.namespace) {
  console.error('usage: node rest_tables.mjs --url URL --namespace NS [--token T]');
  process.exit(2);
}
const auth = args.token ? { type: 'bearer', token: args.token } : { type: 'none' };
// iceberg-js reads /v1/config (and its prefix) when it is given a warehouse.
const catalog = new IcebergRestCatalog({ baseUrl: args.url, warehouse: 'ferry', auth });
try {
  const config = await catalog.loadConfig();
  const namespace = args.namespace.split('.');
  const listed = [];
  let pageToken;
  do {
    const page = await catalog.listTables({ namespace }, pageToken ? { pageToken } : undefined);
    listed.push(...page.identifiers);
    pageToken = page.nextPageToken;
  } while (pageToken);
  const tables = [];
  for (const id of listed) {
    const result = await catalog.loadTableResult({ namespace: id.namespace, name: id.name });
    const meta = result.metadata;
    const current = (meta.snapshots || []).find((s) => s['snapshot-id'] === meta['current-snapshot-id']);
    tables.push({
      name: id.name,
      metadataLocation: result['metadata-location'],
      records: current ? Number(current.summary['total-records']) : null,
    });
  }
  tables.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  console.log(JSON.stringify({ prefix: (config.overrides || {}).prefix || '', tables }));
} catch (e) {
  console.error(`rest_tables: ${e.message || e}`);
  process.exit(1);
}
