/* GPT-2's byte-level BPE (data/bpe.h): the byte <-> character mapping of
 * OpenAI's files, the pre-tokenizer (GPT-2's regex, by hand), the merge loop
 * over token ids, and a word cache. */
#include "data/bpe.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "data/tokutil.h"

#define STR_CAP (1u << 17)   /* token bytes -> id, open addressing */
#define MERGE_CAP (1u << 17) /* (left id, right id) -> rank, result */
#define CACHE_CAP (1u << 16) /* direct-mapped word cache */
#define WORD_MAX 256         /* longer pieces are not cached */
#define NONE UINT32_MAX

typedef data_merge_slot merge_slot;

typedef struct {
    uint8_t *word;
    size_t len;
    uint32_t *ids;
    size_t n;
} cache_slot;

struct data_bpe {
    uint32_t vocab;
    uint8_t **tok; /* bytes of each id (NULL when absent) */
    size_t *tok_len;
    uint32_t *str_ids; /* STR_CAP slots: an id or NONE */
    merge_slot *merges;
    uint32_t byte_id[256];
    cache_slot *cache;
    uint32_t *work; /* scratch for one word's ids */
};

/* GPT-2's printable stand-in for each byte: bytes that are printable in
 * Latin-1 ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves, the other
 * 68 map in order to U+0100 onwards. */
static uint32_t byte_char(uint8_t b)
{
    static uint32_t map[256];
    static bool made;
    if (!made) {
        uint32_t next = 256;
        for (int c = 0; c < 256; c++) {
            bool self = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
            map[c] = self ? (uint32_t)c : next++;
        }
        made = true;
    }
    return map[b];
}

/* Token string of encoder.json / vocab.bpe (characters standing for bytes)
 * to bytes; out holds at least strlen(s) bytes. -1 if a character stands
 * for no byte. */
static int unmap(const char *s, size_t n, uint8_t *out, size_t *len)
{
    static int16_t inv[324];
    static bool made;
    if (!made) {
        for (int i = 0; i < 324; i++)
            inv[i] = -1;
        for (int b = 0; b < 256; b++)
            inv[byte_char((uint8_t)b)] = (int16_t)b;
        made = true;
    }
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        i += data_utf8_next((const uint8_t *)s + i, n - i, &cp);
        if (cp < 0 || cp >= 324 || inv[cp] < 0)
            return -1;
        out[k++] = (uint8_t)inv[cp];
    }
    *len = k;
    return 0;
}

static uint32_t str_find(const data_bpe *b, const uint8_t *p, size_t n)
{
    for (uint64_t i = data_hash_bytes(p, n) & (STR_CAP - 1);; i = (i + 1) & (STR_CAP - 1)) {
        uint32_t id = b->str_ids[i];
        if (id == NONE)
            return NONE;
        if (b->tok_len[id] == n && memcmp(b->tok[id], p, n) == 0)
            return id;
    }
}

static merge_slot *merge_find(const data_bpe *b, uint32_t left, uint32_t right)
{
    return data_merge_find(b->merges, MERGE_CAP, left, right);
}

void data_bpe_free(data_bpe *b)
{
    if (!b)
        return;
    if (b->tok)
        for (uint32_t i = 0; i < b->vocab; i++)
            free(b->tok[i]);
    if (b->cache)
        for (size_t i = 0; i < CACHE_CAP; i++) {
            free(b->cache[i].word);
            free(b->cache[i].ids);
        }
    free(b->tok);
    free(b->tok_len);
    free(b->str_ids);
    free(b->merges);
    free(b->cache);
    free(b->work);
    free(b);
}

