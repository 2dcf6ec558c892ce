// Status propagation inside the benchmarks (the harness returns Status; it never exits or throws).
#pragma once

#include "echo/status.h"

// Returns the status of `expr` from the enclosing function unless it is ok.
#define ECHO_BENCH_TRY(expr)                       \
  do {                                             \
    ::echo::Status echo_bench_s_ = (expr);         \
    if (!echo_bench_s_.ok()) return echo_bench_s_; \
  } while (0)
