/* file_map.c: opening regular files only; 2 MiB aligned read-only file mappings and their page
 * cache (file_map.h). */
#include "core/file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "synapse_internal.h"

static const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "a special file";
}

static syn_status not_regular(const char *path, mode_t mode) {
    return syn_fail(SYN_ERR_IO, "cannot open '%s': it is %s, not a regular file", path,
                    file_kind(mode));
}

syn_status syn_file_open_regular(const char *path, int *fd, uint64_t *size) {
    *fd = -1;
    /* Looked at before opening, so that a device is never opened (opening one may act on it), and
     * again through the descriptor, in case the path was replaced in between. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) return not_regular(path, sb.st_mode);
    /* O_NONBLOCK: opening a FIFO put there since must not wait for a writer. A regular file's reads
     * never block, so the flag changes nothing for it and stays set. */
    const int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0) return syn_fail(SYN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fstat(f, &sb) != 0) {
        const int e = errno;
        close(f);
        return syn_fail(SYN_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        return not_regular(path, sb.st_mode);
    }
    *fd = f;
    *size = (uint64_t)sb.st_size;
    return SYN_OK;
}

syn_status syn_file_map(int fd, size_t size, const char *path, bool huge, void **out) {
    *out = NULL;
    if (size > SIZE_MAX - SYN_HUGE_PAGE_BYTES)
        return syn_fail(SYN_ERR_IO, "cannot map '%s': file too large", path);
    /* Reserve size + 2 MiB of address space, place the file at the first aligned address in
     * it, then give back the slack on both sides. */
    const size_t span = size + SYN_HUGE_PAGE_BYTES;
    uint8_t *reserve =
        mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserve == MAP_FAILED)
        return syn_fail(SYN_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
    const uintptr_t mask = (uintptr_t)SYN_HUGE_PAGE_BYTES - 1;
    uint8_t *base = (uint8_t *)(((uintptr_t)reserve + mask) & ~mask);
    void *map = mmap(base, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
    if (map == MAP_FAILED) {
        int e = errno;
        munmap(reserve, span);
        return syn_fail(SYN_ERR_IO, "cannot map '%s': %s", path, strerror(e));
    }
    if (base > reserve) munmap(reserve, (size_t)(base - reserve));
    const long page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    uint8_t *end =
        (uint8_t *)(((uintptr_t)(base + size) + (uintptr_t)page - 1) & ~((uintptr_t)page - 1));
    if (end < reserve + span) munmap(end, (size_t)(reserve + span - end));
    (void)madvise(base, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE); /* EINVAL: no THP here */
    *out = base;
    return SYN_OK;
}

size_t syn_file_map_huge_bytes(const void *base, size_t size) {
    FILE *smaps = fopen("/proc/self/smaps", "r");
    if (!smaps) return 0;
    const uintptr_t lo = (uintptr_t)base, hi = lo + size;
    char line[512];
    bool inside = false;
    size_t total = 0;
    while (fgets(line, sizeof line, smaps)) {
        uintptr_t start, end;
        unsigned long long kib;
        /* A mapping's header line is "start-end perms ..."; its fields follow, one per line. */
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &start, &end) == 2 &&
            strchr(line, '-') < strchr(line, ' ')) {
            inside = start < hi && end > lo;
        } else if (inside && (sscanf(line, "FilePmdMapped: %llu kB", &kib) == 1 ||
                              sscanf(line, "AnonHugePages: %llu kB", &kib) == 1)) {
            total += (size_t)kib * 1024;
        }
    }
    fclose(smaps);
    return total;
}

/* Reads one byte of each 4 KiB page of [p, p + n): faults the range in. */
static void touch(const void *p, size_t n) {
    const volatile uint8_t *b = p;
    uint8_t sink = 0;
    for (size_t i = 0; i < n; i += 4096)
        sink ^= b[i];
    (void)sink;
}

