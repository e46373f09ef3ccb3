/* `ovt rlog RUNDIR --step K --sites`: step K of a small honest gpt2-tiny
 * run re-executed with per-site counts, checked against the log itself
 * (decoded here, independently of the command): each site's entries column
 * is the log's count for that site and every logged site has a row; no site
 * has more elements within tau/2 than within tau; and since the run was
 * recorded on the cpu backend and is replayed there with the same values,
 * every element within tau is logged and nothing else is (contract version
 * 2: RECORD logs exactly the elements with d <= tau, zeros included, so
 * entries == <=tau on every banded site). Then the table and file forms as
 * text, a log emptied of its entries (rows up to the failing site, whose
 * elements within tau/2 have no entry: a missing entry, status 1), and the
 * usage errors. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/fileio.h"
#include "kernels/rlog.h"
#include "support/cli_fixture.h"

static char *slurp_out(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (ovt_read_file(path, &buf, &len, 1 << 24))
        return NULL;
    char *s = realloc(buf, len + 1);
    if (s)
        s[len] = 0;
    return s;
}

static json_t *out_json(void)
{
    char *s = slurp_out();
    json_error_t err;
    json_t *j = s ? json_loads(s, 0, &err) : NULL;
    if (!j)
        fprintf(stderr, "not JSON: %s\n", s ? s : "(no output)");
    free(s);
    return j;
}

static uint64_t jint(json_t *o, const char *key)
{
    return (uint64_t)json_integer_value(json_object_get(o, key));
}

int main(void)
{
    if (cli_setup("trn-rlog-sites"))
        return 1;
    char data[256], run[256], logpath[512];
    snprintf(data, sizeof data, "%s/text", dir);
    char text[6000];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (char)('a' + (i * 7 + i / 13) % 26);
    CHECK(ovt_write_atomic(data, text, sizeof text, 0644) == 0);
    snprintf(run, sizeof run, "%s/run", dir);
    CHECK(run_ovt("train --model gpt2-tiny --backend cpu --data %s --out %s --steps 3 --batch 2 --seq 16 "
                  "--every 0",
                  data, run) == 0);

    /* the log of step 2, decoded here */
    snprintf(logpath, sizeof logpath, "%s/logs/step-00000002.rlog", run);
    krn_rlog *log = krn_rlog_new();
    CHECK(krn_rlog_read_file(log, logpath) == 0);
    CHECK(krn_rlog_nentries(log) > 0);

    CHECK(run_ovt("rlog %s --step 2 --sites --data %s --json", run, data) == 0);
    json_t *j = out_json();
    CHECK(j != NULL);
    json_t *rows = json_object_get(j, "sites");
    size_t nrows = json_array_size(rows), banded = 0, logged_rows = 0;
    uint64_t sum_entries = 0, sum_half = 0, sum_tau = 0;
    CHECK(nrows > 10);
    CHECK(j && strcmp(json_string_value(json_object_get(j, "result")), "ok") == 0);
    for (size_t i = 0; i < nrows; i++) {
        json_t *r = json_array_get(rows, i);
        uint32_t site = (uint32_t)jint(r, "site");
        uint64_t n = jint(r, "n"), e = jint(r, "entries"), half = jint(r, "within_half_tau"),
                 tau = jint(r, "within_tau");
        CHECK_EQ_U64(site, i); /* one row per site, in execution order */
        const krn_rlog_site *ls = krn_rlog_find(log, site);
        CHECK_EQ_U64(e, ls ? ls->count : 0);
        if (ls) {
            CHECK_EQ_U64(ls->n, n);
            logged_rows++;
        }
        CHECK_MSG(half <= tau && tau <= n, "site %u: %llu within tau/2, %llu within tau, n %llu", site,
                  (unsigned long long)half, (unsigned long long)tau, (unsigned long long)n);
        if (json_is_true(json_object_get(r, "banded"))) {
            banded++;
            CHECK_MSG(e == tau, "site %u (%s): %llu entries but %llu elements within tau", site,
                      json_string_value(json_object_get(r, "op")), (unsigned long long)e,
                      (unsigned long long)tau);
        } else {
            CHECK(e == 0 && tau == 0);
        }
        sum_entries += e;
        sum_half += half;
        sum_tau += tau;
    }
    CHECK(banded > 0);
    CHECK_EQ_U64(logged_rows, krn_rlog_nsites(log)); /* every logged site has its row */
    CHECK_EQ_U64(sum_entries, krn_rlog_nentries(log));
    json_t *tot = json_object_get(j, "totals");
    CHECK_EQ_U64(jint(tot, "entries"), sum_entries);
    CHECK_EQ_U64(jint(tot, "within_half_tau"), sum_half);
    CHECK_EQ_U64(jint(tot, "within_tau"), sum_tau);
    CHECK(sum_half > 0 && sum_half < sum_tau);
    json_decref(j);

    /* the table as text, and the file form of the same log */
    CHECK(run_ovt("rlog %s --step 2 --sites --data %s --threads 1", run, data) == 0);
    CHECK(output_has("<=tau/2") && output_has("entries") && output_has("total"));
    char *table = slurp_out();
    if (table)
        printf("%s", table);
    free(table);
    CHECK(run_ovt("rlog %s --step 2", run) == 0);
    char want[64];
    snprintf(want, sizeof want, "entries  %llu ", (unsigned long long)krn_rlog_nentries(log));
    CHECK(output_has(want));

    /* step 2's log emptied: the table ends at the first site with an
     * element within tau/2, which has no entry (a missing entry) */
    krn_rlog *empty = krn_rlog_new();
    krn_rlog_reset(empty, 2);
    CHECK(krn_rlog_write_file(empty, logpath) == 0);
    CHECK(run_ovt("rlog %s --step 2 --sites --data %s --json", run, data) == 1);
    j = out_json();
    CHECK(j && strcmp(json_string_value(json_object_get(j, "result")), "fraud") == 0);
    const char *err = j ? json_string_value(json_object_get(j, "error")) : NULL;
    CHECK_MSG(err && strstr(err, "missing entry"), "%s", err ? err : "(no error)");
    rows = json_object_get(j, "sites");
    nrows = json_array_size(rows);
    CHECK(nrows > 0);
    for (size_t i = 0; i < nrows; i++) {
        json_t *r = json_array_get(rows, i);
        CHECK(jint(r, "entries") == 0);
        /* only the last row (the failing site) has elements within tau/2 */
        CHECK((jint(r, "within_half_tau") > 0) == (i == nrows - 1));
    }
    json_decref(j);
    CHECK(run_ovt("rlog %s --step 2 --sites --data %s", run, data) == 1);
    CHECK(output_has("FRAUD") && output_has("missing entry"));

    /* usage */
    CHECK(run_ovt("rlog --sites %s", run) == 2);
    CHECK(run_ovt("rlog %s --step 2 --sites --entries --data %s", run, data) == 2);
    CHECK(run_ovt("rlog %s --step 2 --data %s", run, data) == 2);
    CHECK(run_ovt("rlog %s --step 9 --sites --data %s", run, data) == 1);
    CHECK(run_ovt("rlog --help") == 0);
    CHECK(output_has("--sites") && output_has("<=tau/2"));

    krn_rlog_free(empty);
    krn_rlog_free(log);
    cli_cleanup();
    return check_done();
}
