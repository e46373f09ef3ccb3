/* bench_block: the arbiter's cost of one block of one site (arbiter/block.h)
 * against the whole step it re-executes today (issue 42; docs/arbiter.md,
 * "One block of one site").
 *
 *   bench_block --model M [--batch B] [--seq T] [--threads N]
 *       the whole step as the arbiter re-executes it (a REPLAY runner with
 *       the trainer's log), then, for the largest site of every op the
 *       block engine knows, one block (its middle leaf) checked and
 *       re-executed from its package as `ovt block check` does; for a sum
 *       over the batch (arbiter/block_chunk.h) also two chunks of that
 *       leaf's chain (a middle one and the last), against the leaf block. Each runs
 *       in a child process, so its peak resident memory is its own
 *       (wait4's ru_maxrss); the ratios are against the whole step measured
 *       in the same run.
 *   bench_block --llama7b [--tokens N] [--threads N]
 *       one block of the largest products of a Llama-7B layer (hidden
 *       4096, MLP 11008, vocabulary 32000) at a batch of N tokens (default
 *       2^20) from generated tensors: only the block's inputs exist (the
 *       rows of the activation it reads, with a proof against a root of
 *       the whole tensor, and the weight). Its time against the whole op's
 *       FLOPs at the rate the block itself reached. Then one chunk of the
 *       MLP's weight gradients' chains (its 128 rows only), their last
 *       step, and a chunk of the gradient norm's chain over Llama-2 7B's
 *       6738415616 parameters.
 *   bench_block --xsum
 *       the exact accumulator's term add (arbiter/xsum.h) against the same
 *       products summed in FP64, in the same run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arbiter/block.h"
#include "arbiter/block_chunk.h"
#include "arbiter/block_file.h"
#include "arbiter/xsum.h"
#include "bench_setup.h"
#include "bench_util.h"
#include "common/fileio.h"
#include "common/tree.h"
#include "kernels/trace.h"
#include "trainer/runner.h"

#define LEAF_ELEMS (OVT_TREE_LEAF_BYTES / 4)

/* What a child reports through its pipe. */
typedef struct {
    int rc;
    double seconds;
    double flops;
    double proof_seconds; /* of seconds: proving the slices (hashing every leaf), measured on its own */
    char msg[200];
} child_report;

/* Runs fn(arg, &report) in a child; *peak_mb its peak resident memory. */
static int in_child(int (*fn)(void *arg, child_report *r), void *arg, child_report *rep, double *peak_mb)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        child_report r = {0};
        r.rc = fn(arg, &r);
        if (r.rc)
            snprintf(r.msg, sizeof r.msg, "%s", ovt_errmsg());
        ssize_t w = write(fd[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    memset(rep, 0, sizeof *rep);
    ssize_t got = read(fd[0], rep, sizeof *rep);
    close(fd[0]);
    int st;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) != pid || got != (ssize_t)sizeof *rep)
        return -1;
    *peak_mb = (double)ru.ru_maxrss / 1024.0;
    return 0;
}

/* ---- a model's step ---- */

typedef struct {
    bench_shape shape;
    char dir[64];
} model_ctx;

static int open_inputs(const model_ctx *m, bench_step_inputs *in)
{
    trn_model_config mc;
    const char *what;
    int rv = trn_model_preset(&mc, m->shape.model);
    return rv ? rv : bench_step_inputs_new(in, &mc, m->shape.B, m->shape.T, &what);
}

/* The chunk packages of leaf `leaf` of a batch sum's site i: a middle
 * chunk and the last (DIR/site-S-chunk-C.blk, listed). */
