/* The layout of many tensor trees hashed together (tree_plan.h). */
#include "kernels/cuda/tree_plan.h"

#include <stdlib.h>
#include <string.h>

int krn_cuda_tree_plan_make(krn_cuda_tree_plan *p, const size_t *lens, size_t count)
{
    memset(p, 0, sizeof *p);
    if (count == 0)
        return ovt_fail(OVT_EINVAL, "tree roots on the device: no tensors");
    size_t deepest = 1, levels = 0;
    for (size_t t = 0; t < count; t++)
        deepest = ovt_tree_leaves_hd(lens[t]) > deepest ? ovt_tree_leaves_hd(lens[t]) : deepest;
    for (size_t n = deepest; n > 1; n = (n + 1) / 2)
        levels++;
    p->offs = malloc((levels + 1) * (count + 1) * sizeof *p->offs);
    if (!p->offs)
        return ovt_fail(OVT_ENOMEM, "tree roots on the device: out of memory for the layout of %zu tensors", count);
    p->count = count;
    p->levels = levels;
    for (size_t l = 0; l <= levels; l++) {
        size_t *row = p->offs + l * (count + 1), sum = 0;
        for (size_t t = 0; t < count; t++) {
            size_t n = ovt_tree_leaves_hd(lens[t]);
            for (size_t k = 0; k < l; k++)
                n = (n + 1) / 2;
            row[t] = sum;
            sum += n;
        }
        row[count] = sum;
    }
    return 0;
}

void krn_cuda_tree_plan_free(krn_cuda_tree_plan *p)
{
    free(p->offs);
    memset(p, 0, sizeof *p);
}
