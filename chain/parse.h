#ifndef OVT_CHAIN_PARSE_H
#define OVT_CHAIN_PARSE_H

/* Chain values given as text (flags, policy files), with common/parse.h's
 * convention: 0, or OVT_EINVAL with "WHAT expects ..., got 'TEXT'". */

#include "chain/types.h"

/* An amount of wei below 2^bits (64: a fee per gas; 96: a bond, the
 * contract's uint96; 256: any): a decimal number of wei, or of gwei or
 * ether with that suffix and at most 9 or 18 digits after a decimal point
 * ("1000000000", "30gwei", "1.5gwei", "0.01ether"). */
int chain_parse_wei(chain_u256 *out, const char *what, const char *text, unsigned bits) OVT_MUST_USE;

/* 0x and 40 hex digits, checked against its EIP-55 checksum when it has
 * mixed case (chain_address_from_string). */
int chain_parse_address(chain_address *out, const char *what, const char *text) OVT_MUST_USE;

/* 32 bytes of hex, with or without 0x. */
int chain_parse_hash(ovt_hash *out, const char *what, const char *text) OVT_MUST_USE;

#endif
