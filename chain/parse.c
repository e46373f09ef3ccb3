#include "chain/parse.h"

#include <string.h>

#include "chain/keys.h"

int chain_parse_wei(chain_u256 *out, const char *what, const char *text, unsigned bits)
{
    static const struct {
        const char *suffix;
        unsigned decimals;
    } units[] = {{"gwei", 9}, {"ether", 18}, {"wei", 0}};
    size_t n = strlen(text);
    unsigned decimals = 0;
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t k = strlen(units[u].suffix);
        if (n > k && !strcmp(text + n - k, units[u].suffix)) {
            n -= k;
            decimals = units[u].decimals;
            break;
        }
    }
    /* the amount in wei as decimal digits: the whole part, then the
     * fraction padded to the unit's decimals */
    char digits[80 + 18];
    size_t len = 0, frac = 0;
    int point = 0;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (c == '.' && !point && decimals > 0) {
            point = 1;
            continue;
        }
        if (c < '0' || c > '9' || len >= 78 || (point && ++frac > decimals))
            goto bad;
        if (len > 0 || c != '0')
            digits[len++] = c;
    }
    if (n == 0 || (point && frac == 0))
        goto bad;
    for (; frac < decimals; frac++)
        if (len > 0)
            digits[len++] = '0';
    if (len == 0)
        digits[len++] = '0';
    digits[len] = '\0';
    chain_u256 v;
    if (chain_u256_from_dec(&v, digits))
        goto bad;
    for (unsigned byte = 0; bits < 256 && byte < (256 - bits) / 8; byte++)
        if (v.b[byte])
            goto bad;
    *out = v;
    return 0;
bad:
    return ovt_fail(OVT_EINVAL, "%s expects an amount of wei below 2^%u (wei, or with gwei or ether: 30gwei, "
                    "0.01ether), got '%s'", what, bits, text);
}

int chain_parse_address(chain_address *out, const char *what, const char *text)
{
    chain_address a;
    if (chain_address_from_string(&a, text))
        return ovt_fail_wrap(OVT_EINVAL, "%s expects an address", what);
    *out = a;
    return 0;
}

int chain_parse_hash(ovt_hash *out, const char *what, const char *text)
{
    const char *hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X') ? text + 2 : text;
    ovt_hash h;
    if (strlen(hex) != 64 || ovt_hex_decode(h.b, 32, hex))
        return ovt_fail(OVT_EINVAL, "%s expects 32 bytes of hex, got '%s'", what, text);
    *out = h;
    return 0;
}
