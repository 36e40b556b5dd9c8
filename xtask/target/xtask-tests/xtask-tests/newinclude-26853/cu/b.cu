#include "common.cuh"
B
