#ifndef OVT_KERNELS_SITE_H
#define OVT_KERNELS_SITE_H

/* Rounding sites (docs/numeric-contract.md). A step is executed inside a krn_ctx;
 * every op hands each FP64 result to krn_site(), which numbers the site (in
 * execution order, starting at 0 each step), rounds every element to the grid
 * and, depending on the mode:
 *   KRN_RECORD   (trainer)  rounds to nearest and logs every element whose
 *                           distance to the nearest midpoint is <= tau (a
 *                           direction, or the value itself where tau is wide
 *                           against the grid step);
 *   KRN_REPLAY   (verifier) applies the step's log under the rule of
 *                           contract version 2 (docs/numeric-contract.md
 *                           section 6): a logged element takes the logged
 *                           result where the rule accepts it, every other
 *                           element rounds to nearest, and an unlogged
 *                           element within tau/2 of a midpoint is a missing
 *                           entry. How a violation is treated depends on the
 *                           verifier's role (krn_verifier);
 *   KRN_NEAREST  (ablation) rounds to nearest, ignores bands, logs nothing;
 *   KRN_PLAIN    (benchmark baseline only, never used by the protocol)
 *                converts every element with (float)x: no band, no log, no
 *                grid other than FP32 (grid_bits must be 32), no check for
 *                non-finite values. A plain FP64-compute step to measure the
 *                cost of controlled rounding against.
 * A non-finite value fails the step with OVT_ENUMERIC, naming the site.
 * The exact rules, and why they make replay exact: docs/numeric-contract.md. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "kernels/rlog.h"

typedef enum { KRN_RECORD = 0, KRN_REPLAY = 1, KRN_NEAREST = 2, KRN_PLAIN = 3 } krn_mode;

/* The band tau of each element of a site, from the stated bound on how far
 * two correct FP64 implementations of the site can differ
 * (docs/numeric-contract.md gives each op's bound):
 *   tau_i = base_i + rel * |x_i|
 * where base_i is 0 (KRN_BAND_ZERO), scale (KRN_BAND_CONST), scale * a[i]
 * (KRN_BAND_ARRAY), or scale * a[i / cols] * b[i % cols] (KRN_BAND_OUTER,
 * for a row-major rows x cols output such as a matrix product, with a the
 * row norms and b the column norms). A site whose tau is 0 everywhere is
 * exact (one correctly rounded IEEE operation) and is never logged. */
typedef enum { KRN_BAND_ZERO, KRN_BAND_CONST, KRN_BAND_ARRAY, KRN_BAND_OUTER } krn_band_kind;

typedef struct {
    krn_band_kind kind;
    double scale;
    const double *a;
    const double *b;
    size_t cols;
    double rel;
} krn_band;

typedef enum { KRN_BACKEND_CPU = 0, KRN_BACKEND_REF = 1, KRN_BACKEND_SHUFFLE = 2, KRN_BACKEND_CUDA = 3 } krn_backend_kind;

/* The backend a command line names: "cpu", "ref", "shuffle" or "cuda";
 * OVT_EINVAL naming the known ones otherwise. Whether this build and
 * machine can run cuda is krn_ctx_new's to say. */
int krn_backend_parse(krn_backend_kind *out, const char *name) OVT_MUST_USE;

/* Who applies the REPLAY rule (docs/numeric-contract.md section 6, "Who
 * applies the rule"):
 *   KRN_VERIFY_ARBITER  the strict rule: any violation fails the step with
 *                       OVT_EFRAUD (the arbiter, `ovt step`);
 *   KRN_VERIFY_AUDITOR  follows every entry some honest arbiter could
 *                       accept (thresholds widened by the op's bound
 *                       delta' = tau'/(2*KRN_BAND_MARGIN)) and fails only on
 *                       a certain violation (one every honest arbiter sees);
 *                       a violation only the strict rule sees is recorded
 *                       (krn_ctx_finding) and the step goes on. */
