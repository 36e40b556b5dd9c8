#!/usr/bin/env python3
"""Crude stacks of every thread of a process (no gdb on the GPU machine):
ptrace-stop each thread, read rip/rsp, scan 256 KiB of its stack for words
that point into executable mappings, print them as (file, file offset).
Symbolize the program's offsets on the build machine with the program's
LOAD segments (file offset -> address) and addr2line."""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
PTRACE_GETREGS, PTRACE_ATTACH, PTRACE_DETACH = 12, 16, 17
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs".split()]
pid = int(sys.argv[1])
maps = []
for l in open(f"/proc/{pid}/maps"):
    f = l.split()
    lo, hi = (int(x, 16) for x in f[0].split("-"))
    name = f[5] if len(f) >= 6 else ""
    if "x" in f[1] and name and ("racecheck" in name or "libcuda" in name or "libc.so" in name or "sanitizer" in name.lower()):
        maps.append((lo, hi, int(f[2], 16), os.path.basename(name)))
def where(v):
    for lo, hi, off, n in maps:
        if lo <= v < hi: return f"{n}+{hex(v - lo + off)}"
mem = open(f"/proc/{pid}/mem", "rb")
for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
    comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
    if libc.ptrace(PTRACE_ATTACH, tid, None, None) != 0:
        print(tid, comm, "attach failed", os.strerror(ctypes.get_errno())); continue
    os.waitpid(tid, 0x40000000)
    r = Regs()
    libc.ptrace(PTRACE_GETREGS, tid, None, ctypes.byref(r))
    frames = []
    try:
        mem.seek(r.rsp); data = mem.read(256 * 1024)
    except OSError:
        data = b""
    for i in range(0, len(data) - 7, 8):
        w = where(int.from_bytes(data[i:i+8], "little"))
        if w and "libc.so" not in w: frames.append(w)
        if len(frames) >= 40: break
    libc.ptrace(PTRACE_DETACH, tid, None, None)
    print(f"{tid} {comm} rip={where(r.rip) or hex(r.rip)}")
    print("   ", " ".join(frames))
