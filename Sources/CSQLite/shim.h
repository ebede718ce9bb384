#ifndef TANDEM_CSQLITE_SHIM_H
#define TANDEM_CSQLITE_SHIM_H
#include <sqlite3.h>

/// SQLITE_TRANSIENT is a macro casting -1 to a function pointer; Swift cannot import it.
static inline sqlite3_destructor_type tandem_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}
/// SQLITE_STATIC: SQLite reads a bound value in place until the statement is reset.
static inline sqlite3_destructor_type tandem_sqlite_static(void) {
    return SQLITE_STATIC;
}

/// Turns off SQLite's memory statistics (a mutex and counters around every allocation
/// it makes). Only before SQLite is initialized, which the first open does; returns
/// SQLITE_MISUSE afterwards. sqlite3_config is variadic: Swift cannot call it.
static inline int tandem_sqlite_disable_memstatus(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
#endif
