#include "nowhere.cuh"
