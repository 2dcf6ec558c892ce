// The bf16 matrix product that the compensated rows of `echotk bench` overlap with the all-reduce
// (the next layer's projection, paper Sec. 6): C = A B, m x k by k x n, through cuBLAS, with A and
// B random, on the device current at creation.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "echo/status.h"

namespace echo::bench {

class Matmul {
 public:
  static Status create(int m, int n, int k, std::unique_ptr<Matmul>* out);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // Enqueues the product on `stream` over the first `rows` rows of A and C (0: all m).
  Status run(cudaStream_t stream, int rows = 0);
  int max_rows() const { return m_; }

 private:
  Matmul() = default;
  struct Handles;
  std::unique_ptr<Handles> h_;
  int m_ = 0, n_ = 0, k_ = 0;
};

}  // namespace echo::bench
