#ifndef OVT_KERNELS_SITE_INTERNAL_H
#define OVT_KERNELS_SITE_INTERNAL_H

/* Internal to the rounding sites (site.h), which live in several files:
 *   site_ctx.c     the context: create, free, config, step begin and end,
 *                  the pool, per-site counts, findings;
 *   band.c         bands (band.h);
 *   site_fast.c    the fast path and its AVX-512 loop;
 *   site_slow.c    the slow path, and the block loop that hands it the
 *                  fast path's candidates;
 *   site_run.c     a site's chunks on the pool, krn_site and the exact
 *                  sites filled block by block;
 *   site_verify.c  REPLAY: the verifier's rule of contract version 2;
 *   site_apply.c   REPLAY: the log's entries for a site, and applying them;
 *   site_parts.c   sites handed over in parts;
 *   site_sparse.c  sites whose values live elsewhere (site_sparse.h);
 *   site_forge.c   a forged entry (testing only).
 * This header holds what they share: the context's fields, what one site
 * works on (site_job), a chunk's results (chunk_out), and the functions one
 * file calls in another. Nothing outside these files includes it. */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "kernels/pool.h"
#include "kernels/rlog.h"
#include "kernels/site.h"

/* The step's trace recorder (kernels/trace.h); declared here, not included,
 * since trace.c reads a site's job from this file. */
typedef struct krn_trace krn_trace;
typedef void (*krn_block_fill)(void *arg, unsigned input, float *p, size_t width, size_t stride, size_t rows);

/* Elements per block: the band of a block is computed into a small buffer,
 * then the block is rounded. */
#define SITE_BLOCK 1024
/* Elements per chunk of a large site (a unit of work for the pool), and the
 * smallest site that is split. */
#define SITE_CHUNK 32768
#define SITE_PARALLEL_MIN 65536

/* What the per-site counts (krn_site_stats) count among elements with
 * tau > 0, by this party's own d and w = delta' (krn_site_widening):
 * d <= tau/2, d <= tau, d <= tau/2 + w (rule 2's freedom as an auditor
 * sees it), d <= w (rule 3's). */
enum { SITE_WITHIN_HALF, SITE_WITHIN_TAU, SITE_FREE_V2, SITE_FREE_V3, SITE_WITHIN };

/* Entries found in one chunk, in index order, and the chunk's counts. */
typedef struct {
    krn_rlog_entry *entries;
    size_t count;
    size_t cap;
    uint64_t wide;
    uint64_t ambiguous[2]; /* elements with d <= tau/(2M); of those, x == 0 or d == 0 */
    uint64_t within[SITE_WITHIN]; /* site_within's counts */
} chunk_out;

/* The context of the sites, by concern. */
struct krn_ctx {
    krn_config cfg;
    struct { /* the threads (site_ctx.h): the ctx's and, lent, the cpu backend's */
        int n;
        krn_pool *pool;       /* the process's, attached on first use (krn_ctx_pool) */
        chunk_out *chunks;    /* a site's results, one per chunk it was cut into */
        size_t chunks_cap;
    } threads;
    struct { /* the step under way (krn_step_begin .. krn_step_end) */
        bool open;
        uint64_t index;       /* the step's number */
        krn_rlog *log;        /* RECORD: filled; REPLAY: the trainer's; not owned */
        uint32_t next_site;   /* the number the next site gets */
        size_t replay_next;   /* REPLAY: the next log site not yet matched */
        int failed;           /* the code of the site that failed this step, or 0 */
        char failed_msg[480]; /* and its message */
    } step;
    krn_stats stats;
    struct { /* the cuda backend's state (site_ctx.h) */
        void *state;          /* or NULL */
        void (*release)(void *state);
    } device;
    struct { /* the table of its tensor memory (site_ctx.h, kernels/mem.c) */
        void *table;          /* or NULL */
        void (*release)(krn_ctx *ctx, void *table);
    } mem;
    struct { /* testing: a forged entry (krn_ctx_forge_next_site) */
        bool armed;           /* at the next site that allows it */
        bool hidden;          /* krn_ctx_forge_hidden: flip a logged direction instead */
        bool made;            /* in this step */
        bool flip_armed;      /* krn_ctx_flip_entry: flip the entry of flip_site, flip_element */
        bool flipped;         /* in this step */
        uint32_t flip_site;
        uint64_t flip_element;
        int steer;            /* krn_ctx_steer: +1 up, -1 down, 0 off */
        bool bit_armed;       /* krn_ctx_flip_output_bit: flip bit_bit of bit_element of bit_site */
        bool bit_made;        /* in this step */
        uint32_t bit_site;
        uint64_t bit_element;
        unsigned bit_bit;
    } forge;
    krn_trace *trace;    /* the step's trace recorder (kernels/trace.h), or NULL */
    struct { /* block mode (krn_ctx_block, kernels/trace.h): one site of one op re-executed */
        bool on;
        bool reached;         /* the target site has run */
        uint32_t target;      /* the site the block is of; earlier ones are skipped */
        krn_block_fill fill;  /* fills each of the target's declared reads */
        void *arg;
        unsigned inputs;      /* the target's reads declared so far */
        float *result;        /* where the target's output is copied, result_cap elements */
        size_t result_cap, result_n;
    } block;
    krn_finding finding; /* REPLAY: the step's first strict finding */
    krn_finding violation; /* tolerant REPLAY: the step's first failing finding (krn_ctx_violation) */
    struct { /* per-site counts (krn_ctx_collect_sites) */
        bool next;            /* counted from the next step on */
        bool on;              /* counted in this step */
        krn_site_stats *rows; /* the step's rows, n of them */
        size_t n, cap;
    } sites;
};

