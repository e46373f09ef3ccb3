/* SentencePiece BPE with byte fallback from a tokenizer.json (data/sptok.h):
 * the strict loader, the normalizer by hand, the merge loop (a heap of
 * candidate pairs keyed by rank, then position) and the decoder. */
#include "data/sptok.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokutil.h"

#define STR_CAP (1u << 17)   /* token string -> id, twice the largest vocabulary */
#define MERGE_CAP (1u << 18) /* (left, right) -> rank, result */
#define MAX_VOCAB 65536u     /* the uint16 token file */
#define NONE UINT32_MAX
#define SPACE_MARK "\xe2\x96\x81" /* U+2581, SentencePiece's space */

/* One symbol of a word being merged: a token, or a character that is none
 * (id NONE: the bytes text[off..off+len) become byte tokens). */
typedef struct {
    uint32_t id, off, len;
    int32_t prev, next; /* -1 at the ends; next of a merged-away right side is unused */
    bool alive;
} sym;

struct data_sptok {
    uint32_t vocab, bos, space;
    char **str;     /* each id's string in tokenizer.json */
    uint8_t **dec;  /* each id's decoded bytes */
    size_t *dec_len;
    uint32_t *str_ids; /* STR_CAP slots: an id or NONE */
    data_merge_slot *merges;
    uint32_t byte_id[256];
    bool split; /* no merge joins a token not ending in "▁" to one starting with it */
    sym *syms;
    size_t sym_cap;
    uint64_t *heap; /* rank << 32 | position of the left symbol */
};

void data_sptok_free(data_sptok *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; i < t->vocab; i++) {
        if (t->str)
            free(t->str[i]);
        if (t->dec)
            free(t->dec[i]);
    }
    free(t->str);
    free(t->dec);
    free(t->dec_len);
    free(t->str_ids);
    free(t->merges);
    free(t->syms);
    free(t->heap);
    free(t);
}

static uint32_t str_find(const data_sptok *t, const char *s, size_t n)
{
    for (uint64_t i = data_hash_bytes((const uint8_t *)s, n) & (STR_CAP - 1);; i = (i + 1) & (STR_CAP - 1)) {
        uint32_t id = t->str_ids[i];
        if (id == NONE)
            return NONE;
        if (strlen(t->str[id]) == n && memcmp(t->str[id], s, n) == 0)
            return id;
    }
}

static void str_add(data_sptok *t, uint32_t id)
{
    uint64_t i = data_hash_bytes((const uint8_t *)t->str[id], strlen(t->str[id])) & (STR_CAP - 1);
    while (t->str_ids[i] != NONE)
        i = (i + 1) & (STR_CAP - 1);
    t->str_ids[i] = id;
}

/* json[key] is the string want. */
static bool is_str(const json_t *j, const char *key, const char *want)
{
    const char *s = json_string_value(json_object_get(j, key));
    return s && strcmp(s, want) == 0;
}

/* The Llama normalizer, exactly: Prepend "▁", then Replace " " by "▁"; no
 * pre-tokenizer. Anything else would tokenize differently from ovt. */
static int check_pipeline(const char *path, const json_t *root)
{
    const json_t *norm = json_object_get(root, "normalizer"), *seq = json_object_get(norm, "normalizers");
    const json_t *pre = NULL, *rep = NULL;
    if (json_is_array(seq) && json_array_size(seq) == 2) {
        pre = json_array_get(seq, 0);
        rep = json_array_get(seq, 1);
    }
    if (!is_str(norm, "type", "Sequence") || !rep || !is_str(pre, "type", "Prepend") ||
        !is_str(pre, "prepend", SPACE_MARK) || !is_str(rep, "type", "Replace") ||
        !is_str(json_object_get(rep, "pattern"), "String", " ") || !is_str(rep, "content", SPACE_MARK))
        return ovt_fail(OVT_EFORMAT, "%s: the normalizer is not Llama's (a Sequence of Prepend \"\xe2\x96\x81\" and "
                        "Replace \" \" with \"\xe2\x96\x81\")", path);
    if (!json_is_null(json_object_get(root, "pre_tokenizer")))
        return ovt_fail(OVT_EFORMAT, "%s: pre_tokenizer must be null (SentencePiece BPE splits no words)", path);
    const json_t *model = json_object_get(root, "model");
    if (!is_str(model, "type", "BPE") || !json_is_true(json_object_get(model, "byte_fallback")))
        return ovt_fail(OVT_EFORMAT, "%s: model is not BPE with \"byte_fallback\": true", path);
    return 0;
}

