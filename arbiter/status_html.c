/* The status page as HTML (arbiter/status.h): plain HTML from the snapshot
 * /status.json serves, every value escaped, no external assets (the style
 * is inline), a refresh every few seconds by the page itself. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arbiter/status.h"
#include "common/text.h"

/* s with & < > " ' escaped. */
static void esc(ovt_text *t, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': ovt_text_put(t, "&amp;"); break;
        case '<': ovt_text_put(t, "&lt;"); break;
        case '>': ovt_text_put(t, "&gt;"); break;
        case '"': ovt_text_put(t, "&quot;"); break;
        case '\'': ovt_text_put(t, "&#39;"); break;
        default: ovt_text_put(t, "%c", *s);
        }
    }
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static long long num(const json_t *o, const char *key)
{
    return (long long)json_integer_value(json_object_get(o, key));
}

/* One row of a two-column table: a label and an escaped value. */
static void row(ovt_text *t, const char *label, const char *cls, const char *value)
{
    ovt_text_put(t, "<tr><th>%s</th><td class=\"%s\">", label, cls);
    esc(t, value);
    ovt_text_put(t, "</td></tr>\n");
}

/* "2026-12-04T20:00:00Z (in 42 s)" or "(passed 3 s ago)"; "none" for 0. */
static void deadline_text(char *out, size_t cap, long long deadline, long long now)
{
    if (!deadline) {
        snprintf(out, cap, "none running");
        return;
    }
    char when[32];
    time_t tt = (time_t)deadline;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (deadline >= now)
        snprintf(out, cap, "%s (in %lld s)", when, deadline - now);
    else
        snprintf(out, cap, "%s (passed %lld s ago)", when, now - deadline);
}

static void head(ovt_text *t, const json_t *s)
{
    size_t nruns = json_array_size(json_object_get(s, "runs"));
    ovt_text_put(t, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                    "<meta http-equiv=\"refresh\" content=\"%lld\">\n<title>ovt arbiter: %zu run%s</title>\n"
                    "<style>body{font:14px sans-serif;margin:1.5em;color:#111;background:#fff}"
                    "code{font-size:12px}table{border-collapse:collapse;margin:.5em 0}"
                    "th,td{border:1px solid #bbb;padding:3px 8px;text-align:left;vertical-align:top}"
                    "th{background:#eee}.run{border:2px solid #456;padding:.5em 1em;margin:1em 0}"
                    ".phase{font-weight:bold}.bad{color:#a00}.ok{color:#070}</style>\n</head><body>\n",
                 num(s, "refresh_s"), nruns, nruns == 1 ? "" : "s");
    ovt_text_put(t, "<h1>ovt arbiter watcher</h1>\n<p>arbiter <code>");
    esc(t, str(s, "arbiter"));
    ovt_text_put(t, "</code> on chain %lld, contract <code>", num(s, "chain_id"));
    esc(t, str(s, "contract"));
    ovt_text_put(t, "</code></p>\n");
    const json_t *c = json_object_get(s, "chain");
    if (json_is_object(c))
        ovt_text_put(t, "<p id=\"chain\">head block %lld, read block %lld (the block it acts on), head block %lld s old</p>\n",
                     num(c, "head"), num(c, "read_block"), num(s, "now") - num(c, "head_time"));
    ovt_text_put(t, "<p id=\"health\" class=\"%s\">health: ", json_is_true(json_object_get(s, "healthy")) ? "ok" : "bad");
    esc(t, str(s, "health"));
    ovt_text_put(t, "</p>\n<p>page made at %s, refreshed every %lld s &middot; <a href=\"/metrics\">/metrics</a> "
                    "&middot; <a href=\"/healthz\">/healthz</a> &middot; <a href=\"/status.json\">/status.json</a></p>\n",
                 str(s, "now_utc"), num(s, "refresh_s"));
}

/* The bisection's progress: round r of depth d, as text and a bar. */
static void bisection(ovt_text *t, const json_t *b, const char *phase)
{
    long long d = num(b, "depth"), r = num(b, "round") < d ? num(b, "round") : d; /* past the leaves: done */
    ovt_text_put(t, "<tr><th>bisection</th><td class=\"bisection\">");
    if (!d) {
        ovt_text_put(t, "not started (no dispute yet)</td></tr>\n");
        return;
    }
    ovt_text_put(t, "round %lld of %lld <progress value=\"%lld\" max=\"%lld\"></progress>", r, d, r, d);
    if (r >= d || strcmp(phase, "bisecting") != 0)
        ovt_text_put(t, " &middot; disputed step %lld", num(b, "index"));
    ovt_text_put(t, "</td></tr>\n");
}

