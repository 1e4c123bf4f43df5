// A shim over SQLite's default VFS that gathers the writes a connection makes to its WAL file
// into one buffer and hands them to the file system in one write per commit, instead of two
// system calls per frame (SQLite writes each frame's 24-byte header, then its page). See
// storebus_sqlite.h for why and for the rules that keep it exactly as durable and as visible as
// writing through.
#include "storebus_sqlite.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Bytes of a WAL frame header; the most bytes kept before they are written; the most handed to
// the real file in one write (the unix VFS takes at most 128 KiB - 1 at a time: it masks a larger
// count to its low 17 bits).
enum { frame_header_bytes = 24, max_pending_bytes = 1 << 20, max_write_bytes = 64 * 1024 };

typedef struct ShimFile ShimFile;

struct ShimFile {
    sqlite3_file base;              // what SQLite holds: pMethods is one of this shim's tables
    sqlite3_file *real;             // the default VFS's file, in the same allocation, after this
    int is_wal;                     // a WAL file: its writes are gathered
    ShimFile *wal;                  // a main database file: its connection's WAL file, while open
    ShimFile *main;                 // a WAL file: its main database file
    unsigned char *pending;         // a WAL file's gathered bytes, written at `pending_start`
    int pending_bytes;
    int pending_capacity;
    sqlite3_int64 pending_start;
    int commit_frame_started;       // the last write was the header of a commit frame
};

static sqlite3_vfs *real_vfs;

// The shim's part of a file, rounded up so that the real file after it is aligned as malloc aligns.
static const size_t shim_part_bytes = (sizeof(ShimFile) + 15) / 16 * 16;

// Writes what is gathered; on failure keeps it, so that a later call can try again and report.
static int flush_pending(ShimFile *file) {
    int written = 0;
    while (written < file->pending_bytes) {
        int amount = file->pending_bytes - written < max_write_bytes ? file->pending_bytes - written : max_write_bytes;
        int rc = file->real->pMethods->xWrite(file->real, file->pending + written, amount, file->pending_start + written);
        if (rc != SQLITE_OK) {
            // What was written is dropped from the buffer; the rest stays for the next try.
            memmove(file->pending, file->pending + written, (size_t)(file->pending_bytes - written));
            file->pending_bytes -= written;
            file->pending_start += written;
            return rc;
        }
        written += amount;
    }
    file->pending_bytes = 0;
    return SQLITE_OK;
}

static int shim_close(sqlite3_file *handle) {
    ShimFile *file = (ShimFile *)handle;
    int rc = flush_pending(file);
    if (file->is_wal && file->main && file->main->wal == file) file->main->wal = NULL;
    if (file->wal) file->wal->main = NULL;
    free(file->pending);
    file->pending = NULL;
    int closed = file->real->pMethods->xClose(file->real);
    return rc != SQLITE_OK ? rc : closed;
}

