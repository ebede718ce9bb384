// The "tandem-wal" VFS: SQLite's default VFS, with a WAL file's appends written together
// (CSQLiteWAL.h says what and why).
//
// Only files opened with SQLITE_OPEN_WAL are wrapped; every other file (the database,
// its shared memory, temporary files) is the default VFS's own. A wrapped file is used
// by one connection, which SQLite serializes: no lock here.
//
// When the buffer must be in the file:
// - at the end of a commit: SQLite writes a frame as its 24-byte header, then its page,
//   and the header of a commit's last frame holds the database size (bytes 4-7, nonzero;
//   zero in every other frame). The write after such a header (the page) completes the
//   commit: it is buffered and the buffer written, and that write's result is the
//   commit's. SQLite publishes the commit (the wal-index header) only after it returns.
// - before the file is read, synced, sized, truncated, closed or given a file control;
// - before a write that does not append to the buffer (SQLite rewriting a frame of the
//   same transaction, the WAL header when the log starts over);
// - when the buffer holds 1 MiB (a transaction larger than that, or spilled pages).
// Anything unexpected costs a write sooner, never a frame left behind: frames that are
// not yet committed are invisible to every reader, and this connection reads none
// without the buffer being written first.
#include "CSQLiteWAL.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

enum { FRAME_HEADER = 24, BUFFER_LIMIT = 1 << 20, WRITE_LIMIT = 0x1ffff };

typedef struct {
    sqlite3_file base;      // pMethods: walMethods
    sqlite3_file *real;     // the default VFS's file, just after this struct
    unsigned char *buffer;
    int length, capacity;
    sqlite3_int64 start;    // the file offset of buffer[0]
    int commitPending;      // the last write was a commit frame's header
    unsigned long long asked, made;  // writes SQLite asked for; writes made to the file
} WalFile;
_Static_assert(sizeof(WalFile) % 8 == 0, "the default VFS's file follows a WalFile: it must stay aligned");

