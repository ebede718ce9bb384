#ifndef TANDEM_CSQLITEWAL_H
#define TANDEM_CSQLITEWAL_H

#include <sqlite3.h>

/// The name of the VFS that `tandem_wal_vfs_register` registers: SQLite's default VFS,
/// with each `-wal` file's appends gathered into one write a commit.
#define TANDEM_WAL_VFS_NAME "tandem-wal"

/// Registers the "tandem-wal" VFS (once; later calls return the first call's result).
/// It is the default VFS with one difference: a WAL file's appends are kept in a buffer
/// and written together when the commit's last frame is complete (or before anything
/// reads, syncs, sizes or truncates the file, before a write that is not an append, and
/// past 1 MiB); what is left when a write transaction ends belongs to no commit (a
/// rolled-back transaction's spilled pages) and is dropped. SQLite writes each WAL frame
/// as two calls (its 24-byte header, then the page); a commit of ten pages is then one
/// `pwrite` instead of twenty. A commit's frames are in the file, and a failed write is
/// the commit's error, before the commit is published to other connections (the
/// wal-index is updated after the last frame's write returns). wal_vfs.c says how.
int tandem_wal_vfs_register(void);

/// The writes to `db`'s WAL file since it was opened: those SQLite asked for, and those
/// made to the file. Returns 1, or 0 (counts untouched) when the connection's WAL is not
/// a "tandem-wal" file (another VFS, not in WAL mode, or not open yet).
int tandem_wal_writes(sqlite3 *db, unsigned long long *asked, unsigned long long *made);

#endif
