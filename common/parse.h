#ifndef OVT_COMMON_PARSE_H
#define OVT_COMMON_PARSE_H

/* Values given as text: flags, and the same terms in a policy file. Each
 * parser reads the whole of text as the value given to `what` (a flag
 * such as "--steps", or a file's key), stores it in *out and returns 0, or
 * returns OVT_EINVAL with the message "WHAT expects ..., got 'TEXT'" and
 * leaves *out as it was. Chain amounts, addresses and hashes:
 * chain/parse.h (chain_parse_wei, chain_parse_address, chain_parse_hash). */

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* A decimal integer in [lo, hi] (no sign, no spaces). */
int ovt_parse_u64(uint64_t *out, const char *what, const char *text, uint64_t lo, uint64_t hi) OVT_MUST_USE;
int ovt_parse_u32(uint32_t *out, const char *what, const char *text, uint32_t lo, uint32_t hi) OVT_MUST_USE;
int ovt_parse_int(int *out, const char *what, const char *text, int lo, int hi) OVT_MUST_USE;

/* A finite decimal number in [lo, hi]. */
int ovt_parse_real(double *out, const char *what, const char *text, double lo, double hi) OVT_MUST_USE;

/* A duration in seconds within [lo, hi]: a number, optionally followed by
 * "s", "m" (minutes) or "h" (hours): "600", "0.5", "90s", "15m", "2h". */
int ovt_parse_seconds(double *out, const char *what, const char *text, double lo, double hi) OVT_MUST_USE;

/* A size in bytes within [lo, hi]: an integer, optionally followed by "k",
 * "M" or "G" (powers of 1024): "4096", "64k", "16M", "1G". */
int ovt_parse_size(size_t *out, const char *what, const char *text, size_t lo, size_t hi) OVT_MUST_USE;

#endif
