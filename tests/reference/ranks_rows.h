// Test inputs of the stream-unit suites (docs/numerics.md 6.1 and 6.2): P ranks' contributions of
// token rows, each rank's rows at its own scale, so that the row gains differ from row to row and
// rank to rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "test_util.h"

namespace echo::test {

struct RankRows {
  RankRows(int ranks, std::size_t rows, std::size_t width, std::uint32_t seed) : count(rows * width) {
    for (int r = 0; r < ranks; ++r) {
      std::vector<float> x = activations(count, seed + static_cast<std::uint32_t>(r));
      for (std::size_t t = 0; t < rows; ++t) {
        for (std::size_t e = 0; e < width; ++e) x[t * width + e] *= 0.25f + 0.5f * static_cast<float>(t + r);
      }
      in.push_back(x);
      out.emplace_back(count);
      xp.emplace_back(count);
    }
    for (int r = 0; r < ranks; ++r) {
      in_ptr.push_back(in[r].data());
      out_ptr.push_back(out[r].data());
      xp_ptr.push_back(xp[r].data());
    }
  }
  std::size_t count;
  std::vector<std::vector<float>> in, out, xp;  // inputs, outputs and x' per rank
  std::vector<const float*> in_ptr;
  std::vector<float*> out_ptr, xp_ptr;
};

}  // namespace echo::test
