#pragma once
#include "inner.cuh"
