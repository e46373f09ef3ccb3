/* Fault injection for tests and the devnet simulation (trainer/fault.h). */
#include "trainer/fault.h"
#include "trainer/state_hash.h"
#include "kernels/trace.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const fault_names[] = {"none", "bitflip", "poisoned-batch", "skipped-step", "forged-log",
                                           "omitted-log", "bitflip-shard", "kill-rank", "hang-rank", "flip-entry",
                                           "steer-up", "steer-down", "hidden-flip", "flip-output",
                                           "false-table"};

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
                                "skipped-step, forged-log, omitted-log, bitflip-shard, kill-rank, hang-rank, flip-entry, steer-up, steer-down, hidden-flip, flip-output, false-table)",
                    name);
}

const char *trn_fault_name(trn_fault_kind kind)
{
    return (unsigned)kind < sizeof fault_names / sizeof fault_names[0] ? fault_names[kind] : "?";
}

int trn_fault_at(const trn_fault *f, trn_fault_kind kind, uint64_t i)
{
    if (kind == TRN_FAULT_OMITTED_LOG || kind == TRN_FAULT_STEER_UP || kind == TRN_FAULT_STEER_DOWN)
        return f->kind == kind && i >= f->step;
    return f->kind == kind && f->step == i;
}

int trn_fault_before_step(const trn_fault *f, uint64_t i, dp_ctx *dp, krn_ctx *ctx, const trn_state *st,
                          data_token_batch *tb, data_sample_batch *sb, float **kept)
{
    *kept = NULL;
    int rank = dp ? dp_rank(dp) : -1;
    if (trn_fault_at(f, TRN_FAULT_HANG_RANK, i) && f->timeout_s > 0)
        dp_set_timeout(dp, f->timeout_s);
    if (rank >= 0 && (uint32_t)rank == f->rank && trn_fault_at(f, TRN_FAULT_KILL_RANK, i))
        raise(SIGKILL);
    while (rank >= 0 && (uint32_t)rank == f->rank && trn_fault_at(f, TRN_FAULT_HANG_RANK, i))
        sleep(1); /* until mpirun ends the job */
    if (trn_fault_at(f, TRN_FAULT_POISONED_BATCH, i))
        trn_fault_poison(tb, sb, st->config.model.vocab, st->config.model.n_class);
    if (trn_fault_at(f, TRN_FAULT_FORGED_LOG, i))
        krn_ctx_forge_next_site(ctx);
    if (trn_fault_at(f, TRN_FAULT_HIDDEN_FLIP, i))
        krn_ctx_forge_hidden(ctx);
    if (trn_fault_at(f, TRN_FAULT_FLIP_ENTRY, i))
        krn_ctx_flip_entry(ctx, f->site, f->element);
    if (trn_fault_at(f, TRN_FAULT_FLIP_OUTPUT, i)) /* a deep fault: bit 22, the top of the mantissa */
        krn_ctx_flip_output_bit(ctx, f->site, f->element, 22);
    krn_ctx_steer(ctx, trn_fault_at(f, TRN_FAULT_STEER_UP, i) ? 1 : trn_fault_at(f, TRN_FAULT_STEER_DOWN, i) ? -1 : 0);
    if (trn_fault_at(f, TRN_FAULT_SKIPPED_STEP, i)) {
        /* the log is the one step K writes (an empty one would be a log
         * with missing entries, fraud under contract version 2: this fault
         * is about the state); the update is discarded after the step */
        size_t bytes = 3 * st->layout.nparams * sizeof(float);
        if ((*kept = malloc(bytes)) == NULL)
            return ovt_fail(OVT_ENOMEM, "out of memory for a copy of state %llu", (unsigned long long)(i - 1));
        memcpy(*kept, st->mem, bytes);
    }
    return 0;
}

int trn_fault_after_step(const trn_fault *f, uint64_t i, int rv, const krn_ctx *ctx, trn_state *st, float **kept)
{
    if (*kept) {
        memcpy(st->mem, *kept, 3 * st->layout.nparams * sizeof(float));
        free(*kept);
        *kept = NULL;
        st->step = i;
    }
    bool forge = trn_fault_at(f, TRN_FAULT_FORGED_LOG, i) || trn_fault_at(f, TRN_FAULT_HIDDEN_FLIP, i);
    if (!rv && forge && !krn_ctx_forged(ctx))
        rv = ovt_fail(OVT_EINVAL, "--inject-fault %s: no element of step %llu could be forged (try another "
                      "--fault-step)", trn_fault_name(f->kind), (unsigned long long)i);
    if (!rv && trn_fault_at(f, TRN_FAULT_FLIP_ENTRY, i) && !krn_ctx_flipped(ctx))
        rv = ovt_fail(OVT_EINVAL, "--inject-fault flip-entry: step %llu has no direction entry for element %llu "
                      "of site %u (`ovt rlog RUNDIR --step K --entries` lists them)", (unsigned long long)i,
                      (unsigned long long)f->element, f->site);
    if (!rv && trn_fault_at(f, TRN_FAULT_FLIP_OUTPUT, i) && !krn_ctx_output_flipped(ctx))
        rv = ovt_fail(OVT_EINVAL, "--inject-fault flip-output: step %llu has no site %u", (unsigned long long)i,
                      f->site);
    if (!rv && trn_fault_at(f, TRN_FAULT_BITFLIP, i))
        trn_fault_bitflip(st);
    return rv;
}

int trn_fault_on_log(const trn_fault *f, uint64_t i, krn_rlog *log)
{
    if (trn_fault_at(f, TRN_FAULT_OMITTED_LOG, i))
        krn_rlog_drop_sites_from(log, 0);
    if (!trn_fault_at(f, TRN_FAULT_FALSE_TABLE, i))
        return 0;
    uint32_t S = krn_rlog_nshards(log);
    if (f->shard >= S)
        return ovt_fail(OVT_EINVAL, "--inject-fault false-table: step %llu's log has %u shard hash(es), not shard %u "
                                    "(a sharded run: --shards S >= 2, --fault-shard J in 0..S-1)",
                        (unsigned long long)i, S, f->shard);
    ovt_hash *table = malloc(S * sizeof *table);
    if (table == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for step %llu's shard table", (unsigned long long)i);
    for (uint32_t s = 0; s < S; s++)
        table[s] = *krn_rlog_shard_hash(log, s);
    table[f->shard].b[0] ^= 1; /* the table lies about shard J; the step and its state stay honest */
    int rv = krn_rlog_set_shards(log, table, S);
    free(table);
    return rv;
}

uint64_t trn_fault_shard_step(const trn_fault *f)
{
    return f->kind == TRN_FAULT_BITFLIP_SHARD ? f->step : 0;
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
