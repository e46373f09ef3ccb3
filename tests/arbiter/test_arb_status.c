/* The arbiter's status page (/status, /status.json on --metrics-addr) in a
 * real browser, Debian's chromium headless, during a dispute on anvil
 * (labels arbiter, anvil). The test starts anvil with the contract (the
 * contract fixture) and `ovt arbiter watch --metrics-addr`, drives the chain
 * itself and after every step waits until /status.json shows the change
 * (events, not sleeps), then loads /status in chromium:
 *   no run yet -> the page says so, refreshes itself, links /metrics;
 *   a run naming the arbiter opened and disputed -> bisecting, round r of
 *   the depth, the deadline ahead, the bonds, the RunOpened and
 *   DisputeOpened events;
 *   the bisection played out, the store empty -> settled, the verdict the
 *   arbiter gave (inputs-unavailable) with its transaction, VerdictGiven;
 *   a screenshot of that page: a PNG of the window's size that is not
 *   blank (decoded here with zlib: enough dark pixels for the text).
 * And offline: every value on the page is HTML-escaped (a log message with
 * markup in it), and a path the page does not serve stays 404. Last, the
 * README's `ovt devnet --fault bitflip --at 17` with the arbiter's page
 * (--arbiter-metrics-addr, --linger): open to verdict, in chromium.
 * Skipped (exit 77) when chromium is not installed. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "arbiter/status.h"
#include "check.h"
#include "common/fileio.h"
#include "fixture.h"
#include "support/proc.h"
#include "support/servers.h"
#include "watch_fixture.h"

#define SKIP 77
#define SHOT_W 1200
#define SHOT_H 1500

static const char *chromium;
static char dir[] = "/tmp/ovt-status-XXXXXX";
static char status_url[128], json_url[128];
static char body[1 << 18];

/* `chromium --headless ... --dump-dom URL` (stderr to DIR/chromium.log):
 * the DOM after load, malloc'd, or NULL. */
static char *dump_dom(const char *url)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "timeout 120 %s --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir=%s/chrome "
             "--dump-dom '%s' 2>>%s/chromium.log",
             chromium, dir, url, dir);
    char *out = NULL;
    int rv = tsup_runl(&out, "/bin/sh", "-c", cmd, NULL);
    if (rv != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static int shoot(const char *url, const char *png)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "timeout 120 %s --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars "
             "--user-data-dir=%s/chrome --window-size=%d,%d --screenshot=%s '%s' 2>>%s/chromium.log",
             chromium, dir, SHOT_W, SHOT_H, png, url, dir);
    return tsup_runl(NULL, "/bin/sh", "-c", cmd, NULL);
}

/* /status.json now, parsed (NULL when it does not answer). */
static json_t *status_now(void)
{
    if (tsup_http_get(json_url, body, sizeof body) != 200)
        return NULL;
    return json_loads(body, 0, NULL);
}

/* The first run of /status.json (borrowed from s). */
static json_t *first_run(json_t *s)
{
    return json_array_get(json_object_get(s, "runs"), 0);
}

static const char *run_str(json_t *s, const char *key)
{
    return json_string_value(json_object_get(first_run(s), key));
}

/* A PNG's width, height and how many of its pixels are dark (every
 * channel below 128): the page's text. 8-bit RGB or RGBA, not interlaced,
 * as chromium writes it. 0 or -1 (not such a PNG). */
