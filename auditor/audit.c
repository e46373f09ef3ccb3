/* `ovt audit` off chain: fetch, replay, record (see audit.h). */
#include "auditor/audit.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "common/signals.h"
#include "trainer/rundata.h"

bool aud_source_is_store(const char *source)
{
    return strstr(source, "://") != NULL;
}

static const char *finding_name(aud_finding f)
{
    return f == AUD_VERIFIED ? "verified" : f == AUD_DIVERGED ? "divergent" : "fraud";
}

json_t *aud_report_json(const aud_report *r, const char *backend_name, uint64_t lie_at)
{
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:b}", "finding", finding_name(r->finding), "backend",
                          backend_name, "steps", (json_int_t)r->steps, "replayed", (json_int_t)r->replayed,
                          "partial", r->partial);
    json_object_set_new(o, "rule", json_integer(r->rule));
    json_object_set_new(o, "view", json_string(r->canonical_view ? "canonical"
                                               : r->rule == KRN_RULE_V3 ? "own, canonical where uncertain"
                                                                        : "own, widened by the op's bound"));
    if (r->rule == KRN_RULE_V3)
        json_object_set_new(o, "canonical_steps", json_integer((json_int_t)r->canonical_steps));
    if (r->finding != AUD_VERIFIED) {
        json_object_set_new(o, "step", json_integer((json_int_t)r->step));
        json_object_set_new(o, "state_differs", json_boolean(r->state_differs));
        json_object_set_new(o, "batch_differs", json_boolean(r->batch_differs));
        json_object_set_new(o, "log_differs", json_boolean(r->log_differs));
    }
    if (r->finding == AUD_FRAUD)
        json_object_set_new(o, "detail", json_string(r->detail));
    if (r->suspect_step)
        json_object_set_new(o, "suspect", json_pack("{s:I, s:s}", "step", (json_int_t)r->suspect_step, "detail",
                                                    r->suspect));
    if (r->shard_step) {
        json_t *sd = json_pack("{s:I, s:I}", "step", (json_int_t)r->shard_step, "shard", (json_int_t)r->shard);
        json_object_set_new(sd, "rank", r->shard_owner_known ? json_integer(r->shard_rank) : json_null());
        json_object_set_new(sd, "host", r->shard_owner_known ? json_string(r->shard_host) : json_null());
        json_object_set_new(sd, "owner_bound", json_boolean(r->shard_owner_known && r->shard_owner_bound));
        json_object_set_new(sd, "owner_note", r->shard_owner_known ? json_null() : json_string(r->shard_owner_note));
        json_object_set_new(o, "shard_differs", sd);
    }
    if (lie_at)
        json_object_set_new(o, "lie_at", json_integer((json_int_t)lie_at));
    if (r->traced && r->trace_rc == 0) {
        char hex[67] = "0x";
        ovt_hex_encode(hex + 2, r->trace_root.b, 32);
        json_object_set_new(o, "trace", json_pack("{s:I, s:s}", "step", (json_int_t)r->trace_step, "root", hex));
    }
    return o;
}

static volatile sig_atomic_t fetch_stop;

static void on_fetch_signal(int sig)
{
    (void)sig;
    fetch_stop = 1;
}

/* Fetches the run from the store into dir within bounds: each object
 * capped at what it can be, the whole fetch by fetch_timeout, and
 * SIGINT/SIGTERM end it. */