static int load_encoder(data_bpe *b, const char *path)
{
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j && err.line < 1)
        return ovt_fail(OVT_ENOTFOUND, "%s", err.text);
    if (!j)
        return ovt_fail(OVT_EFORMAT, "%s: %s (line %d)", path, err.text, err.line);
    int rv = 0;
    if (!json_is_object(j) || json_object_size(j) == 0 || json_object_size(j) > 65536) {
        rv = ovt_fail(OVT_EFORMAT, "%s: not an object of at most 65536 tokens", path);
        goto out;
    }
    uint32_t vocab = 0;
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v)
    {
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || id >= 65536) {
            rv = ovt_fail(OVT_EFORMAT, "%s: token \"%s\" has no id in 0..65535 (ids must fit the uint16 "
                          "token file)", path, key);
            goto out;
        }
        if ((uint32_t)id + 1 > vocab)
            vocab = (uint32_t)id + 1;
    }
    b->vocab = vocab;
    b->tok = calloc(vocab, sizeof *b->tok);
    b->tok_len = calloc(vocab, sizeof *b->tok_len);
    b->str_ids = malloc(STR_CAP * sizeof *b->str_ids);
    if (!b->tok || !b->tok_len || !b->str_ids) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for the vocabulary");
        goto out;
    }
    memset(b->str_ids, 0xFF, STR_CAP * sizeof *b->str_ids);
    json_object_foreach(j, key, v)
    {
        uint32_t id = (uint32_t)json_integer_value(v);
        size_t n = strlen(key), len;
        uint8_t *bytes = malloc(n ? n : 1);
        if (!bytes) {
            rv = ovt_fail(OVT_ENOMEM, "out of memory for the vocabulary");
            goto out;
        }
        if (n == 0 || unmap(key, n, bytes, &len)) {
            free(bytes);
            rv = ovt_fail(OVT_EFORMAT, "%s: token \"%s\" is not a string of GPT-2's byte characters", path, key);
            goto out;
        }
        if (b->tok[id] || str_find(b, bytes, len) != NONE) {
            free(bytes);
            rv = ovt_fail(OVT_EFORMAT, "%s: token \"%s\" or id %u appears twice", path, key, id);
            goto out;
        }
        b->tok[id] = bytes;
        b->tok_len[id] = len;
        uint64_t i = data_hash_bytes(bytes, len) & (STR_CAP - 1);
        while (b->str_ids[i] != NONE)
            i = (i + 1) & (STR_CAP - 1);
        b->str_ids[i] = id;
    }
    for (int c = 0; c < 256; c++) {
        uint8_t byte = (uint8_t)c;
        b->byte_id[c] = str_find(b, &byte, 1);
        if (b->byte_id[c] == NONE) {
            rv = ovt_fail(OVT_EFORMAT, "%s: byte 0x%02x has no token (GPT-2's vocabulary has all 256)", path, c);
            goto out;
        }
    }
out:
    json_decref(j);
    return rv;
}

static int load_merges(data_bpe *b, const char *path)
{
    uint8_t *buf;
    size_t n;
    int rv = ovt_read_file(path, &buf, &n, (size_t)64 << 20);
    if (rv)
        return ovt_fail_wrap(rv, "reading the merges");
    b->merges = malloc(MERGE_CAP * sizeof *b->merges);
    uint8_t *l = malloc(n + 1), *r = malloc(n + 1), *cat = malloc(2 * n + 2);
    if (!b->merges || !l || !r || !cat) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for the merges");
        goto out;
    }
    for (size_t i = 0; i < MERGE_CAP; i++)
        b->merges[i].key = UINT64_MAX;
    uint32_t rank = 0, used = 0;
    size_t line_no = 0;
    for (size_t p = 0; p < n;) {
        size_t e = p;
        while (e < n && buf[e] != '\n')
            e++;
        const char *s = (const char *)buf + p;
        size_t len = e - p;
        p = e + 1;
        line_no++;
        if (len && s[len - 1] == '\r')
            len--;
        if (len == 0 || (line_no == 1 && len >= 8 && memcmp(s, "#version", 8) == 0))
            continue;
        const char *sp = memchr(s, ' ', len);
        size_t ll, rl;
        if (!sp || sp == s || sp == s + len - 1 || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s)) ||
            unmap(s, (size_t)(sp - s), l, &ll) || unmap(sp + 1, len - (size_t)(sp + 1 - s), r, &rl)) {
            rv = ovt_fail(OVT_EFORMAT, "%s line %zu: not \"LEFT RIGHT\" in GPT-2's byte characters", path, line_no);
            goto out;
        }
        memcpy(cat, l, ll);
        memcpy(cat + ll, r, rl);
        uint32_t a = str_find(b, l, ll), c = str_find(b, r, rl), m = str_find(b, cat, ll + rl);
        if (a == NONE || c == NONE || m == NONE) {
            rv = ovt_fail(OVT_EFORMAT, "%s line %zu: a side or the merged token is not in encoder.json", path,
                          line_no);
            goto out;
        }
        if (used + 1 >= MERGE_CAP / 2) {
            rv = ovt_fail(OVT_EFORMAT, "%s: more than %u merges", path, MERGE_CAP / 2 - 1);
            goto out;
        }
        merge_slot *slot = merge_find(b, a, c);
        if (slot->key == UINT64_MAX)
            used++;
        /* a repeated pair takes its later rank, as dict(zip(merges, ranks)) does */
        *slot = (merge_slot){.key = (uint64_t)a << 32 | c, .rank = rank++, .result = m};
    }
    if (rank == 0)
        rv = ovt_fail(OVT_EFORMAT, "%s holds no merges", path);
