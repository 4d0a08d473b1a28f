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
 * Declarations follow src/runtime/cuda/ffi.ts (koffi binds every one of them at load). The same
 * file is also libcublasLt.so.13 (one heuristic offer per problem; matmuls only count).
 *
 * FAKE_CUDA_DUMP_DIR=<existing dir>: every nvrtcCompileProgram also writes what it was given, as
 * <dir>/nvrtc-<fnv1a64>.cu (the source, byte for byte) and <dir>/nvrtc-<fnv1a64>.opts (the program
 * name on the first line, then the options, one a line); the hash covers all three, so a unit
 * compiled twice is written once (temp file + rename: safe from concurrent compile workers).
 * scripts/dump-kernel-sources.mjs uses it to collect every CUDA C source Kiln generates.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>
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
// Capture is tracked as the real driver does it where Kiln can go wrong: a stream being captured
// cannot be synchronised (900, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), a failed capture is
// invalidated, and an event recorded only inside a capture cannot be waited on (1, INVALID_VALUE).
static void*capturing_stream=0; static int capture_failed=0;
#define MAX_CAPTURED_EVENTS 4096
static void*captured_events[MAX_CAPTURED_EVENTS]; static int n_captured_events=0;
static int event_captured(void*e){for(int i=0;i<n_captured_events;i++)if(captured_events[i]==e)return 1;return 0;}
static void event_uncapture(void*e){for(int i=0;i<n_captured_events;i++)if(captured_events[i]==e){captured_events[i]=captured_events[--n_captured_events];return;}}
int cuStreamSynchronize(void*s){if(capturing_stream&&s==capturing_stream){capture_failed=1;return 900;}return 0;}
int cuStreamQuery(void*s){return 0;}
int cuStreamWaitEvent(void*s,void*e,unsigned f){return 0;}
int cuEventCreate(void**e,unsigned f){*e=handle();return 0;}
int cuEventDestroy_v2(void*e){return 0;}
int cuEventRecord(void*e,void*s){if(capturing_stream&&s==capturing_stream){if(!event_captured(e)&&n_captured_events<MAX_CAPTURED_EVENTS)captured_events[n_captured_events++]=e;}else event_uncapture(e);return 0;}
int cuEventSynchronize(void*e){return event_captured(e)?1:0;}
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
int cuStreamBeginCapture_v2(void*s,int m){capturing_stream=s;capture_failed=0;return 0;}
int cuStreamEndCapture(void*s,void**g){int failed=capture_failed;capturing_stream=0;capture_failed=0;if(failed){*g=0;return 901;}*g=handle();return 0;}
int cuStreamIsCapturing(void*s,int*st){*st=(capturing_stream&&s==capturing_stream)?1:0;return 0;}
int cuGraphInstantiateWithFlags(void**e,void*g,uint64_t f){*e=handle();return 0;}
int cuGraphLaunch(void*e,void*s){return 0;}
int cuGraphGetNodes(void*g,void*n,uint64_t*c){*c=0;return 0;}
int cuGraphExecDestroy(void*e){return 0;}
int cuGraphDestroy(void*g){return 0;}
int cuDevicePrimaryCtxRelease_v2(int d){return 0;}
// NVRTC
int nvrtcVersion(int*a,int*b){*a=13;*b=0;return 0;}
const char* nvrtcGetErrorString(int r){return "NVRTC_FAKE";}
// A program is a real allocation holding its source and name, for FAKE_CUDA_DUMP_DIR.
typedef struct { char *src; char *name; } fake_prog;
static char *dup_or_empty(const char *s){ return strdup(s ? s : ""); }
int nvrtcCreateProgram(void**p,const char*s,const char*n,int nh,void*h,void*i){
  fake_prog *fp = calloc(1, sizeof *fp);
  fp->src = dup_or_empty(s); fp->name = dup_or_empty(n);
  *p = fp; return 0;}
static uint64_t fnv1a(uint64_t h, const void *data, size_t len){
  const unsigned char *b = data;
  for (size_t k = 0; k < len; k++) { h ^= b[k]; h *= 0x100000001b3ull; }
  return h;}
static int tmp_counter = 0;
/* Writes len bytes to dir/name via a unique temp file and rename(2). */
static void write_atomic(const char *dir, const char *name, const char *data, size_t len){
  char tmp[4096], dst[4096];
  snprintf(tmp, sizeof tmp, "%s/.tmp-%d-%d", dir, (int)getpid(), __atomic_fetch_add(&tmp_counter, 1, __ATOMIC_SEQ_CST));
  snprintf(dst, sizeof dst, "%s/%s", dir, name);
  FILE *f = fopen(tmp, "wb");
  if (!f) return;
  size_t w = fwrite(data, 1, len, f);
  if (fclose(f) != 0 || w != len) { unlink(tmp); return; }
  rename(tmp, dst);}