static int alloc_vocab(data_sptok *t, size_t n)
{
    t->vocab = (uint32_t)n;
    t->str = calloc(n, sizeof *t->str);
    t->dec = calloc(n, sizeof *t->dec);
    t->dec_len = calloc(n, sizeof *t->dec_len);
    t->str_ids = malloc(STR_CAP * sizeof *t->str_ids);
    if (!t->str || !t->dec || !t->dec_len || !t->str_ids)
        return ovt_fail(OVT_ENOMEM, "out of memory for the vocabulary");
    memset(t->str_ids, 0xFF, STR_CAP * sizeof *t->str_ids);
    return 0;
}

/* model.vocab: token -> id, the ids 0..n-1 each once. */
static int load_vocab(data_sptok *t, const char *path, const json_t *vocab)
{
    size_t n = json_object_size(vocab);
    if (!json_is_object(vocab) || n < 259 || n > MAX_VOCAB)
        return ovt_fail(OVT_EFORMAT, "%s: model.vocab is not an object of 259..%u tokens", path, MAX_VOCAB);
    int rv = alloc_vocab(t, n);
    if (rv)
        return rv;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)vocab, key, v)
    {
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || (size_t)id >= n || t->str[id] || !*key)
            return ovt_fail(OVT_EFORMAT, "%s: token \"%s\" has no id of its own in 0..%zu (or is empty)", path, key,
                            n - 1);
        if ((t->str[id] = strdup(key)) == NULL)
            return ovt_fail(OVT_ENOMEM, "out of memory for the vocabulary");
        if (str_find(t, key, strlen(key)) != NONE)
            return ovt_fail(OVT_EFORMAT, "%s: token \"%s\" appears twice", path, key);
        str_add(t, (uint32_t)id);
    }
    return 0;
}

/* The tokens ovt needs by name: the 256 bytes, "▁", "<s>". */
static int find_named(data_sptok *t, const char *path)
{
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        if ((t->byte_id[b] = str_find(t, name, 6)) == NONE)
            return ovt_fail(OVT_EFORMAT, "%s: the byte-fallback token %s is missing", path, name);
    }
    t->space = str_find(t, SPACE_MARK, 3);
    t->bos = str_find(t, "<s>", 3);
    if (t->space == NONE || t->bos == NONE)
        return ovt_fail(OVT_EFORMAT, "%s: the vocabulary lacks \"\xe2\x96\x81\" or \"<s>\"", path);
    return 0;
}

/* added_tokens: each {"id", "content"} the vocabulary's own; they are the
 * control tokens, which decode to nothing. */
static int load_added(data_sptok *t, const char *path, const json_t *added)
{
    if (!json_is_array(added))
        return ovt_fail(OVT_EFORMAT, "%s: added_tokens is not an array", path);
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a)
    {
        json_t *id = json_object_get(a, "id");
        const char *content = json_string_value(json_object_get(a, "content"));
        json_int_t k = json_is_integer(id) ? json_integer_value(id) : -1;
        if (!content || k < 0 || k >= t->vocab || strcmp(t->str[k], content) != 0 || t->dec[k])
            return ovt_fail(OVT_EFORMAT, "%s: added_tokens[%zu] is not {\"id\", \"content\"} of a vocabulary token "
                            "named once", path, i);
        if ((t->dec[k] = malloc(1)) == NULL)
            return ovt_fail(OVT_ENOMEM, "out of memory");
        t->dec_len[k] = 0;
    }
    return 0;
}

