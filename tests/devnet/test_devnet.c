/* `ovt devnet` end to end on a real anvil (label devnet): every fault kind
 * ends in the verdict that names the faulty party and the faulty step (none
 * ends verified), on gpt2-tiny runs of 64 steps (llama-tiny and resnet-mini
 * for two each); a party that stops answering loses by deadline and the arbiter's watcher logs it; SIGINT
 * stops every process the devnet started; bad input is a clear error.
 * Expected outcomes come from the contract's rules (docs/contract.md), not
 * from the devnet's own table. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "devnet_result.h"
#include "support/proc.h"

static char ovt[4096], tmp[4096];

/* Whether folder `dir` has no entries (the devnet's work folders are gone). */
static int empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n == 0;
}

/* Runs ovt devnet with the given arguments and --json; *out gets the parsed
 * result (NULL if stdout was not JSON). Returns the exit status. */
static int devnet(json_t **out, const char *const *args)
{
    char *argv[32] = {ovt, "devnet", "--json"};
    int n = 3;
    for (int i = 0; args[i] && n < 31; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    char *text = NULL;
    int st = tsup_run(argv, &text);
    *out = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return st;
}

/* Whether something still answers on the URL's loopback port. */
static int port_answers(const char *url)
{
    const char *colon = strrchr(url, ':');
    if (!colon)
        return 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

struct scenario {
    const char *fault;
    const char *silent;
    const char *outcome;   /* from the contract's rules for this fault */
    const char *outcome2;  /* also acceptable (poisoned-batch), or NULL */
    const char *wrong;     /* the party the outcome names */
    const char *extra[4];  /* more options, or NULL */
    unsigned arbiters;     /* --arbiters (0: the default, one) */
    /* committees: the wei each honest arbiter is paid on top of its bond
     * (the first honest seat gets the odd wei: reward0), worked out by hand
     * from the devnet's 0.1 ETH bond and the contract's rule (the
     * misbehaving arbiters' bonds shared by the honest ones) */
    const char *reward0, *reward;
};

#define ARBITER_BOND "100000000000000000"

/* A committee's run: every arbiter took its seat; no verdict() but sealed
 * and revealed ballots; every honest arbiter revealed the settled outcome
 * with the same evidence and kept its bond, every misbehaving one lost it. */
static void check_committee(const struct scenario *s, const json_t *j, const char *label, bool disputed)
{
    unsigned n = s->arbiters, silent = strcmp(s->fault, "silent-arbiter") == 0;
    CHECK_MSG(json_array_size(json_object_get(j, "arbiters")) == n, "%s: %zu arbiters", label,
              json_array_size(json_object_get(j, "arbiters")));
    CHECK_MSG(!strcmp(str(j, "committee_check"), ""), "%s: %s", label, str(j, "committee_check"));
    CHECK_EQ_U64(count_calls(j, "verdict", NULL), 0);
    CHECK_EQ_U64(count_calls(j, "accept", NULL), n);
    CHECK_EQ_U64(count_calls(j, "commitVerdict", NULL), disputed ? n - silent : 0);
    CHECK_EQ_U64(count_calls(j, "revealVerdict", NULL), disputed ? n - silent : 0);
    const char *evidence = NULL;
    bool first = true;
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(j, "arbiters"), i, a)
    {
        bool honest = !json_is_string(json_object_get(a, "misbehave"));
        const char *want_lost = honest ? "0" : ARBITER_BOND;
        const char *want_won = !honest || !s->reward ? "0" : first ? s->reward0 : s->reward;
        CHECK_MSG(!strcmp(str(a, "forfeited"), want_lost), "%s: %s lost %s, want %s", label, str(a, "name"),
                  str(a, "forfeited"), want_lost);
        CHECK_MSG(!strcmp(str(a, "reward"), want_won), "%s: %s rewarded %s, want %s", label, str(a, "name"),
                  str(a, "reward"), want_won);
        if (!honest || !disputed)
            continue;
        first = false;
        CHECK_MSG(!strcmp(str(a, "verdict"), str(j, "outcome")), "%s: %s revealed %s", label, str(a, "name"),
                  str(a, "verdict"));
        if (evidence)
            CHECK_MSG(!strcmp(str(a, "evidence"), evidence), "%s: honest evidence differs: %s, %s", label, evidence,
                      str(a, "evidence"));
        evidence = str(a, "evidence");
    }
}

static void run_scenario(const struct scenario *s)
{
    const char *args[16] = {"--fault", s->fault, "--at", "17", "--steps", "64", "--model", "gpt2-tiny"};
    int n = 8;
    char arbiters[16];
    snprintf(arbiters, sizeof arbiters, "%u", s->arbiters);
    if (s->arbiters) {
        args[n++] = "--arbiters";
        args[n++] = arbiters;
    }
    if (s->silent) {
        args[n++] = "--silent";
        args[n++] = s->silent;
    }
    for (int k = 0; k < 4 && s->extra[k]; k++)
        args[n++] = s->extra[k];
    args[n] = NULL;
    json_t *j;
    int st = devnet(&j, args);
    char label[96];
    snprintf(label, sizeof label, "%s%s%s%s%s%s", s->silent ? s->silent : s->fault, s->extra[0] ? " " : "",
             s->extra[0] ? s->extra[0] : "", s->extra[1] ? " " : "", s->extra[1] ? s->extra[1] : "",
             s->arbiters > 1 ? " (committee)" : "");
    CHECK_MSG(st == 0, "%s: exit status %d", label, st);
    CHECK_MSG(j != NULL, "%s: no JSON result", label);
    if (!j)
        return;
    const char *out = str(j, "outcome");
    CHECK_MSG(strcmp(out, s->outcome) == 0 || (s->outcome2 && strcmp(out, s->outcome2) == 0),
              "%s: outcome %s, want %s", label, out, s->outcome);
    CHECK_MSG(strcmp(str(j, "wrong_party"), s->wrong) == 0, "%s: wrong party %s, want %s", label,
              str(j, "wrong_party"), s->wrong);
    CHECK(json_is_true(json_object_get(j, "as_expected")));
    json_t *step = json_object_get(j, "step");
    bool committee = s->arbiters > 1, disputed = strcmp(s->outcome, "verified") != 0 && !s->silent;
    if (committee)
        check_committee(s, j, label, disputed);
    int verdicts = committee ? disputed : count_calls(j, "verdict", "arbiter");
    if (!committee)
        CHECK_EQ_U64(count_calls(j, "verdict", NULL), verdicts); /* only the arbiter gives one */
    CHECK_EQ_U64(count_calls(j, "commit", "trainer"), 1);
    CHECK_EQ_U64(count_calls(j, "commit", "auditor"), 1);
    CHECK_EQ_U64(count_calls(j, "deploy", "deployer"), 1);
    json_t *gas = json_object_get(j, "gas");
    CHECK(json_integer_value(json_object_get(gas, "trainer")) > 0);
    CHECK(json_integer_value(json_object_get(gas, "auditor")) > 0);
    if (strcmp(s->outcome, "verified") == 0) {
        CHECK(json_is_null(step));
        CHECK_EQ_U64(verdicts, 0);
        CHECK_EQ_U64(count_calls(j, "bisect", NULL), 0);
    } else if (s->silent) {
        /* the other party claimed the timeout, and the arbiter's watcher saw it */
        CHECK_EQ_U64(verdicts, 0);
        const char *other = strcmp(s->silent, "trainer") == 0 ? "auditor" : "trainer";
        CHECK_EQ_U64(count_calls(j, "timeout", other), 1);
        CHECK_MSG(strstr(str(j, "arbiter_saw"), s->outcome) != NULL, "%s: the arbiter saw '%s'", label,
                  str(j, "arbiter_saw"));
    } else {
        CHECK_MSG(json_integer_value(step) == 17, "%s: step %lld, want 17", label,
                  (long long)json_integer_value(step));
        CHECK_EQ_U64(verdicts, 1);
        CHECK(json_integer_value(json_object_get(gas, "arbiter")) > 0);
        CHECK_EQ_U64(count_calls(j, "revealLeaf", "trainer"), 1);
        CHECK_EQ_U64(count_calls(j, "revealLeaf", "auditor"), 1);
        /* depth 7 for 65 leaves: both parties bisect every round */
        CHECK_EQ_U64(count_calls(j, "bisect", "trainer"), 7);
        CHECK_EQ_U64(count_calls(j, "bisect", "auditor"), 7);
        CHECK(json_real_value(json_object_get(j, "commit_to_verdict_s")) > 0);
    }
    /* every process is gone: nothing answers on anvil's port any more; and
     * the work folder under $TMPDIR is removed */
    CHECK_MSG(!port_answers(str(j, "rpc_url")), "%s: anvil still answers at %s", label, str(j, "rpc_url"));
    CHECK_MSG(empty_dir(tmp), "%s: the work folder was left in %s", label, tmp);
    printf("%-32s %-8s -> %s at %s, %.1f s from the commitment\n", label, s->silent ? s->silent : "", out,
           json_is_null(step) ? "-" : "step 17", json_real_value(json_object_get(j, "commit_to_verdict_s")));
    json_decref(j);
}

/* The PIDs of the direct children of pid (from /proc). */
static int children_of(pid_t pid, pid_t *out, int cap)
{
    DIR *d = opendir("/proc");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < cap) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        const char *rp = strrchr(buf, ')');
        int ppid;
        char state;
        if (rp && sscanf(rp + 2, "%c %d", &state, &ppid) == 2 && ppid == pid)
            out[n++] = (pid_t)atoi(e->d_name);
    }
    if (d)
        closedir(d);
    return n;
}