static int chunk_packages(const model_ctx *m, const trn_run_config *rc, const krn_trace *t, const ovt_hash *root,
                          size_t i, uint64_t leaf, const krn_rlog *log, FILE *list)
{
    arb_block_task task = {.config = rc, .step = 1};
    arb_chunk_info info;
    arb_block_owned own;
    int rv = arb_block_from_trace(&task, &own, t, i, log, leaf);
    if (rv == 0)
        rv = arb_chunk_info_of(&task, &info);
    arb_block_owned_free(&own);
    uint64_t chunks[2] = {info.chunks / 2, info.chunks};
    const krn_trace_record *rec = krn_trace_record_at(t, i);
    for (int k = 0; k < 2 && rv == 0; k++) {
        uint8_t *buf;
        size_t len;
        char path[256];
        double t0 = now();
        if ((rv = arb_chunk_package_make(&buf, &len, rc, t, root, 1, i, leaf, log, chunks[k])))
            break;
        printf("party: site %zu (%s) leaf %llu, the package of chunk %llu of %llu (its chain and state): %.3f s\n",
               i, rec->op, (unsigned long long)leaf, (unsigned long long)chunks[k], (unsigned long long)info.chunks,
               now() - t0);
        fflush(stdout); /* a child: it leaves by _exit */
        snprintf(path, sizeof path, "%s/site-%zu-chunk-%llu.blk", m->dir, i, (unsigned long long)chunks[k]);
        rv = ovt_write_atomic(path, buf, len, 0644);
        free(buf);
        fprintf(list, "%zu %s %llu %llu %zu %llu\n", i, rec->op, (unsigned long long)rec->n,
                (unsigned long long)leaf, len, (unsigned long long)chunks[k]);
    }
    return rv;
}

/* The trainer: records the step with a check-mode trace and writes its log
 * and the package of the middle leaf of the largest site of every op the
 * engine knows (DIR/site-S.blk, listed in DIR/sites.txt). */
static int trainer_child(void *arg, child_report *rep)
{
    const model_ctx *m = arg;
    bench_step_inputs in;
    trn_runner *r = NULL;
    krn_trace *t = NULL;
    int rv = open_inputs(m, &in);
    if (rv)
        return rv;
    if ((rv = bench_runner_open(&r, &in, KRN_RECORD, m->shape.threads)) ||
        (rv = trn_runner_copy_state(r, in.init)) || (rv = krn_trace_new(&t, true)))
        goto done;
    trn_runner_result res;
    if ((rv = trn_runner_trace_next(r, t)))
        goto done;
    double t0 = now();
    if ((rv = trn_runner_step(r, &res)) || (rv = res.trace_rc))
        goto done;
    rep->seconds = now() - t0;
    char path[256];
    snprintf(path, sizeof path, "%s/step.rlog", m->dir);
    if ((rv = krn_rlog_write_file(trn_runner_log(r), path)))
        goto done;
    ovt_hash root = res.trace_root;
    snprintf(path, sizeof path, "%s/sites.txt", m->dir);
    FILE *list = fopen(path, "w");
    if (!list) {
        rv = ovt_fail(OVT_EIO, "cannot write %s", path);
        goto done;
    }
    size_t n = krn_trace_count(t);
    for (size_t i = 0; i < n && !rv; i++) {
        const krn_trace_record *rec = krn_trace_record_at(t, i);
        bool largest = arb_block_supported(rec->op);
        for (size_t j = 0; j < n && largest; j++) {
            const krn_trace_record *o = krn_trace_record_at(t, j);
            if (j != i && !strcmp(o->op, rec->op) && (o->n > rec->n || (o->n == rec->n && j < i)))
                largest = false;
        }
        if (!largest)
            continue;
        uint8_t *buf;
        size_t len;
        uint64_t leaf = ovt_tree_leaves(rec->n * 4) / 2;
        rv = arb_block_package_make(&buf, &len, &in.rc, t, &root, 1, i, leaf, trn_runner_log(r));
        if (rv)
            break;
        snprintf(path, sizeof path, "%s/site-%zu.blk", m->dir, i);
        rv = ovt_write_atomic(path, buf, len, 0644);
        free(buf);
        fprintf(list, "%zu %s %llu %llu %zu -1\n", i, rec->op, (unsigned long long)rec->n, (unsigned long long)leaf,
                len);
        if (!rv && arb_chunk_supported(rec->op))
            rv = chunk_packages(m, &in.rc, t, &root, i, leaf, trn_runner_log(r), list);
    }
    fclose(list);
done:
    krn_trace_free(t);
    trn_runner_free(r);
    bench_step_inputs_free(&in);
    return rv;
}

