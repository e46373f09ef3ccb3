#ifndef OVT_KERNELS_RLOG_H
#define OVT_KERNELS_RLOG_H

/* The rounding log of one step: for every site
 * that has any, the entries for elements whose FP64 value lay within the
 * site's band of a grid midpoint. An entry is either a direction (the
 * element took the grid value below or above the midpoint) or, where the
 * band is wide compared with the grid spacing (values near zero after heavy
 * cancellation), the grid value itself. See docs/numeric-contract.md.
 *
 * In memory a log is a list of sites in increasing site order, each with its
 * element count and its entries in increasing element order. The file is a
 * versioned header and a zstd-compressed body (docs/formats.md). */

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"

/* The format's size limits (docs/formats.md, "Rounding log"). No body may
 * decompress to more than KRN_RLOG_MAX_BODY bytes, so no log file can be
 * longer than KRN_RLOG_MAX_FILE: the header and one zstd frame of such a body,
 * whose worst case is ZSTD_COMPRESSBOUND (the body plus 1/256 of it; checked
 * against zstd.h in rlog_codec.c). krn_rlog_decode refuses a longer file, and
 * every fetch of a log from a store is capped here (docs/store.md, "Limits"). */
#define KRN_RLOG_HEADER 56
#define KRN_RLOG_MAX_SHARDS 1024u
#define KRN_RLOG_MAX_BODY ((size_t)1 << 29)
#define KRN_RLOG_MAX_FILE                                                                          \
    (KRN_RLOG_HEADER + 32 * (size_t)KRN_RLOG_MAX_SHARDS + KRN_RLOG_MAX_BODY + (KRN_RLOG_MAX_BODY >> 8))

typedef enum {
    KRN_DIR_DOWN = 0,  /* the grid value below the midpoint */
    KRN_DIR_UP = 1,    /* the grid value above the midpoint */
    KRN_DIR_VALUE = 2  /* an explicit grid value (wide band) */
} krn_dir;

typedef struct {
    uint64_t index; /* element index within the site's output */
    krn_dir dir;
    float value;    /* KRN_DIR_VALUE only; 0 otherwise */
} krn_rlog_entry;

typedef struct {
    uint32_t site;  /* site number within the step */
    uint64_t n;     /* number of elements the site produced */
    size_t count;   /* number of entries */
    krn_rlog_entry *entries;
} krn_rlog_site;

typedef struct krn_rlog krn_rlog;

krn_rlog *krn_rlog_new(void);
void krn_rlog_free(krn_rlog *log);

/* Empties the log (its shard table too) and sets the step it belongs to. */
void krn_rlog_reset(krn_rlog *log, uint64_t step);

uint64_t krn_rlog_step(const krn_rlog *log);

/* Appends an entry. Sites must be added in increasing order and entries of
 * one site in increasing index order, index < n; anything else fails with
 * OVT_EINVAL. */
int krn_rlog_add(krn_rlog *log, uint32_t site, uint64_t n, uint64_t index, krn_dir dir,
                 float value) OVT_MUST_USE;

/* Appends count entries to site `site` in one call (the rounding sites use
 * this): same rules as krn_rlog_add, checked for every entry before any is
 * added. count == 0 adds nothing (a site never has zero entries). */
int krn_rlog_add_site(krn_rlog *log, uint32_t site, uint64_t n, const krn_rlog_entry *entries,
                      size_t count) OVT_MUST_USE;

/* Read access: the sites that have entries, in order. */
size_t krn_rlog_nsites(const krn_rlog *log);
const krn_rlog_site *krn_rlog_site_at(const krn_rlog *log, size_t i);
uint64_t krn_rlog_nentries(const krn_rlog *log);

/* The entries of site `site`, or NULL if it has none (binary search). */
const krn_rlog_site *krn_rlog_find(const krn_rlog *log, uint32_t site);

/* The shard table of a sharded step (docs/formats.md, format version 2):
 * the SHA-256 of each of the step's S shard gradients, hashes[j] for shard
 * j. A log of a step in one shard has none (0). Setting replaces the table;
 * S = 0 removes it; S above KRN_RLOG_MAX_SHARDS (or 1: a table is for S >=
 * 2) fails with OVT_EINVAL. */
int krn_rlog_set_shards(krn_rlog *log, const ovt_hash *hashes, uint32_t S) OVT_MUST_USE;
uint32_t krn_rlog_nshards(const krn_rlog *log);
/* hashes[j], or NULL when j >= krn_rlog_nshards(). */
const ovt_hash *krn_rlog_shard_hash(const krn_rlog *log, uint32_t j);

/* Adds delta to every site number (the sites a process computed with its
 * own numbering, moved to where they belong in the step). OVT_EINVAL if a
 * number would pass 2^32 - 1. */
int krn_rlog_shift_sites(krn_rlog *log, uint32_t delta) OVT_MUST_USE;

/* Drops every site numbered `end` or above (a process's log cut to the
 * sites only it computed, before rank 0 merges the logs). */
void krn_rlog_drop_sites_from(krn_rlog *log, uint32_t end);

/* Replaces dst's content with the merge of src[0..nsrc) (dst may be one of
 * them): every site of any of them, in increasing site order; a site present
 * in several (the slices of a site split over processes, such as grad.sum)
 * with their entries in increasing element order. All must belong to the
 * same step and agree on each site's n, and no element may be logged twice;
 * otherwise OVT_EINVAL and dst is left unchanged. The result has src[0]'s
 * shard table. */
int krn_rlog_merge(krn_rlog *dst, const krn_rlog *const *src, size_t nsrc) OVT_MUST_USE;

/* Serialises to the file format (malloc'd *buf). */
int krn_rlog_encode(const krn_rlog *log, uint8_t **buf, size_t *len) OVT_MUST_USE;

/* Parses file bytes. Every malformation (short file, wrong magic or version,
 * sizes that disagree with the file, corrupt compressed body, sites or
 * indices out of order or out of range, trailing bytes, a file longer than
 * KRN_RLOG_MAX_FILE) fails with
 * OVT_EFORMAT and a message that says which; *log is then empty. */
int krn_rlog_decode(krn_rlog *log, const uint8_t *buf, size_t len) OVT_MUST_USE;

/* encode + ovt_write_atomic, and ovt_read_file + decode. */
int krn_rlog_write_file(const krn_rlog *log, const char *path) OVT_MUST_USE;
int krn_rlog_read_file(krn_rlog *log, const char *path) OVT_MUST_USE;

/* What `ovt rlog FILE` shows of a log file beside its sites and entries. */
typedef struct {
    ovt_hash sha256; /* of the file's bytes: the step's logHash */
    size_t bytes;    /* the file's length */
    uint64_t values; /* entries that are grid values (KRN_DIR_VALUE), not directions */
} krn_rlog_file_info;

/* krn_rlog_read_file that also sums the file up in *info (zeroed on
 * failure); a file that does not decode fails naming path. */
int krn_rlog_inspect_file(krn_rlog *log, krn_rlog_file_info *info, const char *path) OVT_MUST_USE;

#endif