/* SIGINT in the middle of a game: the devnet stops every child and exits 1. */
static void test_sigint(void)
{
    char keep[4200];
    snprintf(keep, sizeof keep, "%s/sigint.XXXXXX", tmp);
    if (!mkdtemp(keep))
        return;
    char dir[4300], auditor_log[4400];
    snprintf(dir, sizeof dir, "%s/work", keep);
    snprintf(auditor_log, sizeof auditor_log, "%s/auditor.log", dir);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl(ovt, ovt, "devnet", "--fault", "bitflip", "--keep", dir, (char *)NULL);
        _exit(127);
    }
    /* wait until the auditor runs: anvil, the arbiter, the trainer's agent and the auditor are then up */
    for (int i = 0; i < 6000 && access(auditor_log, F_OK) != 0; i++)
        usleep(100000);
    /* The devnet creates a child's log before it forks the child: look
     * again until the fork has happened. */
    pid_t kids[16];
    int nk = children_of(pid, kids, 16);
    for (int i = 0; i < 300 && nk < 4; i++) {
        usleep(100000);
        nk = children_of(pid, kids, 16);
    }
    CHECK_MSG(nk >= 4, "%d children before SIGINT", nk);
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    for (int i = 0; i < nk; i++)
        CHECK_MSG(kill(kids[i], 0) != 0 && errno == ESRCH, "child %d still runs after SIGINT", (int)kids[i]);
    char *rm[] = {"/bin/rm", "-rf", keep, NULL};
    tsup_run(rm, NULL);
}

