#ifndef OVT_TESTS_DEVNET_RESULT_H
#define OVT_TESTS_DEVNET_RESULT_H

/* Reading `ovt devnet --json`'s result in the devnet suites. */
#include <jansson.h>
#include <string.h>

#include "check.h"

/* The string at key, "" when absent or not a string. */
static inline const char *str(const json_t *j, const char *key)
{
    const char *s = json_string_value(json_object_get(j, key));
    return s ? s : "";
}

/* The transactions of a result that made call `call`, sent by party (NULL:
 * anyone); every transaction of the result must have been mined ok. */
static inline int count_calls(const json_t *j, const char *call, const char *party)
{
    int n = 0;
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(j, "transactions"), i, t)
    {
        if (strcmp(str(t, "call"), call) == 0 && (!party || strcmp(str(t, "party"), party) == 0))
            n++;
        CHECK_MSG(json_is_true(json_object_get(t, "ok")), "a reverted %s transaction", str(t, "call"));
    }
    return n;
}

#endif