/* The arbiter today: the whole step, REPLAY with the trainer's log. */
static int whole_child(void *arg, child_report *rep)
{
    const model_ctx *m = arg;
    bench_step_inputs in;
    trn_runner *r = NULL;
    int rv = open_inputs(m, &in);
    if (rv)
        return rv;
    char path[256];
    snprintf(path, sizeof path, "%s/step.rlog", m->dir);
    trn_runner_result res;
    if (!(rv = bench_runner_open(&r, &in, KRN_REPLAY, m->shape.threads)) &&
        !(rv = trn_runner_copy_state(r, in.init)) && !(rv = krn_rlog_read_file(trn_runner_log(r), path))) {
        double t0 = now();
        rv = trn_runner_step(r, &res);
        rep->seconds = now() - t0;
    }
    trn_runner_free(r);
    bench_step_inputs_free(&in);
    return rv;
}

typedef struct {
    const char *path;
    int threads;
} block_job;

/* The arbiter with one block: `ovt block check FILE`'s work. */
static int block_child(void *arg, child_report *rep)
{
    const block_job *j = arg;
    double t0 = now();
    uint8_t *buf;
    size_t len;
    arb_block_package p;
    arb_block_result r;
    int rv = ovt_read_file(j->path, &buf, &len, (size_t)4 << 30);
    if (rv)
        return rv;
    rv = arb_block_package_read(&p, buf, len);
    free(buf);
    if (rv)
        return rv;
    p.task.threads = j->threads;
    if (p.version == ARB_BLOCK_VERSION_CHUNK) { /* `ovt block check` of a chunk package */
        ovt_hash node;
        if ((rv = arb_chunk_package_run(&p, &node, NULL)) == 0) {
            rep->seconds = now() - t0;
            if (memcmp(node.b, p.chunk.node.b, 32) != 0)
                rv = ovt_fail(OVT_EINVAL, "the chunk's node is not the packing party's");
        }
    } else if ((rv = arb_block_run(&p.task, &r)) == 0) {
        rep->seconds = now() - t0;
        if (memcmp(r.leaf.b, p.claim.b, 32) != 0)
            rv = ovt_fail(OVT_EINVAL, "the block is not the trainer's leaf");
        arb_block_result_free(&r);
    }
    arb_block_package_free(&p);
    return rv;
}

