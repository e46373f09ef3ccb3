/* Tensor memory (mem.h): the table of a ctx's allocations, their range
 * checks and statistics, and the transfers, on the host (cpu, ref,
 * shuffle, the guard) or on the device (kernels/cuda/mem.cu). */
#include "kernels/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/bigmem.h"
#include "common/tree.h"
#include "kernels/site_ctx.h"
#ifdef OVT_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#endif

typedef struct {
    void *p;
    size_t bytes;  /* asked for */
    size_t mapped; /* the guard: whole pages mapped; 0 otherwise */
    char what[48];
} mem_block;

/* Where ctx's allocations go. */
typedef enum { ON_HOST, ON_GUARD, ON_DEVICE } mem_kind;

typedef struct {
    mem_kind kind; /* decided once per ctx, when the table is made */
    mem_block *b;
    size_t n, cap;
    bool guarded; /* the guard is on: the blocks are PROT_NONE */
    krn_mem_stats stats;
} mem_table;

/* OVT_CUDA_HOST_TENSORS: unset or "0" (device memory), "1" (host memory). */
static int host_tensors_env(bool *host)
{
    const char *v = getenv("OVT_CUDA_HOST_TENSORS");
    *host = v && strcmp(v, "1") == 0;
    if (!v || strcmp(v, "0") == 0 || *host)
        return 0;
    return ovt_fail(OVT_EINVAL, "OVT_CUDA_HOST_TENSORS expects 0 (tensors in device memory) or 1 (tensors in "
                                "host memory, copied per op), got '%s'",
                    v);
}

static int kind_of(const krn_ctx *ctx, mem_kind *kind)
{
    const mem_table *t = krn_ctx_mem(ctx);
    if (t) {
        *kind = t->kind;
        return 0;
    }
    const krn_config *c = krn_ctx_config(ctx);
    *kind = c->mem_guard ? ON_GUARD : ON_HOST;
    if (c->backend != KRN_BACKEND_CUDA)
        return 0;
    bool host;
    int rv = host_tensors_env(&host);
    if (!rv && !host)
        *kind = ON_DEVICE;
    return rv;
}

static void table_free(krn_ctx *ctx, void *arg);

/* ctx's table; made (with the ctx's kind of memory) when make is set. */
static mem_table *table_of(krn_ctx *ctx, bool make)
{
    mem_table *t = krn_ctx_mem(ctx);
    mem_kind kind;
    if (t || !make || kind_of(ctx, &kind) != 0)
        return t;
    if ((t = calloc(1, sizeof *t))) {
        t->kind = kind;
        krn_ctx_set_mem(ctx, t, table_free);
    }
    return t;
}

int krn_mem_placement(krn_ctx *ctx, bool *resident)
{
    mem_kind k;
    int rv = kind_of(ctx, &k);
    *resident = !rv && k != ON_HOST;
    if (!rv && !table_of(ctx, true)) /* the ctx's kind is fixed from here on */
        rv = ovt_fail(OVT_ENOMEM, "out of memory for the table of tensor memory");
    return rv;
}

/* The block holding [p, p + bytes), or NULL. */
static mem_block *block_of(mem_table *t, const void *p)
{
    for (size_t i = 0; t && i < t->n; i++) {
        const char *b = t->b[i].p;
        if ((const char *)p >= b && (const char *)p < b + t->b[i].bytes)
            return &t->b[i];
    }
    return NULL;
}

/* The block of ctx's that [p, p + bytes) lies in, or OVT_EINVAL saying why not. */
static int range_of(krn_ctx *ctx, const char *op, const void *p, size_t bytes, mem_block **out)
{
    *out = NULL;
    mem_table *t = table_of(ctx, false);
    mem_block *b = p ? block_of(t, p) : NULL;
    if (!b)
        return ovt_fail(OVT_EINVAL, "%s: %p is not tensor memory of this context: allocate it with krn_mem_alloc",
                        op, p);
    size_t off = (size_t)((const char *)p - (const char *)b->p);
    if (bytes > b->bytes - off)
        return ovt_fail(OVT_EINVAL, "%s: %zu bytes at offset %zu run past the end of '%s' (%zu bytes)", op, bytes,
                        off, b->what, b->bytes);
    *out = b;
    return 0;
}

#ifdef OVT_HAVE_CUDA
static bool is_device(const krn_ctx *ctx)
{
    mem_kind k;
    return kind_of(ctx, &k) == 0 && k == ON_DEVICE;
}
#endif

