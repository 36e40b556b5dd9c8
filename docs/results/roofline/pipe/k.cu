// SASS probe: which pipe does ptxas pick for fma.rn.f16x2 in each form?
#define N 64
__device__ __forceinline__ unsigned h2fma(unsigned x, unsigned m, unsigned k){unsigned r;asm("fma.rn.f16x2 %0,%1,%2,%3;":"=r"(r):"r"(x),"r"(m),"r"(k));return r;}
template<int C> __global__ void base(unsigned m, unsigned k, unsigned it, unsigned* o){
  unsigned x[C];
  for(int c=0;c<C;++c) x[c]=threadIdx.x*C+c;
  for(unsigned i=0;i<it;++i){
#pragma unroll
    for(int s=0;s<N;++s)
#pragma unroll
    for(int c=0;c<C;++c) x[c]=h2fma(x[c],m,k);
  }
  unsigned a=0; for(int c=0;c<C;++c) a^=x[c]; o[threadIdx.x]=a;
}
template __global__ void base<8>(unsigned,unsigned,unsigned,unsigned*);
template __global__ void base<16>(unsigned,unsigned,unsigned,unsigned*);
template __global__ void base<4>(unsigned,unsigned,unsigned,unsigned*);
// per-chain m
__global__ void permk(unsigned m, unsigned k, unsigned it, unsigned* o){
  unsigned x[8], mm[8], kk[8];
  for(int c=0;c<8;++c){ x[c]=threadIdx.x*8+c; mm[c]=m^(c<<1); kk[c]=k^(c<<2);}
  for(unsigned i=0;i<it;++i){
#pragma unroll
    for(int s=0;s<N;++s)
#pragma unroll
    for(int c=0;c<8;++c) x[c]=h2fma(x[c],mm[c],kk[c]);
  }
  unsigned a=0; for(int c=0;c<8;++c) a^=x[c]; o[threadIdx.x]=a;
}
// immediates
__global__ void imm(unsigned it, unsigned* o){
  unsigned x[8];
  for(int c=0;c<8;++c) x[c]=threadIdx.x*8+c;
  for(unsigned i=0;i<it;++i){
#pragma unroll
    for(int s=0;s<N;++s)
#pragma unroll
    for(int c=0;c<8;++c) x[c]=h2fma(x[c],0xBB80BB80u,0x38003800u);
  }
  unsigned a=0; for(int c=0;c<8;++c) a^=x[c]; o[threadIdx.x]=a;
}
// x = x*x + k (both sources the chain)
__global__ void sq(unsigned k, unsigned it, unsigned* o){
  unsigned x[8];
  for(int c=0;c<8;++c) x[c]=threadIdx.x*8+c;
  for(unsigned i=0;i<it;++i){
#pragma unroll
    for(int s=0;s<N;++s)
#pragma unroll
    for(int c=0;c<8;++c) x[c]=h2fma(x[c],x[c],k);
  }
  unsigned a=0; for(int c=0;c<8;++c) a^=x[c]; o[threadIdx.x]=a;
}
// bf16x2
__device__ __forceinline__ unsigned b2fma(unsigned x, unsigned m, unsigned k){unsigned r;asm("fma.rn.bf16x2 %0,%1,%2,%3;":"=r"(r):"r"(x),"r"(m),"r"(k));return r;}
__global__ void bf(unsigned m, unsigned k, unsigned it, unsigned* o){
  unsigned x[8];
  for(int c=0;c<8;++c) x[c]=threadIdx.x*8+c;
  for(unsigned i=0;i<it;++i){
#pragma unroll
    for(int s=0;s<N;++s)
#pragma unroll
    for(int c=0;c<8;++c) x[c]=b2fma(x[c],m,k);
  }
  unsigned a=0; for(int c=0;c<8;++c) a^=x[c]; o[threadIdx.x]=a;
}
// mul/add pair
__global__ void muladd(unsigned m, unsigned k, unsigned it, unsigned* o){
  unsigned x[8];
  for(int c=0;c<8;++c) x[c]=threadIdx.x*8+c;
  for(unsigned i=0;i<it;++i){
#pragma unroll
    for(int s=0;s<N;++s)
#pragma unroll
    for(int c=0;c<8;++c) asm("mul.rn.f16x2 %0,%0,%1;":"+r"(x[c]):"r"(m));
  }
  unsigned a=0; for(int c=0;c<8;++c) a^=x[c]; o[threadIdx.x]=a;
}
// mixed with FFMA
__global__ void mixed(unsigned m, unsigned k, float fm, float fk, unsigned it, unsigned* o){
  unsigned x[8]; float y[8];
  for(int c=0;c<8;++c){ x[c]=threadIdx.x*8+c; y[c]=threadIdx.x+c;}
  for(unsigned i=0;i<it;++i){
#pragma unroll
    for(int s=0;s<N;++s)
#pragma unroll
    for(int c=0;c<8;++c){ x[c]=h2fma(x[c],m,k); y[c]=fmaf(y[c],fm,fk);}
  }
  unsigned a=0; for(int c=0;c<8;++c) a^=x[c]^__float_as_uint(y[c]); o[threadIdx.x]=a;
}