static int bench_model(bench_shape s)
{
    model_ctx m = {.shape = s};
    snprintf(m.dir, sizeof m.dir, "/tmp/bench-block-XXXXXX");
    if (!mkdtemp(m.dir))
        return 1;
    child_report rep;
    double peak;
    if (in_child(trainer_child, &m, &rep, &peak) || rep.rc) {
        fprintf(stderr, "bench_block: trainer: %s\n", rep.msg);
        return 1;
    }
    printf("%s, batch %u, seq %u, %d threads; trainer's traced RECORD step %.2f s, peak %.0f MB\n", s.model, s.B,
           s.T, s.threads, rep.seconds, peak);
    double whole_s, whole_mb;
    if (in_child(whole_child, &m, &rep, &whole_mb) || rep.rc) {
        fprintf(stderr, "bench_block: whole step: %s\n", rep.msg);
        return 1;
    }
    whole_s = rep.seconds;
    printf("arbiter, whole step (REPLAY)            %9.3f s  %8.0f MB   (the baseline: 1)\n", whole_s, whole_mb);
    printf("arbiter, one block (middle leaf of the op's largest site), `ovt block check`:\n");
    printf("%-24s %6s %11s %10s %9s %8s %9s %9s\n", "op", "site", "elements", "package", "time s", "MB",
           "time/step", "MB/step");
    printf("%-24s %6s %11s %10s %9s %8s %9s %9s\n", "  its chunk c of C", "", "", "", "", "", "time/leaf",
           "MB/leaf");
    char path[256], line[256];
    snprintf(path, sizeof path, "%s/sites.txt", m.dir);
    FILE *list = fopen(path, "r");
    double worst_s = 0, worst_mb = 0, leaf_s = 0, leaf_mb = 0, chunk_s = 0, chunk_mb = 0;
    int rv = list ? 0 : 1;
    while (list && fgets(line, sizeof line, list)) {
        size_t site, len;
        char op[64];
        unsigned long long n, leaf;
        long long chunk;
        if (sscanf(line, "%zu %63s %llu %llu %zu %lld", &site, op, &n, &leaf, &len, &chunk) != 6)
            continue;
        char file[256];
        if (chunk >= 0)
            snprintf(file, sizeof file, "%s/site-%zu-chunk-%lld.blk", m.dir, site, chunk);
        else
            snprintf(file, sizeof file, "%s/site-%zu.blk", m.dir, site);
        block_job j = {.path = file, .threads = s.threads};
        if (in_child(block_child, &j, &rep, &peak) || rep.rc) {
            fprintf(stderr, "bench_block: site %zu (%s): %s\n", site, op, rep.msg);
            rv = 1;
            continue;
        }
        if (chunk >= 0) { /* against the leaf block of the same site, the line before */
            char name[32];
            snprintf(name, sizeof name, "  chunk %lld", chunk);
            printf("%-24s %6zu %11llu %9.2fM %9.4f %8.0f %9.4f %9.3f\n", name, site, n, (double)len / 1e6,
                   rep.seconds, peak, rep.seconds / leaf_s, peak / leaf_mb);
            chunk_s = rep.seconds > chunk_s ? rep.seconds : chunk_s;
            chunk_mb = peak > chunk_mb ? peak : chunk_mb;
            continue;
        }
        printf("%-24s %6zu %11llu %9.2fM %9.4f %8.0f %9.4f %9.3f\n", op, site, n, (double)len / 1e6, rep.seconds,
               peak, rep.seconds / whole_s, peak / whole_mb);
        leaf_s = rep.seconds;
        leaf_mb = peak;
        worst_s = rep.seconds > worst_s ? rep.seconds : worst_s;
        worst_mb = peak > worst_mb ? peak : worst_mb;
    }
    if (list)
        fclose(list);
    printf("slowest block %.4f s (%.4f of the step), largest %.0f MB (%.3f of the step); slowest chunk block "
           "%.4f s (%.4f of the step), largest %.0f MB (%.3f of the step)\n",
           worst_s, worst_s / whole_s, worst_mb, worst_mb / whole_mb, chunk_s, chunk_s / whole_s, chunk_mb,
           chunk_mb / whole_mb);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", m.dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", m.dir);
    return rv;
}

/* ---- one op at Llama-7B's shapes, generated ---- */

typedef struct {
    const char *name; /* what it is */
    const char *op;   /* its site's op */
    uint64_t N, C, OC; /* out (N,OC) = inp (N,C) @ w (OC,C)^T; dinp: out (N,C) from dout (N,OC);
                          xent.sum: out (N) the sums of probs (N,C) */
    int threads;
    bool one;          /* one element of the leaf (the span of one), not the leaf */
} op7b;

/* Values of a normal-ish spread on the FP32 grid (a generator, not data);
 * scale < 0: their magnitudes (probabilities). */
static void fill_values(float *v, size_t n, uint64_t seed, float scale)
{
    bool positive = scale < 0;
    scale = positive ? -scale : scale;
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double u = (double)(x >> 11) / 9007199254740992.0;
        v[i] = (float)((u - 0.5) * 3.4641016151377544 * scale); /* variance scale^2 */
        if (positive && v[i] < 0)
            v[i] = -v[i];
    }
}

/* A slice of leaves [first, first + count) of a source of n elements with
 * generated values, proved against the root a generated rest of the tree
 * gives (random siblings). */