static void test_errors(void)
{
    char *out = NULL;
    char *bad_fault[] = {ovt, "devnet", "--fault", "meteor", NULL};
    CHECK_EQ_U64(tsup_run(bad_fault, &out), 2);
    free(out);
    char *no_fault[] = {ovt, "devnet", NULL};
    CHECK_EQ_U64(tsup_run(no_fault, &out), 2);
    free(out);
    char *late[] = {ovt, "devnet", "--fault", "bitflip", "--steps", "8", "--at", "9", NULL};
    CHECK_EQ_U64(tsup_run(late, &out), 2);
    free(out);
    char *silent_none[] = {ovt, "devnet", "--fault", "none", "--silent", "trainer", NULL};
    CHECK_EQ_U64(tsup_run(silent_none, &out), 2);
    free(out);
    /* a missing anvil names what to do, and leaves no folder behind */
    char *no_anvil[] = {"/bin/sh", "-c", "\"$0\" devnet --fault none --anvil /nonexistent/anvil 2>&1", ovt, NULL};
    int st = tsup_run(no_anvil, &out);
    CHECK_EQ_U64(st, 1);
    CHECK_MSG(out && strstr(out, "--anvil /nonexistent/anvil") && strstr(out, "not an executable"), "%s",
              out ? out : "-");
    free(out);
    char *help[] = {ovt, "devnet", "--help", NULL};
    CHECK_EQ_U64(tsup_run(help, &out), 0);
    CHECK(out && strstr(out, "withheld-inputs") && strstr(out, "--silent"));
    free(out);
}