/* An amount of wei (decimal digits, as the JSON twin has it) as an
 * operator reads it: in ETH from 10^12 wei (a millionth of one) up, exact
 * to the wei ("1 ETH", "0.3 ETH", "2.000000000000000001 ETH"), else in wei. */
static void amount(char *out, size_t cap, const char *wei)
{
    size_t n = strlen(wei);
    if (n <= 12 || n > 78 || strspn(wei, "0123456789") != n) {
        snprintf(out, cap, "%s wei", wei);
        return;
    }
    size_t lead = n > 18 ? n - 18 : 0; /* digits before the point */
    size_t pad = 18 - (n - lead);      /* zeros after the point before the digits */
    char frac[19];
    memset(frac, '0', pad);
    memcpy(frac + pad, wei + lead, n - lead);
    size_t k = 18;
    while (k > 0 && frac[k - 1] == '0')
        k--;
    frac[k] = 0;
    snprintf(out, cap, "%.*s%s%s ETH", lead ? (int)lead : 1, lead ? wei : "0", k ? "." : "", frac);
}

static void run_terms(ovt_text *t, const json_t *r)
{
    const json_t *b = json_object_get(r, "bonds");
    char line[400];
    if (json_is_object(b)) {
        char tb[96], ab[96], rb[96];
        amount(tb, sizeof tb, str(b, "trainer_wei"));
        amount(ab, sizeof ab, str(b, "auditor_wei"));
        amount(rb, sizeof rb, str(b, "arbiter_wei"));
        snprintf(line, sizeof line, "trainer %s, auditor %s, arbiter %s", tb, ab, rb);
        row(t, "bonds", "bonds", line);
    }
    if (json_object_get(r, "trainer")) {
        snprintf(line, sizeof line, "trainer %s, auditor %s, %lld steps", str(r, "trainer"), str(r, "auditor"),
                 num(r, "steps"));
        row(t, "parties", "parties", line);
    }
    const json_t *c = json_object_get(r, "committee");
    if (json_is_object(c) && num(c, "count") > 1) {
        snprintf(line, sizeof line, "%lld arbiters, %lld needed; %lld seated, %lld sealed, %lld revealed",
                 num(c, "count"), num(c, "threshold"), num(c, "seated"), num(c, "committed"), num(c, "revealed"));
        row(t, "committee", "committee", line);
    }
}

/* What the arbiter found and sent. */
static void run_findings(ovt_text *t, const json_t *r)
{
    char line[400];
    const json_t *e = json_object_get(r, "evaluation");
    if (json_is_object(e)) {
        snprintf(line, sizeof line, "step %lld: %s%s%s", num(e, "step"), str(e, "result"),
                 json_object_get(e, "leaf_matches") ? "; the recomputed leaf is " : "", str(e, "leaf_matches"));
        row(t, "evaluation", "evaluation", line);
    } else {
        row(t, "evaluation", "evaluation", "none yet");
    }
    const json_t *v = json_object_get(r, "sent");
    if (json_is_object(v)) {
        snprintf(line, sizeof line, "%s: %s, tx %s", str(v, "kind"), str(v, "outcome"),
                 json_is_string(json_object_get(v, "tx")) ? str(v, "tx") : "not sent yet");
        row(t, "verdict given", "verdict", line);
    } else {
        row(t, "verdict given", "verdict", "none");
    }
    const json_t *a = json_object_get(r, "next_action");
    if (json_is_object(a)) {
        snprintf(line, sizeof line, "%s: %s", str(a, "action"), str(a, "reason"));
        row(t, "next action", "next", line);
    }
}

