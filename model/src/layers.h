// Building blocks of the Llama forward pass on row-major [tokens, features] activations.
#pragma once

#include "echo/model/config.h"
#include "echo/model/weights.h"

namespace echo::model {

// y = x / sqrt(mean(x^2) + eps) * weight, row by row.
void rms_norm(const Matrix& x, const Vector& weight, float eps, Matrix* y);

// Rotary position embedding in place on [tokens, heads * head_dim], rotating adjacent pairs
// (x[2i], x[2i+1]) by position * base^(-2i / rope_dims): the GGUF layout, whose Q and K rows the
// converter permuted from Hugging Face's half-split layout.
void apply_rope(const LlamaConfig& config, int num_heads, Matrix* x);

// Causal grouped-query attention: q [T, heads * d], k and v [T, kv_heads * d] -> out [T, heads * d].
void causal_attention(const LlamaConfig& config, const Matrix& q, const Matrix& k,
                      const Matrix& v, Matrix* out);

// out = silu(gate) * up, elementwise.
void swiglu(const Matrix& gate, const Matrix& up, Matrix* out);

}  // namespace echo::model