static int fetch_bounded(const aud_audit_opts *o, const char *dir)
{
    store_ctx *store;
    store_manifest m;
    int rv = store_open(&store, o->source);
    if (rv)
        return rv;
    ovt_on_stop_signals(on_fetch_signal);
    store_set_stop(store, &fetch_stop);
    store_set_deadline(store, o->fetch_timeout);
    store_set_max_blob(store, o->max_blob);
    if (!(rv = store_get_manifest(store, &o->run_id, &m))) {
        /* steps.bin: a 56-byte header and 96 bytes a step, steps 0..N. */
        store_expect(store, &m.config_hash, STORE_MAX_CONFIG);
        if (m.steps < ((uint64_t)1 << 40))
            store_expect(store, &m.steps_hash, 56 + 96 * ((size_t)m.steps + 1));
        rv = aud_fetch_run(store, &o->run_id, dir, NULL);
    }
    store_close(store);
    /* Only the fetch is ended by the flag; the replay and the commit stop
     * as before (the default action), and an agent installs its own. */
    ovt_on_stop_signals(SIG_DFL);
    if (fetch_stop && !rv)
        rv = ovt_fail(OVT_EIO, "stopped (SIGINT/SIGTERM)");
    return rv;
}

/* OUT/steps.bin and OUT/audit.json. */
static int write_record(const char *out, const aud_report *r, const json_t *report)
{
    char path[4096];
    char *text = json_dumps(report, JSON_INDENT(2) | JSON_SORT_KEYS);
    int rv;
    if (!(rv = ovt_mkdirs(out, 0755)) && !(rv = ovt_path_join(path, sizeof path, out, "steps.bin")) &&
        !(rv = trn_step_table_write(&r->own, path)) && !(rv = ovt_path_join(path, sizeof path, out, "audit.json")))
        rv = text ? ovt_write_atomic(path, text, strlen(text), 0644) : ovt_fail(OVT_ENOMEM, "out of memory");
    free(text);
    return rv;
}

/* After a traced replay: a trace that failed, or a step that was not
 * replayed, is an error (the replay's report is freed); else the trace
 * file when asked for. */
static int trace_done(const aud_audit_opts *o, aud_report *r, const krn_trace *t)
{
    int rv = 0;
    if (!o->trace_step)
        return 0;
    if (!r->traced)
        rv = ovt_fail(OVT_EINVAL, "step %llu was not replayed (the replay stopped before it, or it lies outside "
                      "the steps compared): nothing to trace", (unsigned long long)o->trace_step);
    else if (r->trace_rc)
        rv = ovt_fail(r->trace_rc, "the trace of step %llu: %s", (unsigned long long)o->trace_step,
                      krn_trace_error(t));
    else if (o->trace_out) {
        uint8_t *buf;
        size_t len;
        if (!(rv = krn_trace_file(t, o->trace_step, &r->trace_root, &buf, &len))) {
            rv = ovt_write_atomic(o->trace_out, buf, len, 0644);
            free(buf);
        }
    }
    if (rv)
        aud_report_free(r);
    return rv;
}

int aud_audit(const aud_audit_opts *o, aud_report *r, json_t **report)
{
    char fetched[4096], data[4096];
    aud_replay_opts ro = {.run_dir = o->source, .data_path = o->data, .backend = o->backend, .threads = o->threads,
                          .from = o->from, .to = o->to, .lie_at = o->lie_at, .trace_step = o->trace_step,
                          .sites = o->sites, .site_beacon = o->site_beacon};
    int rv;
    *report = NULL;
    memset(r, 0, sizeof *r);
    if (o->trace_step && (rv = krn_trace_new(&ro.trace, false)))
        return rv;
    if (aud_source_is_store(o->source)) {
        if ((rv = ovt_path_join(fetched, sizeof fetched, o->out, "trainer")) || (rv = fetch_bounded(o, fetched)) ||
            (rv = ovt_path_join(data, sizeof data, fetched, "dataset.bin")))
            return rv;
        ro.run_dir = fetched;
        ro.data_path = data;
    }
    if ((rv = aud_replay(&ro, r)) || (rv = trace_done(o, r, ro.trace))) {
        krn_trace_free(ro.trace);
        return rv;
    }
    krn_trace_free(ro.trace);
    *report = aud_report_json(r, o->backend_name, o->lie_at);
    if (o->out && (rv = write_record(o->out, r, *report))) {
        json_decref(*report);
        *report = NULL;
        aud_report_free(r);
    }
    return rv;
}