static void dump_program(const fake_prog *fp, int n, const char **o){
  const char *dir = getenv("FAKE_CUDA_DUMP_DIR");
  if (!dir || !*dir) return;
  size_t cap = strlen(fp->name) + 2, len = 0;
  for (int k = 0; k < n; k++) cap += strlen(o[k] ? o[k] : "") + 1;
  char *opts = malloc(cap);
  len += (size_t)sprintf(opts + len, "%s\n", fp->name);
  for (int k = 0; k < n; k++) len += (size_t)sprintf(opts + len, "%s\n", o[k] ? o[k] : "");
  uint64_t h = 0xcbf29ce484222325ull;
  h = fnv1a(h, fp->src, strlen(fp->src) + 1);
  h = fnv1a(h, opts, len);
  char name[64];
  snprintf(name, sizeof name, "nvrtc-%016llx.cu", (unsigned long long)h);
  write_atomic(dir, name, fp->src, strlen(fp->src));
  snprintf(name, sizeof name, "nvrtc-%016llx.opts", (unsigned long long)h);
  write_atomic(dir, name, opts, len);
  free(opts);}
int nvrtcCompileProgram(void*p,int n,const char**o){ if (p) dump_program((const fake_prog*)p, n, o); return 0;}
int nvrtcGetProgramLogSize(void*p,uint64_t*s){*s=1;return 0;}
int nvrtcGetProgramLog(void*p,char*l){l[0]=0;return 0;}
int nvrtcGetCUBINSize(void*p,uint64_t*s){*s=16;return 0;}
int nvrtcGetCUBIN(void*p,char*c){memset(c,0x7f,16);return 0;}
int nvrtcDestroyProgram(void**p){
  if (p && *p) { fake_prog *fp = *p; free(fp->src); free(fp->name); free(fp); *p = 0; }
  return 0;}
// cuBLASLt (libcublasLt.so.13 is this same file): one heuristic offer, waves 1.0, no workspace;
// the algorithm search finds no ids; every matmul "runs".
int cublasLtCreate(void**h){*h=handle();return 0;}
uint64_t cublasLtGetVersion(void){return 130000;}
int cublasLtMatmulDescCreate(void**d,int c,int s){*d=handle();return 0;}
int cublasLtMatmulDescDestroy(void*d){return 0;}
int cublasLtMatmulDescSetAttribute(void*d,int a,void*b,uint64_t n){return 0;}
int cublasLtMatrixLayoutCreate(void**l,int t,uint64_t r,uint64_t c,int64_t ld){*l=handle();return 0;}
int cublasLtMatrixLayoutDestroy(void*l){return 0;}
int cublasLtMatrixLayoutSetAttribute(void*l,int a,void*b,uint64_t n){return 0;}
int cublasLtMatmulPreferenceCreate(void**p){*p=handle();return 0;}
int cublasLtMatmulPreferenceDestroy(void*p){return 0;}
int cublasLtMatmulPreferenceSetAttribute(void*p,int a,void*b,uint64_t n){return 0;}
int cublasLtMatmulAlgoGetHeuristic(void*h,void*d,void*a,void*b,void*c,void*dd,void*p,int req,void*res,int*count){
  /* FAKE_CUDA_LT_REFUSE=1: every problem is refused as CUBLAS_STATUS_NOT_SUPPORTED (15), the way the
     H200's cuBLASLt refused some float64 batched layouts, so the GEMM fallback can be exercised. */
  if(getenv("FAKE_CUDA_LT_REFUSE")){*count=0;return 15;}
  if(req<1){*count=0;return 0;}
  memset(res,0,96); float w=1.0f; memcpy((char*)res+76,&w,4); *count=1; return 0;}
int cublasLtMatmulAlgoConfigSetAttribute(void*al,int a,void*b,uint64_t n){return 0;}
int cublasLtMatmulAlgoConfigGetAttribute(void*al,int a,void*b,uint64_t n,uint64_t*w){memset(b,0,n);*w=n;return 0;}
int cublasLtMatmulAlgoCapGetAttribute(void*al,int a,void*b,uint64_t n,uint64_t*w){memset(b,0,n);*w=0;return 0;}
int cublasLtMatmulAlgoGetIds(void*h,int ct,int st,int at,int bt,int c,int d,int req,int*ids,int*count){*count=0;return 0;}
int cublasLtMatmulAlgoInit(void*h,int ct,int st,int at,int bt,int c,int d,int id,void*al){memset(al,0,64);return 0;}
int cublasLtMatmulAlgoCheck(void*h,void*d,void*a,void*b,void*c,void*dd,void*al,void*res){memset(res,0,96);return 0;}
int cublasLtMatmul(void*h,void*d,void*al,uint64_t A,void*ad,uint64_t B,void*bd,void*be,uint64_t C,void*cd,uint64_t D,void*dd,void*algo,uint64_t ws,uint64_t wss,void*st){launches++;return 0;}
