/* A full dispute (`ovt devnet --fault bitflip`, gpt2-tiny, 16 steps, the
 * fault at step 8) on nodes other than anvil's instant blocks, every party at
 * its default confirmations unless the case says otherwise:
 *   ganache   the pinned npm ganache 7.9.2 (a block per transaction)
 *   hardhat   the pinned npm Hardhat 2.22.19 (a block per transaction)
 *   anvil-bt1 anvil --block-time 1, every party waiting for 6 confirmations
 *   anvil-bt2 anvil --block-time 2 (the arbiter's default: 2 confirmations)
 * Each ends with the auditor right at step 8. The case is the argument, so
 * ctest runs them side by side. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "support/proc.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_devnet_nodes ganache|hardhat|anvil-bt1|anvil-bt2\n");
        return 2;
    }
    const char *bin = getenv("OVT_BINARY_DIR");
    char ovt[4096];
    snprintf(ovt, sizeof ovt, "%s/ovt", bin ? bin : ".");
    char *args[32] = {ovt, "devnet", "--json", "--fault", "bitflip", "--steps", "16", "--at", "8", "--timeout", "400"};
    int n = 11;
    if (!strcmp(argv[1], "ganache") || !strcmp(argv[1], "hardhat")) {
        args[n++] = "--node";
        args[n++] = argv[1];
    } else if (!strcmp(argv[1], "anvil-bt1")) {
        args[n++] = "--block-time";
        args[n++] = "1";
        args[n++] = "--confirmations";
        args[n++] = "6";
    } else if (!strcmp(argv[1], "anvil-bt2")) {
        args[n++] = "--block-time";
        args[n++] = "2";
    } else {
        fprintf(stderr, "unknown case %s\n", argv[1]);
        return 2;
    }
    args[n] = NULL;
    char *text = NULL;
    int st = tsup_run(args, &text);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    CHECK_MSG(st == 0 && j, "%s: ovt devnet exited %d: %s", argv[1], st, text ? text : "(no output)");
    const char *outcome = j ? json_string_value(json_object_get(j, "outcome")) : NULL;
    CHECK_MSG(outcome && !strcmp(outcome, "auditor-right"), "%s: outcome %s", argv[1], text ? text : "-");
    CHECK(j && json_is_true(json_object_get(j, "as_expected")));
    CHECK(j && json_integer_value(json_object_get(j, "step")) == 8);
    json_decref(j);
    free(text);
    return check_done();
}
