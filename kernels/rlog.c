/* The rounding log of one step in memory: sites in increasing order, each
 * with its entries in increasing element order. The file format is in
 * rlog_codec.c. */
#include "kernels/rlog.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct krn_rlog {
    uint64_t step;
    krn_rlog_site *sites;
    size_t nsites;
    size_t cap_sites;
    size_t *cap_entries; /* capacity of sites[i].entries */
    uint64_t nentries;
    uint32_t nshards;
    ovt_hash *shards; /* nshards of them */
};

krn_rlog *krn_rlog_new(void)
{
    return calloc(1, sizeof(krn_rlog));
}

static void free_sites(krn_rlog *log)
{
    for (size_t i = 0; i < log->nsites; i++)
        free(log->sites[i].entries);
    log->nsites = 0;
    log->nentries = 0;
}

void krn_rlog_free(krn_rlog *log)
{
    if (log == NULL)
        return;
    free_sites(log);
    free(log->sites);
    free(log->cap_entries);
    free(log->shards);
    free(log);
}

void krn_rlog_reset(krn_rlog *log, uint64_t step)
{
    free_sites(log);
    free(log->shards);
    log->shards = NULL;
    log->nshards = 0;
    log->step = step;
}

int krn_rlog_set_shards(krn_rlog *log, const ovt_hash *hashes, uint32_t S)
{
    if (S == 1 || S > KRN_RLOG_MAX_SHARDS)
        return ovt_fail(OVT_EINVAL, "rounding log: a shard table of %u shards (2..%u, or none)", S,
                        KRN_RLOG_MAX_SHARDS);
    ovt_hash *t = NULL;
    if (S > 0) {
        t = malloc(S * sizeof *t);
        if (t == NULL)
            return ovt_fail(OVT_ENOMEM, "rounding log: out of memory for a shard table");
        memcpy(t, hashes, S * sizeof *t);
    }
    free(log->shards);
    log->shards = t;
    log->nshards = S;
    return 0;
}

uint32_t krn_rlog_nshards(const krn_rlog *log)
{
    return log->nshards;
}

const ovt_hash *krn_rlog_shard_hash(const krn_rlog *log, uint32_t j)
{
    return j < log->nshards ? &log->shards[j] : NULL;
}

void krn_rlog_drop_sites_from(krn_rlog *log, uint32_t end)
{
    while (log->nsites > 0 && log->sites[log->nsites - 1].site >= end) {
        krn_rlog_site *s = &log->sites[--log->nsites];
        log->nentries -= s->count;
        free(s->entries);
        s->entries = NULL;
        s->count = 0;
        log->cap_entries[log->nsites] = 0;
    }
}

int krn_rlog_shift_sites(krn_rlog *log, uint32_t delta)
{
    if (log->nsites > 0 && log->sites[log->nsites - 1].site > UINT32_MAX - delta)
        return ovt_fail(OVT_EINVAL, "rounding log: site %u + %u passes 2^32 - 1",
                        log->sites[log->nsites - 1].site, delta);
    for (size_t i = 0; i < log->nsites; i++)
        log->sites[i].site += delta;
    return 0;
}

uint64_t krn_rlog_step(const krn_rlog *log)
{
    return log->step;
}

size_t krn_rlog_nsites(const krn_rlog *log)
{
    return log->nsites;
}

const krn_rlog_site *krn_rlog_site_at(const krn_rlog *log, size_t i)
{
    return i < log->nsites ? &log->sites[i] : NULL;
}

uint64_t krn_rlog_nentries(const krn_rlog *log)
{
    return log->nentries;
}

const krn_rlog_site *krn_rlog_find(const krn_rlog *log, uint32_t site)
{
    size_t lo = 0, hi = log->nsites;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (log->sites[mid].site < site)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < log->nsites && log->sites[lo].site == site ? &log->sites[lo] : NULL;
}

static int check_entry(uint32_t site, uint64_t n, const krn_rlog_entry *e)
{
    if (e->index >= n)
        return ovt_fail(OVT_EINVAL, "rounding log: site %u: entry index %llu is not below n = %llu",
                        site, (unsigned long long)e->index, (unsigned long long)n);
    if (e->dir != KRN_DIR_DOWN && e->dir != KRN_DIR_UP && e->dir != KRN_DIR_VALUE)
        return ovt_fail(OVT_EINVAL, "rounding log: site %u: entry %llu has an unknown kind %d", site,
                        (unsigned long long)e->index, (int)e->dir);
    if (e->dir == KRN_DIR_VALUE && !isfinite(e->value))
        return ovt_fail(OVT_EINVAL, "rounding log: site %u: entry %llu has a non-finite value", site,
                        (unsigned long long)e->index);
    return 0;
}

