/* Fault injection for tests and the devnet simulation (trainer/fault.h). */
#include "trainer/fault.h"

#include <math.h>
#include <string.h>

static const char *const fault_names[] = {"none", "bitflip", "poisoned-batch", "skipped-step", "forged-log",
                                           "omitted-log", "bitflip-shard", "kill-rank", "hang-rank"};

int trn_fault_parse(trn_fault_kind *out, const char *name)
{
    for (size_t k = 0; k < sizeof fault_names / sizeof fault_names[0]; k++) {
        if (strcmp(name, fault_names[k]) == 0) {
            *out = (trn_fault_kind)k;
            return 0;
        }
    }
    *out = TRN_FAULT_NONE;
    return ovt_fail(OVT_EINVAL, "unknown trainer fault '%s' (known: none, bitflip, poisoned-batch, "
                                "skipped-step, forged-log, omitted-log, bitflip-shard, kill-rank, hang-rank)", name);
}

const char *trn_fault_name(trn_fault_kind kind)
{
    return (unsigned)kind < sizeof fault_names / sizeof fault_names[0] ? fault_names[kind] : "?";
}

int trn_fault_at(const trn_fault *f, trn_fault_kind kind, uint64_t i)
{
    if (kind == TRN_FAULT_OMITTED_LOG)
        return f->kind == kind && i >= f->step;
    return f->kind == kind && f->step == i;
}

void trn_fault_poison(data_token_batch *tb, data_sample_batch *sb, uint32_t vocab, uint32_t n_class)
{
    if (tb->targets != NULL && vocab > 1)
        for (size_t j = 0; j < (size_t)tb->B * tb->T; j++)
            tb->targets[j] = (int32_t)(((uint32_t)tb->targets[j] + 1) % vocab);
    if (sb->y != NULL && n_class > 1)
        for (size_t j = 0; j < sb->B; j++)
            sb->y[j] = (int32_t)(((uint32_t)sb->y[j] + 1) % n_class);
}

size_t trn_fault_bitflip(trn_state *st)
{
    trn_state_settle(st);
    size_t n = st->layout.nparams;
    size_t start = (size_t)((st->step * UINT64_C(2654435761)) % n);
    for (size_t k = 0; k < n; k++) {
        size_t i = (start + k) % n;
        if (fpclassify(st->params[i]) != FP_NORMAL)
            continue;
        uint32_t bits;
        memcpy(&bits, &st->params[i], sizeof bits);
        bits ^= UINT32_C(1) << 22;
        memcpy(&st->params[i], &bits, sizeof bits);
        return i;
    }
    return n; /* no normal parameter: nothing to flip (never for a real model) */
}

size_t trn_fault_bitflip_grad(float *g, size_t n)
{
    double norm2 = 0;
    for (size_t i = 0; i < n; i++)
        norm2 += (double)g[i] * (double)g[i];
    double limit = ldexp(sqrt(norm2), -16);
    size_t best = n;
    for (size_t i = 0; i < n; i++)
        if (fpclassify(g[i]) == FP_NORMAL && fabs((double)g[i]) <= limit &&
            (best == n || fabs((double)g[i]) > fabs((double)g[best])))
            best = i;
    if (best == n)
        return n;
    uint32_t bits;
    memcpy(&bits, &g[best], sizeof bits);
    bits ^= UINT32_C(1) << 22;
    memcpy(&g[best], &bits, sizeof bits);
    return best;
}