static int shim_read(sqlite3_file *handle, void *buffer, int amount, sqlite3_int64 offset) {
    ShimFile *file = (ShimFile *)handle;
    int rc = flush_pending(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xRead(file->real, buffer, amount, offset);
}

// Keeps `amount` bytes for `offset` when they continue what is gathered (or start anew), writing
// what was gathered first when they do not, or when there is no room.
static int gather(ShimFile *file, const void *bytes, int amount, sqlite3_int64 offset) {
    if (file->pending_bytes > 0
        && (offset != file->pending_start + file->pending_bytes || file->pending_bytes + amount > max_pending_bytes)) {
        int rc = flush_pending(file);
        if (rc != SQLITE_OK) return rc;
    }
    if (amount > max_write_bytes) {
        // Larger than SQLite's own writes to a WAL (a frame's page at most): through, in order.
        int rc = flush_pending(file);
        if (rc != SQLITE_OK) return rc;
        return file->real->pMethods->xWrite(file->real, bytes, amount, offset);
    }
    if (file->pending_bytes + amount > file->pending_capacity) {
        int capacity = file->pending_capacity == 0 ? 64 * 1024 : file->pending_capacity;
        while (capacity < file->pending_bytes + amount) capacity *= 2;
        unsigned char *grown = realloc(file->pending, (size_t)capacity);
        // Without memory to gather in, the write goes through as SQLite made it.
        if (grown == NULL) {
            int rc = flush_pending(file);
            if (rc != SQLITE_OK) return rc;
            return file->real->pMethods->xWrite(file->real, bytes, amount, offset);
        }
        file->pending = grown;
        file->pending_capacity = capacity;
    }
    if (file->pending_bytes == 0) file->pending_start = offset;
    memcpy(file->pending + file->pending_bytes, bytes, (size_t)amount);
    file->pending_bytes += amount;
    return SQLITE_OK;
}

static int shim_write(sqlite3_file *handle, const void *bytes, int amount, sqlite3_int64 offset) {
    ShimFile *file = (ShimFile *)handle;
    if (!file->is_wal) return file->real->pMethods->xWrite(file->real, bytes, amount, offset);
    int rc = gather(file, bytes, amount, offset);
    if (rc != SQLITE_OK) return rc;
    if (file->commit_frame_started) {
        // The page of the commit frame: the transaction's last frame. It reaches the file before
        // this call returns, so a failure is reported by the write that ends the commit.
        file->commit_frame_started = 0;
        return flush_pending(file);
    }
    // A frame header whose second word (the database size after a commit) is not zero starts the
    // commit frame.
    if (amount == frame_header_bytes && offset >= 32) {
        const unsigned char *header = bytes;
        file->commit_frame_started = (header[4] | header[5] | header[6] | header[7]) != 0;
    }
    return SQLITE_OK;
}

static int shim_truncate(sqlite3_file *handle, sqlite3_int64 size) {
    ShimFile *file = (ShimFile *)handle;
    int rc = flush_pending(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xTruncate(file->real, size);
}

static int shim_sync(sqlite3_file *handle, int flags) {
    ShimFile *file = (ShimFile *)handle;
    int rc = flush_pending(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xSync(file->real, flags);
}

static int shim_file_size(sqlite3_file *handle, sqlite3_int64 *size) {
    ShimFile *file = (ShimFile *)handle;
    int rc = flush_pending(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xFileSize(file->real, size);
}

static int shim_lock(sqlite3_file *handle, int level) {
    ShimFile *file = (ShimFile *)handle;
    return file->real->pMethods->xLock(file->real, level);
}

static int shim_unlock(sqlite3_file *handle, int level) {
    ShimFile *file = (ShimFile *)handle;
    return file->real->pMethods->xUnlock(file->real, level);
}

static int shim_check_reserved_lock(sqlite3_file *handle, int *reserved) {
    ShimFile *file = (ShimFile *)handle;
    return file->real->pMethods->xCheckReservedLock(file->real, reserved);
}

static int shim_file_control(sqlite3_file *handle, int op, void *argument) {
    ShimFile *file = (ShimFile *)handle;
    if (file->is_wal) {
        int rc = flush_pending(file);
        if (rc != SQLITE_OK) return rc;
    }
    return file->real->pMethods->xFileControl(file->real, op, argument);
}

static int shim_sector_size(sqlite3_file *handle) {
    ShimFile *file = (ShimFile *)handle;
    return file->real->pMethods->xSectorSize(file->real);
}

static int shim_device_characteristics(sqlite3_file *handle) {
    ShimFile *file = (ShimFile *)handle;
    return file->real->pMethods->xDeviceCharacteristics(file->real);
}

// The shared-memory calls are made on the main database file. A connection publishes a commit to
// other connections by updating the WAL index header in shared memory, with a memory barrier
// between its two copies, and ends its write transaction by releasing a lock: its WAL bytes are
// written before either, so no connection can be shown a frame that is not in the file yet, even
// if the commit frame was not recognized.
static int shim_shm_map(sqlite3_file *handle, int region, int size, int extend, void volatile **memory) {
    ShimFile *file = (ShimFile *)handle;
    return file->real->pMethods->xShmMap(file->real, region, size, extend, memory);
}

static int shim_shm_lock(sqlite3_file *handle, int offset, int count, int flags) {
    ShimFile *file = (ShimFile *)handle;
    if (file->wal) {
        int rc = flush_pending(file->wal);
        if (rc != SQLITE_OK) return rc;
    }
    return file->real->pMethods->xShmLock(file->real, offset, count, flags);
}

static void shim_shm_barrier(sqlite3_file *handle) {
    ShimFile *file = (ShimFile *)handle;
    // A failure here cannot be reported; the bytes stay gathered, and the next call that can
    // report (a write, a sync, a lock) tries again.
    if (file->wal) (void)flush_pending(file->wal);
    file->real->pMethods->xShmBarrier(file->real);
}

static int shim_shm_unmap(sqlite3_file *handle, int delete_flag) {
    ShimFile *file = (ShimFile *)handle;
    return file->real->pMethods->xShmUnmap(file->real, delete_flag);
}

static int shim_fetch(sqlite3_file *handle, sqlite3_int64 offset, int amount, void **pointer) {
    ShimFile *file = (ShimFile *)handle;
    return file->real->pMethods->xFetch(file->real, offset, amount, pointer);
}

static int shim_unfetch(sqlite3_file *handle, sqlite3_int64 offset, void *pointer) {
    ShimFile *file = (ShimFile *)handle;
    return file->real->pMethods->xUnfetch(file->real, offset, pointer);
}

// One table per version of the methods a real file may have: SQLite calls the later methods only
// when the version says they are there.
#define SHIM_METHODS(version) { \
    version, shim_close, shim_read, shim_write, shim_truncate, shim_sync, shim_file_size, \
    shim_lock, shim_unlock, shim_check_reserved_lock, shim_file_control, shim_sector_size, \
    shim_device_characteristics, shim_shm_map, shim_shm_lock, shim_shm_barrier, shim_shm_unmap, \
    shim_fetch, shim_unfetch }
static const sqlite3_io_methods shim_methods[3] = { SHIM_METHODS(1), SHIM_METHODS(2), SHIM_METHODS(3) };

static int is_shim_file(sqlite3_file *handle) {
    return handle != NULL && handle->pMethods >= &shim_methods[0] && handle->pMethods <= &shim_methods[2];
}

static int shim_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *handle, int flags, int *out_flags) {
    (void)vfs;
    ShimFile *file = (ShimFile *)handle;
    memset(file, 0, sizeof(ShimFile));
    file->real = (sqlite3_file *)((char *)handle + shim_part_bytes);
    int rc = real_vfs->xOpen(real_vfs, name, file->real, flags, out_flags);
    if (file->real->pMethods == NULL) {
        // As SQLite requires of a failed open: no methods, so that it never calls xClose.
        file->base.pMethods = NULL;
        return rc;
    }
    int version = file->real->pMethods->iVersion;
    file->base.pMethods = &shim_methods[(version >= 3 ? 3 : version < 1 ? 1 : version) - 1];
    if (rc == SQLITE_OK && (flags & SQLITE_OPEN_WAL) && name != NULL) {
        file->is_wal = 1;
        sqlite3_file *main = sqlite3_database_file_object(name);
        if (is_shim_file(main)) {
            file->main = (ShimFile *)main;
            file->main->wal = file;
        }
    }
    return rc;
}

static int shim_delete(sqlite3_vfs *vfs, const char *name, int sync_directory) {
    (void)vfs;
    return real_vfs->xDelete(real_vfs, name, sync_directory);
}

static int shim_access(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    (void)vfs;
    return real_vfs->xAccess(real_vfs, name, flags, result);
}

static int shim_full_pathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    return real_vfs->xFullPathname(real_vfs, name, size, out);
}

static void *shim_dl_open(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return real_vfs->xDlOpen(real_vfs, name);
}

static void shim_dl_error(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    real_vfs->xDlError(real_vfs, size, message);
}

static void (*shim_dl_sym(sqlite3_vfs *vfs, void *library, const char *symbol))(void) {
    (void)vfs;
    return real_vfs->xDlSym(real_vfs, library, symbol);
}

static void shim_dl_close(sqlite3_vfs *vfs, void *library) {
    (void)vfs;
    real_vfs->xDlClose(real_vfs, library);
}

static int shim_randomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return real_vfs->xRandomness(real_vfs, size, out);
}

