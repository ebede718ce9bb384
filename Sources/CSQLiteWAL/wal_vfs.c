// The "tandem-wal" VFS: SQLite's default VFS, with a WAL file's appends written together
// (CSQLiteWAL.h says what and why). Written against SQLite 3.40's wal.c.
//
// Wrapped: a database file (to see its connection's write transactions end) and its
// WAL file (to gather the appends). Every other file (temporary files, journals) is the
// default VFS's own. A connection's files are used by that connection alone, which
// SQLite serializes: no lock here.
//
// What is gathered: writes that append (at `end`, where this connection's last write
// ended; the WAL header, at offset 0, starts the log over and is the first append of
// the new log). Anything else goes straight to the file after the buffer: SQLite
// rewriting a frame it already wrote (a spilled page changed again, and then each later
// frame's header with a new checksum, the commit's included: never where the write
// before it ended), a log another connection wrote last.
//
// When the buffer is written:
// - at the end of a commit: SQLite writes a frame as its 24-byte header, then its page,
//   and the header of a commit's last frame holds the database size (bytes 4-7, nonzero;
//   zero in every other frame). The write after such a header (the page) completes the
//   commit: it is buffered and the buffer written, and that write's result is the
//   commit's. SQLite publishes the commit (the wal-index header) only after it returns;
//   a rewrite after it (the checksums above) is not gathered.
// - before the file is read, synced, sized, truncated, closed or given a file control,
//   and before any write that is not an append;
// - when the buffer holds 1 MiB (a transaction larger than that, or spilled pages).
// When it is dropped: when the connection's write transaction ends (the database file's
// WAL write lock is let go), what is left is of no commit (pages spilled by a transaction
// that rolled back): SQLite never reads it, and written later it could land on frames
// another connection appended meanwhile. (In exclusive locking mode there is no such
// lock: the leftovers are written at the file's next use, where no other connection
// can write.)
// Not gathered at all: a WAL whose file may need padding to a sector (without
// SQLITE_IOCAP_POWERSAFE_OVERWRITE, synchronous=FULL pads after the commit frame and
// splits a frame at the sector's end), and a WAL whose database file is not known.
// SQLite asks the database file's device characteristics right after opening its WAL
// (sqlite3WalOpen): that call links the two.
#include "CSQLiteWAL.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

enum {
    FRAME_HEADER = 24,
    BUFFER_LIMIT = 1 << 20,
    // The unix VFS writes at most 0x1ffff bytes a call (it masks the length to 17 bits).
    WRITE_LIMIT = 0x1ffff,
    // wal.c's WAL_WRITE_LOCK: the shared-memory lock a write transaction holds.
    WAL_WRITE_LOCK = 0,
};

typedef struct WalFile WalFile;

// What both wrappers begin with: the methods SQLite calls, and the default VFS's file
// (just after the wrapper), to which whatever is not ours is passed on.
typedef struct {
    sqlite3_file base;
    sqlite3_file *real;
} Wrapped;

typedef struct {
    Wrapped wrapped;        // base.pMethods: dbMethods
    const char *name;       // as given to xOpen (SQLite keeps it until xClose)
    WalFile *wal;           // this connection's WAL file while it is open
} DbFile;

struct WalFile {
    Wrapped wrapped;        // base.pMethods: walMethods
    DbFile *db;             // the same connection's database file (NULL: not gathering)
    const char *name;       // as given to xOpen (SQLite keeps it until xClose)
    unsigned char *buffer;
    int length, capacity;
    sqlite3_int64 start;    // the file offset of buffer[0]
    sqlite3_int64 end;      // where the last write (made or buffered) ended: an append starts here
    int commitPending;      // the last write was a commit frame's header
    unsigned long long asked, made;  // writes SQLite asked for; writes made to the file
};
_Static_assert(sizeof(DbFile) % 8 == 0 && sizeof(WalFile) % 8 == 0,
               "the default VFS's file follows ours: it must stay aligned");

