/* A party's site hashes for proof of replay (see sites.h). */
#include "party/sites.h"

#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"

static const char magic[8] = {'O', 'V', 'T', 'S', 'I', 'T', 'E', '1'};

static int alloc_sites(party_sites *s, uint64_t count, const ovt_hash *beacon)
{
    memset(s, 0, sizeof *s);
    if (count < 2 || count > CHAIN_MERKLE_MAX_STEPS + 1)
        return ovt_fail(OVT_EINVAL, "site hashes of %llu leaves", (unsigned long long)count);
    if (!(s->hash = calloc(count, sizeof *s->hash)))
        return ovt_fail(OVT_ENOMEM, "site hashes of %llu steps", (unsigned long long)(count - 1));
    s->count = count;
    s->beacon = *beacon;
    return 0;
}

/* The site tree over s->hash. */
static int build(party_sites *s, const ovt_hash *run_id)
{
    ovt_hash *leaves = malloc(s->count * sizeof *leaves);
    if (!leaves)
        return ovt_fail(OVT_ENOMEM, "site leaves of %llu steps", (unsigned long long)(s->count - 1));
    for (uint64_t i = 0; i < s->count; i++)
        chain_merkle_site_leaf_hash(&leaves[i], run_id, i, &s->hash[i]);
    int rv = chain_merkle_build(&s->tree, leaves, s->count);
    free(leaves);
    if (rv)
        party_sites_free(s);
    return rv;
}

int party_sites_from_report(party_sites *out, const aud_report *r, const ovt_hash *beacon, const ovt_hash *run_id)
{
    memset(out, 0, sizeof *out);
    if (!r->site_roots || r->finding != AUD_VERIFIED || r->partial)
        return ovt_fail(OVT_EINVAL, "proof of replay needs a whole replay that agrees with the run, every step "
                                    "traced (the audit with its site roots)");
    bool one = r->site_stride == 1 && r->nsites > 1;
    if (one && memcmp(r->site_beacon.b, beacon->b, 32) != 0)
        return ovt_fail(OVT_EINVAL, "the replay kept the site of another beacon");
    uint32_t s = one ? 0 : chain_arb_site_index(beacon, r->nsites);
    int rv = alloc_sites(out, r->steps + 1, beacon);
    if (rv)
        return rv;
    for (uint64_t i = 1; i < out->count; i++)
        out->hash[i] = r->site_roots[i * r->site_stride + s];
    return build(out, run_id);
}

int party_sites_guess(party_sites *out, const aud_report *r, uint64_t from, const ovt_hash *beacon,
                      const ovt_hash *run_id)
{
    const trn_step_table *t = &r->trainer;
    if (from > 1 && !r->site_roots)
        return ovt_fail(OVT_EINVAL, "a lazy auditor that replayed steps 1..%llu needs their site roots",
                        (unsigned long long)(from - 1));
    int rv = alloc_sites(out, t->count, beacon);
    if (rv)
        return rv;
    bool one = r->site_stride == 1 && r->nsites > 1;
    uint32_t s = r->site_roots && !one ? chain_arb_site_index(beacon, r->nsites) : 0;
    for (uint64_t i = 1; i < out->count; i++) {
        if (i < from) {
            out->hash[i] = r->site_roots[i * r->site_stride + s];
            continue;
        }
        uint8_t buf[8 + 32];
        memcpy(buf, "ovt.lazy", 8);
        memcpy(buf + 8, t->steps[i].state_hash.b, 32);
        ovt_sha256(&out->hash[i], buf, sizeof buf);
    }
    return build(out, run_id);
}

int party_sites_compute(party_sites *out, const char *run_dir, const char *data_path, const ovt_hash *beacon,
                        const ovt_hash *run_id)
{
    memset(out, 0, sizeof *out);
    aud_replay_opts ro = {.run_dir = run_dir, .data_path = data_path, .backend = KRN_BACKEND_CPU, .sites = true,
                          .site_beacon = beacon};
    aud_report r;
    int rv = aud_replay(&ro, &r);
    if (rv)
        return ovt_fail_wrap(rv, "replaying the trainer's own run for its site hashes");
    if (r.finding != AUD_VERIFIED)
        rv = ovt_fail(OVT_EFORMAT, "the trainer's own run does not replay to its step table (step %llu differs)",
                      (unsigned long long)r.step);
    else
        rv = party_sites_from_report(out, &r, beacon, run_id);
    aud_report_free(&r);
    return rv;
}

int party_sites_save(const party_sites *s, const char *dir)
{
    char path[4096];
    int rv = ovt_path_join(path, sizeof path, dir, "sites.bin");
    if (rv)
        return rv;
    uint8_t head[8 + 32 + 8];
    memcpy(head, magic, 8);
    memcpy(head + 8, s->beacon.b, 32);
    ovt_put_le64(head + 40, s->count);
    ovt_span parts[2] = {{head, sizeof head}, {s->hash, s->count * sizeof *s->hash}};
    return ovt_write_atomic_parts(path, parts, 2, 0644);
}

int party_sites_load(party_sites *out, const char *dir, const ovt_hash *beacon, const ovt_hash *run_id)
{
    memset(out, 0, sizeof *out);
    char path[4096];
    uint8_t *buf = NULL;
    size_t len = 0;
    int rv = ovt_path_join(path, sizeof path, dir, "sites.bin");
    if (rv || (rv = ovt_read_file(path, &buf, &len, (size_t)1 << 34)))
        return rv;
    uint64_t count = len >= 48 ? ovt_get_le64(buf + 40) : 0;
    if (len < 48 || memcmp(buf, magic, 8) != 0 || count < 2 || (len - 48) / 32 != count || (len - 48) % 32)
        rv = ovt_fail(OVT_EFORMAT, "%s is not a site hash file (docs/formats.md, \"Site hashes\")", path);
    else if (memcmp(buf + 8, beacon->b, 32) != 0)
        rv = ovt_fail(OVT_EFORMAT, "%s holds the site hashes of another beacon: delete it to compute them again", path);
    else if (!(rv = alloc_sites(out, count, beacon)))
        memcpy(out->hash, buf + 48, count * 32);
    free(buf);
    return rv ? rv : build(out, run_id);
}

void party_sites_free(party_sites *s)
{
    free(s->hash);
    chain_merkle_free(s->tree);
    memset(s, 0, sizeof *s);
}
