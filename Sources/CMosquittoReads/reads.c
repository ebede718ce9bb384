/*
 * libmosquitto's socket reads through a buffer (see include/CMosquittoReads.h).
 */
#define _GNU_SOURCE
#include "CMosquittoReads.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#define TANDEM_READS_PATCHABLE 1
#endif

/* One fill takes at most this much: a room's change is some hundreds of bytes, a busy
 * photo's snapshot some tens of kilobytes (read a fill at a time). */
#define FILL_BYTES 16384

/* What a descriptor's last fill left: data[pos..<len]. A fill is read into the thread's
 * scratch and only what the caller did not take is kept (malloc'd, freed when taken), so
 * an idle client costs the 24 bytes of its entry. */
typedef struct {
    unsigned char *data;
    uint32_t pos;
    uint32_t len;
    /* Set by a reader at its bound: what is held is served, the socket is not read. */
    uint8_t heldOnly;
} Pending;

static Pending *table;      /* indexed by descriptor; NULL until installed */
static size_t tableSize;
static _Atomic uint64_t callCount;
static _Atomic uint64_t syscallCount;

static void drop(Pending *p) {
    free(p->data);
    p->data = NULL;
    p->pos = 0;
    p->len = 0;
}

/* The descriptor's entry, or NULL: not installed, or a number past the table. */
static Pending *entry(int fd) {
    return fd >= 0 && table != NULL && (size_t)fd < tableSize ? &table[fd] : NULL;
}

ssize_t tandem_mosquitto_read(int fd, void *buffer, size_t count) {
    atomic_fetch_add_explicit(&callCount, 1, memory_order_relaxed);
    Pending *p = entry(fd);
    if (p == NULL || count == 0) {
        atomic_fetch_add_explicit(&syscallCount, 1, memory_order_relaxed);
        return read(fd, buffer, count);
    }
    if (p->pos == p->len) {
        if (p->heldOnly) {
            errno = EAGAIN;
            return -1;
        }
        atomic_fetch_add_explicit(&syscallCount, 1, memory_order_relaxed);
        /* A read as large as a fill goes straight to the caller (a big payload's rest). */
        if (count >= FILL_BYTES) return read(fd, buffer, count);
        /* Into this thread's scratch first: a read that finds nothing (EAGAIN) or the
         * end costs no allocation; what the caller does not take is kept. */
        static __thread unsigned char scratch[FILL_BYTES];
        ssize_t got = read(fd, scratch, FILL_BYTES);
        if (got <= 0) return got;
        size_t n = count < (size_t)got ? count : (size_t)got;
        memcpy(buffer, scratch, n);
        if (n < (size_t)got) {
            if ((p->data = malloc((size_t)got - n)) == NULL) {
                /* The bytes are out of the socket and cannot be kept: the connection
                 * ends, as on any failed read (QoS 1 messages come again). */
                errno = ENOMEM;
                return -1;
            }
            memcpy(p->data, scratch + n, (size_t)got - n);
            p->pos = 0;
            p->len = (uint32_t)((size_t)got - n);
        }
        return (ssize_t)n;
    }
    size_t left = p->len - p->pos;
    size_t n = count < left ? count : left;
    memcpy(buffer, p->data + p->pos, n);
    p->pos += (uint32_t)n;
    if (p->pos == p->len) drop(p);
    return (ssize_t)n;
}

int tandem_mosquitto_close(int fd) {
    /* Before the descriptor is closed: once it is, its number may be another's. */
    Pending *p = entry(fd);
    if (p != NULL) {
        drop(p);
        p->heldOnly = 0;
    }
    return close(fd);
}

void tandem_mosquitto_reads_held_only(int fd, int on) {
    Pending *p = entry(fd);
    if (p != NULL) p->heldOnly = on != 0;
}

int tandem_mosquitto_reads_cover(int fd) {
    return entry(fd) != NULL;
}

size_t tandem_mosquitto_reads_buffered(int fd) {
    Pending *p = entry(fd);
    return p == NULL ? 0 : p->len - p->pos;
}

void tandem_mosquitto_reads_counts(uint64_t *calls, uint64_t *syscalls) {
    *calls = atomic_load_explicit(&callCount, memory_order_relaxed);
    *syscalls = atomic_load_explicit(&syscallCount, memory_order_relaxed);
}

#ifdef TANDEM_READS_PATCHABLE

#if defined(__x86_64__)
#define JUMP_SLOT R_X86_64_JUMP_SLOT
#define GLOB_DAT R_X86_64_GLOB_DAT
#else
#define JUMP_SLOT R_AARCH64_JUMP_SLOT
#define GLOB_DAT R_AARCH64_GLOB_DAT
#endif

/* At most this many slots of each function (one in libmosquitto 2.0: its PLT entry). */
#define MAX_SLOTS 4

typedef struct {
    int found;
    void **readSlots[MAX_SLOTS];
    void **closeSlots[MAX_SLOTS];
    int reads, closes;
    ElfW(Addr) relroStart, relroEnd;
    int unexpected;
} Search;

/* glibc rewrites most of .dynamic's addresses to loaded ones; some ports leave them as
 * offsets. */
