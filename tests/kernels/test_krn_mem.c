/* Tests of tensor memory (kernels/mem.h) on every CPU backend (cpu, ref,
 * shuffle), plain and under the guard:
 *   - an allocation is zeroed; upload, download, zero and copy round trip
 *     bytes, also in part of an allocation;
 *   - the tree root of backend memory is common/tree.h's of the same
 *     bytes (one leaf, many, a short last one);
 *   - bad sizes and foreign pointers get messages that name the
 *     allocation, the offset and the sizes;
 *   - the guard's memory is not host memory for krn_mem_is_host, and while
 *     the guard is on, a direct host read faults (in a child process)
 *     while the interface still reads and writes it;
 *   - the statistics count what crossed. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/tree.h"
#include "kernels/mem.h"

static krn_ctx *ctx_for(krn_backend_kind backend, bool guard)
{
    krn_config kc = {.backend = backend, .mode = KRN_NEAREST, .grid_bits = 32, .shuffle_seed = 7, .threads = 2,
                     .mem_guard = guard};
    krn_ctx *ctx = NULL;
    if (krn_ctx_new(&ctx, &kc) != 0)
        abort();
    return ctx;
}

/* Round trips on ctx: n 32-bit words (several tree leaves when large). */
static void round_trips(krn_ctx *ctx, size_t n)
{
    size_t bytes = n * sizeof(uint32_t);
    uint32_t *host = malloc(bytes), *back = malloc(bytes);
    CHECK(host && back);
    for (size_t i = 0; i < n; i++)
        host[i] = (uint32_t)(i * 2654435761u) ^ 0x5a5a5a5au;
    void *a = NULL, *b = NULL;
    CHECK_MSG(krn_mem_alloc(ctx, &a, bytes, "a") == 0 && krn_mem_alloc(ctx, &b, bytes, "b") == 0, "%s",
              ovt_errmsg());
    /* zeroed */
    memset(back, 0xff, bytes);
    CHECK(krn_mem_download(ctx, back, a, bytes) == 0);
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++)
        nonzero += back[i] != 0;
    CHECK(nonzero == 0);
    /* up and down */
    CHECK(krn_mem_upload(ctx, a, host, bytes) == 0);
    memset(back, 0, bytes);
    CHECK(krn_mem_download(ctx, back, a, bytes) == 0);
    CHECK_MEM(back, host, bytes);
    /* the tree root where the words are, and on the host */
    ovt_hash there, here;
    CHECK_MSG(krn_mem_tree_root(ctx, a, bytes, &there) == 0, "%s", ovt_errmsg());
    CHECK(ovt_tree_root_le32(&here, host, bytes) == 0);
    CHECK_MEM(there.b, here.b, 32);
    /* and of a part: a tensor in the middle of an allocation */
    size_t lo = n / 3, len = n / 3 + 1;
    CHECK(krn_mem_tree_root(ctx, (uint32_t *)a + lo, len * 4, &there) == 0);
    CHECK(ovt_tree_root_le32(&here, host + lo, len * 4) == 0);
    CHECK_MEM(there.b, here.b, 32);
    /* several at once, as a stateHash takes them: the part, the whole, none */
    const void *ptrs[3] = {(uint32_t *)a + lo, a, a};
    size_t lens[3] = {len * 4, bytes, 0};
    ovt_hash roots[3], none;
    CHECK(krn_mem_tree_roots(ctx, roots, ptrs, lens, 3) == 0);
    CHECK_MEM(roots[0].b, here.b, 32);
    CHECK(ovt_tree_root_le32(&here, host, bytes) == 0 && ovt_tree_root_le32(&none, host, 0) == 0);
    CHECK_MEM(roots[1].b, here.b, 32);
    CHECK_MEM(roots[2].b, none.b, 32);
    /* copy, then zero a part of the copy */
    CHECK(krn_mem_copy(ctx, b, a, bytes) == 0);
    CHECK(krn_mem_zero(ctx, (uint32_t *)b + lo, len * 4) == 0);
    CHECK(krn_mem_download(ctx, back, b, bytes) == 0);
    memset(host + lo, 0, len * 4);
    CHECK_MEM(back, host, bytes);
    /* a part up and down */
    CHECK(krn_mem_upload(ctx, (uint32_t *)b + lo, host, 4) == 0 && krn_mem_download(ctx, back + 1, (uint32_t *)b + lo, 4) == 0);
    CHECK(back[1] == host[0]);
    krn_mem_free(ctx, a);
    krn_mem_free(ctx, b);
    free(host);
    free(back);
}

