#ifndef STOREBUS_CSQLITESETTINGS_SHIM_H
#define STOREBUS_CSQLITESETTINGS_SHIM_H
// Process-wide SQLite settings. sqlite3_config is variadic, which Swift does not import, and takes
// effect only before SQLite initializes (the first connection opened), or returns SQLITE_MISUSE.
#include <sqlite3.h>

// Stops SQLite keeping memory statistics: with them, every allocation and free it makes takes a
// process-wide mutex to count it (Debian's build has no lookaside, so a statement allocates often).
static inline int storebus_sqlite3_stop_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
#endif