typedef enum { KRN_VERIFY_ARBITER = 0, KRN_VERIFY_AUDITOR = 1 } krn_verifier;

/* The REPLAY rule's version (docs/numeric-contract.md sections 5 and 10):
 *   2  any verifier's view: a direction may name either side of the
 *      midpoint up to tau'/2, a value's interval may lie tau'/2 away;
 *   3  runs under the canonical computation (band rules 2): the arbiter's
 *      values are the cpu backend's, the same bits for every party, so the
 *      limits shrink to what an honest trainer can reach from them,
 *      delta' = tau'/(2M) (plus 2^-20 of it), and an auditor on another
 *      backend reports as a finding (not certain) anything a canonical
 *      view within delta' of its own could reject: the caller then
 *      re-executes the step canonically (auditor/replay.c).
 * 0 reads as 2. */
#define KRN_RULE_V2 2
#define KRN_RULE_V3 3

typedef struct {
    krn_backend_kind backend;
    krn_mode mode;
    krn_verifier verifier; /* REPLAY only */
    int grid_bits;         /* b, 24..32 */
    uint64_t shuffle_seed; /* shuffle backend: seed of the summation orders */
    int threads;           /* 0: the backend's default */
    int rule;              /* REPLAY only: KRN_RULE_V2 (0 reads as it) or KRN_RULE_V3 */
    bool mem_guard;        /* testing, CPU backends: krn_mem_alloc's memory stands in for a device's
                              (kernels/mem.h, "the guard") */
    bool tolerant;         /* REPLAY only, off by default: a violation the role fails on does not fail the
                              site; the element rounds to nearest (as an unlogged one), the step's first
                              such violation is kept (krn_ctx_violation) and the step runs to its end.
                              Never for a verdict: the party's trace of a fraudulent step and the
                              auditor's own state there (docs/numeric-contract.md, "The tolerant
                              replay") */
    bool follow_log;       /* testing only, with tolerant: an entry the rule rejects is still followed (the
                              output is the logged one): a faulty trainer re-executing its own forged log
                              for the narrowing (`ovt agent --narrow-forged`) */
} krn_config;

/* Per-step counters, for progress lines and benchmarks. */
typedef struct {
    uint64_t sites;          /* sites executed */
    uint64_t outputs;        /* elements rounded */
    uint64_t logged;         /* entries written (RECORD) or applied (REPLAY) */
    uint64_t wide;           /* entries that are explicit values */
    double max_dist_over_tau;/* REPLAY: largest d/tau seen on a logged element */
    uint64_t ambiguous;      /* RECORD, REPLAY: elements with tau > 0 and d <= delta =
                                tau/(2*M), where both roundings are honest (the
                                trainer's bits of choice) */
    uint64_t ambiguous_exact;/* of those, x exactly 0 or exactly on a midpoint */
} krn_stats;

typedef struct krn_ctx krn_ctx;

/* What the strict REPLAY rule found wrong with a log element. */
typedef enum {
    KRN_RULE_NONE = 0,
    KRN_RULE_MISSING_ENTRY,        /* no entry, d' <= tau'/2 */
    KRN_RULE_IMPOSSIBLE_DIRECTION, /* a direction, d' > tau'/2, not the verifier's side */
    KRN_RULE_DIRECTION_FAR,        /* a direction, d' > 2*tau' */
    KRN_RULE_DIRECTION_WIDE,       /* a direction where 2*tau' > s'/4 */
    KRN_RULE_VALUE_FAR             /* a value whose interval is farther than tau'/2 */
} krn_rule;

/* "missing entry", "impossible direction", ... */
const char *krn_rule_name(krn_rule rule);

/* The first violation of the strict rule in a REPLAY step (lowest site,
 * then lowest element index), certain or not. */
typedef struct {
    krn_rule rule;        /* KRN_RULE_NONE: none */
    uint64_t step;
    uint32_t site;
    char op[48];
    uint64_t element;
    double dist_over_tau; /* d' (or the distance to the value's interval) / tau' */
    bool certain;         /* outside the widened thresholds: every honest arbiter sees it */
    char message[400];    /* names step, site, op, element, the rule and the distance */
} krn_finding;