out:
    free(buf);
    free(l);
    free(r);
    free(cat);
    return rv;
}

int data_bpe_load(data_bpe **out, const char *dir)
{
    *out = NULL;
    data_bpe *b = calloc(1, sizeof *b);
    if (!b)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    char path[4096];
    int rv = ovt_path_join(path, sizeof path, dir, "encoder.json");
    if (!rv)
        rv = load_encoder(b, path);
    if (!rv)
        rv = ovt_path_join(path, sizeof path, dir, "vocab.bpe");
    if (!rv)
        rv = load_merges(b, path);
    if (!rv) {
        b->cache = calloc(CACHE_CAP, sizeof *b->cache);
        if (!b->cache)
            rv = ovt_fail(OVT_ENOMEM, "out of memory");
    }
    if (rv) {
        data_bpe_free(b);
        return rv;
    }
    *out = b;
    return 0;
}

uint32_t data_bpe_vocab(const data_bpe *b)
{
    return b->vocab;
}

const uint8_t *data_bpe_token_bytes(const data_bpe *b, uint32_t id, size_t *len)
{
    if (id >= b->vocab || !b->tok[id])
        return NULL;
    *len = b->tok_len[id];
    return b->tok[id];
}

/* Character classes of the pre-tokenizer. */
enum { C_LETTER, C_NUMBER, C_SPACE, C_OTHER };

typedef struct {
    uint32_t lo, hi;
} range;

/* \p{N} outside ASCII: the decimal digit blocks of the major scripts, the
 * Latin-1 superscripts and fractions, number forms, circled and fullwidth
 * numbers. */
static const range numbers[] = {
    {0xB2, 0xB3},       {0xB9, 0xB9},       {0xBC, 0xBE},       {0x660, 0x669},     {0x6F0, 0x6F9},
    {0x7C0, 0x7C9},     {0x966, 0x96F},     {0x9E6, 0x9EF},     {0xA66, 0xA6F},     {0xAE6, 0xAEF},
    {0xB66, 0xB6F},     {0xBE6, 0xBF2},     {0xC66, 0xC6F},     {0xCE6, 0xCEF},     {0xD66, 0xD78},
    {0xE50, 0xE59},     {0xED0, 0xED9},     {0xF20, 0xF33},     {0x1040, 0x1049},   {0x17E0, 0x17E9},
    {0x1810, 0x1819},   {0x2070, 0x2070},   {0x2074, 0x2079},   {0x2080, 0x2089},   {0x2150, 0x2182},
    {0x2185, 0x2189},   {0x2460, 0x249B},   {0x24EA, 0x24FF},   {0x2776, 0x2793},   {0x3007, 0x3007},
    {0x3021, 0x3029},   {0x3038, 0x303A},   {0x3192, 0x3195},   {0x3220, 0x3229},   {0x3248, 0x324F},
    {0x3251, 0x325F},   {0x3280, 0x3289},   {0x32B1, 0x32BF},   {0xFF10, 0xFF19},   {0x1D7CE, 0x1D7FF},
};