static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint8_t paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return (uint8_t)(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

static int png_ink(const char *path, uint32_t *w, uint32_t *h, uint64_t *dark)
{
    uint8_t *f;
    size_t n;
    if (ovt_read_file(path, &f, &n, 64u << 20))
        return -1;
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
    int rv = -1;
    uint8_t *z = NULL, *raw = NULL;
    size_t zlen = 0;
    if (n < 33 || memcmp(f, sig, 8) || memcmp(f + 12, "IHDR", 4))
        goto done;
    *w = be32(f + 16);
    *h = be32(f + 20);
    unsigned depth = f[24], type = f[25], bpp = type == 6 ? 4 : type == 2 ? 3 : 0;
    if (depth != 8 || !bpp || f[28] != 0 || !*w || !*h || *w > 20000 || *h > 20000)
        goto done;
    z = malloc(n);
    for (size_t p = 8; z && p + 12 <= n;) { /* the IDAT chunks, concatenated */
        uint32_t len = be32(f + p);
        if (p + 12 + len > n)
            goto done;
        if (!memcmp(f + p + 4, "IDAT", 4)) {
            memcpy(z + zlen, f + p + 8, len);
            zlen += len;
        }
        p += 12 + len;
    }
    size_t stride = (size_t)*w * bpp, rawlen = (stride + 1) * *h;
    uLongf got = rawlen;
    if (!z || !(raw = malloc(rawlen)) || uncompress(raw, &got, z, zlen) != Z_OK || got != rawlen)
        goto done;
    *dark = 0;
    for (uint32_t y = 0; y < *h; y++) {
        uint8_t *row = raw + y * (stride + 1) + 1, *up = y ? row - (stride + 1) : NULL, ft = row[-1];
        for (size_t x = 0; x < stride; x++) {
            int a = x >= bpp ? row[x - bpp] : 0, b = up ? up[x] : 0, c = up && x >= bpp ? up[x - bpp] : 0;
            row[x] = (uint8_t)(row[x] + (ft == 1 ? a : ft == 2 ? b : ft == 3 ? (a + b) / 2 : ft == 4 ? paeth(a, b, c) : 0));
        }
        for (size_t x = 0; x < stride; x += bpp)
            *dark += row[x] < 128 && row[x + 1] < 128 && row[x + 2] < 128;
    }
    rv = 0;
done:
    free(f);
    free(z);
    free(raw);
    return rv;
}

/* Offline: a log message with markup is escaped on the page; the JSON
 * twin carries it as it is. */
static void escaping(void)
{
    arb_status_event("error", NULL, "node said <script>alert(1)</script> & \"quit\"");
    char *html, *js;
    size_t n;
    CHECK(arb_status_render_html(&html, &n) == 0);
    CHECK(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quit&quot;") != NULL);
    CHECK(strstr(html, "<script>") == NULL);
    CHECK(strstr(html, "<meta http-equiv=\"refresh\" content=\"5\">") != NULL);
    CHECK(strstr(html, "id=\"no-runs\"") != NULL);
    CHECK(arb_status_render_json(&js, &n) == 0);
    json_t *j = json_loads(js, 0, NULL);
    CHECK(j && !strcmp(json_string_value(json_object_get(json_array_get(json_object_get(j, "errors"), 0), "message")),
                       "node said <script>alert(1)</script> & \"quit\""));
    json_decref(j);
    free(html);
    free(js);
}

/* A challenge's game (issue 43) is listed as a challenge, naming the run
 * it disputes, in /status.json ("challenge_of") and on the page. */
static void challenge_listed(void)
{
    arb_game g;
    memset(&g, 0, sizeof g);
    memset(g.run_id.b, 0x11, 32);
    memset(g.challenged_run.b, 0x22, 32);
    g.is_challenge = true;
    g.events = json_array();
    arb_status_game(&g, NULL, NULL, NULL, NULL);
    char *html, *js, id[67], of[67];
    size_t n;
    arb_hex32(id, &g.run_id);
    arb_hex32(of, &g.challenged_run);
    CHECK(arb_status_render_json(&js, &n) == 0);
    json_t *j = json_loads(js, 0, NULL);
    json_t *r = json_array_get(json_object_get(j, "runs"), 0); /* the only run listed */
    const char *rid = json_string_value(json_object_get(r, "run_id"));
    const char *got = json_string_value(json_object_get(r, "challenge_of"));
    CHECK(rid && !strcmp(rid, id));
    CHECK_MSG(got && !strcmp(got, of), "/status.json: %s", js);
    CHECK(arb_status_render_html(&html, &n) == 0);
    char want[200];
    snprintf(want, sizeof want, "<h3>challenge <code>%s</code>", id);
    CHECK_MSG(strstr(html, want) != NULL && strstr(html, "challenges run") != NULL && strstr(html, of) != NULL, "%s",
              html);
    json_decref(j);
    json_decref(g.events);
    free(html);
    free(js);
}

/* Waits (up to four minutes, the arbiter alive) until cond holds of
 * /status.json; s is the last one read. */
#define WAIT_STATUS(cond, what)                                                                          \
    do {                                                                                                 \
        int seen_ = 0, st_;                                                                              \
        for (int i_ = 0; i_ < 2400 && !seen_; i_++) {                                                    \
            json_decref(s);                                                                              \
            s = status_now();                                                                            \
            seen_ = s && (cond);                                                                         \
            if (!seen_ && tsup_exited(arb_pid, &st_))                                                    \
                break;                                                                                   \
            if (!seen_)                                                                                  \
                tsup_sleep_ms(100);                                                                      \
        }                                                                                                \
        CHECK_MSG(seen_, "/status.json never showed %s; see %s/arbiter.log; last:\n%s", what, dir, body); \
    } while (0)

static int has(const char *dom, const char *needle)
{
    int ok = dom && strstr(dom, needle);
    if (!ok)
        fprintf(stderr, "the page lacks '%s':\n%s\n", needle, dom ? dom : "(no DOM)");
    return ok;
}

/* `ovt devnet --fault bitflip --at 17 --arbiter-metrics-addr ADDR --linger`
 * (the README's first command, its page kept up after the settlement): the
 * arbiter's page shows the dispute from RunOpened to VerdictGiven, the
 * disputed step 17 and the verdict auditor-right it gave; chromium loads it
 * and takes its picture; an interrupt ends the devnet, as expected (0). */
static void devnet_dispute(void)
{
    int port = tsup_free_port();
    char ovt[4096], maddr[64], log[300], png[300];
    snprintf(ovt, sizeof ovt, "%s/ovt", getenv("OVT_BINARY_DIR"));
    snprintf(maddr, sizeof maddr, "127.0.0.1:%d", port);
    snprintf(status_url, sizeof status_url, "http://%s/status", maddr);
    snprintf(json_url, sizeof json_url, "http://%s/status.json", maddr);
    snprintf(log, sizeof log, "%s/devnet.log", dir);
    char *argv[] = {ovt, "devnet", "--fault", "bitflip", "--at", "17", "--arbiter-metrics-addr", maddr, "--linger",
                    "600", NULL};
    pid_t arb_pid = tsup_spawn(argv, log);
    CHECK(port > 0 && arb_pid > 0);
    json_t *s = NULL;
    WAIT_STATUS(run_str(s, "phase") && !strcmp(run_str(s, "phase"), "settled") &&
                    json_is_object(json_object_get(first_run(s), "sent")),
                "the devnet's run settled with the verdict sent");
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(first_run(s), "sent"), "outcome")),
                  "auditor-right"));
    char *dom = dump_dom(status_url);
    CHECK(has(dom, "<td class=\"phase\">settled</td>") && has(dom, "<td class=\"outcome\">auditor-right</td>"));
    CHECK(has(dom, "<li>RunOpened in block") && has(dom, "<li>DisputeOpened in block") &&
          has(dom, "<li>StepFixed in block") && has(dom, "<li>VerdictGiven in block"));
    /* the devnet's bonds (1 ETH each, no arbiter bond) as an operator reads them */
    CHECK(has(dom, "trainer 1 ETH, auditor 1 ETH, arbiter 0 wei"));
    CHECK(has(dom, "verdict: auditor-right, tx 0x") && has(dom, "disputed step 17") &&
          has(dom, "step 17: re-executed; the recomputed leaf is the auditor's"));
    free(dom);
    snprintf(png, sizeof png, "%s/devnet-status.png", dir);
    uint32_t w = 0, h = 0;
    uint64_t dark = 0;
    CHECK(shoot(status_url, png) == 0 && png_ink(png, &w, &h, &dark) == 0);
    CHECK_MSG(w == SHOT_W && h == SHOT_H && dark > 2000, "%u x %u, %llu dark pixels", w, h, (unsigned long long)dark);
    json_decref(s);
    /* the page stays until interrupted; then the devnet ends as expected */
    CHECK(kill(arb_pid, SIGINT) == 0);
    int st = -1, done = 0;
    for (int i = 0; i < 1200 && !(done = tsup_exited(arb_pid, &st)); i++)
        tsup_sleep_ms(100);
    CHECK_MSG(done && st == 0, "ovt devnet ended with %d (see %s)", st, log);
    if (!done)
        tsup_stop(arb_pid);
}