/* Makes room for `more` entries in the last site. */
static int reserve_entries(krn_rlog *log, size_t more)
{
    size_t last = log->nsites - 1;
    krn_rlog_site *s = &log->sites[last];
    if (s->count + more <= log->cap_entries[last])
        return 0;
    size_t cap = log->cap_entries[last] ? log->cap_entries[last] : 8;
    while (cap < s->count + more)
        cap *= 2;
    krn_rlog_entry *e = realloc(s->entries, cap * sizeof *e);
    if (e == NULL)
        return ovt_fail(OVT_ENOMEM, "rounding log: out of memory for %zu entries", cap);
    s->entries = e;
    log->cap_entries[last] = cap;
    return 0;
}

/* Opens site `site` at the end of the log, or continues it if it is the
 * last one. */
static int open_site(krn_rlog *log, uint32_t site, uint64_t n)
{
    if (log->nsites > 0) {
        krn_rlog_site *last = &log->sites[log->nsites - 1];
        if (last->site == site) {
            if (last->n != n)
                return ovt_fail(OVT_EINVAL, "rounding log: site %u has n = %llu, not %llu", site,
                                (unsigned long long)last->n, (unsigned long long)n);
            return 0;
        }
        if (last->site > site)
            return ovt_fail(OVT_EINVAL, "rounding log: site %u added after site %u", site,
                            last->site);
    }
    if (log->nsites == log->cap_sites) {
        size_t cap = log->cap_sites ? 2 * log->cap_sites : 16;
        krn_rlog_site *s = realloc(log->sites, cap * sizeof *s);
        if (s == NULL)
            return ovt_fail(OVT_ENOMEM, "rounding log: out of memory for %zu sites", cap);
        log->sites = s;
        size_t *c = realloc(log->cap_entries, cap * sizeof *c);
        if (c == NULL)
            return ovt_fail(OVT_ENOMEM, "rounding log: out of memory for %zu sites", cap);
        log->cap_entries = c;
        log->cap_sites = cap;
    }
    log->sites[log->nsites] = (krn_rlog_site){.site = site, .n = n};
    log->cap_entries[log->nsites] = 0;
    log->nsites++;
    return 0;
}

int krn_rlog_add(krn_rlog *log, uint32_t site, uint64_t n, uint64_t index, krn_dir dir, float value)
{
    krn_rlog_entry e = {.index = index, .dir = dir, .value = dir == KRN_DIR_VALUE ? value : 0.0f};
    return krn_rlog_add_site(log, site, n, &e, 1);
}

int krn_rlog_add_site(krn_rlog *log, uint32_t site, uint64_t n, const krn_rlog_entry *entries,
                      size_t count)
{
    if (count == 0)
        return 0;
    uint64_t prev = 0;
    bool have_prev = false;
    if (log->nsites > 0 && log->sites[log->nsites - 1].site == site) {
        const krn_rlog_site *last = &log->sites[log->nsites - 1];
        prev = last->entries[last->count - 1].index;
        have_prev = true;
    }
    for (size_t i = 0; i < count; i++) {
        int rc = check_entry(site, n, &entries[i]);
        if (rc < 0)
            return rc;
        if (have_prev && entries[i].index <= prev)
            return ovt_fail(OVT_EINVAL, "rounding log: site %u: entry %llu added after entry %llu",
                            site, (unsigned long long)entries[i].index, (unsigned long long)prev);
        prev = entries[i].index;
        have_prev = true;
    }
    int rc = open_site(log, site, n);
    if (rc == 0)
        rc = reserve_entries(log, count);
    if (rc < 0) {
        /* never leave an empty site behind */
        if (log->nsites > 0 && log->sites[log->nsites - 1].count == 0) {
            free(log->sites[log->nsites - 1].entries);
            log->nsites--;
        }
        return rc;
    }
    krn_rlog_site *s = &log->sites[log->nsites - 1];
    for (size_t i = 0; i < count; i++) {
        krn_rlog_entry e = entries[i];
        if (e.dir != KRN_DIR_VALUE)
            e.value = 0.0f;
        s->entries[s->count++] = e;
    }
    log->nentries += count;
    return 0;
}