static sqlite3_vfs *realVfs;
static sqlite3_vfs walVfs;
static int registered = SQLITE_ERROR;
static pthread_once_t once = PTHREAD_ONCE_INIT;
// A WAL file this thread has just opened, until its database file's device
// characteristics are asked for (the next thing sqlite3WalOpen does, on this thread).
static _Thread_local WalFile *opening;

#define REAL(f) (((Wrapped *)(f))->real)

// Passed on as they are, for both kinds of file.
static int forwardLock(sqlite3_file *f, int level) { return REAL(f)->pMethods->xLock(REAL(f), level); }
static int forwardUnlock(sqlite3_file *f, int level) { return REAL(f)->pMethods->xUnlock(REAL(f), level); }
static int forwardCheckReservedLock(sqlite3_file *f, int *out) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out); }
static int forwardSectorSize(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int forwardDeviceCharacteristics(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }

static int writeThrough(WalFile *file, const void *data, int amount, sqlite3_int64 offset) {
    file->made += 1;
    return REAL(file)->pMethods->xWrite(REAL(file), data, amount, offset);
}

static int flush(WalFile *file) {
    int length = file->length;
    file->length = 0;
    for (int done = 0; done < length; done += WRITE_LIMIT) {
        int amount = length - done < WRITE_LIMIT ? length - done : WRITE_LIMIT;
        int rc = writeThrough(file, file->buffer + done, amount, file->start + done);
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}

// The connection's write transaction ended: what is still buffered belongs to no commit.
static void drop(WalFile *file) {
    if (file->length > 0) file->end = file->start;
    file->length = 0;
    file->commitPending = 0;
}

static void stopGathering(WalFile *file) {
    if (file->db) file->db->wal = NULL;
    file->db = NULL;
}

// MARK: The WAL file

static int walClose(sqlite3_file *f) {
    WalFile *file = (WalFile *)f;
    if (opening == file) opening = NULL;
    int rc = flush(file);
    stopGathering(file);
    int closed = REAL(file)->pMethods ? REAL(file)->pMethods->xClose(REAL(file)) : SQLITE_OK;
    free(file->buffer);
    file->buffer = NULL;
    file->capacity = 0;
    return rc != SQLITE_OK ? rc : closed;
}

static int walRead(sqlite3_file *f, void *data, int amount, sqlite3_int64 offset) {
    WalFile *file = (WalFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xRead(REAL(file), data, amount, offset);
}

static int walWrite(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) {
    WalFile *file = (WalFile *)f;
    file->asked += 1;
    if (!file->db) return writeThrough(file, data, amount, offset);
    // The WAL header: the log starts over, and its frames are appended from here. (SQLite
    // syncs the file right after it, which writes it.)
    if (offset == 0) {
        int rc = flush(file);
        if (rc != SQLITE_OK) return rc;
        file->end = 0;
    }
    // The page after a commit frame's header completes the commit, however either was written.
    int completesCommit = file->commitPending;
    const unsigned char *bytes = data;
    file->commitPending = amount == FRAME_HEADER && (bytes[4] | bytes[5] | bytes[6] | bytes[7]) != 0;
    if (offset != file->end) {
        // Not an append: a frame written again, or a log another connection wrote last.
        int rc = flush(file);
        if (rc != SQLITE_OK) return rc;
        file->end = offset + amount;
        return writeThrough(file, data, amount, offset);
    }
    if (file->length + amount > file->capacity) {
        int capacity = file->capacity ? file->capacity : 64 * 1024;
        while (capacity < file->length + amount) capacity *= 2;
        unsigned char *grown = realloc(file->buffer, (size_t)capacity);
        if (!grown) {
            // No memory: this write and every later one go straight to the file.
            int rc = flush(file);
            stopGathering(file);
            if (rc != SQLITE_OK) return rc;
            file->end = offset + amount;
            return writeThrough(file, data, amount, offset);
        }
        file->buffer = grown;
        file->capacity = capacity;
    }
    if (file->length == 0) file->start = offset;
    memcpy(file->buffer + file->length, data, (size_t)amount);
    file->length += amount;
    file->end = offset + amount;
    if (completesCommit || file->length >= BUFFER_LIMIT) return flush(file);
    return SQLITE_OK;
}

static int walTruncate(sqlite3_file *f, sqlite3_int64 size) {
    WalFile *file = (WalFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    if (size < file->end) file->end = size;
    return REAL(file)->pMethods->xTruncate(REAL(file), size);
}

static int walSync(sqlite3_file *f, int flags) {
    WalFile *file = (WalFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xSync(REAL(file), flags);
}

static int walFileSize(sqlite3_file *f, sqlite3_int64 *size) {
    WalFile *file = (WalFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xFileSize(REAL(file), size);
}

static int walFileControl(sqlite3_file *f, int op, void *arg) {
    WalFile *file = (WalFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return REAL(file)->pMethods->xFileControl(REAL(file), op, arg);
}

// Version 1: SQLite maps shared memory and pages only through the database's file.
static const sqlite3_io_methods walMethods = {
    .iVersion = 1, .xClose = walClose, .xRead = walRead, .xWrite = walWrite, .xTruncate = walTruncate,
    .xSync = walSync, .xFileSize = walFileSize, .xLock = forwardLock, .xUnlock = forwardUnlock,
    .xCheckReservedLock = forwardCheckReservedLock, .xFileControl = walFileControl,
    .xSectorSize = forwardSectorSize, .xDeviceCharacteristics = forwardDeviceCharacteristics,
};

// MARK: The database file: the default VFS's, and the end of each write transaction

static int dbClose(sqlite3_file *f) {
    DbFile *file = (DbFile *)f;
    if (file->wal) stopGathering(file->wal);
    return REAL(file)->pMethods ? REAL(file)->pMethods->xClose(REAL(file)) : SQLITE_OK;
}
static int dbRead(sqlite3_file *f, void *d, int n, sqlite3_int64 o) { return REAL(f)->pMethods->xRead(REAL(f), d, n, o); }
static int dbWrite(sqlite3_file *f, const void *d, int n, sqlite3_int64 o) { return REAL(f)->pMethods->xWrite(REAL(f), d, n, o); }
static int dbTruncate(sqlite3_file *f, sqlite3_int64 size) { return REAL(f)->pMethods->xTruncate(REAL(f), size); }
static int dbSync(sqlite3_file *f, int flags) { return REAL(f)->pMethods->xSync(REAL(f), flags); }
static int dbFileSize(sqlite3_file *f, sqlite3_int64 *size) { return REAL(f)->pMethods->xFileSize(REAL(f), size); }
static int dbFileControl(sqlite3_file *f, int op, void *arg) { return REAL(f)->pMethods->xFileControl(REAL(f), op, arg); }
static int namesWal(const char *db, const char *wal);
static int dbDeviceCharacteristics(sqlite3_file *f) {
    DbFile *file = (DbFile *)f;
    int characteristics = REAL(file)->pMethods->xDeviceCharacteristics(REAL(file));
    WalFile *wal = opening;
    opening = NULL;
    if (wal && !file->wal && namesWal(file->name, wal->name) && (characteristics & SQLITE_IOCAP_POWERSAFE_OVERWRITE)) {
        wal->db = file;
        file->wal = wal;
    }
    return characteristics;
}
static int dbShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
    return REAL(f)->pMethods->xShmMap(REAL(f), region, size, extend, out);
}
static int dbShmLock(sqlite3_file *f, int offset, int n, int flags) {
    DbFile *file = (DbFile *)f;
    if (file->wal && offset == WAL_WRITE_LOCK && n == 1 && flags == (SQLITE_SHM_UNLOCK | SQLITE_SHM_EXCLUSIVE)) {
        drop(file->wal);
    }
    return REAL(file)->pMethods->xShmLock(REAL(file), offset, n, flags);
}
static void dbShmBarrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int dbShmUnmap(sqlite3_file *f, int deleteFlag) { return REAL(f)->pMethods->xShmUnmap(REAL(f), deleteFlag); }
static int dbFetch(sqlite3_file *f, sqlite3_int64 o, int n, void **out) { return REAL(f)->pMethods->xFetch(REAL(f), o, n, out); }
static int dbUnfetch(sqlite3_file *f, sqlite3_int64 o, void *p) { return REAL(f)->pMethods->xUnfetch(REAL(f), o, p); }

static const sqlite3_io_methods dbMethods = {
    3, dbClose, dbRead, dbWrite, dbTruncate, dbSync, dbFileSize, forwardLock, forwardUnlock, forwardCheckReservedLock,
    dbFileControl, forwardSectorSize, dbDeviceCharacteristics, dbShmMap, dbShmLock, dbShmBarrier, dbShmUnmap,
    dbFetch, dbUnfetch,
};
// For a default VFS whose files have no shared memory (then SQLite runs no WAL on them).
static const sqlite3_io_methods dbMethodsWithoutShm = {
    .iVersion = 1, .xClose = dbClose, .xRead = dbRead, .xWrite = dbWrite, .xTruncate = dbTruncate,
    .xSync = dbSync, .xFileSize = dbFileSize, .xLock = forwardLock, .xUnlock = forwardUnlock,
    .xCheckReservedLock = forwardCheckReservedLock, .xFileControl = dbFileControl,
    .xSectorSize = forwardSectorSize, .xDeviceCharacteristics = dbDeviceCharacteristics,
};

// MARK: The VFS

// Whether `wal` names `db`'s WAL ("<db>-wal"; SQLite keeps URI parameters after it).
static int namesWal(const char *db, const char *wal) {
    if (!db || !wal) return 0;
    size_t length = strlen(db);
    return strncmp(db, wal, length) == 0 && strcmp(wal + length, "-wal") == 0;
}

static int vfsOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outFlags) {
    (void)vfs;
    if (flags & SQLITE_OPEN_MAIN_DB) {
        DbFile *file = (DbFile *)f;
        memset(file, 0, sizeof(DbFile));
        file->wrapped.real = (sqlite3_file *)(file + 1);
        file->name = name;
        int rc = realVfs->xOpen(realVfs, name, REAL(file), flags, outFlags);
        // SQLite calls xClose exactly when pMethods is set, failed open or not.
        const sqlite3_io_methods *real = REAL(file)->pMethods;
        file->wrapped.base.pMethods = !real ? NULL : real->iVersion >= 3 ? &dbMethods : &dbMethodsWithoutShm;
        return rc;
    }
    if (!(flags & SQLITE_OPEN_WAL)) return realVfs->xOpen(realVfs, name, f, flags, outFlags);
    WalFile *file = (WalFile *)f;
    memset(file, 0, sizeof(WalFile));
    file->wrapped.real = (sqlite3_file *)(file + 1);
    file->name = name;
    opening = NULL;
    int rc = realVfs->xOpen(realVfs, name, REAL(file), flags, outFlags);
    file->wrapped.base.pMethods = REAL(file)->pMethods ? &walMethods : NULL;
    if (rc == SQLITE_OK && REAL(file)->pMethods) opening = file;
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
    int ours = (int)(sizeof(DbFile) > sizeof(WalFile) ? sizeof(DbFile) : sizeof(WalFile));
    walVfs = (sqlite3_vfs){
        .iVersion = 3,
        .szOsFile = ours + realVfs->szOsFile,
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
        || journal->pMethods != &walMethods || !((WalFile *)journal)->db) return 0;
    *asked = ((WalFile *)journal)->asked;
    *made = ((WalFile *)journal)->made;
    return 1;
}