/* Each id's bytes: <0xNN> the byte, others their string with "▁" as a space. */
static int make_decoded(data_sptok *t)
{
    for (int b = 0; b < 256; b++) {
        uint32_t id = t->byte_id[b];
        free(t->dec[id]); /* a control token cannot also be a byte */
        if ((t->dec[id] = malloc(1)) == NULL)
            return ovt_fail(OVT_ENOMEM, "out of memory");
        t->dec[id][0] = (uint8_t)b;
        t->dec_len[id] = 1;
    }
    for (uint32_t id = 0; id < t->vocab; id++) {
        if (t->dec[id])
            continue;
        const char *s = t->str[id];
        size_t k = 0, n = strlen(s);
        if ((t->dec[id] = malloc(n)) == NULL)
            return ovt_fail(OVT_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; k++) {
            bool mark = n - i >= 3 && memcmp(s + i, SPACE_MARK, 3) == 0;
            t->dec[id][k] = mark ? (uint8_t)' ' : (uint8_t)s[i];
            i += mark ? 3 : 1;
        }
        t->dec_len[id] = k;
    }
    return 0;
}

/* One merge, "LEFT RIGHT" or ["LEFT", "RIGHT"], into left and right. */
static int merge_sides(const json_t *m, char *buf, size_t cap, const char **left, const char **right)
{
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *left = json_string_value(json_array_get(m, 0));
        *right = json_string_value(json_array_get(m, 1));
        return 0;
    }
    const char *s = json_string_value(m);
    const char *sp = s ? strchr(s, ' ') : NULL;
    if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' ') || strlen(s) >= cap)
        return -1;
    memcpy(buf, s, strlen(s) + 1);
    buf[sp - s] = '\0';
    *left = buf;
    *right = buf + (sp - s) + 1;
    return 0;
}

/* Whether a merge of left and right could join across a word boundary
 * before "▁": left not ending in "▁", right starting with it. */
static bool joins_boundary(const char *left, const char *right)
{
    size_t l = strlen(left);
    return (l < 3 || memcmp(left + l - 3, SPACE_MARK, 3) != 0) && strncmp(right, SPACE_MARK, 3) == 0;
}

/* model.merges, best first: both sides and their join are tokens, the join
 * not a byte or control token, each pair once. */
static int load_merges(data_sptok *t, const char *path, const json_t *merges)
{
    size_t n = json_array_size(merges);
    if (!json_is_array(merges) || n == 0 || n >= MERGE_CAP / 2)
        return ovt_fail(OVT_EFORMAT, "%s: model.merges is not an array of 1..%u merges", path, MERGE_CAP / 2 - 1);
    if ((t->merges = malloc(MERGE_CAP * sizeof *t->merges)) == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for the merges");
    for (size_t i = 0; i < MERGE_CAP; i++)
        t->merges[i].key = UINT64_MAX;
    t->split = true;
    char buf[1024], cat[1024];
    for (size_t r = 0; r < n; r++) {
        const char *left, *right;
        if (merge_sides(json_array_get(merges, r), buf, sizeof buf, &left, &right))
            return ovt_fail(OVT_EFORMAT, "%s: merges[%zu] is not \"LEFT RIGHT\" or [\"LEFT\", \"RIGHT\"]", path, r);
        uint32_t a = str_find(t, left, strlen(left)), b = str_find(t, right, strlen(right));
        int len = snprintf(cat, sizeof cat, "%s%s", left, right);
        uint32_t m = len > 0 && (size_t)len < sizeof cat ? str_find(t, cat, (size_t)len) : NONE;
        /* a join has two characters or more: decoded to one byte or none, it is a byte or control token */
        if (a == NONE || b == NONE || m == NONE || t->dec_len[m] <= 1)
            return ovt_fail(OVT_EFORMAT, "%s: merges[%zu] \"%s\" + \"%s\": a side or the join is not a text token",
                            path, r, left, right);
        data_merge_slot *slot = data_merge_find(t->merges, MERGE_CAP, a, b);
        if (slot->key != UINT64_MAX)
            return ovt_fail(OVT_EFORMAT, "%s: merges[%zu] repeats merges[%u]", path, r, slot->rank);
        *slot = (data_merge_slot){.key = (uint64_t)a << 32 | b, .rank = (uint32_t)r, .result = m};
        t->split = t->split && !joins_boundary(left, right);
    }
    return 0;
}

static int load_root(data_sptok *t, const char *path, const json_t *root)
{
    const json_t *model = json_object_get(root, "model");
    int rv = check_pipeline(path, root);
    if (!rv)
        rv = load_vocab(t, path, json_object_get(model, "vocab"));
    if (!rv)
        rv = find_named(t, path);
    if (!rv)
        rv = load_added(t, path, json_object_get(root, "added_tokens"));
    if (!rv)
        rv = make_decoded(t);
    if (!rv)
        rv = load_merges(t, path, json_object_get(model, "merges"));
    return rv;
}

int data_sptok_load(data_sptok **out, const char *path)
{
    *out = NULL;
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root && err.line < 1)
        return ovt_fail(OVT_ENOTFOUND, "%s", err.text);
    if (!root)
        return ovt_fail(OVT_EFORMAT, "%s: %s (line %d)", path, err.text, err.line);
    data_sptok *t = calloc(1, sizeof *t);
    int rv = t ? 0 : ovt_fail(OVT_ENOMEM, "out of memory");
    if (!rv && !json_is_object(root))
        rv = ovt_fail(OVT_EFORMAT, "%s: not a JSON object", path);
    if (!rv)
        rv = load_root(t, path, root);
    json_decref(root);
    if (rv) {
        data_sptok_free(t);
        return rv;
    }
    *out = t;
    return 0;
}