int krn_ctx_new(krn_ctx **out, const krn_config *cfg) OVT_MUST_USE;
void krn_ctx_free(krn_ctx *ctx);
const krn_config *krn_ctx_config(const krn_ctx *ctx);

/* Starts step `step`. RECORD: log is reset and filled during the step.
 * REPLAY: log holds the trainer's log for this step (its step must match).
 * NEAREST: log may be NULL. The ctx does not own log. */
int krn_step_begin(krn_ctx *ctx, uint64_t step, krn_rlog *log) OVT_MUST_USE;

/* Ends the step. Fails with the failure of the step's failed site, if one
 * failed; REPLAY: fails with OVT_EFRAUD if the log has entries for sites that
 * were never executed. The ctx is ready for krn_step_begin either way. */
int krn_step_end(krn_ctx *ctx, krn_stats *stats) OVT_MUST_USE;

/* Rounds n FP64 values to the grid into out as the next site. name is the
 * op's name for error messages ("matmul.fwd"). out and x must not overlap.
 * A failure (non-finite value, overflow, a fraudulent log entry, a bad band)
 * fails the whole step: later krn_site calls of the step return the same
 * code without running. Zeros are written as +0. */
int krn_site(krn_ctx *ctx, const char *name, float *out, const double *x, size_t n,
             const krn_band *band) OVT_MUST_USE;

/* An exact site (zero band) whose FP64 values are computed block by block
 * as the site rounds them, so no FP64 copy of the whole site is needed:
 * fill(arg, i0, len, x) writes the values of elements i0 .. i0+len-1 into
 * x. It is called once per element range, from the ctx's threads at once for
 * large sites, and may read out[i0 .. i0+len) (not yet written) but no other
 * element of out. Same site number, rounding and failures as krn_site with
 * the same values and krn_band_exact(). */
typedef void (*krn_site_fill)(void *arg, size_t i0, size_t len, double *x);
int krn_site_exact_fill(krn_ctx *ctx, const char *name, float *out, size_t n, krn_site_fill fill,
                        void *arg) OVT_MUST_USE;

/* Several exact sites over n elements each, numbered consecutively in the
 * order given, rounded together block by block: for each range of
 * elements, every site's fill runs and its values are rounded into its out
 * before the next site's fill runs for the same range, so a fill may read
 * the earlier sites' outputs (already rounded) and its own out (not yet
 * written) in its range, and nothing else of them. Same site numbers,
 * rounding and failure (the first site that fails, at its lowest element
 * index) as krn_site_exact_fill on each in turn, when each site's values
 * depend only on the same element of the earlier ones. For the three
 * passes of AdamW over all parameters: one pass instead of three. */
typedef struct {
    const char *name;
    float *out;
    krn_site_fill fill;
} krn_exact_fill;
#define KRN_EXACT_FILLS_MAX 4
int krn_site_exact_fills(krn_ctx *ctx, const krn_exact_fill *sites, size_t nsites, size_t n,
                         void *arg) OVT_MUST_USE;

/* The number the next site of the current step gets (the count of sites
 * numbered so far). */
uint32_t krn_ctx_next_site(const krn_ctx *ctx);

/* Renumbers: the next site gets number `site` (>= the sites numbered so
 * far). For a process that computes some shards of a sharded step
 * (trainer/train.c): its sites are numbered as one process computing
 * every shard in order would number them. RECORD and NEAREST only
 * (OVT_EINVAL otherwise: a replay is one process). */
int krn_ctx_set_next_site(krn_ctx *ctx, uint32_t site) OVT_MUST_USE;

