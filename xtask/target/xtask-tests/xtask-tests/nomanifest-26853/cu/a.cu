#include "common.cuh"
#include <cstdio>
A