/* Whether any 4 KiB page of the 2 MiB range at p is in the page cache. */
static bool range_cached(const uint8_t *p, unsigned char *vec) {
    if (mincore((void *)p, SYN_HUGE_PAGE_BYTES, vec) != 0) return false;
    for (size_t i = 0; i < SYN_HUGE_PAGE_BYTES / 4096; i++)
        if (vec[i] & 1) return true;
    return false;
}

/* Whether mincore() shows this process the file's page cache: Linux does so only to a process that
 * owns the file (or is root) or may write it, and reports every page as cached to the others. */
static bool cache_visible(int fd) {
    struct stat sb;
    if (fstat(fd, &sb) != 0) return false;
    if (sb.st_uid == geteuid() || geteuid() == 0) return true;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0;
}

bool syn_file_map_recache_huge(int fd, const void *base, size_t size) {
    const uintptr_t mask = (uintptr_t)SYN_HUGE_PAGE_BYTES - 1;
    const size_t n_whole = size / SYN_HUGE_PAGE_BYTES; /* whole aligned 2 MiB ranges */
    if (((uintptr_t)base & mask) != 0 || n_whole < 2 || sysconf(_SC_PAGESIZE) != 4096) return false;
    /* Without a true picture of the cache, touching "cached" ranges would read a cold file in here,
     * and the probe would always look held: leave the cache as it is. */
    if (!cache_visible(fd)) return false;
    unsigned char vec[SYN_HUGE_PAGE_BYTES / 4096];
    /* A cache read back in parts (plain reads, earlier processes) can be a mix, so every range
     * that is cached is looked at: one fault maps it huge where its cache is one 2 MiB folio. A
     * range with nothing cached is left alone: this mapping will read it in huge (and touching it
     * here would read it synchronously, ahead of any prefetch). */
    size_t cached = 0;
    for (size_t k = 0; k < n_whole; k++) {
        const uint8_t *r = (const uint8_t *)base + k * SYN_HUGE_PAGE_BYTES;
        if (!range_cached(r, vec)) continue;
        size_t i = 0;
        while (!(vec[i] & 1))
            i++;
        touch(r + i * 4096, 1); /* a cached page: no read */
        cached += SYN_HUGE_PAGE_BYTES;
    }
    const size_t huge_before = syn_file_map_huge_bytes(base, size);
    const size_t small = cached > huge_before ? cached - huge_before : 0;
    /* A few small ranges do not pay for reading the whole file again (the 0.5B Q4_K_M file in
     * 4 KiB pages decodes ~10 % slower at one thread: README); an eighth of the file does. */
    if (small == 0 || small < size / 8) return false;
    /* The probe, the last whole range (tensor data, not the header just parsed): dropped, it must
     * leave the cache (else another process maps it, and dropping the file would only repeat at
     * every load) and, faulted again, come back as one more huge page. */
    const size_t probe_off = (n_whole - 1) * (size_t)SYN_HUGE_PAGE_BYTES;
    uint8_t *probe = (uint8_t *)base + probe_off;
    if (madvise(probe, SYN_HUGE_PAGE_BYTES, MADV_DONTNEED) != 0 ||
        posix_fadvise(fd, (off_t)probe_off, SYN_HUGE_PAGE_BYTES, POSIX_FADV_DONTNEED) != 0 ||
        range_cached(probe, vec))
        return false;
    const size_t huge_dropped = syn_file_map_huge_bytes(base, size);
    touch(probe, 1);
    if (syn_file_map_huge_bytes(base, size) < huge_dropped + (size_t)SYN_HUGE_PAGE_BYTES)
        return false; /* no support */
    /* Unmap this process's pages, so that the whole cache can go, then drop it. */
    if (madvise((void *)base, size, MADV_DONTNEED) != 0) return false;
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    syn_log(SYN_LOG_INFO,
            "model: %zu of %zu MiB of the file's cache was in small pages; the cache was dropped "
            "so that "
            "it reads back in 2 MiB pages",
            small >> 20, size >> 20);
    return true;
}