static sqlite3_vfs *realVfs;
static sqlite3_vfs walVfs;
static int registered = SQLITE_ERROR;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int flush(WalFile *file) {
    int length = file->length;
    file->length = 0;
    // The unix VFS writes at most 0x1ffff bytes a call (it masks the length to 17 bits).
    for (int done = 0; done < length; done += WRITE_LIMIT) {
        int amount = length - done < WRITE_LIMIT ? length - done : WRITE_LIMIT;
        file->made += 1;
        int rc = file->real->pMethods->xWrite(file->real, file->buffer + done, amount, file->start + done);
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}

static int walClose(sqlite3_file *f) {
    WalFile *file = (WalFile *)f;
    int rc = flush(file);
    int closed = file->real->pMethods ? file->real->pMethods->xClose(file->real) : SQLITE_OK;
    free(file->buffer);
    file->buffer = NULL;
    file->capacity = 0;
    return rc != SQLITE_OK ? rc : closed;
}

static int walRead(sqlite3_file *f, void *data, int amount, sqlite3_int64 offset) {
    WalFile *file = (WalFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xRead(file->real, data, amount, offset);
}

static int walWrite(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) {
    WalFile *file = (WalFile *)f;
    file->asked += 1;
    if (file->length > 0 && offset != file->start + file->length) {
        int rc = flush(file);
        if (rc != SQLITE_OK) return rc;
    }
    int completesCommit = file->commitPending;
    file->commitPending = 0;
    if (file->length + amount > file->capacity) {
        int capacity = file->capacity ? file->capacity : 64 * 1024;
        while (capacity < file->length + amount) capacity *= 2;
        unsigned char *grown = realloc(file->buffer, (size_t)capacity);
        if (!grown) {
            // No memory: this write goes straight to the file.
            int rc = flush(file);
            if (rc != SQLITE_OK) return rc;
            file->made += 1;
            return file->real->pMethods->xWrite(file->real, data, amount, offset);
        }
        file->buffer = grown;
        file->capacity = capacity;
    }
    if (file->length == 0) file->start = offset;
    memcpy(file->buffer + file->length, data, (size_t)amount);
    file->length += amount;
    if (completesCommit || file->length >= BUFFER_LIMIT) return flush(file);
    if (amount == FRAME_HEADER) {
        const unsigned char *header = data;
        file->commitPending = (header[4] | header[5] | header[6] | header[7]) != 0;
    }
    return SQLITE_OK;
}

static int walTruncate(sqlite3_file *f, sqlite3_int64 size) {
    WalFile *file = (WalFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xTruncate(file->real, size);
}

static int walSync(sqlite3_file *f, int flags) {
    WalFile *file = (WalFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xSync(file->real, flags);
}

static int walFileSize(sqlite3_file *f, sqlite3_int64 *size) {
    WalFile *file = (WalFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xFileSize(file->real, size);
}

static int walLock(sqlite3_file *f, int level) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xLock(file->real, level);
}

static int walUnlock(sqlite3_file *f, int level) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xUnlock(file->real, level);
}

static int walCheckReservedLock(sqlite3_file *f, int *out) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xCheckReservedLock(file->real, out);
}

static int walFileControl(sqlite3_file *f, int op, void *arg) {
    WalFile *file = (WalFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xFileControl(file->real, op, arg);
}

static int walSectorSize(sqlite3_file *f) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xSectorSize(file->real);
}

static int walDeviceCharacteristics(sqlite3_file *f) {
    WalFile *file = (WalFile *)f;
    return file->real->pMethods->xDeviceCharacteristics(file->real);
}

// Version 1: SQLite maps shared memory and pages only through the database's file.
static const sqlite3_io_methods walMethods = {
    1, walClose, walRead, walWrite, walTruncate, walSync, walFileSize, walLock, walUnlock,
    walCheckReservedLock, walFileControl, walSectorSize, walDeviceCharacteristics,
};

static int vfsOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outFlags) {
    (void)vfs;
    if (!(flags & SQLITE_OPEN_WAL)) return realVfs->xOpen(realVfs, name, f, flags, outFlags);
    WalFile *file = (WalFile *)f;
    memset(file, 0, sizeof(WalFile));
    file->real = (sqlite3_file *)(file + 1);
    int rc = realVfs->xOpen(realVfs, name, file->real, flags, outFlags);
    // SQLite calls xClose exactly when pMethods is set, failed open or not.
    file->base.pMethods = file->real->pMethods ? &walMethods : NULL;
    return rc;
}

static int vfsDelete(sqlite3_vfs *v, const char *name, int syncDir) { (void)v; return realVfs->xDelete(realVfs, name, syncDir); }
static int vfsAccess(sqlite3_vfs *v, const char *name, int flags, int *out) { (void)v; return realVfs->xAccess(realVfs, name, flags, out); }
static int vfsFullPathname(sqlite3_vfs *v, const char *name, int n, char *out) { (void)v; return realVfs->xFullPathname(realVfs, name, n, out); }
static void *vfsDlOpen(sqlite3_vfs *v, const char *name) { (void)v; return realVfs->xDlOpen(realVfs, name); }
static void vfsDlError(sqlite3_vfs *v, int n, char *out) { (void)v; realVfs->xDlError(realVfs, n, out); }
static void (*vfsDlSym(sqlite3_vfs *v, void *handle, const char *symbol))(void) { (void)v; return realVfs->xDlSym(realVfs, handle, symbol); }
static void vfsDlClose(sqlite3_vfs *v, void *handle) { (void)v; realVfs->xDlClose(realVfs, handle); }
static int vfsRandomness(sqlite3_vfs *v, int n, char *out) { (void)v; return realVfs->xRandomness(realVfs, n, out); }
static int vfsSleep(sqlite3_vfs *v, int micros) { (void)v; return realVfs->xSleep(realVfs, micros); }
static int vfsCurrentTime(sqlite3_vfs *v, double *out) { (void)v; return realVfs->xCurrentTime(realVfs, out); }
static int vfsGetLastError(sqlite3_vfs *v, int n, char *out) { (void)v; return realVfs->xGetLastError(realVfs, n, out); }
static int vfsCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *out) { (void)v; return realVfs->xCurrentTimeInt64(realVfs, out); }
static int vfsSetSystemCall(sqlite3_vfs *v, const char *name, sqlite3_syscall_ptr call) { (void)v; return realVfs->xSetSystemCall(realVfs, name, call); }
static sqlite3_syscall_ptr vfsGetSystemCall(sqlite3_vfs *v, const char *name) { (void)v; return realVfs->xGetSystemCall(realVfs, name); }
static const char *vfsNextSystemCall(sqlite3_vfs *v, const char *name) { (void)v; return realVfs->xNextSystemCall(realVfs, name); }

static void registerOnce(void) {
    realVfs = sqlite3_vfs_find(NULL);
    // The unix VFS of every supported SQLite is version 3; anything else is left alone.
    if (!realVfs || realVfs->iVersion < 3) return;
    walVfs = (sqlite3_vfs){
        .iVersion = 3,
        // A wrapped file's struct, then the default VFS's (WalFile's size is a multiple of 8).
        .szOsFile = (int)sizeof(WalFile) + realVfs->szOsFile,
        .mxPathname = realVfs->mxPathname,
        .zName = TANDEM_WAL_VFS_NAME,
        .xOpen = vfsOpen, .xDelete = vfsDelete, .xAccess = vfsAccess, .xFullPathname = vfsFullPathname,
        .xDlOpen = vfsDlOpen, .xDlError = vfsDlError, .xDlSym = vfsDlSym, .xDlClose = vfsDlClose,
        .xRandomness = vfsRandomness, .xSleep = vfsSleep, .xCurrentTime = vfsCurrentTime,
        .xGetLastError = vfsGetLastError, .xCurrentTimeInt64 = vfsCurrentTimeInt64,
        .xSetSystemCall = vfsSetSystemCall, .xGetSystemCall = vfsGetSystemCall,
        .xNextSystemCall = vfsNextSystemCall,
    };
    registered = sqlite3_vfs_register(&walVfs, 0);
}

int tandem_wal_vfs_register(void) {
    pthread_once(&once, registerOnce);
    return registered;
}

int tandem_wal_writes(sqlite3 *db, unsigned long long *asked, unsigned long long *made) {
    sqlite3_file *journal = NULL;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &journal) != SQLITE_OK || !journal
        || journal->pMethods != &walMethods) return 0;
    *asked = ((WalFile *)journal)->asked;
    *made = ((WalFile *)journal)->made;
    return 1;
}
