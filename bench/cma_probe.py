"""Exits 0 if a process may read a sibling's memory with process_vm_readv
(CMA), as Open MPI's shared-memory transport does to copy a large message
once, directly between ranks; 1 where the kernel or a container forbids it
(the ranks must then copy twice, through a shared buffer)."""
import ctypes
import os
import sys

PR_SET_PTRACER, PR_SET_PTRACER_ANY = 0x59616D61, ctypes.c_ulong(-1)


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


libc = ctypes.CDLL(None, use_errno=True)
source = ctypes.create_string_buffer(b"zest-cma", 16)
# Open MPI lets any process of the job attach (Yama's ptrace scope 1).
libc.prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0)
parent = os.getpid()
child = os.fork()
if child == 0:
    target = ctypes.create_string_buffer(16)
    local = IoVec(ctypes.addressof(target), 16)
    remote = IoVec(ctypes.addressof(source), 16)
    read = libc.process_vm_readv(
        parent, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0
    )
    os._exit(0 if read == 16 and target.value == b"zest-cma" else 1)
_, status = os.waitpid(child, 0)
sys.exit(0 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else 1)
