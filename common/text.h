#ifndef OVT_COMMON_TEXT_H
#define OVT_COMMON_TEXT_H

/* A growing text buffer for output built piece by piece (CSV, SVG, the
 * metrics page). Start from {0}; on allocation failure it stays failed and
 * later puts do nothing, so the caller checks `failed` once at the end. The
 * text is NUL-terminated whenever len > 0; free(p) when done. */

#include <stddef.h>

#include "common/err.h"

typedef struct {
    char *p;
    size_t len, cap;
    int failed;
} ovt_text;

void ovt_text_put(ovt_text *t, const char *fmt, ...) OVT_PRINTF(2, 3);

#endif