uint32_t data_sptok_vocab(const data_sptok *t)
{
    return t->vocab;
}

uint32_t data_sptok_bos(const data_sptok *t)
{
    return t->bos;
}

/* The heap of candidate merges: the least key (best rank, then leftmost) on top. */
static void heap_push(uint64_t *h, size_t *n, uint64_t key)
{
    size_t i = (*n)++;
    for (; i > 0 && h[(i - 1) / 2] > key; i = (i - 1) / 2)
        h[i] = h[(i - 1) / 2];
    h[i] = key;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= last)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = last;
    return top;
}

/* The merge of symbol i with its right neighbour, if any. */
static const data_merge_slot *pair_at(const data_sptok *t, const sym *s, int32_t i)
{
    if (i < 0 || s[i].next < 0 || s[i].id == NONE || s[s[i].next].id == NONE)
        return NULL;
    const data_merge_slot *m = data_merge_find(t->merges, MERGE_CAP, s[i].id, s[s[i].next].id);
    return m->key == UINT64_MAX ? NULL : m;
}

static void push_pair(const data_sptok *t, uint64_t *h, size_t *hn, int32_t i)
{
    const data_merge_slot *m = pair_at(t, t->syms, i);
    if (m)
        heap_push(h, hn, (uint64_t)m->rank << 32 | (uint32_t)i);
}

/* Merges the word t->syms[0..m) in place, best rank first (a symbol keeps
 * its first position, so the leftmost of equal ranks goes first). */
static void merge_word(data_sptok *t, size_t m)
{
    sym *s = t->syms;
    size_t hn = 0;
    for (size_t i = 0; i + 1 < m; i++)
        push_pair(t, t->heap, &hn, (int32_t)i);
    while (hn) {
        uint64_t key = heap_pop(t->heap, &hn);
        int32_t i = (int32_t)(uint32_t)key;
        const data_merge_slot *p = s[i].alive ? pair_at(t, s, i) : NULL;
        if (!p || p->rank != (uint32_t)(key >> 32))
            continue; /* stale: a side merged since */
        int32_t r = s[i].next;
        s[i].id = p->result;
        s[r].alive = false;
        s[i].next = s[r].next;
        if (s[i].next >= 0)
            s[s[i].next].prev = i;
        push_pair(t, t->heap, &hn, s[i].prev);
        push_pair(t, t->heap, &hn, i);
    }
}

