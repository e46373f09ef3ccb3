/* A growing text buffer (common/text.h). */
#include "common/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void ovt_text_put(ovt_text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 4096;
        while (cap < t->len + (size_t)n + 1)
            cap *= 2;
        char *q = realloc(t->p, cap);
        if (!q) {
            t->failed = 1;
            return;
        }
        t->p = q;
        t->cap = cap;
    }
}
