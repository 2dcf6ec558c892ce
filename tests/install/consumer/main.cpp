// Links Echo::reference from an installed tree and runs one all-reduce.
#include <cstdio>
#include <vector>

#include "echo/allreduce.h"

int main() {
  const int ranks = 2;
  const std::size_t n = 300;
  std::vector<float> a(n, 1.5f), b(n, -0.25f), ya(n), yb(n);
  const float* in[] = {a.data(), b.data()};
  float* out[] = {ya.data(), yb.data()};
  std::vector<echo::CompensatorState> states(ranks);
  const echo::Status s = echo::allreduce(echo::AllReduceSpec{}, ranks, n, in, out, states.data(),
                                         nullptr, nullptr);
  if (!s.ok() || ya[0] != 1.25f || yb[n - 1] != 1.25f) {
    std::fprintf(stderr, "unexpected result: %s %g\n", s.message().c_str(), ya[0]);
    return 1;
  }
  std::printf("consumer ok\n");
  return 0;
}
