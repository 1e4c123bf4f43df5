#ifndef STOREBUS_SQLITE_H
#define STOREBUS_SQLITE_H
// Process-wide SQLite settings, made before SQLite opens its first connection.
#include <sqlite3.h>

// Stops SQLite keeping memory statistics: with them, every allocation and free it makes takes a
// process-wide mutex to count it (Debian's build has no lookaside, so a statement allocates often).
// sqlite3_config is variadic, which Swift does not import, and takes effect only before SQLite
// initializes, or returns SQLITE_MISUSE.
int storebus_sqlite3_stop_memory_statistics(void);

// Registers, as the default VFS, a shim over the default one (unix) that gathers each
// connection's writes to its WAL file and writes them with one system call per commit.
//
// SQLite appends a commit to the WAL frame by frame, each frame in two writes (a 24-byte header,
// then the page): some 30 pwrite calls for a purchase in the payment queue, where the same bytes
// go in one. The shim keeps what a connection writes to its WAL in a buffer while the writes
// follow one another, and writes it out
// - at the end of the write that completes a commit frame (the frame whose header holds the
//   database size), so that a failure is reported as the commit's own error;
// - before anything that reads or measures the file or orders its bytes: a read, a sync, a
//   truncation, a size, a file control, a close, a write elsewhere in the file, a full buffer;
// - before the connection updates the WAL index in shared memory or changes its locks there,
//   which is how other connections learn of frames: none is shown one that is not in the file.
// Bytes the shim holds are those of a transaction not committed yet: a crash loses exactly what
// it would without the shim. Other files are passed through untouched.
//
// Returns SQLITE_OK (also when already registered), or an error when the default VFS lacks the
// methods the shim forwards.
int storebus_sqlite3_register_wal_coalescing(void);
#endif