int main(void)
{
    static const char *const browsers[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser", NULL};
    chromium = tsup_find_exe(browsers);
    if (!chromium) {
        printf("SKIP: chromium is not installed (apt-get install chromium; scripts/setup.sh)\n");
        return SKIP;
    }
    CHECK_RUN(escaping());
    CHECK_RUN(challenge_listed());
    if (!getenv("OVT_BINARY_DIR") || !mkdtemp(dir)) {
        fprintf(stderr, "OVT_BINARY_DIR unset or mkdtemp failed\n");
        return 1;
    }
    int port = tsup_free_port();
    CHECK(port > 0);
    fx_env env;
    CHECK(fx_start(&env) == 0);
    if (!env.rpc)
        return check_done();
    char maddr[64], contract[43];
    snprintf(maddr, sizeof maddr, "127.0.0.1:%d", port);
    snprintf(status_url, sizeof status_url, "http://%s/status", maddr);
    snprintf(json_url, sizeof json_url, "http://%s/status.json", maddr);
    pid_t arb_pid = watch_spawn(&env, dir, maddr, false, contract);
    CHECK(arb_pid > 0);
    json_t *s = NULL;

    /* watching, no run yet */
    WAIT_STATUS(json_integer_value(json_object_get(json_object_get(s, "chain"), "read_block")) >= 1, "a read block");
    char *dom = dump_dom(status_url);
    CHECK(has(dom, "No run names this arbiter yet") && has(dom, "http-equiv=\"refresh\""));
    CHECK(has(dom, "href=\"/metrics\"") && has(dom, "href=\"/status.json\"") && has(dom, contract + 2));
    free(dom);
    CHECK(tsup_http_get(status_url, body, sizeof body) == 200);
    char other[160];
    snprintf(other, sizeof other, "http://%s/status.html", maddr);
    CHECK(tsup_http_get(other, body, sizeof body) == 404);

    /* a run naming this arbiter, disputed: bisecting */
    fx_run run;
    CHECK(watch_dispute(&env, &run) == 0);
    char id[67];
    arb_hex32(id, &run.run_id);
    WAIT_STATUS(run_str(s, "phase") && !strcmp(run_str(s, "phase"), "bisecting"), "the run bisecting");
    json_t *b = json_object_get(first_run(s), "bisection");
    CHECK(!strcmp(run_str(s, "run_id"), id) && json_integer_value(json_object_get(b, "depth")) == 4);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(first_run(s), "bonds"), "trainer_wei")), "1000"));
    dom = dump_dom(status_url);
    CHECK(has(dom, id) && has(dom, "<td class=\"phase\">bisecting</td>") && has(dom, "round 0 of 4"));
    CHECK(has(dom, "(in ") && has(dom, "trainer 1000 wei") && has(dom, "<li>RunOpened in block") &&
          has(dom, "<li>DisputeOpened in block"));
    free(dom);

    /* played out, the store empty: the verdict is inputs unavailable */
    CHECK(fx_play(&env, &run, NULL, NULL) == 0);
    WAIT_STATUS(run_str(s, "phase") && !strcmp(run_str(s, "phase"), "settled") &&
                    json_is_object(json_object_get(first_run(s), "sent")),
                "the run settled with the verdict sent");
    json_t *sent = json_object_get(first_run(s), "sent");
    CHECK(!strcmp(json_string_value(json_object_get(sent, "kind")), "verdict"));
    CHECK(!strcmp(json_string_value(json_object_get(sent, "outcome")), "inputs-unavailable"));
    CHECK(!strcmp(run_str(s, "outcome"), "inputs-unavailable"));
    dom = dump_dom(status_url);
    CHECK(has(dom, "<td class=\"phase\">settled</td>") && has(dom, "<td class=\"outcome\">inputs-unavailable</td>"));
    CHECK(has(dom, "verdict: inputs-unavailable, tx 0x") && has(dom, "<li>VerdictGiven in block") &&
          has(dom, "disputed step 3"));
    free(dom);
    char png[300];
    snprintf(png, sizeof png, "%s/status.png", dir);
    CHECK(shoot(status_url, png) == 0);
    uint32_t w = 0, h = 0;
    uint64_t dark = 0;
    CHECK_MSG(png_ink(png, &w, &h, &dark) == 0, "%s is not an 8-bit RGB(A) PNG", png);
    CHECK_MSG(w == SHOT_W && h == SHOT_H, "the screenshot is %u x %u", w, h);
    /* text on white: a blank page has no dark pixel; this one has lines of it */
    CHECK_MSG(dark > 2000 && dark < (uint64_t)w * h / 4, "%llu dark pixels of %u", (unsigned long long)dark, w * h);
    printf("status page: %u x %u screenshot, %llu dark pixels (%s)\n", w, h, (unsigned long long)dark, png);
    json_decref(s);
    fx_run_free(&run);
    tsup_stop(arb_pid);
    fx_stop(&env);
    CHECK_RUN(devnet_dispute());
    return tsup_finish_dir(dir, check_done());
}