/* \p{L} outside ASCII: Latin-1 and the Latin extensions, IPA and modifier
 * letters, Greek, Cyrillic, Armenian, Hebrew, Arabic, Devanagari, Thai,
 * Georgian, Hangul, kana, CJK, Yi, the letterlike symbols that are letters,
 * presentation and fullwidth forms, the mathematical letters. */
static const range letters[] = {
    {0xAA, 0xAA},       {0xB5, 0xB5},       {0xBA, 0xBA},       {0xC0, 0xD6},       {0xD8, 0xF6},
    {0xF8, 0x2C1},      {0x2C6, 0x2D1},     {0x2E0, 0x2E4},     {0x2EC, 0x2EC},     {0x2EE, 0x2EE},
    {0x370, 0x374},     {0x376, 0x377},     {0x37A, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},
    {0x388, 0x38A},     {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},
    {0x48A, 0x52F},     {0x531, 0x556},     {0x559, 0x559},     {0x560, 0x588},     {0x5D0, 0x5EA},
    {0x5EF, 0x5F2},     {0x620, 0x64A},     {0x66E, 0x66F},     {0x671, 0x6D3},     {0x6D5, 0x6D5},
    {0x6FA, 0x6FC},     {0x904, 0x939},     {0x93D, 0x93D},     {0x950, 0x950},     {0x958, 0x961},
    {0x971, 0x980},     {0xE01, 0xE30},     {0xE32, 0xE33},     {0xE40, 0xE46},     {0x10A0, 0x10C5},
    {0x10D0, 0x10FA},   {0x10FC, 0x10FF},   {0x1100, 0x11FF},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},   {0x1FBE, 0x1FBE},
    {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2071, 0x2071},   {0x207F, 0x207F},   {0x2090, 0x209C},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},
    {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2139},
    {0x2C00, 0x2CE4},   {0x3005, 0x3006},   {0x3031, 0x3035},   {0x3041, 0x3096},   {0x309D, 0x309F},
    {0x30A1, 0x30FA},   {0x30FC, 0x30FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA48C},
    {0xA640, 0xA66E},   {0xA722, 0xA788},   {0xA78B, 0xA7CA},   {0xAC00, 0xD7A3},   {0xF900, 0xFA6D},
    {0xFB00, 0xFB06},   {0xFB1D, 0xFB1D},   {0xFB1F, 0xFB28},   {0xFB2A, 0xFB4F},   {0xFB50, 0xFD3D},
    {0xFE70, 0xFEFC},   {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0xFF66, 0xFFBE},   {0x10400, 0x1044F},
    {0x1D400, 0x1D7CB}, {0x20000, 0x2FA1F},
};

static bool in_ranges(const range *r, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid].lo)
            hi = mid;
        else if (cp > r[mid].hi)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

static int char_class(int32_t cp)
{
    if (cp < 0)
        return C_OTHER;
    uint32_t c = (uint32_t)cp;
    if (c < 0x80) {
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
            return C_LETTER;
        if (c >= '0' && c <= '9')
            return C_NUMBER;
        return c == ' ' || (c >= 0x09 && c <= 0x0D) ? C_SPACE : C_OTHER;
    }
    /* JavaScript's \s */
    if (c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
        c == 0x205F || c == 0x3000 || c == 0xFEFF)
        return C_SPACE;
    if (in_ranges(numbers, sizeof numbers / sizeof *numbers, c))
        return C_NUMBER;
    if (in_ranges(letters, sizeof letters / sizeof *letters, c))
        return C_LETTER;
    return C_OTHER;
}

/* The class of the character at t[i], and its length in *len. */
static int class_at(const uint8_t *t, size_t n, size_t i, size_t *len)
{
    int32_t cp;
    *len = data_utf8_next(t + i, n - i, &cp);
    return char_class(cp);
}

/* The end of the piece of GPT-2's pattern that starts at t[i] (i < n):
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * tried in that order, the first that matches wins, each run as long as it
 * can be. */
