/*
 * file_map.h: read-only file mappings laid out for 2 MiB ("huge") pages.
 *
 * Why: decode streams every weight once per token, and on Zen 4 one thread streams a mapping
 * held in 2 MiB pages about a third faster than one in 4 KiB pages (measured 30.4 against
 * 22.2 GB/s on the 0.5B file, docs/BENCHMARKS.md), and the whole file maps in ~260 page-table
 * entries instead of ~130,000. The kernel maps a file range with one 2 MiB entry only when (a) the
 * virtual address and the file offset are both 2 MiB aligned, (b) the mapping allows huge pages
 * (MADV_HUGEPAGE, as the usual "madvise" THP setting requires) and (c) the page cache holds that
 * range as one 2 MiB folio, which a file system with large folios (ext4 since Linux 6.16, XFS)
 * creates when a MADV_HUGEPAGE mapping faults the range in. A file already cached in small
 * pages (just written or read by a plain read()) stays small until its cache is dropped:
 * syn_file_map_recache_huge() does that, once, after checking on one 2 MiB range that the
 * kernel and the file system would then give huge pages. A cache may also be a mix (ranges read
 * back at different times), so the check covers every cached range.
 */
#ifndef SYN_CORE_FILE_MAP_H
#define SYN_CORE_FILE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "synapse.h"
#include "synapse_internal.h" /* SYN_HUGE_PAGE_BYTES, syn_file_map_huge_bytes */

/* Opens path read-only as *fd and gives its size, refusing anything but a regular file: a FIFO
 * (whose open() would wait for a writer), a directory, a device (which is never opened), a socket.
 * Errors: SYN_ERR_IO naming path and the system's reason or what the path is ("it is a FIFO"). */
syn_status syn_file_open_regular(const char *path, int *fd, uint64_t *size);

/* Maps size bytes of fd read-only (MAP_PRIVATE) at a 2 MiB aligned address, asking for huge
 * pages when huge (a refusal, e.g. THP disabled, is not an error) and for 4 KiB pages otherwise.
 * Free with munmap(*out, size). Errors: SYN_ERR_IO naming path and the system's reason. */
syn_status syn_file_map(int fd, size_t size, const char *path, bool huge, void **out);

/* Makes the page cache of the mapped file hold 2 MiB folios, so that the mapping faults in huge
 * pages. Every whole 2 MiB range that is cached is faulted in (a cached page of it: no read);
 * ranges not cached are left to be read in huge later. When at least an eighth of the file is
 * cached in small pages, a probe range's cache is dropped: if it leaves the cache (no other
 * process maps it) and, faulted again, maps huge, the whole file's cache is dropped (clean pages
 * only; pages mapped by other processes stay), to be read back in huge folios by the next
 * accesses. Returns true when the file's cache was dropped. Never fails: without huge page
 * support, or where mincore() cannot see the file's cache (a file this process neither owns nor
 * may write), it changes nothing. Call before touching the mapping beyond the header. */
bool syn_file_map_recache_huge(int fd, const void *base, size_t size);

/* syn_file_map_huge_bytes: declared in synapse_internal.h (the tools' benchmark uses it). */

#endif