/* What one call of krn_site works on, shared by the threads. */
typedef struct {
    krn_ctx *ctx;
    const char *name;
    uint32_t site;
    float *out;
    const double *x;      /* NULL: the values come from fill */
    size_t base;          /* the element x[0] (and the band's arrays' first) is */
    krn_site_fill fill;
    void *fill_arg;
    size_t n;
    const krn_band *band; /* NULL: exact site */
    bool record;          /* log entries (RECORD with a band) */
    bool replay;          /* REPLAY with a band: look for missing entries */
    bool mu_live;         /* err_mu is initialised (threads may be running) */
    const krn_rlog_site *logged; /* REPLAY: the site's entries, or NULL */
    uint64_t wide;        /* entries that are values */
    uint64_t within[SITE_WITHIN]; /* site_within's counts */
    /* REPLAY: the strict rule's finding at the lowest element index, and the
     * one that fails the site (any finding for the arbiter, a certain one
     * for the auditor), also at the lowest index; under err_mu */
    krn_finding first, fail;
    /* the failure at the lowest element index (messages are per thread) */
    pthread_mutex_t err_mu;
    int err_code;
    size_t err_index;
    char err_msg[400];
} site_job;

/* A zero is always written as +0. */
static inline float krn_canonical_zero(float v)
{
    return v == 0.0f ? 0.0f : v;
}

/* site_ctx.c: in block mode, whether the site about to be numbered is
 * one before the target (it is then skipped: numbered, nothing computed,
 * rounded or written). */
static inline bool krn_site_skipped(const krn_ctx *ctx)
{
    return ctx->block.on && ctx->step.next_site < ctx->block.target;
}

/* site_ctx.c: entering a site of the step (0, or the reason it may not run:
 * no step, or the step failed), and leaving it with rc, which a failure
 * records as the step's failure (later sites refuse to run, krn_step_end
 * reports it again); returns rc. */
int krn_site_enter(krn_ctx *ctx, const char *name) OVT_MUST_USE;
int krn_site_leave(krn_ctx *ctx, int rc);
/* and the job's row of per-site counts, when the step counts them */
int krn_site_row(const site_job *job) OVT_MUST_USE;

/* site_fast.c: rounds x[0 .. len) into out and writes the offsets of the
 * elements the fast path cannot settle to cand, in increasing order
 * (tau NULL: a zero band); returns how many. */
size_t krn_site_round_cands(const double *restrict x, const double *restrict tau, float *restrict out,
                            uint8_t *restrict flag, uint32_t *restrict cand, size_t len, int b);

/* site_slow.c: the failure of element i (what may be ovt_errmsg()); one
 * element settled by the slow path (1: *entry filled for the log); an entry
 * kept in a chunk's list; a block [b0, b0 + len) of one site. */
int krn_site_elem_fail(const site_job *job, size_t i, int code, const char *what);
int krn_site_settle(site_job *job, size_t i, double xi, double tau, float *outi, krn_rlog_entry *entry,
                    chunk_out *co);
int krn_site_chunk_push(chunk_out *co, const krn_rlog_entry *e) OVT_MUST_USE;
int krn_site_block(site_job *job, size_t b0, size_t len, double *xbuf, chunk_out *co);

