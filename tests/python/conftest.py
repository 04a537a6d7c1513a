"""The module runs on the host BLAS kernels the command runs, so that their runs compare bit for
bit: where OpenBLAS takes the CPU for an older core, the command executes itself again with
OPENBLAS_CORETYPE set to the CPU's own (backends/openmp/host_blas.cpp), which a Python process
cannot once OpenBLAS is loaded. Before any test module loads it (NumPy does), the tests set the
core the command names in `dqntrader info`, as a user who wants the command's numbers does."""

import os
import re
import subprocess

if "OPENBLAS_CORETYPE" not in os.environ:
    info = subprocess.run([os.environ["DQNTRADER_CLI"], "info"], capture_output=True, text=True,
                          check=True).stdout
    routed = re.search(r"because the CPU has the instructions of (\w+)", info)
    if routed:
        os.environ["OPENBLAS_CORETYPE"] = routed.group(1)
