#include "common/parse.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* strtoull accepts leading spaces and a sign; a value given as text may
 * have neither. */
static int whole_number(uint64_t *out, const char *text, char **end)
{
    if (!(text[0] >= '0' && text[0] <= '9'))
        return -1;
    errno = 0;
    unsigned long long v = strtoull(text, end, 10);
    if (errno || *end == text)
        return -1;
    *out = v;
    return 0;
}

int ovt_parse_u64(uint64_t *out, const char *what, const char *text, uint64_t lo, uint64_t hi)
{
    uint64_t v;
    char *end;
    if (whole_number(&v, text, &end) || *end || v < lo || v > hi)
        return ovt_fail(OVT_EINVAL, "%s expects an integer in %" PRIu64 "..%" PRIu64 ", got '%s'", what, lo, hi,
                        text);
    *out = v;
    return 0;
}

int ovt_parse_u32(uint32_t *out, const char *what, const char *text, uint32_t lo, uint32_t hi)
{
    uint64_t v = 0;
    int rv = ovt_parse_u64(&v, what, text, lo, hi);
    if (!rv)
        *out = (uint32_t)v;
    return rv;
}

int ovt_parse_int(int *out, const char *what, const char *text, int lo, int hi)
{
    uint64_t v = 0;
    if (lo < 0)
        return ovt_fail(OVT_EINVAL, "internal: ovt_parse_int takes no negative bounds (%s)", what);
    int rv = ovt_parse_u64(&v, what, text, (uint64_t)lo, (uint64_t)hi);
    if (!rv)
        *out = (int)v;
    return rv;
}

/* A finite number at the start of text; *end after it. */
static int number(double *out, const char *text, char **end)
{
    if (!((text[0] >= '0' && text[0] <= '9') || text[0] == '.' || text[0] == '-' || text[0] == '+'))
        return -1;
    errno = 0;
    double v = strtod(text, end);
    if (errno || *end == text || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int ovt_parse_real(double *out, const char *what, const char *text, double lo, double hi)
{
    double v;
    char *end;
    if (number(&v, text, &end) || *end || !(v >= lo && v <= hi))
        return ovt_fail(OVT_EINVAL, "%s expects a number in [%g, %g], got '%s'", what, lo, hi, text);
    *out = v;
    return 0;
}

int ovt_parse_seconds(double *out, const char *what, const char *text, double lo, double hi)
{
    double v, unit = 1;
    char *end;
    int bad = number(&v, text, &end);
    if (!bad && *end) {
        unit = !strcmp(end, "s") ? 1 : !strcmp(end, "m") ? 60 : !strcmp(end, "h") ? 3600 : 0;
        bad = unit == 0;
    }
    if (!bad)
        v *= unit;
    if (bad || !(v >= lo && v <= hi))
        return ovt_fail(OVT_EINVAL, "%s expects a duration in seconds within [%g, %g] (e.g. 600, 90s, 15m, 2h), got '%s'",
                        what, lo, hi, text);
    *out = v;
    return 0;
}

int ovt_parse_size(size_t *out, const char *what, const char *text, size_t lo, size_t hi)
{
    uint64_t v;
    char *end;
    int bad = whole_number(&v, text, &end);
    if (!bad && *end) {
        unsigned shift = !strcmp(end, "k") ? 10 : !strcmp(end, "M") ? 20 : !strcmp(end, "G") ? 30 : 0;
        bad = shift == 0 || v > (UINT64_MAX >> shift);
        if (!bad)
            v <<= shift;
    }
    if (bad || v > SIZE_MAX || v < lo || v > hi)
        return ovt_fail(OVT_EINVAL, "%s expects a size in bytes within %zu..%zu (e.g. 4096, 64k, 16M, 1G), got '%s'",
                        what, lo, hi, text);
    *out = (size_t)v;
    return 0;
}
