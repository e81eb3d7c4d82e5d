"""What the research probes read of a process and the GPUs, from outside and with nothing but the driver's
libraries (ctypes): a process's memory from /proc/PID/smaps_rollup, and NVML's per-process GPU memory."""
import ctypes


def smaps(pid):
    """{field: bytes} of /proc/PID/smaps_rollup (Rss, Pss, Pss_Anon, Pss_File, Anonymous, ...); {} when gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[-1] == "kB":
                    out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    except OSError:
        pass
    return out


class Nvml:
    class ProcessInfo(ctypes.Structure):
        _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                    ("computeInstanceId", ctypes.c_uint)]

    class Memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

    def __init__(self):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != 0:
            raise RuntimeError("nvmlInit failed")
        n = ctypes.c_uint()
        self.lib.nvmlDeviceGetCount_v2(ctypes.byref(n))
        self.handles = []
        for i in range(n.value):
            h = ctypes.c_void_p()
            self.lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
            self.handles.append(h)

    def processes(self):
        """{gpu index: {pid: bytes}} as NVML reports them (the driver's pid namespace)."""
        out = {}
        for i, h in enumerate(self.handles):
            count = ctypes.c_uint(64)
            infos = (Nvml.ProcessInfo * 64)()
            r = self.lib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(count), infos)
            out[i] = {infos[j].pid: infos[j].usedGpuMemory for j in range(count.value)} if r == 0 else {}
        return out

    def by_pid(self):
        """{pid: bytes} summed over the GPUs."""
        out = {}
        for per_gpu in self.processes().values():
            for pid, used in per_gpu.items():
                out[pid] = out.get(pid, 0) + used
        return out

    def used(self):
        """Each GPU's memory in use, in bytes."""
        out = []
        for h in self.handles:
            m = Nvml.Memory()
            self.lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m))
            out.append(m.used)
        return out
