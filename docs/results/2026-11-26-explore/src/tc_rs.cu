// Appended to kernels/cu/tensor.cu (as of 6606b80) to make scratch/tc.cu for
// the SS-vs-RS comparison of docs/results/2026-11-26-explore.md:
//   cat kernels/cu/tensor.cu tc_rs.cu > scratch/tc.cu
//   nvcc -fatbin -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o scratch/tc.fatbin scratch/tc.cu

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void tc_bf16_rs(float* d, const unsigned int* a, unsigned long long db, unsigned int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
#endif

extern "C" __global__ void __launch_bounds__(256, 1) tc_bf16_rs_probe(const uint4* a, const uint4* b,
    unsigned int iters, unsigned int store, float* out, unsigned long long* clk) {
    __shared__ __align__(128) unsigned char sb[TC_SLICE_B * TC_SLICES];
    tc_load(sb, reinterpret_cast<const unsigned char*>(b), TC_N);
    __syncthreads();
    const unsigned int* aw = reinterpret_cast<const unsigned int*>(a);
    unsigned int ar[TC_SLICES][4];
#pragma unroll
    for (int s = 0; s < TC_SLICES; ++s)
#pragma unroll
        for (int j = 0; j < 4; ++j) ar[s][j] = aw[((threadIdx.x % 128u) * 16u + s * 4u + j) % 2048u];
    const bool timer = blockIdx.x == 0 && threadIdx.x == 0;
    unsigned long long t0 = 0;
    long long c0 = 0;
    if (timer) { t0 = tc_timer(); c0 = clock64(); }
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    unsigned long long db[TC_SLICES];
#pragma unroll
    for (int s = 0; s < TC_SLICES; ++s) db[s] = tc_desc(sb + s * TC_SLICE_B, 128u, 256u);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    for (unsigned int it = 0; it < iters; ++it) {
#pragma unroll
        for (int s = 0; s < TC_SLICES; ++s) tc_bf16_rs(d, ar[s], db[s], 1u);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#else
    __trap();
#endif
    if (timer) { const long long c1 = clock64(); const unsigned long long t1 = tc_timer(); clk[0] = (unsigned long long)(c1 - c0); clk[1] = t1 - t0; }
    if (store != 0u) {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 128; ++i) s += d[i];
        out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    }
}
