// One row at one size: its calls timed, then verified.
#pragma once

#include <cstddef>

#include "context.h"
#include "rows.h"
#include "verification.h"

namespace echo::bench {

struct Measured {
  double ms = 0;  // median per-call time, the slowest rank's
  Verification v;
};

// Rows of the overlapped matmul for a message of `count` elements: the message's tokens at a
// hidden size of --matmul-k, at least 1 and at most kMatmulMaxRows, or --matmul-m when set.
int matmul_rows(const Options& opt, std::size_t count);

// The overlapped bf16 matmul of every rank alone, `rows` rows: *ms its median time.
Status time_matmul(const Context& c, int warmup, int iters, int rows, double* ms);

// Times `row` on messages of `count` elements (the inputs prepare_inputs filled), then fills the
// verification columns unless --skip-verify.
Status run_row(Context& c, const RowSpec& row, std::size_t count, Measured* m);

}  // namespace echo::bench