/* site_run.c: room for nchunks chunks' results in the ctx; the sites of a
 * group (or one) over elements [lo, hi), on the pool when large. */
int krn_site_reserve_chunks(krn_ctx *ctx, size_t nchunks) OVT_MUST_USE;
int krn_site_run_group(site_job *jobs, size_t njobs, size_t lo, size_t hi) OVT_MUST_USE;

/* site_verify.c: REPLAY's rule (docs/numeric-contract.md section 6). */
double krn_site_widening(double tau);

/* Whether the ctx applies rule 3 (krn_config.rule). */
bool krn_site_rule_v3(const site_job *job);

/* The limits on an entry's side and a value's distance for the ctx's rule
 * and role (docs/numeric-contract.md sections 6 and 10): a direction beyond
 * *limit from the midpoint must name the verifier's own side, and a value's
 * interval may lie at most *limit away, or that is a finding; beyond
 * *certain it is a certain one (one every honest arbiter sees). Rule 2:
 * tau'/2 and tau'/2 + delta'. Rule 3, the arbiter (the canonical view):
 * delta' for both. Rule 3, an auditor on another backend: 0 (anything
 * a canonical value within delta' could reject) and 2 delta'. */
void krn_site_limits(const site_job *job, double tau, double *limit, double *certain);
bool krn_site_note_finding(site_job *job, size_t i, krn_rule rule, double dist, double tau, bool certain,
                           const char *what);
void krn_site_check_unlogged(site_job *job, size_t i, double dist, double tau);
int krn_site_findings_close(site_job *job) OVT_MUST_USE;

/* site_apply.c: REPLAY: the log's entries for the site just numbered, and
 * applying one entry. */
int krn_site_take_log(krn_ctx *ctx, uint32_t site, const char *name, size_t n, bool banded,
                      const krn_rlog_site **logged) OVT_MUST_USE;
int krn_site_entry_beyond(const site_job *job, const krn_rlog_entry *e);
int krn_site_apply_entry(site_job *job, const krn_rlog_entry *e, double xi, double tau,
                         float *outi) OVT_MUST_USE;

/* site_forge.c (testing only): the forgery a RECORD site takes when the
 * ctx has one armed (krn_ctx_forge_next_site). */
/* The forgery krn_ctx_forge_next_site arms: the last element of the job's
 * site without an entry that lies between 1.25 and 1.5 tau from its
 * midpoint is rounded to the wrong neighbour and that direction logged: an
 * impossible direction for every verifier (honest values are within
 * tau/(2M) of each other, so every verifier's d' lies between 0.78 and
 * 1.97 tau, beyond tau'/2 + delta' and within 2 tau'). The site is left
 * alone if no element qualifies; a later site of the step is tried.
 * The hidden variant (krn_ctx_forge_hidden) takes the last logged direction
 * whose own d lies in (tau/2, tau/2 + delta'] and turns it to the other
 * side. */
typedef struct {
    bool found;
    krn_rlog_entry entry;
    float wrong;
} forgery;
bool krn_site_forge_find(const site_job *job, size_t lo, size_t hi, forgery *f);
void krn_site_forge_apply(site_job *job, const forgery *f);
void krn_site_forge_entry(site_job *job);
/* The flip krn_ctx_flip_entry arms, if it is for this RECORD site. */
void krn_site_flip_entry(site_job *job);
/* The output bit krn_ctx_flip_output_bit arms, if it is for this site. */
void krn_site_flip_output(site_job *job);

/* trace.c: the trace's record of a site that has run (kernels/trace.h),
 * and, check mode, the bytes of the next site's reads as it starts (before
 * it may write over them in place). */
void krn_trace_site(krn_ctx *ctx, const site_job *job);
void krn_trace_enter(krn_ctx *ctx, const char *name);

/* trace.c: block mode's target has run: its output is copied out. */
void krn_block_done(const site_job *job);

/* Every site, once its output is final (rounded, log applied): the testing
 * fault that flips an output bit, then the trace; one branch each when off. */
static inline void krn_site_done(site_job *job)
{
    if (job->ctx->block.on && job->site == job->ctx->block.target)
        krn_block_done(job);
    if (job->ctx->forge.bit_armed)
        krn_site_flip_output(job);
    if (job->ctx->trace != NULL)
        krn_trace_site(job->ctx, job);
}

#endif
