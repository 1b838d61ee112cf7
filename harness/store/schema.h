// The database's schema: the forward migrations (schema.cpp, where the current schema is also
// listed table by table), reading a file's version, and bringing a file forward. A file newer
// than kSchemaVersion (store.h) is refused before anything in it changes.
#pragma once

#include <string>

#include "harness/store/sqlite.h"

namespace attnbench::sql {

// 0 for an empty file. Refuses files that are not SQLite, or SQLite but not ours.
Result<int> read_schema_version(sqlite3* db, const std::string& path);

// "results/x.sqlite has schema version 7; this attnbench reads up to 6".
[[nodiscard]] Status newer_schema_error(const std::string& path, int version);

// Brings the file to `target` (<= kSchemaVersion) inside one write transaction; the version
// is read again under the lock because another process may have migrated it meanwhile.
[[nodiscard]] Status migrate(sqlite3* db, const std::string& path, int target, int& version);

}  // namespace attnbench::sql
