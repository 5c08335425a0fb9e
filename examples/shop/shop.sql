-- A sample shop database for the quick start: related tables, tens of thousands of rows, NULLs,
-- unicode text, reals, blobs and integer keys. Deterministic: every run builds the same rows.
PRAGMA journal_mode = WAL;
BEGIN;
CREATE TABLE customers (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  email TEXT,
  country TEXT,
  signed_up DATE,
  credit REAL,
  avatar BLOB
);
CREATE TABLE products (
  id INTEGER PRIMARY KEY,
  sku TEXT NOT NULL,
  title TEXT NOT NULL,
  price DECIMAL(12,2) NOT NULL,
  weight_kg REAL,
  active BOOLEAN NOT NULL
);
CREATE TABLE orders (
  id INTEGER PRIMARY KEY,
  customer_id INTEGER NOT NULL REFERENCES customers(id),
  placed_at DATETIME NOT NULL,
  status TEXT NOT NULL,
  note TEXT
);
CREATE TABLE order_items (
  order_id INTEGER NOT NULL REFERENCES orders(id),
  line INTEGER NOT NULL,
  product_id INTEGER NOT NULL REFERENCES products(id),
  quantity INTEGER NOT NULL,
  unit_price DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (order_id, line)
);

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12000)
INSERT INTO customers
SELECT i,
       CASE i % 7
         WHEN 0 THEN 'Zoë Ångström ' || i
         WHEN 1 THEN '山田 太郎 ' || i
         WHEN 2 THEN 'Ελένη Παπαδοπούλου ' || i
         WHEN 3 THEN 'O''Brien, Seán ' || i
         WHEN 4 THEN 'Мария Иванова ' || i
         WHEN 5 THEN 'عمر ' || i
         ELSE 'Customer ' || i END,
       CASE WHEN i % 10 = 0 THEN NULL ELSE 'c' || i || '@example.com' END,
       CASE i % 5 WHEN 0 THEN 'DE' WHEN 1 THEN 'JP' WHEN 2 THEN 'BR' WHEN 3 THEN NULL ELSE 'US' END,
       date('2015-01-01', '+' || (i * 37 % 3650) || ' days'),
       CASE WHEN i % 9 = 0 THEN NULL ELSE ((i * 7919) % 100000) / 100.0 - 250.0 END,
       CASE WHEN i % 4 = 0 THEN NULL ELSE CAST(char(0, i % 256, (i * 31) % 256, 255) AS BLOB) END
FROM n;

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1500)
INSERT INTO products
SELECT i,
       printf('SKU-%05d', i),
       CASE i % 4 WHEN 0 THEN 'Café crème ' || i WHEN 1 THEN 'Widget ' || i
                  WHEN 2 THEN 'Gadget "pro" ' || i ELSE '🚲 bike part ' || i END,
       printf('%d.%02d', (i * 131) % 900 + 1, (i * 17) % 100),
       CASE WHEN i % 11 = 0 THEN NULL ELSE ((i * 613) % 5000) / 1000.0 END,
       i % 13 != 0
FROM n;

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40000)
INSERT INTO orders
SELECT i,
       (i * 7) % 12000 + 1,
       datetime('2020-01-01 00:00:00', '+' || (i * 3613 % 157680000) || ' seconds'),
       CASE i % 4 WHEN 0 THEN 'new' WHEN 1 THEN 'paid' WHEN 2 THEN 'shipped' ELSE 'returned' END,
       CASE WHEN i % 3 = 0 THEN NULL WHEN i % 3 = 1 THEN '' ELSE 'leave at the door — 2nd floor' END
FROM n;

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40000),
     l(k) AS (VALUES (1), (2), (3))
INSERT INTO order_items
SELECT n.i, l.k, (n.i * 13 + l.k * 101) % 1500 + 1, (n.i + l.k) % 5 + 1,
       printf('%d.%02d', (n.i * 131 + l.k) % 900 + 1, (n.i * 17 + l.k) % 100)
FROM n JOIN l ON l.k <= n.i % 3 + 1;
COMMIT;
