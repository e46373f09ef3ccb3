/* The arbiter's daemon around its watcher (see daemon.h). */
#include "arbiter/daemon.h"

#include <signal.h>

#include "arbiter/status.h"
#include "chain/narrow.h"
#include "common/metrics.h"
#include "common/signals.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

int arb_daemon_run(const arb_daemon_opts *o)
{
    arb_watch_opts w = o->watch;
    ovt_on_stop_signals(on_signal);

    /* /healthz fails once no tick has completed for 10 polls (and a minute). */
    ovt_httpserve *metrics = NULL;
    ovt_metrics_configure("arbiter", w.poll_ms * 10 > 60000 ? w.poll_ms * 10 : 60000);
    int rc;
    /* the status page (/status, /status.json) on the same server */
    if (o->metrics_addr &&
        ((rc = ovt_metrics_route(arb_status_handle, NULL)) || (rc = ovt_metrics_serve(&metrics, o->metrics_addr))))
        return rc;
    chain_session ses;
    store_ctx *store = NULL;
    rc = chain_session_open(&ses, o->chain, 1);
    if (rc == 0 && w.has_narrow) /* a --narrow that cannot narrow this contract's games: said now, not at a verdict */
        rc = chain_narrow_check_bound(&ses.arb, &w.narrow);
    if (rc == 0 && w.confirmations == 0) {
        const char *why;
        rc = arb_watch_confirmations(ses.rpc, &w.confirmations, &why);
    }
    if (rc == 0) {
        ses.txm.opts.confirmations = w.confirmations;
        ses.txm.opts.poll_ms = w.poll_ms < 250 ? w.poll_ms : 250;
        rc = store_open(&store, o->store_url);
    }
    if (rc == 0) {
        store_set_max_blob(store, o->max_blob);
        store_set_stop(store, &stop_requested);
        rc = arb_watch(&w, &ses.arb, &ses.txm, store, &stop_requested);
    }
    store_close(store);
    chain_session_close(&ses);
    ovt_httpserve_stop(metrics);
    return rc;
}
