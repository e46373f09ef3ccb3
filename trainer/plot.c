/* The loss curve as CSV and SVG (trainer/plot.h). */
#include "trainer/plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "common/text.h"

static int finish(ovt_text *t, const char *path)
{
    int rv = t->failed ? ovt_fail(OVT_ENOMEM, "out of memory writing %s", path)
                       : ovt_write_atomic(path, t->p, t->len, 0644);
    free(t->p);
    return rv;
}

int trn_loss_csv_write(const char *path, const trn_loss_row *rows, size_t n)
{
    ovt_text t = {0};
    ovt_text_put(&t, "step,loss,lr,grad_norm,log_entries\n");
    for (size_t i = 0; i < n; i++)
        ovt_text_put(&t, "%llu,%.9g,%.9g,%.9g,%llu\n", (unsigned long long)rows[i].step, rows[i].loss, rows[i].lr,
            rows[i].grad_norm, (unsigned long long)rows[i].log_entries);
    return finish(&t, path);
}

int trn_loss_csv_read(const char *path, trn_loss_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, (size_t)1 << 30);
    if (rv)
        return rv;
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += buf[i] == '\n';
    trn_loss_row *r = calloc(lines + 1, sizeof *r);
    char *s = realloc(buf, len + 1);
    if (!r || !s) {
        free(r);
        free(s ? s : (char *)buf);
        return ovt_fail(OVT_ENOMEM, "out of memory reading %s", path);
    }
    s[len] = '\0';
    size_t k = 0, line = 1;
    char *save = NULL;
    for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save), line++) {
        if (line == 1) {
            if (strcmp(l, "step,loss,lr,grad_norm,log_entries")) {
                rv = ovt_fail(OVT_EFORMAT, "%s: line 1 is not the loss.csv header", path);
                break;
            }
            continue;
        }
        unsigned long long step, entries;
        int used = 0;
        if (sscanf(l, "%llu,%lf,%lf,%lf,%llu%n", &step, &r[k].loss, &r[k].lr, &r[k].grad_norm, &entries, &used) !=
                5 ||
            l[used] != '\0') {
            rv = ovt_fail(OVT_EFORMAT, "%s: line %zu is malformed", path, line);
            break;
        }
        r[k].step = step;
        r[k].log_entries = entries;
        k++;
    }
    free(s);
    if (rv) {
        free(r);
        return rv;
    }
    *rows = r;
    *n = k;
    return 0;
}

/* A "nice" tick spacing (1, 2 or 5 times a power of ten) for about `want`
 * ticks over span. */
static double tick_step(double span, int want)
{
    double raw = span / want, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void put_escaped(ovt_text *t, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': ovt_text_put(t, "&lt;"); break;
        case '>': ovt_text_put(t, "&gt;"); break;
        case '&': ovt_text_put(t, "&amp;"); break;
        case '"': ovt_text_put(t, "&quot;"); break;
        default: ovt_text_put(t, "%c", *s);
        }
    }
}

int trn_loss_svg_write(const char *path, const trn_loss_row *rows, size_t n, const char *title)
{
    const double W = 720, H = 420, L = 70, R = 20, T = 40, B = 55; /* size and margins */
    double x0 = n ? (double)rows[0].step : 0, x1 = n ? (double)rows[n - 1].step : 1;
    double y0 = INFINITY, y1 = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        y0 = fmin(y0, rows[i].loss);
        y1 = fmax(y1, rows[i].loss);
    }
    if (!n) {
        y0 = 0;
        y1 = 1;
    }
    if (x1 <= x0)
        x1 = x0 + 1;
    if (y1 - y0 < 1e-9 * fmax(1, fabs(y1)))
        y1 = y0 + fmax(1e-3, 0.05 * fabs(y0));
    double ys = tick_step(y1 - y0, 6), xs = tick_step(x1 - x0, 8);
    y0 = floor(y0 / ys) * ys;
    y1 = ceil(y1 / ys) * ys;
    double pw = W - L - R, ph = H - T - B;
#define PX(x) (L + ((x) - x0) / (x1 - x0) * pw)
#define PY(y) (T + (y1 - (y)) / (y1 - y0) * ph)
    ovt_text t = {0};
    ovt_text_put(&t, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<title>",
        W, H, W, H);
    put_escaped(&t, title);
    ovt_text_put(&t, "</title>\n<text x=\"%g\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">", W / 2);
    put_escaped(&t, title);
    ovt_text_put(&t, "</text>\n<g stroke=\"#ddd\">\n");
    for (double y = y0; y <= y1 + ys / 2; y += ys)
        ovt_text_put(&t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", L, PY(y), W - R, PY(y));
    ovt_text_put(&t, "</g>\n<g stroke=\"black\">\n<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\"/>\n"
            "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\"/>\n</g>\n",
        L, T, L, H - B, L, H - B, W - R, H - B);
    ovt_text_put(&t, "<g text-anchor=\"end\">\n");
    for (double y = y0; y <= y1 + ys / 2; y += ys)
        ovt_text_put(&t, "<text x=\"%g\" y=\"%.1f\">%g</text>\n", L - 6, PY(y) + 4, fabs(y) < ys / 1e6 ? 0 : y);
    ovt_text_put(&t, "</g>\n<g text-anchor=\"middle\">\n");
    for (double x = ceil(x0 / xs) * xs; x <= x1 + xs / 1e6; x += xs)
        ovt_text_put(&t, "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"black\"/><text x=\"%.1f\" y=\"%g\">%g</text>\n",
            PX(x), H - B, PX(x), H - B + 5, PX(x), H - B + 18, x);
    ovt_text_put(&t, "</g>\n<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step</text>\n", L + pw / 2, H - 12);
    ovt_text_put(&t, "<text x=\"16\" y=\"%g\" text-anchor=\"middle\" transform=\"rotate(-90 16 %g)\">training loss</text>\n",
        T + ph / 2, T + ph / 2);
    if (n) {
        ovt_text_put(&t, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"");
        for (size_t i = 0; i < n; i++)
            ovt_text_put(&t, "%s%.2f,%.2f", i ? " " : "", PX((double)rows[i].step), PY(rows[i].loss));
        ovt_text_put(&t, "\"/>\n");
    } else {
        ovt_text_put(&t, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">no steps yet</text>\n", L + pw / 2, T + ph / 2);
    }
#undef PX
#undef PY
    ovt_text_put(&t, "</svg>\n");
    return finish(&t, path);
}