/* The entries of one site present in several logs, in increasing element
 * order, into tmp (count entries in all): a k-way merge by scanning the k
 * heads, k being the number of processes (small). */
static int merge_site(krn_rlog *out, uint32_t site, uint64_t n, const krn_rlog_site **parts, size_t *pos, size_t k,
                      krn_rlog_entry *tmp, size_t count)
{
    for (size_t i = 0; i < k; i++)
        pos[i] = 0;
    uint64_t prev = 0;
    for (size_t m = 0; m < count; m++) {
        size_t best = k;
        for (size_t i = 0; i < k; i++)
            if (pos[i] < parts[i]->count &&
                (best == k || parts[i]->entries[pos[i]].index < parts[best]->entries[pos[best]].index))
                best = i;
        const krn_rlog_entry *e = &parts[best]->entries[pos[best]++];
        if (m > 0 && e->index == prev)
            return ovt_fail(OVT_EINVAL, "rounding log merge: site %u element %llu is logged by two of the logs", site,
                            (unsigned long long)e->index);
        prev = e->index;
        tmp[m] = *e;
    }
    return krn_rlog_add_site(out, site, n, tmp, count);
}

int krn_rlog_merge(krn_rlog *dst, const krn_rlog *const *src, size_t nsrc)
{
    if (nsrc == 0) {
        krn_rlog_reset(dst, dst->step);
        return 0;
    }
    for (size_t j = 1; j < nsrc; j++)
        if (src[j]->step != src[0]->step)
            return ovt_fail(OVT_EINVAL, "rounding log merge: log %zu belongs to step %llu, log 0 to step %llu", j,
                            (unsigned long long)src[j]->step, (unsigned long long)src[0]->step);
    int rc = OVT_ENOMEM;
    krn_rlog *out = krn_rlog_new();
    size_t *cur = calloc(nsrc, sizeof *cur);       /* next site of each log */
    size_t *pos = calloc(nsrc, sizeof *pos);       /* merge cursors */
    const krn_rlog_site **parts = calloc(nsrc, sizeof *parts);
    krn_rlog_entry *tmp = NULL;
    size_t tmp_cap = 0;
    if (out == NULL || cur == NULL || pos == NULL || parts == NULL) {
        rc = ovt_fail(OVT_ENOMEM, "rounding log merge: out of memory");
        goto done;
    }
    out->step = src[0]->step;
    for (;;) {
        /* the smallest site not yet merged, and every log that has it */
        bool any = false;
        uint32_t site = 0;
        for (size_t j = 0; j < nsrc; j++)
            if (cur[j] < src[j]->nsites && (!any || src[j]->sites[cur[j]].site < site)) {
                site = src[j]->sites[cur[j]].site;
                any = true;
            }
        if (!any)
            break;
        size_t k = 0, count = 0;
        uint64_t n = 0;
        for (size_t j = 0; j < nsrc; j++) {
            if (cur[j] >= src[j]->nsites || src[j]->sites[cur[j]].site != site)
                continue;
            const krn_rlog_site *s = &src[j]->sites[cur[j]++];
            if (k > 0 && s->n != n) {
                rc = ovt_fail(OVT_EINVAL, "rounding log merge: site %u has n = %llu in log %zu but %llu in another",
                              site, (unsigned long long)s->n, j, (unsigned long long)n);
                goto done;
            }
            n = s->n;
            parts[k++] = s;
            count += s->count;
        }
        if (k == 1) {
            rc = krn_rlog_add_site(out, site, n, parts[0]->entries, parts[0]->count);
        } else {
            if (count > tmp_cap) {
                krn_rlog_entry *t = realloc(tmp, count * sizeof *t);
                if (t == NULL) {
                    rc = ovt_fail(OVT_ENOMEM, "rounding log merge: out of memory for %zu entries", count);
                    goto done;
                }
                tmp = t;
                tmp_cap = count;
            }
            rc = merge_site(out, site, n, parts, pos, k, tmp, count);
        }
        if (rc < 0)
            goto done;
    }
    if (src[0]->nshards > 0 && (rc = krn_rlog_set_shards(out, src[0]->shards, src[0]->nshards)) < 0)
        goto done;
    /* move out's content into dst */
    krn_rlog swap = *dst;
    *dst = *out;
    *out = swap;
    rc = 0;
done:
    krn_rlog_free(out);
    free(tmp);
    free(parts);
    free(pos);
    free(cur);
    return rc;
}