static int gen_slice(arb_block_slice *s, krn_trace_kind kind, uint32_t site, const char *name, uint64_t n,
                     uint64_t first, uint64_t count, uint64_t seed, float scale)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->site = site;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->n = n;
    s->first_leaf = first;
    s->nleaves = count;
    uint64_t e0 = first * LEAF_ELEMS, e1 = (first + count) * LEAF_ELEMS;
    e1 = e1 < n ? e1 : n;
    uint64_t leaves = ovt_tree_leaves(n * 4);
    s->proof_len = ovt_tree_proof_len(leaves, first, count);
    s->data = malloc((e1 - e0) * 4);
    s->proof = malloc((s->proof_len + 1) * sizeof *s->proof);
    ovt_hash *h = malloc(count * sizeof *h);
    if (!s->data || !s->proof || !h)
        return ovt_fail(OVT_ENOMEM, "out of memory for a generated slice");
    fill_values(s->data, e1 - e0, seed, scale);
    for (size_t k = 0; k < s->proof_len; k++)
        for (int b = 0; b < 32; b++)
            s->proof[k].b[b] = (uint8_t)(seed * 31 + k * 7 + (size_t)b);
    for (uint64_t k = 0; k < count; k++) {
        uint64_t a = (first + k) * LEAF_ELEMS, len = n - a < LEAF_ELEMS ? n - a : LEAF_ELEMS;
        ovt_tree_leaf_le32(&h[k], s->data + (a - e0), len * 4);
    }
    int rv = ovt_tree_root_from_proof(&s->root, leaves, first, count, h, s->proof, s->proof_len);
    free(h);
    return rv;
}

/* A run config for the generated ops (llama-110m's: the grid, the rule). */
static int config_7b(trn_run_config *rc)
{
    trn_model_config mc;
    int rv = trn_model_preset(&mc, "llama-110m");
    if (rv == 0)
        trn_config_default(rc, &mc);
    return rv;
}

static int op7b_child(void *arg, child_report *rep)
{
    const op7b *o = arg;
    trn_run_config rc;
    int rv = config_7b(&rc);
    if (rv)
        return rv;
    bool dinp = strcmp(o->op, "matmul.bwd.dinp") == 0, sum = strcmp(o->op, "xent.sum") == 0;
    /* the record: matmul.fwd reads inp (site 0) and the weight; dinp reads
     * dout (site 0), the weight and the zeroed old dinp; xent.sum the
     * probabilities (site 0) */
    uint64_t n = sum ? o->N : dinp ? o->N * o->C : o->N * o->OC, in0 = dinp ? o->N * o->OC : o->N * o->C;
    arb_block_read reads[3] = {
        {.src = {.kind = KRN_TRACE_SITE, .site = 0, .input = 0, .count = in0, .rows = 1}},
        {.src = {.kind = KRN_TRACE_STATE, .input = 1, .count = o->OC * o->C, .rows = 1}, .name = "params/w"},
        {.src = {.kind = KRN_TRACE_ZERO, .input = 2, .count = n, .rows = 1}}};
    arb_block_task task = {.config = &rc, .step = 1, .site = 1, .n = n, .leaf = ovt_tree_leaves(n * 4) / 2,
                           .reads = reads, .nreads = sum ? 1 : dinp ? 3 : 2, .threads = o->threads,
                           .record = true};
    if (o->one) { /* the middle element of the leaf */
        uint64_t e0 = task.leaf * LEAF_ELEMS, e1 = n < e0 + LEAF_ELEMS ? n : e0 + LEAF_ELEMS;
        task.span_first = e0 + (e1 - e0) / 2;
        task.span_count = 1;
    }
    snprintf(task.op, sizeof task.op, "%s", o->op);
    arb_block_plan plan;
    arb_block_slice sl[2] = {{0}};
    arb_block_result r1 = {0}, r2 = {0};
    if ((rv = arb_block_plan_make(&task, &plan)))
        return rv;
    for (size_t k = 0; k < plan.nneeds && !rv; k++) {
        const arb_block_need *nd = &plan.needs[k];
        uint64_t first = nd->lo / LEAF_ELEMS, last = (nd->hi - 1) / LEAF_ELEMS;
        bool w = nd->kind == KRN_TRACE_STATE;
        rv = gen_slice(&sl[w], nd->kind, 0, nd->name, w ? o->OC * o->C : in0, first, last - first + 1, w ? 7 : 3,
                       w ? 0.02f : sum ? -1e-4f : 1.0f);
    }
    task.nslices = plan.nneeds;
    arb_block_plan_free(&plan);
    task.slices = sl;
    /* the trainer's side (its entries), then the arbiter's, timed */
    if (!rv && !(rv = arb_block_run(&task, &r1))) {
        task.record = false;
        task.entries = r1.entries;
        task.nentries = r1.nentries;
        double t0 = now();
        rv = arb_block_run(&task, &r2);
        rep->seconds = now() - t0;
        rep->flops = 2.0 * (double)(r2.plan.row_hi - r2.plan.row_lo) * (double)o->C * (double)o->OC;
        if (!rv && (r1.count != r2.count || memcmp(r1.values, r2.values, r1.count * 4)))
            rv = ovt_fail(OVT_EINVAL, "REPLAY's block differs from RECORD's");
        t0 = now(); /* what of it the proofs cost (the run verifies every slice first) */
        for (size_t k = 0; k < task.nslices && !rv; k++)
            rv = arb_block_slice_verify(&sl[k]);
        rep->proof_seconds = now() - t0;
    }
    arb_block_result_free(&r1);
    arb_block_result_free(&r2);
    for (int k = 0; k < 2; k++) {
        free(sl[k].data);
        free(sl[k].proof);
    }
    return rv;
}

