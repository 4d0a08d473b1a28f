# Host time per launch outside Node, for comparison with bench/cuda-launch.ts: cuLaunchKernel through
# Python ctypes (no Node, no koffi) and PyTorch eager add/relu on [1024] fp32, 10,000 calls after
# 20,000 warm-up, median of 5. Run on the device machine: python3 scripts/device/launch_floor.py
import ctypes, time, torch
cu = ctypes.CDLL('libcuda.so.1')
torch.zeros(1, device='cuda')  # primary context current on this thread
src = b'extern "C" __global__ void k(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = (float)i; }'
nv = ctypes.CDLL('libnvrtc.so.13')
prog = ctypes.c_void_p()
assert nv.nvrtcCreateProgram(ctypes.byref(prog), src, b'k.cu', 0, None, None) == 0
opts = (ctypes.c_char_p * 1)(b'-arch=sm_90')
assert nv.nvrtcCompileProgram(prog, 1, opts) == 0
sz = ctypes.c_size_t(); nv.nvrtcGetCUBINSize(prog, ctypes.byref(sz)); cub = ctypes.create_string_buffer(sz.value); nv.nvrtcGetCUBIN(prog, cub)
mod = ctypes.c_void_p(); assert cu.cuModuleLoadData(ctypes.byref(mod), cub) == 0
fn = ctypes.c_void_p(); assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b'k') == 0
x = torch.zeros(1024, device='cuda')
ptr = ctypes.c_uint64(x.data_ptr()); n = ctypes.c_int(1024)
params = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(ptr), ctypes.c_void_p), ctypes.cast(ctypes.byref(n), ctypes.c_void_p))
stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
launch = cu.cuLaunchKernel
launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
def per_op(f, n=10000, reps=5):
    for _ in range(20000): f()
    torch.cuda.synchronize(); rs = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n): f()
        rs.append((time.perf_counter() - t) / n * 1e6); torch.cuda.synchronize()
    rs.sort(); return rs[len(rs) // 2], rs
print('ctypes cuLaunchKernel (kernelParams)   %.2f us/op %s' % per_op(lambda: launch(fn, 4, 1, 1, 256, 1, 1, 0, stream, params, None)))
y = torch.randn(1024, device='cuda'); z = torch.randn(1024, device='cuda')
print('torch.add([1024]) eager               %.2f us/op %s' % per_op(lambda: torch.add(y, z)))
print('torch.relu([1024]) eager              %.2f us/op %s' % per_op(lambda: torch.relu(y)))
print('empty python lambda loop              %.2f us/op %s' % per_op(lambda: None))
