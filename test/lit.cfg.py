# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "ZEST"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = [
    "Inputs",
    "lib",
    "zestc.test.bad.mlir",
    "CMakeLists.txt",
    "lit.cfg.py",
    "lit.site.cfg.py",
]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.zest_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(
    ("%examples", os.path.join(config.zest_src_root, "examples"))
)
config.substitutions.append(("%zest_src_root", config.zest_src_root))
config.substitutions.append(("%zest_build_root", config.zest_obj_root))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.zest_tools_dir, config.llvm_tools_dir]
tools = [
    "zest-opt",
    "zest-runtime-test",
    "zest-kernel-test",
    "zest-attention-test",
    "zest-cross-entropy-test",
    "zest-grouped-matmul-test",
    "zest-heap-pages-test",
]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# End-to-end tests: real ranks under mpirun on this machine.
import shutil
import subprocess
import sys


llvm_config.add_tool_substitutions(["zestc", "zest-ckpt"], tool_dirs)
# The sgemm library of the CPU runtime (-DZEST_GEMM): gemm-onednn or
# gemm-openblas.
config.available_features.add("gemm-" + config.zest_gemm)
# Built with -DZEST_SANITIZE (make sanitize): the sanitizers' allocator
# replaces glibc's.
if config.zest_sanitize:
    config.available_features.add("sanitize")
mpirun = shutil.which("mpirun")
if mpirun:
    config.available_features.add("mpi")
    # Root is allowed in CI containers; oversubscription lets 4 ranks share
    # 2 cores; the shared-memory transport avoids probing the network.
    for name, value in [
        ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
        ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
        ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
        ("OMPI_MCA_btl", "self,vader"),
        ("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),
    ]:
        config.environment[name] = value
    # `timeout` bounds every run: a hang fails the test instead of CI.
    config.substitutions.append(
        ("%mpirun", "timeout 300 " + mpirun + " --oversubscribe -np")
    )
config.substitutions.append(
    (
        "%compare",
        sys.executable
        + " "
        + os.path.join(config.zest_src_root, "test", "lib", "compare.py"),
    )
)

# GPU tests (REQUIRES: cuda) run where the CUDA backends were built and a
# GPU is visible; CI machines compile them but have none.
nvidia_smi = shutil.which("nvidia-smi")
if (
    getattr(config, "zest_enable_cuda", False)
    and nvidia_smi
    and "GPU"
    in subprocess.run([nvidia_smi, "-L"], capture_output=True, text=True).stdout
):
    config.available_features.add("cuda")
if getattr(config, "zest_enable_cuda", False):
    # zestc links --target=cuda executables with the CUDA runtime library,
    # and --target=cuda-emulated ones with the emulated device's, which
    # runs everywhere (REQUIRES: cuda-emulated).
    config.available_features.add("cuda-runtime")
    config.available_features.add("cuda-emulated")
    llvm_config.add_tool_substitutions(
        [
            "zest-cuda-backend-test",
            "zest-cuda-linear-test",
            "zest-cuda-backend-test-emulated",
            "zest-cuda-linear-test-emulated",
            "zest-cuda-attention-test",
            "zest-cuda-attention-test-emulated",
            "zest-cuda-cross-entropy-test",
            "zest-cuda-cross-entropy-test-emulated",
            "zest-cuda-grouped-matmul-test",
            "zest-cuda-grouped-matmul-test-emulated",
            "zest-cuda-graphs-test",
            "zest-cuda-graphs-test-emulated",
            "zest-emulated-device-test",
        ],
        tool_dirs,
    )
# zestc --target=cuda embeds fatbins with ptxas from zestc's default
# --cuda-path; PTX text (--cuda-format=isa) needs nothing.
if os.access("/usr/local/cuda/bin/ptxas", os.X_OK):
    config.available_features.add("ptxas")

# zest plot's pages are checked in a real headless browser (Debian's
# chromium, which scripts/install-deps.sh installs).
for name in ("chromium", "chromium-browser"):
    if shutil.which(name):
        config.available_features.add("chromium")
        config.substitutions.append(
            (
                "%chromium",
                f"timeout 120 {shutil.which(name)} --headless --no-sandbox "
                "--disable-gpu --disable-dev-shm-usage",
            )
        )
        break

# zest-import and the PyTorch references run in the project virtualenv
# (scripts/setup-venv.sh: pinned torch, torch-mlir, numpy, safetensors,
# transformers).
import subprocess

venv_python = os.path.join(config.zest_src_root, ".venv", "bin", "python")
python_dir = os.path.join(config.zest_src_root, "python")
if (
    os.path.exists(venv_python)
    and subprocess.run(
        [
            venv_python,
            "-c",
            "import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) "
            "for m in ('torch', 'torch_mlir', 'safetensors', 'numpy', "
            "'transformers')) else 1)",
        ]
    ).returncode
    == 0
):
    config.available_features.add("torch")
    for name, module in [
        ("%zest-import", "zest_import"),
        ("%zest-weights", "zest_import.weights"),
        ("%zest-reference", "zest_import.reference"),
    ]:
        config.substitutions.append(
            (name, f"env PYTHONPATH={python_dir} {venv_python} -m {module}")
        )
    config.substitutions.append(
        ("%zest-python", f"env PYTHONPATH={python_dir} {venv_python}")
    )
    # The virtualenv's interpreter as a user runs it: the project's packages
    # come from the path file scripts/setup-venv.sh writes.
    config.substitutions.append(("%venv-python", venv_python))
    # The launcher (scripts/zest), with this build's zestc and runtime.
    config.substitutions.append(
        (
            "%zest-cli",
            f"env PYTHONPATH={python_dir} ZEST_BUILD_DIR={config.zest_obj_root} "
            f"{venv_python} -m zest",
        )
    )