int main(int argc, char **argv)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    const char *anvil = getenv("OVT_ANVIL");
    if (!bin || !anvil || !*anvil) {
        fprintf(stderr, "OVT_BINARY_DIR and OVT_ANVIL must be set (run `npm ci`, then reconfigure)\n");
        return 1;
    }
    snprintf(ovt, sizeof ovt, "%s/ovt", bin);
    /* the devnets' temporary folders go here, so the test sees them removed */
    snprintf(tmp, sizeof tmp, "%s/test_devnet.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp))
        return 1;
    setenv("TMPDIR", tmp, 1);
    static const struct scenario scenarios[] = {
        {"none", NULL, "verified", NULL, "none", {NULL}, 0, NULL, NULL},
        {"bitflip", NULL, "auditor-right", NULL, "trainer", {NULL}, 0, NULL, NULL},
        {"poisoned-batch", NULL, "auditor-right", "fraudulent-log", "trainer", {NULL}, 0, NULL, NULL},
        {"skipped-step", NULL, "auditor-right", NULL, "trainer", {NULL}, 0, NULL, NULL},
        {"forged-log", NULL, "fraudulent-log", NULL, "trainer", {NULL}, 0, NULL, NULL},
        {"omitted-log", NULL, "fraudulent-log", NULL, "trainer", {NULL}, 0, NULL, NULL},
        {"withheld-inputs", NULL, "inputs-unavailable", NULL, "trainer", {NULL}, 0, NULL, NULL},
        {"lying-auditor", NULL, "trainer-right", NULL, "auditor", {NULL}, 0, NULL, NULL},
        {"bitflip", "trainer", "trainer-timed-out", NULL, "trainer", {NULL}, 0, NULL, NULL},
        {"lying-auditor", "auditor", "auditor-timed-out", NULL, "auditor", {NULL}, 0, NULL, NULL},
        /* a flip the canonical arbiter rejects (rule 3), disputed and won by
         * an auditor on ref (re-executing canonically) and on cpu; under
         * band rules 1 (rule 2) the same forgery settles verified: the
         * hole issue 32 found, kept as the ablation */
        {"hidden-flip", NULL, "fraudulent-log", NULL, "trainer", {NULL}, 0, NULL, NULL},
        {"hidden-flip", NULL, "fraudulent-log", NULL, "trainer", {"--auditor-backend", "cpu"}, 0, NULL, NULL},
        {"hidden-flip", NULL, "verified", NULL, "none", {"--band-rules", "1"}, 0, NULL, NULL},
        /* the Llama family: the trainer's flip at 17 and a forged log entry */
        {"bitflip", NULL, "auditor-right", NULL, "trainer", {"--model", "llama-tiny"}, 0, NULL, NULL},
        {"hidden-flip", NULL, "fraudulent-log", NULL, "trainer", {"--model", "llama-tiny"}, 0, NULL, NULL},
        /* the ResNet on MNIST's images: the same two */
        {"bitflip", NULL, "auditor-right", NULL, "trainer", {"--model", "resnet-mini"}, 0, NULL, NULL},
        {"hidden-flip", NULL, "fraudulent-log", NULL, "trainer", {"--model", "resnet-mini"}, 0, NULL, NULL},
    };
    /* `test_devnet committee`: the same faults with three arbiters, and the
     * committee's own faults */
    if (argc > 1 && !strcmp(argv[1], "committee")) {
        for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
            struct scenario s = scenarios[i];
            s.arbiters = 3;
            CHECK_RUN(run_scenario(&s));
        }
        static const char third[] = "50000000000000000", fifth0[] = "66666666666666668", fifth[] = "66666666666666666";
        static const struct scenario committee[] = {
            /* one liar's or one silent arbiter's 0.1 ETH, shared by the two honest ones */
            {"lying-arbiter", NULL, "auditor-right", NULL, "trainer", {NULL}, 3, third, third},
            {"silent-arbiter", NULL, "auditor-right", NULL, "trainer", {NULL}, 3, third, third},
            /* m - 1 = 2 of 5 collude: their 0.2 ETH over three, 2 wei left to the first */
            {"colluding-arbiters", NULL, "auditor-right", NULL, "trainer", {NULL}, 5, fifth0, fifth},
        };
        for (size_t i = 0; i < sizeof committee / sizeof committee[0]; i++)
            CHECK_RUN(run_scenario(&committee[i]));
        rmdir(tmp);
        return check_done();
    }
    CHECK_RUN(test_errors());
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        CHECK_RUN(run_scenario(&scenarios[i]));
    CHECK_RUN(test_sigint());
    rmdir(tmp);
    return check_done();
}
