#ifndef OVT_MODELIO_EXPORT_H
#define OVT_MODELIO_EXPORT_H

/* A model's parameters in other programs' layouts (docs/formats.md, "Model
 * export"):
 *   safetensors, GPT-2: Hugging Face GPT-2's names and layouts
 *       (transformer.wte.weight, transformer.h.N.attn.c_attn.weight, ...),
 *       one tensor per layer, the Conv1D weights (c_attn, c_proj, c_fc,
 *       mlp.c_proj) transposed to (in, out); the output head is tied to wte
 *       and not stored, as in Hugging Face's own GPT-2 checkpoints;
 *   safetensors, Llama: Hugging Face LlamaForCausalLM's names
 *       (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight,
 *       ..., lm_head.weight only when the head is not tied), weights (out,
 *       in) as stored by torch.nn.Linear, and the rows of q_proj and k_proj
 *       permuted from llama2.c's interleaved rotary pairs to Hugging Face's
 *       rotate_half halves (as Hugging Face's own conversion script does);
 *   safetensors, ResNet: torchvision's names (conv1.weight,
 *       layer1.0.bn1.running_mean, ...), shapes as in the layout (a
 *       convolution's weight (OC, C, KH, KW), PyTorch's own);
 *   safetensors, MLP: ovt's own tensors under their layout names (w0, b0,
 *       ...), shapes as in the layout (a weight is (out, in));
 *   llmc: llm.c's gpt2 weight file (GPT-2 only), the format --init-from
 *       reads: 256 int32 of header, then the parameters in llm.c's order with
 *       wte padded to Vp rows, Vp the vocabulary rounded up to 128 as llm.c
 *       pads it, the padding rows zero.
 *   llama2c: llama2.c's checkpoint (Llama only), versions 0 and 1:
 *       modelio/llama2c.h.
 * All values float32, little-endian. */

#include <stddef.h>
#include <stdint.h>

#include "modelio/safetensors.h"
#include "trainer/layout.h"
#include "trainer/state.h"

/* One tensor of an export: its name there, its shape there, and where it
 * comes from in ovt's layout: tensor `index`, the `rows` x `cols` block at
 * element `offset` of the flat parameter array, transposed when
 * `transpose` is set (the file's shape is then (cols, rows)). */
typedef struct {
    char name[64];
    uint32_t ndim;
    uint64_t shape[TRN_TENSOR_MAX_DIMS];
    uint32_t index;
    size_t offset, rows, cols;
    int transpose;
    uint32_t rope_heads; /* Llama's q and k: rows permuted for these heads (0: not) */
} trn_export_tensor;

/* The export's tensors for layout l in file order (GPT-2: Hugging Face's
 * state_dict order, layer by layer; MLP: layout order). *out is malloc'd,
 * *n entries. */
int trn_export_tensors(trn_export_tensor **out, size_t *n, const trn_layout *l) OVT_MUST_USE;

/* The parameters as the files store them, little-endian floats in layout
 * order: st's own memory on a little-endian host (*owned NULL), a
 * converted copy on a big-endian one (*owned, which the caller frees). */
int trn_export_params_le(const float **out, float **owned, const trn_state *st) OVT_MUST_USE;

/* Writes st's parameters as safetensors to path (atomically), with the
 * given metadata. */
int trn_export_safetensors(const char *path, const trn_state *st, const trn_st_meta *meta,
                           size_t nmeta) OVT_MUST_USE;

/* Writes st's parameters as an llm.c gpt2 weight file (atomically).
 * OVT_EINVAL for an MLP or a Llama: the file holds a GPT-2. */
int trn_export_llmc(const char *path, const trn_state *st) OVT_MUST_USE;

/* The parameters in safetensors file f, mapped back to layout l, into
 * params (l->nparams floats). Every tensor of trn_export_tensors must be
 * there with dtype F32 and its shape; what is missing, misshapen or not one
 * of them is OVT_EFORMAT naming the tensor. With lenient set (fine-tuning
 * from a Hugging Face checkpoint) names may also lack the "transformer."
 * prefix, the attention mask buffers (".attn.bias", ".attn.masked_bias")
 * are ignored, and a stored "lm_head.weight" must equal wte (a head that is
 * not tied is refused). what names the file in messages. */
int trn_export_import(float *params, const trn_layout *l, const trn_st_file *f, int lenient,
                      const char *what) OVT_MUST_USE;

/* The formats `ovt export --format` writes, in this order: "safetensors",
 * "llmc", "llama2c"; NULL past the last. What the command accepts and what
 * its help and `ovt --help` name (a test holds them to this list). */
typedef enum { TRN_EXPORT_SAFETENSORS, TRN_EXPORT_LLMC, TRN_EXPORT_LLAMA2C } trn_export_format;
const char *trn_export_format_name(size_t i);

#endif
