// Global fixture of the GPU test binaries (include it once per binary): up to eight ranks share
// one GPU there, so enough hardware queues for their streams are requested before the first CUDA
// call (echo::cuda::request_work_queues).
#pragma once

#include <boost/test/unit_test.hpp>

#include "echo/cuda/communicator.h"

struct WorkQueues {
  WorkQueues() { echo::cuda::request_work_queues(); }
};
BOOST_TEST_GLOBAL_FIXTURE(WorkQueues);
