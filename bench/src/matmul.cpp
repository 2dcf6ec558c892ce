// Matmul over cuBLAS; see include/echo/bench/matmul.h.
#include "echo/bench/matmul.h"

#include <cublas_v2.h>

#include <string>

#include "cuda_resources.h"
#include "echo/bench/device_ops.h"

namespace echo::bench {
namespace {

Status cublas_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status(StatusCode::kDeviceError, std::string("matmul: ") + what + " failed: " + cublasGetStatusString(s));
}

}  // namespace

struct Matmul::Handles {
  cublasHandle_t cublas = nullptr;
  DeviceBuffer a, b, c;
  ~Handles() {
    if (cublas != nullptr) (void)cublasDestroy(cublas);
  }
};

Status Matmul::create(int m, int n, int k, std::unique_ptr<Matmul>* out) {
  if (m < 1 || n < 1 || k < 1) {
    return Status(StatusCode::kInvalidArgument, "matmul: sizes must be positive, got " + std::to_string(m) + " x " +
                                                    std::to_string(n) + " x " + std::to_string(k));
  }
  std::unique_ptr<Matmul> mm(new Matmul);
  mm->h_ = std::make_unique<Handles>();
  mm->m_ = m;
  mm->n_ = n;
  mm->k_ = k;
  int device = 0;
  ECHO_BENCH_CUDA(cudaGetDevice(&device), "matmul: cudaGetDevice");
  ECHO_TRY(cublas_status(cublasCreate(&mm->h_->cublas), "cublasCreate"));
  const auto elements = [](int rows, int cols) { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols); };
  ECHO_TRY(mm->h_->a.allocate(device, elements(m, k) * 2, "matmul: A"));
  ECHO_TRY(mm->h_->b.allocate(device, elements(k, n) * 2, "matmul: B"));
  ECHO_TRY(mm->h_->c.allocate(device, elements(m, n) * 2, "matmul: C"));
  ECHO_TRY(fill_random(mm->h_->a.get(), elements(m, k), DType::kBFloat16, 1, nullptr));
  ECHO_TRY(fill_random(mm->h_->b.get(), elements(k, n), DType::kBFloat16, 2, nullptr));
  *out = std::move(mm);
  return Status::Ok();
}

Matmul::~Matmul() = default;

Status Matmul::run(cudaStream_t stream, int rows) {
  if (rows < 0 || rows > m_) {
    return Status(StatusCode::kInvalidArgument,
                  "matmul: " + std::to_string(rows) + " rows, the matmul has " + std::to_string(m_));
  }
  const int m = rows == 0 ? m_ : rows;
  const float one = 1.0f, zero = 0.0f;
  ECHO_TRY(cublas_status(cublasSetStream(h_->cublas, stream), "cublasSetStream"));
  return cublas_status(cublasGemmEx(h_->cublas, CUBLAS_OP_N, CUBLAS_OP_N, m, n_, k_, &one, h_->a.get(), CUDA_R_16BF, m,
                                    h_->b.get(), CUDA_R_16BF, k_, &zero, h_->c.get(), CUDA_R_16BF, m,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx");
}

}  // namespace echo::bench