/* A chunk of the weight gradient dweight (OC,C) = dout^T (OC,N) @ inp
 * (N,C): the chain's middle chunk (o->one: its last leaf) of the middle
 * leaf, from generated slices of the chunk's 128 rows of dout and inp
 * (proved against roots of the whole 2^20-row tensors) and a previous
 * state (zeros: any state costs the same), as `ovt block check` runs it. */
static int chunk7b_child(void *arg, child_report *rep)
{
    const op7b *o = arg;
    trn_run_config rc;
    int rv = config_7b(&rc);
    if (rv)
        return rv;
    bool sumsq = strcmp(o->op, "gradnorm.sumsq") == 0; /* N gradient elements, one output */
    bool norm = strcmp(o->op, "rmsnorm.bwd.dweight") == 0; /* (inp, rstd, dout, dweight): C columns over N rows */
    uint64_t n = sumsq ? 1 : o->OC * o->C;
    arb_block_read reads[4] = {
        {.src = {.kind = KRN_TRACE_SITE, .site = 0, .input = 0, .count = o->N * o->OC, .rows = 1}},
        {.src = {.kind = KRN_TRACE_SITE, .site = 1, .input = 1, .count = o->N * o->C, .rows = 1}},
        {.src = {.kind = KRN_TRACE_ZERO, .input = 2, .count = n, .rows = 1}}};
    if (norm) {
        reads[0].src.count = o->N * o->C;
        reads[1].src.count = o->N;
        reads[2] = (arb_block_read){.src = {.kind = KRN_TRACE_SITE, .site = 2, .input = 2, .count = o->N * o->C,
                                            .rows = 1}};
        reads[3] = (arb_block_read){.src = {.kind = KRN_TRACE_ZERO, .input = 3, .count = n, .rows = 1}};
    }
    arb_block_task task = {.config = &rc, .step = 1, .site = 3, .n = n, .leaf = ovt_tree_leaves(n * 4) / 2,
                           .reads = reads, .nreads = sumsq ? 1 : norm ? 4 : 3, .threads = o->threads};
    snprintf(task.op, sizeof task.op, "%s", o->op);
    arb_chunk_info info;
    arb_block_plan plan = {0};
    arb_block_slice sl[3] = {{0}};
    uint8_t *prev = NULL;
    if ((rv = arb_chunk_info_of(&task, &info)))
        return rv;
    uint64_t c = o->one ? info.chunks : info.chunks / 2, r0 = c * ARB_CHUNK_ROWS, r1 = r0 + ARB_CHUNK_ROWS;
    for (unsigned m = 0; m < info.summed_inputs && !o->one && !rv; m++) /* the chunk's rows of each */
        rv = arb_block_need_input(&task, m, r0 * info.group_width[m], r1 * info.group_width[m], &plan);
    for (size_t k = 0; k < plan.nneeds && !rv; k++) {
        const arb_block_need *nd = &plan.needs[k];
        uint64_t first = nd->lo / LEAF_ELEMS, last = (nd->hi - 1) / LEAF_ELEMS;
        rv = gen_slice(&sl[k], nd->kind, nd->site, "", reads[nd->site].src.count, first, last - first + 1, 3 + k,
                       1.0f);
    }
    task.slices = sl;
    task.nslices = plan.nneeds;
    arb_block_plan_free(&plan);
    if (!rv && (prev = calloc(info.partial_len, 1)) == NULL)
        rv = ovt_fail(OVT_ENOMEM, "out of memory for a state");
    if (!rv) {
        ovt_hash leaf;
        double t0 = now();
        rv = arb_chunk_step(&task, c, prev, info.partial_len, &leaf, NULL);
        rep->seconds = now() - t0;
        rep->flops = o->one ? 0 : 2.0 * ARB_CHUNK_ROWS * (double)info.count;
    }
    free(prev);
    for (int k = 0; k < 3; k++) {
        free(sl[k].data);
        free(sl[k].proof);
    }
    return rv;
}