/* A site (banded or exact) whose FP64 values are handed over in parts, in
 * element order, so that no FP64 copy of the whole site is needed: the
 * same site number, rounding, log entries, REPLAY checks (entries are
 * applied once the whole site went by, as krn_site applies them), failures
 * and statistics as krn_site with the same values and band.
 *   krn_site_parts_begin  numbers the site; band gives kind, scale, rel and
 *                         cols (its a and b are ignored);
 *   krn_site_part         rounds the next len elements, whose values are
 *                         x[0 .. len) and whose band arrays start at the
 *                         part's first element: KRN_BAND_ARRAY a[0 .. len);
 *                         KRN_BAND_OUTER a from the part's first row (a part
 *                         is whole rows) and b all cols;
 *   krn_site_part_keep    hands over the next len elements as values
 *                         out already holds (x[i] = (double)out[i]) with a
 *                         band array of zeros (KRN_BAND_ARRAY sites, and
 *                         exact ones): grid values round to themselves and
 *                         are never near a midpoint, so it only reads out,
 *                         and takes krn_site_part's way for any block with
 *                         something else in it (-0, a value off the grid, a
 *                         subnormal or non-finite one) or, in REPLAY, a
 *                         logged element: every result, entry, failure and
 *                         count is krn_site_part's;
 *   krn_site_parts_end    finishes the site and frees the handle; call it
 *                         also after a failed part (it returns that failure)
 *                         and with NULL (returns 0).
 * Elements of out are written by the part that holds them (REPLAY: a logged
 * element again at the end). A failure fails the whole step, as krn_site's. */
typedef struct krn_site_parts krn_site_parts;
int krn_site_parts_begin(krn_ctx *ctx, krn_site_parts **parts, const char *name, float *out, size_t n,
                         const krn_band *band) OVT_MUST_USE;
int krn_site_part(krn_site_parts *parts, const double *x, size_t len, const double *a,
                  const double *b) OVT_MUST_USE;
int krn_site_part_keep(krn_site_parts *parts, size_t len) OVT_MUST_USE;
int krn_site_parts_end(krn_site_parts *parts) OVT_MUST_USE;

/* Runs fn(arg, i) for every i in [0, n) on the ctx's threads (the pool of
 * its large sites and of its ops' loops, kernels/pool.h), for work of a
 * step between its sites that splits into independent pieces (the hashes
 * of a sharded step's gradients). Which thread runs which i is not fixed: fn writes each i's
 * result to i's own place. OVT_ENOMEM if the pool cannot be made. */
int krn_ctx_parallel(krn_ctx *ctx, size_t n, void (*fn)(void *arg, size_t i), void *arg) OVT_MUST_USE;

/* Work beside the step (the stateHash of the state before it): fn(arg, j)
 * for every j in [0, n) on the ctx's worker threads while they have no
 * loop of the step to run, one job at a time (kernels/pool.h,
 * krn_pool_background), so the step waits for at most one job. Returns 1
 * when started, 0 when the ctx has no worker (one thread: nothing is
 * started, the caller runs the jobs itself), OVT_ENOMEM. Until
 * krn_ctx_background_wait, which runs what is left on all the ctx's
 * threads and returns when every job has, fn's inputs must not change. One
 * batch at a time; from the ctx's owner thread only. */
int krn_ctx_background(krn_ctx *ctx, size_t n, void (*fn)(void *arg, size_t j), void *arg) OVT_MUST_USE;
void krn_ctx_background_wait(krn_ctx *ctx);

/* Per-site counts of a step (`ovt rlog RUNDIR --step K --sites`), off by
 * default. Counted on the slow path, where an element's own distance d to
 * the nearest midpoint is known: every element with tau > 0 and d <= tau
 * reaches it (the fast path flags them), so the counts are exact and cost
 * nothing on the elements the fast path settles; no output bit changes.
 * RECORD and REPLAY only (NEAREST and PLAIN use no band: zeros). */