static size_t piece_end(const uint8_t *t, size_t n, size_t i)
{
    if (t[i] == '\'' && i + 1 < n) {
        uint8_t c = t[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd')
            return i + 2;
        if (i + 2 < n && ((c == 'r' && t[i + 2] == 'e') || (c == 'v' && t[i + 2] == 'e') ||
                          (c == 'l' && t[i + 2] == 'l')))
            return i + 3;
    }
    size_t len, start = i;
    int cls = class_at(t, n, i, &len);
    if (t[i] == ' ' && i + 1 < n) {
        size_t l2;
        int next = class_at(t, n, i + 1, &l2);
        if (next != C_SPACE) { /* " ?" then a run of the next character's class */
            cls = next;
            start = i + 1;
            len = l2;
        }
    }
    if (cls != C_SPACE) {
        size_t e = start + len;
        while (e < n) {
            size_t l;
            if (class_at(t, n, e, &l) != cls)
                break;
            e += l;
        }
        return e;
    }
    /* a run of whitespace: all of it at the end of the text; before other
     * text, all but its last character (\s+(?!\S)), or its one character (\s+) */
    size_t e = i + len, last = i;
    while (e < n) {
        size_t l;
        if (class_at(t, n, e, &l) != C_SPACE)
            break;
        last = e;
        e += l;
    }
    if (e == n || last == i)
        return e;
    return last;
}

/* BPE of one piece: its bytes' tokens, merged by best rank until no pair
 * has one. Writes the ids to b->work, returns their number. */
static size_t bpe_word(data_bpe *b, const uint8_t *p, size_t n)
{
    uint32_t *w = b->work;
    for (size_t i = 0; i < n; i++)
        w[i] = b->byte_id[p[i]];
    size_t m = n;
    while (m > 1) {
        uint32_t best = NONE, left = 0, right = 0, result = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            merge_slot *s = merge_find(b, w[i], w[i + 1]);
            if (s->key != UINT64_MAX && s->rank < best) {
                best = s->rank;
                left = w[i];
                right = w[i + 1];
                result = s->result;
            }
        }
        if (best == NONE)
            break;
        size_t k = 0;
        for (size_t i = 0; i < m;) {
            if (i + 1 < m && w[i] == left && w[i + 1] == right) {
                w[k++] = result;
                i += 2;
            } else {
                w[k++] = w[i++];
            }
        }
        m = k;
    }
    return m;
}

int data_bpe_encode(data_bpe *b, const uint8_t *text, size_t n, uint32_t **tokens, size_t *count)
{
    *tokens = NULL;
    *count = 0;
    size_t cap = n > 0 ? n : 1; /* never more tokens than bytes */
    uint32_t *out = malloc(cap * sizeof *out);
    if (!out)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu tokens", n);
    size_t k = 0, work_cap = 0;
    for (size_t i = 0; i < n;) {
        size_t e = piece_end(text, n, i), len = e - i;
        cache_slot *slot = NULL;
        if (len <= WORD_MAX) {
            slot = &b->cache[data_hash_bytes(text + i, len) & (CACHE_CAP - 1)];
            if (slot->word && slot->len == len && memcmp(slot->word, text + i, len) == 0) {
                memcpy(out + k, slot->ids, slot->n * sizeof *out);
                k += slot->n;
                i = e;
                continue;
            }
        }
        if (len > work_cap) {
            uint32_t *w = realloc(b->work, len * sizeof *w);
            if (!w) {
                free(out);
                return ovt_fail(OVT_ENOMEM, "out of memory");
            }
            b->work = w;
            work_cap = len;
        }
        size_t m = bpe_word(b, text + i, len);
        memcpy(out + k, b->work, m * sizeof *out);
        k += m;
        if (slot) {
            uint8_t *word = malloc(len);
            uint32_t *ids = malloc(m * sizeof *ids);
            if (word && ids) {
                free(slot->word);
                free(slot->ids);
                memcpy(word, text + i, len);
                memcpy(ids, b->work, m * sizeof *ids);
                *slot = (cache_slot){.word = word, .len = len, .ids = ids, .n = m};
            } else {
                free(word);
                free(ids);
            }
        }
        i = e;
    }
    *tokens = out;
    *count = k;
    return 0;
}