static int bench_llama7b(uint64_t tokens, int threads, const char *only)
{
    const op7b ops[] = {
        {"MLP up (and gate) forward", "matmul.fwd", tokens, 4096, 11008, threads, false},
        {"MLP down forward", "matmul.fwd", tokens, 11008, 4096, threads, false},
        {"MLP up, input gradient", "matmul.bwd.dinp", tokens, 4096, 11008, threads, false},
        {"head forward (vocab)", "matmul.fwd", tokens, 4096, 32000, threads, false},
        {"loss: row sums, a leaf", "xent.sum", tokens, 32000, 1, threads, false},
        {"loss: row sums, 1 element", "xent.sum", tokens, 32000, 1, threads, true},
        {"head forward, 1 element", "matmul.fwd", tokens, 4096, 32000, threads, true},
        {"MLP up weight grad, chunk", "matmul.bwd.dweight", tokens, 4096, 11008, threads, false},
        {"MLP down weight grad, chunk", "matmul.bwd.dweight", tokens, 11008, 4096, threads, false},
        {"MLP up weight grad, last", "matmul.bwd.dweight", tokens, 4096, 11008, threads, true},
        {"gradient norm, chunk", "gradnorm.sumsq", (uint64_t)6738415616, 1, 1, threads, false},
        {"gradient norm, last", "gradnorm.sumsq", (uint64_t)6738415616, 1, 1, threads, true},
        {"RMSNorm weight grad, chunk", "rmsnorm.bwd.dweight", tokens, 4096, 1, threads, false},
        {"RMSNorm weight grad, last", "rmsnorm.bwd.dweight", tokens, 4096, 1, threads, true},
    };
    double rate = bench_dgemm_rate(1024, 1024, 1024, threads, NULL); /* GFLOP/s, this run's baseline */
    printf("Llama-7B shapes at %llu tokens, %d threads, generated tensors (only the block's inputs); the whole op "
           "at this run's FP64 DGEMM rate, %.1f GFLOP/s, is the baseline (a floor on re-executing the op):\n",
           (unsigned long long)tokens, threads, rate);
    printf("%-28s %-16s %9s %8s %7s %11s %10s %12s %12s\n", "op", "site", "time s", "proof s", "MB", "block GFLOP",
           "op GFLOP", "op floor s", "block/floor");
    int rv = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        child_report rep;
        double peak;
        if (only && strcmp(ops[i].op, only) != 0)
            continue; /* --op: that site's rows alone */
        bool chunk = arb_chunk_supported(ops[i].op);
        if (in_child(chunk ? chunk7b_child : op7b_child, (void *)&ops[i], &rep, &peak) || rep.rc) {
            fprintf(stderr, "bench_block: %s: %s\n", ops[i].name, rep.msg);
            rv = 1;
            continue;
        }
        double op_flops = 2.0 * (double)ops[i].N * (double)ops[i].C * (double)ops[i].OC;
        double floor_s = op_flops / (rate * 1e9);
        char proof[16] = "-"; /* the chunks' children do not measure it */
        if (rep.proof_seconds > 0)
            snprintf(proof, sizeof proof, "%.3f", rep.proof_seconds);
        printf("%-28s %-16s %9.3f %8s %7.0f %11.2f %10.0f %12.0f %12.2e\n", ops[i].name, ops[i].op, rep.seconds, proof,
               peak, rep.flops / 1e9, op_flops / 1e9, floor_s, rep.seconds / floor_s);
    }
    return rv;
}