static int shim_sleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return real_vfs->xSleep(real_vfs, microseconds);
}

static int shim_current_time(sqlite3_vfs *vfs, double *now) {
    (void)vfs;
    return real_vfs->xCurrentTime(real_vfs, now);
}

static int shim_get_last_error(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    return real_vfs->xGetLastError ? real_vfs->xGetLastError(real_vfs, size, message) : 0;
}

static int shim_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *now) {
    (void)vfs;
    return real_vfs->xCurrentTimeInt64(real_vfs, now);
}

static int shim_set_system_call(sqlite3_vfs *vfs, const char *name, sqlite3_syscall_ptr call) {
    (void)vfs;
    return real_vfs->xSetSystemCall(real_vfs, name, call);
}

static sqlite3_syscall_ptr shim_get_system_call(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return real_vfs->xGetSystemCall(real_vfs, name);
}

static const char *shim_next_system_call(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return real_vfs->xNextSystemCall(real_vfs, name);
}

static sqlite3_vfs shim_vfs;

static pthread_once_t registration = PTHREAD_ONCE_INIT;
static int registration_result = SQLITE_ERROR;

static void register_once(void) {
    sqlite3_vfs *real = sqlite3_vfs_find(NULL);
    // The shim needs the methods of version 3 (those it forwards), as the unix VFS has them.
    if (real == NULL || real->iVersion < 3) return;
    real_vfs = real;
    shim_vfs = (sqlite3_vfs){
        .iVersion = 3,
        .szOsFile = (int)shim_part_bytes + real->szOsFile,
        .mxPathname = real->mxPathname,
        .zName = "storebus-wal-coalescing",
        .xOpen = shim_open,
        .xDelete = shim_delete,
        .xAccess = shim_access,
        .xFullPathname = shim_full_pathname,
        .xDlOpen = shim_dl_open,
        .xDlError = shim_dl_error,
        .xDlSym = shim_dl_sym,
        .xDlClose = shim_dl_close,
        .xRandomness = shim_randomness,
        .xSleep = shim_sleep,
        .xCurrentTime = shim_current_time,
        .xGetLastError = shim_get_last_error,
        .xCurrentTimeInt64 = shim_current_time_int64,
        .xSetSystemCall = shim_set_system_call,
        .xGetSystemCall = shim_get_system_call,
        .xNextSystemCall = shim_next_system_call,
    };
    registration_result = sqlite3_vfs_register(&shim_vfs, 1);
}

int storebus_sqlite3_register_wal_coalescing(void) {
    // Once per process, whichever thread comes first: registered twice, the shim would find itself
    // as the default VFS and forward to itself.
    pthread_once(&registration, register_once);
    return registration_result;
}

int storebus_sqlite3_stop_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
