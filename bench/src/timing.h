// Timed loops over every rank (CUDA events on each rank's stream, the slowest rank per iteration).
#pragma once

#include <functional>
#include <vector>

#include "context.h"

namespace echo::bench {

// A call of one rank, enqueued on its stream.
using RankCall = std::function<Status(int rank)>;

// Runs op(rank) `iters` times on every rank after `warmup` calls, one host thread per GPU; *ms gets
// per-iteration times (slowest rank) in ms. With `graph` > 0 each rank captures `graph` calls of op
// (then close(rank), which must leave no work forked off its stream) into a CUDA graph after the
// warm-up, and an iteration is one replay of it, its time divided by `graph`.
Status time_loop(const Context& c, int warmup, int iters, const RankCall& op, std::vector<double>* ms, int graph = 0,
                 const RankCall& close = nullptr);

// The median (upper middle of an even count), 0 for none.
double median(std::vector<double> v);

}  // namespace echo::bench
