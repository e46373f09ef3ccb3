/* Fuzz target: the JSON-RPC response parser and the shape checks applied to
 * results (quantities, logs). Property: a failure always leaves a message
 * and no result; a success always returns a result. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chain/rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *res = NULL;
    chain_rpc_error err = {0};
    int rc = chain_rpc_parse_response(&res, &err, (const char *)data, size, 1, NULL);
    if (rc != 0 && (res != NULL || ovt_errmsg()[0] == '\0'))
        abort();
    if (rc == 0 && res == NULL)
        abort();
    if (rc == 0) {
        uint64_t v;
        chain_u256 w;
        chain_log log;
        if (json_is_string(res)) {
            (void)!chain_hexq_u64(&v, json_string_value(res));
            (void)!chain_hexq_u256(&w, json_string_value(res));
        }
        if (json_is_array(res)) {
            for (size_t i = 0; i < json_array_size(res) && i < 16; i++)
                if (chain_json_log(&log, json_array_get(res, i)) == 0)
                    chain_log_free(&log);
        } else if (chain_json_log(&log, res) == 0) {
            chain_log_free(&log);
        }
    }
    json_decref(res);
    chain_rpc_error_clear(&err);
    return 0;
}
