/* The starting point of a run (see init.h). */
#include "trainer/init.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "kernels/grid.h"

void trn_params_hash(ovt_hash *out, const trn_state *st)
{
    ovt_sha256_le32(out, st->params, st->layout.nparams * sizeof(float));
}

int trn_init_blob_len(const trn_run_config *rc, size_t *len)
{
    *len = 0;
    trn_layout l;
    int rv = trn_layout_build(&l, &rc->model);
    if (rv)
        return rv;
    *len = l.nparams * sizeof(float);
    return 0;
}

int trn_state_start(trn_state **out, const trn_run_config *rc, const uint8_t *params, size_t len)
{
    *out = NULL;
    trn_state *st;
    int rv = trn_state_new(&st, rc);
    if (rv)
        return rv;
    if (!trn_config_has_init(rc)) {
        if (params) {
            trn_state_free(st);
            return ovt_fail(OVT_EINVAL, "parameters given for a run that starts from its seed");
        }
        trn_state_init(st);
        *out = st;
        return 0;
    }
    size_t n = st->layout.nparams;
    if (!params || len != n * sizeof(float)) {
        trn_state_free(st);
        return ovt_fail(OVT_EFORMAT, "the starting parameters are %zu bytes, the model has %zu parameters (%zu bytes)",
                        params ? len : 0, n, n * sizeof(float));
    }
    ovt_copy_le32(st->params, params, n); /* the blob's little-endian floats */
    if ((rv = trn_state_check_start(st))) {
        trn_state_free(st);
        return rv;
    }
    *out = st;
    return 0;
}

int trn_state_check_start(const trn_state *st)
{
    size_t n = st->layout.nparams;
    int b = (int)st->config.grid_bits;
    if (st->step != 0)
        return ovt_fail(OVT_EFORMAT, "the state is at step %llu, not the starting state 0",
                        (unsigned long long)st->step);
    for (size_t i = 0; i < 2 * n; i++)
        if (st->m[i] != 0.0f || signbit(st->m[i])) /* st->m and st->v are contiguous */
            return ovt_fail(OVT_EFORMAT, "starting state: AdamW %s[%zu] is %g, not 0", i < n ? "m" : "v", i % n,
                            (double)st->m[i]);
    for (size_t i = 0; i < n; i++)
        if (!krn_grid_contains(st->params[i], b))
            return ovt_fail(OVT_EFORMAT, "starting parameter %zu is not a finite grid value for b = %d", i, b);
    if (!trn_config_has_init(&st->config)) {
        trn_state *fresh;
        int rv = trn_state_new(&fresh, &st->config);
        if (rv)
            return rv;
        trn_state_init(fresh);
        int same = !memcmp(fresh->params, st->params, n * sizeof(float));
        trn_state_free(fresh);
        return same ? 0 : ovt_fail(OVT_EFORMAT, "starting state: the parameters are not the ones the seed draws");
    }
    ovt_hash h;
    trn_params_hash(&h, st);
    if (memcmp(h.b, st->config.init_hash.b, 32) != 0) {
        char have[65], want[65];
        ovt_hex_encode(have, h.b, 32);
        ovt_hex_encode(want, st->config.init_hash.b, 32);
        return ovt_fail(OVT_EFORMAT, "starting state: its paramsHash %s is not the run config's init_hash %s", have,
                        want);
    }
    return 0;
}