typedef struct {
    uint32_t site;
    char op[48];          /* the op's name ("matmul.fwd"), cut to fit */
    uint64_t n;           /* elements */
    bool banded;          /* tau > 0 somewhere (an exact site is never logged) */
    uint64_t entries;     /* RECORD: entries written; REPLAY: entries the log holds */
    uint64_t within_half; /* elements with tau > 0 and own d <= tau/2 */
    uint64_t within_tau;  /* elements with tau > 0 and own d <= tau */
    /* The trainer's freedom by this party's values: elements a log may set
     * either way and go unchallenged. free_v2: own d <= tau/2 + delta', what
     * an auditor under rule 2 follows either way (it cannot know the
     * arbiter's values); free_v3: own d <= delta', what rule 3 accepts either
     * way (by the canonical view, when this party is the cpu backend). */
    uint64_t free_v2;
    uint64_t free_v3;
} krn_site_stats;

/* Turns per-site counting on or off from the next krn_step_begin on. */
void krn_ctx_collect_sites(krn_ctx *ctx, bool on);

/* The current (or last ended) step's per-site counts, one per site executed
 * in site order, *count of them; NULL with *count = 0 when counting is off.
 * Points into ctx, valid until the next krn_step_begin. A site that failed
 * has no row (the step failed). */
const krn_site_stats *krn_ctx_site_stats(const krn_ctx *ctx, size_t *count);

/* The first finding of the current (or last ended) REPLAY step; rule is
 * KRN_RULE_NONE when the strict rule found nothing. Points into ctx. */
const krn_finding *krn_ctx_finding(const krn_ctx *ctx);

/* A tolerant REPLAY (krn_config.tolerant): the first violation of the
 * current (or last ended) step that the strict replay of the same role
 * fails on (lowest site, then lowest element; its message is the strict
 * failure's); rule is KRN_RULE_NONE when there is none (and in every
 * other mode). Points into ctx. */
const krn_finding *krn_ctx_violation(const krn_ctx *ctx);

/* Testing only: on (true) the sites round with their portable loops even
 * where the CPU has the AVX-512 one; both give the same bits. */
void krn_site_force_portable(bool on);

/* Testing only (fault injection: `ovt train --inject-fault forged-log`).
 * Arms a forgery for the next (or current) RECORD step: the first banded
 * site that has an unlogged element between 1.25 and 1.5 tau from its
 * midpoint (where a direction entry is allowed) rounds its last such
 * element to the wrong neighbour and logs that wrong direction, an entry
 * every verifier must reject as fraud (a certain impossible direction).
 * krn_step_end disarms it. */
void krn_ctx_forge_next_site(krn_ctx *ctx);

/* Testing only (`ovt train --inject-fault hidden-flip`): the same, but the
 * forgery turns a logged direction whose own d lies between tau/2 and
 * tau/2 + delta' to the other side (the output follows): rule 2's auditor
 * cannot tell it from an honest choice, rule 3's arbiter rejects it
 * (docs/numeric-contract.md section 10). */
void krn_ctx_forge_hidden(krn_ctx *ctx);

/* True if the armed forgery was made in the current (or last ended) step. */
bool krn_ctx_forged(const krn_ctx *ctx);

/* Testing only (`ovt train --inject-fault flip-entry`): in the next (or
 * current) RECORD step, the direction entry of element `element` of site
 * `site`, if it has one, is turned to the other side of its midpoint and the
 * output follows it: a trainer that uses the log's freedom, or abuses it
 * (docs/numeric-contract.md section 10 says which flips a verifier rejects).
 * krn_ctx_flipped says whether it was made; krn_step_end disarms it. */
void krn_ctx_flip_entry(krn_ctx *ctx, uint32_t site, uint64_t element);

/* Testing only (`ovt train --inject-fault steer-up|steer-down`): from now on
 * every RECORD element whose direction rule 3 leaves free (d <= delta',
 * docs/numeric-contract.md section 10) is rounded up (dir > 0) or down
 * (dir < 0) and logged so; 0 turns it off. What the log's freedom can buy a
 * trainer (docs/bench-trainer.md, "Steering"). */
void krn_ctx_steer(krn_ctx *ctx, int dir);
bool krn_ctx_flipped(const krn_ctx *ctx);

#endif