/* The game's events from RunOpened on, as the watcher saw them. */
static void run_events(ovt_text *t, const json_t *r)
{
    const json_t *ev = json_object_get(r, "events");
    ovt_text_put(t, "<details open><summary>%zu event%s on chain</summary><ol class=\"events\">\n",
                 json_array_size(ev), json_array_size(ev) == 1 ? "" : "s");
    size_t i;
    const json_t *e;
    json_array_foreach(ev, i, e) {
        ovt_text_put(t, "<li>");
        esc(t, str(e, "event"));
        ovt_text_put(t, " in block %lld, tx <code>", num(e, "block"));
        esc(t, str(e, "tx"));
        ovt_text_put(t, "</code></li>\n");
    }
    ovt_text_put(t, "</ol></details>\n");
}

static void run_section(ovt_text *t, const json_t *r, long long now)
{
    const char *phase = str(r, "phase");
    ovt_text_put(t, "<section class=\"run\" id=\"run-");
    esc(t, str(r, "run_id"));
    const char *challenge_of = json_string_value(json_object_get(r, "challenge_of"));
    ovt_text_put(t, "\"><h3>%s <code>", challenge_of ? "challenge" : "run");
    esc(t, str(r, "run_id"));
    ovt_text_put(t, "</code>%s</h3>\n<table>\n", json_is_true(json_object_get(r, "followed")) ? "" : " (no longer followed)");
    if (challenge_of)
        row(t, "challenges run", "", challenge_of);
    row(t, "phase", "phase", phase);
    if (!strcmp(phase, "settled"))
        row(t, "outcome", "outcome", str(r, "outcome"));
    char line[160];
    deadline_text(line, sizeof line, num(r, "deadline"), now);
    row(t, "deadline", "deadline", line);
    const json_t *c = json_object_get(r, "committee");
    if (json_is_object(c) && num(c, "commit_deadline")) {
        deadline_text(line, sizeof line, num(c, "commit_deadline"), now);
        row(t, "ballots due", "deadline", line);
    }
    bisection(t, json_object_get(r, "bisection"), phase);
    run_terms(t, r);
    run_findings(t, r);
    ovt_text_put(t, "</table>\n");
    run_events(t, r);
    ovt_text_put(t, "</section>\n");
}

/* A table of log events (time, event, run, message), or a line saying none. */
static void log_table(ovt_text *t, const json_t *list, const char *id, const char *none)
{
    if (!json_array_size(list)) {
        ovt_text_put(t, "<p id=\"%s\">%s</p>\n", id, none);
        return;
    }
    ovt_text_put(t, "<table id=\"%s\"><tr><th>time</th><th>event</th><th>run</th><th>message</th></tr>\n", id);
    for (size_t i = json_array_size(list); i-- > 0;) { /* newest first */
        const json_t *e = json_array_get(list, i);
        ovt_text_put(t, "<tr><td>");
        esc(t, str(e, "time"));
        ovt_text_put(t, "</td><td>");
        esc(t, str(e, "event"));
        char run[11];
        snprintf(run, sizeof run, "%s", str(e, "run_id")); /* "0x" and 8 digits */
        ovt_text_put(t, "</td><td><code>");
        esc(t, run);
        ovt_text_put(t, "</code></td><td>");
        esc(t, str(e, "message"));
        ovt_text_put(t, "</td></tr>\n");
    }
    ovt_text_put(t, "</table>\n");
}

int arb_status_render_html(char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    json_t *s = arb_status_snapshot();
    if (!s)
        return ovt_fail(OVT_ENOMEM, "out of memory rendering the status page");
    ovt_text t = {0};
    head(&t, s);
    const json_t *runs = json_object_get(s, "runs");
    ovt_text_put(&t, "<h2>Runs watched (%zu)</h2>\n", json_array_size(runs));
    if (!json_array_size(runs))
        ovt_text_put(&t, "<p id=\"no-runs\">No run names this arbiter yet.</p>\n");
    size_t i;
    const json_t *r;
    json_array_foreach(runs, i, r) run_section(&t, r, num(s, "now"));
    ovt_text_put(&t, "<h2>Last errors</h2>\n");
    log_table(&t, json_object_get(s, "errors"), "errors", "none");
    ovt_text_put(&t, "<h2>Recent events</h2>\n");
    log_table(&t, json_object_get(s, "events"), "log", "none yet");
    ovt_text_put(&t, "</body></html>\n");
    json_decref(s);
    if (t.failed) {
        free(t.p);
        return ovt_fail(OVT_ENOMEM, "out of memory rendering the status page");
    }
    *out = t.p;
    *len = t.len;
    return 0;
}
