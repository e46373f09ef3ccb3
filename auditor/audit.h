#ifndef OVT_AUDITOR_AUDIT_H
#define OVT_AUDITOR_AUDIT_H

/* `ovt audit` off chain (docs/agent.md): the trainer's run, fetched first
 * when it is published in a store (every object capped at what it can be,
 * the whole fetch bounded in time, SIGINT/SIGTERM ending it), replayed and
 * compared leaf by leaf (aud_replay), and the auditor's record written:
 * OUT/steps.bin, its own history, and OUT/audit.json, the report. What is
 * done on chain with it is party/audit.h's. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "auditor/replay.h"

typedef struct {
    const char *source;       /* the trainer's run directory, or a store URL */
    const char *data;         /* a run directory's dataset */
    const char *out;          /* the auditor's folder (required for a store source: the run is
                                 fetched into OUT/trainer); NULL: no record */
    ovt_hash run_id;          /* a store source: the run published there */
    size_t max_blob;          /* the largest object fetched from the store */
    double fetch_timeout;     /* seconds the whole fetch may take */
    krn_backend_kind backend;
    const char *backend_name; /* as the report names it */
    int threads;              /* 0: the backend's default */
    uint64_t from, to;        /* the steps compared (aud_replay_opts) */
    uint64_t lie_at;          /* fault injection (aud_replay_opts) */
    uint64_t trace_step;      /* 0: none; else that step's trace (aud_replay_opts), its root in the report */
    const char *trace_out;    /* with trace_step: the trace file written there (atomically); NULL: none */
    bool sites;               /* proof of replay: every step's site output roots (aud_replay_opts) */
    const ovt_hash *site_beacon; /* with sites: only the site this beacon picks (aud_replay_opts) */
} aud_audit_opts;

/* Whether source names a store (a URL: it has "://") rather than a run
 * directory. */
bool aud_source_is_store(const char *source);

/* The report as audit.json holds it: finding, backend, steps, replayed,
 * partial, and what differs where (new reference). */
json_t *aud_report_json(const aud_report *r, const char *backend_name, uint64_t lie_at);

/* Fetches (a store source), replays and compares, and writes the record.
 * Returns 0 when the replay ran (read r->finding; *report gets
 * aud_report_json's object; free both), else an error with nothing to free. */
int aud_audit(const aud_audit_opts *o, aud_report *r, json_t **report) OVT_MUST_USE;

#endif