static ElfW(Addr) loaded(ElfW(Addr) base, ElfW(Addr) address) {
    return address < base ? address + base : address;
}

static void scan(Search *search, ElfW(Addr) base, const ElfW(Rela) *relocations, size_t bytes,
                 const ElfW(Sym) *symbols, const char *strings) {
    if (relocations == NULL) return;
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); i++) {
        const ElfW(Rela) *r = &relocations[i];
        unsigned long type = ELF64_R_TYPE(r->r_info);
        if (type != JUMP_SLOT && type != GLOB_DAT) continue;
        const char *name = strings + symbols[ELF64_R_SYM(r->r_info)].st_name;
        void **slot = (void **)(base + r->r_offset);
        if (strcmp(name, "read") == 0) {
            if (search->reads == MAX_SLOTS) { search->unexpected = 1; return; }
            search->readSlots[search->reads++] = slot;
        } else if (strcmp(name, "close") == 0) {
            if (search->closes == MAX_SLOTS) { search->unexpected = 1; return; }
            search->closeSlots[search->closes++] = slot;
        }
    }
}

static int visit(struct dl_phdr_info *info, size_t size, void *context) {
    (void)size;
    Search *search = context;
    if (info->dlpi_name == NULL || strstr(info->dlpi_name, "libmosquitto.so") == NULL) return 0;
    search->found = 1;
    ElfW(Addr) base = info->dlpi_addr;
    const ElfW(Dyn) *dynamic = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dynamic = (const ElfW(Dyn) *)(base + ph->p_vaddr);
        if (ph->p_type == PT_GNU_RELRO) {
            search->relroStart = base + ph->p_vaddr;
            search->relroEnd = base + ph->p_vaddr + ph->p_memsz;
        }
    }
    if (dynamic == NULL) { search->unexpected = 1; return 1; }
    const ElfW(Sym) *symbols = NULL;
    const char *strings = NULL;
    const ElfW(Rela) *plt = NULL, *rela = NULL;
    size_t pltBytes = 0, relaBytes = 0;
    for (const ElfW(Dyn) *d = dynamic; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symbols = (const ElfW(Sym) *)loaded(base, d->d_un.d_ptr); break;
        case DT_STRTAB: strings = (const char *)loaded(base, d->d_un.d_ptr); break;
        case DT_JMPREL: plt = (const ElfW(Rela) *)loaded(base, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: pltBytes = d->d_un.d_val; break;
        case DT_RELA: rela = (const ElfW(Rela) *)loaded(base, d->d_un.d_ptr); break;
        case DT_RELASZ: relaBytes = d->d_un.d_val; break;
        case DT_PLTREL: if (d->d_un.d_val != DT_RELA) search->unexpected = 1; break;
        default: break;
        }
    }
    if (symbols == NULL || strings == NULL) { search->unexpected = 1; return 1; }
    scan(search, base, plt, pltBytes, symbols, strings);
    scan(search, base, rela, relaBytes, symbols, strings);
    return 1;
}

/* Writes `value` into a slot, making a page of the read-only-after-relocation segment
 * writable for the moment. */
static int put(const Search *search, void **slot, void *value) {
    ElfW(Addr) at = (ElfW(Addr))slot;
    long pageSize = sysconf(_SC_PAGESIZE);
    ElfW(Addr) pageMask = ~((ElfW(Addr))pageSize - 1);
    /* What ld.so made read-only: the segment's whole pages, its start and end rounded
     * down (a last page shared with writable data stays writable). */
    if (at >= (search->relroStart & pageMask) && at < (search->relroEnd & pageMask)) {
        void *page = (void *)(at & pageMask);
        if (mprotect(page, (size_t)pageSize, PROT_READ | PROT_WRITE) != 0) return 0;
        __atomic_store_n(slot, value, __ATOMIC_RELEASE);
        mprotect(page, (size_t)pageSize, PROT_READ);
        return 1;
    }
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    return 1;
}

static int installed;

int tandem_mosquitto_reads_install(void) {
    if (installed) return 1;
    Search search;
    memset(&search, 0, sizeof(search));
    dl_iterate_phdr(visit, &search);
    /* Both or neither: a buffer nobody drops on close could serve a dead socket's bytes
     * to the next one given its number. */
    if (!search.found || search.unexpected || search.reads == 0 || search.closes == 0) return 0;

    struct rlimit limit;
    size_t size = 1 << 20;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_max != RLIM_INFINITY && limit.rlim_max < size) {
        size = (size_t)limit.rlim_max;
    }
    /* Pages of the table are touched only for descriptors that are read. */
    Pending *entries = calloc(size, sizeof(Pending));
    if (entries == NULL) return 0;
    table = entries;
    tableSize = size;
    for (int i = 0; i < search.closes; i++) {
        if (!put(&search, search.closeSlots[i], (void *)tandem_mosquitto_close)) return 0;
    }
    for (int i = 0; i < search.reads; i++) {
        if (!put(&search, search.readSlots[i], (void *)tandem_mosquitto_read)) return 0;
    }
    installed = 1;
    return 1;
}

#else

int tandem_mosquitto_reads_install(void) { return 0; }

#endif
