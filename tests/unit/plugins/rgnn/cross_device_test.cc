// Placeholder replaced below once the CUDA kernels exist.
#include <gtest/gtest.h>