/* The guard: block b readable and writable (open) or not. */
static void guard_block(const mem_block *b, bool open)
{
    if (b->mapped && mprotect(b->p, b->mapped, open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
        abort(); /* mprotect on our own mapping cannot fail but for a bug */
}

/* Opens b for a transfer while the guard is on, and closes it after. */
static void transfer_open(const mem_table *t, const mem_block *b)
{
    if (t->guarded && b)
        guard_block(b, true);
}

static void transfer_close(const mem_table *t, const mem_block *b)
{
    if (t->guarded && b)
        guard_block(b, false);
}

int krn_mem_alloc(krn_ctx *ctx, void **out, size_t bytes, const char *what)
{
    *out = NULL;
    mem_kind kind;
    int rv = kind_of(ctx, &kind);
    if (rv)
        return rv;
    if (bytes == 0)
        return ovt_fail(OVT_EINVAL, "krn_mem_alloc: '%s' of 0 bytes: a tensor holds at least one value", what);
    mem_table *t = table_of(ctx, true);
    if (!t)
        return ovt_fail(OVT_ENOMEM, "out of memory for the table of tensor memory");
    kind = t->kind;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        mem_block *b = realloc(t->b, cap * sizeof *b);
        if (!b)
            return ovt_fail(OVT_ENOMEM, "out of memory for the table of tensor memory");
        t->b = b;
        t->cap = cap;
    }
    mem_block blk = {.bytes = bytes};
    snprintf(blk.what, sizeof blk.what, "%s", what);
    if (kind == ON_DEVICE) {
#ifdef OVT_HAVE_CUDA
        if ((rv = krn_cuda_mem_alloc(&blk.p, bytes)))
            return ovt_fail_wrap(rv, "'%s' (%zu bytes) in device memory", what, bytes);
#else
        return ovt_fail(OVT_EINVAL, "'%s': this ovt was built without CUDA", what); /* no cuda ctx exists */
#endif
    } else if (kind == ON_GUARD) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        if (bytes > SIZE_MAX - page)
            return ovt_fail(OVT_ENOMEM, "no room for '%s' of %zu bytes", what, bytes);
        blk.mapped = (bytes + page - 1) / page * page;
        void *p = mmap(NULL, blk.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return ovt_fail(OVT_ENOMEM, "no room for '%s' of %zu bytes", what, bytes);
        blk.p = p;
        if (t->guarded)
            guard_block(&blk, false);
    } else if (!(blk.p = ovt_big_calloc(bytes, 1))) {
        return ovt_fail(OVT_ENOMEM, "out of memory for '%s' (%zu bytes)", what, bytes);
    }
    t->b[t->n++] = blk;
    t->stats.allocated_bytes += bytes;
    *out = blk.p;
    return 0;
}

static void block_release(const krn_ctx *ctx, const mem_block *b)
{
    if (b->mapped) {
        munmap(b->p, b->mapped);
        return;
    }
#ifdef OVT_HAVE_CUDA
    if (is_device(ctx)) {
        krn_cuda_mem_free(b->p);
        return;
    }
#else
    (void)ctx;
#endif
    free(b->p);
}

void krn_mem_free(krn_ctx *ctx, void *p)
{
    if (!p)
        return;
    mem_table *t = table_of(ctx, false);
    mem_block *b = block_of(t, p);
    if (!b || b->p != p) {
        fprintf(stderr, "krn_mem_free: %p is not an allocation of this context\n", p);
        abort(); /* programming error */
    }
    block_release(ctx, b);
    t->stats.allocated_bytes -= b->bytes;
    *b = t->b[--t->n];
}

/* The ctx's end: whatever its owner left allocated goes with it. */
static void table_free(krn_ctx *ctx, void *arg)
{
    mem_table *t = arg;
    for (size_t i = 0; i < t->n; i++)
        block_release(ctx, &t->b[i]);
    free(t->b);
    free(t);
}

bool krn_mem_is_host(const krn_ctx *ctx, const void *p)
{
    mem_kind k;
    return !block_of(krn_ctx_mem(ctx), p) || (kind_of(ctx, &k) == 0 && k == ON_HOST);
}

/* A copy between host and backend memory: b is the backend side's block. */
static int transfer(krn_ctx *ctx, const mem_block *b, void *dst, const void *src, size_t bytes)
{
    mem_table *t = table_of(ctx, false);
#ifdef OVT_HAVE_CUDA
    if (is_device(ctx))
        return krn_cuda_mem_copy(dst, src, bytes);
#endif
    transfer_open(t, b);
    memcpy(dst, src, bytes);
    transfer_close(t, b);
    return 0;
}

int krn_mem_upload(krn_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    mem_block *b;
    int rv = range_of(ctx, "krn_mem_upload", dst, bytes, &b);
    if (rv)
        return rv;
    if (!src)
        return ovt_fail(OVT_EINVAL, "krn_mem_upload: no source for '%s'", b->what);
    mem_table *t = table_of(ctx, false);
    t->stats.upload_bytes += bytes;
    t->stats.uploads++;
    return transfer(ctx, b, dst, src, bytes);
}

int krn_mem_download(krn_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    mem_block *b;
    int rv = range_of(ctx, "krn_mem_download", src, bytes, &b);
    if (rv)
        return rv;
    if (!dst)
        return ovt_fail(OVT_EINVAL, "krn_mem_download: no destination for '%s'", b->what);
    mem_table *t = table_of(ctx, false);
    t->stats.download_bytes += bytes;
    t->stats.downloads++;
    return transfer(ctx, b, dst, src, bytes);
}

int krn_mem_zero(krn_ctx *ctx, void *p, size_t bytes)
{
    mem_table *t = table_of(ctx, false);
    if (!block_of(t, p)) { /* the caller's own host memory */
        if (bytes && !p)
            return ovt_fail(OVT_EINVAL, "krn_mem_zero: no memory to zero");
        memset(p, 0, bytes);
        return 0;
    }
    mem_block *b;
    int rv = range_of(ctx, "krn_mem_zero", p, bytes, &b);
    if (rv)
        return rv;
#ifdef OVT_HAVE_CUDA
    if (is_device(ctx))
        return krn_cuda_mem_zero(p, bytes);
#endif
    transfer_open(t, b);
    memset(p, 0, bytes);
    transfer_close(t, b);
    return 0;
}

int krn_mem_copy(krn_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    mem_block *bd, *bs;
    int rv;
    if ((rv = range_of(ctx, "krn_mem_copy", dst, bytes, &bd)) || (rv = range_of(ctx, "krn_mem_copy", src, bytes, &bs)))
        return rv;
    if ((const char *)dst < (const char *)src + bytes && (const char *)src < (const char *)dst + bytes)
        return ovt_fail(OVT_EINVAL, "krn_mem_copy: the %zu bytes of '%s' and '%s' overlap", bytes, bs->what, bd->what);
#ifdef OVT_HAVE_CUDA
    if (is_device(ctx))
        return krn_cuda_mem_copy(dst, src, bytes);
#endif
    mem_table *t = table_of(ctx, false);
    transfer_open(t, bd);
    transfer_open(t, bs);
    memcpy(dst, src, bytes);
    transfer_close(t, bs);
    transfer_close(t, bd);
    return 0;
}

/* The leaves of a tree root, one job each on the ctx's threads. */
typedef struct {
    const uint8_t *p;
    size_t bytes;
    ovt_hash *leaves;
} tree_job;

static void leaf_job(void *arg, size_t j)
{
    const tree_job *a = arg;
    size_t off = j * OVT_TREE_LEAF_BYTES, len = a->bytes - off < OVT_TREE_LEAF_BYTES ? a->bytes - off : OVT_TREE_LEAF_BYTES;
    ovt_tree_leaf_le32(&a->leaves[j], a->p + off, len);
}

static int host_tree_root(krn_ctx *ctx, const void *p, size_t bytes, ovt_hash *out)
{
    size_t n = ovt_tree_leaves(bytes);
    tree_job a = {p, bytes, malloc(n * sizeof(ovt_hash))};
    if (!a.leaves)
        return ovt_fail(OVT_ENOMEM, "out of memory for the %zu leaf hashes of a tensor tree", n);
    if (n == 1 || krn_ctx_parallel(ctx, n, leaf_job, &a) != 0) /* no pool: the same leaves on this thread */
        for (size_t j = 0; j < n; j++)
            leaf_job(&a, j);
    ovt_tree_root_of_leaves(out, a.leaves, n);
    free(a.leaves);
    return 0;
}

int krn_mem_tree_roots(krn_ctx *ctx, ovt_hash *roots, const void *const *ptrs, const size_t *lens, size_t count)
{
    memset(roots, 0, count * sizeof *roots);
    mem_block **blocks = malloc((count ? count : 1) * sizeof *blocks);
    if (!blocks)
        return ovt_fail(OVT_ENOMEM, "out of memory for the tree roots of %zu tensors", count);
    int rv = 0;
    for (size_t t = 0; t < count && !rv; t++) {
        if (!(rv = range_of(ctx, "krn_mem_tree_roots", ptrs[t], lens[t], &blocks[t])) && lens[t] % 4)
            rv = ovt_fail(OVT_EINVAL, "krn_mem_tree_roots: %zu bytes of '%s' are not whole 32-bit words", lens[t],
                          blocks[t]->what);
    }
    mem_table *t = table_of(ctx, false);
#ifdef OVT_HAVE_CUDA
    /* on the device: every leaf, then every level, of every tensor at once;
     * only the roots come up */
    if (!rv && count && is_device(ctx))
        rv = krn_cuda_tree_roots(ctx, roots, ptrs, lens, count);
    else
#endif
        for (size_t k = 0; k < count && !rv; k++) {
            transfer_open(t, blocks[k]);
            rv = host_tree_root(ctx, ptrs[k], lens[k], &roots[k]);
            transfer_close(t, blocks[k]);
        }
    free(blocks);
    return rv;
}

int krn_mem_tree_root(krn_ctx *ctx, const void *p, size_t bytes, ovt_hash *out)
{
    return krn_mem_tree_roots(ctx, out, &p, &bytes, 1);
}

int krn_mem_guard(krn_ctx *ctx, bool on)
{
    if (!krn_ctx_config(ctx)->mem_guard)
        return 0;
    mem_table *t = table_of(ctx, false);
    if (!t || t->guarded == on)
        return 0;
    for (size_t i = 0; i < t->n; i++)
        guard_block(&t->b[i], !on);
    t->guarded = on;
    return 0;
}

krn_mem_stats krn_mem_stats_of(const krn_ctx *ctx)
{
    const mem_table *t = krn_ctx_mem(ctx);
    krn_mem_stats none = {0};
    return t ? t->stats : none;
}
