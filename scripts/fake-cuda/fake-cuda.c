/*
 * A stand-in for libcuda and libnvrtc that does nothing, for measuring and profiling Kiln's own
 * host-side cost of a cuda op (dispatch, meta, allocation, kernel choice, argument packing, the
 * koffi call) on a machine without a GPU. Every call succeeds: allocations hand out increasing
 * fake device addresses, launches only count, copies to the host write zeros, NVRTC "compiles"
 * to 16 bytes. Results are meaningless; only the time Kiln spends around the calls is real.
 * Device properties are an H200's (132 SMs, sm_90).
 *
 *   bash scripts/fake-cuda/build.sh                  # -> /tmp/kiln-fake-cuda/lib64
 *   LD_LIBRARY_PATH=/tmp/kiln-fake-cuda/lib64 CUDA_HOME=/tmp/kiln-fake-cuda \
 *     KILN_CACHE_DIR=/tmp/kiln-fake-cache node --cpu-prof dist/bench/cuda-launch.js /tmp/x.json
 *
 * Declarations follow src/runtime/cuda/ffi.ts (koffi binds every one of them at load).
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
static uint64_t next_ptr = 0x7f0000000000ull;
static int handle_counter = 1;
static void* handle(void){ return (void*)(uintptr_t)(0x1000 + 16*(handle_counter++)); }
int cuInit(unsigned f){return 0;}
int cuDriverGetVersion(int*v){*v=13000;return 0;}
int cuDeviceGetCount(int*n){*n=1;return 0;}
int cuDeviceGet(int*d,int o){*d=o;return 0;}
int cuDeviceGetName(char*n,int len,int dev){strncpy(n,"Fake H200",len);return 0;}
int cuDeviceGetAttribute(int*v,int a,int dev){
  switch(a){case 16:*v=132;break;case 75:*v=9;break;case 76:*v=0;break;case 8:*v=49152;break;
  case 97:*v=232448;break;case 38:*v=50331648;break;case 1:*v=1024;break;case 81:*v=233472;break;
  case 82:*v=65536;break;case 39:*v=2048;break;case 10:*v=32;break;default:*v=1;}
  return 0;}
int cuDeviceTotalMem_v2(uint64_t*b,int d){*b=150ull<<30;return 0;}
int cuDevicePrimaryCtxRetain(void**c,int d){*c=handle();return 0;}
int cuCtxSetCurrent(void*c){return 0;}
int cuCtxGetCurrent(void**c){*c=0;return 0;}
int cuCtxSynchronize(void){return 0;}
int cuMemGetInfo_v2(uint64_t*f,uint64_t*t){*f=140ull<<30;*t=150ull<<30;return 0;}
int cuMemAlloc_v2(uint64_t*p,uint64_t b){*p=next_ptr;next_ptr+=(b+4095)&~4095ull;return 0;}
int cuMemFree_v2(uint64_t p){return 0;}
int cuMemAllocHost_v2(void**p,uint64_t b){*p=malloc(b?b:1);return 0;}
int cuMemFreeHost(void*p){free(p);return 0;}
int cuMemcpyHtoDAsync_v2(uint64_t d,void*s,uint64_t b,void*st){return 0;}
int cuMemcpyDtoHAsync_v2(void*d,uint64_t s,uint64_t b,void*st){memset(d,0,b);return 0;}
int cuMemcpyDtoDAsync_v2(uint64_t d,uint64_t s,uint64_t b,void*st){return 0;}
int cuMemsetD8Async(uint64_t d,uint8_t v,uint64_t n,void*st){return 0;}
int cuStreamCreate(void**s,unsigned f){*s=handle();return 0;}
int cuStreamDestroy_v2(void*s){return 0;}
int cuStreamSynchronize(void*s){return 0;}
int cuStreamQuery(void*s){return 0;}
int cuStreamWaitEvent(void*s,void*e,unsigned f){return 0;}
int cuEventCreate(void**e,unsigned f){*e=handle();return 0;}
int cuEventDestroy_v2(void*e){return 0;}
int cuEventRecord(void*e,void*s){return 0;}
int cuEventSynchronize(void*e){return 0;}
int cuEventQuery(void*e){return 0;}
int cuEventElapsedTime_v2(float*ms,void*a,void*b){*ms=1.0f;return 0;}
int cuModuleLoadData(void**m,void*img){*m=handle();return 0;}
int cuModuleUnload(void*m){return 0;}
int cuModuleGetFunction(void**f,void*m,const char*n){*f=handle();return 0;}
int cuFuncSetAttribute(void*f,int a,int v){return 0;}
volatile uint64_t launches=0;
int cuLaunchKernel(void*f,unsigned gx,unsigned gy,unsigned gz,unsigned bx,unsigned by,unsigned bz,unsigned sh,void*s,void*p,void*e){launches++;return 0;}
int cuLaunchKernelEx(void*c,void*f,void*p,void*e){launches++;return 0;}
int cuGetErrorName(int e,const char**n){*n="CUDA_ERROR_FAKE";return 0;}
int cuGetErrorString(int e,const char**n){*n="fake error";return 0;}
int cuStreamBeginCapture_v2(void*s,int m){return 0;}
int cuStreamEndCapture(void*s,void**g){*g=handle();return 0;}
int cuStreamIsCapturing(void*s,int*st){*st=0;return 0;}
int cuGraphInstantiateWithFlags(void**e,void*g,uint64_t f){*e=handle();return 0;}
int cuGraphLaunch(void*e,void*s){return 0;}
int cuGraphGetNodes(void*g,void*n,uint64_t*c){*c=0;return 0;}
int cuGraphExecDestroy(void*e){return 0;}
int cuGraphDestroy(void*g){return 0;}
int cuDevicePrimaryCtxRelease_v2(int d){return 0;}
// NVRTC
int nvrtcVersion(int*a,int*b){*a=13;*b=0;return 0;}
const char* nvrtcGetErrorString(int r){return "NVRTC_FAKE";}
int nvrtcCreateProgram(void**p,const char*s,const char*n,int nh,void*h,void*i){*p=handle();return 0;}
int nvrtcCompileProgram(void*p,int n,const char**o){return 0;}
int nvrtcGetProgramLogSize(void*p,uint64_t*s){*s=1;return 0;}
int nvrtcGetProgramLog(void*p,char*l){l[0]=0;return 0;}
int nvrtcGetCUBINSize(void*p,uint64_t*s){*s=16;return 0;}
int nvrtcGetCUBIN(void*p,char*c){memset(c,0x7f,16);return 0;}
int nvrtcDestroyProgram(void**p){return 0;}
