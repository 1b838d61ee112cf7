"""Prints the folder holding cudnn_frontend.h from the installed nvidia-cudnn-frontend wheel.

kernels/CMakeLists.txt runs it with the python3 on PATH (the one ci/install-deps.sh installed the
wheel into); exits 1 when the wheel is not installed.
"""
import importlib.metadata
import pathlib
import sys

try:
    wheel = importlib.metadata.distribution("nvidia-cudnn-frontend")
except importlib.metadata.PackageNotFoundError:
    sys.exit(1)
headers = [f for f in wheel.files or [] if str(f).endswith("include/cudnn_frontend.h")]
if not headers:
    sys.exit(1)
print(pathlib.Path(wheel.locate_file(headers[0])).resolve().parent)