/* Misuse: what each message names. */
static void bad_sizes(krn_ctx *ctx)
{
    void *a = NULL;
    uint32_t host[64] = {0};
    CHECK(krn_mem_alloc(ctx, &a, 0, "empty") == OVT_EINVAL && a == NULL);
    CHECK(strstr(ovt_errmsg(), "'empty' of 0 bytes") != NULL);
    CHECK(krn_mem_alloc(ctx, &a, 100, "params") == 0);
    CHECK(krn_mem_upload(ctx, a, host, 101) == OVT_EINVAL);
    CHECK_MSG(strstr(ovt_errmsg(), "101 bytes at offset 0 run past the end of 'params' (100 bytes)") != NULL, "%s",
              ovt_errmsg());
    CHECK(krn_mem_download(ctx, host, (char *)a + 96, 8) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "8 bytes at offset 96 run past the end of 'params'") != NULL);
    CHECK(krn_mem_download(ctx, host, host + 1, 4) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "is not tensor memory of this context") != NULL);
    CHECK(krn_mem_upload(ctx, host, host + 1, 4) == OVT_EINVAL);
    CHECK(krn_mem_tree_root(ctx, a, 6, &(ovt_hash){0}) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "not whole 32-bit words") != NULL);
    const void *ptrs[2] = {a, host};
    size_t lens[2] = {4, 4};
    ovt_hash roots[2];
    CHECK(krn_mem_tree_roots(ctx, roots, ptrs, lens, 2) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "is not tensor memory of this context") != NULL);
    CHECK(krn_mem_copy(ctx, (char *)a + 4, a, 8) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "overlap") != NULL);
    CHECK(krn_mem_zero(ctx, (char *)a + 50, 51) == OVT_EINVAL);
    /* another ctx's memory is foreign here */
    krn_ctx *other = ctx_for(KRN_BACKEND_CPU, false);
    CHECK(krn_mem_download(other, host, a, 4) == OVT_EINVAL);
    krn_ctx_free(other);
    /* the caller's host memory can be zeroed through the interface */
    host[3] = 9;
    CHECK(krn_mem_zero(ctx, host, sizeof host) == 0 && host[3] == 0);
    krn_mem_free(ctx, a);
}

/* The guard: the memory is PROT_NONE while it is on. Returns whether a
 * child's direct read of p faulted. */
static bool read_faults(const void *p)
{
    pid_t pid = fork();
    if (pid == 0) {
        volatile const uint32_t *q = p;
        uint32_t v = *q;
        _exit((int)(v & 1)); /* reached only when the read did not fault */
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return false;
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

static void guard(krn_backend_kind backend)
{
    krn_ctx *ctx = ctx_for(backend, true);
    bool resident = false;
    CHECK(krn_mem_placement(ctx, &resident) == 0 && resident);
    uint32_t *a = NULL, host[4] = {1, 2, 3, 4}, back[4] = {0};
    CHECK(krn_mem_alloc(ctx, (void **)&a, sizeof host, "guarded") == 0);
    CHECK(!krn_mem_is_host(ctx, a) && krn_mem_is_host(ctx, host));
    CHECK(krn_mem_guard(ctx, true) == 0);
    CHECK(read_faults(a));
    /* the interface still reads and writes it, and leaves it closed */
    CHECK(krn_mem_upload(ctx, a, host, sizeof host) == 0 && krn_mem_download(ctx, back, a, sizeof back) == 0);
    CHECK_MEM(back, host, sizeof host);
    CHECK(read_faults(a));
    /* an allocation made while the guard is on is closed too */
    uint32_t *b = NULL;
    CHECK(krn_mem_alloc(ctx, (void **)&b, 4, "late") == 0 && read_faults(b));
    CHECK(krn_mem_guard(ctx, false) == 0);
    CHECK(!read_faults(a) && a[2] == 3);
    krn_mem_stats s = krn_mem_stats_of(ctx);
    CHECK(s.uploads == 1 && s.upload_bytes == sizeof host && s.downloads == 1 && s.allocated_bytes == sizeof host + 4);
    krn_mem_free(ctx, b);
    krn_mem_free(ctx, a);
    CHECK(krn_mem_stats_of(ctx).allocated_bytes == 0);
    krn_ctx_free(ctx);
}

static void backend(krn_backend_kind kind)
{
    for (int g = 0; g < 2; g++) {
        krn_ctx *ctx = ctx_for(kind, g == 1);
        bool resident = true;
        CHECK(krn_mem_placement(ctx, &resident) == 0 && resident == (g == 1));
        round_trips(ctx, 1);
        round_trips(ctx, 1000);
        round_trips(ctx, 3 * OVT_TREE_LEAF_BYTES / 4 + 5); /* four leaves, the last short */
        bad_sizes(ctx);
        void *p = NULL;
        CHECK(krn_mem_alloc(ctx, &p, 8, "p") == 0 && krn_mem_is_host(ctx, p) == (g == 0));
        /* left allocated: the ctx frees it */
        krn_ctx_free(ctx);
    }
    guard(kind);
}

static void cuda_refuses_the_guard(void)
{
    krn_config kc = {.backend = KRN_BACKEND_CUDA, .mode = KRN_NEAREST, .grid_bits = 32, .mem_guard = true};
    krn_ctx *ctx = NULL;
    CHECK(krn_ctx_new(&ctx, &kc) == OVT_EINVAL && ctx == NULL);
    CHECK(strstr(ovt_errmsg(), "testing mode of the CPU backends") != NULL);
}

int main(void)
{
    CHECK_RUN(backend(KRN_BACKEND_CPU));
    CHECK_RUN(backend(KRN_BACKEND_REF));
    CHECK_RUN(backend(KRN_BACKEND_SHUFFLE));
    CHECK_RUN(cuda_refuses_the_guard());
    return check_done();
}