/* ---- the exact accumulator's term add ---- */

/* 128 rows x `elems` products of a leaf's chunk (arbiter/xsum.h) against
 * the same products summed in FP64, in the same run: ns per term and the
 * ratio. */
static int bench_xsum(void)
{
    enum { ROWS = 128, ELEMS = 16384, REPS = 8 };
    float *a = malloc(ROWS * sizeof *a), *b = malloc((size_t)ROWS * ELEMS * sizeof *b);
    xsum_f32 *sa = malloc(ROWS * sizeof *sa), *sb = malloc((size_t)ROWS * ELEMS * sizeof *sb);
    xsum *acc = calloc(ELEMS, sizeof *acc);
    double *d = calloc(ELEMS, sizeof *d);
    if (!a || !b || !sa || !sb || !acc || !d)
        return 1;
    fill_values(a, ROWS, 1, 1.0f);
    fill_values(b, (size_t)ROWS * ELEMS, 2, 1.0f);
    for (size_t i = 0; i < ROWS; i++)
        (void)xsum_split(a[i], &sa[i]);
    for (size_t i = 0; i < (size_t)ROWS * ELEMS; i++)
        (void)xsum_split(b[i], &sb[i]);
    double t0 = now();
    for (int rep = 0; rep < REPS; rep++)
        for (size_t e = 0; e < ELEMS; e++) {
            for (size_t r = 0; r < ROWS; r++)
                xsum_add_product(&acc[e], sa[r], sb[e * ROWS + r]);
            xsum_normalize(&acc[e]);
        }
    double exact = now() - t0;
    t0 = now();
    for (int rep = 0; rep < REPS; rep++)
        for (size_t e = 0; e < ELEMS; e++) {
            double s = d[e];
            for (size_t r = 0; r < ROWS; r++)
                s += (double)a[r] * (double)b[e * ROWS + r];
            d[e] = s;
        }
    double fp64 = now() - t0;
    double terms = (double)REPS * ROWS * ELEMS, check = xsum_to_double(&acc[0]) + d[0];
    printf("exact accumulator: %.0f terms (a leaf's chunk, %d times), %.2f ns a term (carry once per chunk); the "
           "same sums in FP64 (the baseline) %.2f ns: %.1fx (check %g)\n",
           terms, REPS, exact / terms * 1e9, fp64 / terms * 1e9, exact / fp64, check);
    free(a), free(b), free(sa), free(sb), free(acc), free(d);
    return 0;
}

int main(int argc, char **argv)
{
    bench_shape s = {.model = "gpt2-tiny", .B = 4, .T = 64, .threads = 2};
    bool llama7b = false;
    const char *only = NULL;
    uint64_t tokens = (uint64_t)1 << 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--llama7b"))
            llama7b = true;
        else if (!strcmp(argv[i], "--xsum"))
            return bench_xsum();
        else if (i + 1 < argc && !strcmp(argv[i], "--op"))
            only = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--tokens"))
            tokens = strtoull(argv[++i], NULL, 10);
        else if (i + 1 < argc && bench_shape_flag(&s, argv[i], argv[i + 1]))
            i++;
        else {
            fprintf(stderr, "usage: bench_block [--model M] [--batch B] [--seq T] [--threads N] | --llama7b "
                            "[--tokens N] [--threads N] [--op SITE_OP] | --xsum\n");
            return 2;
        }
    }
    return llama7b ? bench_llama7b(tokens, s.threads, only) : bench_model(s);
}
