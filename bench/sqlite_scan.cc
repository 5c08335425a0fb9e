// A full read of one SQLite table through the C API: every row stepped, every column fetched in
// its stored form (integers, reals, text bytes), nothing formatted or written. This is the rate at
// which any SQLite reader, ferry included, can get the values out of the database file.
//
// Usage: sqlite_scan <db> <table>      Prints one JSON object on stdout.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include <sqlite3.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: sqlite_scan <db> <table>\n");
    return 2;
  }
  auto t0 = std::chrono::steady_clock::now();
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "sqlite_scan: %s\n", sqlite3_errmsg(db));
    return 1;
  }
  std::string sql = std::string("SELECT * FROM \"") + argv[2] + "\"";
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "sqlite_scan: %s\n", sqlite3_errmsg(db));
    return 1;
  }
  const int ncols = sqlite3_column_count(st);
  uint64_t rows = 0, check = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    ++rows;
    for (int c = 0; c < ncols; ++c) {
      switch (sqlite3_column_type(st, c)) {
        case SQLITE_INTEGER:
          check += static_cast<uint64_t>(sqlite3_column_int64(st, c));
          break;
        case SQLITE_FLOAT:
          check += static_cast<uint64_t>(sqlite3_column_double(st, c));
          break;
        case SQLITE_TEXT:
        case SQLITE_BLOB: {
          const unsigned char* p = sqlite3_column_text(st, c);
          int n = sqlite3_column_bytes(st, c);
          check += static_cast<uint64_t>(n) + (n > 0 ? p[n - 1] : 0);
          break;
        }
        default:
          break;
      }
    }
  }
  if (rc != SQLITE_DONE) {
    std::fprintf(stderr, "sqlite_scan: %s\n", sqlite3_errmsg(db));
    return 1;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"rows\": %llu, \"seconds\": %.4f, \"check\": %llu}\n",
              static_cast<unsigned long long>(rows), secs, static_cast<unsigned long long>(check));
  return 0;
}