/* Merges the word in t->syms[0..m) and appends its tokens to out[*k..). */
static void flush_word(data_sptok *t, const uint8_t *text, size_t m, uint32_t *out, size_t *k)
{
    if (m == 0)
        return;
    merge_word(t, m);
    for (int32_t i = 0; i >= 0; i = t->syms[i].next) {
        const sym *s = &t->syms[i];
        if (s->id != NONE)
            out[(*k)++] = s->id;
        else
            for (uint32_t b = 0; b < s->len; b++)
                out[(*k)++] = t->byte_id[text[s->off + b]];
    }
}

static int scratch(data_sptok *t, size_t n)
{
    if (n <= t->sym_cap)
        return 0;
    sym *s = realloc(t->syms, n * sizeof *s);
    if (s)
        t->syms = s;
    uint64_t *h = s ? realloc(t->heap, 3 * n * sizeof *h) : NULL;
    if (!h)
        return ovt_fail(OVT_ENOMEM, "out of memory for a word of %zu characters", n);
    t->heap = h;
    t->sym_cap = n;
    return 0;
}

/* The symbol of the character at text[i]: a space is "▁", a character that
 * is a token that token, others (a literal "▁" too) their bytes. */
static sym char_sym(const data_sptok *t, const uint8_t *text, size_t n, size_t i)
{
    int32_t cp;
    size_t len = data_utf8_next(text + i, n - i, &cp);
    sym s = {.id = NONE, .off = (uint32_t)i, .len = (uint32_t)len, .alive = true};
    if (text[i] == ' ')
        s.id = t->space;
    else if (cp >= 0 && cp != 0x2581)
        s.id = str_find(t, (const char *)text + i, len);
    return s;
}

int data_sptok_encode(data_sptok *t, const uint8_t *text, size_t n, bool bos, uint32_t **tokens, size_t *count)
{
    *tokens = NULL;
    *count = 0;
    if (n >= UINT32_MAX - 2)
        return ovt_fail(OVT_EINVAL, "a text of %zu bytes is too long to tokenize in one piece", n);
    /* never more tokens than bytes, plus "<s>" and the leading "▁" */
    uint32_t *out = malloc((n + 2) * sizeof *out);
    int rv = out ? scratch(t, 64) : ovt_fail(OVT_ENOMEM, "out of memory for %zu tokens", n);
    size_t k = 0, m = 1;
    if (!rv && bos)
        out[k++] = t->bos;
    if (!rv)
        t->syms[0] = (sym){.id = t->space, .prev = -1, .next = -1, .alive = true};
    for (size_t i = 0; !rv && i < n;) {
        sym s = char_sym(t, text, n, i);
        i += s.len;
        /* no merge crosses into a "▁" that follows another character */
        if (t->split && s.id == t->space && t->syms[m - 1].id != t->space) {
            flush_word(t, text, m, out, &k);
            m = 0;
        }
        if ((rv = scratch(t, m + 1 > t->sym_cap ? 2 * t->sym_cap : m + 1)) != 0)
            break;
        s.prev = (int32_t)m - 1;
        s.next = -1;
        if (m)
            t->syms[m - 1].next = (int32_t)m;
        t->syms[m++] = s;
    }
    if (rv) {
        free(out);
        return rv;
    }
    flush_word(t, text, m, out, &k);
    *tokens = out;
    *count = k;
    return 0;
}

int data_sptok_decode(const data_sptok *t, const uint32_t *ids, size_t count, uint8_t **text, size_t *n)
{
    *text = NULL;
    *n = 0;
    size_t len = 0;
    for (size_t i = 0; i < count; i++) {
        if (ids[i] >= t->vocab)
            return ovt_fail(OVT_EINVAL, "token %zu is %u, outside the vocabulary of %u", i, ids[i], t->vocab);
        len += t->dec_len[ids[i]];
    }
    uint8_t *p = malloc(len ? len : 1);
    if (!p)
        return ovt_fail(OVT_ENOMEM, "out of memory decoding %zu tokens", count);
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        memcpy(p + k, t->dec[ids[i]], t->dec_len[ids[i]]);
        k += t->dec_len[ids[i]];
    }
    size_t skip = k && p[0] == ' '; /* the "▁" the normalizer put first */
    memmove(p, p + skip, k - skip);
    *text = p;
    *n = k - skip;
    return 0;
}
